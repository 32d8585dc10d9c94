/* Memory-ordering stress on device buffers: many back-to-back all-reduces of
 * random sizes, random delays before some ranks' calls, every result
 * checked exactly (small integers in floats, so sums are exact).
 *   stress [--iters N] [--seed S] [--expect PATH]... [--refuse PATH]... [--some PATH] [--host-first] [--hog SECONDS]
 *          [--small | --medium | --large] [--late-input] [--nonblocking K]
 *          [--host-buffers odd|all]
 * --expect PATH: har's counter of PATH (or of a call, "iallreduce") grew by
 * at least the calls made; --refuse PATH: it did not grow; --some PATH: it
 * grew on every rank (a path taken by some calls only: "launcher", whose
 * thread sleeps through the longer delays), and how much is printed.
 * --small: every call up to 4096 floats (16 KiB), the push kernels' sizes;
 * --medium: every call from 64 KiB + 4 bytes to 1 MiB, barrier kernels
 * that go ahead of the arrival (HAR_DEVICE_AHEAD_MAX); --large: every call
 * from 1 MiB + 4 bytes to 8 MiB, past HAR_DEVICE_AHEAD_MAX (blocking calls
 * wait at the arrival; non-blocking ones go ahead, to HAR_DEVICE_START_MAX);
 * else one call in 8 up to 1 MiB.
 * --host-first: a host all-reduce on the world before the GPU is picked, and
 * one device all-reduce not counted (the node learns of CUDA during it).
 * --hog S: at the first call and half-way, rank 0 starts a kernel of its own
 * that holds half the GPU's multiprocessors for S seconds (tests/gpu/hog.cu),
 * as an application's work on another stream can: the calls meanwhile must
 * wait for it and then finish, not hang.
 * --late-input: in one call in 4 (each rank its own), the input is still
 * being written by a kernel on the legacy default stream that waits 20 us
 * first, when MPI_Allreduce is called: har must read it after that kernel.
 * --nonblocking K: MPI_Iallreduce instead, in batches of 1 to K in flight
 * (each on its own buffer; the batch sizes shared by every rank), random
 * delays before some posts and before the completion, completed by a
 * completion call each rank picks at random (MPI_Waitall, MPI_Wait in a
 * random order, MPI_Testany, MPI_Waitsome or MPI_Testall). With
 * --late-input, a started call must wait for the legacy stream's kernel
 * too.
 * --host-buffers odd: odd ranks' buffers are host memory (pageable): they
 * join the even ranks' kernels on copies in GPU memory; all: every rank's
 * (after the first calls, which set the communicator up for device
 * buffers); not with --late-input or --hog.
 *   stress --probe   exit 0 if a GPU is visible and this process can use it
 *                    (a context, an allocation: a broken MPS server fails
 *                    here), 77 if none is visible (1 if HAR_TEST_REQUIRE_GPU=1) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpu_test.h"
#include "har.h"
#include "hog.h"

int main(int argc, char **argv)
{
    int ndev = gpus_or_skip("stress");
    if (argc > 1 && !strcmp(argv[1], "--probe")) {
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, 1 << 20);
        if (e == cudaSuccess) e = cudaMemset(p, 0, 1 << 20);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) fprintf(stderr, "stress: the GPU is visible but unusable: %s\n", cudaGetErrorString(e));
        return e == cudaSuccess ? 0 : 1;
    }
    long iters = 100000;
    uint64_t seed = 1;
    int expect[4], nexpect = 0, refuse[4], nrefuse = 0, some = -2, host_first = 0, small = 0, medium = 0, large = 0,
        late_input = 0, batch_max = 1, nonblocking = 0, host_odd = 0, host_all = 0;
    double hog = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--host-first")) host_first = 1;
        else if (!strcmp(argv[a], "--small")) small = 1;
        else if (!strcmp(argv[a], "--medium")) medium = 1;
        else if (!strcmp(argv[a], "--large")) large = 1;
        else if (!strcmp(argv[a], "--late-input")) late_input = 1;
        else if (a + 1 < argc && !strcmp(argv[a], "--hog")) hog = atof(argv[++a]);
        else if (a + 1 < argc && !strcmp(argv[a], "--nonblocking")) nonblocking = 1, batch_max = atoi(argv[++a]);
        else if (a + 1 < argc && !strcmp(argv[a], "--iters")) iters = atol(argv[++a]);
        else if (a + 1 < argc && !strcmp(argv[a], "--host-buffers")) {
            host_odd = !strcmp(argv[++a], "odd"), host_all = !strcmp(argv[a], "all");
            if (!host_odd && !host_all) {
                fprintf(stderr, "stress: --host-buffers takes odd or all, not %s\n", argv[a]);
                return 2;
            }
        }
        else if (a + 1 < argc && !strcmp(argv[a], "--seed")) seed = strtoull(argv[++a], NULL, 10);
        else if (a + 1 < argc && !strcmp(argv[a], "--expect") && nexpect < 4)
            expect[nexpect++] = har_counter_index(argv[++a]);
        else if (a + 1 < argc && !strcmp(argv[a], "--refuse") && nrefuse < 4)
            refuse[nrefuse++] = har_counter_index(argv[++a]);
        else if (a + 1 < argc && !strcmp(argv[a], "--some"))
            some = har_counter_index(argv[++a]);
    }
    MPI_Init(&argc, &argv);
    int rank, size, local;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    if (host_first) {
        int one = 1;
        MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    cudaSetDevice(local % ndev);
    const int max_n = large ? 1 << 21 : 1 << 18, min_n = large ? (1 << 18) + 1 : medium ? 16385 : 1;
    enum { MAX_BATCH = 8 };
    if (batch_max < 1 || batch_max > MAX_BATCH ||
        ((host_odd || host_all) && (late_input || hog > 0))) {
        fprintf(stderr, "stress: --nonblocking takes 1 to %d; --host-buffers not with --late-input or --hog\n", MAX_BATCH);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int on_host = host_all || (host_odd && rank % 2);
    float *host = malloc(max_n * sizeof *host), *devs[MAX_BATCH] = {NULL}, *hosts[MAX_BATCH] = {NULL}, *early = NULL;
    for (int j = 0; j < batch_max; j++) {
        if (cudaMalloc((void **)&devs[j], max_n * sizeof *devs[j]) != cudaSuccess) devs[0] = NULL;
        if (on_host && !(hosts[j] = malloc(max_n * sizeof *hosts[j]))) devs[0] = NULL;
    }
    if (!devs[0] || cudaMalloc((void **)&early, max_n * sizeof *early) != cudaSuccess) {
        fprintf(stderr, "stress: rank %d: cudaMalloc failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* The timed calls' buffers; the set-up calls below use devs[0] on every rank. */
    float *bufs[MAX_BATCH];
    for (int j = 0; j < batch_max; j++) bufs[j] = on_host ? hosts[j] : devs[j];
    float *dev = devs[0];
    uint64_t shared = seed, mine = seed ^ (uint64_t)(rank + 1) * 0x51ed27;
    long bad = 0, late_calls = 0;
    /* Calls made here, checked, not counted: a communicator's first device
     * call surveys the node at an arrival, and only later ones may go ahead
     * of it; with --host-first, one more before them, the call in which the
     * node first sees CUDA, which still goes by the host segment
     * (docs/CALLS.md, "Arrival"). */
    for (int i = 0; i < 2 + host_first; i++) {
        float one = 1;
        cudaMemcpy(dev, &one, sizeof one, cudaMemcpyDefault);
        MPI_Allreduce(MPI_IN_PLACE, dev, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        cudaMemcpy(&one, dev, sizeof one, cudaMemcpyDefault);
        bad += one != (float)size;
    }
    unsigned long long before[64], after[64];
    har_counters(before, 64);
    for (long it = 0; it < iters;) {
        /* Sizes and batches from a sequence every rank shares; delays and
         * completion calls from its own. */
        int batch = batch_max > 1 ? 1 + (int)(next(&shared) % (uint64_t)batch_max) : 1, ns[MAX_BATCH], tags[MAX_BATCH];
        if (batch > iters - it) batch = (int)(iters - it);
        MPI_Request reqs[MAX_BATCH];
        for (int j = 0; j < batch; j++) {
            int n = ns[j] =
                medium || large ? min_n + (int)(next(&shared) % (uint64_t)(max_n - min_n + 1))
                                : 1 + (int)(next(&shared) % (next(&shared) % 8 == 0 && !small ? max_n : 4096));
            int tag = tags[j] = (int)((it + j) % 1000);
            dev = bufs[j];
            if (hog > 0 && rank == 0 && (it + j == 0 || it + j == iters / 2) && hog_start(0.5, hog) < 0) {
                fprintf(stderr, "stress: the hog kernel could not start\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            for (int i = 0; i < n; i++) host[i] = (float)((i + rank + tag) % 7);
            uint64_t r = next(&mine);
            if (late_input && (r >> 8) % 4 == 0) {
                cudaMemcpy(early, host, (size_t)n * sizeof *host, cudaMemcpyHostToDevice);
                if (late_copy_start(dev, early, (size_t)n * sizeof *host, 20e-6) < 0) {
                    fprintf(stderr, "stress: the late-input kernel could not start\n");
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                late_calls++;
            } else {
                cudaMemcpy(dev, host, (size_t)n * sizeof *host, cudaMemcpyDefault);
            }
            if (r % 16 == 0) {
                struct timespec ts = {0, (long)(r >> 40) % 200000};  /* up to 200 us late */
                nanosleep(&ts, NULL);
            }
            if (nonblocking) MPI_Iallreduce(MPI_IN_PLACE, dev, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &reqs[j]);
            else MPI_Allreduce(MPI_IN_PLACE, dev, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        if (nonblocking) {
            uint64_t r = next(&mine);
            if (r % 4 == 0) {
                struct timespec ts = {0, (long)(r >> 40) % 100000};  /* up to 100 us before completing */
                nanosleep(&ts, NULL);
            }
            int flag = 0, index, out, idx[MAX_BATCH], order[MAX_BATCH];
            switch ((r >> 8) % 5) {
            case 0: MPI_Waitall(batch, reqs, MPI_STATUSES_IGNORE); break;
            case 1:
                for (int j = 0; j < batch; j++) order[j] = j;
                for (int j = batch - 1; j > 0; j--) {
                    int k = (int)(next(&mine) % (uint64_t)(j + 1)), t = order[j];
                    order[j] = order[k];
                    order[k] = t;
                }
                for (int j = 0; j < batch; j++) MPI_Wait(&reqs[order[j]], MPI_STATUS_IGNORE);
                break;
            case 2:
                for (;;) {
                    MPI_Testany(batch, reqs, &index, &flag, MPI_STATUS_IGNORE);
                    if (flag && index == MPI_UNDEFINED) break;
                }
                break;
            case 3:
                for (out = 0; out != MPI_UNDEFINED;) MPI_Waitsome(batch, reqs, &out, idx, MPI_STATUSES_IGNORE);
                break;
            default:
                while (!flag) MPI_Testall(batch, reqs, &flag, MPI_STATUSES_IGNORE);
            }
            for (int j = 0; j < batch; j++)
                if (reqs[j] != MPI_REQUEST_NULL) bad++;  /* a completion call left it */
        }
        for (int j = 0; j < batch; j++) {
            cudaMemcpy(host, bufs[j], (size_t)ns[j] * sizeof *host, cudaMemcpyDefault);
            for (int i = 0; i < ns[j]; i++) {
                float want = 0;
                for (int q = 0; q < size; q++) want += (float)((i + q + tags[j]) % 7);
                if (host[i] != want) { bad++; break; }
            }
        }
        it += batch;
    }
    har_counters(after, 64);
    long served = iters;  /* calls that took every expected path */
    for (int k = 0; k < nexpect; k++)
        if (expect[k] < 0 || (long)(after[expect[k]] - before[expect[k]]) < served)
            served = expect[k] < 0 ? 0 : (long)(after[expect[k]] - before[expect[k]]);
    for (int k = 0; k < nrefuse; k++)
        if (refuse[k] < 0 || after[refuse[k]] != before[refuse[k]]) served = 0;
    long grew = some >= 0 ? (long)(after[some] - before[some]) : 0;
    if (some != -2 && grew == 0) served = 0;
    long totals[4] = {bad, served == iters ? 0 : 1, late_calls, grew}, sums[4];
    MPI_Reduce(totals, sums, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);  /* not MPI_Allreduce: not under test */
    MPI_Bcast(sums, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("stress: %d ranks, %ld calls each (seed %llu): %ld wrong results, expected paths on every call: %s; "
               "%ld calls with late input (all ranks)",
               size, iters, (unsigned long long)seed, sums[0], sums[1] ? "NO" : "yes", sums[2]);
        if (some != -2) printf("; %ld calls on the --some path (all ranks)", sums[3]);
        printf("\n");
    }
    for (int j = 0; j < batch_max; j++) {
        cudaFree(devs[j]);
        free(hosts[j]);
    }
    cudaFree(early);
    free(host);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return sums[0] || sums[1];
}
