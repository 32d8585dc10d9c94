/* The entry point: is this call ours, the plan, and the one place that
 * hands a call to the MPI (staging device buffers through host memory when
 * the MPI cannot reduce them). Also initialisation, finalisation, counters
 * and the public har_* calls.
 *
 * Whether har serves a call is decided only from what every rank shares
 * (count, datatype, op, communicator state), never from the buffers (their
 * memory kind, or a null one), so all ranks always take the same branch. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "entry/collectives.h"
#include "comm/call.h"
#include "core/log.h"
#include "cuda/mpi_cuda.h"
#include "core/test.h"
#include "entry/entry.h"
#include "entry/requests.h"
#include "node/machine.h"
#include "stage/stage.h"

/* The paths, then two per collective har wraps (entry/collectives.h): every call,
 * and the calls staged on this rank. */
#define HAR_COUNTERS (HAR_PATH_COUNT + 2 * HAR_COLL_COUNT)
static unsigned long long counters[HAR_COUNTERS];
static const char *const coll_names[2 * HAR_COLL_COUNT] = {
#define HAR_COLL_NAMES(id, name) #name, #name "_staged",
    HAR_COLL_LIST(HAR_COLL_NAMES)
#undef HAR_COLL_NAMES
};
static int initialized, finalized, world_rank;
static __thread int inside_har;  /* re-entry guard: MPI calling MPI_Allreduce from inside har */
static int algo_override = -1;   /* har_set_algo's mask; -1: HAR_ALGO decides */
static int at_mpi_init;          /* init runs inside MPI_Init, where collectives over the world are safe */

const char *har_version(void) { return HAR_VERSION_STRING; }

/* The counters: the paths in paths.h's order, then the collectives. */
int har_counter_count(void) { return HAR_COUNTERS; }

const char *har_counter_name(int index)
{
    if (index >= HAR_PATH_COUNT && index < HAR_COUNTERS) return coll_names[index - HAR_PATH_COUNT];
    return har_path_name(index);
}

int har_counter_index(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < 2 * HAR_COLL_COUNT; i++)
        if (strcmp(name, coll_names[i]) == 0) return HAR_PATH_COUNT + i;
    return har_path_from_name(name);
}

int har_counters(unsigned long long *values, int n)
{
    for (int p = 0; values && p < n && p < HAR_COUNTERS; p++)
        values[p] = __atomic_load_n(&counters[p], __ATOMIC_RELAXED);
    return HAR_COUNTERS;
}

void har_counters_reset(void)
{
    for (int p = 0; p < HAR_COUNTERS; p++) __atomic_store_n(&counters[p], 0, __ATOMIC_RELAXED);
}

void har_count_coll(har_coll_t coll, int staged)
{
    __atomic_fetch_add(&counters[HAR_PATH_COUNT + 2 * (int)coll + (staged != 0)], 1, __ATOMIC_RELAXED);
}

static const char *mpi_flavour(void)
{
#if defined(OPEN_MPI)
    return "Open MPI";
#elif defined(MPICH)
    return "MPICH";
#elif defined(MPI_ABI_VERSION)
    return "the MPI standard ABI";
#else
    return "an MPI";
#endif
}

static int served_late(unsigned paths, const char *what, size_t count, MPI_Comm comm, int rc);

static void init(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    har_log_set_rank(world_rank);
    har_config_load(world_rank == 0 ? HAR_REPORT_ALL : HAR_REPORT_OWN);
    har_status_init();
    har_cuda_mpi_init();
    har_node_init();
    if (__atomic_load_n(&at_mpi_init, __ATOMIC_RELAXED)) har_node_census();
    har_comm_init();
    if (__atomic_load_n(&at_mpi_init, __ATOMIC_RELAXED)) har_comm_set_up_world(world_rank);
    har_requests_count_with(served_late);
#ifdef HAR_TEST_HOOKS
    har_test_set_rank(world_rank);
#endif
    HAR_LOG(HAR_LOG_DEBUG, "har %s on %s, MPI device memory: p2p %d reduce %d, %d ranks of the job on this machine",
            HAR_VERSION_STRING, mpi_flavour(), har_cuda_mpi_p2p(), har_cuda_mpi_reduce(), har_node_machine_ranks());
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

void har_init(int from_mpi_init)
{
    if (from_mpi_init) __atomic_store_n(&at_mpi_init, 1, __ATOMIC_RELAXED);
    pthread_once(&init_once, init);
}

/* Every path, then the collectives' counters that are not 0 (most
 * programs call few of them). */
static void print_counters(void)
{
    char line[4096];
    size_t n = 0;
    for (int p = 0; p < HAR_COUNTERS && n < sizeof line; p++)
        if (p < HAR_PATH_COUNT || counters[p])
            n += (size_t)snprintf(line + n, sizeof line - n, " %s=%llu", har_counter_name(p), counters[p]);
    har_log(HAR_LOG_INFO, "calls per path:%s", line);
}

void har_finalize(void)
{
    if (!initialized || finalized) return;
    finalized = 1;
    har_comm_finalize();
    if (har_log_level >= 1) print_counters();
    har_log_summary();
    har_stage_finalize();
}

int har_entry_ready(void)
{
    if (__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return !finalized;
    int up = 0, down = 0;
    PMPI_Initialized(&up);  /* MPI initialised behind our back (a binding har does not wrap) */
    PMPI_Finalized(&down);
    if (!up || down) return 0;
    har_init(0);
    return 1;
}

/* Ends the calls har started on *comm, before the MPI's free or
 * disconnect of it. Before har starts (nothing of it runs yet) or after it
 * ended (every call ended at its finalize) there is nothing to end;
 * freeing the world or self is the MPI's error to report at once, not
 * after the calls running on them. */
static void end_started_before_release(const MPI_Comm *comm)
{
    if (comm && *comm != MPI_COMM_WORLD && *comm != MPI_COMM_SELF && __atomic_load_n(&initialized, __ATOMIC_ACQUIRE) &&
        !finalized)
        har_comm_end_before_free(*comm);
}

int har_comm_free(MPI_Comm *comm)
{
    end_started_before_release(comm);
    return PMPI_Comm_free(comm);
}

int har_comm_disconnect(MPI_Comm *comm)
{
    end_started_before_release(comm);
    return PMPI_Comm_disconnect(comm);
}

/* The MPI's own all-reduce of the binding the call came through (a call
 * that came through an int binding has an int count). Without the MPI's _c
 * bindings no caller passes HAR_BINDING_LARGE; a count an int cannot hold
 * is refused here rather than cut. */
static int pmpi_allreduce(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                          har_binding_t binding)
{
#ifdef HAR_HAVE_MPI_C_COUNTS
    if (binding == HAR_BINDING_LARGE) return PMPI_Allreduce_c(sbuf, rbuf, count, type, op, comm);
#else
    (void)binding;
#endif
    if (count > INT_MAX) return PMPI_Comm_call_errhandler(comm, MPI_ERR_COUNT), MPI_ERR_COUNT;
    return PMPI_Allreduce(sbuf, rbuf, (int)count, type, op, comm);
}

/* The same on host copies of the device buffers (stage/). */
static int staged_allreduce(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                            MPI_Comm comm, har_mem_kind_t in_kind, har_mem_kind_t out_kind, har_binding_t binding)
{
    har_stage_t s;
    har_stage_ask_t a = {{in_kind, out_kind}, 1, comm};
    if (sbuf == MPI_IN_PLACE) a.kind[HAR_SEND] = HAR_MEM_HOST;
    int how = har_stage_prepare_allreduce(&s, &a, sbuf, rbuf, count, type);
    if (how == HAR_STAGE_UNTOUCHED) return pmpi_allreduce(sbuf, rbuf, count, type, op, comm, binding);
    if (how == HAR_STAGE_FAILED) return har_stage_error(&s);
    return har_stage_finish(&s, pmpi_allreduce(har_stage_buffer(&s, HAR_SEND, sbuf),
                                               har_stage_buffer(&s, HAR_RECV, rbuf), count, type, op, comm, binding));
}

/* The MPI's own all-reduce, in the one place har hands its calls to it.
 * Device buffers go through host memory when the MPI cannot reduce them
 * itself, so the call works instead of crashing (each rank stages its own:
 * src/stage/). */
static int forward(const har_call_t *call, const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type,
                   MPI_Op op, MPI_Comm comm, har_binding_t binding, unsigned *paths)
{
    *paths |= HAR_BIT(MPI);
    int host = call->in_kind == HAR_MEM_HOST && call->out_kind == HAR_MEM_HOST;
#ifdef HAR_TEST_HOOKS
    host &= !har_test_stage();
#endif
    if (host || har_cuda_mpi_reduce() || count <= 0) return pmpi_allreduce(sbuf, rbuf, count, type, op, comm, binding);
    *paths |= HAR_BIT(STAGED);
    return staged_allreduce(sbuf, rbuf, count, type, op, comm, call->in_kind, call->out_kind, binding);
}

int har_set_algo(const char *choice)
{
    int ok = 0;
    unsigned mask = choice ? har_choice_parse(choice, HAR_CHOICE_NAMES, &ok) : 0;
    if (!ok) return MPI_ERR_ARG;
    __atomic_store_n(&algo_override, mask ? (int)mask : -1, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}

/* Why this rank's buffers cannot be used, or HAR_BUFFERS_OK. */
static har_buffers_t check_buffers(const void *sbuf, const void *rbuf, uint64_t bytes)
{
    if (!rbuf) return HAR_BUFFER_NULL_RECV;
    if (!sbuf) return HAR_BUFFER_NULL_SEND;
    if (sbuf == MPI_IN_PLACE) return HAR_BUFFERS_OK;
    if (sbuf == rbuf) return HAR_BUFFERS_SAME;
    uintptr_t s = (uintptr_t)sbuf, r = (uintptr_t)rbuf;
    return s < r + bytes && r < s + bytes ? HAR_BUFFERS_OVERLAP : HAR_BUFFERS_OK;
}

/* What every rank shares (count, datatype, op, communicator) decides
 * whether har can serve the call at all; anything odd there goes to the
 * MPI, which reports it as it always would. A rank's buffers are its own:
 * a null or aliased one (a failed allocation, say) cannot keep it out of a
 * call its peers enter, so it enters too, and the node fails the call at
 * the arrival (call->bad). Fills `call` with this rank's view. */
static int describe(har_call_t *call, const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type,
                    MPI_Op op, MPI_Comm comm)
{
    memset(call, 0, sizeof *call);
    call->red = har_host_reduce_lookup(type, op);
    call->in = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    call->out = rbuf;
    call->count = count > 0 ? (size_t)count : 0;
    call->bytes = (uint64_t)call->count * call->red.elem_size;
    call->type = type;
    call->op = op;
    call->bad = check_buffers(sbuf, rbuf, call->bytes);
    int out_dev = -1, in_dev = -1;
    call->cuda = har_cuda_loaded();  /* once per call: cheap, but not free, while it is not */
    if (call->cuda && !call->bad) {
        call->out_kind = har_cuda_mem_kind(rbuf, &out_dev);  /* one driver query per buffer, in place or not */
        call->in_kind = call->in == call->out ? call->out_kind : har_cuda_mem_kind(call->in, &in_dev);
    }
    if (call->in == call->out) in_dev = out_dev;
    call->gpu = call->in_kind == HAR_MEM_DEVICE && call->out_kind == HAR_MEM_DEVICE && in_dev == out_dev ? out_dev
                                                                                                          : -1;
    return call->red.fn && count > 0 && HAR_CFG(enable).i && comm != MPI_COMM_NULL;
}

#ifdef HAR_TEST_HOOKS
unsigned long long har_test_steps(void) __attribute__((visibility("default")));
unsigned long long har_test_steps(void) { return har_node_seg_steps(); }
#endif

/* A call served by `paths` (HAR_BIT(SEEN) and the plan's) and ending with
 * rc: counted, traced, and failed if HAR_REQUIRE_PATH asked for another
 * path. The call's return code. */
static int served_by(unsigned paths, const char *what, har_count_t count, MPI_Comm comm, int rc)
{
    for (int p = 0; p < HAR_PATH_COUNT; p++)
        if (paths & (1u << p)) __atomic_fetch_add(&counters[p], 1, __ATOMIC_RELAXED);
    if (har_log_level >= 3) {
        char line[256];
        har_choice_format(paths & ~HAR_BIT(SEEN), line, sizeof line);
        har_log(HAR_LOG_TRACE, "%s count %lld: %s", what, (long long)count, line);
    }
    unsigned required = (unsigned)HAR_CFG(require_path).i;
    if (rc == MPI_SUCCESS && (paths & required) != required) {
        char want[128], got[128];
        har_choice_format(required, want, sizeof want);
        har_choice_format(paths & ~HAR_BIT(SEEN), got, sizeof got);
        har_log(HAR_LOG_ERROR, "%s of count %lld was served by %s, not %s (HAR_REQUIRE_PATH)", what,
                (long long)count, got, want);
        rc = har_error_code(HAR_ERR_WRONG_PATH);
        PMPI_Comm_call_errhandler(comm, rc);
    }
    return rc;
}

/* A started call counted when it ended (requests.h's har_served_t). */
static int served_late(unsigned paths, const char *what, size_t count, MPI_Comm comm, int rc)
{
    return served_by(HAR_BIT(SEEN) | paths, what, (har_count_t)count, comm, rc);
}

int har_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    return har_allreduce_count(sbuf, rbuf, count, type, op, comm, HAR_BINDING_INT);
}

int har_allreduce_count(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        har_binding_t binding)
{
    if (inside_har || !har_entry_ready()) return pmpi_allreduce(sbuf, rbuf, count, type, op, comm, binding);
    inside_har = 1;
    har_note_clear();
    unsigned paths = HAR_BIT(SEEN);
    har_call_t call;
    har_plan_t plan = {.engine = HAR_PATH_MPI};
    har_comm_t *c = NULL;
    har_status_t st = HAR_OK;
    int rc;
    int ours = describe(&call, sbuf, rbuf, count, type, op, comm);
    if (ours && (c = har_comm_get(comm, &call, &st)) && c->mode != HAR_COMM_FORWARDED && st == HAR_OK) {
        int forced = __atomic_load_n(&algo_override, __ATOMIC_RELAXED);
        st = har_comm_plan(c, &call, forced >= 0 ? (unsigned)forced : c->set.algo, &plan);
        if (st == HAR_OK && plan.engine != HAR_PATH_MPI) st = har_comm_run(c, &call, &plan);
        har_comm_done();
    }
    if (st == HAR_OK && plan.engine == HAR_PATH_MPI && ours && call.bad == HAR_BUFFERS_OVERLAP) {
        /* The MPIs do not all catch it (Open MPI returns success, whatever
         * the copy's direction left): refused here on its way to the MPI,
         * as MPICH refuses it. */
        har_log(HAR_LOG_ERROR, "MPI_Allreduce refused (MPI_ERR_BUFFER): %s", har_node_buffers_text(call.bad));
        rc = har_error_code(HAR_ERR_BUFFER);
        PMPI_Comm_call_errhandler(comm, rc);
    } else if (st == HAR_OK && plan.engine == HAR_PATH_MPI) {
        rc = forward(&call, sbuf, rbuf, count, type, op, comm, binding, &paths);
    } else {
        paths |= plan.paths;
        if (st != HAR_OK) st = har_comm_fail(c, st);
        rc = har_error_code(st);
        if (st != HAR_OK) PMPI_Comm_call_errhandler(comm, rc);
    }
    rc = served_by(paths, "MPI_Allreduce", count, comm, rc);
    inside_har = 0;
    return rc;
}

/* A non-blocking call har may serve: started where every rank starts it
 * (comm/call.h's har_comm_start), on a communicator a blocking call set
 * up. `what` names the call for the counters' trace. */
static har_start_t start(har_comm_t *c, har_call_t *call, MPI_Comm comm, const char *what, har_comm_pending_t **pending,
                         int *rc)
{
    inside_har = 1;
    har_note_clear();
    har_plan_t plan;
    int forced = __atomic_load_n(&algo_override, __ATOMIC_RELAXED);
    *pending = NULL;
    har_status_t st = har_comm_start(c, call, forced >= 0 ? (unsigned)forced : c->set.algo, &plan, pending);
    if (st == HAR_OK && !*pending && plan.engine == HAR_PATH_MPI) {
        inside_har = 0;
        return HAR_START_MPI;
    }
    *rc = MPI_SUCCESS;
    if (st != HAR_OK) {
        st = har_comm_fail(c, st);
        *rc = har_error_code(st);
        PMPI_Comm_call_errhandler(comm, *rc);
    }
    /* A started call across nodes is counted when it ends: its plan is
     * made at its arrival (served_late). */
    if (!(*pending && har_comm_pending_counted_late(*pending)))
        *rc = served_by(HAR_BIT(SEEN) | plan.paths, what, (har_count_t)call->count, comm, *rc);
    inside_har = 0;
    return st == HAR_OK ? HAR_START_OWN : HAR_START_FAILED;
}

/* The state of the communicator of a non-blocking call har may serve,
 * if a blocking call made it already (making it is collective); NULL for
 * the MPI to serve the call. */
static har_comm_t *peek_for(const har_call_t *call, MPI_Comm comm)
{
    har_comm_t *c = har_comm_peek(comm);
    if (!c && call->gpu >= 0) har_comm_want_device(comm);
    return c && c->mode != HAR_COMM_FORWARDED ? c : NULL;
}

int har_iallreduce_start(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                         MPI_Comm comm, MPI_Request *req, int *rc)
{
    if (inside_har || !har_entry_ready()) return 0;
    har_call_t call;
    har_comm_t *c;
    if (!describe(&call, sbuf, rbuf, count, type, op, comm) || !(c = peek_for(&call, comm))) return 0;
    har_comm_pending_t *pending;
    switch (start(c, &call, comm, "MPI_Iallreduce", &pending, rc)) {
    case HAR_START_MPI:
        return 0;
    case HAR_START_FAILED:
        *req = MPI_REQUEST_NULL;
        return 1;
    case HAR_START_OWN: {
        int made = har_request_native(pending, comm, req);
        if (*rc == MPI_SUCCESS) *rc = made;
        return 1;
    }
    }
    return 0;
}

int har_enqueue_on_kernels(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                           MPI_Comm comm, void *stream, int captured, int *rc)
{
    har_call_t call;
    har_comm_t *c;
    if (count > INT_MAX || inside_har || !har_entry_ready() || !describe(&call, sbuf, rbuf, count, type, op, comm) ||
        !(c = peek_for(&call, comm)))
        return 0;
    inside_har = 1;
    har_note_clear();
    har_plan_t plan;
    int forced = __atomic_load_n(&algo_override, __ATOMIC_RELAXED);
    har_status_t st = har_comm_enqueue(c, &call, forced >= 0 ? (unsigned)forced : c->set.algo, stream, captured, &plan);
    int queued = st != HAR_OK || plan.engine != HAR_PATH_MPI;
    if (queued) {
        *rc = MPI_SUCCESS;
        if (st != HAR_OK) {
            st = har_comm_fail(c, st);
            *rc = har_error_code(st);
            PMPI_Comm_call_errhandler(comm, *rc);
        }
        *rc = served_by(HAR_BIT(SEEN) | plan.paths, "har_allreduce_enqueue", (int)count, comm, *rc);
    }
    inside_har = 0;
    return queued;
}

/* A call har's kernels cannot queue, on a stream being captured: refused
 * on every rank alike (what decided it is shared), before any call is
 * numbered, since a capture cannot wait for its stream. */
static int refuse_capture(har_count_t count, MPI_Comm comm)
{
    har_log(HAR_LOG_ERROR, "har_allreduce_enqueue of count %lld on a stream being captured into a CUDA graph: only "
            "calls har's kernels queue can be captured (one node, a communicator an all-reduce on device "
            "buffers set up, at most HAR_DEVICE_PUSH_MAX bytes, HAR_CHECK off)", (long long)count);
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
    return MPI_ERR_OTHER;
}

int har_allreduce_enqueue_count(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                MPI_Comm comm, void *stream, har_binding_t binding)
{
    int rc, captured = har_cuda_stream_capturing(stream);
    if (har_enqueue_on_kernels(sbuf, rbuf, count, type, op, comm, stream, captured, &rc)) return rc;
    if (captured) return refuse_capture(count, comm);
    /* Not on har's kernels: the blocking call, once the stream's work (the
     * input, perhaps) is done. */
    if (har_cuda_stream_wait(stream) != HAR_OK) {
        har_log(HAR_LOG_ERROR, "har_allreduce_enqueue: %s", har_note_take());
        rc = har_error_code(HAR_ERR_CUDA);
        PMPI_Comm_call_errhandler(comm, rc);
        return rc;
    }
    return har_allreduce_count(sbuf, rbuf, count, type, op, comm, binding);
}

int har_allreduce_enqueue(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                          void *stream)
{
    return har_allreduce_enqueue_count(sbuf, rbuf, count, type, op, comm, stream, HAR_BINDING_INT);
}

int har_persistent_describe(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                            MPI_Comm comm, har_call_t **call)
{
    har_call_t mine;
    *call = NULL;
    if (inside_har || !har_entry_ready() || !describe(&mine, sbuf, rbuf, count, type, op, comm)) return MPI_SUCCESS;
    if (!(*call = malloc(sizeof **call))) return MPI_ERR_NO_MEM;
    **call = mine;
    return MPI_SUCCESS;
}

har_start_t har_persistent_start(const har_call_t *described, MPI_Comm comm, har_comm_pending_t **pending, int *rc)
{
    if (inside_har || !har_entry_ready()) return HAR_START_MPI;
    har_comm_t *c = peek_for(described, comm);
    if (!c) return HAR_START_MPI;
    har_call_t call = *described;  /* the plan marks up its copy */
    return start(c, &call, comm, "MPI_Start", pending, rc);
}

int har_machine_class(MPI_Comm comm, int device, char *buf, int len)
{
    if (!initialized || !buf || len <= 0 || comm == MPI_COMM_NULL) return MPI_ERR_OTHER;
    har_comm_t *c = har_comm_peek(comm);  /* only a state already made: asking is not collective */
    if (!c || c->mode != HAR_COMM_SERVED) return MPI_ERR_OTHER;
    if (device && !c->surveyed) return MPI_ERR_OTHER;
    snprintf(buf, (size_t)len, "%s", device ? c->gpu.cls : c->host_cls);
    return MPI_SUCCESS;
}
