/* The host engine's worker threads for large reductions (host_pool.c). */
#ifndef HAR_HOST_POOL_H
#define HAR_HOST_POOL_H

#include "host/reduce.h"

/* dst op= src[0], then op= src[1], ... over n elements, split across worker
 * threads when the message is large and this rank has cores to spare
 * (`cores`: its share of the cores, found at set-up). */
HAR_HIDDEN void har_engine_reduce_many(har_reduce_fn fn, size_t elem, char *dst, char *const *src, int nsrc, size_t n,
                                       int cores);

#endif
