/* What tests/mpi/requests.c and entry/collectives.c share: buffers in host or
 * device memory (--device, built with HAR_TEST_CUDA), har's counters by
 * name (linked with the test build, HAR_LINKED; otherwise looked up in the
 * process, where LD_PRELOAD or -lhar put them, or absent without har), a
 * seeded random source, and failures said once per rank. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#ifdef HAR_TEST_CUDA
#include <cuda_runtime.h>
#endif
#ifdef HAR_LINKED
#include "har.h"
void har_test_stage_state(int *requests, int *kept, size_t *kept_bytes);
#endif

static int world_rank, world_size, on_device, failures;
static const char *prog = "test";

#define FAIL(...)                                                                   \
    do {                                                                            \
        if (failures++ < 10) {                                                      \
            fprintf(stderr, "FAIL rank %d: %s: ", world_rank, prog);                \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

static void *buf_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 1;
#ifdef HAR_TEST_CUDA
    if (on_device) {
        if (cudaMalloc(&p, bytes) != cudaSuccess) p = NULL;
    } else
#endif
        p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "%s: rank %d: no memory for %zu bytes\n", prog, world_rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void buf_free(void *p)
{
#ifdef HAR_TEST_CUDA
    if (on_device) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

/* host -> buffer, and buffer -> host */
static void buf_put(void *dst, const void *src, size_t bytes)
{
#ifdef HAR_TEST_CUDA
    if (on_device) {
        cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

static void buf_get(void *dst, const void *src, size_t bytes)
{
#ifdef HAR_TEST_CUDA
    if (on_device) {
        cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

/* With --device, each rank takes a GPU of its node (returns 0 without one). */
static int device_setup(void)
{
#ifdef HAR_TEST_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return 0;
    MPI_Comm node;
    int local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    cudaSetDevice(local % n);
    return 1;
#else
    return 0;
#endif
}

/* har's counter of that name in this process; -1 without har. */
static long long counter(const char *name)
{
#ifdef HAR_LINKED
    int (*index)(const char *) = har_counter_index;
    int (*values)(unsigned long long *, int) = har_counters;
#else
    int (*index)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "har_counter_index");
    int (*values)(unsigned long long *, int) = (int (*)(unsigned long long *, int))dlsym(RTLD_DEFAULT, "har_counters");
#endif
    if (!index || !values) return -1;
    int i = index(name), n = values(NULL, 0);
    if (i < 0 || i >= n) return -2;  /* har without this counter */
    unsigned long long *v = calloc((size_t)n, sizeof *v);
    values(v, n);
    long long c = (long long)v[i];
    free(v);
    return c;
}

/* xorshift, seeded per rank (ranks may complete their requests in any order) */
static __thread uint64_t rng_state = 88172645463325252ull;
static void rng_seed(uint64_t s) { rng_state = s * 2654435761u + 1; }
static unsigned rnd(unsigned n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

static void shuffle(int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rnd((unsigned)i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* The test build's table of staged requests is empty and its pool within
 * bounds (HAR_STAGE_KEEP buffers). */
static void check_stage_state(const char *when)
{
#ifdef HAR_LINKED
    int requests, kept;
    size_t bytes;
    har_test_stage_state(&requests, &kept, &bytes);
    if (requests != 0) FAIL("%s: %d staged requests left in har's table", when, requests);
    if (kept > 8) FAIL("%s: har's staging pool holds %d buffers (%zu bytes), more than 8", when, kept, bytes);
#else
    (void)when;
#endif
}
