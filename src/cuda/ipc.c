/* The CUDA IPC engine: per rank one cudaMalloc'd region (flag area, then
 * two data slots) on the GPU that holds its buffers, mapped into every local
 * peer with CUDA IPC, and the driver that runs a call's chunks through the
 * kernels of kernels.cu.
 *
 * Set-up is collective on the node and agrees everywhere: the node uses the
 * kernels only if every rank's GPU is visible to every other and reachable
 * peer to peer (the survey), ranks share a GPU only where MPS runs their
 * kernels side by side (or HAR_IPC_SHARED_GPU=1 says to share it anyway:
 * time-sliced, every barrier waits for a context switch), and a kernel
 * really loaded a pattern each peer wrote.
 *
 * A block waits for the same block of every peer, so the blocks of every
 * rank on a GPU must be resident together or none may finish: the node
 * agrees on a grid that fits when every rank that may share the GPU runs
 * its kernel at once (plan.h, har_plan_grid), and blocks loop over more
 * data instead of launching more blocks. The occupancy counts, it reserves
 * nothing: an application's kernel holding multiprocessors delays the
 * call, and a peer that never comes is caught by the abort flag. */
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
    int nranks, me, gpu;                 /* gpu: ordinal here of the GPU the segment is on */
    int max_blocks;                      /* the grid the node agreed */
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
    har_gpu_enter(d->gpu, &scope);
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
/* What each rank offers its peers at set-up: its segment, and the largest
 * grid that is safe on its GPU. */
typedef struct {
    cudaIpcMemHandle_t handle;
    int grid;
} offer_t;

static int map_peers(ipc_t *d, const offer_t *offers, char *why, size_t why_len)
{
    char *probe_out = NULL;
    if (har_gpu_check(cudaMalloc((void **)&probe_out, 16), "cudaMalloc (probe)") != HAR_OK) {
        snprintf(why, why_len, "no GPU memory for the probe");
        return 0;
    }
    int ok = 1;
    for (int r = 0; ok && r < d->nranks; r++) {
        if (r == d->me) continue;
        cudaError_t e = cudaIpcOpenMemHandle((void **)&d->peer[r], offers[r].handle, cudaIpcMemLazyEnablePeerAccess);
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

/* This rank's largest safe grid on its GPU (current): see har_plan_grid. */
static int safe_grid(const har_node_t *node, const har_gpu_t *gpu, char *why, size_t why_len)
{
    int per_sm = har_dev_blocks_per_sm(), gpu_sms = 0, ctx_sms = har_cuda_context_sms();
    if (har_gpu_check(cudaDeviceGetAttribute(&gpu_sms, cudaDevAttrMultiProcessorCount, gpu->ordinal),
                      "cudaDeviceGetAttribute") != HAR_OK || per_sm <= 0) {
        snprintf(why, why_len, "the runtime could not say how many blocks fit on the GPU");
        return 0;
    }
    if (ctx_sms <= 0 || ctx_sms > gpu_sms) ctx_sms = gpu_sms;
    /* This node's ranks on the GPU, and every other rank of the job on this
     * machine (other communicators, other nodes: pretend ones, hosts made of
     * namespaces), whose GPUs this node cannot know. Without that count
     * (MPI initialised behind har's back), this node's ranks on the GPU. */
    int job = har_machine_ranks(), clients = gpu->same_gpu + (job > node->local_size ? job - node->local_size : 0);
    int grid = har_plan_grid(per_sm, ctx_sms, gpu_sms, clients, HAR_DEV_MAX_BLOCKS);
    if (grid < 1)
        snprintf(why, why_len, "%d ranks may share a GPU where %d blocks fit at once", clients, per_sm * gpu_sms);
    HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC engine: %d block(s) per multiprocessor, %d of %d multiprocessors for this "
            "context, %d rank(s) may use this GPU: at most %d blocks per kernel", per_sm, ctx_sms, gpu_sms, clients,
            grid);
    return grid;
}

static har_engine_state_t ipc_setup(har_node_t *node, const har_gpu_t *gpu, void **engine)
{
    const char *what = "CUDA IPC engine", *instead = "device buffers take NCCL or the host segment";
    char why[256] = "";
    *engine = NULL;
    /* What the survey and the settings already say, the same on every rank. */
    int here = 1;
    const char *share = HAR_CFG(ipc_shared_gpu).s;
    if (!HAR_CFG(ipc).i) here = 0, snprintf(why, sizeof why, "HAR_IPC=0");
    else if (gpu->shared_gpu && (strcmp(share, "0") == 0 || (strcmp(share, "auto") == 0 && !gpu->mps)))
        here = 0, snprintf(why, sizeof why, "local ranks share a GPU %s", gpu->mps ? "and HAR_IPC_SHARED_GPU=0"
                           : "without MPS, so their kernels would time-slice (HAR_IPC_SHARED_GPU=1 allows it)");
    else if (!gpu->reachable && !gpu->shared_gpu)
        here = 0, snprintf(why, sizeof why, "the local GPUs cannot all load each other's memory");
    if (!har_node_agree(node, here, 1, what, why, instead)) return HAR_ENGINE_NOT_HERE;
    if (gpu->shared_gpu && !gpu->mps && node->local_rank == 0)
        HAR_WARN_ONCE("HAR_IPC_SHARED_GPU=1 without MPS: the kernels of ranks sharing a GPU time-slice, and each "
                      "call waits for context switches (start nvidia-cuda-mps-control -d)");

    ipc_t *d = calloc(1, sizeof *d);
    har_gpu_scope_t scope = {0};
    offer_t mine, *offers = calloc((size_t)node->local_size, sizeof *offers);
    memset(&mine, 0, sizeof mine);
    int ok = d && offers;
    if (!ok) snprintf(why, sizeof why, "out of memory");
    if (ok) {
        d->nranks = node->local_size;
        d->me = node->local_rank;
        d->gpu = gpu->ordinal;
        d->slot_bytes = (size_t)node->set->device_slot_bytes;
        size_t bytes = HAR_DEV_FLAG_BYTES + 2 * d->slot_bytes;
        uint32_t pattern[4] = {0x68617221u, (uint32_t)d->me, 0, 0};
        ok = har_gpu_enter(d->gpu, &scope) == HAR_OK &&
             har_gpu_check(cudaStreamCreateWithFlags(&d->stream, cudaStreamDefault), "cudaStreamCreate") == HAR_OK &&
             har_gpu_check(cudaMalloc((void **)&d->base, bytes), "cudaMalloc (CUDA IPC segment)") == HAR_OK &&
             har_gpu_check(cudaMemset(d->base, 0, HAR_DEV_FLAG_BYTES), "cudaMemset") == HAR_OK &&
             har_gpu_check(cudaMemcpy(d->base + HAR_DEV_PROBE_OFFSET, pattern, 16, cudaMemcpyHostToDevice),
                           "cudaMemcpy") == HAR_OK &&
             har_gpu_check(cudaIpcGetMemHandle(&mine.handle, d->base), "cudaIpcGetMemHandle") == HAR_OK &&
             har_gpu_check(cudaHostAlloc((void **)&d->abort_host, sizeof(int), cudaHostAllocMapped),
                           "cudaHostAlloc") == HAR_OK &&
             har_gpu_check(cudaHostGetDevicePointer((void **)&d->abort_dev, (void *)d->abort_host, 0),
                           "mapped abort flag") == HAR_OK;
        if (!ok) snprintf(why, sizeof why, "a CUDA call failed (above), %zu bytes of GPU memory asked", bytes);
        else ok = (d->max_blocks = safe_grid(node, gpu, why, sizeof why)) > 0;
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
        /* The node runs the smallest grid: a block meets the same block of
         * every peer. */
        MPI_Request req;
        mine.grid = d->max_blocks;
        ok = har_node_exchange(node, PMPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, offers, (int)sizeof mine,
                                                     MPI_BYTE, node->node_comm, &req), &req, what) == HAR_OK;
        if (!ok) snprintf(why, sizeof why, "exchanging the IPC handles failed");
        for (int r = 0; ok && r < node->local_size; r++)
            if (offers[r].grid < d->max_blocks) d->max_blocks = offers[r].grid;
        ok = ok && map_peers(d, offers, why, sizeof why);
        ok = !har_node_failed(node) && har_node_agree(node, ok, 0, what, why, instead);
    }
    har_gpu_leave(&scope);
    free(offers);
    if (!ok) {
        ipc_destroy(d);
        return HAR_ENGINE_FAILED;
    }
    HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC engine: %d local ranks, GPU %d, %zu bytes of GPU memory per rank, kernels of at "
            "most %d blocks", d->nranks, d->gpu, HAR_DEV_FLAG_BYTES + 2 * d->slot_bytes, d->max_blocks);
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
        return HAR_ERR_CUDA;

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
        int blocks = har_dev_blocks(a.n * a.elem, d->max_blocks);
        a.phase = across ? HAR_DEV_REDUCE : HAR_DEV_WHOLE;
        if ((st = har_gpu_check(har_dev_launch(&a, blocks, d->stream), "kernel launch")) != HAR_OK) break;
        if (!across) continue;  /* one node: chunks queue up back to back */

        /* Between nodes: this rank's reduced shard, once the kernel has made
         * it (the wait watches the peers its blocks wait for), goes across
         * in device memory; inter.c stages it through pinned host memory
         * for a transport that needs host memory. */
        size_t off, len;
        har_shard(a.n, a.elem, d->nranks, d->me, &off, &len);
        har_inter_block_t across = {a.slot[d->me] + off * a.elem, len, HAR_MEM_DEVICE, call, done == 0, d->stage,
                                    d->tmp, d->slot_bytes};
        st = har_gpu_wait(d->stream, node, &watch, "device shard");
        if (st == HAR_OK && len > 0) st = har_inter_allreduce(node, &across);
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
    har_status_t st = har_gpu_enter(d->gpu, &scope);
    if (st == HAR_OK) st = run_chunks(d, node, call, plan);
    har_gpu_leave(&scope);
    return st;
}

/* The kernels reduce the 32- and 64-bit types with every op; a device
 * segment serves at most HAR_DEV_MAX_RANKS ranks (its flag area). */
const har_engine_t har_engine_ipc = {
    .can = {.path = HAR_PATH_IPC, .takes = HAR_TAKES_DEVICE, .shots = HAR_BIT(ONE_SHOT) | HAR_BIT(TWO_SHOT),
            .kernel_types = 1, .across = HAR_BIT(RAILS), .shared_gpu = 1, .max_local = HAR_DEV_MAX_RANKS,
            .rank = 1, .device_slot = 1, .first_from = HAR_NO_SETTING,
            .one_shot_max = offsetof(har_settings_t, device_one_shot_max)},
    .setup = ipc_setup, .run = ipc_run, .destroy = ipc_destroy};
