/* The host-segment engine: CPU reduction through the node's shared slots.
 *
 * One-shot (one node, small messages): every rank reduces the whole vector
 * from all slots; one synchronisation. Two-shot: local rank i reduces shard
 * i, runs the inter-node step on it over its rail, and every rank copies
 * all finished shards; in leader mode (nodes of unequal size) local rank 0
 * carries the node's whole vector across nodes. Messages larger than a slot
 * go through in chunks. Device buffers are copied in and out by CUDA. */
#include <string.h>
#include "engine.h"
#include "inter/inter.h"

typedef struct {
    har_node_t *node;
    const har_call_t *call;
    const char *in;
    char *out;
    size_t n;
    unsigned parity;
    int first;                      /* the call's first chunk: the arrival may have loaded it */
} chunk_t;

static har_status_t copy_out(const chunk_t *c, char *dst, const char *slot, size_t bytes)
{
    return har_mem_copy(dst, c->call->out_kind, slot, HAR_MEM_HOST, bytes);
}

/* This rank's input in its slot (unless the arrival put it there), then a
 * wait until every local rank's is; the arrival was this step if it loaded
 * every rank's. */
static har_status_t input(const chunk_t *c, char *slot)
{
    const har_call_t *call = c->call;
    if (c->first && call->loaded_all) return HAR_OK;
    if (!(c->first && call->loaded_me)) {
        har_status_t st = har_mem_copy(slot, HAR_MEM_HOST, c->in, call->in_kind, c->n * call->red.elem_size);
        if (st != HAR_OK) return st;
    }
    har_seg_signal(&c->node->seg);
    return har_node_wait_all(c->node, "input");
}

/* Every rank reduces the whole vector, in rank order, from all slots. */
static har_status_t one_shot(const chunk_t *c)
{
    har_node_t *node = c->node;
    size_t elem = c->call->red.elem_size, bytes = c->n * elem;
    har_status_t st = input(c, har_seg_slot(&node->seg, node->local_rank, c->parity));
    if (st != HAR_OK) return st;
    char *acc = c->call->out_kind == HAR_MEM_HOST ? c->out : node->scratch;
    char *src[HAR_MAX_LOCAL];
    for (int r = 1; r < node->local_size; r++) src[r - 1] = har_seg_slot(&node->seg, r, c->parity);
    memcpy(acc, har_seg_slot(&node->seg, 0, c->parity), bytes);
    har_reduce_many(c->call->red.fn, elem, acc, src, node->local_size - 1, c->n, node->local_size);
    return acc == c->out ? HAR_OK : copy_out(c, c->out, acc, bytes);
}

static har_status_t two_shot(const chunk_t *c)
{
    har_node_t *node = c->node;
    har_seg_t *seg = &node->seg;
    const har_call_t *call = c->call;
    size_t elem = call->red.elem_size, off, len;
    int me = node->local_rank, L = node->local_size;
    char *mine = har_seg_slot(seg, me, c->parity);
    har_status_t st = input(c, mine);
    if (st != HAR_OK) return st;

    har_shard(c->n, elem, L, me, &off, &len);
    char *shard = mine + off * elem;
    /* Own input first, then the others in rank order: a fixed order, and
     * each shard is reduced by one rank only, so results match everywhere. */
    char *src[HAR_MAX_LOCAL];
    int nsrc = 0;
    for (int r = 0; r < L; r++)
        if (r != me) src[nsrc++] = har_seg_slot(seg, r, c->parity) + off * elem;
    har_reduce_many(call->red.fn, elem, shard, src, nsrc, len, L);
    if (node->rail_comm != MPI_COMM_NULL && len > 0 &&
        (st = har_inter_allreduce(node, node->rail_comm, shard, len, call, node->scratch)) != HAR_OK)
        return st;
    har_seg_signal(seg);

    if (node->nnodes > 1 && !node->uniform) {
        /* Leader mode: rank 0 carries the node's vector across nodes and
         * leaves the result in its own slot (nobody reads its input now). */
        if (me == 0) {
            if ((st = har_node_wait_all(node, "shard")) != HAR_OK) return st;
            for (int r = 1; r < L; r++) {
                har_shard(c->n, elem, L, r, &off, &len);
                memcpy(mine + off * elem, har_seg_slot(seg, r, c->parity) + off * elem, len * elem);
            }
            if ((st = har_inter_allreduce(node, node->leader_comm, mine, c->n, call, node->scratch)) != HAR_OK)
                return st;
        }
        har_seg_signal(seg);
        if (me != 0 && (st = har_node_wait_one(node, 0, "leader")) != HAR_OK) return st;
        return copy_out(c, c->out, har_seg_slot(seg, 0, c->parity), c->n * elem);
    }

    if ((st = har_node_wait_all(node, "shard")) != HAR_OK) return st;
    for (int r = 0; r < L; r++) {
        har_shard(c->n, elem, L, r, &off, &len);
        if ((st = copy_out(c, c->out + off * elem, har_seg_slot(seg, r, c->parity) + off * elem, len * elem)) !=
            HAR_OK)
            return st;
    }
    return HAR_OK;
}

static har_status_t host_run(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    (void)engine;
    size_t elem = call->red.elem_size, chunk = har_chunk_elems(plan->chunk_bytes, elem);
    har_status_t st = HAR_OK;
    for (size_t done = 0; done < call->count && st == HAR_OK; done += chunk) {
        chunk_t c = {node, call, call->in + done * elem, call->out + done * elem,
                     call->count - done < chunk ? call->count - done : chunk, node->host_seq++ & 1, done == 0};
        st = plan->one_shot ? one_shot(&c) : two_shot(&c);
    }
    return st;
}

static har_engine_setup_t host_setup(har_node_t *node, const har_gpu_t *gpu, void **engine)
{
    (void)node; (void)gpu;
    *engine = NULL;  /* the segment is the communicator's own: nothing to make */
    return HAR_ENGINE_READY;
}

static void host_destroy(void *engine) { (void)engine; }

const har_engine_ops_t har_engine_host_segment = {host_setup, host_run, host_destroy};
