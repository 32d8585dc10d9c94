/* One call: arrival, plan, engines on first need, run (call.h).
 *
 * A node starts out assuming host memory everywhere: no call has an arrival
 * step of its own, a size the plan hands to the MPI makes no
 * synchronisation, and a host-segment call's first step carries its input.
 * The first rank that finds a CUDA context in its process says so in the
 * segment header, from its next call on; every local rank reads that before
 * its own next call (the call it is in has passed this rank's contribution),
 * so all switch at the same call. From then on every call starts with an
 * arrival: each rank posts where its buffers are (and its input, when the
 * plan for host memory would use the host segment, so a host call still
 * makes one synchronisation), and the node plans from what all posted. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include "comm/call.h"
#include "core/fiber.h"
#include "core/launcher.h"
#include "core/log.h"
#include "core/test.h"
#include "host/check.h"
#include "stage/stage.h"

/* What the node agreed at an arrival. */
typedef struct {
    int all_device;     /* every rank's buffers are on one GPU, the one its device engines use */
    int ctx_ranks;      /* ranks with a CUDA context for that GPU */
    int went_ahead;     /* some rank went ahead (launched with no host step): all must run its kernels */
    int wants_device;   /* some rank's non-blocking device calls wait for a set-up */
    int current_ranks;  /* ranks with a current CUDA context (before the device survey) */
    int some_device;    /* some rank's buffers are on a GPU */
    int beside;         /* some rank had another call in progress when this one began */
} agreed_t;

/* Communicators on which this process made a non-blocking device call
 * that went to the MPI because no blocking device call had set them up:
 * their next blocking calls say so at their arrival. A few: a later one
 * pushes the oldest out (whose calls then wait for a blocking device
 * call), and a handle the MPI gives a new communicator after a free only
 * makes that one set up for device buffers too. */
#define WANTING 8
static MPI_Comm wanting[WANTING];
static _Atomic int nwanting;  /* ever added; read without the lock: only whether it is 0 */
static pthread_mutex_t wanting_lock = PTHREAD_MUTEX_INITIALIZER;

/* Is comm among them (remove: and taken out)? */
static int wanted(MPI_Comm comm, int remove)
{
    int found = 0, n = atomic_load_explicit(&nwanting, memory_order_relaxed);
    if (!n) return 0;
    pthread_mutex_lock(&wanting_lock);
    for (int i = 0; i < WANTING && i < n && !found; i++)
        if (wanting[i] == comm) {
            found = 1;
            if (remove) wanting[i] = MPI_COMM_NULL;
        }
    pthread_mutex_unlock(&wanting_lock);
    return found;
}

void har_comm_want_device(MPI_Comm comm)
{
    if (wanted(comm, 0)) return;
    pthread_mutex_lock(&wanting_lock);
    int n = atomic_load_explicit(&nwanting, memory_order_relaxed);
    wanting[n % WANTING] = comm;
    atomic_store_explicit(&nwanting, n + 1, memory_order_relaxed);
    pthread_mutex_unlock(&wanting_lock);
}

/* Engines built here that may serve: set up, not yet tried, or failed once
 * and worth one more try because a rank has reported a CUDA context since. */
static unsigned engines_on_offer(const har_comm_t *c, int ctx_ranks)
{
    unsigned mask = 0;
    for (int e = 0; e < HAR_PATH_COUNT; e++) {
        const har_engine_slot_t *s = &c->eng[e];
        int open = s->state == HAR_ENGINE_UNTRIED || s->state == HAR_ENGINE_READY ||
                   (s->state == HAR_ENGINE_FAILED && !s->retried && ctx_ranks > s->ctx_ranks);
        if (har_engines[e] && open) mask |= 1u << e;
    }
    return mask;
}

/* HAR_VERBOSE=2: once per communicator, after its device survey, why each
 * device engine built here cannot serve this node's calls (the shape and
 * settings part of its rules; types and ops depend on the call). */
static void say_why_not(const har_comm_t *c, const har_plan_in_t *in)
{
    if (har_log_level < HAR_LOG_DEBUG || c->node.local_rank != 0) return;
    for (int e = 0; e < HAR_PATH_COUNT; e++) {
        const har_engine_traits_t *t = har_engine_set()->by_path[e];
        if (!t || !(t->takes & HAR_TAKES_DEVICE) || (t->takes & HAR_TAKES_HOST)) continue;
        har_plan_in_t any = *in;  /* a type and op it reduces */
        any.dev_type = HAR_DT_F32;
        any.dev_op = HAR_OP_SUM;
        any.forced = 1u << e;
        const char *why = har_plan_why_not(t, &any, &c->set);
        if (why) HAR_LOG(HAR_LOG_DEBUG, "node %d: engine %s does not serve device buffers here: %s", c->node.node,
                         har_path_name(e), why);
    }
}

int har_comm_wants_cuda(int rank, const har_call_t *call, uint64_t no)
{
#ifdef HAR_TEST_HOOKS
    char who[16];
    unsigned long long from;
    if (sscanf(HAR_CFG(test_cuda_at).s, "%15[^:]:%llu", who, &from) == 2 &&
        (strcmp(who, "*") == 0 || atoi(who) == rank) && no >= from)
        return 1;
#else
    (void)rank; (void)no;
#endif
    return call->cuda && (call->in_kind != HAR_MEM_HOST || call->out_kind != HAR_MEM_HOST || har_cuda_context_current());
}

/* Ranks whose calls differ are caught at the arrival, before any data
 * moves; this names the lowest local rank that differs from local rank 0. */
static har_status_t compare(har_node_t *node, uint64_t no)
{
    const har_arrival_t *first = &har_node_seg_ctl(&node->seg, 0)->arrival[no & 1];
    for (int r = 1; r < node->local_size; r++) {
        const har_arrival_t *a = &har_node_seg_ctl(&node->seg, r)->arrival[no & 1];
        if (har_node_arrival_differs(first, a) != HAR_OK)
            return har_node_calls_differ(node, no, 0, first, r, a, r, "arrival");
    }
    return HAR_OK;
}

/* Posts this rank's arrival record for call `no` (with `flags`) and
 * signals: the call's first step, for peers that wait at the arrival. */
static har_arrival_t *post(har_comm_t *c, const har_call_t *call, uint64_t no, unsigned flags)
{
    har_arrival_t *mine = &har_node_seg_ctl(&c->node.seg, c->node.local_rank)->arrival[no & 1];
    int on_gpu = call->gpu >= 0;
    if (!c->surveyed && call->cuda && c->node.nnodes == 1) {
        if (!on_gpu && wanted(c->node.comm, 0)) flags |= HAR_ARRIVE_WANTS_DEVICE;
        if (har_cuda_context_current()) flags |= HAR_ARRIVE_CURRENT_CTX;
    }
    if (call->beside) flags |= HAR_ARRIVE_BESIDE;
    mine->flags = (uint8_t)(flags | (on_gpu && har_cuda_context_for(call->gpu) ? HAR_ARRIVE_CTX : 0) |
                            (!c->surveyed || call->gpu == c->gpu.ordinal ? HAR_ARRIVE_SAME : 0));
    /* The number first: a peer that reads the record while this rank
     * overwrites it tells a torn copy by it (har_node_records_differ). */
    __atomic_store_n(&mine->call, (uint32_t)no, __ATOMIC_RELAXED);
    atomic_thread_fence(memory_order_release);
    mine->dev = on_gpu ? call->gpu + 1 : 0;
    har_node_arrival_of(mine, call, no);
    HAR_TEST_POINT("arrival");
    har_node_seg_signal(&c->node.seg);
    return mine;
}

/* The call's first node synchronisation: post this rank's record (and,
 * where `host` plans an engine whose first step can carry it and `load`,
 * its first chunk of input), wait for every local rank's, read theirs. */
static har_status_t arrive(har_comm_t *c, har_call_t *call, uint64_t no, const har_plan_t *host, int load,
                           agreed_t *agreed)
{
    har_node_t *node = &c->node;
    har_node_seg_t *seg = &node->seg;
    const har_engine_t *e = har_engines[host->engine];
    /* streamed: the input never enters the slot whole; bad: there is none to read */
    load = load && e && e->preload && !host->streamed && !call->bad;
    if (load) {
        har_status_t st = e->preload(node, call, host->chunk_bytes);
        if (st != HAR_OK) return st;
    }
    har_arrival_t *mine = post(c, call, no, load ? HAR_ARRIVE_LOADED : 0);
    har_status_t st = har_node_wait_all(node, "arrival");
    if (st != HAR_OK) return st;
    /* One pass over the records, each in the cache line its epoch came in. */
    int loaded = 1, same = 1, bad = -1;
    agreed->all_device = 1;
    agreed->ctx_ranks = 0;
    agreed->went_ahead = 0;
    agreed->wants_device = 0;
    agreed->current_ranks = 0;
    agreed->some_device = 0;
    agreed->beside = 0;
    for (int r = 0; r < node->local_size; r++) {
        const har_arrival_t *a = &har_node_seg_ctl(seg, r)->arrival[no & 1];
        if (a->bad && bad < 0) bad = r;
        same &= har_node_arrival_differs(a, mine) == HAR_OK;
        loaded &= (a->flags & HAR_ARRIVE_LOADED) != 0;
        agreed->all_device &= a->dev != 0 && (a->flags & HAR_ARRIVE_SAME);
        agreed->ctx_ranks += (a->flags & HAR_ARRIVE_CTX) != 0;
        agreed->went_ahead |= (a->flags & HAR_ARRIVE_AHEAD) != 0;
        agreed->wants_device |= (a->flags & HAR_ARRIVE_WANTS_DEVICE) != 0;
        agreed->current_ranks += (a->flags & HAR_ARRIVE_CURRENT_CTX) != 0;
        agreed->some_device |= a->dev != 0;
        agreed->beside |= (a->flags & HAR_ARRIVE_BESIDE) != 0;
    }
    if (bad >= 0) {
        /* Every local rank fails the call here, the other nodes by the
         * notice; the rank at fault gets the MPI's class for its buffer. */
        har_note("%s", har_node_buffers_text(har_node_seg_ctl(seg, bad)->arrival[no & 1].bad));
        har_node_fail(node, HAR_ERR_BUFFER, bad, "arrival");
        return mine->bad ? HAR_ERR_BUFFER : HAR_ERR_PEER_FAILED;
    }
    if (!same) return compare(node, no);
    call->loaded_me = load;
    call->loaded_all = loaded;
    return HAR_OK;
}

/* Sets an engine up: collective on the node, and every rank ends with the
 * same state. Engines that take device buffers need every rank's CUDA
 * context (har makes none). */
static void setup(har_comm_t *c, int e, const agreed_t *agreed)
{
    har_engine_slot_t *s = &c->eng[e];
    if (s->state == HAR_ENGINE_FAILED) s->retried = 1;
    if (!(har_engines[e]->can.takes & HAR_TAKES_HOST) && agreed->ctx_ranks < c->node.local_size) {
        char what[48];
        snprintf(what, sizeof what, "engine %s", har_path_name(e));
        har_node_agree(&c->node, 0, 0, what, "device buffers but no current CUDA context on their GPU in this thread",
                       "device buffers take another engine until a rank reports one");
        s->state = HAR_ENGINE_FAILED;
    } else {
        s->state = har_engines[e]->setup(&c->node, c->surveyed ? &c->gpu : NULL, &s->impl);
    }
    s->ctx_ranks = agreed->ctx_ranks;
}

/* The device survey (on `gpu`, which stands for this rank's buffers') and
 * the engines of the plans that go ahead, made where non-blocking device
 * calls need them (the survey and set-ups are collective steps that a
 * started call cannot make in its post): at a blocking call on host
 * buffers after a rank's non-blocking device calls went to the MPI for
 * want of them, or in the fiber of a started call (har_comm_start). Every
 * rank has a CUDA context, counted in agreed->ctx_ranks. From the next
 * call on, non-blocking calls on buffers there go ahead. */
static har_status_t set_up_for_device(har_comm_t *c, har_plan_in_t in, agreed_t *agreed, int gpu)
{
    har_node_t *node = &c->node;
    har_status_t st = har_cuda_survey(node, gpu, &c->gpu);
    if (st != HAR_OK) return st;
    c->surveyed = 1;
    wanted(node->comm, 1);
    HAR_LOG(HAR_LOG_DEBUG, "node %d: device survey and engines set up at call %llu (%s), for non-blocking device "
            "calls", node->node, (unsigned long long)node->call, har_fiber_inside() ? "a started call" : "a host call");
    in.on_device = 1;
    in.shared_gpu = c->gpu.shared_gpu;
    in.cls = c->gpu.cls;
    say_why_not(c, &in);
    /* The engines of the smallest calls and of the largest blocking ones
     * that go ahead (the same engine, as the shipped rules stand; started
     * calls up to HAR_DEVICE_START_MAX take it too unless the table picks
     * another), for a type and op the kernels reduce (this call's may not
     * be one). */
    in.dev_type = HAR_DT_F32;
    in.dev_op = HAR_OP_SUM;
    in.elem = 4;
    const uint64_t sizes[2] = {4, (uint64_t)c->set.device_ahead_max};
    for (int k = 0; k < 2; k++) {
        in.bytes = sizes[k];
        in.engines = engines_on_offer(c, agreed->ctx_ranks);
        har_plan_t plan = har_plan(&in, &c->set);
        if (plan.engine != HAR_PATH_MPI && c->eng[plan.engine].state == HAR_ENGINE_UNTRIED) setup(c, plan.engine, agreed);
        if (har_node_failed(node)) return HAR_ERR_PEER_FAILED;  /* its exchanges failed (recorded) */
    }
    return HAR_OK;
}

/* The plan for device buffers on every local rank, if it goes ahead (its
 * kernels meet on the GPU: no host step first) on an engine set up. */
static int ahead_plan(const har_comm_t *c, har_plan_in_t in, har_plan_t *plan)
{
    in.on_device = 1;
    in.shared_gpu = c->gpu.shared_gpu;
    in.cls = c->gpu.cls;
    in.engines = engines_on_offer(c, 0);
    *plan = har_plan(&in, &c->set);
    return (plan->paths & HAR_BIT(AHEAD)) && c->eng[plan->engine].state == HAR_ENGINE_READY;
}

/* What the plan of a call starts from, for host buffers everywhere. */
static har_plan_in_t plan_in(const har_comm_t *c, const har_call_t *call, unsigned forced)
{
    const har_node_t *node = &c->node;
    return (har_plan_in_t){call->bytes, call->red.elem_size, node->local_size, node->nnodes, node->uniform, 0, 0,
                           call->red.dev_type, call->red.dev_op, har_engine_set(), engines_on_offer(c, 0), forced,
                           c->host_cls, call->in_kind == HAR_MEM_HOST && call->out_kind == HAR_MEM_HOST, 0,
                           c->nccl_across, har_fiber_inside()};
}

/* The MPI's plan: it serves the call. */
static void mpi_plan(har_plan_t *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->engine = HAR_PATH_MPI;
    plan->paths = HAR_BIT(MPI);
}

/* A failed communicator fails every later call. Numbered all the same: a
 * failure heard before this call began may be about it (a rank on another
 * node found its arguments differ), and har_comm_fail tells by the
 * number. */
static int failed_before(har_comm_t *c)
{
    if (c->mode != HAR_COMM_FAILED && !har_node_failed(&c->node)) return 0;
    c->node.call = c->calls++;
    return 1;
}

struct har_comm_pending {
    har_comm_t *c;          /* NULL once ended */
    int engine;
    void *op;               /* the engine's handle */
    uint64_t no;
    har_status_t st;
    _Atomic int ended, busy;  /* busy: a test under way (one thread tests at a time) */
    /* A call across nodes: the blocking path in a fiber (core/fiber.h),
     * made when the calls before it on its communicator have ended. */
    int across;
    har_fiber_t *fiber;
    har_call_t call;        /* its copy, which the plan marks up */
    unsigned forced;
    unsigned paths;         /* its plan's, once ended */
    void *cuda_ctx;         /* the poster's current CUDA context, made current for it by the mover */
    struct har_comm_pending *next_across;
};

/* ---- Started calls across nodes ------------------------------------------
 *
 * Across nodes a started call runs the blocking path (har_comm_plan's
 * arrival, the engine's run, the ring between nodes) in a fiber, whose
 * waits give the thread back. The calls wait in this list in the order
 * they were posted; the first of each communicator runs, the others wait
 * for it: a communicator's calls take its state in turn, in the order
 * every rank posted them. Every pass (a completion call's, a wait of a
 * blocking call's, a post's) resumes each runnable one once.
 *
 * Under MPI_THREAD_MULTIPLE (HAR_PROGRESS_THREAD) the passes are the
 * mover's, a thread of har's made at the first such post: the calls then
 * move while the application computes, and its threads only look whether
 * they ended. The list's links are read and written under across_lock;
 * the fibers run outside it. */
static har_comm_pending_t *across_first, **across_last = &across_first;
static pthread_mutex_t across_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t across_posted = PTHREAD_COND_INITIALIZER;
static _Atomic int across_open;     /* in the list: read without the lock */
static _Atomic int across_busy;     /* a pass under way (one at a time) */
static struct {
    pthread_t id;
    _Atomic int running;            /* it makes every pass: no other thread does */
    int asleep, stop;               /* under across_lock */
} mover;
static __thread int on_mover;

static har_status_t plan_call(har_comm_t *c, har_call_t *call, unsigned forced, har_plan_t *plan);
static int thread_multiple(void);

/* The fiber's body: the blocking call, its failure the communicator's. */
static void run_across(void *arg)
{
    har_comm_pending_t *p = arg;
    har_comm_t *c = p->c;
    har_plan_t plan = {.engine = HAR_PATH_MPI};
    if (on_mover) har_note_clear();  /* the mover's notes are its calls' alone: none left from the last */
    har_status_t st = plan_call(c, &p->call, p->forced, &plan);
    if (st == HAR_OK && plan.engine == HAR_PATH_MPI) {
        /* The MPI is no candidate in a fiber (har_plan_in_t.progressed)
         * unless forced, which har_comm_start saw: the MPI's call on the
         * application's communicator could now come between the
         * application's own. */
        har_note("a started call on har's blocking path was planned for the MPI");
        har_node_fail(&c->node, HAR_ERR_INTERNAL, -1, "started");
        st = HAR_ERR_INTERNAL;
    }
    if (st == HAR_OK) st = har_comm_run(c, &p->call, &plan);
    har_comm_done();
    if (st != HAR_OK) st = har_comm_fail(c, st);
    p->st = st;
    p->paths = plan.paths | HAR_BIT(PROGRESSED);
}

/* May p run: is it the first of its communicator in the list? Under across_lock. */
static int runnable(const har_comm_pending_t *p)
{
    for (const har_comm_pending_t *q = across_first; q != p; q = q->next_across)
        if (q->c == p->c) return 0;
    return 1;
}

/* Under across_lock. */
static void across_remove(har_comm_pending_t *p)
{
    har_comm_pending_t **at = &across_first;
    while (*at != p) at = &(*at)->next_across;
    *at = p->next_across;
    if (across_last == &p->next_across) across_last = at;
    atomic_fetch_sub(&across_open, 1);
}

/* Resumes p once: 1 once it has ended. */
static int across_step(har_comm_pending_t *p)
{
    if (!p->fiber && !(p->fiber = har_fiber_new(run_across, p))) {
        /* It cannot begin; its peers' calls began or will: the
         * communicator fails, and they hear it. */
        p->st = har_comm_fail(p->c, HAR_ERR_INTERNAL);
        p->paths = HAR_BIT(PROGRESSED);
        return 1;
    }
    if (on_mover) har_cuda_context_restore(p->cuda_ctx);  /* none where the poster had none */
    if (!har_fiber_resume(p->fiber)) return 0;
    har_fiber_free(p->fiber);
    p->fiber = NULL;
    return 1;
}

/* One pass over the runnable calls, by the mover or (while there is
 * none) by har_comm_progress's caller; 1 where each one resumed is in a
 * long wait for its peers (the mover may sleep a little). */
static int across_pass(void)
{
    int idle = 0, resumed = 0, waiting_long = 0;
    if (!atomic_load_explicit(&across_open, memory_order_acquire) || har_fiber_inside() ||
        !atomic_compare_exchange_strong(&across_busy, &idle, 1))
        return 0;
    pthread_mutex_lock(&across_lock);
    for (har_comm_pending_t *p = across_first, *next; p; p = next) {
        int run = runnable(p), ended = 0;
        pthread_mutex_unlock(&across_lock);  /* only this pass removes p: it stays */
        if (run) {
            ended = across_step(p);
            resumed++;
            waiting_long += !ended && har_fiber_waits_long(p->fiber);
        }
        pthread_mutex_lock(&across_lock);
        next = p->next_across;
        if (ended) {
            p->c = NULL;
            across_remove(p);
            atomic_store_explicit(&p->ended, 1, memory_order_release);  /* its owner may free it from now on */
        }
    }
    pthread_mutex_unlock(&across_lock);
    atomic_store(&across_busy, 0);
    return resumed && waiting_long == resumed;
}

void har_comm_progress(void)
{
    /* Where the mover moves them, a caller that looks for their end gives
     * it the core instead (their waits spin: a rank's threads may share
     * one core). */
    if (atomic_load_explicit(&mover.running, memory_order_acquire) && !on_mover) {
        if (atomic_load_explicit(&across_open, memory_order_acquire)) sched_yield();
        return;
    }
    across_pass();
}

/* How long the mover keeps passing over an empty list before it sleeps
 * (a new post then wakes it, a system call and the scheduler's wake-up),
 * and how long every call it runs must have waited long before it sleeps
 * a little between passes (leaving the core to the application when a
 * peer is late, as a wait outside a fiber does). Between passes it yields
 * the core: a rank's threads may share one, and the application's
 * completion calls yield to it alike. */
#define MOVER_IDLE_NS 200000
#define MOVER_LONG_NS 2000000

static void *mover_main(void *arg)
{
    (void)arg;
    on_mover = 1;
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  /* its naps: microseconds, not the default 50 */
#endif
    struct timespec nap = {0, 20000};
    double moved = 0;  /* when a pass last found a call not in a long wait */
    pthread_mutex_lock(&across_lock);
    while (!mover.stop) {
        if (!atomic_load(&across_open)) {
            moved = 0;
            pthread_mutex_unlock(&across_lock);
            double since = har_node_seg_now();
            while (!atomic_load(&across_open) && har_node_seg_now() - since < MOVER_IDLE_NS * 1e-9) sched_yield();
            pthread_mutex_lock(&across_lock);
            if (!atomic_load(&across_open) && !mover.stop) {
                mover.asleep = 1;
                pthread_cond_wait(&across_posted, &across_lock);
                mover.asleep = 0;
            }
            continue;
        }
        pthread_mutex_unlock(&across_lock);
        double now = har_node_seg_now();
        if (!across_pass() || !moved) moved = now;
        if (now - moved > MOVER_LONG_NS * 1e-9) nanosleep(&nap, NULL);
        else sched_yield();
        pthread_mutex_lock(&across_lock);
    }
    pthread_mutex_unlock(&across_lock);
    return NULL;
}

/* The mover, made if not yet (under across_lock); 0 if it cannot be. */
static int mover_start(void)
{
    if (atomic_load(&mover.running)) return 1;
    int rc = har_thread_create(&mover.id, mover_main, NULL);
    if (rc != 0) {
        har_note("no thread to move started calls across nodes: %s", strerror(rc));
        return 0;
    }
    HAR_LOG(HAR_LOG_DEBUG, "a thread of har's moves started calls across nodes (MPI_THREAD_MULTIPLE)");
    atomic_store(&mover.running, 1);
    return 1;
}

void har_comm_progress_stop(void)
{
    pthread_mutex_lock(&across_lock);
    int running = atomic_load(&mover.running);
    mover.stop = 1;
    pthread_cond_signal(&across_posted);
    pthread_mutex_unlock(&across_lock);
    if (running) pthread_join(mover.id, NULL);
    /* A call left running (an erroneous program) is never resumed: its
     * fiber is the mover's, and no other thread may run it. */
    if (!atomic_load(&across_open)) atomic_store(&mover.running, 0);
}

int har_comm_across_to_move(void)
{
    return atomic_load_explicit(&across_open, memory_order_acquire) > 0 &&
           !atomic_load_explicit(&mover.running, memory_order_acquire);
}

/* Does comm c have a started call across nodes in the list? */
static int across_on(const har_comm_t *c)
{
    if (!atomic_load_explicit(&across_open, memory_order_acquire)) return 0;
    int on = 0;
    pthread_mutex_lock(&across_lock);
    for (const har_comm_pending_t *p = across_first; p && !on; p = p->next_across) on = p->c == c;
    pthread_mutex_unlock(&across_lock);
    return on;
}

/* Every started call across nodes on c ends (a later call on c, or c's
 * end, takes its state). `drive`: the MPI's own requests progress
 * meanwhile, as in end_older. */
static void end_across(har_comm_t *c, int drive)
{
    while (across_on(c)) {
        har_comm_progress();
        int flag;
        if (drive) PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->node.comm, &flag, MPI_STATUS_IGNORE);
    }
}

/* Ended inside the MPI's attribute callback (har_comm_end_open), the
 * calls across nodes would call the MPI from there: on this thread (their
 * fibers), or on the mover while this thread waits inside the MPI, which
 * an MPI holding one lock for the whole library there never lets happen.
 * The handle is matched by value, never handed to the MPI: a bad one is
 * for the MPI's own MPI_Comm_free to report. */
void har_comm_end_before_free(MPI_Comm comm)
{
    har_comm_t *c = NULL;
    pthread_mutex_lock(&across_lock);
    for (const har_comm_pending_t *p = across_first; p && !c; p = p->next_across)
        if (p->c->node.comm == comm) c = p->c;  /* listed: its state lives, and node.comm never changes */
    pthread_mutex_unlock(&across_lock);
    if (c) end_across(c, 1);  /* outside the MPI: its progress may be driven, as a blocking call's wait does */
}

/* A started call on a communicator across nodes: the fiber's, where every
 * rank can tell from what they share that har serves it. Its first pass
 * runs here (its arrival is posted for its peers). */
static har_status_t start_across(har_comm_t *c, const har_call_t *call, unsigned forced, har_plan_t *plan,
                                 har_comm_pending_t **pending)
{
    /* Under MPI_THREAD_MULTIPLE the passes are the mover's, or without it
     * (HAR_PROGRESS_THREAD=0) the MPI serves the call: another thread may
     * call on c meanwhile (thread level and settings are alike on every
     * rank). */
    int threaded = thread_multiple();
    if (threaded && !c->set.progress_thread) return HAR_OK;
    /* Across nodes the plan offers the MPI only where HAR_ALGO (or
     * har_set_algo) names it alone; c's state is not read here, which a
     * call on c that the mover runs may be writing. Its plan is made at
     * its arrival; `plan` stays the MPI's, and the pending call says
     * that it is har's. */
    if (forced == HAR_BIT(MPI)) return HAR_OK;
    plan->paths = 0;  /* a failure below counts the call as seen alone */
    har_comm_pending_t *p = calloc(1, sizeof *p);
    if (!p) {
        har_note("no memory for a non-blocking call");
        return HAR_ERR_INTERNAL;  /* its peers' calls go on: the caller fails the communicator */
    }
    p->c = c;
    p->across = 1;
    p->call = *call;
    p->forced = forced;
    p->cuda_ctx = threaded ? har_cuda_context_save() : NULL;
    pthread_mutex_lock(&across_lock);
    if (threaded && !mover_start()) {
        pthread_mutex_unlock(&across_lock);
        free(p);
        return HAR_ERR_INTERNAL;  /* as above */
    }
    *across_last = p;
    across_last = &p->next_across;
    atomic_fetch_add(&across_open, 1);
    if (mover.asleep) pthread_cond_signal(&across_posted);
    pthread_mutex_unlock(&across_lock);
    *pending = p;
    har_comm_progress();
    return HAR_OK;
}

static har_status_t fail_call(har_comm_t *c, har_status_t st, uint64_t no);

/* Tests p once; 1 once it has ended. A call that failed fails its
 * communicator for good, as a blocking call does. */
static int advance(har_comm_pending_t *p)
{
    if (atomic_load_explicit(&p->ended, memory_order_acquire)) return 1;
    if (p->across) {
        har_comm_progress();
        return atomic_load_explicit(&p->ended, memory_order_acquire);
    }
    int idle = 0;
    if (!atomic_compare_exchange_strong(&p->busy, &idle, 1)) return 0;
    har_status_t st;
    har_comm_t *c = p->c;
    if (!atomic_load(&p->ended) && har_engines[p->engine]->test(p->op, &st)) {
        if (c->open[p->no & 1] == p) c->open[p->no & 1] = NULL;
        if (st != HAR_OK) st = fail_call(c, st, p->no);  /* the failure is this call's */
        p->st = st;
        p->c = NULL;
        atomic_store_explicit(&p->ended, 1, memory_order_release);
    }
    atomic_store(&p->busy, 0);
    return atomic_load_explicit(&p->ended, memory_order_acquire);
}

int har_comm_pending_test(har_comm_pending_t *p, har_status_t *st)
{
    if (!advance(p)) return 0;
    *st = p->st;
    return 1;
}

int har_comm_pending_counted_late(const har_comm_pending_t *p) { return p->across; }

unsigned har_comm_pending_paths(const har_comm_pending_t *p, size_t *count)
{
    *count = p->call.count;
    return p->across ? p->paths : 0;
}

void har_comm_pending_free(har_comm_pending_t *p) { free(p); }

/* Call `no` takes the arrival record and the device slots of the call two
 * before it: that call, if still running here, ends first. `drive`: the
 * MPI's own requests progress meanwhile (a peer may need them to reach
 * that call). */
static void end_older(har_comm_t *c, uint64_t no, int drive)
{
    har_comm_pending_t *p;
    while ((p = c->open[no & 1]) && !advance(p)) {
        int flag;
        if (drive) PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->node.comm, &flag, MPI_STATUS_IGNORE);
    }
}

void har_comm_end_open(har_comm_t *c, int in_free)
{
    if (in_free && across_on(c))
        HAR_LOG(HAR_LOG_DEBUG, "a communicator freed with started calls running: they end inside the MPI's free");
    end_across(c, 0);  /* whatever the mode: a failed communicator's fail at their next pass */
    if (c->mode != HAR_COMM_SERVED) return;
    end_older(c, c->calls, 0);
    end_older(c, c->calls + 1, 0);
}

/* Two calls of one process at once on kernels that wait on the GPU for
 * their peers can wait for each other across ranks: a thread held in a
 * cudaFree (it waits for the whole GPU, so for one call's kernels) or in
 * the launch after it cannot launch the other call's kernels, which a
 * peer's kernels wait for, and the peer's threads are held the same way.
 * So a call that begins while another of this process is in progress
 * (har_comm_plan to har_comm_done) says so at its arrival, and where any
 * rank said so the node serves it without those engines (the host
 * segment takes device buffers too): on the kernels at most one call per
 * process is in flight, begun when no other was anywhere on the node,
 * and its peers' threads are at worst held until the GPU's other work,
 * never waiting on GPU peers, ends. */
static _Atomic int in_progress;

/* The engines whose kernels wait on the GPU for their peers'. */
static unsigned waiting_engines(void)
{
    unsigned mask = 0;
    for (int e = 0; e < HAR_PATH_COUNT; e++) {
        const har_engine_traits_t *t = har_engine_set()->by_path[e];
        if (t && (t->takes & HAR_TAKES_DEVICE) && !(t->takes & HAR_TAKES_HOST)) mask |= 1u << e;
    }
    return mask;
}

/* Under MPI_THREAD_MULTIPLE no call goes ahead of the arrival, and so
 * none is started non-blocking on the kernels (the MPI serves those). A
 * kernel gone ahead waits on the GPU for peers that have not called yet,
 * and a peer's thread may meanwhile be held in a CUDA call that waits for
 * the whole device (cudaFree), so for that peer's kernel of another
 * communicator, which waits for this rank, whose other thread is held
 * the same way: 4 threads a rank, each calling on its own communicator
 * with buffers made and freed per call, hung so (DESIGN.md note 62). A call
 * that waits at the arrival launches once every peer is in it, and by the
 * rule above it is then the only call of any of them on the kernels. Every rank
 * of a job asks for the same level in practice, so all decide alike (a
 * rank that goes ahead regardless is joined at the arrival). */
static int thread_multiple(void)
{
    /* Asked once: the level is set at MPI_Init and every device call
     * looks (goes_ahead); a thread that races here stores the same value. */
    static int known = -1;
    int multiple = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (multiple < 0) {
        int level = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&level);
        multiple = level == MPI_THREAD_MULTIPLE;
        __atomic_store_n(&known, multiple, __ATOMIC_RELAXED);
    }
    return multiple;
}

/* Is a call (as agreed at its arrival) kept off the waiting engines? Beside
 * another call on this node; and under MPI_THREAD_MULTIPLE across nodes
 * always, since the flag is agreed within a node only and a peer on
 * another node joins a call whose kernels already wait: two nodes that
 * each put a different one of two calls on the kernels would hold each
 * other's copies (on the legacy stream, behind the kernels). A started
 * call in a fiber (across nodes every local rank's is) always, for the
 * same reason: it runs beside the application's other calls, and while
 * it waits for a completion call its kernels would hold the GPU. */
static int kept_off_waiting(const har_comm_t *c, const agreed_t *agreed)
{
    return agreed->beside || har_fiber_inside() || (c->node.nnodes > 1 && thread_multiple());
}

/* Call `no` planned from every local rank's record: the arrival, then the
 * plan for what the node agreed (`host`: the plan for host buffers). */
static har_status_t plan_at_arrival(har_comm_t *c, har_call_t *call, uint64_t no, har_plan_in_t in,
                                    const har_plan_t *host, har_plan_t *plan)
{
    har_node_t *node = &c->node;
    agreed_t agreed = {0};
    har_status_t st = arrive(c, call, no, host, call->in_kind == HAR_MEM_HOST, &agreed);
    if (st != HAR_OK) return st;
    if (agreed.went_ahead) {
        if (ahead_plan(c, in, plan)) return HAR_OK;
        har_note("a local rank went ahead on kernels that this rank cannot run");
        har_node_fail(node, HAR_ERR_INTERNAL, -1, "arrival");
        return HAR_ERR_INTERNAL;
    }
    /* A started call in a fiber on one node is there to set the node up
     * for device buffers where some rank's buffers are on a GPU. */
    int setting_up = har_fiber_inside() && node->nnodes == 1 && !c->surveyed;
    if (!agreed.all_device) {
        if ((agreed.wants_device || (setting_up && agreed.some_device)) && !c->surveyed &&
            agreed.current_ranks == node->local_size && node->nnodes == 1 && !thread_multiple()) {
            agreed.ctx_ranks = agreed.current_ranks;
            if ((st = set_up_for_device(c, in, &agreed, har_cuda_current_device())) != HAR_OK) return st;
        }
        *plan = *host;  /* the same inputs as before the arrival */
        return HAR_OK;
    }
    in.on_device = 1;
    if (setting_up) {
        if ((st = set_up_for_device(c, in, &agreed, call->gpu)) != HAR_OK) return st;
    } else if (!c->surveyed) {
        if ((st = har_cuda_survey(node, call->gpu, &c->gpu)) != HAR_OK) return st;
        c->surveyed = 1;
        in.shared_gpu = c->gpu.shared_gpu;
        say_why_not(c, &in);
    }
    in.shared_gpu = c->gpu.shared_gpu;
    in.cls = c->gpu.cls;
    for (;;) {
        in.engines = engines_on_offer(c, agreed.ctx_ranks) & (kept_off_waiting(c, &agreed) ? ~waiting_engines() : ~0u);
        *plan = har_plan(&in, &c->set);
        plan->paths &= ~HAR_BIT(AHEAD);  /* every rank arrived: nobody went ahead */
        if (plan->engine == HAR_PATH_MPI || c->eng[plan->engine].state == HAR_ENGINE_READY) return HAR_OK;
        setup(c, plan->engine, &agreed);  /* no longer untried, so the loop ends */
        if (har_node_failed(node)) return HAR_ERR_PEER_FAILED;  /* its exchanges failed (recorded) */
    }
}

void har_comm_done(void) { atomic_fetch_sub(&in_progress, 1); }

/* Are this rank's buffers where the kernels of calls gone ahead take them?
 * Never in a fiber: its launch would wait for a completion call. */
static int goes_ahead(const har_comm_t *c, const har_call_t *call)
{
    return c->surveyed && c->node.nnodes == 1 && !har_fiber_inside() && call->in_kind == HAR_MEM_DEVICE &&
           call->out_kind == HAR_MEM_DEVICE && call->gpu == c->gpu.ordinal && !call->bad && !thread_multiple();
}

har_status_t har_comm_plan(har_comm_t *c, har_call_t *call, unsigned forced, har_plan_t *plan)
{
    end_across(c, 1);  /* the started calls before it on c */
    return plan_call(c, call, forced, plan);
}

/* har_comm_plan once c's started calls before this one have ended. */
static har_status_t plan_call(har_comm_t *c, har_call_t *call, unsigned forced, har_plan_t *plan)
{
    har_node_t *node = &c->node;
    har_node_seg_hdr_t *hdr = node->seg.hdr;
    call->beside = atomic_fetch_add(&in_progress, 1) > 0;
    if (failed_before(c)) return HAR_ERR_PEER_FAILED;
    mpi_plan(plan);
    if (har_plan_declines(call->bytes, &c->set)) return HAR_OK;

    uint64_t no = node->call = c->calls++;
    end_older(c, no, 1);
    if (c->mode == HAR_COMM_FAILED) return HAR_ERR_PEER_FAILED;  /* the call it waited for failed */
    if (!c->cuda_node) {
        uint64_t from = atomic_load(&hdr->cuda_from_call);
        if (from <= no) {
            c->cuda_node = 1;
            HAR_LOG(HAR_LOG_DEBUG, "node %d: a local rank has CUDA; every call from call %llu starts with an "
                    "arrival", node->node, (unsigned long long)from);
        } else if (from == UINT64_MAX && har_comm_wants_cuda(node->rank, call, no)) {
            uint64_t unset = UINT64_MAX;
            atomic_compare_exchange_strong(&hdr->cuda_from_call, &unset, no + 1);
        }
    }
    har_plan_in_t in = plan_in(c, call, forced);
    if (!c->cuda_node) {
        agreed_t agreed;
        *plan = har_plan(&in, &c->set);
        if (plan->engine == HAR_PATH_MPI) return HAR_OK;
        return arrive(c, call, no, plan, 1, &agreed);
    }
    /* Where this rank's buffers are on the kernels' GPU and the plan goes
     * ahead, it launches without waiting for its peers (the kernels wait
     * for each other); its record tells a peer that waits at the arrival
     * (its buffers are elsewhere) to join. Every other way waits for every
     * record. */
    if (goes_ahead(c, call) && ahead_plan(c, in, plan)) {
        post(c, call, no, HAR_ARRIVE_AHEAD);
        return HAR_OK;
    }
    har_plan_t host = har_plan(&in, &c->set);
    return plan_at_arrival(c, call, no, in, &host, plan);
}

har_status_t har_comm_start(har_comm_t *c, har_call_t *call, unsigned forced, har_plan_t *plan,
                            har_comm_pending_t **pending)
{
    har_node_t *node = &c->node;
    *pending = NULL;
    mpi_plan(plan);
    /* Behind started calls still running on c it waits in their list,
     * numbered (and failed, if one of them failed c) in its turn. */
    if (across_on(c) && !har_plan_declines(call->bytes, &c->set)) return start_across(c, call, forced, plan, pending);
    if (failed_before(c)) return HAR_ERR_PEER_FAILED;
    /* Every rank decides alike, from what they share: a communicator set
     * up (its set-up's splits are blocking collectives, made by a blocking
     * call or, for the world of a GPU application, inside MPI_Init: a
     * communicator's first calls otherwise go to the MPI) and a size har
     * takes. Across nodes the blocking path serves it in a fiber. */
    if (c->mode != HAR_COMM_SERVED || har_plan_declines(call->bytes, &c->set)) return HAR_OK;
    if (node->nnodes > 1) return start_across(c, call, forced, plan, pending);
    /* On one node, where a rank has CUDA and the node is not set up for
     * device buffers, the blocking path in a fiber too: its arrival, where
     * every rank shows its buffers and context, makes the device survey
     * and the engines that go ahead (set_up_for_device), and the host
     * segment serves it. From then on a started call whose buffers go
     * ahead goes ahead; every other one takes a fiber, never the MPI: a
     * rank that has not yet seen the set-up's end (its fiber still waits)
     * posts its next calls into the fiber list behind it, and at their
     * arrival joins the kernels of peers that went ahead (not under
     * HAR_CHECK, whose comparison is an MPI call on the communicator). */
    if (!c->set_up_by_start && c->cuda_node && !c->surveyed && !c->set.check && !thread_multiple() &&
        forced != HAR_BIT(MPI))
        c->set_up_by_start = 1;
    har_plan_in_t in = plan_in(c, call, forced);
    in.started = 1;  /* its own size limit for going ahead: HAR_DEVICE_START_MAX */
    *plan = har_plan(&in, &c->set);  /* offers only engines not failed */
    int anywhere = 0;
    if (c->set_up_by_start) {
        if (!goes_ahead(c, call) || !ahead_plan(c, in, plan) || !har_engines[plan->engine]->start) {
            mpi_plan(plan);
            return start_across(c, call, forced, plan, pending);
        }
    } else {
        /* Otherwise a communicator set up for device buffers and a plan
         * that goes ahead on an engine that starts calls; or a plan on an
         * engine whose calls start anywhere (the test build's). */
        anywhere = plan->engine != HAR_PATH_MPI && har_engine_set()->by_path[plan->engine]->starts_anywhere;
        if (!anywhere && !c->surveyed && call->gpu >= 0) har_comm_want_device(node->comm);
        if ((!anywhere && (!c->surveyed || thread_multiple() || !ahead_plan(c, in, plan))) ||
            !har_engines[plan->engine]->start) {
            mpi_plan(plan);
            return HAR_OK;
        }
    }
    uint64_t no = node->call = c->calls++;
    end_older(c, no, 1);
    if (c->mode == HAR_COMM_FAILED) return HAR_ERR_PEER_FAILED;  /* the call it waited for failed */
    if (!anywhere && !goes_ahead(c, call)) {
        /* Its buffers are elsewhere: it joins at the arrival and serves the
         * call before returning, as a blocking call would. Where no rank
         * went ahead (every rank saw the same records) a call larger than
         * the blocking calls that go ahead is the MPI's, which lets the
         * application overlap it. */
        har_plan_t host = har_plan(&in, &c->set);
        har_status_t st = plan_at_arrival(c, call, no, in, &host, plan);
        if (st == HAR_OK && !(plan->paths & HAR_BIT(AHEAD)) && call->bytes > (uint64_t)c->set.device_ahead_max)
            mpi_plan(plan);
        return st == HAR_OK && plan->engine != HAR_PATH_MPI ? har_comm_run(c, call, plan) : st;
    }
    if (!anywhere) post(c, call, no, HAR_ARRIVE_AHEAD);
    har_comm_pending_t *p = calloc(1, sizeof *p);
    if (!p) {
        har_note("no memory for a non-blocking call");
        return HAR_ERR_INTERNAL;  /* its peers went ahead: the caller fails the communicator */
    }
    har_status_t st = har_engines[plan->engine]->start(c->eng[plan->engine].impl, node, call, plan, no, &p->op);
    if (st != HAR_OK) {
        free(p);
        return st;
    }
    p->c = c;
    p->engine = plan->engine;
    p->no = no;
    c->open[no & 1] = p;
    *pending = p;
    return HAR_OK;
}

har_status_t har_comm_enqueue(har_comm_t *c, har_call_t *call, unsigned forced, void *stream, int captured,
                              har_plan_t *plan)
{
    har_node_t *node = &c->node;
    mpi_plan(plan);
    /* The started calls before it on c end first, as for a blocking call:
     * one that sets the node up in a fiber decides what follows. */
    end_across(c, 1);
    if (failed_before(c)) return HAR_ERR_PEER_FAILED;
    if (c->mode != HAR_COMM_SERVED || node->nnodes != 1 || !c->surveyed || c->set.check ||
        har_plan_declines(call->bytes, &c->set))
        return HAR_OK;
    if (!ahead_plan(c, plan_in(c, call, forced), plan) || !(plan->paths & HAR_BIT(PUSH)) ||
        !har_engines[plan->engine]->enqueue) {
        mpi_plan(plan);
        return HAR_OK;
    }
    plan->paths |= HAR_BIT(ENQUEUED) | (captured ? HAR_BIT(CAPTURED) : 0);
    uint64_t no = node->call = c->calls++;
    end_older(c, no, 1);  /* a non-blocking call two before, if one is still open */
    if (c->mode == HAR_COMM_FAILED) return HAR_ERR_PEER_FAILED;  /* the call it waited for failed */
    /* The record tells a peer whose blocking call waits at the arrival
     * (its arguments differ: another size) what this rank went ahead
     * with. */
    post(c, call, no, HAR_ARRIVE_AHEAD);
    if (call->bad) {
        /* Its peers' kernels are queued already: the failure recorded here
         * stops them (their engines watch the node). */
        har_note("%s", har_node_buffers_text(call->bad));
        har_node_fail(node, HAR_ERR_BUFFER, -1, "enqueue");
        return HAR_ERR_BUFFER;
    }
    har_launcher_drain();  /* as in har_comm_run */
    return har_engines[plan->engine]->enqueue(c->eng[plan->engine].impl, node, call, no, stream, captured);
}

/* HAR_CHECK: every rank's result, compared across the communicator; the
 * first rank whose result differs from rank 0's is named. */
static har_status_t compare_results(har_comm_t *c, const har_call_t *call)
{
    har_node_t *node = &c->node;
    char *host = call->out_kind == HAR_MEM_HOST ? call->out : har_stage_get(call->bytes);
    if (!host) return HAR_ERR_INTERNAL;
    har_status_t st = host == call->out ? HAR_OK : har_cuda_copy(host, HAR_MEM_HOST, call->out, call->out_kind,
                                                                 call->bytes);
    uint64_t sum = st == HAR_OK ? har_host_checksum(host, call->bytes, 0) : 0;
    if (host != call->out) har_stage_put(host);
    if (st != HAR_OK) return st;
    uint64_t mine[2] = {sum, ~sum}, least[2];  /* min and max in one exchange */
    MPI_Request req;
    st = har_node_exchange(node, PMPI_Iallreduce(mine, least, 2, MPI_UINT64_T, MPI_MIN, node->comm, &req), &req,
                           "check");
    if (st != HAR_OK) return st;
    if (least[0] == ~least[1]) return HAR_OK;
    /* Some result differs: who? Every rank takes part, as every rank saw it. */
    struct { uint64_t sum; int world; } me = {sum, node->peers[node->local_rank].world_rank}, *all;
    if (!(all = malloc((size_t)node->size * sizeof *all))) {
        har_node_fail(node, HAR_ERR_INTERNAL, -1, "check");
        return HAR_ERR_INTERNAL;
    }
    st = har_node_exchange(node, PMPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, node->comm,
                                                 &req), &req, "check");
    if (st == HAR_OK) {
        int odd = 1;
        while (odd < node->size && all[odd].sum == all[0].sum) odd++;
        har_note("HAR_CHECK: the result of rank %d (world rank %d) differs from rank 0's", odd, all[odd].world);
        har_node_blame(node, HAR_ERR_CHECK, odd, all[odd].world, "?", "results");
        st = HAR_ERR_CHECK;
    }
    free(all);
    return st;
}

#ifdef HAR_TEST_HOOKS
/* HAR_TEST_CORRUPT=RANK:INDEX damages one element of rank RANK's result
 * (before HAR_CHECK compares results), so that tests can prove their checks
 * catch a wrong answer: bit 6 of the element's most significant byte, a
 * large change for every type. */
static void corrupt_result(const har_node_t *node, const har_call_t *call)
{
    int rank;
    long long index;
    if (sscanf(HAR_CFG(test_corrupt).s, "%d:%lld", &rank, &index) != 2 || rank != node->rank || index < 0 ||
        (size_t)index >= call->count)
        return;
    unsigned char byte;
    char *at = call->out + (size_t)index * call->red.elem_size + call->red.elem_size - 1;
    har_cuda_copy(&byte, HAR_MEM_HOST, at, call->out_kind, 1);
    byte ^= 0x40;
    har_cuda_copy(at, call->out_kind, &byte, HAR_MEM_HOST, 1);
}
#endif

har_status_t har_comm_run(har_comm_t *c, const har_call_t *call, har_plan_t *plan)
{
    har_launcher_drain();  /* the started calls' launches handed off go first, as their calls did */
    har_status_t st = har_engines[plan->engine]->run(c->eng[plan->engine].impl, &c->node, call, plan);
#ifdef HAR_TEST_HOOKS
    if (st == HAR_OK) corrupt_result(&c->node, call);
#endif
    /* Not in a fiber: the comparison runs on the application's
     * communicator, where its own calls may come between (every rank's
     * started call across nodes is a fiber, so all skip it alike). */
    if (st == HAR_OK && c->set.check && !har_fiber_inside()) st = compare_results(c, call);
    return st;
}

/* har_comm_fail for call `no`, which need not be the call in progress (a
 * started call ending after later calls began). */
static har_status_t fail_call(har_comm_t *c, har_status_t st, uint64_t no)
{
    int first = c->mode != HAR_COMM_FAILED;
    if (first) {
        c->mode = HAR_COMM_FAILED;
        if (!har_node_failed(&c->node)) har_node_fail_call(&c->node, no, st, -1, "call");
        har_node_report(&c->node);
    }
    /* Ranks that stopped for another rank's differing call get, for that
     * call, the class the MPI gives for it, like the ranks that found it;
     * so does the first call to fail after a differing call that no call
     * waited for (queued by har_allreduce_enqueue: the watch found it). */
    const har_failure_t *why = har_node_record(&c->node);
    if (st == HAR_ERR_PEER_FAILED && why && (why->call == no || first) &&
        (why->status == HAR_ERR_TRUNCATE || why->status == HAR_ERR_OP))
        return (har_status_t)why->status;
    return st;
}

har_status_t har_comm_fail(har_comm_t *c, har_status_t st) { return fail_call(c, st, c->node.call); }
