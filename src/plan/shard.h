/* The shard layout, in one place for the CPU and the GPU: the host engine,
 * the ring and the IPC engine's host side (C) and its kernels (CUDA) split
 * a vector the same way, and must. Plain C, no MPI. */
#ifndef HAR_SHARD_H
#define HAR_SHARD_H

#include <stddef.h>

#ifdef __CUDACC__
#define HAR_HOST_DEVICE __host__ __device__
#else
#define HAR_HOST_DEVICE
#endif

#define HAR_SHARD_ALIGN 64  /* bytes: shards never share a cache line between writers */

/* Shard i of n elements split among `parts`: starts and lengths are
 * multiples of 64 bytes except the last shard's end. */
static inline HAR_HOST_DEVICE void har_plan_shard(size_t n, size_t elem_size, int parts, int i, size_t *off,
                                                  size_t *len) {
    size_t unit = HAR_SHARD_ALIGN / elem_size;
    size_t units = (n + unit - 1) / unit;
    size_t first = units * (size_t)i / (size_t)parts, last = units * (size_t)(i + 1) / (size_t)parts;
    size_t begin = first * unit, end = last * unit;
    if (begin > n) begin = n;
    if (end > n) end = n;
    *off = begin;
    *len = end - begin;
}

#endif
