/* har_allreduce_enqueue as an application uses it: all-reduces queued on
 * its streams between its own kernels, the host never waiting for them.
 *   enqueue [--iters N] [--seed S] [--unordered] [--across] [--graph K [--replays N]] [--kill-at N]
 * Every call (sizes from a sequence all ranks share: 1 element to 64 KiB,
 * int, int64, float and double, sum, max and min, in place or not): a
 * kernel writes the input on the stream, the call is queued there, a
 * kernel checks the result against the reference computed on the GPU.
 * The stream changes among two non-blocking streams and the legacy
 * default stream (the new one waits for the old by an event, as an
 * application whose kernels share data across streams must; each stream
 * has buffers of its own); one call in 16 is
 * a blocking MPI_Allreduce; one rank in one call in 32 passes host
 * buffers (copied through the GPU on the stream); some ranks wait up to
 * 200 us on the host or queue a kernel of up to 50 us before a call. The
 * streams are waited for every 256 calls. It then checks that every
 * queued call (and captured one) was counted "enqueued" (served on the
 * kernels, none by the MPI) and prints the median and the 99th percentile of the time
 * har_allreduce_enqueue took on the host.
 * --graph K: then K calls (the same mix, on device buffers) captured into a
 * CUDA graph on one stream, each between a kernel that writes its input
 * and one that checks its result, after a copy that spoils the result
 * buffer first (so a replay that did not reduce is caught); the graph
 * replayed --replays times (default 1000) with random host delays, a
 * blocking all-reduce on device buffers after every 10th replay; every
 * replay's results checked, and the capture counted "captured" K times.
 * --unordered: no event when the stream changes (the streams share no
 * data): only har orders its calls across them, on the GPU, while the
 * stream left may still hold a spin kernel before its last call.
 * --across: the ranks are on several nodes (HAR_NODE_SIZE): every call is
 * har's blocking one once the stream's work is done (none counted
 * enqueued, none by the MPI), and a capture is refused (MPI_ERR_OTHER).
 * --kill-at N: local rank 1 dies after queuing call N; the others queue
 * on until a call fails (MPI_ERRORS_RETURN), which must come within 30 s,
 * and print what it said ("enqueue: rank R: failed ..."). */
#include <cuda_runtime.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "enqueue_kernels.h"
#include "gpu_test.h"
#include "har.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "enqueue: %s: %s\n", what, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define POOL 8
#define MAX_BYTES 65536

int main(int argc, char **argv)
{
    int ndev = gpus_or_skip("enqueue");
    long iters = 20000, kill_at = -1, graph = 0, replays = 1000;
    uint64_t seed = 1;
    int unordered = 0, across = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--unordered")) unordered = 1;
        else if (!strcmp(argv[a], "--across")) across = 1;
        else if (a + 1 == argc) break;
        else if (!strcmp(argv[a], "--iters")) iters = atol(argv[++a]);
        else if (!strcmp(argv[a], "--seed")) seed = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--kill-at")) kill_at = atol(argv[++a]);
        else if (!strcmp(argv[a], "--graph")) graph = atol(argv[++a]);
        else if (!strcmp(argv[a], "--replays")) replays = atol(argv[++a]);
    }
    MPI_Init(&argc, &argv);
    int rank, size, local;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    check(cudaSetDevice(local % ndev), "cudaSetDevice");
    /* The calls go on a communicator of their own: the test's own
     * exchanges (MPI_Reduce at the end) on the world's. */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (kill_at >= 0 || across) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    cudaStream_t streams[3];
    check(cudaStreamCreateWithFlags(&streams[0], cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&streams[1], cudaStreamNonBlocking), "cudaStreamCreate");
    streams[2] = 0;  /* the legacy default stream */
    cudaEvent_t switched;
    check(cudaEventCreateWithFlags(&switched, cudaEventDisableTiming), "cudaEventCreate");
    /* Buffers of each stream's own: the application orders its own
     * kernels across streams (or, with --unordered, shares nothing
     * between them). */
    char *ins[3][POOL], *outs[3][POOL];
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < POOL; j++) {
            check(cudaMalloc((void **)&ins[k][j], MAX_BYTES), "cudaMalloc");
            check(cudaMalloc((void **)&outs[k][j], MAX_BYTES), "cudaMalloc");
        }
    char *host_in = malloc(MAX_BYTES), *host_out = malloc(MAX_BYTES);
    unsigned long long *bad_dev, bad = 0;
    check(cudaMalloc((void **)&bad_dev, sizeof *bad_dev), "cudaMalloc");
    check(cudaMemset(bad_dev, 0, sizeof *bad_dev), "cudaMemset");
    const MPI_Datatype types[4] = {MPI_INT, MPI_INT64_T, MPI_FLOAT, MPI_DOUBLE};
    const int sizes[4] = {4, 8, 4, 8};
    const MPI_Op ops[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
    /* Two blocking calls on device buffers set the communicator up for
     * them (docs/CALLS.md): checked, not counted. */
    for (int i = 0; i < 2; i++) {
        check((cudaError_t)enq_fill(ins[0][0], 1, ENQ_INT, rank, i, 0), "fill");
        check(cudaDeviceSynchronize(), "sync");
        MPI_Allreduce(ins[0][0], outs[0][0], 1, MPI_INT, MPI_SUM, comm);
        check((cudaError_t)enq_verify(outs[0][0], 1, ENQ_INT, ENQ_SUM, size, i, bad_dev, 0), "verify");
    }
    check(cudaDeviceSynchronize(), "sync");
    int enq = har_counter_index("enqueued"), mpi = har_counter_index("mpi");
    unsigned long long before[64], after[64];
    har_counters(before, 64);
    uint64_t shared = seed, mine = seed ^ (uint64_t)(rank + 1) * 0x51ed27;
    long queued = 0, blocking = 0, host_calls = 0, timed = 0, failed_at = -1;
    double *took = malloc((size_t)iters * sizeof *took), deadline = 0;
    int rc = MPI_SUCCESS, st = 0;
    for (long it = 0; it < iters || kill_at >= 0; it++) {
        if (kill_at >= 0 && it == kill_at + 1) deadline = now() + 30;
        if (deadline && now() > deadline) {
            printf("enqueue: rank %d: no call failed within 30 s of a peer's death\n", rank);
            fflush(stdout);
            _exit(1);
        }
        int type = (int)(next(&shared) % 4), op = (int)(next(&shared) % 3), in_place = next(&shared) % 2 == 0;
        int n = 1 + (int)(next(&shared) % (uint64_t)(MAX_BYTES / sizes[type]));
        if (next(&shared) % 8 == 0) {
            /* Another stream: ordered after the last one, as an application
             * that reuses its buffers there must (har orders only its own
             * kernels across streams). */
            int was = st;
            st = (int)(next(&shared) % 3);
            if (!unordered) {
                check(cudaEventRecord(switched, streams[was]), "cudaEventRecord");
                check(cudaStreamWaitEvent(streams[st], switched, 0), "cudaStreamWaitEvent");
            }
        }
        int block = next(&shared) % 16 == 0, host_rank = next(&shared) % 32 == 0 ? (int)(next(&shared) % size) : -1;
        int tag = (int)(it % 1000), j = (int)(it % POOL);
        cudaStream_t s = streams[st];
        char *in = ins[st][j], *out = outs[st][j];
        uint64_t r = next(&mine);
        if (r % 8 == 0) check((cudaError_t)enq_spin(1e-9 * (double)((r >> 20) % 50000), s), "spin");
        if ((r >> 8) % 16 == 0) {
            struct timespec ts = {0, (long)((r >> 40) % 200000)};
            nanosleep(&ts, NULL);
        }
        if (host_rank == rank && !block) {
            /* Host buffers: written on the host once the stream is idle (an
             * earlier call may still use the ones it reads from). */
            check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
            char *hin = in_place ? host_out : host_in;
            for (int i = 0; i < n; i++) {
                long long v = enq_input(i, rank, tag);
                if (type == ENQ_INT) ((int *)hin)[i] = (int)v;
                else if (type == ENQ_LONG) ((long long *)hin)[i] = v;
                else if (type == ENQ_FLOAT) ((float *)hin)[i] = (float)v;
                else ((double *)hin)[i] = (double)v;
            }
            rc = har_allreduce_enqueue(in_place ? MPI_IN_PLACE : host_in, host_out, n, types[type], ops[op], comm, s);
            check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
            for (int i = 0; rc == MPI_SUCCESS && i < n; i++) {
                long long want = enq_expected(i, type, op, size, tag), got;
                if (type == ENQ_INT) got = ((int *)host_out)[i];
                else if (type == ENQ_LONG) got = ((long long *)host_out)[i];
                else if (type == ENQ_FLOAT) got = (long long)((float *)host_out)[i];
                else got = (long long)((double *)host_out)[i];
                if (got != want) { bad++; break; }
            }
            queued++, host_calls++;
        } else {
            check((cudaError_t)enq_fill(in_place ? out : in, n, type, rank, tag, s), "fill");
            if (block) {
                check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
                rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, n, types[type], ops[op], comm);
                blocking++;
            } else {
                double t0 = now();
                rc = har_allreduce_enqueue(in_place ? MPI_IN_PLACE : in, out, n, types[type], ops[op], comm, s);
                if (timed < iters) took[timed++] = now() - t0;
                queued++;
            }
            if (rc == MPI_SUCCESS) check((cudaError_t)enq_verify(out, n, type, op, size, tag, bad_dev, s), "verify");
        }
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            printf("enqueue: rank %d: failed at call %ld, %.2f s after the peer's death: %s\n", rank, it,
                   deadline ? now() - (deadline - 30) : 0.0, msg);
            failed_at = it;
            break;
        }
        if (kill_at >= 0 && it == kill_at && local == 1) {
            fflush(stdout);
            kill(getpid(), SIGKILL);
        }
        if (it % 256 == 255 || it + 1 == iters)
            for (int k = 0; k < 3; k++) check(cudaStreamSynchronize(streams[k]), "cudaStreamSynchronize");
    }
    if (kill_at >= 0) {
        /* The streams must end (the stopped kernels), and nothing waits for the dead peer. */
        for (int k = 0; k < 3; k++) check(cudaStreamSynchronize(streams[k]), "cudaStreamSynchronize");
        printf("enqueue: rank %d: streams ended\n", rank);
        fflush(stdout);
        _exit(failed_at >= 0 ? 0 : 1);
    }
    /* A graph of `graph` calls, replayed. */
    long captured = 0, graph_blocking = 0;
    int refused = 0;
    int cap = har_counter_index("captured");
    unsigned long long cap_before[64], cap_after[64];
    har_counters(cap_before, 64);
    if (graph > 0) {
        if (graph > POOL) graph = POOL;  /* each call its own buffers: the graph's calls run in turn, replays too */
        cudaStream_t s = streams[0];
        cudaGraph_t g;
        cudaGraphExec_t exec;
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
        for (long k = 0; k < graph; k++) {
            int type = (int)(next(&shared) % 4), op = (int)(next(&shared) % 3), in_place = next(&shared) % 2 == 0;
            int n = 1 + (int)(next(&shared) % (uint64_t)(MAX_BYTES / sizes[type])), tag = (int)(500 + k);
            char *in = ins[0][k], *out = outs[0][k];
            check(cudaMemsetAsync(out, 0x7f, (size_t)n * sizes[type], s), "cudaMemsetAsync");
            check((cudaError_t)enq_fill(in_place ? out : in, n, type, rank, tag, s), "fill");
            rc = har_allreduce_enqueue(in_place ? MPI_IN_PLACE : in, out, n, types[type], ops[op], comm, s);
            if (rc != MPI_SUCCESS) {
                if (!across || rc != MPI_ERR_OTHER) printf("enqueue: rank %d: har_allreduce_enqueue refused a capture\n", rank);
                refused = rc == MPI_ERR_OTHER;
                break;
            }
            check((cudaError_t)enq_verify(out, n, type, op, size, tag, bad_dev, s), "verify");
            captured++;
        }
        check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture");
        check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
        for (long r = 0; r < replays && captured == graph; r++) {
            uint64_t x = next(&mine);
            if (x % 8 == 0) {
                struct timespec ts = {0, (long)((x >> 40) % 100000)};
                nanosleep(&ts, NULL);
            }
            check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
            if (r % 10 == 9) {
                /* A blocking call between replays, on the calls' other push area. */
                check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
                check((cudaError_t)enq_fill(ins[0][0], 100, ENQ_INT, rank, 7, 0), "fill");
                check(cudaStreamSynchronize(0), "cudaStreamSynchronize");
                if (MPI_Allreduce(ins[0][0], outs[0][0], 100, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS) bad++;
                check((cudaError_t)enq_verify(outs[0][0], 100, ENQ_INT, ENQ_SUM, size, 7, bad_dev, 0), "verify");
                check(cudaStreamSynchronize(0), "cudaStreamSynchronize");  /* before the next replay spoils outs[0] */
                graph_blocking++;
            }
        }
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(g);
    }
    har_counters(cap_after, 64);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    unsigned long long bad_gpu = 0;
    check(cudaMemcpy(&bad_gpu, bad_dev, sizeof bad_gpu, cudaMemcpyDeviceToHost), "cudaMemcpy");
    har_counters(after, 64);
    long enqueued = enq < 0 ? -1 : (long)(after[enq] - before[enq]), by_mpi = mpi < 0 ? -1 : (long)(after[mpi] - before[mpi]);
    qsort(took, (size_t)timed, sizeof *took, cmp_double);
    long graph_counted = cap < 0 ? -1 : (long)(cap_after[cap] - cap_before[cap]);
    long totals[3] = {(long)(bad + bad_gpu),
                      (across ? enqueued == 0 && by_mpi == 0 && captured == 0 && (graph == 0 || refused)
                              : enqueued == queued + captured && by_mpi == 0 && captured == graph && graph_counted == graph)
                          ? 0 : 1,
                      0}, sums[3];
    MPI_Reduce(totals, sums, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);  /* not MPI_Allreduce: not under test */
    MPI_Bcast(sums, 3, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("enqueue: %d ranks, %ld calls each (seed %llu%s): %ld queued (%ld on host buffers), %ld blocking; %ld wrong "
               "results; %s: %s (rank 0: %ld of %ld enqueued, mpi %ld); "
               "host time of a queued call, rank 0: median %.2f us, 99th percentile %.2f us; a graph of %ld captured calls "
               "(counted %ld) replayed %ld times, %ld blocking calls between\n",
               size, iters, (unsigned long long)seed, unordered ? ", streams unordered" : "", queued, host_calls, blocking, sums[0],
               across ? "every call served by har's blocking path, none queued, none by the MPI, the capture refused"
                      : "every queued and captured call counted enqueued and none by the MPI",
               sums[1] ? "NO" : "yes",
               enqueued, queued + captured, by_mpi, timed ? 1e6 * took[timed / 2] : 0, timed ? 1e6 * took[timed * 99 / 100] : 0,
               captured, graph_counted, graph > 0 && captured == graph ? replays : 0, graph_blocking);
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < POOL; j++) cudaFree(ins[k][j]), cudaFree(outs[k][j]);
    cudaFree(bad_dev);
    cudaStreamDestroy(streams[0]);
    cudaStreamDestroy(streams[1]);
    free(host_in), free(host_out), free(took);
    MPI_Comm_free(&comm);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return sums[0] || sums[1];
}
