/* Bytes each rank sends between (pretend) nodes in one all-reduce, counted
 * by the p2pcount shim below har, N nodes: through the ring at most
 * 2(N-1)/N of its shard plus N*128 bytes; through recursive doubling at
 * most one shard per step (log2 of the largest power of two up to N, one
 * more where N is none) plus 128 bytes per message. Each call must take
 * the transport the README's rule gives: HAR_INTER's, else doubling up to
 * 64 KiB. With HAR_RING_MESSAGE unset, no message is larger than its
 * default (16 KiB under MPICH, 60 KiB under Open MPI) and a header. Run
 * with HAR_NODE_SIZE and the shim in LD_PRELOAD. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"
#include "plan/plan.h"  /* HAR_RING_MESSAGE_AUTO: the default message size */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsigned long long (*bytes_sent)(void) = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "p2pcount_bytes");
    unsigned long long (*take_largest)(void) =
        (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "p2pcount_take_largest");
    /* a header is under 256 bytes */
    const double most = getenv("HAR_RING_MESSAGE") || getenv("HAR_RING_SEGMENT") ? -1 : HAR_RING_MESSAGE_AUTO + 256.0;
    const char *ns = getenv("HAR_NODE_SIZE");
    int L = ns ? atoi(ns) : 0;
    if (!bytes_sent || !take_largest || L <= 0 || size % L) {
        if (rank == 0) fprintf(stderr, "inter_bytes: needs the p2pcount shim and HAR_NODE_SIZE dividing %d\n", size);
        MPI_Finalize();
        return 2;
    }
    int nodes = size / L, fail = 0, pow2 = 1, steps = 0;
    while (pow2 * 2 <= nodes) pow2 *= 2, steps++;
    const char *inter = getenv("HAR_INTER");
    const int counts[] = {1, 1000, 16000, 65537, 200003};  /* 16000: doubling's largest kind; the last spans several chunks */
    for (int k = 0; k < 4; k++) {
        int n = counts[k];
        float *v = malloc((size_t)n * sizeof *v);
        for (int i = 0; i < n; i++) v[i] = (float)(i % 13);
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  /* warm: set-up traffic */
        unsigned long long before = bytes_sent(), paths_before[64], paths[64];
        har_counters(paths_before, 64);
        take_largest();
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        unsigned long long sent = bytes_sent() - before, largest = take_largest();
        har_counters(paths, 64);
        /* Largest shard: the vector's 64-byte units split over L ranks. */
        double units = (double)((size_t)n * sizeof(float) + 63) / 64;
        double shard = (double)((long long)(units + L - 1) / L) * 64;
        int doubling = inter && strcmp(inter, "auto") ? !strcmp(inter, "doubling") : n * sizeof(float) <= 65536;
        double bound = doubling ? (steps + (nodes > pow2)) * shard + 128.0 * (steps + 2)
                                : 2.0 * (nodes - 1) / nodes * shard + 128.0 * nodes;
        const char *want = doubling ? "doubling" : "ring";
        int at = har_counter_index(want), took = paths[at] > paths_before[at];
        printf("inter_bytes: rank %d count %d: sent %llu bytes, bound %.0f, largest message %llu, at most %.0f, %s %s\n",
               rank, n, sent, bound, largest, most, want, took ? "yes" : "NO");
        fail |= sent > bound || !took || (most > 0 && largest > most);
        free(v);
    }
    MPI_Finalize();
    return fail;
}
