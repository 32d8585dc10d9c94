/* tests/gpu/enqueue.c's kernels: an application's work on its stream
 * around har_allreduce_enqueue (enqueue_kernels.h). */
#include <cuda_runtime.h>
#include "enqueue_kernels.h"

/* Element i of rank r's input in call `tag`: small integers (negative
 * too), so that every type sums them exactly. */
__device__ __host__ static inline long long input_value(long long i, int r, int tag)
{
    return (i * 7 + r * 3 + tag) % 11 - 5;
}

template <typename T> __global__ void fill_kernel(T *buf, int n, int rank, int tag)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = (T)input_value(i, rank, tag);
}

template <typename T> __global__ void verify_kernel(const T *out, int n, int op, int nranks, int tag,
                                                    unsigned long long *bad)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        T want = (T)input_value(i, 0, tag);
        for (int r = 1; r < nranks; r++) {
            T v = (T)input_value(i, r, tag);
            want = op == ENQ_SUM ? want + v : op == ENQ_MAX ? (v > want ? v : want) : (v < want ? v : want);
        }
        if (out[i] != want) atomicAdd(bad, 1ull);
    }
}

__global__ void spin_kernel(long long ns)
{
    long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    while (now - start < ns);
}

#define BLOCKS(n) (((n) + 255) / 256 < 64 ? ((n) + 255) / 256 : 64)

extern "C" int enq_fill(void *buf, int n, int type, int rank, int tag, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    switch (type) {
    case ENQ_INT: fill_kernel<<<BLOCKS(n), 256, 0, s>>>((int *)buf, n, rank, tag); break;
    case ENQ_LONG: fill_kernel<<<BLOCKS(n), 256, 0, s>>>((long long *)buf, n, rank, tag); break;
    case ENQ_FLOAT: fill_kernel<<<BLOCKS(n), 256, 0, s>>>((float *)buf, n, rank, tag); break;
    default: fill_kernel<<<BLOCKS(n), 256, 0, s>>>((double *)buf, n, rank, tag);
    }
    return (int)cudaGetLastError();
}

extern "C" int enq_verify(const void *out, int n, int type, int op, int nranks, int tag, unsigned long long *bad,
                          void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    switch (type) {
    case ENQ_INT: verify_kernel<<<BLOCKS(n), 256, 0, s>>>((const int *)out, n, op, nranks, tag, bad); break;
    case ENQ_LONG: verify_kernel<<<BLOCKS(n), 256, 0, s>>>((const long long *)out, n, op, nranks, tag, bad); break;
    case ENQ_FLOAT: verify_kernel<<<BLOCKS(n), 256, 0, s>>>((const float *)out, n, op, nranks, tag, bad); break;
    default: verify_kernel<<<BLOCKS(n), 256, 0, s>>>((const double *)out, n, op, nranks, tag, bad);
    }
    return (int)cudaGetLastError();
}

extern "C" long long enq_expected(long long i, int type, int op, int nranks, int tag)
{
    (void)type;
    long long want = input_value(i, 0, tag);
    for (int r = 1; r < nranks; r++) {
        long long v = input_value(i, r, tag);
        want = op == ENQ_SUM ? want + v : op == ENQ_MAX ? (v > want ? v : want) : (v < want ? v : want);
    }
    return want;
}

extern "C" long long enq_input(long long i, int rank, int tag) { return input_value(i, rank, tag); }

extern "C" int enq_spin(double seconds, void *stream)
{
    spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((long long)(seconds * 1e9));
    return (int)cudaGetLastError();
}
