/* NCCL's all-reduce on the rail, a transport of inter.h (HAR_INTER=nccl):
 * each block between nodes goes to ncclAllReduce on a NCCL communicator of
 * this rank's rail (or the leaders'), made at the rail's first block that
 * the plan gives it, on the GPU of that block (or the current one for host
 * blocks). It moves device memory as it is; a host block (a node whose
 * ranks hold host buffers) goes through a device copy of its own.
 *
 * NCCL checks nothing of what its ranks call, so a call's first block is
 * preceded by har's check of every rank's call (har_inter_check_calls: the
 * ring's header exchange, then the rail's agreement on its outcome), which
 * fails the call on every rank before any enters NCCL where a rank's count,
 * type or op differs. Its wait is
 * har's bounded wait on its stream (local peers' liveness, failure notices
 * from other nodes, HAR_TIMEOUT); on a failure the communicator is aborted,
 * which ends NCCL's kernels (har's abort flag does not reach them), and it
 * serves no more. The plan gives it only what every rank agreed it can
 * carry: NCCL's types and ops, not under HAR_CHECK (plan.c). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "core/log.h"
#include "cuda/driver.h"
#include "cuda/nccl.h"
#include "cuda/stream.h"
#include "inter/inter.h"

struct har_inter_nccl {
    har_nccl_comm_t nccl;       /* the rail's communicator; none once aborted: the rail serves no more */
    int gpu;
    cudaStream_t stream;
    char *scratch;              /* device memory for host blocks, scratch_bytes */
    size_t scratch_bytes;
};

int har_inter_nccl_here(char *why, size_t len)
{
    const char *not_loaded;
    if (!har_cuda_nccl(&not_loaded)) {
        snprintf(why, len, "NCCL is not loaded: %s", not_loaded);
        return 0;
    }
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
        cudaGetLastError();
        snprintf(why, len, "no GPU");
        return 0;
    }
    return 1;
}

static void release(har_node_t *node)
{
    struct har_inter_nccl *t = node->inter_nccl;
    if (!t) return;
    har_cuda_scope_t scope;
    int entered = har_cuda_enter(t->gpu, &scope) == HAR_OK;
    /* Aborted even where its GPU could not be made current (NCCL makes it
     * so itself), inside the scope, which gives the thread back its own
     * context either way. */
    har_cuda_nccl_abort(&t->nccl);
    if (entered) {
        if (t->stream) cudaStreamDestroy(t->stream);
        if (t->scratch) cudaFree(t->scratch);
    }
    cudaGetLastError();
    har_cuda_leave(&scope);
    free(t);
    node->inter_nccl = NULL;
}

/* The GPU of a call's blocks: its device buffers', else the current
 * device (a host block goes through a device copy there); -1 if none. */
static int block_gpu(const har_inter_block_t *b)
{
    int gpu = -1;
    if (b->kind == HAR_MEM_DEVICE) har_cuda_mem_kind(b->data, &gpu);
    else if (cudaGetDevice(&gpu) != cudaSuccess) gpu = -1;
    return gpu;
}

/* The rail's NCCL communicator on `gpu`: the rail's first rank makes
 * NCCL's id and sends it; every rank makes its stream; the rail agrees
 * that all could (so that none waits in ncclCommInitRank for one that
 * will not come); then all join. On a failure the call fails, and what was
 * made stays in node->inter_nccl (with no communicator) until the
 * communicator goes. */
static har_status_t make_comm(har_node_t *node, int gpu)
{
    const char *step = "inter_nccl set-up";
    const har_nccl_api_t *api = har_cuda_nccl(NULL);
    struct har_inter_nccl *t = calloc(1, sizeof *t);
    int ok = api && t && gpu >= 0;
    har_cuda_scope_t scope = {0};
    int entered = ok && har_cuda_enter(gpu, &scope) == HAR_OK;
    if (entered) {
        t->nccl.api = api;
        t->nccl.what = "NCCL all-reduce between nodes";
        t->gpu = gpu;
        ok = har_cuda_status(cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking), "cudaStreamCreate") ==
             HAR_OK;
    } else {
        ok = 0;
    }
    har_ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (ok && node->across_rank == 0) {
        har_ncclResult_t r = api->get_unique_id(&id);
        if (r != HAR_NCCL_SUCCESS) har_note("ncclGetUniqueId: %s", api->get_error_string(r));
        ok = r == HAR_NCCL_SUCCESS;
    }
    int all = 0;  /* every rank of the rail ready, the first with its id */
    MPI_Request req;
    har_status_t st = har_node_exchange(node, PMPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node->notice_comm, &req),
                                        &req, step);
    if (st == HAR_OK)
        st = har_node_exchange(node, PMPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, node->notice_comm, &req), &req,
                               step);
    if (st == HAR_OK && !all) {
        if (ok) har_note("NCCL could not be set up on another rank of this rank's rail");
        else if (gpu < 0) har_note("NCCL between nodes: no GPU for the rail's communicator");
        st = HAR_ERR_CUDA;
        har_node_fail(node, st, -1, step);
    }
    if (st == HAR_OK) {
        har_ncclResult_t r = api->comm_init_rank(&t->nccl.comm, node->across_size, id, node->across_rank);
        if (r != HAR_NCCL_SUCCESS) {
            har_note("ncclCommInitRank: %s", api->get_error_string(r));
            t->nccl.comm = NULL;
            st = HAR_ERR_CUDA;
            har_node_fail(node, st, -1, step);
        }
    }
    if (entered) har_cuda_leave(&scope);
    if (st == HAR_OK) {
        node->inter_nccl = t;
        if (node->across_rank == 0)
            HAR_LOG(HAR_LOG_DEBUG, "NCCL %d.%d.%d carries blocks between %d nodes", api->version / 10000,
                    api->version / 100 % 100, api->version % 100, node->across_size);
        return HAR_OK;
    }
    node->inter_nccl = t;  /* released with the others where the communicator goes */
    return st;
}

/* Room for a host block of `bytes` on the device. cudaFree waits for the
 * whole device, so the scratch only grows, by doubling. */
static har_status_t scratch_for(struct har_inter_nccl *t, size_t bytes)
{
    if (bytes <= t->scratch_bytes) return HAR_OK;
    size_t want = t->scratch_bytes ? t->scratch_bytes : 1 << 20;
    while (want < bytes) want *= 2;
    if (t->scratch) cudaFree(t->scratch);
    t->scratch = NULL;
    t->scratch_bytes = 0;
    har_status_t st = har_cuda_status(cudaMalloc((void **)&t->scratch, want), "cudaMalloc (NCCL between nodes)");
    if (st == HAR_OK) t->scratch_bytes = want;
    return st;
}

static har_status_t nccl_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    const char *step = "inter_nccl";
    if (node->across_size == 1) return HAR_OK;
    har_status_t st = b->first ? har_inter_check_calls(node, b, step) : HAR_OK;
    if (st != HAR_OK) return st;
    /* A call's blocks are all on one GPU: its first block tells which,
     * asked only where it decides something (the communicator's GPU, or
     * device data that must be on it). */
    int ask = !node->inter_nccl || (b->first && b->kind == HAR_MEM_DEVICE);
    int gpu = ask ? block_gpu(b) : node->inter_nccl->gpu;
    if (!node->inter_nccl && (st = make_comm(node, gpu)) != HAR_OK) return st;
    struct har_inter_nccl *t = node->inter_nccl;
    if (!t->nccl.comm) {  /* aborted by an earlier failure */
        har_note("NCCL between nodes was aborted by an earlier failure");
        har_node_fail(node, HAR_ERR_PEER_FAILED, -1, step);
        return HAR_ERR_PEER_FAILED;
    }
    /* The communicator stays on its first call's GPU: device data on
     * another would reach NCCL's kernels there as a foreign pointer. */
    if (b->kind == HAR_MEM_DEVICE && gpu != t->gpu) {
        har_note("NCCL between nodes: this call's buffers are on GPU %d, the rail's NCCL communicator on GPU %d "
                 "(where its first call's data was)", gpu, t->gpu);
        har_node_fail(node, HAR_ERR_CUDA, -1, step);
        return HAR_ERR_CUDA;
    }
    size_t bytes = b->n * b->call->red.elem_size;
    har_cuda_scope_t scope;
    if ((st = har_cuda_enter(t->gpu, &scope)) != HAR_OK) {
        har_node_fail(node, st, -1, step);
        return st;
    }
    char *data = b->data;
    if (b->kind == HAR_MEM_HOST && (st = scratch_for(t, bytes)) == HAR_OK) {
        data = t->scratch;
        st = har_cuda_status(cudaMemcpyAsync(data, b->data, bytes, cudaMemcpyHostToDevice, t->stream),
                             "copy to device (NCCL between nodes)");
    }
    if (st == HAR_OK) {
        har_ncclResult_t r = t->nccl.api->all_reduce(data, data, b->n, har_cuda_nccl_type(b->call->red.dev_type),
                                                     har_cuda_nccl_op(b->call->red.dev_op), t->nccl.comm, t->stream);
        if (r != HAR_NCCL_SUCCESS && r != HAR_NCCL_IN_PROGRESS) {
            har_note("ncclAllReduce between nodes: %s", t->nccl.api->get_error_string(r));
            har_cuda_nccl_abort(&t->nccl);
            st = HAR_ERR_CUDA;
        }
    }
    har_cuda_watch_t watch = har_cuda_nccl_watch(&t->nccl);
    if (st == HAR_OK) st = har_cuda_wait(t->stream, node, &watch, step);
    /* Back to the host only once NCCL is done: a copy to pageable memory
     * returns when it has landed, and queued behind NCCL it would hold
     * this thread out of the bounded wait. */
    if (st == HAR_OK && b->kind == HAR_MEM_HOST) {
        st = har_cuda_status(cudaMemcpyAsync(b->data, data, bytes, cudaMemcpyDeviceToHost, t->stream),
                             "copy to host (NCCL between nodes)");
        if (st == HAR_OK) st = har_cuda_wait(t->stream, node, &watch, step);
    }
    if (st != HAR_OK) har_node_fail(node, st, -1, step);  /* the first record of a failure stands */
    har_cuda_leave(&scope);
    return st;
}

static int always(void) { return 1; }

const har_inter_t har_inter_nccl = {HAR_PATH_INTER_NCCL, always, 0, NULL, nccl_allreduce, release};
