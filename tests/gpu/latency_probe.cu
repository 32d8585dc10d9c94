// What the pieces of a small device all-reduce cost on this GPU, timed the
// way har-bench times har: every rank at once after a barrier, the maximum
// over ranks of each call, then the median. Not part of the suite: it tells
// which designs can go below the launch floor before one is built.
//
//   none         nothing (the timing's own cost and the barrier's skew)
//   shm          a host-only exchange: each rank raises its word in shared
//                memory and waits for every peer's (the skew of coupling)
//   floor        an empty kernel and cudaStreamSynchronize
//   launch_flag  an empty kernel that writes a flag to mapped host memory,
//                the host spinning on it
//   launch_xchg  one kernel per call that raises a word in every peer's
//                device memory and waits for all of them, then the flag
//   res_flag     one resident block per rank polling a word in mapped host
//                memory, answering with a flag (the round trip)
//   res_xchg     the same, with the exchange between the ranks' blocks
//   memop_xchg   a resident block polling device memory that the host
//                writes with cuStreamWriteValue32, with the exchange
//   floor_beside the floor again while the resident blocks idle
//   query_legacy cudaStreamQuery(cudaStreamLegacy) alone (how a resident
//                design learns that the application's work is done)
//   event_legacy the same learnt by an event recorded on that stream
//   res_query_xchg res_xchg after cudaStreamQuery(cudaStreamLegacy): a
//                resident design that keeps the legacy stream's order
//   xchg_4x512   launch_xchg with har's push grid (4 blocks of 512 threads)
//   push_BxT     har's own push kernel (src/engines/ipc_kernels.cu), float sum
//                of 4 B, B blocks of T threads, the host spinning on its
//                done flags: what har's launched call costs without har's
//                host steps
//   push_4x512_16k, _64k  the same at 16 and 64 KiB
//   har, har_16k, har_64k  MPI_Allreduce of 4 B, 16 and 64 KiB of device
//                memory, where PROBE_HAR is set (run with har preloaded)
//   floor_again  the floor once more: how far the machine drifted
//   push_*_stamp the push kernel noting the GPU's clock at its steps; then
//                where its time goes: the skew of the ranks' kernel starts,
//                the span from the first start to the last end, and each
//                step's longest over ranks (medians over calls)
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "engines/ipc_kernels.h"
#include "plan/shard.h"
#include <type_traits>
// har's kernels, for the push modes (their launchers left out).
namespace harkernels {
#define HAR_KERNELS_ONLY
#include "engines/ipc_kernels.cu"
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

static __device__ __forceinline__ unsigned ld_sys(const volatile unsigned *p)
{
    unsigned v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void st_sys(volatile unsigned *p, unsigned v)
{
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

struct Peers { unsigned *slot[16]; };  // slot[r]: rank r's words, one per (block, writer)

__global__ void empty() {}

__global__ void flag_kernel(volatile unsigned *done, unsigned seq)
{
    __threadfence_system();
    st_sys(done, seq);
}

// Thread t < n raises its word in rank t's slots, then waits for its own
// word from writer t.
static __device__ void exchange(Peers peers, int n, int me, unsigned seq)
{
    int t = threadIdx.x;
    if (t < n) {
        st_sys(peers.slot[t] + 16 * blockIdx.x + me, seq);
        const volatile unsigned *mine = peers.slot[me] + 16 * blockIdx.x + t;
        while (ld_sys(mine) != seq) {}
    }
    __syncthreads();
}

__global__ void xchg_kernel(Peers peers, int n, int me, volatile unsigned *done, unsigned seq)
{
    exchange(peers, n, me, seq);
    if (threadIdx.x == 0) { __threadfence_system(); st_sys(done, seq); }
}

// Resident: waits for post to hold the next number (STOP ends it), answers in done.
#define STOP 0xffffffffu
__global__ void res_kernel(const volatile unsigned *post, volatile unsigned *done, Peers peers, int n, int me,
                         int with_exchange)
{
    __shared__ unsigned seq;
    for (unsigned expect = 1;; expect++) {
        if (threadIdx.x == 0) {
            unsigned v;
            while ((v = ld_sys(post)) != expect && v != STOP) {}
            seq = v;
        }
        __syncthreads();
        if (seq == STOP) return;
        if (with_exchange) exchange(peers, n, me, seq);
        if (threadIdx.x == 0) { __threadfence_system(); st_sys(done, seq); }
        __syncthreads();
    }
}

static int rank, nranks;
static volatile unsigned *shm;  // nranks words, shared by the node
static unsigned *host_flag, *dev_flag;  // mapped host memory: done
static unsigned *host_post, *dev_post;  // mapped host memory: post
static unsigned *dev_post_d;            // device memory: post for memop
static Peers peers;
static cudaStream_t blocking, nonblocking, memop_stream;
static unsigned seq_shm, seq_flag;

static void spin(volatile unsigned *p, unsigned v) { while (*p != v) {} }

enum Mode { NONE, SHM, FLOOR, LAUNCH_FLAG, LAUNCH_XCHG, RES_FLAG, RES_XCHG, MEMOP_XCHG, FLOOR_BESIDE, QUERY_LEGACY,
            EVENT_LEGACY, RES_QUERY_XCHG, XCHG_4X512, PUSH_4X512, PUSH_4X128, PUSH_1X32, PUSH_4X512_16K, HAR,
            HAR_16K, FLOOR_AGAIN, PUSH_4X512_64K, HAR_64K, P1_STAMP, P4_STAMP, NMODES };
static const char *names[] = {"none", "shm", "floor", "launch_flag", "launch_xchg", "res_flag", "res_xchg",
                              "memop_xchg", "floor_beside", "query_legacy", "event_legacy", "res_query_xchg",
                              "xchg_4x512", "push_4x512", "push_4x128", "push_1x32", "push_4x512_16k", "har",
                              "har_16k", "floor_again", "push_4x512_64k", "har_64k", "push_1x32_stamp",
                              "push_4x512_stamp"};

// har's push kernels' state, laid out as src/engines/ipc_engine.c lays it out.
static char *push_seg[16];            // every rank's push area, as mapped here
static size_t push_parity;            // bytes per call parity
static const size_t push_region = 64 << 10;
static uint64_t *push_done, *push_done_d, *push_differs_d;
static int *push_abort_d;
static uint64_t push_seq;
static float *dev_in, *dev_out;       // 64 KiB each

static void spin64(volatile uint64_t *p, uint64_t v) { while (*p != v) {} }

static volatile uint64_t *stamps_h, *stamps_d;
static void push_call(int blocks, int threads, size_t n, bool stamp = false)
{
    har_push_args_t a;
    memset(&a, 0, sizeof a);
    uint64_t seq = ++push_seq;
    for (int r = 0; r < nranks; r++) {
        a.lines[r] = push_seg[r] + (seq & 1) * push_parity;
        a.data[r] = a.lines[r] + HAR_DEV_PUSH_LINES;
    }
    a.region = HAR_DEV_PUSH_REGION(push_region);
    a.in = (const char *)dev_in;
    a.out = (char *)dev_out;
    a.n = a.count = n;
    a.nranks = nranks;
    a.me = rank;
    a.dtype = HAR_DT_F32;
    a.op = HAR_OP_SUM;
    a.seq = seq;
    a.sig = 1;
    a.abort = push_abort_d;
    a.done = push_done_d;
    a.differs = push_differs_d;
    a.stamps = stamp ? stamps_d : nullptr;
    harkernels::push<float, HAR_OP_SUM><<<blocks, threads, 0, blocking>>>(a);
    for (int b = 0; b < blocks; b++) spin64(push_done + b, seq);
}

static unsigned res_seq;
static cudaEvent_t legacy_done;
static void one(Mode m)
{
    switch (m) {
    case NONE: break;
    case SHM: {
        unsigned s = ++seq_shm;
        shm[rank] = s;
        for (int r = 0; r < nranks; r++) spin(shm + r, s);
        break;
    }
    case FLOOR: case FLOOR_BESIDE:
        empty<<<1, 1, 0, blocking>>>();
        CK(cudaStreamSynchronize(blocking));
        break;
    case LAUNCH_FLAG: {
        unsigned s = ++seq_flag;
        flag_kernel<<<1, 1, 0, blocking>>>(dev_flag, s);
        spin(host_flag, s);
        break;
    }
    case LAUNCH_XCHG: {
        unsigned s = ++seq_flag;
        xchg_kernel<<<1, 32, 0, blocking>>>(peers, nranks, rank, dev_flag, s);
        spin(host_flag, s);
        break;
    }
    case RES_QUERY_XCHG: CK(cudaStreamQuery(cudaStreamLegacy)); /* fall through */
    case RES_FLAG: case RES_XCHG: {
        unsigned s = ++res_seq;
        *(volatile unsigned *)host_post = s;
        spin(host_flag, s);
        break;
    }
    case MEMOP_XCHG: {
        unsigned s = ++res_seq;
        CUresult r = cuStreamWriteValue32((CUstream)memop_stream, (CUdeviceptr)dev_post_d, s, 0);
        if (r != CUDA_SUCCESS) { fprintf(stderr, "cuStreamWriteValue32: %d\n", r); MPI_Abort(MPI_COMM_WORLD, 1); }
        spin(host_flag, s);
        break;
    }
    case QUERY_LEGACY: CK(cudaStreamQuery(cudaStreamLegacy)); break;
    case XCHG_4X512: {
        unsigned s = ++seq_flag;
        xchg_kernel<<<4, 512, 0, blocking>>>(peers, nranks, rank, dev_flag, s);
        spin(host_flag, s);
        break;
    }
    case PUSH_4X512: push_call(4, 512, 1); break;
    case PUSH_4X128: push_call(4, 128, 1); break;
    case PUSH_1X32: push_call(1, 32, 1); break;
    case PUSH_4X512_16K: push_call(4, 512, 4096); break;
    case PUSH_4X512_64K: push_call(4, 512, 16384); break;
    case HAR_64K: MPI_Allreduce(dev_in, dev_out, 16384, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case P1_STAMP: push_call(1, 32, 1, true); break;
    case P4_STAMP: push_call(4, 512, 1, true); break;
    case HAR: MPI_Allreduce(dev_in, dev_out, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case HAR_16K: MPI_Allreduce(dev_in, dev_out, 4096, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case FLOOR_AGAIN:
        empty<<<1, 1, 0, blocking>>>();
        CK(cudaStreamSynchronize(blocking));
        break;
    case EVENT_LEGACY: {
        CK(cudaEventRecord(legacy_done, cudaStreamLegacy));
        cudaError_t e;
        while ((e = cudaEventQuery(legacy_done)) == cudaErrorNotReady) {}
        CK(e);
        break;
    }
    default: break;
    }
}

static double run(Mode m, int iters)
{
    std::vector<double> t(iters);
    for (int i = -100; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        one(m);
        double dt = MPI_Wtime() - t0;
        if (i >= 0) t[i] = dt;
    }
    MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    std::sort(t.begin(), t.end());
    return t[iters / 2] * 1e6;
}

// A push mode with block 0's timestamps: medians over calls of the skew of
// the ranks' kernel starts, the span from the first start to the last
// block's end (before its final fence), and each phase's longest over ranks.
static void run_stamped(Mode m, int iters)
{
    const int K = 4;  // the kernel's steps: start, data pushed, headers seen, output written
    std::vector<uint64_t> st((size_t)iters * K);
    for (int i = -100; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        one(m);
        if (i >= 0) for (int k = 0; k < K; k++) st[(size_t)i * K + k] = stamps_h[k];
    }
    std::vector<uint64_t> all(rank == 0 ? st.size() * nranks : 1);
    MPI_Gather(st.data(), (int)st.size() * 8, MPI_BYTE, all.data(), (int)st.size() * 8, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0) return;
    const char *what[] = {"start skew", "span", "push", "headers", "reduce"};
    std::vector<double> v[2 + K - 1];
    for (int i = 0; i < iters; i++) {
        uint64_t lo = ~0ull, hi0 = 0, hi = 0;
        double ph[K - 1] = {0};
        for (int r = 0; r < nranks; r++) {
            const uint64_t *x = &all[((size_t)r * iters + i) * K];
            lo = std::min(lo, x[0]);
            hi0 = std::max(hi0, x[0]);
            hi = std::max(hi, x[K - 1]);
            for (int k = 0; k < K - 1; k++) ph[k] = std::max(ph[k], (double)(x[k + 1] - x[k]));
        }
        v[0].push_back((double)(hi0 - lo));
        v[1].push_back((double)(hi - lo));
        for (int k = 0; k < K - 1; k++) v[k + 2].push_back(ph[k]);
    }
    printf("  %s, ns, medians over calls (phases: the longest over ranks):", names[m]);
    for (int k = 0; k < 2 + K - 1; k++) {
        std::sort(v[k].begin(), v[k].end());
        printf(" %s %.0f%s", what[k], v[k][iters / 2], k < K ? "," : "\n");
    }
}

static void start_resident(const unsigned *post, int with_exchange, unsigned first_post)
{
    *(volatile unsigned *)host_flag = 0;
    *(volatile unsigned *)host_post = first_post;
    CK(cudaMemset(dev_post_d, 0, 64));
    res_seq = 0;
    // The peers' words hold older numbers: clear them before any block runs.
    CK(cudaMemset(peers.slot[rank], 0, 64 * sizeof(unsigned)));
    CK(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    res_kernel<<<1, 32, 0, nonblocking>>>(post, dev_flag, peers, nranks, rank, with_exchange);
    CK(cudaGetLastError());
}

static void stop_resident(unsigned *post_host, bool memop)
{
    if (memop) cuStreamWriteValue32((CUstream)memop_stream, (CUdeviceptr)dev_post_d, STOP, 0);
    else *(volatile unsigned *)post_host = STOP;
    CK(cudaStreamSynchronize(nonblocking));
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CK(cudaSetDevice(0));
    CK(cudaFree(0));

    MPI_Win win;
    unsigned *base;
    MPI_Win_allocate_shared(rank == 0 ? 64 * sizeof(unsigned) : 0, sizeof(unsigned), MPI_INFO_NULL, MPI_COMM_WORLD,
                            &base, &win);
    MPI_Aint sz;
    int du;
    MPI_Win_shared_query(win, 0, &sz, &du, &base);
    shm = base;
    if (rank == 0) memset(base, 0, 64 * sizeof(unsigned));
    MPI_Barrier(MPI_COMM_WORLD);

    CK(cudaHostAlloc(&host_flag, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&dev_flag, host_flag, 0));
    CK(cudaHostAlloc(&host_post, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&dev_post, host_post, 0));
    *host_flag = 0;
    *host_post = 0;
    CK(cudaMalloc(&dev_post_d, 64));
    CK(cudaMemset(dev_post_d, 0, 64));

    unsigned *mine;
    CK(cudaMalloc(&mine, 64 * sizeof(unsigned)));
    CK(cudaMemset(mine, 0, 64 * sizeof(unsigned)));
    cudaIpcMemHandle_t h, all[16];
    CK(cudaIpcGetMemHandle(&h, mine));
    MPI_Allgather(&h, sizeof h, MPI_BYTE, all, sizeof h, MPI_BYTE, MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) {
        if (r == rank) peers.slot[r] = mine;
        else CK(cudaIpcOpenMemHandle((void **)&peers.slot[r], all[r], cudaIpcMemLazyEnablePeerAccess));
    }
    CK(cudaStreamCreate(&blocking));
    CK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&memop_stream, cudaStreamNonBlocking));
    CK(cudaDeviceSynchronize());

    double med[NMODES] = {0};
    for (int m = NONE; m <= LAUNCH_XCHG; m++) med[m] = run((Mode)m, iters);
    // launch_xchg leaves the peers' words at seq_flag: the resident runs count from 1 again.
    start_resident(dev_post, 0, 0);
    med[RES_FLAG] = run(RES_FLAG, iters);
    stop_resident(host_post, false);
    start_resident(dev_post, 1, 0);
    med[RES_XCHG] = run(RES_XCHG, iters);
    med[RES_QUERY_XCHG] = run(RES_QUERY_XCHG, iters);
    stop_resident(host_post, false);
    start_resident(dev_post_d, 1, 0);
    med[MEMOP_XCHG] = run(MEMOP_XCHG, iters);
    stop_resident(nullptr, true);
    // Resident blocks that idle beside the floor's kernels: post never holds the next number.
    start_resident(dev_post, 0, 1u << 30);
    med[FLOOR_BESIDE] = run(FLOOR_BESIDE, iters);
    stop_resident(host_post, false);
    med[QUERY_LEGACY] = run(QUERY_LEGACY, iters);
    CK(cudaEventCreateWithFlags(&legacy_done, cudaEventDisableTiming));
    med[EVENT_LEGACY] = run(EVENT_LEGACY, iters);

    // The exchange kernel's words hold seq_flag again (as launch_xchg left them).
    med[XCHG_4X512] = run(XCHG_4X512, iters);
    push_parity = (HAR_DEV_PUSH_LINES + nranks * HAR_DEV_PUSH_REGION(push_region) + 4095) / 4096 * 4096;
    char *mine_push;
    CK(cudaMalloc(&mine_push, 2 * push_parity));
    CK(cudaMemset(mine_push, 0, 2 * push_parity));
    CK(cudaMalloc(&dev_in, 64 << 10));
    CK(cudaMalloc(&dev_out, 64 << 10));
    CK(cudaMemset(dev_in, 0, 64 << 10));
    CK(cudaHostAlloc(&push_done, 4096, cudaHostAllocMapped));
    memset(push_done, 0, 4096);
    CK(cudaHostGetDevicePointer((void **)&push_done_d, push_done, 0));
    push_differs_d = push_done_d + 64;
    push_abort_d = (int *)(push_done_d + 256);
    CK(cudaIpcGetMemHandle(&h, mine_push));
    MPI_Allgather(&h, sizeof h, MPI_BYTE, all, sizeof h, MPI_BYTE, MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) {
        if (r == rank) push_seg[r] = mine_push;
        else CK(cudaIpcOpenMemHandle((void **)&push_seg[r], all[r], cudaIpcMemLazyEnablePeerAccess));
    }
    CK(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    for (int m = PUSH_4X512; m <= PUSH_4X512_16K; m++) med[m] = run((Mode)m, iters);
    med[PUSH_4X512_64K] = run(PUSH_4X512_64K, iters);
    CK(cudaHostAlloc((void **)&stamps_h, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&stamps_d, (void *)stamps_h, 0));
    med[P1_STAMP] = run(P1_STAMP, iters);  // what the stamps themselves cost
    med[P4_STAMP] = run(P4_STAMP, iters);
    if (getenv("PROBE_HAR")) {
        med[HAR] = run(HAR, iters);
        med[HAR_16K] = run(HAR_16K, iters);
        med[HAR_64K] = run(HAR_64K, iters);
    }
    med[FLOOR_AGAIN] = run(FLOOR_AGAIN, iters);

    if (rank == 0) {
        printf("latency_probe: %d ranks, %d calls per mode, max over ranks per call, median us\n", nranks, iters);
        for (int m = 0; m < NMODES; m++)
            printf("  %-14s %8.2f\n", names[m], med[m]);
    }
    fflush(stdout);
    run_stamped(P1_STAMP, iters);
    run_stamped(P4_STAMP, iters);
    for (int r = 0; r < nranks; r++)
        if (r != rank) cudaIpcCloseMemHandle(peers.slot[r]), cudaIpcCloseMemHandle(push_seg[r]);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
