/* The NCCL engine: ncclAllReduce on the node communicator, loaded at run
 * time (never linked), on its own blocking stream with the local peers
 * watched. It needs no CUDA IPC: it serves wherever every local rank holds
 * device buffers on a GPU of its own, with or without peer access between
 * them (NCCL picks its own transport). One node only: between nodes NCCL
 * is a transport of the inter layer (HAR_INTER=nccl, inter/nccl.c). What
 * it serves is in its descriptor at the end. */
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "core/config.h"
#include "core/log.h"
#include "core/types.h"
#include "cuda/stream.h"
#include "cuda/nccl.h"
#include "engines/engine.h"

typedef struct {
    har_nccl_comm_t nccl;     /* the node's communicator; none once aborted by a failure */
    int gpu;                  /* ordinal, in this process, of the GPU it works on */
    cudaStream_t stream;  /* blocking, as the IPC engine's (ipc_engine.c says why) */
} nccl_t;

static void nccl_destroy(void *engine)
{
    nccl_t *e = engine;
    if (!e) return;
    har_cuda_scope_t scope;
    har_cuda_enter(e->gpu, &scope);
    har_cuda_nccl_abort(&e->nccl);
    if (e->stream) cudaStreamDestroy(e->stream);
    cudaGetLastError();
    har_cuda_leave(&scope);
    free(e);
}

static har_engine_state_t nccl_setup(har_node_t *node, const har_cuda_gpu_t *gpu, void **engine)
{
    const char *what = "NCCL engine", *instead = "device buffers take the CUDA IPC kernels or the host segment";
    char why[320] = "";
    *engine = NULL;
    /* Every rank is here for the same call: load and agree before
     * ncclCommInitRank, which waits for all ranks. */
    const char *not_loaded;
    const har_nccl_api_t *api = har_cuda_nccl(&not_loaded);
    if (!api) snprintf(why, sizeof why, "not loaded: %s", not_loaded);
    if (!har_node_agree(node, api != NULL, 1, what, why, instead)) return HAR_ENGINE_NOT_HERE;

    nccl_t *e = calloc(1, sizeof *e);
    har_cuda_scope_t scope = {0};
    int ok = e != NULL;
    struct { har_ncclUniqueId id; int ok; } id = {{{0}}, 1};
    if (ok) {
        e->nccl.api = api;
        e->nccl.what = "NCCL all-reduce";
        e->gpu = gpu->ordinal;
        ok = har_cuda_enter(e->gpu, &scope) == HAR_OK &&
             har_cuda_status(cudaStreamCreateWithFlags(&e->stream, cudaStreamDefault), "cudaStreamCreate") == HAR_OK;
    }
    if (ok && node->local_rank == 0) {
        har_ncclResult_t r = api->get_unique_id(&id.id);
        id.ok = r == HAR_NCCL_SUCCESS;
        if (!id.ok) snprintf(why, sizeof why, "ncclGetUniqueId: %s", api->get_error_string(r));
    }
#ifdef HAR_TEST_HOOKS
    if (HAR_CFG(test_nccl_fail).i && node->local_rank == 0) ok = 0, snprintf(why, sizeof why, "HAR_TEST_NCCL_FAIL");
#endif
    if (!ok && !why[0]) snprintf(why, sizeof why, "a CUDA call failed (above)");
    ok = har_node_agree(node, ok, 0, what, why, instead);
    MPI_Request req;
    if (ok && har_node_exchange(node, PMPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, node->node_comm, &req), &req,
                                what) != HAR_OK)
        id.ok = 0;
    ok = ok && id.ok;
    if (ok) {
        har_ncclResult_t r = api->comm_init_rank(&e->nccl.comm, node->local_size, id.id, node->local_rank);
        if (r != HAR_NCCL_SUCCESS) {
            snprintf(why, sizeof why, "ncclCommInitRank: %s", api->get_error_string(r));
            e->nccl.comm = NULL;
        }
        ok = har_node_agree(node, e->nccl.comm != NULL, 0, what, why, instead);
    }
    har_cuda_leave(&scope);
    if (!ok) {
        nccl_destroy(e);
        return HAR_ENGINE_FAILED;
    }
    if (node->local_rank == 0)
        HAR_LOG(HAR_LOG_DEBUG, "NCCL %d.%d.%d serves this node's %d ranks (%s)", api->version / 10000,
                api->version / 100 % 100, api->version % 100, node->local_size, HAR_CFG(nccl).s);
    *engine = e;
    return HAR_ENGINE_READY;
}

static har_status_t nccl_run(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    (void)plan;
    nccl_t *e = engine;
    const har_nccl_api_t *api = e->nccl.api;
    har_cuda_scope_t scope;
    if (!e->nccl.comm) return HAR_ERR_PEER_FAILED;  /* aborted by an earlier failure */
    har_status_t st = har_cuda_enter(e->gpu, &scope);
    if (st == HAR_OK) {
        har_ncclResult_t r = api->all_reduce(call->in, call->out, call->count, har_cuda_nccl_type(call->red.dev_type),
                                             har_cuda_nccl_op(call->red.dev_op), e->nccl.comm, e->stream);
        if (r != HAR_NCCL_SUCCESS && r != HAR_NCCL_IN_PROGRESS) {
            har_note("ncclAllReduce: %s", api->get_error_string(r));
            har_cuda_nccl_abort(&e->nccl);
            st = HAR_ERR_CUDA;
        } else {
            har_cuda_watch_t watch = har_cuda_nccl_watch(&e->nccl);
            st = har_cuda_wait(e->stream, node, &watch, "NCCL");
        }
    }
    har_cuda_leave(&scope);
    return st;
}

/* One node (its communicator is the node's), a GPU per rank (NCCL refuses
 * two ranks on one), the kernels' types with sum, prod, min and max; for
 * large calls first (HAR_NCCL_MIN_BYTES), else after the kernels. */
const har_engine_t har_engine_nccl = {
    .can = {.path = HAR_PATH_NCCL, .takes = HAR_TAKES_DEVICE, .kernel_types = 1,
            .ops = HAR_NCCL_OPS, .rank = 2,
            .first_from = HAR_SETTING(nccl_min_bytes)},
    .setup = nccl_setup, .run = nccl_run, .destroy = nccl_destroy};
