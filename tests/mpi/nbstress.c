/* Stress of har's started calls on host buffers: MPI_Iallreduce in batches
 * of 1 to 8 in flight over two communicators, random sizes (one in 8 above
 * a megabyte), some in place, random delays before posts and before the
 * completion, each batch completed by a call each rank picks at random
 * (MPI_Waitall, MPI_Wait in a random order, loops of MPI_Testany,
 * MPI_Waitsome or MPI_Testall), and at the end one call whose
 * communicator is freed before its wait; every element of every result checked
 * exactly (integer sums). What every rank must agree on (sizes, batches,
 * communicators) comes from a generator seeded alike; delays and
 * completion calls from one seeded per rank.
 *   nbstress [--calls N] [--seed S] [--expect PATH] [--mixed] [--thread-multiple] [--disconnect] [--pmpi-free]
 * --expect PATH: har's counter of PATH grew by every call made.
 * --mixed: each batch also makes a blocking all-reduce on the world that
 * har serves, even ranks before completing the batch and odd ranks after
 * (its waits must move the started calls that the peers wait on), and
 * then, every rank after completing the batch, one with a user op (the
 * MPI's: blocked in the MPI a rank moves nothing of har's, so no peer may
 * wait on its started calls meanwhile).
 * --thread-multiple: MPI_THREAD_MULTIPLE (har's own thread then moves the
 * started calls), and a second thread of each rank makes N/4 blocking
 * all-reduces of random sizes on a communicator of its own meanwhile,
 * each checked.
 * --disconnect: the last call's communicator released by
 * MPI_Comm_disconnect rather than MPI_Comm_free.
 * --pmpi-free: released by PMPI_Comm_free (or PMPI_Comm_disconnect),
 * bypassing har's wrapper (requests.sh: har then ends the call inside the
 * MPI's free, and says so under HAR_VERBOSE=2). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "har.h"

#define MAX_BATCH 8
#define LARGE 300001

static uint64_t shared_state, own_state;
static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static unsigned below(uint64_t *s, unsigned n) { return (unsigned)(next(s) % n); }

static long long counter(const char *name)
{
    unsigned long long v[64];
    int n = har_counters(v, 64), i = har_counter_index(name);
    return i >= 0 && i < n ? (long long)v[i] : -1;
}

static int value(int rank, size_t i, long call) { return (rank + 1) * (int)(i % 7 + 1) + (int)(call % 5); }

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((const int *)in)[i];
}

static int mixed;
static MPI_Op user_op;
static long wrong;

/* --mixed: a blocking call, har's (MPI_SUM) or the MPI's (user_op), checked. */
static void blocking_call(int rank, int size, MPI_Op op)
{
    int v[2] = {rank + 1, rank + 1}, want = size * (size + 1) / 2;
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, op, MPI_COMM_WORLD);
    if (v[1] != want && wrong++ < 5)
        fprintf(stderr, "nbstress: rank %d: a blocking call gave %d, not %d\n", rank, v[1], want);
}

/* --thread-multiple: the second thread's blocking calls, on its own
 * communicator (sizes from a generator seeded alike on every rank). */
typedef struct { MPI_Comm comm; long calls; unsigned long long seed; int rank, size; long wrong; } side_t;

static void *side_calls(void *arg)
{
    side_t *a = arg;
    uint64_t st = a->seed * 6364136223846793005ull + 11;
    int *v = malloc(LARGE * sizeof(int));
    for (long k = 0; k < a->calls; k++) {
        size_t n = 1 + below(&st, k % 16 == 0 ? LARGE : 3000);
        for (size_t i = 0; i < n; i++) v[i] = value(a->rank, i, k);
        MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_INT, MPI_SUM, a->comm);
        for (size_t i = 0; i < n; i++) {
            int want = 0;
            for (int r = 0; r < a->size; r++) want += value(r, i, k);
            if (v[i] != want) {
                if (a->wrong++ < 5)
                    fprintf(stderr, "nbstress: rank %d: the second thread's call %ld, element %zu: %d, not %d\n",
                            a->rank, k, i, v[i], want);
                break;
            }
        }
    }
    free(v);
    return NULL;
}

static void delay(void)
{
    if (below(&own_state, 4) == 0) usleep(below(&own_state, 50));
}

int main(int argc, char **argv)
{
    long calls = 3000;
    unsigned long long seed = 1;
    const char *expect = NULL;
    int threads = 0, disconnect = 0, pmpi_free = 0, provided;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--calls") && a + 1 < argc) calls = atol(argv[++a]);
        else if (!strcmp(argv[a], "--seed") && a + 1 < argc) seed = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--expect") && a + 1 < argc) expect = argv[++a];
        else if (!strcmp(argv[a], "--mixed")) mixed = 1;
        else if (!strcmp(argv[a], "--thread-multiple")) threads = 1;
        else if (!strcmp(argv[a], "--disconnect")) disconnect = 1;
        else if (!strcmp(argv[a], "--pmpi-free")) pmpi_free = 1;
        else {
            fprintf(stderr, "usage: nbstress [--calls N] [--seed S] [--expect PATH] [--mixed] [--thread-multiple] "
                            "[--disconnect] [--pmpi-free]\n");
            return 2;
        }
    }
    MPI_Init_thread(&argc, &argv, threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (threads && provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("nbstress: the MPI does not provide MPI_THREAD_MULTIPLE; skipped\n");
        MPI_Finalize();
        return 77;
    }
    shared_state = seed * 2654435761u + 1;
    own_state = (seed + 7919u * (unsigned)(rank + 1)) * 40503u + 3;
    MPI_Comm comms[2] = {MPI_COMM_WORLD, MPI_COMM_NULL};
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    /* a blocking call on each sets it up: har serves its started calls from then on */
    for (int c = 0; c < 2; c++) {
        int one = 1;
        MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, comms[c]);
        if (one != size) {
            fprintf(stderr, "nbstress: rank %d: the set-up call gave %d\n", rank, one);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    long long before = expect ? counter(expect) : 0;
    side_t side = {MPI_COMM_NULL, calls / 4, seed, rank, size, 0};
    pthread_t side_thread;
    if (threads) {
        MPI_Comm_dup(MPI_COMM_WORLD, &side.comm);
        if (pthread_create(&side_thread, NULL, side_calls, &side) != 0) {
            fprintf(stderr, "nbstress: rank %d: no second thread\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    int *in[MAX_BATCH], *out[MAX_BATCH];
    for (int k = 0; k < MAX_BATCH; k++) {
        in[k] = malloc(LARGE * sizeof(int));
        out[k] = malloc(LARGE * sizeof(int));
    }
    MPI_Op_create(user_sum, 1, &user_op);
    long done = 0;
    while (done < calls) {
        int batch = 1 + (int)below(&shared_state, MAX_BATCH);
        if (batch > calls - done) batch = (int)(calls - done);
        MPI_Request req[MAX_BATCH];
        size_t count[MAX_BATCH];
        int inplace[MAX_BATCH];
        for (int k = 0; k < batch; k++) {
            long call = done + k;
            count[k] = below(&shared_state, 8) == 0 ? 250000 + below(&shared_state, LARGE - 250000)
                                                     : 1 + below(&shared_state, 2000);
            inplace[k] = below(&shared_state, 3) == 0;
            MPI_Comm comm = comms[below(&shared_state, 2)];
            int *src = inplace[k] ? out[k] : in[k];
            for (size_t i = 0; i < count[k]; i++) src[i] = value(rank, i, call);
            delay();
            MPI_Iallreduce(inplace[k] ? MPI_IN_PLACE : in[k], out[k], (int)count[k], MPI_INT, MPI_SUM, comm, &req[k]);
        }
        delay();
        if (mixed && rank % 2 == 0) blocking_call(rank, size, MPI_SUM);
        int flag = 0, index, outcount, idx[MAX_BATCH], order[MAX_BATCH];
        switch (below(&own_state, 5)) {
        case 0:
            MPI_Waitall(batch, req, MPI_STATUSES_IGNORE);
            break;
        case 1:
            for (int k = 0; k < batch; k++) order[k] = k;
            for (int k = batch - 1; k > 0; k--) {
                int j = (int)below(&own_state, (unsigned)k + 1), t = order[k];
                order[k] = order[j];
                order[j] = t;
            }
            for (int k = 0; k < batch; k++) MPI_Wait(&req[order[k]], MPI_STATUS_IGNORE);
            break;
        case 2:
            for (int left = batch; left > 0;) {
                MPI_Testany(batch, req, &index, &flag, MPI_STATUS_IGNORE);
                if (flag && index != MPI_UNDEFINED) left--;
            }
            break;
        case 3:
            for (int left = batch; left > 0;) {
                MPI_Waitsome(batch, req, &outcount, idx, MPI_STATUSES_IGNORE);
                if (outcount != MPI_UNDEFINED) left -= outcount;
            }
            break;
        default:
            while (!flag) MPI_Testall(batch, req, &flag, MPI_STATUSES_IGNORE);
            break;
        }
        if (mixed && rank % 2) blocking_call(rank, size, MPI_SUM);
        if (mixed) blocking_call(rank, size, user_op);
        for (int k = 0; k < batch; k++) {
            long call = done + k;
            for (size_t i = 0; i < count[k]; i++) {
                int want = (int)(i % 7 + 1) * size * (size + 1) / 2 + size * (int)(call % 5);
                if (out[k][i] != want) {
                    if (wrong++ < 5)
                        fprintf(stderr, "nbstress: rank %d: call %ld (count %zu%s) element %zu: %d, not %d\n", rank,
                                call, count[k], inplace[k] ? ", in place" : "", i, out[k][i], want);
                    break;
                }
            }
        }
        done += batch;
    }
    if (threads) {
        pthread_join(side_thread, NULL);
        MPI_Comm_free(&side.comm);
        wrong += side.wrong;
    }
    /* A call still running when its communicator is freed or disconnected
     * (allowed: the free waits for it, collectively) ends with its result. Rank 0 posts
     * it 0.1 s late, so that every other rank's is still running then. */
    MPI_Request last;
    int *v = out[0];
    for (int i = 0; i < 1000; i++) v[i] = rank + 1;
    if (rank == 0) usleep(100000);
    MPI_Iallreduce(MPI_IN_PLACE, v, 1000, MPI_INT, MPI_SUM, comms[1], &last);
    int (*release)(MPI_Comm *) = disconnect ? (pmpi_free ? PMPI_Comm_disconnect : MPI_Comm_disconnect)
                                            : (pmpi_free ? PMPI_Comm_free : MPI_Comm_free);
    release(&comms[1]);
    MPI_Wait(&last, MPI_STATUS_IGNORE);
    if (v[999] != size * (size + 1) / 2 && wrong++ == 0)
        fprintf(stderr, "nbstress: rank %d: the call before the communicator's release: %d, not %d\n", rank, v[999], size * (size + 1) / 2);
    calls++;
    long long by = expect ? counter(expect) - before : 0;
    if (expect && by != calls) {
        fprintf(stderr, "nbstress: rank %d: %lld of %ld calls counted %s\n", rank, by, calls, expect);
        wrong++;
    }
    long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("nbstress: %d ranks, %ld calls each, %s\n", size, calls, total ? "FAILED" : "ok");
    for (int k = 0; k < MAX_BATCH; k++) {
        free(in[k]);
        free(out[k]);
    }
    MPI_Op_free(&user_op);
    MPI_Finalize();
    return total != 0;
}
