/* The test build's engine: the least an engine can be, and the proof that
 * adding one takes its file (and its place in Makefile.am's list), its line
 * in paths.h's HAR_ENGINE_LIST and its tests, nothing more. Every local
 * rank gathers every rank's input (host copies, over the node
 * communicator, waited for like any exchange) and reduces it alone in rank
 * order: results bitwise identical on every rank. One node, any buffers;
 * only when HAR_ALGO (or har_set_algo) names it. */
#include <stdlib.h>
#include <string.h>
#include "engines/engine.h"

static har_engine_state_t fake_setup(har_node_t *node, const har_cuda_gpu_t *gpu, void **engine)
{
    (void)node; (void)gpu;
    *engine = NULL;
    return HAR_ENGINE_READY;
}

static har_status_t fake_run(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    (void)engine; (void)plan;
    size_t bytes = call->bytes;
    char *all = malloc(bytes * (size_t)node->local_size + 1), *mine = malloc(bytes + 1);
    har_status_t st =
        all && mine ? har_cuda_copy(mine, HAR_MEM_HOST, call->in, call->in_kind, bytes) : HAR_ERR_INTERNAL;
    MPI_Request req;
    if (st == HAR_OK && bytes <= (size_t)INT32_MAX)
        st = har_node_exchange(node, PMPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                                                     node->node_comm, &req), &req, "fake");
    else if (st == HAR_OK)
        st = HAR_ERR_INTERNAL;  /* calls this large are for real engines */
    if (st == HAR_ERR_INTERNAL) har_node_fail(node, st, -1, "fake");
    for (int r = 1; st == HAR_OK && r < node->local_size; r++) call->red.fn(all, all + (size_t)r * bytes, call->count);
    if (st == HAR_OK) st = har_cuda_copy(call->out, call->out_kind, all, HAR_MEM_HOST, bytes);
    free(all);
    free(mine);
    return st;
}

/* Its non-blocking calls: the gather posted at the start, the reduction
 * when a test finds it done (the MPI's progress moves it meanwhile), so
 * that the request machinery is tested where no GPU is. */
typedef struct {
    har_call_t call;
    int ranks;
    char *all, *mine;
    MPI_Request req;
} fake_op_t;

static void fake_op_free(fake_op_t *o)
{
    free(o->all);
    free(o->mine);
    free(o);
}

static har_status_t fake_start(void *engine, har_node_t *node, const har_call_t *call, har_plan_t *plan,
                               uint64_t no, void **op)
{
    (void)engine; (void)plan; (void)no;
    size_t bytes = call->bytes;
    fake_op_t *o = calloc(1, sizeof *o);
    if (!o || bytes > (size_t)INT32_MAX || !(o->all = malloc(bytes * (size_t)node->local_size + 1)) ||
        !(o->mine = malloc(bytes + 1))) {
        if (o) fake_op_free(o);
        return HAR_ERR_INTERNAL;
    }
    o->call = *call;
    o->ranks = node->local_size;
    har_status_t st = har_cuda_copy(o->mine, HAR_MEM_HOST, call->in, call->in_kind, bytes);
    if (st == HAR_OK && PMPI_Iallgather(o->mine, (int)bytes, MPI_BYTE, o->all, (int)bytes, MPI_BYTE, node->node_comm,
                                        &o->req) != MPI_SUCCESS)
        st = HAR_ERR_INTERNAL;
    if (st != HAR_OK) {
        fake_op_free(o);
        return st;
    }
    *op = o;
    return HAR_OK;
}

static int fake_test(void *op, har_status_t *st)
{
    fake_op_t *o = op;
    int done = 0;
    *st = PMPI_Test(&o->req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS ? HAR_OK : HAR_ERR_INTERNAL;
    if (*st == HAR_OK && !done) return 0;
    const har_call_t *call = &o->call;
    for (int r = 1; *st == HAR_OK && r < o->ranks; r++) call->red.fn(o->all, o->all + (size_t)r * call->bytes, call->count);
    if (*st == HAR_OK) *st = har_cuda_copy(call->out, call->out_kind, o->all, HAR_MEM_HOST, call->bytes);
    fake_op_free(o);
    return 1;
}

static void fake_destroy(void *engine) { (void)engine; }

const har_engine_t har_engine_fake = {
    .can = {.path = HAR_PATH_FAKE, .takes = HAR_TAKES_HOST | HAR_TAKES_DEVICE, .shared_gpu = 1, .forced_only = 1,
            .starts_anywhere = 1, .rank = 9},
    .setup = fake_setup, .run = fake_run, .start = fake_start, .test = fake_test, .destroy = fake_destroy};
