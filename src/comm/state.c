/* Per-communicator state (state.h): set-up, lifetime, release.
 *
 * Set-up exchanges are non-blocking requests waited for by the node's
 * bounded wait (node.h), except the communicator splits, which MPI offers
 * only blocking. The delete callback makes no MPI call: it unmaps the
 * segment, releases the engines and leaves har's internal communicators
 * (and the receive of failure notices) on a list that the next har entry
 * frees. */
#define _GNU_SOURCE  /* sched_getaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "comm/call.h"
#include "core/fiber.h"
#include "core/launcher.h"
#include "node/machine.h"
#include "node/share.h"
#include "core/log.h"
#include "core/test.h"
#include "inter/inter.h"

static int keyval = MPI_KEYVAL_INVALID, self_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static har_comm_t *live;            /* every state, under lock */
static int segments;                /* states holding a segment, under lock */
static int finalizing;              /* har_comm_finalize has met the local peers */
/* What released states leave to free with MPI calls, under lock. */
static struct { MPI_Comm *comms; MPI_Request *reqs; size_t ncomms, nreqs, cap; } doomed;

/* A segment no longer counted against HAR_MAX_COMMS. */
static void uncount_segment(void)
{
    pthread_mutex_lock(&lock);
    segments--;
    pthread_mutex_unlock(&lock);
}

/* Lets go of the segment in order, having made `calls` calls (har_node_leave). */
static void release_segment(har_comm_t *c, uint64_t calls)
{
    if (!c->node.seg.base) return;
    har_node_leave(&c->node, calls);
    uncount_segment();
}

/* Must this rank meet its local peers before its device memory goes? Their
 * kernels may still read it, unless the communicator is failed or unused. */
static int must_meet(const har_comm_t *c)
{
    if (c->mode != HAR_COMM_SERVED) return 0;
    for (int e = 0; e < HAR_PATH_COUNT; e++)
        if (c->eng[e].impl) return 1;  /* a device engine: the host engine keeps none */
    return 0;
}

/* Leaves an MPI object for free_doomed (no MPI call here). */
static void doom(MPI_Comm comm, MPI_Request req)
{
    if (doomed.ncomms == doomed.cap || doomed.nreqs == doomed.cap) {
        size_t cap = doomed.cap ? 2 * doomed.cap : 16;
        MPI_Comm *comms = realloc(doomed.comms, cap * sizeof *comms);
        if (comms) doomed.comms = comms;
        MPI_Request *reqs = realloc(doomed.reqs, cap * sizeof *reqs);
        if (reqs) doomed.reqs = reqs;
        if (!comms || !reqs) return;  /* leaks a handle, not memory we own */
        doomed.cap = cap;
    }
    if (comm != MPI_COMM_NULL) doomed.comms[doomed.ncomms++] = comm;
    if (req != MPI_REQUEST_NULL) doomed.reqs[doomed.nreqs++] = req;
}

static void state_free(har_comm_t *c)
{
    har_node_t *node = &c->node;
    HAR_TEST_POINT("free");
    har_comm_end_open(c, !finalizing);  /* a free with calls still running: they end first */
    if (must_meet(c) && !finalizing) {  /* on the host segment (MPI_Comm_free is collective) */
        har_node_seg_signal(&node->seg);
        if (har_node_wait_all(node, "free") != HAR_OK) c->mode = HAR_COMM_FAILED;
    }
    /* A failed call leaves MPI transfers that cancelling cannot stop (a
     * receive already matched, a send under way) into har's own memory:
     * the segment, the scratch, the ring's messages, an engine's buffers,
     * the state itself (a failure notice's receive). A failed
     * communicator's memory therefore stays until the process ends. */
    har_node_say_bye(node, c->calls);  /* in order: a neighbour's wait in a later call fails, saying it left */
    int keep = c->mode == HAR_COMM_FAILED;
    for (int e = 0; !keep && e < HAR_PATH_COUNT; e++)
        if (c->eng[e].impl) har_engines[e]->destroy(c->eng[e].impl);
    if (!keep) {
        har_cuda_gpu_release(&c->gpu);
        release_segment(c, c->calls);
        har_inter_release(node);
        free(node->scratch);
        free(node->ring_msgs);
        free(node->across);
        free(node->peers);
        free(node->early);
    } else if (node->seg.base) {
        uncount_segment();
    }
    pthread_mutex_lock(&lock);
    doom(MPI_COMM_NULL, node->notice_req);
    doom(node->node_comm, MPI_REQUEST_NULL);
    doom(node->rail_comm, MPI_REQUEST_NULL);
    doom(node->leader_comm, MPI_REQUEST_NULL);
    if (c->prev) c->prev->next = c->next;
    else if (live == c) live = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&lock);
    if (!keep) free(c);
}

static int delete_cb(MPI_Comm comm, int kv, void *attr, void *extra)
{
    (void)comm; (void)kv; (void)extra;
    state_free(attr);
    return MPI_SUCCESS;
}

/* Receives and drops the messages peers sent on `comm` that nobody took
 * (blocks of a call that failed part-way): MPICH 5 refuses to free a
 * communicator that still has unmatched messages, and aborts. 0 if one
 * did not arrive within a second (its sender gone): then the communicator
 * is left as it is. */
static int drain(MPI_Comm comm)
{
    for (;;) {
        int flag = 0, n = 0, done = 0;
        MPI_Message msg;
        MPI_Status st;
        MPI_Request req;
        if (PMPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &st) != MPI_SUCCESS) return 0;
        if (!flag) return 1;
        PMPI_Get_count(&st, MPI_BYTE, &n);
        char *buf = malloc(n > 0 ? (size_t)n : 1);
        if (!buf || PMPI_Imrecv(buf, n, MPI_BYTE, &msg, &req) != MPI_SUCCESS) return 0;
        for (double t0 = PMPI_Wtime(); !done && PMPI_Wtime() - t0 < 1.0;)
            if (PMPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
        if (!done) return 0;  /* the buffer stays with the request */
        free(buf);
    }
}

/* Cancels and frees what released states left (MPI_Comm_free is local in
 * practice, so doing it later on one rank is safe). In MPI_Finalize the
 * communicators stay for the MPI to free: a peer still in a call this rank
 * left (an erroneous program, or one whose call failed) may send on them
 * after any drain, and MPICH 5 aborts the freeing of a communicator with
 * an unmatched message, where its MPI_Finalize does not mind one. */
static void free_doomed(void)
{
    if (!__atomic_load_n(&doomed.ncomms, __ATOMIC_RELAXED) && !__atomic_load_n(&doomed.nreqs, __ATOMIC_RELAXED))
        return;  /* the per-call case: nothing to do */
    pthread_mutex_lock(&lock);
    MPI_Comm *comms = doomed.comms;
    MPI_Request *reqs = doomed.reqs;
    size_t ncomms = doomed.ncomms, nreqs = doomed.nreqs;
    memset(&doomed, 0, sizeof doomed);
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < nreqs; i++) {
        PMPI_Cancel(&reqs[i]);
        PMPI_Request_free(&reqs[i]);
    }
    for (size_t i = 0; i < ncomms && !finalizing; i++)
        if (drain(comms[i])) PMPI_Comm_free(&comms[i]);
    free(comms);
    free(reqs);
}

/* Backstop when MPI_Finalize bypassed our wrapper: MPI deletes
 * MPI_COMM_SELF's attributes first thing in MPI_Finalize. */
static int self_delete_cb(MPI_Comm comm, int kv, void *attr, void *extra)
{
    (void)comm; (void)kv; (void)attr; (void)extra;
    har_comm_progress_stop();  /* no call of its into the MPI after this */
    har_launcher_stop();
    pthread_mutex_lock(&lock);
    for (har_comm_t *c = live; c; c = c->next) {
        har_node_say_bye(&c->node, c->calls);  /* as state_free: neighbours across nodes hear it left, not died */
        if (c->mode == HAR_COMM_FAILED) continue;  /* its memory stays: see state_free */
        c->mode = HAR_COMM_FORWARDED;  /* nothing may touch the segments from now on */
        if (c->node.seg.base) {
            har_node_leave(&c->node, c->calls);
            segments--;
        }
    }
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}

void har_comm_init(void)
{
    har_fiber_set_progress(har_comm_progress);  /* har's blocking waits move the started calls across nodes on */
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cb, &keyval, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_cb, &self_keyval, NULL);
    PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL);
}

void har_comm_finalize(void)
{
    /* Device memory may be read by local peers' kernels until they are done
     * with their last call: meet the local peers of every communicator that
     * holds device engines, all signals first and then all waits, so that
     * ranks that list their communicators in different orders cannot wait on
     * each other. Each wait is bounded like any other (a dead peer, the
     * launcher gone, HAR_TIMEOUT): MPI_Finalize does not hang after a death. */
    pthread_mutex_lock(&lock);
    for (har_comm_t *c = live; c; c = c->next)
        har_comm_end_open(c, 0);  /* requests left running (erroneous): end them */
    har_comm_progress_stop();
    har_launcher_stop();  /* every started call ended, so every launch was made */
    for (har_comm_t *c = live; c; c = c->next)
        if (must_meet(c)) har_node_seg_signal(&c->node.seg);
    for (har_comm_t *c = live; c; c = c->next)
        if (must_meet(c) && har_node_wait_all(&c->node, "finalize") != HAR_OK) c->mode = HAR_COMM_FAILED;
    finalizing = 1;
    pthread_mutex_unlock(&lock);
    HAR_TEST_POINT("finalize");
    for (;;) {
        pthread_mutex_lock(&lock);
        har_comm_t *c = live;
        pthread_mutex_unlock(&lock);
        if (!c) break;
        /* Runs delete_cb, which unlinks c; if the MPI refuses (it should
         * not), free it here so that the loop ends. */
        if (PMPI_Comm_delete_attr(c->node.comm, keyval) != MPI_SUCCESS) state_free(c);
    }
    free_doomed();
    PMPI_Comm_delete_attr(MPI_COMM_SELF, self_keyval);
    PMPI_Comm_free_keyval(&keyval);
    PMPI_Comm_free_keyval(&self_keyval);
}

/* Rank 0's settings, with its tuning table: every rank plans alike. */
static har_status_t settings_setup(har_comm_t *c)
{
    typedef struct { int ntune; har_plan_tune_row_t tune[HAR_TUNE_MAX_ROWS]; } rows_t;
    size_t values = har_config_rank0_bytes();
    char *blob = malloc(values + sizeof(rows_t));
    har_config_t *merged = malloc(sizeof *merged);
    har_status_t st = HAR_ERR_INTERNAL;
    MPI_Request req;
    if (!blob || !merged) {
        har_log(HAR_LOG_ERROR, "out of memory for a communicator's settings");
        har_node_fail(&c->node, st, -1, "settings");
    } else {
        rows_t *rows = (rows_t *)(blob + values);
        if (c->node.rank == 0) {
            static int reported;  /* a refused table is said once per process */
            char source[HAR_VAR_TEXT];
            har_config_rank0_pack(&har_cfg, blob);
            rows->ntune = har_plan_tune_load(HAR_CFG(tuning).s, rows->tune, HAR_TUNE_MAX_ROWS, source, sizeof source,
                                             !__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED));
        }
        st = har_node_exchange(&c->node, PMPI_Ibcast(blob, (int)(values + sizeof(rows_t)), MPI_BYTE, 0, c->node.comm,
                                                     &req), &req, "settings");
        if (st == HAR_OK) {
            *merged = har_cfg;
            har_config_rank0_unpack(merged, blob);
            har_plan_settings_from(merged, &c->set);
            c->set.ntune = rows->ntune;
            memcpy(c->set.tune, rows->tune, sizeof rows->tune);
            c->node.set = &c->set;
        }
    }
    free(blob);
    free(merged);
    return st;
}

/* Who every local rank is, and the node's place: one exchange. */
static har_status_t node_table(har_comm_t *c, MPI_Comm leaders)
{
    har_node_t *node = &c->node;
    typedef struct { har_peer_t peer; int node, nnodes, cores; } entry_t;
    entry_t mine, *all = calloc((size_t)node->local_size, sizeof *all);
    struct stat ns;
    cpu_set_t set;
    memset(&mine, 0, sizeof mine);
    mine.peer.comm_rank = node->rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &mine.peer.world_rank);
    mine.peer.pid = getpid();
    mine.peer.pid_ns = stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long)ns.st_ino : 0;
    if (leaders != MPI_COMM_NULL) {
        PMPI_Comm_rank(leaders, &mine.node);
        PMPI_Comm_size(leaders, &mine.nnodes);
    }
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    mine.cores = node->cores = cores / node->local_size > 1 ? cores / node->local_size : 1;
    /* node->peers stays NULL while the exchange is in flight: not known yet. */
    MPI_Request req;
    har_status_t st = all ? har_node_exchange(node, PMPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all,
                                                                    (int)sizeof mine, MPI_BYTE, node->node_comm, &req),
                                              &req, "set-up")
                          : HAR_ERR_INTERNAL;
    if (st == HAR_OK && !(node->peers = calloc((size_t)node->local_size, sizeof *node->peers))) st = HAR_ERR_INTERNAL;
    if (st == HAR_OK) {
        for (int r = 0; r < node->local_size; r++) node->peers[r] = all[r].peer;
        node->node = all[0].node;
        node->nnodes = all[0].nnodes;
        har_node_cpu_class(all[0].cores, c->host_cls, sizeof c->host_cls);
    } else if (st == HAR_ERR_INTERNAL) {
        har_node_fail(node, st, -1, "set-up");
    }
    free(all);
    return st;
}

/* Node, rails, leaders, settings and segment. Collective over comm. Every
 * rank ends in the same mode; a failure status when the ranks could not
 * even agree (a peer died, HAR_TIMEOUT). */
static har_status_t state_setup(har_comm_t *c, const har_call_t *call)
{
    har_node_t *node = &c->node;
    MPI_Comm comm = node->comm, shared, leaders;
    har_status_t st;
    PMPI_Comm_rank(comm, &node->rank);
    PMPI_Comm_size(comm, &node->size);
    if ((st = settings_setup(c)) != HAR_OK) return st;

    /* Nodes: ranks that share memory, or pretend nodes of HAR_NODE_SIZE
     * consecutive ranks of each (testing the hierarchy on one machine).
     * These splits have no non-blocking form: the README lists them. */
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, node->rank, MPI_INFO_NULL, &shared);
    if (c->set.node_size > 0) {
        int shared_rank;
        PMPI_Comm_rank(shared, &shared_rank);
        PMPI_Comm_split(shared, (int)(shared_rank / c->set.node_size), node->rank, &node->node_comm);
        PMPI_Comm_free(&shared);
    } else {
        node->node_comm = shared;
    }
    PMPI_Comm_set_errhandler(node->node_comm, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(node->node_comm, &node->local_rank);
    PMPI_Comm_size(node->node_comm, &node->local_size);
    /* Leaders: local rank 0 of each node, numbered by their rank in comm. */
    PMPI_Comm_split(comm, node->local_rank == 0 ? 0 : MPI_UNDEFINED, node->rank, &leaders);
    HAR_TEST_POINT("set-up");
    if ((st = node_table(c, leaders)) != HAR_OK) return st;
    int sizes[2] = {-node->local_size, node->local_size}, agreed[2];  /* min and max in one exchange */
    MPI_Request req;
    st = har_node_exchange(node, PMPI_Iallreduce(sizes, agreed, 2, MPI_INT, MPI_MAX, comm, &req), &req, "set-up");
    if (st != HAR_OK) return st;
    node->uniform = -agreed[0] == agreed[1];
    if (node->nnodes > 1 && node->uniform) PMPI_Comm_split(comm, node->local_rank, node->node, &node->rail_comm);
    if (node->nnodes > 1 && !node->uniform && node->local_rank == 0) node->leader_comm = leaders;
    else if (leaders != MPI_COMM_NULL) PMPI_Comm_free(&leaders);
    MPI_Comm internal[2] = {node->rail_comm, node->leader_comm};
    for (int i = 0; i < 2; i++)
        if (internal[i] != MPI_COMM_NULL) PMPI_Comm_set_errhandler(internal[i], MPI_ERRORS_RETURN);
    har_node_listen(node);

    /* The segment, within the process's budget of HAR_MAX_COMMS. */
    pthread_mutex_lock(&lock);
    int over_cap = segments >= HAR_CFG(max_comms).i || node->local_size > HAR_MAX_LOCAL, ok = 0;
    if (!over_cap) segments++;
    pthread_mutex_unlock(&lock);
    /* The cap can differ between ranks (HAR_MAX_COMMS is each rank's): agree first. */
    int room = !over_cap;
    if (!har_node_agree(node, room, 1, "node segment", "no room", "this communicator's all-reduces go to the MPI")) {
        if (har_node_failed(node)) return HAR_ERR_PEER_FAILED;
        if (room) uncount_segment();
        if (node->local_size > HAR_MAX_LOCAL)
            HAR_WARN_ONCE("a node holds more than %d ranks of a communicator: its all-reduces go to the MPI",
                          HAR_MAX_LOCAL);
        else
            HAR_WARN_ONCE("HAR_MAX_COMMS=%lld communicators of this process hold a node segment: later ones' "
                          "all-reduces go to the MPI", HAR_CFG(max_comms).i);
        c->mode = HAR_COMM_FORWARDED;
        return HAR_OK;
    }
    size_t slot = (size_t)c->set.slot_bytes;
    if ((st = har_node_share(node, slot, &ok)) != HAR_OK) return st;
    if (!ok) uncount_segment();
    node->scratch = ok ? malloc(slot) : NULL;
    /* Agreed in one exchange: whether every rank is set up, whether some
     * rank has CUDA already (then every call starts with an arrival), and,
     * where HAR_INTER=nccl asks, whether NCCL can carry blocks between nodes
     * on every rank. */
    char nccl_why[160] = "";
    int nccl_asked = node->nnodes > 1 && c->set.inter_path == HAR_PATH_INTER_NCCL;
    int mine[3] = {ok && node->scratch && har_inter_setup(node) == HAR_OK,
                   ok && har_comm_wants_cuda(node->rank, call, 0) ? -1 : 0,
                   nccl_asked && har_inter_nccl_here(nccl_why, sizeof nccl_why)}, all[3];
    st = har_node_exchange(node, PMPI_Iallreduce(mine, all, 3, MPI_INT, MPI_MIN, comm, &req), &req, "set-up");
    if (st != HAR_OK) return st;
    c->mode = all[0] ? HAR_COMM_SERVED : HAR_COMM_FORWARDED;
    c->cuda_node = all[1] < 0;
    c->nccl_across = all[2];
    if (nccl_asked && !all[2] && node->rank == 0)
        HAR_WARN_ONCE("HAR_INTER=nccl: NCCL cannot carry blocks between nodes on every rank of a communicator "
                      "(rank 0: %s); har's ring and doubling carry them",
                      nccl_why[0] ? nccl_why : "it can, another cannot");
    if (c->mode == HAR_COMM_FORWARDED) {
        /* As having made the call in progress: a peer still waiting in the
         * exchange above is not held up by this rank (har_node_seg_left_after). */
        release_segment(c, node->call + 1);
        if (node->rank == 0)
            har_log(HAR_LOG_WARN, "node segment could not be set up on every rank; "
                    "this communicator's all-reduces go to the MPI");
        return HAR_OK;
    }
    HAR_LOG(HAR_LOG_DEBUG, "communicator of %d ranks: node %d of %d, local rank %d of %d, %s, segment %zu bytes, "
            "host class %s", node->size, node->node, node->nnodes, node->local_rank, node->local_size,
            node->nnodes == 1 ? "one node" : node->uniform ? "rails" : "leader",
            har_node_seg_bytes(node->local_size, slot), c->host_cls);
    return HAR_OK;
}

void har_comm_set_up_world(int world_rank)
{
    har_call_t call;  /* what the set-up asks of a call: whether it wants CUDA */
    memset(&call, 0, sizeof call);
    call.cuda = har_cuda_loaded();
    /* Asked of every rank, whatever its own settings say: each takes part. */
    int size = 1, mine = HAR_CFG(enable).i && har_comm_wants_cuda(world_rank, &call, 0), all = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS || !all) return;
    har_status_t st;
    har_comm_t *c = har_comm_get(MPI_COMM_WORLD, &call, &st);
    if (c && st != HAR_OK) har_comm_fail(c, st);  /* as a call whose set-up failed: later calls fail */
}

har_comm_t *har_comm_peek(MPI_Comm comm)
{
    har_comm_t *c = NULL;
    int found = 0;
    if (keyval == MPI_KEYVAL_INVALID || PMPI_Comm_get_attr(comm, keyval, &c, &found) != MPI_SUCCESS) return NULL;
    return found ? c : NULL;
}

har_comm_t *har_comm_get(MPI_Comm comm, const har_call_t *call, har_status_t *st)
{
    har_comm_t *c;
    int found = 0;
    *st = HAR_OK;
    free_doomed();
    if (PMPI_Comm_get_attr(comm, keyval, &c, &found) != MPI_SUCCESS) return NULL;
    if (found) return c;
    c = calloc(1, sizeof *c);
    if (!c) {
        /* The other ranks are about to set up collectively: declining here
         * alone would deadlock them. */
        har_log(HAR_LOG_ERROR, "out of memory for a communicator's state");
        PMPI_Abort(comm, MPI_ERR_NO_MEM);
    }
    c->node.comm = comm;
#ifdef HAR_HAVE_MPIX_STREAM
    MPIX_Stream stream = MPIX_STREAM_NULL;
    c->node.comm_has_stream = PMPIX_Comm_get_stream(comm, 0, &stream) == MPI_SUCCESS && stream != MPIX_STREAM_NULL;
    c->node.comm_stream = stream;
#endif
    c->node.node_comm = c->node.rail_comm = c->node.leader_comm = c->node.notice_comm = MPI_COMM_NULL;
    c->node.notice_req = MPI_REQUEST_NULL;
    har_node_watch_none(&c->node.watch);
    int inter = 0, size = 1;
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter) PMPI_Comm_size(comm, &size);
    c->mode = HAR_COMM_FORWARDED;  /* both facts below are the same on every rank: no need to agree */
    if (!inter && size > 1) {
        /* If the ranks could not even agree, every call here fails from
         * now on, as after a failure in a call: the caller fails it. */
        *st = state_setup(c, call);
    }
    pthread_mutex_lock(&lock);
    c->next = live;
    if (live) live->prev = c;
    live = c;
    pthread_mutex_unlock(&lock);
    PMPI_Comm_set_attr(comm, keyval, c);
    return c;
}
