/* What the GPU test programs share: their random sequences and the check
 * that a GPU is there. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The next number of a sequence (splitmix64): a seed every rank shares
 * gives every rank the same sizes. */
static inline uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    return (z ^ (z >> 27)) * 0x94d049bb133111ebull ^ (z >> 31);
}

/* The GPUs visible; with none, the program `name` says so and exits 77
 * (skipped), or 1 where HAR_TEST_REQUIRE_GPU=1 asks for one. */
static inline int gpus_or_skip(const char *name)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) return ndev;
    const char *req = getenv("HAR_TEST_REQUIRE_GPU");
    fprintf(stderr, "%s: no GPU visible\n", name);
    exit(req && atoi(req) ? 1 : 77);
}
