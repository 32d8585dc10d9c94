/* Per-communicator state and the hierarchical all-reduce driver.
 *
 * State is made collectively on a communicator's first eligible call and
 * cached as an attribute; a duplicate gets its own (MPI_COMM_NULL_COPY_FN).
 * The delete callback makes no MPI call: it unmaps the segment and leaves
 * har's internal communicators on a list that the next har entry frees. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hier.h"
#include "seg.h"
#include "seg_cuda.h"

typedef struct har_state {
    struct har_state *next, *prev;  /* every live state, for MPI_Finalize */
    MPI_Comm comm;                  /* the application's communicator */
    int usable;                     /* 0: set-up failed everywhere: every call goes to the MPI */
    int failed;                     /* a call failed after peers were involved: every later call fails */
    int rank, local_rank, local_size, node, nnodes, uniform;
    MPI_Comm node_comm, rail_comm, leader_comm;  /* MPI_COMM_NULL where unused */
    har_algo_cfg_t cfg;             /* rank 0's */
    har_seg_t seg;
    har_devseg_t *dev;              /* CUDA IPC segment; NULL: device buffers use the host one */
    unsigned chunk_seq;             /* picks the slot parity; same on all ranks */
    char *scratch;                  /* slot_bytes: ring blocks, device output staging */
} har_state_t;

static int keyval = MPI_KEYVAL_INVALID, self_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static har_state_t *live;           /* list of states, under lock */
static int segments;                /* states holding a segment, under lock */
static MPI_Comm *doomed;            /* internal communicators to free, under lock */
static size_t ndoomed, doomed_cap;
static unsigned seg_counter;

static void release_segment(har_state_t *st)
{
    if (!st->seg.base) return;
    har_seg_detach(&st->seg);
    pthread_mutex_lock(&lock);
    segments--;
    pthread_mutex_unlock(&lock);
}

/* No MPI calls here: the MPI may be finalizing. */
static int finalizing;  /* har_hier_finalize has synchronised every rank */

static void state_free(har_state_t *st)
{
    if (st->dev && st->usable && !st->failed && !finalizing) {
        /* Peers' kernels may still read this rank's device segment: meet
         * them on the host segment first (MPI_Comm_free is collective). */
        har_wait_ctx_t ctx = {"free", st->rank, st->node, st->cfg.timeout};
        har_seg_signal(&st->seg);
        har_seg_wait_all(&st->seg, st->seg.my_epoch, &ctx);
    }
    release_segment(st);
    har_devseg_destroy(st->dev);
    free(st->scratch);
    pthread_mutex_lock(&lock);
    MPI_Comm internal[3] = {st->node_comm, st->rail_comm, st->leader_comm};
    for (int i = 0; i < 3; i++) {
        if (internal[i] == MPI_COMM_NULL) continue;
        if (ndoomed == doomed_cap) {
            size_t cap = doomed_cap ? 2 * doomed_cap : 16;
            MPI_Comm *grown = realloc(doomed, cap * sizeof *grown);
            if (!grown) break;  /* leaks a handle, not memory we own */
            doomed = grown;
            doomed_cap = cap;
        }
        doomed[ndoomed++] = internal[i];
    }
    if (st->prev) st->prev->next = st->next;
    else if (live == st) live = st->next;
    if (st->next) st->next->prev = st->prev;
    pthread_mutex_unlock(&lock);
    free(st);
}

static int delete_cb(MPI_Comm comm, int kv, void *attr, void *extra)
{
    (void)comm; (void)kv; (void)extra;
    state_free(attr);
    return MPI_SUCCESS;
}

/* Frees the internal communicators of released states (MPI_Comm_free is
 * local in practice, so doing it later on one rank is safe). */
static void free_doomed(void)
{
    if (!__atomic_load_n(&ndoomed, __ATOMIC_RELAXED)) return;  /* the per-call case: nothing to do */
    pthread_mutex_lock(&lock);
    MPI_Comm *list = doomed;
    size_t n = ndoomed;
    doomed = NULL;
    ndoomed = doomed_cap = 0;
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < n; i++) PMPI_Comm_free(&list[i]);
    free(list);
}

/* Backstop when MPI_Finalize bypassed our wrapper: MPI deletes
 * MPI_COMM_SELF's attributes first thing in MPI_Finalize. */
static int self_delete_cb(MPI_Comm comm, int kv, void *attr, void *extra)
{
    (void)comm; (void)kv; (void)attr; (void)extra;
    pthread_mutex_lock(&lock);
    for (har_state_t *st = live; st; st = st->next) {
        st->usable = 0;  /* nothing may touch the segments from now on */
        if (st->seg.base) {
            har_seg_detach(&st->seg);
            segments--;
        }
    }
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}

void har_hier_init(void)
{
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cb, &keyval, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_cb, &self_keyval, NULL);
    PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL);
}

void har_hier_finalize(void)
{
    /* Every rank's last call is over once all have arrived here: device
     * segments can go without a barrier per communicator (whose order could
     * differ between ranks). */
    PMPI_Barrier(MPI_COMM_WORLD);
    finalizing = 1;
    for (;;) {
        pthread_mutex_lock(&lock);
        har_state_t *st = live;
        pthread_mutex_unlock(&lock);
        if (!st) break;
        /* Runs delete_cb, which unlinks st; if the MPI refuses (it should
         * not), free it here so that the loop ends. */
        if (PMPI_Comm_delete_attr(st->comm, keyval) != MPI_SUCCESS) state_free(st);
    }
    free_doomed();
    PMPI_Comm_delete_attr(MPI_COMM_SELF, self_keyval);
    PMPI_Comm_free_keyval(&keyval);
    PMPI_Comm_free_keyval(&self_keyval);
}

/* Node, rails, leaders and segment. Collective over comm; every rank returns
 * the same `usable`. */
static void state_setup(har_state_t *st)
{
    MPI_Comm comm = st->comm, shared, leaders;
    int size, ok = 1;
    PMPI_Comm_rank(comm, &st->rank);
    PMPI_Comm_size(comm, &size);
    har_algo_cfg_local(&st->cfg);
    PMPI_Bcast(&st->cfg, (int)sizeof st->cfg, MPI_BYTE, 0, comm);

    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, st->rank, MPI_INFO_NULL, &shared);
    int shared_rank;
    PMPI_Comm_rank(shared, &shared_rank);
    if (st->cfg.node_size > 0) {
        PMPI_Comm_split(shared, (int)(shared_rank / st->cfg.node_size), st->rank, &st->node_comm);
        PMPI_Comm_free(&shared);
    } else {
        st->node_comm = shared;
    }
    PMPI_Comm_rank(st->node_comm, &st->local_rank);
    PMPI_Comm_size(st->node_comm, &st->local_size);
    PMPI_Comm_split(comm, st->local_rank == 0 ? 0 : MPI_UNDEFINED, st->rank, &leaders);
    if (st->local_rank == 0) {
        PMPI_Comm_rank(leaders, &st->node);
        PMPI_Comm_size(leaders, &st->nnodes);
    }
    int node_info[2] = {st->node, st->nnodes};
    PMPI_Bcast(node_info, 2, MPI_INT, 0, st->node_comm);
    st->node = node_info[0];
    st->nnodes = node_info[1];
    int sizes[2] = {-st->local_size, st->local_size};  /* min and max in one call */
    PMPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, comm);
    st->uniform = -sizes[0] == sizes[1];
    if (st->nnodes > 1 && st->uniform)
        PMPI_Comm_split(comm, st->local_rank, st->node, &st->rail_comm);
    if (st->nnodes > 1 && !st->uniform && st->local_rank == 0) st->leader_comm = leaders;
    else if (leaders != MPI_COMM_NULL) PMPI_Comm_free(&leaders);
    MPI_Comm internal[3] = {st->node_comm, st->rail_comm, st->leader_comm};
    for (int i = 0; i < 3; i++)
        if (internal[i] != MPI_COMM_NULL) PMPI_Comm_set_errhandler(internal[i], MPI_ERRORS_RETURN);

    /* The segment: local rank 0 makes it, the others map it by name. */
    pthread_mutex_lock(&lock);
    int over_cap = segments >= har_cfg.max_comms.i || st->local_size > HAR_MAX_LOCAL;
    if (!over_cap) segments++;
    pthread_mutex_unlock(&lock);
    struct { char name[56]; int ok; } seg_name = {"", 0};
    size_t slot = (size_t)st->cfg.slot_bytes;
    if (st->local_rank == 0 && !over_cap) {
        snprintf(seg_name.name, sizeof seg_name.name, "/har-%d-%u-%d", (int)getpid(),
                 __atomic_fetch_add(&seg_counter, 1, __ATOMIC_RELAXED), st->rank);
        seg_name.ok = har_seg_create(seg_name.name, st->local_size, slot) == 0;
    }
    PMPI_Bcast(&seg_name, (int)sizeof seg_name, MPI_BYTE, 0, st->node_comm);
    if (over_cap) {
        ok = 0;
        HAR_LOG(HAR_LOG_DEBUG, "no node segment: HAR_MAX_COMMS=%lld reached, or more than %d local ranks",
                har_cfg.max_comms.i, HAR_MAX_LOCAL);
    } else if (!seg_name.ok || har_seg_attach(&st->seg, seg_name.name, st->local_rank) != 0) {
        ok = 0;
        pthread_mutex_lock(&lock);
        segments--;
        pthread_mutex_unlock(&lock);
    }
    st->scratch = malloc(slot);
    if (!st->scratch) ok = 0;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    /* Everyone has mapped it (or given up): the name can go, so that a
     * crash leaves nothing behind in /dev/shm. */
    if (st->local_rank == 0 && seg_name.ok) har_seg_unlink(seg_name.name);
    st->usable = ok;
    if (!ok) {
        release_segment(st);
        if (st->rank == 0)
            har_log(HAR_LOG_WARN, "node segment could not be set up on every rank; "
                    "this communicator's all-reduces go to the MPI");
        return;
    }
    /* Leader mode keeps device buffers on the host segment: no device
     * segment to hold (the test is the same on every rank). */
    if (st->nnodes == 1 || st->uniform)
        st->dev = har_devseg_create(st->node_comm, (size_t)st->cfg.device_slot_bytes);
    HAR_LOG(HAR_LOG_DEBUG, "communicator of %d ranks: node %d of %d, local rank %d of %d, %s, segment %zu bytes",
            size, st->node, st->nnodes, st->local_rank, st->local_size,
            st->nnodes == 1 ? "one node" : st->uniform ? "rails" : "leader",
            har_seg_bytes(st->local_size, slot));
}

static har_state_t *state_get(MPI_Comm comm)
{
    har_state_t *st;
    int found = 0;
    free_doomed();
    if (PMPI_Comm_get_attr(comm, keyval, &st, &found) != MPI_SUCCESS) return NULL;
    if (found) return st;
    st = calloc(1, sizeof *st);
    if (!st) {
        /* The other ranks are about to set up collectively: declining here
         * alone would deadlock them. */
        har_log(HAR_LOG_ERROR, "out of memory for a communicator's state");
        PMPI_Abort(comm, MPI_ERR_NO_MEM);
    }
    st->comm = comm;
    st->node_comm = st->rail_comm = st->leader_comm = MPI_COMM_NULL;
    int inter = 0, size = 1;
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter) PMPI_Comm_size(comm, &size);
    /* Both facts are the same on every rank: no collective needed to agree. */
    if (!inter && size > 1) state_setup(st);
    pthread_mutex_lock(&lock);
    st->next = live;
    if (live) live->prev = st;
    live = st;
    pthread_mutex_unlock(&lock);
    PMPI_Comm_set_attr(comm, keyval, st);
    return st;
}

/* ---- one chunk through the node segment ---------------------------------- */

typedef struct {
    har_state_t *st;
    const char *in;
    char *out;
    size_t n, elem;
    har_reduce_fn fn;
    MPI_Datatype type;
    MPI_Op op;
    har_mem_kind_t in_kind, out_kind;
} chunk_t;

/* Slot (host) to the output buffer, whatever its kind. */
static int copy_out(const chunk_t *c, char *dst, const char *slot, size_t bytes)
{
    return har_mem_copy_kinds(dst, c->out_kind, slot, HAR_MEM_HOST, bytes) == 0 ? MPI_SUCCESS
                                                                                : har_error_code(HAR_ERR_CUDA);
}

static int wait_code(har_wait_rc_t rc)
{
    static const har_error_t errs[] = {0, HAR_ERR_PEER_DEAD, HAR_ERR_TIMEOUT, HAR_ERR_PEER_FAILED};
    return rc == HAR_WAIT_OK ? MPI_SUCCESS : har_error_code(errs[rc]);
}

static int wait_all(har_state_t *st, const char *step)
{
    har_wait_ctx_t ctx = {step, st->rank, st->node, st->cfg.timeout};
    return wait_code(har_seg_wait_all(&st->seg, st->seg.my_epoch, &ctx));
}

static int wait_one(har_state_t *st, int peer, const char *step)
{
    har_wait_ctx_t ctx = {step, st->rank, st->node, st->cfg.timeout};
    return wait_code(har_seg_wait(&st->seg, peer, st->seg.my_epoch, &ctx));
}

/* Put this rank's input in its slot, and wait until every local rank has. */
static int arrive(const chunk_t *c, char *slot)
{
    if (har_mem_copy_kinds(slot, HAR_MEM_HOST, c->in, c->in_kind, c->n * c->elem) != 0)
        return har_error_code(HAR_ERR_CUDA);
    har_seg_signal(&c->st->seg);
    return wait_all(c->st, "input");
}

/* Every rank reduces the whole vector, in rank order, from all slots. */
static int one_shot(const chunk_t *c, unsigned parity)
{
    har_state_t *st = c->st;
    int rc = arrive(c, har_seg_slot(&st->seg, st->local_rank, parity));
    if (rc != MPI_SUCCESS) return rc;
    size_t bytes = c->n * c->elem;
    char *acc = c->out_kind == HAR_MEM_HOST ? c->out : st->scratch;
    char *src[HAR_MAX_LOCAL];
    for (int r = 1; r < st->local_size; r++) src[r - 1] = har_seg_slot(&st->seg, r, parity);
    memcpy(acc, har_seg_slot(&st->seg, 0, parity), bytes);
    har_reduce_many(c->fn, c->elem, acc, src, st->local_size - 1, c->n, st->local_size);
    return acc == c->out ? MPI_SUCCESS : copy_out(c, c->out, acc, bytes);
}

/* Inter-node step on a reduced block: ring or the MPI's all-reduce. */
static int inter_node(const chunk_t *c, MPI_Comm across, char *data, size_t n, char *tmp)
{
    if (c->st->cfg.inter_mpi) return PMPI_Allreduce(MPI_IN_PLACE, data, (int)n, c->type, c->op, across);
    return har_ring_allreduce(data, n, c->elem, c->fn, across, tmp, c->st->cfg.timeout);
}

/* Which paths serve the inter-node step, by plan: every rank reports the
 * same paths for the same call, even one whose shard is empty. */
static unsigned inter_paths(const har_state_t *st)
{
    if (st->nnodes == 1) return 0;
    return (st->uniform ? HAR_BIT(RAILS) : HAR_BIT(LEADER)) |
           (st->cfg.inter_mpi ? HAR_BIT(INTER_MPI) : HAR_BIT(RING));
}

/* Reduce-scatter: local rank i reduces shard i; inter-node step on it (rails)
 * or on the whole vector (leader); all-gather of finished shards. */
static int two_shot(const chunk_t *c, unsigned parity)
{
    har_state_t *st = c->st;
    har_seg_t *seg = &st->seg;
    int me = st->local_rank, L = st->local_size;
    char *mine = har_seg_slot(seg, me, parity);
    int rc = arrive(c, mine);
    if (rc != MPI_SUCCESS) return rc;

    size_t off, len;
    har_shard(c->n, c->elem, L, me, &off, &len);
    char *shard = mine + off * c->elem;
    /* Own input first, then the others in rank order: a fixed order, and
     * each shard is reduced by one rank only, so results match everywhere. */
    char *src[HAR_MAX_LOCAL];
    int nsrc = 0;
    for (int r = 0; r < L; r++)
        if (r != me) src[nsrc++] = har_seg_slot(seg, r, parity) + off * c->elem;
    har_reduce_many(c->fn, c->elem, shard, src, nsrc, len, L);
    if (st->rail_comm != MPI_COMM_NULL && len > 0 &&
        (rc = inter_node(c, st->rail_comm, shard, len, st->scratch)) != MPI_SUCCESS)
        return rc;
    har_seg_signal(seg);

    if (st->nnodes > 1 && !st->uniform) {
        /* Leader mode: rank 0 carries the node's vector across nodes and
         * leaves the result in its own slot (nobody reads its input now). */
        if (me == 0) {
            if ((rc = wait_all(st, "shard")) != MPI_SUCCESS) return rc;
            for (int r = 1; r < L; r++) {
                har_shard(c->n, c->elem, L, r, &off, &len);
                memcpy(mine + off * c->elem, har_seg_slot(seg, r, parity) + off * c->elem, len * c->elem);
            }
            if ((rc = inter_node(c, st->leader_comm, mine, c->n, st->scratch)) != MPI_SUCCESS) return rc;
        }
        har_seg_signal(seg);
        if (me != 0 && (rc = wait_one(st, 0, "leader")) != MPI_SUCCESS) return rc;
        return copy_out(c, c->out, har_seg_slot(seg, 0, parity), c->n * c->elem);
    }

    if ((rc = wait_all(st, "shard")) != MPI_SUCCESS) return rc;
    for (int r = 0; r < L; r++) {
        har_shard(c->n, c->elem, L, r, &off, &len);
        if ((rc = copy_out(c, c->out + off * c->elem, har_seg_slot(seg, r, parity) + off * c->elem,
                           len * c->elem)) != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* ---- device buffers through the CUDA IPC segment ------------------------ */

typedef struct {
    const chunk_t *c;
} dev_ctx_t;

static int dev_inter(void *ctx, char *shard, size_t n, char *tmp)
{
    const chunk_t *c = ((dev_ctx_t *)ctx)->c;
    return inter_node(c, c->st->rail_comm, shard, n, tmp);
}

static int dev_check_peers(void *ctx, double started)
{
    dev_ctx_t *d = ctx;
    har_wait_ctx_t w = {"device", d->c->st->rank, d->c->st->node, d->c->st->cfg.timeout};
    return wait_code(har_seg_check_peers(&d->c->st->seg, started, &w));
}

/* Step 0: every local rank says whether both its buffers are device memory;
 * the node then agrees, with no MPI call, whether the kernels serve it. */
static int arrive_kinds(har_state_t *st, const chunk_t *c, int *all_device)
{
    int mine = c->in_kind == HAR_MEM_DEVICE && c->out_kind == HAR_MEM_DEVICE && har_devseg_current(st->dev);
    atomic_store_explicit(&har_seg_ctl(&st->seg, st->local_rank)->kind, mine, memory_order_relaxed);
    har_seg_signal(&st->seg);
    int rc = wait_all(st, "arrival");
    *all_device = 1;
    for (int r = 0; r < st->local_size; r++)
        *all_device &= atomic_load_explicit(&har_seg_ctl(&st->seg, r)->kind, memory_order_relaxed) == 1;
    return rc;
}

/* Chunk size of a path. With several nodes, the rails pair ranks of nodes
 * that may take different paths (memory kinds agree only within a node), so
 * both paths then chunk alike, from settings every rank shares. */
static long long chunk_bytes(const har_state_t *st, int device)
{
    long long host = st->cfg.slot_bytes, dev = (st->cfg.device_slot_bytes + 4095) / 4096 * 4096;
    if (st->nnodes > 1) return host < dev ? host : dev;
    return device ? dev : host;
}

/* The call through har's kernels or NCCL: every local rank has device
 * buffers on its own GPU. */
static int device_call(har_state_t *st, const chunk_t *c, size_t count, har_reduce_t red, har_choice_t ch,
                       unsigned *paths)
{
    dev_ctx_t ctx = {c};
    har_dev_call_t call = {c->in, c->out, count, c->elem, har_chunk_elems((size_t)chunk_bytes(st, 1), c->elem),
                           red.dev_type, red.dev_op, ch.one_shot, &st->chunk_seq,
                           st->nnodes > 1 ? dev_inter : NULL, dev_check_peers, &ctx};
    if (ch.algo == HAR_ALGO_NCCL) {
        *paths |= HAR_BIT(NCCL);
        return har_devseg_nccl_allreduce(st->dev, &call);
    }
    *paths |= HAR_BIT(IPC) | (ch.one_shot ? HAR_BIT(ONE_SHOT) : HAR_BIT(TWO_SHOT)) | inter_paths(st);
    return har_devseg_allreduce(st->dev, &call);
}

/* The call through the host segment, chunk by chunk. */
static int host_call(har_state_t *st, const chunk_t *c, size_t count, har_choice_t ch, unsigned *paths)
{
    size_t chunk = har_chunk_elems((size_t)chunk_bytes(st, 0), c->elem);
    int rc = MPI_SUCCESS;
    *paths |= HAR_BIT(HOST_SEGMENT) | (ch.one_shot ? HAR_BIT(ONE_SHOT) : HAR_BIT(TWO_SHOT)) | inter_paths(st);
    for (size_t done = 0; done < count && rc == MPI_SUCCESS; done += chunk) {
        chunk_t part = *c;
        part.n = count - done < chunk ? count - done : chunk;
        part.in = c->in + done * c->elem;
        part.out = c->out + done * c->elem;
        unsigned parity = st->chunk_seq++ & 1;
        rc = ch.one_shot ? one_shot(&part, parity) : two_shot(&part, parity);
    }
    return rc;
}

int har_hier_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, har_reduce_t red,
                       MPI_Op op, MPI_Comm comm, unsigned *paths)
{
    har_state_t *st = state_get(comm);
    if (!st || !st->usable) return HAR_DECLINED;
    if (st->failed || atomic_load(&st->seg.hdr->failed)) {
        /* A call failed after peers were involved (death, time-out). Ranks
         * cannot tell which calls their peers completed, so handing later
         * calls to the MPI could pair different calls and mix their data:
         * every later all-reduce on this communicator fails instead. */
        if (!st->failed)
            har_log(HAR_LOG_ERROR, "rank %d (node %d): a local peer reported a failure; all-reduces on this "
                    "communicator fail from now on", st->rank, st->node);
        st->failed = 1;
        return har_error_raise(comm, HAR_ERR_PEER_FAILED);
    }
    size_t bytes = (size_t)count * red.elem_size;
    if (bytes < (size_t)st->cfg.min_bytes || bytes > (size_t)st->cfg.max_bytes) return HAR_DECLINED;

    const char *in = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    har_mem_kind_t out_kind = har_mem_kind(rbuf);  /* one driver query per buffer, in place or not */
    chunk_t c = {st, in, rbuf, (size_t)count, red.elem_size, red.fn, type, op,
                 in == rbuf ? out_kind : har_mem_kind(in), out_kind};
    int rc = MPI_SUCCESS, all_device = 0;
    /* Leader mode keeps to the host segment: its leader carries the whole
     * vector, which the device kernels do not split that way. */
    if (st->dev && red.dev_type != HAR_DT_NONE && red.dev_op != HAR_OP_NONE && (st->nnodes == 1 || st->uniform))
        rc = arrive_kinds(st, &c, &all_device);
    if (rc == MPI_SUCCESS) {
        /* Everything below is the same on every local rank: they agreed on
         * all_device at arrival, and the rest is shared. */
        unsigned avail = 0;
        if (all_device) {
            avail |= HAR_ALGO_BIT(HOST_SEGMENT);
            if (har_devseg_nccl_candidate(st->dev, red.dev_type, red.dev_op)) avail |= HAR_ALGO_BIT(NCCL);
        }
        avail |= HAR_ALGO_BIT(ONE_SHOT) | HAR_ALGO_BIT(MPI);  /* har_choose keeps them to one node */
        int forced = har_forced_algo(&st->cfg);
        har_choice_t ch = har_choose(bytes, st->local_size, st->nnodes, all_device, avail, forced, &st->cfg);
        if (ch.algo == HAR_ALGO_NCCL && !har_devseg_nccl_ready(st->dev, st->node_comm))
            ch = har_choose(bytes, st->local_size, st->nnodes, all_device, avail & ~HAR_ALGO_BIT(NCCL), forced,
                            &st->cfg);
        if (ch.algo == HAR_ALGO_MPI) return HAR_DECLINED;  /* every local rank declines after the same arrival */
        if (all_device && ch.algo != HAR_ALGO_HOST_SEGMENT) rc = device_call(st, &c, (size_t)count, red, ch, paths);
        else rc = host_call(st, &c, (size_t)count, ch, paths);
    }
    if (rc != MPI_SUCCESS) {
        /* Peers may be stuck or gone: tell the local ones, and fail every
         * later call here (see above). */
        har_seg_fail(&st->seg);
        st->failed = 1;
        har_log(HAR_LOG_ERROR, "rank %d: all-reduces on this communicator fail from now on", st->rank);
        PMPI_Comm_call_errhandler(comm, rc);
    }
    return rc;
}
