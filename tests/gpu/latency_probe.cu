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
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

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

struct Peers { unsigned *slot[16]; };  // slot[r]: rank r's words, one per writer

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
        st_sys(peers.slot[t] + me, seq);
        const volatile unsigned *mine = peers.slot[me] + t;
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
__global__ void resident(const volatile unsigned *post, volatile unsigned *done, Peers peers, int n, int me,
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

enum Mode { NONE, SHM, FLOOR, LAUNCH_FLAG, LAUNCH_XCHG, RES_FLAG, RES_XCHG, MEMOP_XCHG, FLOOR_BESIDE, QUERY_LEGACY, EVENT_LEGACY, RES_QUERY_XCHG, NMODES };
static const char *names[] = {"none", "shm", "floor", "launch_flag", "launch_xchg", "res_flag", "res_xchg",
                              "memop_xchg", "floor_beside", "query_legacy", "event_legacy", "res_query_xchg"};

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

static void start_resident(const unsigned *post, int with_exchange, unsigned first_post)
{
    *(volatile unsigned *)host_flag = 0;
    *(volatile unsigned *)host_post = first_post;
    CK(cudaMemset(dev_post_d, 0, 64));
    res_seq = 0;
    // The peers' words hold older numbers: clear them before any block runs.
    CK(cudaMemset(peers.slot[rank], 0, 16 * sizeof(unsigned)));
    CK(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    resident<<<1, 32, 0, nonblocking>>>(post, dev_flag, peers, nranks, rank, with_exchange);
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
    CK(cudaMalloc(&mine, 16 * sizeof(unsigned)));
    CK(cudaMemset(mine, 0, 16 * sizeof(unsigned)));
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

    if (rank == 0) {
        printf("latency_probe: %d ranks, %d calls per mode, max over ranks per call, median us\n", nranks, iters);
        for (int m = 0; m < NMODES; m++)
            printf("  %-13s %8.2f\n", names[m], med[m]);
    }
    for (int r = 0; r < nranks; r++)
        if (r != rank) cudaIpcCloseMemHandle(peers.slot[r]);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
