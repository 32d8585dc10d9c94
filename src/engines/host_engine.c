/* The host-segment engine: CPU reduction through the node's shared slots.
 *
 * One-shot (one node, small messages): every rank reduces the whole vector
 * from all slots; one synchronisation. Two-shot: local rank i reduces shard
 * i, runs the inter-node step on it over its rail, and every rank copies
 * all finished shards; in leader mode (nodes of unequal size) local rank 0
 * carries the node's whole vector across nodes. Messages larger than a slot
 * go through in chunks. Device buffers are copied in and out by CUDA. A
 * rank alone on its node with host buffers (the plan's `streamed`) hands
 * them to the ring, which copies in and out piece by piece (inter.h).
 *
 * With HAR_CHECK every writer publishes a checksum of each shard of its
 * input and of its reduced shard before the step that hands them over, and
 * every reader verifies what it reads; the first difference fails the call
 * naming the writer, the reader, the shard and the step. */
#include <stdio.h>
#include <string.h>
#include "core/log.h"
#include "core/test.h"
#include "engines/engine.h"
#include "engines/host_pool.h"
#include "host/check.h"
#include "inter/inter.h"

typedef struct {
    har_node_t *node;
    const har_call_t *call;
    const char *in;
    char *out;
    size_t n;
    unsigned parity;
    int first;                      /* the call's first chunk: the arrival may have loaded it */
    int inter;                      /* the plan's transport between nodes */
    int streamed;                   /* the plan's: alone on its node, the transport reads in and writes out */
} chunk_t;

static har_status_t copy_out(const chunk_t *c, char *dst, const char *slot, size_t bytes)
{
    return har_cuda_copy(dst, c->call->out_kind, slot, HAR_MEM_HOST, bytes);
}

/* ---- HAR_CHECK ------------------------------------------------------------ */

/* This rank's input chunk into its slot, and with HAR_CHECK its
 * checksums, shard by shard. */
static har_status_t load_input(har_node_t *node, char *slot, const char *in, har_mem_kind_t kind, size_t n,
                               size_t elem, unsigned parity)
{
    har_status_t st = har_cuda_copy(slot, HAR_MEM_HOST, in, kind, n * elem);
    if (st != HAR_OK) return st;
    uint64_t *sums = har_node_seg_sums(&node->seg, node->local_rank, parity);
    for (int s = 0; node->set->check && s < node->local_size; s++) {
        size_t off, len;
        har_plan_shard(n, elem, node->local_size, s, &off, &len);
        sums[s] = har_host_checksum(slot + off * elem, len * elem, off * elem);
    }
#ifdef HAR_TEST_HOOKS
    /* HAR_TEST_CORRUPT_SLOT=RANK:INDEX: after publishing, flip one byte of
     * element INDEX in the slot, as a fault between writer and reader would. */
    int rank;
    long long index;
    if (sscanf(HAR_CFG(test_corrupt_slot).s, "%d:%lld", &rank, &index) == 2 && rank == node->rank && index >= 0 &&
        (size_t)index < n)
        slot[(size_t)index * elem + elem - 1] ^= 0x40;
#endif
    return HAR_OK;
}

/* Does what this rank reads of `writer`'s slot (bytes at byte `at` of the
 * chunk) match what the writer published (`want`)? If not, the failure is
 * recorded and said, naming both ranks and the shard. */
static har_status_t verify(const chunk_t *c, int writer, const char *data, size_t bytes, size_t at, uint64_t want,
                           int shard, const char *step)
{
    uint64_t got = har_host_checksum(data, bytes, at);
    if (got == want) return HAR_OK;
    har_node_t *node = c->node;
    har_note("HAR_CHECK: rank %d (world rank %d) published %s %d of its slot (checksum %016llx), rank %d read "
             "different data (%016llx), bytes %zu to %zu of the chunk", node->peers[writer].comm_rank,
             node->peers[writer].world_rank, shard < 0 ? "the whole" : "shard", shard < 0 ? 0 : shard,
             (unsigned long long)want, node->rank, (unsigned long long)got, at, at + bytes);
    har_node_fail(node, HAR_ERR_CHECK, writer, step);
    return HAR_ERR_CHECK;
}

/* A reader of a whole input slot: its shards' sums add up to the slot's. */
static har_status_t verify_slot(const chunk_t *c, int writer, const char *slot)
{
    har_node_t *node = c->node;
    size_t elem = c->call->red.elem_size;
    const uint64_t *sums = har_node_seg_sums(&node->seg, writer, c->parity);
    uint64_t whole = 0;
    for (int s = 0; s < node->local_size; s++) whole += sums[s];
    if (har_host_checksum(slot, c->n * elem, 0) == whole) return HAR_OK;
    for (int s = 0; s < node->local_size; s++) {  /* which shard */
        size_t off, len;
        har_plan_shard(c->n, elem, node->local_size, s, &off, &len);
        har_status_t st = verify(c, writer, slot + off * elem, len * elem, off * elem, sums[s], s, "input");
        if (st != HAR_OK) return st;
    }
    return verify(c, writer, slot, c->n * elem, 0, whole, -1, "input");
}

/* ---- the steps ------------------------------------------------------------- */

/* At the arrival: this rank's input of the call's first chunk into its
 * slot (and its HAR_CHECK checksums), so that a host call makes one
 * synchronisation. */
static har_status_t host_preload(har_node_t *node, const har_call_t *call, size_t chunk_bytes)
{
    size_t elem = call->red.elem_size, n = har_plan_chunk_elems(chunk_bytes, elem);
    if (call->count < n) n = call->count;
    return load_input(node, har_node_seg_slot(&node->seg, node->local_rank, node->host_seq & 1), call->in,
                      call->in_kind, n, elem, node->host_seq & 1);
}

/* This rank's input in its slot (unless the arrival put it there), then a
 * wait until every local rank's is; the arrival was this step if it loaded
 * every rank's. */
static har_status_t input(const chunk_t *c, char *slot)
{
    const har_call_t *call = c->call;
    if (c->first && call->loaded_all) return HAR_OK;
    har_status_t st;
    if (!(c->first && call->loaded_me) &&
        (st = load_input(c->node, slot, c->in, call->in_kind, c->n, call->red.elem_size, c->parity)) != HAR_OK)
        return st;
    HAR_TEST_POINT("input");
    har_node_seg_signal(&c->node->seg);
    return har_node_wait_all(c->node, "input");
}

/* Every rank reduces the whole vector, in rank order, from all slots. */
static har_status_t one_shot(const chunk_t *c)
{
    har_node_t *node = c->node;
    size_t elem = c->call->red.elem_size, bytes = c->n * elem;
    har_status_t st = input(c, har_node_seg_slot(&node->seg, node->local_rank, c->parity));
    for (int r = 0; st == HAR_OK && node->set->check && r < node->local_size; r++)
        st = verify_slot(c, r, har_node_seg_slot(&node->seg, r, c->parity));
    if (st != HAR_OK) return st;
    char *acc = c->call->out_kind == HAR_MEM_HOST ? c->out : node->scratch;
    char *src[HAR_MAX_LOCAL];
    for (int r = 1; r < node->local_size; r++) src[r - 1] = har_node_seg_slot(&node->seg, r, c->parity);
    memcpy(acc, har_node_seg_slot(&node->seg, 0, c->parity), bytes);
    har_engine_reduce_many(c->call->red.fn, elem, acc, src, node->local_size - 1, c->n, node->cores);
    return acc == c->out ? HAR_OK : copy_out(c, c->out, acc, bytes);
}

/* n elements at `data` in a slot, for the plan's transport between nodes. */
static har_inter_block_t across(const chunk_t *c, char *data, size_t n)
{
    return (har_inter_block_t){.path = c->inter, .data = data, .n = n, .kind = HAR_MEM_HOST, .call = c->call,
                               .first = c->first, .tmp = c->node->scratch,
                               .tmp_bytes = (size_t)c->node->set->slot_bytes};
}

static har_status_t two_shot(const chunk_t *c)
{
    har_node_t *node = c->node;
    har_node_seg_t *seg = &node->seg;
    const har_call_t *call = c->call;
    size_t elem = call->red.elem_size, off, len;
    int me = node->local_rank, L = node->local_size, check = node->set->check;
    char *mine = har_node_seg_slot(seg, me, c->parity);
    if (c->streamed) {  /* nobody else reads this rank's slot: the ring works in it and in scratch */
        har_inter_block_t whole = across(c, mine, c->n);
        whole.in = c->in;
        whole.out = c->out;
        return har_inter_allreduce(node, &whole);
    }
    har_status_t st = input(c, mine);
    if (st != HAR_OK) return st;

    har_plan_shard(c->n, elem, L, me, &off, &len);
    char *shard = mine + off * elem;
    for (int r = 0; check && r < L; r++)
        if ((st = verify(c, r, har_node_seg_slot(seg, r, c->parity) + off * elem, len * elem, off * elem,
                         har_node_seg_sums(seg, r, c->parity)[me], me, "shard input")) != HAR_OK)
            return st;
    /* Own input first, then the others in rank order: a fixed order, and
     * each shard is reduced by one rank only, so results match everywhere. */
    char *src[HAR_MAX_LOCAL];
    int nsrc = 0;
    for (int r = 0; r < L; r++)
        if (r != me) src[nsrc++] = har_node_seg_slot(seg, r, c->parity) + off * elem;
    har_engine_reduce_many(call->red.fn, elem, shard, src, nsrc, len, node->cores);
    har_inter_block_t rail = across(c, shard, len);
    if (node->rail_comm != MPI_COMM_NULL && len > 0 && (st = har_inter_allreduce(node, &rail)) != HAR_OK) return st;
    if (check) har_node_seg_sums(seg, me, c->parity)[L] = har_host_checksum(shard, len * elem, off * elem);
    HAR_TEST_POINT("shard");
    har_node_seg_signal(seg);

    if (node->nnodes > 1 && !node->uniform) {
        /* Leader mode: rank 0 carries the node's vector across nodes and
         * leaves the result in its own slot (nobody reads its input now). */
        if (me == 0) {
            if ((st = har_node_wait_all(node, "shard")) != HAR_OK) return st;
            for (int r = 1; r < L; r++) {
                har_plan_shard(c->n, elem, L, r, &off, &len);
                char *theirs = har_node_seg_slot(seg, r, c->parity) + off * elem;
                if (check && (st = verify(c, r, theirs, len * elem, off * elem, har_node_seg_sums(seg, r, c->parity)[L],
                                          r, "shard")) != HAR_OK)
                    return st;
                memcpy(mine + off * elem, theirs, len * elem);
            }
            har_inter_block_t whole = across(c, mine, c->n);
            if ((st = har_inter_allreduce(node, &whole)) != HAR_OK) return st;
            if (check) har_node_seg_sums(seg, 0, c->parity)[L] = har_host_checksum(mine, c->n * elem, 0);
        }
        har_node_seg_signal(seg);
        if (me != 0 && (st = har_node_wait_one(node, 0, "leader")) != HAR_OK) return st;
        const char *result = har_node_seg_slot(seg, 0, c->parity);
        if (check && me != 0 &&
            (st = verify(c, 0, result, c->n * elem, 0, har_node_seg_sums(seg, 0, c->parity)[L], -1, "leader")) !=
                HAR_OK)
            return st;
        return copy_out(c, c->out, result, c->n * elem);
    }

    if ((st = har_node_wait_all(node, "shard")) != HAR_OK) return st;
    for (int r = 0; r < L; r++) {
        har_plan_shard(c->n, elem, L, r, &off, &len);
        const char *theirs = har_node_seg_slot(seg, r, c->parity) + off * elem;
        if (check && (st = verify(c, r, theirs, len * elem, off * elem, har_node_seg_sums(seg, r, c->parity)[L], r,
                                  "shard")) != HAR_OK)
            return st;
        if ((st = copy_out(c, c->out + off * elem, theirs, len * elem)) != HAR_OK) return st;
    }
    return HAR_OK;
}

static har_status_t host_run(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    (void)engine;
    size_t elem = call->red.elem_size, chunk = har_plan_chunk_elems(plan->chunk_bytes, elem);
    har_status_t st = HAR_OK;
    for (size_t done = 0; done < call->count && st == HAR_OK; done += chunk) {
        chunk_t c = {node, call, call->in + done * elem, call->out + done * elem,
                     call->count - done < chunk ? call->count - done : chunk, node->host_seq++ & 1, done == 0,
                     plan->inter, plan->streamed};
        st = plan->one_shot ? one_shot(&c) : two_shot(&c);
    }
    return st;
}

static har_engine_state_t host_setup(har_node_t *node, const har_cuda_gpu_t *gpu, void **engine)
{
    (void)node; (void)gpu;
    *engine = NULL;  /* the segment is the communicator's own: nothing to make */
    return HAR_ENGINE_READY;
}

static void host_destroy(void *engine) { (void)engine; }

const har_engine_t har_engine_host_segment = {
    .can = {.path = HAR_PATH_HOST_SEGMENT, .takes = HAR_TAKES_HOST | HAR_TAKES_DEVICE,
            .shots = HAR_BIT(ONE_SHOT) | HAR_BIT(TWO_SHOT), .across = HAR_BIT(RAILS) | HAR_BIT(LEADER),
            .shared_gpu = 1, .checked = 1, .streams = 1, .rank = 3,
            .first_across_max = HAR_SETTING(device_host_max), .one_shot_max = HAR_SETTING(one_shot_max)},
    .setup = host_setup, .run = host_run, .destroy = host_destroy, .preload = host_preload};
