/* The CUDA IPC node segment (seg_cuda.c), seen from the C side. Without CUDA
 * the functions below are stubs that say "no device segment". */
#ifndef HAR_SEG_CUDA_H
#define HAR_SEG_CUDA_H

#include "hier.h"
#include "dev.h"

typedef struct har_devseg har_devseg_t;

/* One all-reduce on device buffers, as the driver needs it. */
typedef struct {
    const char *in;
    char *out;
    size_t count, elem, chunk_elems;
    int dtype, op, one_shot;
    unsigned *seq;                 /* the communicator's chunk counter (slot parity) */
    /* The inter-node step on this rank's shard in pinned host memory (tmp:
     * as large as a slot); NULL on one node. Returns an MPI error code. */
    int (*inter)(void *ctx, char *shard, size_t n, char *tmp);
    /* MPI_SUCCESS while every local peer lives (and, with HAR_TIMEOUT, while
     * the wait that began at `started`, har_seg_now() time, is not too long). */
    int (*check_peers)(void *ctx, double started);
    void *ctx;
} har_dev_call_t;

#ifdef HAR_HAVE_KERNELS
/* Collective on the node communicator; NULL on every rank unless IPC works
 * between all of them. */
HAR_HIDDEN har_devseg_t *har_devseg_create(MPI_Comm node, size_t slot_bytes);
HAR_HIDDEN void har_devseg_destroy(har_devseg_t *d);  /* no MPI calls */
/* Is the calling thread's current GPU the one the segment was made on? */
HAR_HIDDEN int har_devseg_current(const har_devseg_t *d);
HAR_HIDDEN int har_devseg_allreduce(har_devseg_t *d, const har_dev_call_t *call);
/* Could NCCL serve this type and op here? The same answer on every local
 * rank; NCCL itself is loaded and set up by har_devseg_nccl_ready. */
HAR_HIDDEN int har_devseg_nccl_candidate(const har_devseg_t *d, int dtype, int op);
/* Collective on the node communicator, the first time: loads NCCL and makes
 * its communicator. 1 when NCCL can serve (the same on every local rank). */
HAR_HIDDEN int har_devseg_nccl_ready(har_devseg_t *d, MPI_Comm node);
/* The whole call by ncclAllReduce on har's stream, peers watched. */
HAR_HIDDEN int har_devseg_nccl_allreduce(har_devseg_t *d, const har_dev_call_t *call);
#else
static inline har_devseg_t *har_devseg_create(MPI_Comm node, size_t slot_bytes)
{
    (void)node; (void)slot_bytes;
    return NULL;
}
static inline void har_devseg_destroy(har_devseg_t *d) { (void)d; }
static inline int har_devseg_current(const har_devseg_t *d) { (void)d; return 0; }
static inline int har_devseg_allreduce(har_devseg_t *d, const har_dev_call_t *call)
{
    (void)d; (void)call;
    return MPI_ERR_INTERN;
}
static inline int har_devseg_nccl_candidate(const har_devseg_t *d, int dtype, int op)
{
    (void)d; (void)dtype; (void)op;
    return 0;
}
static inline int har_devseg_nccl_ready(har_devseg_t *d, MPI_Comm node) { (void)d; (void)node; return 0; }
static inline int har_devseg_nccl_allreduce(har_devseg_t *d, const har_dev_call_t *call)
{
    (void)d; (void)call;
    return MPI_ERR_INTERN;
}
#endif

#endif
