/* Bounded waits, failures and agreements on a node (failure.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "node/node.h"
#include "core/config.h"
#include "core/fiber.h"
#include "core/log.h"
#include "core/test.h"
#include "host/reduce.h"

#define NOTICE_TAG 0x6173  /* har's own communicators carry nothing else but the ring's */

static pid_t launcher;

void har_node_init(void) { launcher = getppid(); }

/* The launcher's daemon is this process's parent: when it is gone, so is
 * the job, and nobody will come to any wait. */
static int launcher_gone(void) { return launcher > 1 && getppid() != launcher; }

/* Is local rank r's process still there? Only within one PID namespace,
 * where pids mean the same. */
static int pid_alive(const har_node_t *node, int r)
{
    const har_peer_t *me = &node->peers[node->local_rank], *p = &node->peers[r];
    if (p->pid_ns != me->pid_ns || p->pid <= 0) return 1;
    return kill(p->pid, 0) == 0 || errno != ESRCH;
}

/* HAR_TIMEOUT: rank 0's once the settings are shared, this rank's before. */
static double timeout_of(const har_node_t *node) { return node->set ? node->set->timeout : HAR_CFG(timeout).d; }

static void record(har_node_t *node, const har_failure_t *why);

/* The failure of call `call` (a rank's calls are numbered alike on its
 * node: har_comm_fail tells by the number which call a failure is
 * about), blaming a rank named as in har_node_blame. */
static void blame_call(har_node_t *node, uint64_t call, har_status_t st, int rank, int world_rank, const char *host,
                       const char *step)
{
    har_failure_t why;
    memset(&why, 0, sizeof why);
    why.status = st;
    why.culprit = rank;
    why.culprit_world = world_rank;
    why.reporter = node->rank;
    why.call = call;
    snprintf(why.step, sizeof why.step, "%s", step);
    snprintf(why.host, sizeof why.host, "%s", host);
    snprintf(why.detail, sizeof why.detail, "%s", har_note_take());
    record(node, &why);
}

void har_node_fail_call(har_node_t *node, uint64_t call, har_status_t st, int culprit, const char *step)
{
    /* A time-out with no one peer to blame (a set-up exchange) names nobody. */
    int who = culprit >= 0 ? culprit : st == HAR_ERR_TIMEOUT ? -1 : node->local_rank;
    int rank = who < 0 ? -1 : node->peers ? node->peers[who].comm_rank : who == node->local_rank ? node->rank : -1;
    blame_call(node, call, st, rank, who >= 0 && node->peers ? node->peers[who].world_rank : -1, har_hostname(),
               step);
}

void har_node_fail(har_node_t *node, har_status_t st, int culprit, const char *step)
{
    har_node_fail_call(node, node->call, st, culprit, step);
}

har_status_t har_node_calls_differ(har_node_t *node, uint64_t no, int r0, const har_arrival_t *a0, int r1,
                                   const har_arrival_t *a1, int culprit, const char *step)
{
    har_status_t st = har_node_arrival_differs(a0, a1);
    char t0[96], t1[96];
    har_note("MPI_Allreduce differs between ranks: rank %d (world rank %d) %s, rank %d (world rank %d) %s",
             node->peers[r0].comm_rank, node->peers[r0].world_rank,
             har_host_reduce_text(a0->count, a0->type, a0->op, a0->call, t0, sizeof t0), node->peers[r1].comm_rank,
             node->peers[r1].world_rank, har_host_reduce_text(a1->count, a1->type, a1->op, a1->call, t1, sizeof t1));
    /* Recorded as call no's failure, whichever call found it (a later call
     * may find an earlier started one's record, and the watch of queued
     * calls finds theirs on its own thread): each rank then gives that
     * call the MPI's class for it (comm/call.c, har_comm_fail). */
    har_node_fail_call(node, no, st, culprit, step);
    return st;
}

har_status_t har_node_records_differ(har_node_t *node, uint64_t no, const char *step)
{
    har_node_seg_t *seg = &node->seg;
    har_ctl_t *me = har_node_seg_ctl(seg, node->local_rank);
    const har_arrival_t *mine = &me->arrival[no & 1];
    /* This rank's epoch from its control line, not seg->my_epoch: the watch
     * of queued calls runs this beside the application's thread, which
     * signals (engines/ipc_engine.c). */
    uint64_t my_epoch = atomic_load_explicit(&me->epoch, memory_order_relaxed);
    for (int r = 0; seg->base && r < node->local_size; r++) {
        har_ctl_t *ctl = har_node_seg_ctl(seg, r);
        /* Posted: it finished the step this rank's post finished (every
         * rank takes the same steps while their calls agree). */
        if (r == node->local_rank || atomic_load_explicit(&ctl->epoch, memory_order_acquire) < my_epoch) continue;
        /* A record of a later call means that rank ended this one (its
         * non-blocking calls run up to two ahead), so it did not differ; it
         * may be writing that record now. post() writes a record's number
         * before the rest: the number read twice, the same and this call's,
         * says the copy between is this call's record whole. */
        const har_arrival_t *rec = &ctl->arrival[no & 1];
        uint32_t before = __atomic_load_n(&rec->call, __ATOMIC_ACQUIRE);
        har_arrival_t theirs = *(const volatile har_arrival_t *)rec;
        atomic_thread_fence(memory_order_acquire);
        if (before != (uint32_t)no || __atomic_load_n(&rec->call, __ATOMIC_RELAXED) != before) continue;
        if (har_node_arrival_differs(mine, &theirs) != HAR_OK)
            return har_node_calls_differ(node, no, node->local_rank, mine, r, &theirs, r, step);
    }
    return HAR_OK;
}

void har_node_blame(har_node_t *node, har_status_t st, int rank, int world_rank, const char *host, const char *step)
{
    blame_call(node, node->call, st, rank, world_rank, host, step);
}

/* Two threads of a process may find a failure at once: the application's,
 * in a call, and the watch of queued calls (engines/ipc_engine.c). Both
 * would write this rank's one failure record, which the segment's
 * compare-and-swap then publishes whole only if one writer had it. */
static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;

static void record(har_node_t *node, const har_failure_t *why)
{
    pthread_mutex_lock(&record_lock);
    if (node->seg.base) har_node_seg_fail(&node->seg, why);
    else if (!node->early && (node->early = malloc(sizeof *node->early))) *node->early = *why;  /* for the report */
    pthread_mutex_unlock(&record_lock);
}

void har_node_drop_segment(har_node_t *node)
{
    const har_failure_t *why = node->seg.base ? har_node_seg_failure(&node->seg) : NULL;
    if (why && (node->early || (node->early = malloc(sizeof *node->early)))) *node->early = *why;
    /* In order, as a rank that made the call in progress: the set-up's
     * exchange that decided to drop it is done here, and a peer still
     * waiting in it must not take the lock's going for a death. */
    if (node->seg.base) har_node_leave(node, node->call + 1);
}

const har_failure_t *har_node_record(const har_node_t *node)
{
    return node->seg.base ? har_node_seg_failure(&node->seg) : node->early;
}

int har_node_failed(const har_node_t *node) { return har_node_record(node) != NULL; }

/* The failure a notice from another node carries, made this node's own. */
static void take_notice(har_node_t *node) { record(node, &node->notice_in); }

/* Has a notice come? Tested also from segment waits: a rank may wait on
 * its local peers while the notice that would free them is addressed to it. */
static int heard(void *ctx)
{
    har_node_t *node = ctx;
    int done = 0;
    if (node->notice_req == MPI_REQUEST_NULL ||
        PMPI_Test(&node->notice_req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
        return 0;
    take_notice(node);
    return 1;
}

/* The last failure this process reported, on any communicator: a rank
 * that leaves a communicator in order says it to the peers it leaves
 * behind (they may be waiting for it because of it). */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static har_failure_t last_seen;
static int seen_any;

static int last_failure(har_failure_t *seen)
{
    pthread_mutex_lock(&seen_lock);
    int any = seen_any;
    *seen = last_seen;
    pthread_mutex_unlock(&seen_lock);
    return any;
}

void har_node_leave(har_node_t *node, uint64_t calls)
{
    har_failure_t seen;
    har_node_seg_leave(&node->seg, calls, last_failure(&seen) ? &seen : NULL);
}

void har_node_say_bye(har_node_t *node, uint64_t calls)
{
    har_failure_t seen;
    har_node_watch_bye_t bye = {calls, 0, -1, ""};
    if (last_failure(&seen)) {
        bye.seen_status = seen.status;
        bye.seen_world = seen.culprit_world;
        snprintf(bye.seen_host, sizeof bye.seen_host, "%s", seen.host);
    }
    har_node_watch_close(&node->watch, &bye);
}

static har_status_t note_local(har_node_t *node, uint64_t call, har_status_t st, int culprit, const char *step)
{
    if (st == HAR_ERR_PEER_LEFT && culprit >= 0 && node->seg.base) {
        const har_ctl_t *ctl = har_node_seg_ctl(&node->seg, culprit);
        const har_failure_t *f = &ctl->failure;
        if (atomic_load(&ctl->left) == 2 && f->culprit_world >= 0)
            har_note("before it left, it had seen that world rank %d (host %s) %s", f->culprit_world, f->host,
                     har_status_what((har_status_t)f->status));
        else if (atomic_load(&ctl->left) == 2)
            har_note("before it left, it had seen that a rank %s", har_status_what((har_status_t)f->status));
    }
    if (st != HAR_OK && st != HAR_ERR_PEER_FAILED) har_node_fail_call(node, call, st, culprit, step);
    return st;
}

har_status_t har_node_wait_all(har_node_t *node, const char *step)
{
    int culprit;
    har_status_t st = har_node_seg_wait_all(&node->seg, node->seg.my_epoch, node->set->timeout, &culprit);
    return note_local(node, node->call, st, culprit, step);
}

har_status_t har_node_wait_one(har_node_t *node, int peer, const char *step)
{
    int culprit;
    har_status_t st = har_node_seg_wait(&node->seg, peer, node->seg.my_epoch, node->set->timeout, &culprit);
    return note_local(node, node->call, st, culprit, step);
}

/* The checks of this node's ranks (`listen`: and of the notices from
 * other nodes, an MPI call), a failure recorded as call `call`'s.
 * `exchange`: the call whose MPI exchange is waited for, where a peer that
 * left after making it is not taken for gone (har_node_seg_left_after), or
 * HAR_SEG_NO_EXCHANGE. */
static har_status_t check_node(har_node_t *node, uint64_t call, double started, int listen, uint64_t exchange,
                               const char *step)
{
    int culprit = -1;
    har_status_t st = HAR_OK;
    if (launcher_gone()) {
        har_node_fail_call(node, call, HAR_ERR_PEER_DEAD, -1, "launcher");
        return HAR_ERR_PEER_DEAD;
    }
    /* The segment's locks tell of peers that attached, in any PID namespace;
     * pids tell of the others (before the segment, or before they attach). */
    double timeout = timeout_of(node);
    if (node->seg.base)  /* time-out included */
        st = har_node_seg_poll_peers(&node->seg, exchange, started, timeout, listen, &culprit);
    for (int r = 0; node->peers && st == HAR_OK && r < node->local_size; r++)
        if (r != node->local_rank && !pid_alive(node, r) &&
            !(node->seg.base && har_node_seg_left_after(&node->seg, r, exchange)))  /* left, then ended */
            st = HAR_ERR_PEER_DEAD, culprit = r;
    if (st == HAR_OK && !node->seg.base && timeout > 0 && har_node_seg_now() - started > timeout) st = HAR_ERR_TIMEOUT;
    return st == HAR_OK ? HAR_OK : note_local(node, call, st, culprit, step);
}

har_status_t har_node_poll_here(har_node_t *node, uint64_t call, double started, const char *step)
{
    return har_node_failed(node) ? HAR_ERR_PEER_FAILED
                                 : check_node(node, call, started, 0, HAR_SEG_NO_EXCHANGE, step);
}

static har_status_t node_check(har_node_t *node, double started, uint64_t exchange, const char *step)
{
    if (heard(node)) return HAR_ERR_PEER_FAILED;
    har_status_t st = check_node(node, node->call, started, 1, exchange, step);
    if (st != HAR_OK) return st;
    /* A neighbour across nodes whose process is gone, though no local peer
     * of its is left to say so. */
    const har_node_watch_bye_t *left = NULL;
    int lost = node->across ? har_node_watch_lost(&node->watch, node->call, &left) : -1;
    if (lost < 0) return HAR_OK;
    const har_across_peer_t *who = &node->across[lost];
    if (left && left->seen_status && left->seen_world >= 0)
        har_note("it told rank %d across nodes that it left before call %llu, after seeing that world rank %d "
                 "(host %s) %s", node->rank, (unsigned long long)node->call, left->seen_world, left->seen_host,
                 har_status_what((har_status_t)left->seen_status));
    else if (left)
        har_note("it told rank %d across nodes that it left before call %llu", node->rank,
                 (unsigned long long)node->call);
    else
        har_note("its connection across nodes to rank %d closed", node->rank);
    st = left ? HAR_ERR_PEER_LEFT : HAR_ERR_PEER_DEAD;
    har_node_blame(node, st, who->comm_rank, who->world_rank, who->host, step);
    return st;
}

har_status_t har_node_poll(har_node_t *node, double started, const char *step)
{
    return node_check(node, started, HAR_SEG_NO_EXCHANGE, step);
}

har_status_t har_node_poll_exchange(har_node_t *node, double started, const char *step)
{
    return node_check(node, started, node->call, step);
}

har_status_t har_node_exchange(har_node_t *node, int posted, MPI_Request *req, const char *step)
{
    if (posted == MPI_SUCCESS) return har_node_wait_partner(node, 1, req, -1, step);
    har_note("the MPI refused an exchange (code %d)", posted);
    har_node_fail(node, HAR_ERR_INTERNAL, -1, step);
    return HAR_ERR_INTERNAL;
}

har_status_t har_node_wait_partner(har_node_t *node, int n, MPI_Request *reqs, int partner, const char *step)
{
    double started = har_node_seg_now();
    /* Waiting for a rank on another node: local peers that wait for this one
     * leave the time-out to this wait, which can name that rank. */
    _Atomic uint32_t *across =
        partner >= 0 && node->seg.base ? &har_node_seg_ctl(&node->seg, node->seg.me)->waiting_across : NULL;
    har_status_t st = HAR_OK;
    int fiber = har_fiber_inside();
    unsigned long i;
    for (i = 0;; i++) {
        int done = 0;
        /* MPICH's MPI_STATUSES_IGNORE is the address 1, which GCC takes for
         * an empty array that the call would write past. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
        int rc = PMPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            PMPI_Error_string(rc, msg, &len);
            har_note("the MPI failed: %s", msg);
            har_node_fail(node, HAR_ERR_INTERNAL, -1, step);
            st = HAR_ERR_INTERNAL;
            break;
        }
        if (done) break;
#ifdef HAR_HAVE_MPIX_STREAM
        if (node->comm_has_stream) PMPIX_Stream_progress(node->comm_stream);
#endif
        /* The common case is done within microseconds; a fiber gives the
         * thread back at once instead (core/fiber.h). */
        unsigned long slow = fiber ? HAR_FIBER_PASSES : 1024, every = fiber ? HAR_FIBER_PASSES : 256;
        if (i < slow && !fiber) continue;
        if (i == slow && across) atomic_store_explicit(across, 1, memory_order_relaxed);  /* a hint: slow path only */
        struct timespec nap = {0, 50000};  /* a long wait: leave the core to the peers */
        har_fiber_pause((fiber ? i >= slow : i > 65536 && i % 256 == 0) ? &nap : NULL);
        if (i < slow || i % every) continue;
        double timeout = timeout_of(node);
        if (partner >= 0 && timeout > 0 && har_node_seg_now() - started > timeout && !har_node_failed(node)) {
            const har_across_peer_t *who = node->across ? &node->across[partner] : NULL;
            har_node_blame(node, HAR_ERR_TIMEOUT, who ? who->comm_rank : -1, who ? who->world_rank : -1,
                           who ? who->host : "?", step);
            st = HAR_ERR_TIMEOUT;
            break;
        }
        HAR_TEST_POINT("exchange-check");  /* a test holds open the window between the requests' test and the checks */
        /* A wait for a rank across nodes times out in the branch above,
         * which names that rank; the node's check reads the clock again
         * and must not win that race with a time-out that names nobody. */
        if ((st = node_check(node, partner >= 0 ? har_node_seg_now() : started, node->call, step)) != HAR_OK) break;
    }
    if (across && i >= (fiber ? HAR_FIBER_PASSES : 1024)) atomic_store_explicit(across, 0, memory_order_relaxed);
    return st;
}

void har_node_attached(har_node_t *node)
{
    node->seg.heard = heard;
    node->seg.heard_ctx = node;
}

void har_node_listen(har_node_t *node)
{
    node->notice_req = MPI_REQUEST_NULL;
    node->notice_comm = node->rail_comm != MPI_COMM_NULL ? node->rail_comm : node->leader_comm;
    if (node->notice_comm == MPI_COMM_NULL) return;
    PMPI_Irecv(&node->notice_in, (int)sizeof node->notice_in, MPI_BYTE, MPI_ANY_SOURCE, NOTICE_TAG, node->notice_comm,
               &node->notice_req);
    PMPI_Comm_rank(node->notice_comm, &node->across_rank);
    PMPI_Comm_size(node->notice_comm, &node->across_size);
}

void har_node_report(har_node_t *node)
{
    const har_failure_t *why = har_node_record(node);
    har_failure_t unknown = {HAR_ERR_PEER_FAILED, -1, -1, node->rank, node->call, "?", "", ""};
    if (!why) why = &unknown;
    pthread_mutex_lock(&seen_lock);
    last_seen = *why;
    seen_any = 1;
    pthread_mutex_unlock(&seen_lock);
    char who[96] = "a rank";
    if (why->culprit >= 0 && why->culprit_world >= 0)
        snprintf(who, sizeof who, "rank %d (world rank %d, host %s)", why->culprit, why->culprit_world, why->host);
    else if (why->culprit >= 0)
        snprintf(who, sizeof who, "rank %d", why->culprit);
    har_log(HAR_LOG_ERROR, "rank %d: %s %s (found by rank %d at step %s of call %llu%s%s); all-reduces on this "
            "communicator fail from now on", node->rank, who, har_status_what((har_status_t)why->status),
            why->reporter, why->step, (unsigned long long)why->call, why->detail[0] ? ": " : "", why->detail);
    /* Tell the other nodes, on the communicator this rank crosses nodes on:
     * they may be waiting for data that will not come. Sent once; the
     * buffer stays (a few bytes per failed communicator) since nothing
     * waits for the sends. */
    if (node->notice_comm == MPI_COMM_NULL) return;
    har_failure_t *out = malloc(sizeof *out);
    int size = 0, me = 0, dead = MPI_UNDEFINED;
    if (!out) return;
    *out = *why;
    PMPI_Comm_size(node->notice_comm, &size);
    PMPI_Comm_rank(node->notice_comm, &me);
    /* Not to the dead rank itself: a send nobody will receive stays pending
     * and can hold up the MPI's own MPI_Finalize. */
    if (why->status == HAR_ERR_PEER_DEAD && why->culprit >= 0) {
        MPI_Group all, across;
        PMPI_Comm_group(node->comm, &all);
        PMPI_Comm_group(node->notice_comm, &across);
        PMPI_Group_translate_ranks(all, 1, &why->culprit, across, &dead);
        PMPI_Group_free(&all);
        PMPI_Group_free(&across);
    }
    for (int r = 0; r < size; r++) {
        MPI_Request req;
        if (r != me && r != dead &&
            PMPI_Isend(out, (int)sizeof *out, MPI_BYTE, r, NOTICE_TAG, node->notice_comm, &req) == MPI_SUCCESS)
            PMPI_Request_free(&req);
    }
}

int har_node_agree(har_node_t *node, int ok, int quiet, const char *what, const char *why, const char *consequence)
{
    struct { int ok, rank; } mine = {ok ? 1 : 0, node->local_rank}, least = {0, 0};
    MPI_Request req;
    if (har_node_exchange(node, PMPI_Iallreduce(&mine, &least, 1, MPI_2INT, MPI_MINLOC, node->node_comm, &req), &req,
                          what) != HAR_OK)
        return 0;  /* recorded: the call fails */
    const char *note = har_note_take();
    if (!least.ok && least.rank == node->local_rank) {
        if (quiet) HAR_LOG(HAR_LOG_DEBUG, "%s: %s%s%s (local rank %d of node %d); %s", what, why, note[0] ? ": " : "",
                           note, node->local_rank, node->node, consequence);
        else har_log(HAR_LOG_WARN, "%s: %s%s%s (local rank %d of node %d); %s", what, why, note[0] ? ": " : "", note,
                     node->local_rank, node->node, consequence);
    }
    return least.ok;
}
