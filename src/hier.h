/* The hierarchical all-reduce: node segment, rails or leader, inter-node
 * ring, and the pure planning functions it uses. */
#ifndef HAR_HIER_H
#define HAR_HIER_H

#include "internal.h"

/* Returned by har_hier_allreduce when har does not serve the call: every
 * rank of the communicator declines it alike, and the caller forwards it.
 * Never an MPI error code. */
#define HAR_DECLINED (-1)

/* Local ranks a node segment serves; larger nodes go to the MPI. */
#define HAR_MAX_LOCAL 256

HAR_HIDDEN void har_hier_init(void);
HAR_HIDDEN void har_hier_finalize(void);
HAR_HIDDEN int har_hier_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                                  har_reduce_t red, MPI_Op op, MPI_Comm comm, unsigned *paths);

/* ---- plan.c (pure: no MPI, no CUDA) ---- */

typedef struct {
    har_algo_t algo;  /* ONE_SHOT, TWO_SHOT: har's segment for these buffers (the
                       * CUDA IPC one for device buffers); HOST_SEGMENT: device
                       * buffers through the host segment; NCCL; MPI */
    int one_shot;     /* whole vector reduced by every rank; else two-shot */
} har_choice_t;

/* What serves a call of `bytes`. `device`: every local rank has device
 * buffers and the kernels can serve them; `avail`: HAR_ALGO_BITs of what
 * else can (two-shot always can); `forced`: HAR_ALGO or har_set_algo.
 * Order: forced, tuning table, then the thresholds (NCCL from
 * HAR_NCCL_MIN_BYTES, else one-shot up to the one-shot maximum). */
HAR_HIDDEN har_choice_t har_choose(size_t bytes, int local_size, int nnodes, int device, unsigned avail, int forced,
                                   const har_algo_cfg_t *cfg);
/* Elements per pass through a slot of `slot_bytes`: whole 64-byte units. */
HAR_HIDDEN size_t har_chunk_elems(size_t slot_bytes, size_t elem_size);
/* Shard i of n elements split among `parts`: starts and lengths are
 * multiples of 64 bytes except the last shard's end. */
HAR_HIDDEN void har_shard(size_t n, size_t elem_size, int parts, int i, size_t *off, size_t *len);

/* ---- pool.c ---- */

/* dst op= src[0], then op= src[1], ... over n elements, split across worker
 * threads when the message is large and this rank has cores to spare. */
HAR_HIDDEN void har_reduce_many(har_reduce_fn fn, size_t elem, char *dst, char *const *src, int nsrc, size_t n,
                                int local_size);

/* ---- ring.c ---- */

/* In-place ring all-reduce of buf (n elements) over `ring`, through tmp
 * (at least n elements); a step waits at most `timeout` s (0: for ever).
 * Returns an MPI error code. */
HAR_HIDDEN int har_ring_allreduce(void *buf, size_t n, size_t elem_size, har_reduce_fn fn,
                                  MPI_Comm ring, void *tmp, double timeout);

#endif
