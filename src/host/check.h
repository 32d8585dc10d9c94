/* HAR_CHECK's checksums: writers publish them, readers verify them. */
#ifndef HAR_CHECK_H
#define HAR_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* A checksum of `bytes` at p, which lie `at` bytes into the vector (a
 * multiple of 8). It adds up: the sum over a region equals the sum of the
 * sums over its parts, so a writer's per-shard sums check a reader of the
 * whole slot. Unlike a plain sum, every word is mixed with its place. */
uint64_t har_host_checksum(const void *p, size_t bytes, size_t at);

#endif
