/* The CUDA IPC engine: per rank one cudaMalloc'd region (flag area, then
 * two data slots) on the GPU that holds its buffers, mapped into every local
 * peer with CUDA IPC, and the driver that runs a call's chunks through the
 * kernels of kernels.cu.
 *
 * Set-up is collective on the node and agrees everywhere: the node uses the
 * kernels only if every rank's GPU is visible to every other and reachable
 * peer to peer (the survey), no two ranks share a GPU (unless
 * HAR_IPC_SHARED_GPU=1: their kernels would time-slice), and a kernel really
 * loaded a pattern each peer wrote. */
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "core/config.h"
#include "core/log.h"
#include "cuda/kernels.h"
#include "cuda/stream.h"
#include "engine.h"
#include "inter/inter.h"

typedef struct {
    int nranks, me, device;
    size_t slot_bytes;
    char *base;                          /* own allocation */
    char *peer[HAR_DEV_MAX_RANKS];       /* every rank's allocation as mapped here */
    /* har's own stream, a blocking one: it waits for work the application
     * queued on the legacy default stream (a cudaMemcpy from pageable memory
     * returns before its DMA has landed), and the application's later work
     * there waits for har's. */
    cudaStream_t stream;
    volatile int *abort_host;            /* pinned, mapped: kernels poll it */
    int *abort_dev;
    char *stage, *tmp;                   /* pinned host: inter-node shard and ring blocks */
    uint64_t epoch;                      /* device barriers used; the same on every rank */
    unsigned seq;                        /* chunks so far: the slot parity */
} ipc_t;

static void ipc_destroy(void *engine)
{
    ipc_t *d = engine;
    if (!d) return;
    har_gpu_scope_t scope;
    har_gpu_enter(d->device, &scope);
    for (int r = 0; r < d->nranks; r++)
        if (d->peer[r] && r != d->me) cudaIpcCloseMemHandle(d->peer[r]);
    if (d->base) cudaFree(d->base);
    if (d->stream) cudaStreamDestroy(d->stream);
    if (d->abort_host) cudaFreeHost((void *)d->abort_host);
    if (d->stage) cudaFreeHost(d->stage);
    if (d->tmp) cudaFreeHost(d->tmp);
    cudaGetLastError();
    har_gpu_leave(&scope);
    free(d);
}

/* Maps the peers' segments and proves, with a kernel, that this GPU loads
 * what each peer wrote. */
static int map_peers(ipc_t *d, const cudaIpcMemHandle_t *handles, char *why, size_t why_len)
{
    char *probe_out = NULL;
    if (har_gpu_check(cudaMalloc((void **)&probe_out, 16), "cudaMalloc (probe)") != HAR_OK) {
        snprintf(why, why_len, "no GPU memory for the probe");
        return 0;
    }
    int ok = 1;
    for (int r = 0; ok && r < d->nranks; r++) {
        if (r == d->me) continue;
        cudaError_t e = cudaIpcOpenMemHandle((void **)&d->peer[r], handles[r], cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            snprintf(why, why_len, "cudaIpcOpenMemHandle of local rank %d's segment: %s%s", r, cudaGetErrorString(e),
                     e == cudaErrorAlreadyMapped ? " (another library mapped it in this process)" : "");
            cudaGetLastError();
            d->peer[r] = NULL;
            ok = 0;
            break;
        }
        uint32_t got[4] = {0}, want[4] = {0x68617221u, (uint32_t)r, 0, 0};
        ok = har_dev_probe(d->peer[r] + HAR_DEV_PROBE_OFFSET, probe_out, d->stream) == cudaSuccess &&
             cudaMemcpy(got, probe_out, 16, cudaMemcpyDeviceToHost) == cudaSuccess && !memcmp(got, want, 16);
        if (!ok) {
            snprintf(why, why_len, "a kernel reading local rank %d's memory got the wrong data", r);
            cudaGetLastError();
        }
    }
    cudaFree(probe_out);
    return ok;
}

static har_engine_setup_t ipc_setup(har_node_t *node, const har_gpu_t *gpu, void **engine)
{
    const char *what = "CUDA IPC engine", *instead = "device buffers take NCCL or the host segment";
    char why[256] = "";
    *engine = NULL;
    /* What the survey and the settings already say, the same on every rank. */
    int here = 1;
    if (!HAR_CFG(ipc).i) here = 0, snprintf(why, sizeof why, "HAR_IPC=0");
    else if (node->local_size > HAR_DEV_MAX_RANKS)
        here = 0, snprintf(why, sizeof why, "more than %d local ranks", HAR_DEV_MAX_RANKS);
    else if (gpu->shared_gpu && !HAR_CFG(ipc_shared_gpu).i)
        here = 0, snprintf(why, sizeof why, "local ranks share a GPU (HAR_IPC_SHARED_GPU=1 allows it, with MPS)");
    else if (!gpu->reachable && !gpu->shared_gpu)
        here = 0, snprintf(why, sizeof why, "the local GPUs cannot all load each other's memory");
    if (!har_node_agree(node, here, 1, what, why, instead)) return HAR_ENGINE_NOT_HERE;

    ipc_t *d = calloc(1, sizeof *d);
    har_gpu_scope_t scope = {0};
    cudaIpcMemHandle_t handle, *handles = calloc((size_t)node->local_size, sizeof *handles);
    int ok = d && handles;
    if (!ok) snprintf(why, sizeof why, "out of memory");
    if (ok) {
        d->nranks = node->local_size;
        d->me = node->local_rank;
        d->device = gpu->device;
        d->slot_bytes = (size_t)node->set->device_slot_bytes;
        size_t bytes = HAR_DEV_FLAG_BYTES + 2 * d->slot_bytes;
        uint32_t pattern[4] = {0x68617221u, (uint32_t)d->me, 0, 0};
        ok = har_gpu_enter(d->device, &scope) == HAR_OK &&
             har_gpu_check(cudaStreamCreateWithFlags(&d->stream, cudaStreamDefault), "cudaStreamCreate") == HAR_OK &&
             har_gpu_check(cudaMalloc((void **)&d->base, bytes), "cudaMalloc (CUDA IPC segment)") == HAR_OK &&
             har_gpu_check(cudaMemset(d->base, 0, HAR_DEV_FLAG_BYTES), "cudaMemset") == HAR_OK &&
             har_gpu_check(cudaMemcpy(d->base + HAR_DEV_PROBE_OFFSET, pattern, 16, cudaMemcpyHostToDevice),
                           "cudaMemcpy") == HAR_OK &&
             har_gpu_check(cudaIpcGetMemHandle(&handle, d->base), "cudaIpcGetMemHandle") == HAR_OK &&
             har_gpu_check(cudaHostAlloc((void **)&d->abort_host, sizeof(int), cudaHostAllocMapped),
                           "cudaHostAlloc") == HAR_OK &&
             har_gpu_check(cudaHostGetDevicePointer((void **)&d->abort_dev, (void *)d->abort_host, 0),
                           "mapped abort flag") == HAR_OK;
        if (!ok) snprintf(why, sizeof why, "a CUDA call failed (above), %zu bytes of GPU memory asked", bytes);
        if (ok) {
            *d->abort_host = 0;
            d->peer[d->me] = d->base;
        }
    }
#ifdef HAR_TEST_HOOKS
    if (HAR_CFG(test_ipc_fail).i && node->local_rank == 0) ok = 0, snprintf(why, sizeof why, "HAR_TEST_IPC_FAIL");
#endif
    /* Everyone exchanges, even a rank that failed, so nobody waits alone. */
    ok = har_node_agree(node, ok, 0, what, why, instead);
    if (ok) {
        MPI_Request req;
        ok = har_node_exchange(node, PMPI_Iallgather(&handle, (int)sizeof handle, MPI_BYTE, handles, (int)sizeof handle,
                                                     MPI_BYTE, node->node_comm, &req), &req, what) == HAR_OK;
        if (!ok) snprintf(why, sizeof why, "exchanging the IPC handles failed");
        ok = ok && map_peers(d, handles, why, sizeof why);
        ok = !har_node_failed(node) && har_node_agree(node, ok, 0, what, why, instead);
    }
    har_gpu_leave(&scope);
    free(handles);
    if (!ok) {
        ipc_destroy(d);
        return HAR_ENGINE_FAILED;
    }
    HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC engine: %d local ranks, GPU %d, %zu bytes of GPU memory per rank", d->nranks,
            d->device, HAR_DEV_FLAG_BYTES + 2 * d->slot_bytes);
    *engine = d;
    return HAR_ENGINE_READY;
}

static void stop_kernels(void *ctx) { *((ipc_t *)ctx)->abort_host = 1; }

static har_status_t run_chunks(ipc_t *d, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    har_gpu_watch_t watch = {NULL, stop_kernels, d};
    har_dev_args_t a;
    memset(&a, 0, sizeof a);
    a.nranks = d->nranks;
    a.me = d->me;
    a.elem = call->red.elem_size;
    a.dtype = call->red.dev_type;
    a.op = call->red.dev_op;
    a.one_shot = plan->one_shot;
    a.abort = d->abort_dev;
    a.aligned = ((uintptr_t)call->in | (uintptr_t)call->out) % 16 == 0;
    for (int r = 0; r < d->nranks; r++) a.flags[r] = d->peer[r];
    int across = node->nnodes > 1;
    if (across && !d->stage &&
        (har_gpu_check(cudaHostAlloc((void **)&d->stage, d->slot_bytes, 0), "cudaHostAlloc (stage)") != HAR_OK ||
         har_gpu_check(cudaHostAlloc((void **)&d->tmp, d->slot_bytes, 0), "cudaHostAlloc (ring)") != HAR_OK))
        return HAR_ST_CUDA;

    size_t chunk = har_chunk_elems(plan->chunk_bytes, a.elem);
    har_status_t st = HAR_OK;
    for (size_t done = 0; done < call->count && st == HAR_OK; done += a.n) {
        a.n = call->count - done < chunk ? call->count - done : chunk;
        a.in = call->in + done * a.elem;
        a.out = call->out + done * a.elem;
        unsigned parity = d->seq++ & 1;
        for (int r = 0; r < d->nranks; r++) a.slot[r] = d->peer[r] + HAR_DEV_FLAG_BYTES + parity * d->slot_bytes;
        a.epoch = d->epoch;
        d->epoch += 2;
        int blocks = har_dev_blocks(a.n * a.elem);
        a.phase = across ? HAR_DEV_REDUCE : HAR_DEV_WHOLE;
        if ((st = har_gpu_check(har_dev_launch(&a, blocks, d->stream), "kernel launch")) != HAR_OK) break;
        if (!across) continue;  /* one node: chunks queue up back to back */

        /* Between nodes: this rank's shard through pinned host memory. */
        size_t off, len;
        har_shard(a.n, a.elem, d->nranks, d->me, &off, &len);
        char *shard = a.slot[d->me] + off * a.elem;
        if (len > 0)
            st = har_gpu_check(cudaMemcpyAsync(d->stage, shard, len * a.elem, cudaMemcpyDeviceToHost, d->stream),
                               "copy to host");
        if (st == HAR_OK) st = har_gpu_wait(d->stream, node, &watch, "device shard");
        if (st == HAR_OK && len > 0)
            st = har_inter_allreduce(node, d->stage, len, call, d->tmp, d->slot_bytes, done == 0);
        if (st == HAR_OK && len > 0)
            st = har_gpu_check(cudaMemcpyAsync(shard, d->stage, len * a.elem, cudaMemcpyHostToDevice, d->stream),
                               "copy to device");
        a.phase = HAR_DEV_GATHER;
        if (st == HAR_OK) st = har_gpu_check(har_dev_launch(&a, blocks, d->stream), "kernel launch");
    }
    if (st != HAR_OK) {
        /* Peers' kernels may spin on this rank's flags: stop ours, and the
         * caller fails the segment so that theirs stop too. */
        stop_kernels(d);
        cudaStreamSynchronize(d->stream);
        cudaGetLastError();
        return st;
    }
    return har_gpu_wait(d->stream, node, &watch, "device");
}

static har_status_t ipc_run(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    ipc_t *d = engine;
    har_gpu_scope_t scope;
    har_status_t st = har_gpu_enter(d->device, &scope);
    if (st == HAR_OK) st = run_chunks(d, node, call, plan);
    har_gpu_leave(&scope);
    return st;
}

const har_engine_ops_t har_engine_ipc = {ipc_setup, ipc_run, ipc_destroy};
