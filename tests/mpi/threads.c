/* MPI_THREAD_MULTIPLE: threads run all-reduces on their own communicators at
 * once, first use (har's collective set-up) included; every result checked. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "har.h"

#define THREADS 4
#define CALLS 200

static MPI_Comm comms[THREADS];
static int failures[THREADS];

static void *worker(void *arg)
{
    int t = (int)(long)arg, rank, size;
    MPI_Comm_rank(comms[t], &rank);
    MPI_Comm_size(comms[t], &size);
    static __thread long v[70000];
    for (int c = 0; c < CALLS; c++) {
        int n = 1 + (c * 7919 + t * 104729) % 70000;  /* same on every rank */
        for (int i = 0; i < n; i++) v[i] = (long)i * (rank + 1) + c + t;
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_LONG, MPI_SUM, comms[t]);
        for (int i = 0; i < n; i++) {
            long expect = (long)i * size * (size + 1) / 2 + (long)size * (c + t);
            if (v[i] != expect) { failures[t]++; break; }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("threads: the MPI does not provide MPI_THREAD_MULTIPLE; skipped\n");
        MPI_Finalize();
        return 77;
    }
    for (int t = 0; t < THREADS; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    int bad = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        bad += failures[t];
        MPI_Comm_free(&comms[t]);
    }
    unsigned long long counts[64];
    har_counters(counts, 64);
    unsigned long long host = counts[har_counter_index("host_segment")];
    int served_all = host == THREADS * CALLS;
    printf("threads: rank %d: %d threads x %d calls, %d wrong, host_segment %llu of %d\n", rank, THREADS,
           CALLS, bad, host, THREADS * CALLS);
    MPI_Finalize();
    return bad || !served_all;
}
