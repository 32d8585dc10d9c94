/* The device segment: per rank one cudaMalloc'd region (flag area, then two
 * data slots), mapped into every local peer with CUDA IPC, and the driver
 * that runs a call's chunks through the kernels of intra_cuda.cu.
 *
 * Set-up is collective on the node communicator and agrees everywhere: a
 * node uses IPC only if every rank has a current CUDA context, sees every
 * peer's GPU (by UUID, never by ordinal), can access it peer to peer, and a
 * kernel really loaded a pattern each peer wrote. Anything less: no device
 * segment, and device buffers take the host segment. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "internal.h"
#include "seg.h"
#include "seg_cuda.h"
#include "nccl_api.h"

struct har_devseg {
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
    int shared_gpu;                      /* some local ranks share a GPU (agreed) */
    enum { NCCL_UNTRIED, NCCL_READY, NCCL_UNUSABLE } nccl_state;  /* agreed */
    har_ncclComm_t nccl;                 /* on the node communicator, made at first use */
};

/* NCCL is loaded once per process, on first use. */
static struct {
    pthread_once_t once;
    har_nccl_api_t api;
    int loaded;
    char why[256];
} nccl = {PTHREAD_ONCE_INIT};

static void nccl_load(void)
{
    const char *lib = har_cfg.nccl.s;
    if (!lib[0] || strcmp(lib, "0") == 0) snprintf(nccl.why, sizeof nccl.why, "HAR_NCCL=0");
    else nccl.loaded = har_nccl_load(&nccl.api, lib, nccl.why, sizeof nccl.why) == 0;
}

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 1;
    har_log(HAR_LOG_WARN, "CUDA IPC segment: %s: %s", what, cudaGetErrorString(e));
    cudaGetLastError();  /* clear a non-sticky error: har leaves no error behind */
    return 0;
}

void har_devseg_destroy(har_devseg_t *d)
{
    if (!d) return;
    /* Every call has completed on har's stream, so nothing is in flight:
     * abort is then a local teardown, where ncclCommDestroy may wait for the
     * peers (gone after a failure, or freeing communicators in another
     * order at MPI_Finalize). */
    if (d->nccl) nccl.api.comm_abort(d->nccl);
    for (int r = 0; r < d->nranks; r++)
        if (d->peer[r] && r != d->me) cudaIpcCloseMemHandle(d->peer[r]);
    if (d->base) cudaFree(d->base);
    if (d->stream) cudaStreamDestroy(d->stream);
    if (d->abort_host) cudaFreeHost((void *)d->abort_host);
    if (d->stage) cudaFreeHost(d->stage);
    if (d->tmp) cudaFreeHost(d->tmp);
    cudaGetLastError();
    free(d);
}

/* Ordinal, in this process's numbering, of the GPU with this UUID; -1 if
 * this process cannot see it (CUDA_VISIBLE_DEVICES per rank, say). */
static int device_of(const cudaUUID_t *uuid)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return -1;
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, d) == cudaSuccess && !memcmp(&prop.uuid, uuid, sizeof *uuid)) return d;
    }
    return -1;
}

/* Maps the peers' segments and proves, with a kernel, that this GPU loads
 * what each peer wrote. */
static int map_peers(har_devseg_t *d, const cudaIpcMemHandle_t *handles, const cudaUUID_t *uuids)
{
    char *probe_out = NULL;
    int ok = cuda_ok(cudaMalloc((void **)&probe_out, 16), "cudaMalloc (probe)");
    for (int r = 0; ok && r < d->nranks; r++) {
        if (r == d->me) continue;
        int dev = device_of(&uuids[r]), can = dev == d->device;
        if (dev < 0) {
            HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC: local rank %d's GPU is not visible here", r);
            ok = 0;
            break;
        }
        if (dev == d->device) d->shared_gpu = 1;
        if (dev == d->device && !har_cfg.ipc_shared_gpu.i) {
            /* Kernels of two processes on one GPU time-slice: each barrier
             * would wait for a context switch. The host segment is faster. */
            HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC: local rank %d shares this GPU (HAR_IPC_SHARED_GPU=1 allows it)", r);
            ok = 0;
            break;
        }
        if (!can) cudaDeviceCanAccessPeer(&can, d->device, dev);
        if (!can) {
            HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC: no peer access from GPU %d to GPU %d", d->device, dev);
            ok = 0;
            break;
        }
        cudaError_t e = cudaIpcOpenMemHandle((void **)&d->peer[r], handles[r], cudaIpcMemLazyEnablePeerAccess);
        if (e == cudaErrorAlreadyMapped)
            har_log(HAR_LOG_WARN, "CUDA IPC: local rank %d's segment is already mapped in this process "
                    "(another library opened it); using the host segment", r);
        if (!cuda_ok(e, "cudaIpcOpenMemHandle")) {
            d->peer[r] = NULL;
            ok = 0;
            break;
        }
        uint32_t got[4] = {0}, want[4] = {0x68617221u, (uint32_t)r, 0, 0};
        ok = cuda_ok((cudaError_t)har_dev_probe(d->peer[r] + HAR_DEV_PROBE_OFFSET, probe_out, d->stream), "probe kernel") &&
             cuda_ok(cudaMemcpy(got, probe_out, 16, cudaMemcpyDeviceToHost), "probe copy") &&
             !memcmp(got, want, 16);
        if (!ok) HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC: reading local rank %d's memory gave the wrong data", r);
    }
    if (probe_out) cudaFree(probe_out);
    if (har_cfg.test_ipc_fail.i && d->me == 0) ok = 0;  /* test switch: prove the fallback */
    return ok;
}

har_devseg_t *har_devseg_create(MPI_Comm node, size_t slot_bytes)
{
    int me, nranks, want = har_cfg.ipc.i && har_cuda_context_current();
    PMPI_Comm_rank(node, &me);
    PMPI_Comm_size(node, &nranks);
    if (nranks > HAR_DEV_MAX_RANKS) want = 0;
    PMPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, node);
    if (!want) return NULL;  /* same answer on every rank: no device segment here */

    har_devseg_t *d = calloc(1, sizeof *d);
    int ok = d != NULL;
    cudaIpcMemHandle_t handle, *handles = calloc((size_t)nranks, sizeof *handles);
    struct cudaDeviceProp prop;
    cudaUUID_t *uuids = calloc((size_t)nranks, sizeof *uuids);
    ok = ok && handles && uuids;
    if (ok) {
        d->nranks = nranks;
        d->me = me;
        d->slot_bytes = (slot_bytes + 4095) / 4096 * 4096;
        size_t bytes = HAR_DEV_FLAG_BYTES + 2 * d->slot_bytes;
        uint32_t pattern[4] = {0x68617221u, (uint32_t)me, 0, 0};
        ok = cuda_ok(cudaGetDevice(&d->device), "cudaGetDevice") &&
             cuda_ok(cudaGetDeviceProperties(&prop, d->device), "cudaGetDeviceProperties") &&
             cuda_ok(cudaStreamCreateWithFlags(&d->stream, cudaStreamDefault), "cudaStreamCreate") &&
             cuda_ok(cudaMalloc((void **)&d->base, bytes), "cudaMalloc (segment)") &&
             cuda_ok(cudaMemset(d->base, 0, HAR_DEV_FLAG_BYTES), "cudaMemset") &&
             cuda_ok(cudaMemcpy(d->base + HAR_DEV_PROBE_OFFSET, pattern, 16, cudaMemcpyHostToDevice), "cudaMemcpy") &&
             cuda_ok(cudaIpcGetMemHandle(&handle, d->base), "cudaIpcGetMemHandle") &&
             cuda_ok(cudaHostAlloc((void **)&d->abort_host, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc") &&
             cuda_ok(cudaHostGetDevicePointer((void **)&d->abort_dev, (void *)d->abort_host, 0), "mapped flag");
        if (ok) {
            *d->abort_host = 0;
            d->peer[me] = d->base;
            uuids[me] = prop.uuid;
        }
    }
    /* Everyone exchanges, even a rank that failed, so nobody waits alone. */
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, node);
    if (ok) {
        PMPI_Allgather(&handle, (int)sizeof handle, MPI_BYTE, handles, (int)sizeof handle, MPI_BYTE, node);
        PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, uuids, (int)sizeof *uuids, MPI_BYTE, node);
        /* min of ok (as max of -ok) and max of shared_gpu in one call */
        int agreed[2] = {-map_peers(d, handles, uuids), d->shared_gpu};
        PMPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MAX, node);
        ok = -agreed[0];
        d->shared_gpu = agreed[1];
    }
    free(handles);
    free(uuids);
    if (!ok) {
        if (me == 0) HAR_LOG(HAR_LOG_INFO, "CUDA IPC between this node's GPUs is not usable: device "
                             "buffers go through the host segment");
        har_devseg_destroy(d);
        return NULL;
    }
    HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC segment: %d local ranks, GPU %d, %zu bytes per rank", nranks, d->device,
            HAR_DEV_FLAG_BYTES + 2 * d->slot_bytes);
    return d;
}

int har_devseg_current(const har_devseg_t *d)
{
    int dev = -1;
    return cudaGetDevice(&dev) == cudaSuccess && dev == d->device;
}

/* Stops what runs on the stream after a peer failed: har's kernels see the
 * abort flag; NCCL's stop when its communicator is aborted. */
static void stop_stream(har_devseg_t *d)
{
    *d->abort_host = 1;
    if (d->nccl) {
        nccl.api.comm_abort(d->nccl);
        d->nccl = NULL;
        d->nccl_state = NCCL_UNUSABLE;
    }
    cudaStreamSynchronize(d->stream);
}

/* Waits for the stream while watching the peers: a dead or late peer makes
 * the kernels stop and the call fail. */
static int wait_stream(har_devseg_t *d, const har_dev_call_t *call)
{
    double started = har_seg_now();
    for (unsigned long i = 0;; i++) {
        cudaError_t e = cudaStreamQuery(d->stream);
        if (e == cudaSuccess) return MPI_SUCCESS;
        if (e != cudaErrorNotReady) {
            har_log(HAR_LOG_ERROR, "CUDA IPC all-reduce failed: %s", cudaGetErrorString(e));
            return har_error_code(HAR_ERR_CUDA);
        }
        if (i < 4096) continue;  /* the common case: done within microseconds */
        sched_yield();
        if (i % 256) continue;
        int rc = call->check_peers(call->ctx, started);
        har_ncclResult_t async = HAR_NCCL_SUCCESS;
        if (rc == MPI_SUCCESS && d->nccl && nccl.api.comm_get_async_error(d->nccl, &async) == HAR_NCCL_SUCCESS &&
            async != HAR_NCCL_SUCCESS && async != HAR_NCCL_IN_PROGRESS) {
            har_log(HAR_LOG_ERROR, "NCCL all-reduce failed: %s", nccl.api.get_error_string(async));
            rc = har_error_code(HAR_ERR_CUDA);
        }
        if (rc != MPI_SUCCESS) {
            stop_stream(d);
            return rc;
        }
    }
}

int har_devseg_allreduce(har_devseg_t *d, const har_dev_call_t *call)
{
    har_dev_args_t a;
    memset(&a, 0, sizeof a);
    a.nranks = d->nranks;
    a.me = d->me;
    a.elem = call->elem;
    a.dtype = call->dtype;
    a.op = call->op;
    a.one_shot = call->one_shot;
    a.abort = d->abort_dev;
    a.aligned = ((uintptr_t)call->in | (uintptr_t)call->out) % 16 == 0;
    for (int r = 0; r < d->nranks; r++) a.flags[r] = d->peer[r];
    if (call->inter && !d->stage &&
        !(cuda_ok(cudaHostAlloc((void **)&d->stage, d->slot_bytes, 0), "cudaHostAlloc (stage)") &&
          cuda_ok(cudaHostAlloc((void **)&d->tmp, d->slot_bytes, 0), "cudaHostAlloc (ring)")))
        return har_error_code(HAR_ERR_CUDA);

    size_t chunk = call->chunk_elems;
    for (size_t done = 0; done < call->count; done += a.n) {
        a.n = call->count - done < chunk ? call->count - done : chunk;
        a.in = call->in + done * call->elem;
        a.out = call->out + done * call->elem;
        unsigned parity = (*call->seq)++ & 1;
        for (int r = 0; r < d->nranks; r++) a.slot[r] = d->peer[r] + HAR_DEV_FLAG_BYTES + parity * d->slot_bytes;
        a.epoch = d->epoch;
        d->epoch += 2;
        int blocks = har_dev_blocks(a.n * a.elem);
        a.phase = call->inter ? HAR_DEV_REDUCE : HAR_DEV_WHOLE;
        if (!cuda_ok((cudaError_t)har_dev_launch(&a, blocks, d->stream), "kernel launch")) return har_error_code(HAR_ERR_CUDA);
        if (!call->inter) continue;  /* one node: chunks queue up back to back */

        /* Between nodes: this rank's shard through pinned host memory. */
        size_t off, len;
        har_shard(a.n, a.elem, d->nranks, d->me, &off, &len);
        char *shard = a.slot[d->me] + off * a.elem;
        int rc = MPI_SUCCESS;
        if (len > 0 && !cuda_ok(cudaMemcpyAsync(d->stage, shard, len * a.elem, cudaMemcpyDeviceToHost, d->stream),
                                "copy to host"))
            return har_error_code(HAR_ERR_CUDA);
        if ((rc = wait_stream(d, call)) != MPI_SUCCESS) return rc;
        if (len > 0 && (rc = call->inter(call->ctx, d->stage, len, d->tmp)) != MPI_SUCCESS) return rc;
        if (len > 0 && !cuda_ok(cudaMemcpyAsync(shard, d->stage, len * a.elem, cudaMemcpyHostToDevice, d->stream),
                                "copy to device"))
            return har_error_code(HAR_ERR_CUDA);
        a.phase = HAR_DEV_GATHER;
        if (!cuda_ok((cudaError_t)har_dev_launch(&a, blocks, d->stream), "kernel launch")) return har_error_code(HAR_ERR_CUDA);
    }
    return wait_stream(d, call);
}

/* ---- NCCL on the node communicator --------------------------------------- */

static int nccl_dtype(int dtype)
{
    switch (dtype) {
    case HAR_DT_F32: return HAR_NCCL_FLOAT32;
    case HAR_DT_F64: return HAR_NCCL_FLOAT64;
    case HAR_DT_I32: return HAR_NCCL_INT32;
    case HAR_DT_U32: return HAR_NCCL_UINT32;
    case HAR_DT_I64: return HAR_NCCL_INT64;
    case HAR_DT_U64: return HAR_NCCL_UINT64;
    default: return -1;
    }
}

static int nccl_op(int op)
{
    switch (op) {
    case HAR_OP_SUM: return HAR_NCCL_SUM;
    case HAR_OP_PROD: return HAR_NCCL_PROD;
    case HAR_OP_MIN: return HAR_NCCL_MIN;
    case HAR_OP_MAX: return HAR_NCCL_MAX;
    default: return -1;  /* bitwise and logical ops: NCCL has none */
    }
}

int har_devseg_nccl_candidate(const har_devseg_t *d, int dtype, int op)
{
    /* NCCL refuses two ranks on one GPU. */
    return d->nccl_state != NCCL_UNUSABLE && !d->shared_gpu && nccl_dtype(dtype) >= 0 && nccl_op(op) >= 0;
}

int har_devseg_nccl_ready(har_devseg_t *d, MPI_Comm node)
{
    if (d->nccl_state != NCCL_UNTRIED) return d->nccl_state == NCCL_READY;
    /* Every rank is here for the same call: load, agree, then make the
     * communicator (ncclCommInitRank waits for all ranks, so nobody may
     * start it unless all will). */
    pthread_once(&nccl.once, nccl_load);
    int ok = nccl.loaded;
    if (!ok) HAR_LOG(HAR_LOG_DEBUG, "NCCL not loaded: %s", nccl.why);
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, node);
    struct { har_ncclUniqueId id; int ok; } id = {{{0}}, ok};
    if (ok && d->me == 0) id.ok = nccl.api.get_unique_id(&id.id) == HAR_NCCL_SUCCESS;
    if (ok) PMPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, node);
    ok = ok && id.ok;
    if (ok) {
        har_ncclResult_t r = nccl.api.comm_init_rank(&d->nccl, d->nranks, id.id, d->me);
        if (r != HAR_NCCL_SUCCESS) {
            har_log(HAR_LOG_WARN, "ncclCommInitRank: %s; device buffers keep to har's kernels",
                    nccl.api.get_error_string(r));
            d->nccl = NULL;
        }
        int made = d->nccl != NULL;
        PMPI_Allreduce(MPI_IN_PLACE, &made, 1, MPI_INT, MPI_MIN, node);
        if (!made && d->nccl) {
            nccl.api.comm_abort(d->nccl);
            d->nccl = NULL;
        }
        ok = made;
    }
    d->nccl_state = ok ? NCCL_READY : NCCL_UNUSABLE;
    if (ok && d->me == 0)
        HAR_LOG(HAR_LOG_DEBUG, "NCCL %d.%d.%d serves this node's %d ranks (%s)", nccl.api.version / 10000,
                nccl.api.version / 100 % 100, nccl.api.version % 100, d->nranks, har_cfg.nccl.s);
    return ok;
}

int har_devseg_nccl_allreduce(har_devseg_t *d, const har_dev_call_t *call)
{
    har_ncclResult_t r = nccl.api.all_reduce(call->in, call->out, call->count, nccl_dtype(call->dtype),
                                             nccl_op(call->op), d->nccl, d->stream);
    if (r != HAR_NCCL_SUCCESS && r != HAR_NCCL_IN_PROGRESS) {
        har_log(HAR_LOG_ERROR, "ncclAllReduce: %s", nccl.api.get_error_string(r));
        stop_stream(d);
        return har_error_code(HAR_ERR_CUDA);
    }
    return wait_stream(d, call);
}
