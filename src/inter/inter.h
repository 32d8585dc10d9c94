/* The step between nodes: one block of a node's reduced data all-reduced
 * with the same block of every other node, over this rank's rail (or the
 * leaders' communicator: node->notice_comm).
 *
 * One interface, one transport per way of moving data: har's ring and
 * recursive doubling over MPI point-to-point (ring.c), the MPI's own
 * all-reduce on the rail (mpi.c), and NCCL's on the rail (nccl.c, where
 * har is built with CUDA). The plan picks one per call (HAR_INTER, else
 * by size: har_plan_inter). A transport says which memory it takes: a
 * device engine hands one that takes device memory its shard as it is,
 * and otherwise pipelines its own copies through pinned host memory beside
 * its kernels (engines/ipc_engine.c), which only it can overlap. The call's
 * header (what every rank calls, checked on receipt) and HAR_CHECK's sums
 * travel in host memory whatever the data's kind. Every node runs the same
 * transport on the same blocks, whatever engine it uses: the plan's choice
 * depends only on the call's size and rank 0's settings, and engines chunk
 * alike across nodes (plan.c). */
#ifndef HAR_INTER_H
#define HAR_INTER_H

#include "cuda/driver.h"
#include "node/allreduce.h"
#include "node/node.h"

/* One block, in place in `data`; or, for the ring only, streamed (the
 * plan's har_plan_t.streamed): read from `in` and written to `out`, the
 * application's host buffers (they may be the same), with `data` and `tmp`
 * the ring's own memory. The ring then copies in only the piece it sends
 * first, and reduces or copies out each piece that comes while it is in
 * the cache, instead of the engine copying the whole vector into its slot
 * and out again. The MPI still never reads or writes the application's
 * memory: a receive that a failed call cannot cancel lands in har's
 * (DESIGN.md note 44). */
typedef struct {
    int path;                   /* the transport that carries it: the plan's (har_plan_t.inter) */
    char *data;                 /* n elements of the call's type */
    const char *in;             /* streamed: n elements of this rank's input; NULL: data holds it */
    char *out;                  /* streamed: where the n elements of the result go */
    size_t n;
    har_mem_kind_t kind;        /* where data lives */
    const har_call_t *call;
    int first;                  /* the call's first block: its header travels with it */
    char *tmp;                  /* memory of the same kind the transport may use: at least tmp_bytes, the plan's chunk */
    size_t tmp_bytes;
    /* Device data: reduces n elements of `in` into `acc` where they are
     * (a kernel); NULL: host data, reduced by the CPU. */
    har_status_t (*reduce)(void *ctx, char *acc, const char *in, size_t n);
    void *reduce_ctx;
} har_inter_block_t;

typedef struct {
    int path;                   /* its path: what the counters show */
    /* Every transport takes host memory. Device memory as it is where this
     * says so: for the MPI's point-to-point har_cuda_mpi_p2p, for the MPI's
     * own MPI_Iallreduce har_cuda_mpi_nonblocking (detected, or
     * HAR_MPI_CUDA_*), NCCL always; NULL: never. */
    int (*takes_device)(void);
    /* Whether it uses the block's tmp and reduce (har's own reductions):
     * where not, the engines need not allocate a scratch or a stream for it. */
    int uses_scratch;
    /* Once, at a communicator's set-up where it spans nodes (the plan may
     * pick any transport for a later call). */
    har_status_t (*setup)(har_node_t *node);
    /* In place on b->data (of a kind it takes). Every wait is the node's
     * bounded wait, which also hears failure notices from other nodes. */
    har_status_t (*allreduce)(har_node_t *node, const har_inter_block_t *b);
    /* Where the communicator goes (not after a failure: its memory stays);
     * may be NULL. */
    void (*release)(har_node_t *node);
} har_inter_t;

extern HAR_HIDDEN const har_inter_t har_inter_ring, har_inter_doubling, har_inter_mpi, har_inter_nccl;

/* The block across nodes by its transport (b->path). */
HAR_HIDDEN har_status_t har_inter_allreduce(har_node_t *node, const har_inter_block_t *b);
/* The i-th transport's path, from 0; -1 past the last. */
HAR_HIDDEN int har_inter_path(size_t i);
/* Does the transport of that path take memory of this kind as it is? */
HAR_HIDDEN int har_inter_takes(int path, har_mem_kind_t kind);
/* Does it use har_inter_block_t's tmp and reduce? */
HAR_HIDDEN int har_inter_uses_scratch(int path);
/* At set-up, where the communicator spans nodes. */
HAR_HIDDEN har_status_t har_inter_setup(har_node_t *node);
/* Where the communicator goes: what the transports hold for it. */
HAR_HIDDEN void har_inter_release(har_node_t *node);
/* Can NCCL carry blocks between nodes from this rank (loaded, a GPU)? If
 * not, why. Every rank's answer is agreed at set-up (comm/state.c). */
HAR_HIDDEN int har_inter_nccl_here(char *why, size_t len);
/* Every rank's call across the nodes checked against its neighbour's, then
 * the rail agreeing on the outcome, so that no rank goes on where another
 * found a difference: for a transport that checks nothing itself, before
 * a call's first block (ring.c). */
HAR_HIDDEN har_status_t har_inter_check_calls(har_node_t *node, const har_inter_block_t *b, const char *step);

#endif
