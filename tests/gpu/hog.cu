// A kernel that holds multiprocessors for a while, as an application's own
// work can while it calls MPI_Allreduce on another stream: har's kernels
// then find fewer multiprocessors than the occupancy promised, and must
// still finish once the hog ends (tests/gpu/stress.c --hog).
#include <cuda_runtime.h>
#include "hog.h"

namespace {

// One block of 1024 threads and most of the shared memory: nothing else
// fits beside it on its multiprocessor.
__global__ void __launch_bounds__(1024) hold(unsigned long long ns)
{
    extern __shared__ char pad[];
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
    if (threadIdx.x == 0) pad[0] = 0;
}

__global__ void late_copy(char *dst, const char *src, unsigned long bytes, unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
    for (unsigned long i = blockIdx.x * (unsigned long)blockDim.x + threadIdx.x; i < bytes;
         i += (unsigned long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

}  // namespace

extern "C" int late_copy_start(void *dst, const void *src, unsigned long bytes, double seconds)
{
    late_copy<<<4, 256, 0, cudaStreamLegacy>>>((char *)dst, (const char *)src, bytes,
                                               (unsigned long long)(seconds * 1e9));
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int hog_start(double fraction, double seconds)
{
    static cudaStream_t stream;
    int dev = 0, sms = 0, smem = 0;
    if (!stream && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return -1;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaFuncSetAttribute(hold, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return -1;
    int blocks = (int)(fraction * sms);
    if (blocks < 1) blocks = 1;
    hold<<<blocks, 1024, smem, stream>>>((unsigned long long)(seconds * 1e9));
    return cudaGetLastError() == cudaSuccess ? blocks : -1;
}
