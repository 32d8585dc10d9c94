/* har_allreduce_enqueue where har's kernels cannot serve it (no CUDA in the
 * process, host buffers, the legacy default stream): it waits for the
 * stream (nothing to wait for here) and makes the blocking all-reduce.
 *   enqueue_host [--calls N] [--seed S]
 * Random sizes (1 to 20000 elements), int, int64, double, sum, max and min,
 * in place or not, on the world, a duplicate of it and halves of it; every
 * result checked exactly against a reference computed here. Then: every
 * call reached har ("seen") and none was counted "enqueued"; bad input
 * (MPI_OP_NULL, MPI_DATATYPE_NULL, MPI_BAND on doubles) gets the error
 * class that MPI_Allreduce gives for it. (Not a negative count: Debian's
 * MPICH crashes on it, har or not; tests/mpi/errors.sh compares that.) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    return (z ^ (z >> 27)) * 0x94d049bb133111ebull ^ (z >> 31);
}

static long long input(long long i, int r, int tag) { return (i * 7 + r * 3 + tag) % 11 - 5; }

static long long reduce(long long a, long long b, int op) { return op == 0 ? a + b : op == 1 ? (a > b ? a : b) : (a < b ? a : b); }

static int error_class(int rc)
{
    int cls = rc;
    MPI_Error_class(rc, &cls);
    return cls;
}

int main(int argc, char **argv)
{
    long calls = 600;
    uint64_t seed = 1;
    for (int a = 1; a + 1 < argc; a++) {
        if (!strcmp(argv[a], "--calls")) calls = atol(argv[++a]);
        else if (!strcmp(argv[a], "--seed")) seed = strtoull(argv[++a], NULL, 10);
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comms[3];
    int ncomms = 2;
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    if (size >= 4) MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &comms[ncomms++]);
    const MPI_Datatype types[3] = {MPI_INT, MPI_INT64_T, MPI_DOUBLE};
    const MPI_Op ops[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
    enum { MAX_N = 20000 };
    char *in = malloc(MAX_N * 8), *out = malloc(MAX_N * 8);
    int seen = har_counter_index("seen"), enq = har_counter_index("enqueued");
    unsigned long long before[64], after[64];
    har_counters(before, 64);
    uint64_t shared = seed;
    long bad = 0;
    for (long c = 0; c < calls; c++) {
        int k = (int)(next(&shared) % (uint64_t)ncomms), type = (int)(next(&shared) % 3), op = (int)(next(&shared) % 3);
        int n = 1 + (int)(next(&shared) % MAX_N), in_place = next(&shared) % 2 == 0, tag = (int)(c % 1000);
        int crank, csize;
        MPI_Comm_rank(comms[k], &crank);
        MPI_Comm_size(comms[k], &csize);
        char *src = in_place ? out : in;
        for (int i = 0; i < n; i++) {
            long long v = input(i, crank, tag);
            if (type == 0) ((int *)src)[i] = (int)v;
            else if (type == 1) ((int64_t *)src)[i] = v;
            else ((double *)src)[i] = (double)v;
        }
        int rc = har_allreduce_enqueue(in_place ? MPI_IN_PLACE : in, out, n, types[type], ops[op], comms[k], NULL);
        bad += rc != MPI_SUCCESS;
        for (int i = 0; rc == MPI_SUCCESS && i < n; i++) {
            long long want = input(i, 0, tag), got;
            for (int r = 1; r < csize; r++) want = reduce(want, input(i, r, tag), op);
            got = type == 0 ? ((int *)out)[i] : type == 1 ? ((int64_t *)out)[i] : (long long)((double *)out)[i];
            if (got != want) {
                bad++;
                break;
            }
        }
    }
    har_counters(after, 64);
    int counted = seen >= 0 && enq >= 0 && after[seen] - before[seen] == (unsigned long long)calls &&
                  after[enq] == before[enq];
    /* Bad input: the class MPI_Allreduce gives for it. */
    MPI_Comm_set_errhandler(comms[1], MPI_ERRORS_RETURN);
    int x = 1, y = 0, wrong_class = 0;
    double dx = 1, dy = 0;
    struct { void *in, *out; MPI_Datatype type; MPI_Op op; } cases[3] = {
        {&x, &y, MPI_INT, MPI_OP_NULL}, {&x, &y, MPI_DATATYPE_NULL, MPI_SUM}, {&dx, &dy, MPI_DOUBLE, MPI_BAND}};
    for (int t = 0; t < 3; t++) {
        int mine = har_allreduce_enqueue(cases[t].in, cases[t].out, 1, cases[t].type, cases[t].op, comms[1], NULL);
        int theirs = MPI_Allreduce(cases[t].in, cases[t].out, 1, cases[t].type, cases[t].op, comms[1]);
        if (mine == MPI_SUCCESS || error_class(mine) != error_class(theirs)) {
            wrong_class++;
            fprintf(stderr, "enqueue_host: rank %d: bad input %d: class %d, MPI_Allreduce's %d\n", rank, t,
                    error_class(mine), error_class(theirs));
        }
    }
    long totals[3] = {bad, !counted, wrong_class}, sums[3];
    MPI_Reduce(totals, sums, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);  /* not MPI_Allreduce: not under test */
    MPI_Bcast(sums, 3, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("enqueue_host: %d ranks, %ld calls on %d communicators (seed %llu): %ld wrong; every call seen by har, "
               "none enqueued: %s; bad input with MPI_Allreduce's class: %s\n",
               size, calls, ncomms, (unsigned long long)seed, sums[0], sums[1] ? "NO" : "yes", sums[2] ? "NO" : "yes");
    for (int k = 1; k < ncomms; k++) MPI_Comm_free(&comms[k]);
    free(in), free(out);
    MPI_Finalize();
    return sums[0] || sums[1] || sums[2];
}
