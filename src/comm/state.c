/* Per-communicator state (state.h): set-up, lifetime, release.
 *
 * The delete callback makes no MPI call: it unmaps the segment, releases
 * the engines and leaves har's internal communicators on a list that the
 * next har entry frees. */
#define _GNU_SOURCE  /* sched_getaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "comm/call.h"
#include "core/log.h"

static int keyval = MPI_KEYVAL_INVALID, self_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static har_comm_t *live;            /* every state, under lock */
static int segments;                /* states holding a segment, under lock */
static MPI_Comm *doomed;            /* internal communicators to free, under lock */
static size_t ndoomed, doomed_cap;
static unsigned seg_counter;
static int finalizing;              /* har_comm_finalize has met every rank */

static void release_segment(har_comm_t *c)
{
    if (!c->node.seg.base) return;
    har_seg_detach(&c->node.seg);
    pthread_mutex_lock(&lock);
    segments--;
    pthread_mutex_unlock(&lock);
}

static void state_free(har_comm_t *c)
{
    int device_engine = 0;
    for (int e = 0; e < HAR_PATH_COUNT; e++) device_engine |= c->eng[e].impl != NULL;
    if (device_engine && c->usable && !c->failed && !finalizing) {
        /* Peers' kernels may still read this rank's device memory: meet them
         * on the host segment first (MPI_Comm_free is collective). */
        har_seg_signal(&c->node.seg);
        har_node_wait_all(&c->node, "free");
    }
    for (int e = 0; e < HAR_PATH_COUNT; e++)
        if (c->eng[e].impl) har_engine_of(e)->destroy(c->eng[e].impl);
    har_gpu_release(&c->gpu);
    release_segment(c);
    free(c->node.scratch);
    pthread_mutex_lock(&lock);
    MPI_Comm internal[3] = {c->node.node_comm, c->node.rail_comm, c->node.leader_comm};
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
    if (c->prev) c->prev->next = c->next;
    else if (live == c) live = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&lock);
    free(c);
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
    for (har_comm_t *c = live; c; c = c->next) {
        c->usable = 0;  /* nothing may touch the segments from now on */
        if (c->node.seg.base) {
            har_seg_detach(&c->node.seg);
            segments--;
        }
    }
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}

void har_comm_init(void)
{
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cb, &keyval, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_cb, &self_keyval, NULL);
    PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL);
}

void har_comm_finalize(void)
{
    /* Every rank's last call is over once all have arrived here: device
     * engines can go without a meeting per communicator (whose order could
     * differ between ranks). */
    PMPI_Barrier(MPI_COMM_WORLD);
    finalizing = 1;
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
static void settings_setup(har_comm_t *c)
{
    typedef struct { int ntune; har_tune_row_t tune[HAR_TUNE_MAX_ROWS]; } rows_t;
    size_t values = har_config_rank0_bytes();
    char *blob = malloc(values + sizeof(rows_t));
    har_config_t *merged = malloc(sizeof *merged);
    if (!blob || !merged) {
        /* The other ranks are about to exchange: declining here alone would
         * leave them waiting. */
        har_log(HAR_LOG_ERROR, "out of memory for a communicator's settings");
        PMPI_Abort(c->node.comm, MPI_ERR_NO_MEM);
    }
    rows_t *rows = (rows_t *)(blob + values);
    if (c->node.rank == 0) {
        static int reported;  /* a refused table is said once per process */
        char source[HAR_VAR_TEXT];
        har_config_rank0_pack(&har_cfg, blob);
        rows->ntune = har_tune_load(HAR_CFG(tuning).s, rows->tune, HAR_TUNE_MAX_ROWS, source, sizeof source,
                                    !__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED));
    }
    PMPI_Bcast(blob, (int)(values + sizeof(rows_t)), MPI_BYTE, 0, c->node.comm);
    *merged = har_cfg;
    har_config_rank0_unpack(merged, blob);
    har_settings_from(merged, &c->set);
    c->set.ntune = rows->ntune;
    memcpy(c->set.tune, rows->tune, sizeof rows->tune);
    c->node.set = &c->set;
    free(blob);
    free(merged);
}

static char cpu_model[HAR_CLASS_LEN - 12] = "unknown_CPU";
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* The CPU's model name as /proc/cpuinfo gives it, spaces as '_'. */
static void read_cpu_model(void)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon[strcspn(colon, "\n")] = '\0';
        har_class_word(colon + 1, cpu_model, sizeof cpu_model);
        break;
    }
    if (f) fclose(f);
}

void har_host_class(int cores_per_rank, char *out, size_t len)
{
    pthread_once(&cpu_once, read_cpu_model);
    snprintf(out, len, "%s/%d", cpu_model, cores_per_rank);
}

/* Node, rails, leaders, settings and segment. Collective over comm; every
 * rank returns the same `usable`. */
static void state_setup(har_comm_t *c, const har_call_t *call)
{
    har_node_t *node = &c->node;
    MPI_Comm comm = node->comm, shared, leaders;
    int ok = 1;
    PMPI_Comm_rank(comm, &node->rank);
    PMPI_Comm_size(comm, &node->size);
    settings_setup(c);

    /* Nodes: ranks that share memory, or pretend nodes of HAR_NODE_SIZE
     * consecutive ranks of each (testing the hierarchy on one machine). */
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, node->rank, MPI_INFO_NULL, &shared);
    if (c->set.node_size > 0) {
        int shared_rank;
        PMPI_Comm_rank(shared, &shared_rank);
        PMPI_Comm_split(shared, (int)(shared_rank / c->set.node_size), node->rank, &node->node_comm);
        PMPI_Comm_free(&shared);
    } else {
        node->node_comm = shared;
    }
    PMPI_Comm_rank(node->node_comm, &node->local_rank);
    PMPI_Comm_size(node->node_comm, &node->local_size);
    /* Leaders: local rank 0 of each node, numbered by their rank in comm. */
    PMPI_Comm_split(comm, node->local_rank == 0 ? 0 : MPI_UNDEFINED, node->rank, &leaders);
    if (leaders != MPI_COMM_NULL) {
        PMPI_Comm_rank(leaders, &node->node);
        PMPI_Comm_size(leaders, &node->nnodes);
    }
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int node_info[3] = {node->node, node->nnodes, cores / node->local_size > 1 ? cores / node->local_size : 1};
    PMPI_Bcast(node_info, 3, MPI_INT, 0, node->node_comm);
    node->node = node_info[0];
    node->nnodes = node_info[1];
    har_host_class(node_info[2], c->host_cls, sizeof c->host_cls);
    int sizes[2] = {-node->local_size, node->local_size};  /* min and max in one call */
    PMPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, comm);
    node->uniform = -sizes[0] == sizes[1];
    if (node->nnodes > 1 && node->uniform) PMPI_Comm_split(comm, node->local_rank, node->node, &node->rail_comm);
    if (node->nnodes > 1 && !node->uniform && node->local_rank == 0) node->leader_comm = leaders;
    else if (leaders != MPI_COMM_NULL) PMPI_Comm_free(&leaders);
    MPI_Comm internal[3] = {node->node_comm, node->rail_comm, node->leader_comm};
    for (int i = 0; i < 3; i++)
        if (internal[i] != MPI_COMM_NULL) PMPI_Comm_set_errhandler(internal[i], MPI_ERRORS_RETURN);

    /* The segment: local rank 0 makes it, the others map it by name. */
    pthread_mutex_lock(&lock);
    int over_cap = segments >= HAR_CFG(max_comms).i || node->local_size > HAR_MAX_LOCAL;
    if (!over_cap) segments++;
    pthread_mutex_unlock(&lock);
    struct { char name[56]; int ok; } seg_name = {"", 0};
    size_t slot = (size_t)c->set.slot_bytes;
    if (node->local_rank == 0 && !over_cap) {
        snprintf(seg_name.name, sizeof seg_name.name, "/har-%d-%u-%d", (int)getpid(),
                 __atomic_fetch_add(&seg_counter, 1, __ATOMIC_RELAXED), node->rank);
        seg_name.ok = har_seg_create(seg_name.name, node->local_size, slot) == 0;
    }
    PMPI_Bcast(&seg_name, (int)sizeof seg_name, MPI_BYTE, 0, node->node_comm);
    if (over_cap) {
        ok = 0;
        if (node->local_size > HAR_MAX_LOCAL)
            HAR_WARN_ONCE("a node holds more than %d ranks of a communicator: its all-reduces go to the MPI",
                          HAR_MAX_LOCAL);
        else
            HAR_WARN_ONCE("HAR_MAX_COMMS=%lld communicators of this process hold a node segment: later ones' "
                          "all-reduces go to the MPI", HAR_CFG(max_comms).i);
    } else if (!seg_name.ok || har_seg_attach(&node->seg, seg_name.name, node->local_rank) != 0) {
        ok = 0;
        pthread_mutex_lock(&lock);
        segments--;
        pthread_mutex_unlock(&lock);
    }
    node->scratch = malloc(slot);
    if (!node->scratch) ok = 0;
    /* Agreed in one exchange: whether every rank is set up, and whether some
     * rank has CUDA already (then every call starts with an arrival). */
    int agree[2] = {ok, ok && har_call_wants_cuda(node, call, 0) ? -1 : 0};
    PMPI_Allreduce(MPI_IN_PLACE, agree, 2, MPI_INT, MPI_MIN, comm);
    ok = agree[0];
    c->cuda_node = agree[1] < 0;
    /* Everyone has mapped it (or given up): the name can go, so that a
     * crash leaves nothing behind in /dev/shm. */
    if (node->local_rank == 0 && seg_name.ok) har_seg_unlink(seg_name.name);
    c->usable = ok;
    if (!ok) {
        release_segment(c);
        if (node->rank == 0 && !over_cap)
            har_log(HAR_LOG_WARN, "node segment could not be set up on every rank; "
                    "this communicator's all-reduces go to the MPI");
        return;
    }
    HAR_LOG(HAR_LOG_DEBUG, "communicator of %d ranks: node %d of %d, local rank %d of %d, %s, segment %zu bytes, "
            "host class %s", node->size, node->node, node->nnodes, node->local_rank, node->local_size,
            node->nnodes == 1 ? "one node" : node->uniform ? "rails" : "leader",
            har_seg_bytes(node->local_size, slot), c->host_cls);
}

har_comm_t *har_comm_peek(MPI_Comm comm)
{
    har_comm_t *c = NULL;
    int found = 0;
    if (keyval == MPI_KEYVAL_INVALID || PMPI_Comm_get_attr(comm, keyval, &c, &found) != MPI_SUCCESS) return NULL;
    return found ? c : NULL;
}

har_comm_t *har_comm_get(MPI_Comm comm, const har_call_t *call)
{
    har_comm_t *c;
    int found = 0;
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
    c->node.node_comm = c->node.rail_comm = c->node.leader_comm = MPI_COMM_NULL;
    c->eng[HAR_PATH_HOST_SEGMENT].state = HAR_ENGINE_ON;
    int inter = 0, size = 1;
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter) PMPI_Comm_size(comm, &size);
    /* Both facts are the same on every rank: no collective needed to agree. */
    if (!inter && size > 1) state_setup(c, call);
    pthread_mutex_lock(&lock);
    c->next = live;
    if (live) live->prev = c;
    live = c;
    pthread_mutex_unlock(&lock);
    PMPI_Comm_set_attr(comm, keyval, c);
    return c;
}
