/* The CUDA IPC engine: per rank one cudaMalloc'd region (flag area, then
 * two data slots) on the GPU that holds its buffers, mapped into every local
 * peer with CUDA IPC, and the driver that runs a call's chunks through the
 * kernels of ipc_kernels.cu.
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
 * call, and a peer that never comes is caught by the abort flag.
 *
 * Small calls on one node (up to HAR_DEVICE_PUSH_MAX) take the push
 * kernels instead: no rank waits for its peers on the host before it
 * launches (comm/call.c lets it go ahead), each pushes its input into every
 * peer's push area with the call's number beside it, and the host learns
 * the end from flags the kernel writes to mapped host memory, not from the
 * stream. Their area sits between the flag area and the slots.
 *
 * Across nodes a chunk is reduced to this rank's shard by one kernel,
 * copied to pinned host memory, carried between nodes by the transport,
 * copied back and gathered by a second kernel. The chunks are pipelined:
 * while the host runs chunk c's step between nodes, the GPU reduces chunk
 * c+1 and copies it out, and copies chunk c-1 back and gathers it. Three
 * rotating slots keep a slot from being written while a peer may still
 * read it (a rank's chunk c+3 starts only after its gather of c+1, whose
 * barrier every peer passes only once done reading chunk c), and two host
 * buffers alternate (the stream orders a buffer's copy back before the next
 * copy into it). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "core/config.h"
#include "core/launcher.h"
#include "core/log.h"
#include "host/numa.h"
#include "node/machine.h"
#include "engines/ipc_kernels.h"
#include "cuda/stream.h"
#include "engines/engine.h"
#include "inter/inter.h"

/* What the kernels and the host tell each other in host memory: per
 * block, the record of a peer whose call differed (any kernel on one
 * node), the push kernels' last call done and the barrier kernels' last
 * blocking call ended on one node. */
typedef struct {
    uint64_t differs[4 * HAR_DEV_MAX_BLOCKS];
    uint64_t done[HAR_DEV_PUSH_BLOCKS];
    uint64_t chunks_done[HAR_DEV_MAX_BLOCKS];  /* the barrier kernels' blocks, on one node: the last epoch + 1 each ended */
    /* The same for calls captured into CUDA graphs, numbered apart (their
     * done flags are stored apart only: no host wait reads them). */
    uint64_t graph_differs[4 * HAR_DEV_PUSH_BLOCKS];
    uint64_t graph_done[HAR_DEV_PUSH_BLOCKS];
} push_host_t;

#define ENQ_RING 64

typedef struct ipc {
    int nranks, me, gpu;                 /* gpu: ordinal here of the GPU the segment is on */
    int max_blocks;                      /* the grid the node agreed */
    int nslots;                          /* 2 on one node; 3 across nodes, where chunks are pipelined */
    int numa;                            /* the GPU's NUMA node (-1: unknown): where its host buffers go */
    size_t slot_bytes;
    char *base;                          /* own allocation */
    char *peer[HAR_DEV_MAX_RANKS];       /* every rank's allocation as mapped here */
    /* har's streams. Blocking calls go on a blocking one: the driver
     * orders it after the application's legacy default stream (a
     * cudaMemcpy from pageable memory returns before its bytes land) at no
     * cost to the host, and the host waits for it before the call returns,
     * so work the application queues there later waits at most for the
     * one such call in flight (comm/call.c keeps it one per process). The
     * calls MPI_Iallreduce starts go on a non-blocking one (stream.h says
     * why), ordered after the legacy stream by an event their post
     * records there (legacy_seen, by the call's parity: its launch may
     * come later, in the launch thread, while the next call is posted); a
     * blocking call queued while they are open waits for them
     * (follow_tail). `queue`: the one the call being queued goes on. */
    cudaStream_t stream, started, queue;
    cudaEvent_t legacy_seen[2];
    /* Every local rank runs the engine's kernels in the order of its calls
     * (a push area, a barrier's epochs serve calls in that order), on
     * whatever stream each went: `tail` is the stream of the last call
     * whose end the host has not seen (NULL: it saw every call end), and
     * work queued elsewhere waits for it (follow_tail). Where that call is
     * a push kernel on device buffers (`tail_push`: its number), it waits
     * on the GPU for the kernel's blocks to store it in done_dev: a push
     * kernel by its `after`, other work by a wait kernel; no host step per
     * call. Else by `tail_end`: on har's own stream (`started`) recorded
     * when a later call needs it; on the application's (a call through
     * host buffers) as the call is queued, since the application may
     * destroy its stream, or begin capturing on it, before the next call. */
    cudaStream_t tail;
    uint64_t tail_push;
    int tail_push_blocks;                /* the blocks its kernel launched */
    cudaEvent_t tail_end;
    uint64_t *done_dev;                  /* device, HAR_DEV_PUSH_BLOCKS words: har_push_args_t.done_dev */
    volatile int *abort_host;            /* pinned, mapped: kernels poll it */
    int *abort_dev;
    char *stage[2], *tmp;                /* pinned host, across nodes: shards in turn, the transport's scratch */
    cudaEvent_t out[2];                  /* a shard reduced, and copied to stage[i] where the transport needs host memory */
    char *dtmp;                          /* device: the transport's scratch where it takes device memory */
    cudaStream_t fold;                   /* where the transport's reductions of device blocks run */
    int dtype, op;                       /* the call in progress, for them */
    uint64_t epoch;                      /* device barriers used; the same on every rank */
    uint64_t launched_epoch;             /* the last barrier kernel's epoch, and its grid */
    int launched_blocks;
    unsigned seq;                        /* chunks so far: which slot is next; the same on every rank */
    size_t slots_at;                     /* where the data slots start in a segment */
    /* The push kernels (ipc_kernels.cu): their area in every segment, per call
     * parity the (writer, block) lines then a data region per writer. */
    size_t push_max, push_parity;        /* the largest push call in bytes (0: no push area); bytes per parity */
    /* Calls captured into CUDA graphs: a push area of their own (at
     * graph_at, after the other), numbered on the GPU by graph_counter
     * (har_push_args_t.counter), since the host never sees a replay. */
    size_t graph_at;
    uint64_t *graph_counter;
    _Atomic int captured;                /* a call was captured: the watch looks at the peers for good */
    double graph_checked;                /* the watch's last look at them */
    uint64_t graph_differs_seen;         /* the last difference a graph's kernels recorded that it reported */
    har_arrival_t graph_calls[ENQ_RING]; /* the captured calls, by call number */
    int push_blocks;                     /* their largest grid (a call launches har_dev_push_grid): the same on every rank */
    uint64_t push_seq;                   /* push calls so far; the same on every rank */
    push_host_t *push_host, *push_host_dev;  /* pinned and mapped: what the kernels tell the host */
    char *ahead_stage;                   /* device: a joining rank's input and output where its buffers are not
                                          * on this GPU (two regions of ahead_stage_bytes), on first need */
    size_t ahead_stage_bytes;
    /* Smaller staging areas a larger call replaced, freed with the engine:
     * cudaFree waits for the whole device, so for kernels of this rank gone
     * ahead on other communicators, whose peers may wait for this call.
     * A joined call is at most HAR_DEVICE_AHEAD_MAX or HAR_DEVICE_START_MAX
     * bytes, both capped at 2^50 (core/config.h): doubling from 1 MiB
     * retires at most 30 areas. */
    char *ahead_retired[30];
    int nretired;
    /* Non-blocking calls started and not yet ended (at most two: comm/
     * call.c). */
    int open_ops;
    /* Calls queued by har_allreduce_enqueue, which the watch thread
     * follows: the last (0: none) as ENQ_LAST packs it, the node, and the
     * last ENQ_RING calls as the arrival describes them (for a difference
     * their kernels record). */
    _Atomic uint64_t enq_last;
    har_node_t *enq_node;
    _Atomic uint64_t enq_call;           /* the node's number of the last call queued or captured: the watch
                                          * records a failure it finds as that call's (node->call is the
                                          * application thread's to write) */
    struct { uint64_t seq; har_arrival_t call; } enq_ring[ENQ_RING];
    char *enq_stage;                     /* device: input and output of calls whose buffers are elsewhere */
    _Atomic int watched;                 /* in the watch thread's list */
    struct ipc *watch_next;
    double enq_since;                    /* when the watch last saw a call end with calls outstanding (0: none) */
    uint64_t enq_block0;                 /* the last call block 0 had done then (every call has a block 0) */
} ipc_t;

/* Pinned host memory on the GPU's NUMA node: the copies between them cross
 * no socket link. */
static har_status_t pinned_alloc(char **p, size_t bytes, int numa, const char *what)
{
    *p = har_host_numa_alloc(bytes, numa);
    if (!*p) {
        har_note("no host memory for %s (%zu bytes)", what, bytes);
        return HAR_ERR_CUDA;
    }
    har_status_t st = har_cuda_status(cudaHostRegister(*p, bytes, cudaHostRegisterDefault), what);
    if (st != HAR_OK) {
        har_host_numa_free(*p, bytes);
        *p = NULL;
    }
    return st;
}

static void unpinned_free(char *p, size_t bytes)
{
    if (!p) return;
    cudaHostUnregister(p);
    har_host_numa_free(p, bytes);
}

static void unwatch(ipc_t *d);

static void ipc_destroy(void *engine)
{
    ipc_t *d = engine;
    if (!d) return;
    har_launcher_drain();  /* nothing of its left to launch */
    unwatch(d);
    har_cuda_scope_t scope;
    har_cuda_enter(d->gpu, &scope);
    for (int r = 0; r < d->nranks; r++)
        if (d->peer[r] && r != d->me) cudaIpcCloseMemHandle(d->peer[r]);
    if (d->base) cudaFree(d->base);
    if (d->stream) cudaStreamDestroy(d->stream);
    if (d->started) cudaStreamDestroy(d->started);
    for (int i = 0; i < 2; i++)
        if (d->legacy_seen[i]) cudaEventDestroy(d->legacy_seen[i]);
    if (d->tail_end) cudaEventDestroy(d->tail_end);
    if (d->abort_host) cudaFreeHost((void *)d->abort_host);
    if (d->push_host) cudaFreeHost(d->push_host);
    if (d->ahead_stage) cudaFree(d->ahead_stage);
    for (int i = 0; i < d->nretired; i++) cudaFree(d->ahead_retired[i]);
    if (d->enq_stage) cudaFree(d->enq_stage);
    if (d->graph_counter) cudaFree(d->graph_counter);
    if (d->done_dev) cudaFree(d->done_dev);
    for (int i = 0; i < 2; i++) {
        unpinned_free(d->stage[i], d->slot_bytes);
        if (d->out[i]) cudaEventDestroy(d->out[i]);
    }
    unpinned_free(d->tmp, d->slot_bytes);
    if (d->dtmp) cudaFree(d->dtmp);
    if (d->fold) cudaStreamDestroy(d->fold);
    cudaGetLastError();
    har_cuda_leave(&scope);
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
    if (har_cuda_status(cudaMalloc((void **)&probe_out, 16), "cudaMalloc (probe)") != HAR_OK) {
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
        ok = har_engine_dev_probe(d->peer[r] + HAR_DEV_PROBE_OFFSET, probe_out, d->stream) == cudaSuccess &&
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
static int safe_grid(const har_node_t *node, const har_cuda_gpu_t *gpu, char *why, size_t why_len)
{
    int per_sm = har_engine_dev_blocks_per_sm(), gpu_sms = 0, ctx_sms = har_cuda_context_sms();
    if (har_cuda_status(cudaDeviceGetAttribute(&gpu_sms, cudaDevAttrMultiProcessorCount, gpu->ordinal),
                        "cudaDeviceGetAttribute") != HAR_OK || per_sm <= 0) {
        snprintf(why, why_len, "the runtime could not say how many blocks fit on the GPU");
        return 0;
    }
    if (ctx_sms <= 0 || ctx_sms > gpu_sms) ctx_sms = gpu_sms;
    /* This node's ranks on the GPU, and every other rank of the job on this
     * machine (other communicators, other nodes: pretend ones, hosts made of
     * namespaces), whose GPUs this node cannot know. Without that count
     * (MPI initialised behind har's back), this node's ranks on the GPU. */
    int job = har_node_machine_ranks(), clients = gpu->same_gpu + (job > node->local_size ? job - node->local_size : 0);
    int grid = har_plan_grid(per_sm, ctx_sms, gpu_sms, clients, HAR_DEV_MAX_BLOCKS);
    if (grid < 1)
        snprintf(why, why_len, "%d ranks may share a GPU where %d blocks fit at once", clients, per_sm * gpu_sms);
    HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC engine: %d block(s) per multiprocessor, %d of %d multiprocessors for this "
            "context, %d rank(s) may use this GPU: at most %d blocks per kernel", per_sm, ctx_sms, gpu_sms, clients,
            grid);
    return grid;
}

static har_engine_state_t ipc_setup(har_node_t *node, const har_cuda_gpu_t *gpu, void **engine)
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
    har_cuda_scope_t scope = {0};
    offer_t mine, *offers = calloc((size_t)node->local_size, sizeof *offers);
    memset(&mine, 0, sizeof mine);
    int ok = d && offers;
    if (!ok) snprintf(why, sizeof why, "out of memory");
    if (ok) {
        d->nranks = node->local_size;
        d->me = node->local_rank;
        d->gpu = gpu->ordinal;
        d->slot_bytes = (size_t)node->set->device_slot_bytes;
        d->nslots = node->nnodes > 1 ? 3 : 2;
        d->numa = har_host_pci_numa_node("/sys", gpu->bus);
        /* The push area only on one node: across nodes the pipeline serves. */
        d->push_max = node->nnodes == 1 ? (size_t)node->set->device_push_max : 0;
        d->push_parity = d->push_max
                             ? (HAR_DEV_PUSH_LINES + d->nranks * HAR_DEV_PUSH_REGION(d->push_max) + 4095) / 4096 * 4096
                             : 0;
        d->graph_at = HAR_DEV_FLAG_BYTES + 2 * d->push_parity;
        d->slots_at = d->graph_at + 2 * d->push_parity;
        size_t bytes = d->slots_at + (size_t)d->nslots * d->slot_bytes;
        uint32_t pattern[4] = {0x68617221u, (uint32_t)d->me, 0, 0};
        ok = har_cuda_enter(d->gpu, &scope) == HAR_OK &&
             har_cuda_status(cudaStreamCreateWithFlags(&d->stream, cudaStreamDefault), "cudaStreamCreate") == HAR_OK &&
             har_cuda_stream_create((void **)&d->started) == HAR_OK &&
             har_cuda_status(cudaMalloc((void **)&d->base, bytes), "cudaMalloc (CUDA IPC segment)") == HAR_OK &&
             har_cuda_status(cudaMemset(d->base, 0, d->slots_at), "cudaMemset") == HAR_OK &&
             har_cuda_status(cudaMemcpy(d->base + HAR_DEV_PROBE_OFFSET, pattern, 16, cudaMemcpyHostToDevice),
                             "cudaMemcpy") == HAR_OK &&
             /* both landed before a peer can see the segment: they went on this process's legacy
              * stream, which no peer's stream follows */
             har_cuda_status(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize") == HAR_OK &&
             har_cuda_status(cudaIpcGetMemHandle(&mine.handle, d->base), "cudaIpcGetMemHandle") == HAR_OK &&
             har_cuda_status(cudaHostAlloc((void **)&d->abort_host, sizeof(int), cudaHostAllocMapped),
                             "cudaHostAlloc") == HAR_OK &&
             har_cuda_status(cudaHostGetDevicePointer((void **)&d->abort_dev, (void *)d->abort_host, 0),
                             "mapped abort flag") == HAR_OK &&
             har_cuda_status(cudaHostAlloc((void **)&d->push_host, sizeof *d->push_host, cudaHostAllocMapped),
                             "cudaHostAlloc") == HAR_OK &&
             har_cuda_status(cudaHostGetDevicePointer((void **)&d->push_host_dev, d->push_host, 0),
                             "mapped push flags") == HAR_OK &&
             (!d->push_max ||
              (har_cuda_status(cudaMalloc((void **)&d->graph_counter, 2 * sizeof(uint64_t)),
                               "cudaMalloc (graph counter)") == HAR_OK &&
               har_cuda_status(cudaMemset(d->graph_counter, 0, 2 * sizeof(uint64_t)), "cudaMemset") == HAR_OK &&
               har_cuda_status(cudaMalloc((void **)&d->done_dev, HAR_DEV_PUSH_BLOCKS * sizeof(uint64_t)),
                               "cudaMalloc (push calls done)") == HAR_OK &&
               har_cuda_status(cudaMemset(d->done_dev, 0, HAR_DEV_PUSH_BLOCKS * sizeof(uint64_t)), "cudaMemset") ==
                   HAR_OK));
        if (!ok) snprintf(why, sizeof why, "a CUDA call failed (above), %zu bytes of GPU memory asked", bytes);
        else ok = (d->max_blocks = safe_grid(node, gpu, why, sizeof why)) > 0;
        if (ok) {
            *d->abort_host = 0;
            memset(d->push_host, 0, sizeof *d->push_host);
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
        /* Half the safe grid at most: a push kernel that follows a call
         * on another stream spins (`after`) beside that call's kernel,
         * whose blocks must still find room. */
        int half = d->max_blocks / 2 > 0 ? d->max_blocks / 2 : 1;
        d->push_blocks = half < HAR_DEV_PUSH_BLOCKS ? half : HAR_DEV_PUSH_BLOCKS;
        ok = ok && map_peers(d, offers, why, sizeof why);
        ok = !har_node_failed(node) && har_node_agree(node, ok, 0, what, why, instead);
    }
    har_cuda_leave(&scope);
    free(offers);
    if (!ok) {
        ipc_destroy(d);
        return HAR_ENGINE_FAILED;
    }
    HAR_LOG(HAR_LOG_DEBUG, "CUDA IPC engine: %d local ranks, GPU %d (%s, NUMA node %d), %zu bytes of GPU memory per "
            "rank, kernels of at most %d blocks", d->nranks, d->gpu, gpu->bus, d->numa,
            d->slots_at + (size_t)d->nslots * d->slot_bytes, d->max_blocks);
    *engine = d;
    return HAR_ENGINE_READY;
}

static void stop_kernels(void *ctx) { *((ipc_t *)ctx)->abort_host = 1; }

static har_status_t tail_event(ipc_t *d)
{
    return d->tail_end ? HAR_OK
                       : har_cuda_status(cudaEventCreateWithFlags(&d->tail_end, cudaEventDisableTiming), "event");
}

/* Has every block that push call `seq` launched (`blocks`) done it? Then
 * every call before it is done too (ipc_kernels.cu says why). */
static int push_call_done(const ipc_t *d, uint64_t seq, int blocks)
{
    for (int b = 0; b < blocks; b++)
        if (((volatile const uint64_t *)d->push_host->done)[b] < seq) return 0;
    return 1;
}

/* Orders d->queue after the last call the host has not seen end, where
 * that call went on another stream (as if all went on one). A push
 * kernel's tail: `after`, where the work to be queued is a push kernel
 * (else NULL), is set to its number for that kernel to wait for, and other
 * work waits behind a wait kernel; nothing where the host sees it ended.
 * A lazy tail's event is recorded now, so it also covers work queued there
 * since, which cannot depend on the call being queued. The per-thread
 * default stream's handle names another stream in each thread: never the
 * same. */
static har_status_t follow_tail(ipc_t *d, uint64_t *after)
{
    if (after) *after = 0;
    if (!d->tail || (d->tail == d->queue && d->queue != cudaStreamPerThread)) return HAR_OK;
    if (d->tail_push) {
        if (push_call_done(d, d->tail_push, d->tail_push_blocks)) return HAR_OK;
        if (after) {
            *after = d->tail_push;
            return HAR_OK;
        }
        return har_cuda_status(
            har_engine_dev_wait_push(d->done_dev, d->tail_push_blocks, d->tail_push, d->abort_dev, d->queue),
            "kernel launch");
    }
    har_status_t st = HAR_OK;
    if (d->tail == d->started && (st = tail_event(d)) == HAR_OK)
        st = har_cuda_status(cudaEventRecord(d->tail_end, d->tail), "cudaEventRecord");
    return st == HAR_OK ? har_cuda_follow(d->queue, d->tail_end) : st;
}

/* Chunk `done` of the call in args `a`: its place and the next slot in turn. */
static void next_chunk(ipc_t *d, const har_call_t *call, size_t chunk, size_t done, har_engine_dev_args_t *a)
{
    a->n = call->count - done < chunk ? call->count - done : chunk;
    a->in = call->in + done * a->elem;
    a->out = call->out + done * a->elem;
    size_t slot = d->seq++ % (unsigned)d->nslots;
    for (int r = 0; r < d->nranks; r++) a->slot[r] = d->peer[r] + d->slots_at + slot * d->slot_bytes;
}

/* A barrier passes once every peer's flag holds at least its epoch, so the
 * epochs must grow in the order the kernels are queued, which is the same
 * on every local rank: across nodes the next chunk's reduction is queued
 * before this one's gather, and an epoch given per chunk would let a
 * peer's later reduction open this gather early. Each barrier takes the
 * next epoch as its kernel is queued (the kernel meets at a->epoch + 1 and,
 * for the gather, a->epoch + 2). */
static har_status_t launch(ipc_t *d, har_engine_dev_args_t *a, int phase)
{
    a->phase = phase;
    a->epoch = d->launched_epoch = phase == HAR_DEV_GATHER ? d->epoch - 1 : d->epoch;
    d->epoch += phase == HAR_DEV_WHOLE ? 2 : 1;
    d->launched_blocks = har_engine_dev_blocks(a->n * a->elem, d->max_blocks);
    return har_cuda_status(har_engine_dev_launch(a, d->launched_blocks, d->queue), "kernel launch");
}

/* This rank's shard of a chunk, on the device. */
static char *shard_of(const ipc_t *d, const har_engine_dev_args_t *a, size_t *len)
{
    size_t off;
    har_plan_shard(a->n, a->elem, d->nranks, d->me, &off, len);
    return a->slot[d->me] + off * a->elem;
}

/* Reduces chunk a to this rank's shard and (`out`: for a transport that
 * takes host memory) copies it out to stage[i]; out[i] then says it is done. */
static har_status_t reduce_out(ipc_t *d, har_engine_dev_args_t *a, int i, int out)
{
    size_t len;
    char *shard = shard_of(d, a, &len);
    har_status_t st = launch(d, a, HAR_DEV_REDUCE);
    if (st == HAR_OK && len > 0 && out)
        st = har_cuda_status(cudaMemcpyAsync(d->stage[i], shard, len * a->elem, cudaMemcpyDeviceToHost, d->stream),
                             "copy to host");
    if (st == HAR_OK) st = har_cuda_status(cudaEventRecord(d->out[i], d->stream), "cudaEventRecord");
    return st;
}

/* The transport's reduction of a device block: a kernel on a stream of its
 * own (the main one may hold the next chunk's kernel, which waits for the
 * peers), finished before the block moves on. */
static har_status_t fold_block(void *ctx, char *acc, const char *in, size_t n)
{
    ipc_t *d = ctx;
    har_status_t st = har_cuda_status(har_engine_dev_fold(acc, in, n, d->dtype, d->op, d->fold), "fold kernel");
    return st == HAR_OK ? har_cuda_status(cudaStreamSynchronize(d->fold), "fold kernel") : st;
}

/* Across nodes: the pipeline of the comment at the top. Where the
 * transport takes device memory (an MPI that moves it), the shards go to
 * it as they are, with no copies, reduced by a kernel. */
static har_status_t run_across(ipc_t *d, har_node_t *node, const har_call_t *call, har_engine_dev_args_t *a,
                               size_t chunk, int inter, const har_cuda_watch_t *watch) {
    har_engine_dev_args_t args[2] = {*a, *a};  /* chunk c's in args[c % 2] */
    size_t done = 0, c = 0;
    int direct = har_inter_takes(inter, HAR_MEM_DEVICE);
    d->dtype = a->dtype;
    d->op = a->op;
    next_chunk(d, call, chunk, done, &args[0]);
    har_status_t st = reduce_out(d, &args[0], 0, !direct);
    for (; st == HAR_OK && done < call->count; done += args[c % 2].n, c++) {
        har_engine_dev_args_t *now = &args[c % 2], *then = &args[(c + 1) % 2];
        size_t len;
        char *shard = shard_of(d, now, &len);
        int more = done + now->n < call->count, overlap = HAR_CFG(device_pipeline).i;
        st = har_cuda_wait_event(d->stream, d->out[c % 2], node, watch, "device shard");
        if (st == HAR_OK && more && overlap) {
            next_chunk(d, call, chunk, done + now->n, then);
            st = reduce_out(d, then, (int)((c + 1) % 2), !direct);
        }
        har_inter_block_t across = {.path = inter, .data = d->stage[c % 2], .n = len, .kind = HAR_MEM_HOST,
                                    .call = call, .first = c == 0, .tmp = d->tmp, .tmp_bytes = d->slot_bytes};
        if (direct)
            across = (har_inter_block_t){.path = inter, .data = shard, .n = len, .kind = HAR_MEM_DEVICE, .call = call,
                                         .first = c == 0, .tmp = d->dtmp, .tmp_bytes = d->slot_bytes,
                                         .reduce = fold_block, .reduce_ctx = d};
        if (st == HAR_OK && len > 0) st = har_inter_allreduce(node, &across);
        if (st == HAR_OK && len > 0 && !direct)
            st = har_cuda_status(cudaMemcpyAsync(shard, d->stage[c % 2], len * now->elem, cudaMemcpyHostToDevice,
                                                 d->stream), "copy to device");
        if (st == HAR_OK) st = launch(d, now, HAR_DEV_GATHER);
        if (st == HAR_OK && more && !overlap) {  /* HAR_DEVICE_PIPELINE=0: the next chunk after this one */
            if ((st = har_cuda_wait(d->stream, node, watch, "device")) != HAR_OK) break;
            next_chunk(d, call, chunk, done + now->n, then);
            st = reduce_out(d, then, (int)((c + 1) % 2), !direct);
        }
    }
    return st;
}

/* Pinned host buffers (or device scratch, for a transport `inter` that
 * takes device memory) and events for the pipeline, on first need. */
static har_status_t across_buffers(ipc_t *d, int inter)
{
    har_status_t st = HAR_OK;
    for (int i = 0; i < 2 && st == HAR_OK; i++)
        if (!d->out[i]) st = har_cuda_status(cudaEventCreateWithFlags(&d->out[i], cudaEventDisableTiming), "event");
    if (har_inter_takes(inter, HAR_MEM_DEVICE)) {
        if (st == HAR_OK && !d->dtmp) st = har_cuda_status(cudaMalloc((void **)&d->dtmp, d->slot_bytes), "cudaMalloc");
        if (st == HAR_OK && !d->fold)
            st = har_cuda_stream_create((void **)&d->fold);
        return st;
    }
    for (int i = 0; i < 2 && st == HAR_OK; i++)
        if (!d->stage[i]) st = pinned_alloc(&d->stage[i], d->slot_bytes, d->numa, "staging between nodes");
    if (st == HAR_OK && !d->tmp) st = pinned_alloc(&d->tmp, d->slot_bytes, d->numa, "the transport's scratch");
    return st;
}

/* A call as the host waits for its kernels: how to stop them, and where
 * a peer whose call differs may show if the call went ahead (no host step
 * before its kernels). */
typedef struct {
    ipc_t *d;
    har_node_t *node;
    const har_call_t *call;
    uint64_t no;        /* its number on the communicator */
    uint64_t id;        /* what its kernels' records of a differing peer carry */
    int blocks;         /* its kernels' blocks, at most: who may have recorded one */
    const char *step;
    const uint64_t *records;  /* where its kernels record a difference (NULL: push_host->differs) */
} call_watch_t;

/* The call of the peer in a kernel's record of a difference ({id, local
 * rank, its count, its signature}), as an arrival record beside `mine`. */
static har_arrival_t recorded_call(const volatile uint64_t *rec, const har_arrival_t *mine)
{
    har_arrival_t theirs = *mine;
    theirs.count = rec[2];
    theirs.type = (uint16_t)(rec[3] >> 40);
    theirs.op = (int8_t)(rec[3] >> 32);
    theirs.call = (uint32_t)rec[3];
    return theirs;
}

/* A difference the kernels of call w recorded, reported (har_node_calls_differ);
 * else HAR_OK. */
static har_status_t recorded_difference(const call_watch_t *w)
{
    for (int b = 0; b < w->blocks; b++) {
        const volatile uint64_t *rec = (w->records ? w->records : w->d->push_host->differs) + 4 * b;
        if (rec[0] != w->id) continue;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);  /* its other words, stored before its number */
        har_arrival_t mine;
        memset(&mine, 0, sizeof mine);  /* flags and device: not compared */
        har_node_arrival_of(&mine, w->call, w->no);
        har_arrival_t theirs = recorded_call(rec, &mine);
        int peer = (int)rec[1];
        return har_node_calls_differ(w->node, w->no, w->d->me, &mine, peer, &theirs, peer, w->step);
    }
    return HAR_OK;
}

/* The wait's look at a call gone ahead (har_cuda_watch_t.poll): a
 * difference its kernels recorded while some of their blocks still wait
 * (for blocks a differing call never runs), or one in a peer's posted
 * record (a call of another size went ahead into other kernels, which
 * never meet these). */
static har_status_t ahead_poll(void *ctx)
{
    const call_watch_t *w = ctx;
    har_status_t st = recorded_difference(w);
    return st == HAR_OK ? har_node_records_differ(w->node, w->no, w->step) : st;
}

static void stop_call(void *ctx) { stop_kernels(((const call_watch_t *)ctx)->d); }

/* Barrier kernels' records carry the call's first epoch with the top bit
 * set; the push kernels', their call's number: never the same. */
#define BARRIER_CALL_ID(epoch) ((epoch) | 1ull << 63)

/* Stops this rank's kernels after a failed launch or wait: peers' kernels
 * may spin on its flags, and the caller fails the segment so that theirs
 * stop too. */
static void stop_failed(ipc_t *d)
{
    stop_kernels(d);
    cudaStreamSynchronize(d->stream);
    cudaStreamSynchronize(d->started);
    cudaGetLastError();
}

/* Queues the barrier kernels of call `no`, its watch in *w. `tell`: on
 * one node, the last chunk's blocks store their end in chunks_done.
 * `legacy`: the legacy stream's mark that d->queue waits for first (a
 * started call's), or NULL. */
static har_status_t launch_chunks(ipc_t *d, har_node_t *node, const har_call_t *call, const har_plan_t *plan,
                                  uint64_t no, int tell, cudaEvent_t legacy, call_watch_t *w)
{
    *w = (call_watch_t){d, node, call, no, BARRIER_CALL_ID(d->epoch), d->max_blocks, "ahead", NULL};
    har_engine_dev_args_t a;
    memset(&a, 0, sizeof a);
    a.nranks = d->nranks;
    a.me = d->me;
    a.elem = call->red.elem_size;
    a.dtype = call->red.dev_type;
    a.op = call->red.dev_op;
    a.one_shot = plan->one_shot;
    a.abort = d->abort_dev;
    a.aligned = ((uintptr_t)call->in | (uintptr_t)call->out) % 16 == 0;
    a.count = call->count;
    a.sig = har_engine_dev_push_sig(call->red.type_code, call->red.dev_op, (uint32_t)no);
    a.call_id = w->id;
    a.differs = d->push_host_dev->differs;
    for (int r = 0; r < d->nranks; r++) a.flags[r] = d->peer[r];
    size_t chunk = har_plan_chunk_elems(plan->chunk_bytes, a.elem);
    har_status_t st = legacy ? har_cuda_follow(d->queue, legacy) : HAR_OK;
    if (st == HAR_OK && node->nnodes > 1) {
        har_cuda_watch_t watch = {NULL, stop_call, w};
        if ((st = across_buffers(d, plan->inter)) == HAR_OK)
            st = run_across(d, node, call, &a, chunk, plan->inter, &watch);
    } else {
        /* One node: chunks queue up back to back. */
        for (size_t done = 0; done < call->count && st == HAR_OK; done += a.n) {
            next_chunk(d, call, chunk, done, &a);
            a.done = tell && done + a.n == call->count ? d->push_host_dev->chunks_done : NULL;
            st = launch(d, &a, HAR_DEV_WHOLE);
        }
    }
    if (st != HAR_OK) stop_failed(d);
    return st;
}

/* A call on the barrier kernels on one node, as the host waits for it (a
 * blocking call) or tests it (a started one): its last kernel's epoch and grid. */
typedef struct {
    const ipc_t *d;
    uint64_t epoch;
    int blocks;
} chunks_wait_t;

/* The end of the call whose kernels were just queued: its last kernel's. */
static chunks_wait_t last_launched(const ipc_t *d)
{
    return (chunks_wait_t){d, d->launched_epoch, d->launched_blocks};
}

/* 1 once every block of the call's last kernel told its end. A block
 * that stopped (a difference, the abort flag) never does: the wait's
 * checks find why. */
static int chunks_done(void *ctx)
{
    const chunks_wait_t *w = ctx;
    for (int b = 0; b < w->blocks; b++)
        if (((volatile const uint64_t *)w->d->push_host->chunks_done)[b] <= w->epoch) return 0;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return 1;
}

/* A blocking call on the barrier kernels. On one node the host waits for
 * the words the last kernel's blocks store, not for the stream: a query
 * of the stream goes through the MPS server where ranks share a GPU, and
 * costs as much as a launch there (DESIGN.md note 69). */
static har_status_t run_chunks(ipc_t *d, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    call_watch_t w;
    int ahead = (plan->paths & HAR_BIT(AHEAD)) != 0, tell = node->nnodes == 1;
    har_cuda_watch_t watch = {ahead ? ahead_poll : NULL, stop_call, &w};
    har_status_t st = launch_chunks(d, node, call, plan, node->call, tell, NULL, &w);
    chunks_wait_t ended = last_launched(d);
    if (st == HAR_OK)
        st = tell ? har_cuda_wait_flags(d->stream, chunks_done, &ended, node, &watch, "device")
                  : har_cuda_wait(d->stream, node, &watch, "device");
    return st == HAR_OK && ahead ? recorded_difference(&w) : st;
}

/* A push call in flight, as the host waits for it. */
typedef struct {
    ipc_t *d;
    uint64_t seq;
    int blocks;         /* the blocks its kernel launched */
} push_wait_t;

/* 1 once every block the call launched did it (or a later one: calls end
 * in order). */
static int push_done(void *ctx)
{
    push_wait_t *w = ctx;
    if (!push_call_done(w->d, w->seq, w->blocks)) return 0;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);  /* the records of differences after the flags */
    return 1;
}

/* Launches push call `no` (ipc_kernels.cu) on the blocks its lines need,
 * its watch in *w. `after`: the push call it waits for (follow_tail).
 * `captured`: into a CUDA graph, on the graphs' push area, numbered on the
 * GPU at each replay (w->id is then 0). `legacy`: as for launch_chunks. */
static har_status_t launch_push(ipc_t *d, har_node_t *node, const har_call_t *call, uint64_t no, uint64_t after,
                                int captured, cudaEvent_t legacy, call_watch_t *w)
{
    har_push_args_t a;
    memset(&a, 0, sizeof a);
    har_status_t st = HAR_OK;
    a.in = call->in;
    a.out = call->out;
    uint64_t seq = captured ? 0 : ++d->push_seq;
    size_t at = captured ? d->graph_at : HAR_DEV_FLAG_BYTES + (size_t)(seq & 1) * d->push_parity;
    for (int r = 0; r < d->nranks; r++) {
        a.lines[r] = d->peer[r] + at;
        a.data[r] = a.lines[r] + HAR_DEV_PUSH_LINES;
    }
    a.region = HAR_DEV_PUSH_REGION(d->push_max);
    a.n = call->count;
    a.nranks = d->nranks;
    a.me = d->me;
    a.dtype = call->red.dev_type;
    a.op = call->red.dev_op;
    a.seq = seq;
    a.count = call->count;
    a.sig = har_engine_dev_push_sig(call->red.type_code, call->red.dev_op, (uint32_t)no);
    a.abort = d->abort_dev;
    a.done = captured ? d->push_host_dev->graph_done : d->push_host_dev->done;
    a.differs = captured ? d->push_host_dev->graph_differs : d->push_host_dev->differs;
    if (captured) a.counter = d->graph_counter, a.parity_bytes = d->push_parity;
    else a.done_dev = d->done_dev, a.after = after, a.after_blocks = d->tail_push_blocks;
    int grid = har_dev_push_grid(call->count, call->red.elem_size, d->push_blocks);
    if (!legacy || (st = har_cuda_follow(d->queue, legacy)) == HAR_OK) {
        /* A queued call's kernel is launched early: on the application's
         * stream it mostly follows a kernel (the call before it, the
         * application's own), whose end it then meets without waiting for
         * a launch after it. har's own streams order their calls by events
         * and the host, where that gains nothing. */
        int early = d->queue != d->stream && d->queue != d->started && !captured;
        st = har_cuda_status(har_engine_dev_push(&a, grid, d->queue, early), "kernel launch");
    }
    *w = (call_watch_t){d, node, call, no, seq, grid, "push", captured ? d->push_host->graph_differs : NULL};
    return st;  /* failed: never pushed, its peers wait until the caller fails the segment */
}

/* One call by the push kernels. Nothing waits for the peers before the
 * launch: the kernels do, and the host waits for their flags. */
static har_status_t run_push(ipc_t *d, har_node_t *node, const har_call_t *call, uint64_t after)
{
    call_watch_t w;
    har_status_t st = launch_push(d, node, call, node->call, after, 0, NULL, &w);
    if (st != HAR_OK) return st;
    har_cuda_watch_t watch = {ahead_poll, stop_call, &w};
    push_wait_t flags = {d, w.id, w.blocks};
    st = har_cuda_wait_flags(d->stream, push_done, &flags, node, &watch, "device");
    return st == HAR_OK ? recorded_difference(&w) : st;
}

/* A rank that joined peers gone ahead with its buffers elsewhere (comm/
 * call.c) runs the same kernels on copies in this GPU's memory: `staged`
 * is the call on them, its input copied in. */
static har_status_t stage_call(ipc_t *d, const har_call_t *call, har_call_t *staged)
{
    har_status_t st = HAR_OK;
    if (call->bytes > d->ahead_stage_bytes) {
        size_t bytes = d->ahead_stage_bytes ? d->ahead_stage_bytes : 1 << 20;
        while (bytes < call->bytes) bytes *= 2;
        char *area = NULL;
        if ((st = har_cuda_status(cudaMalloc((void **)&area, 2 * bytes), "cudaMalloc (staging)")) != HAR_OK) return st;
        if (d->ahead_stage) d->ahead_retired[d->nretired++] = d->ahead_stage;
        d->ahead_stage = area;
        d->ahead_stage_bytes = bytes;
    }
    st = har_cuda_copy(d->ahead_stage, HAR_MEM_DEVICE, call->in, call->in_kind, call->bytes);
    *staged = *call;
    staged->in = d->ahead_stage;
    staged->out = d->ahead_stage + d->ahead_stage_bytes;
    staged->in_kind = staged->out_kind = HAR_MEM_DEVICE;
    staged->gpu = d->gpu;
    return st;
}

static har_status_t ipc_run(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    ipc_t *d = engine;
    har_cuda_scope_t scope;
    har_status_t st = har_cuda_enter(d->gpu, &scope);
    int here = call->in_kind == HAR_MEM_DEVICE && call->out_kind == HAR_MEM_DEVICE && call->gpu == d->gpu;
    har_call_t staged = *call;
    if (st == HAR_OK && !here) st = stage_call(d, call, &staged);
    d->queue = d->stream;
    int push = (plan->paths & HAR_BIT(PUSH)) != 0;
    uint64_t after;
    if (st == HAR_OK) st = follow_tail(d, push ? &after : NULL);
    if (st == HAR_OK) st = push ? run_push(d, node, &staged, after) : run_chunks(d, node, &staged, plan);
    if (st == HAR_OK) d->tail = NULL;  /* the host saw it end, and so every call before it */
    if (st == HAR_OK && !here) st = har_cuda_copy(call->out, call->out_kind, staged.out, HAR_MEM_DEVICE, call->bytes);
    har_cuda_leave(&scope);
    return st;
}

/* A non-blocking call on its way (start/test): its own copy of the call,
 * which its watch points at, and what its launch needs, in whichever
 * thread makes it. */
typedef struct {
    har_call_t call;
    call_watch_t watch;
    int push;
    chunks_wait_t ended;          /* on the barrier kernels: their blocks tell their end there */
    double waited_from, checked;  /* when a test first found it running; its last liveness check */
    ipc_t *d;
    har_node_t *node;
    har_plan_t plan;
    uint64_t no;
    void *ctx;                    /* the posting thread's CUDA context */
    cudaEvent_t legacy;           /* the legacy stream's work before the post */
    har_status_t launch_st;
    _Atomic int launched;         /* launch_st, watch and ended are set (release) */
} ipc_op_t;

/* Engines with started calls open in this process. A call is handed to
 * the launch thread only where no other engine (communicator) has one
 * (DESIGN.md note 71): a launch held behind a cudaFree in the
 * application's thread, which waits for this rank's launched kernels,
 * which wait for a peer's launch held the same way, ends as long as every
 * rank launches one sequence of calls in the same order. */
static _Atomic int engines_open;

/* A started call's kernels, after the call before it and after the
 * legacy stream's work before the post; in the launch thread or in the
 * posting one. Every other use of d waits for the launch thread first
 * (har_launcher_drain: comm/call.c before any blocking or queued call,
 * ipc_destroy), so d is one thread's at a time. */
static void launch_op(void *arg)
{
    ipc_op_t *o = arg;
    ipc_t *d = o->d;
    /* In the launch thread, the poster's context; in the poster, the
     * same. Left current: the thread works in no other. */
    if (har_cuda_context_save() != o->ctx) har_cuda_context_restore(o->ctx);
    d->queue = d->started;
    uint64_t after;
    har_status_t st = follow_tail(d, o->push ? &after : NULL);
    if (st == HAR_OK && o->push) st = launch_push(d, o->node, &o->call, o->no, after, 0, o->legacy, &o->watch);
    else if (st == HAR_OK) st = launch_chunks(d, o->node, &o->call, &o->plan, o->no, 1, o->legacy, &o->watch);
    if (!o->push) o->ended = last_launched(d);
    if (st == HAR_OK) {
        d->tail = d->started;
        d->tail_push = o->push ? o->watch.id : 0;
        d->tail_push_blocks = o->watch.blocks;
    }
    o->launch_st = st;
    atomic_store_explicit(&o->launched, 1, memory_order_release);
}

static void op_closed(ipc_t *d)
{
    if (--d->open_ops == 0) atomic_fetch_sub(&engines_open, 1);
}

/* Queues a call whose buffers are on this GPU, as run_push or run_chunks
 * would, and returns: its launch handed to the launch thread where it may
 * be (core/launcher.h), its failure then found by the first test. The
 * legacy stream's mark is made here, as the application calls. One node
 * only: across nodes comm/call.c serves a started call on the blocking
 * path. */
static har_status_t ipc_start(void *engine, har_node_t *node, const har_call_t *call, har_plan_t *plan, uint64_t no,
                              void **op)
{
    ipc_t *d = engine;
    ipc_op_t *o = calloc(1, sizeof *o);
    if (!o) {
        har_note("no memory for a non-blocking call");
        return HAR_ERR_INTERNAL;
    }
    o->call = *call;
    o->push = (plan->paths & HAR_BIT(PUSH)) != 0;
    o->d = d;
    o->node = node;
    o->plan = *plan;
    o->no = no;
    /* No wait for the blocking stream: the host saw each blocking call end
     * before it returned (a push kernel writes its flags after its last
     * access to the segments). The barrier kernels' blocks tell their end
     * in host memory, as for a blocking call: a test that queried an event
     * would go through the MPS server where ranks share a GPU, as dear as
     * a launch. */
    har_cuda_scope_t scope;
    har_status_t st = har_cuda_enter(d->gpu, &scope);
    if (st == HAR_OK) st = har_cuda_mark_legacy((void **)&d->legacy_seen[no & 1]);
    if (st == HAR_OK) {
        o->ctx = har_cuda_context_save();
        o->legacy = d->legacy_seen[no & 1];
        int alone = atomic_load(&engines_open) == (d->open_ops > 0);
        if (d->open_ops++ == 0) atomic_fetch_add(&engines_open, 1);
        if (har_launcher_run(launch_op, o, alone)) plan->paths |= HAR_BIT(LAUNCHER);
        else if ((st = o->launch_st) != HAR_OK) op_closed(d);
    }
    har_cuda_leave(&scope);
    if (st != HAR_OK) {
        free(o);
        return st;
    }
    *op = o;
    return HAR_OK;
}

/* Liveness and differing peers are looked at as a blocking call's wait
 * does, from the first test that found the call running, once a
 * millisecond at most. */
#define OP_CHECK_EVERY 1e-3

static int ipc_test(void *op, har_status_t *st)
{
    ipc_op_t *o = op;
    call_watch_t *w = &o->watch;
    ipc_t *d = o->d;
    *st = HAR_OK;
    if (!atomic_load_explicit(&o->launched, memory_order_acquire)) return 0;  /* the launch thread has it */
    if (o->launch_st != HAR_OK) {
        /* Launched in the launch thread, and failed: never pushed, its
         * peers wait until the caller fails the segment. */
        *st = o->launch_st;
        har_launcher_drain();
        stop_failed(d);
        op_closed(d);
        free(o);
        return 1;
    }
    push_wait_t flags = {d, w->id, w->blocks};
    int ended = o->push ? push_done(&flags) : chunks_done(&o->ended);
    if (!ended) {
        double now = har_node_seg_now();
        if (!o->waited_from) o->waited_from = o->checked = now;
        if (now - o->checked < OP_CHECK_EVERY) return 0;
        o->checked = now;
        /* A kernel that faulted never writes its flags: the stream says so. */
        cudaError_t e = cudaStreamQuery(d->started);
        *st = e == cudaSuccess || e == cudaErrorNotReady ? HAR_OK : har_cuda_status(e, "device");
        if (*st == HAR_OK) *st = har_node_poll(w->node, o->waited_from, w->step);
        if (*st == HAR_OK) *st = ahead_poll(w);
        if (*st == HAR_OK) return 0;
        stop_failed(d);
    } else {
        /* Ended, unless stopped: a failure found by the other call in
         * flight stops every kernel of this engine. */
        *st = har_node_failed(w->node) ? HAR_ERR_PEER_FAILED : recorded_difference(w);
    }
    op_closed(d);
    free(o);
    return 1;
}

/* ---- Stream-ordered calls (har_allreduce_enqueue) ----
 *
 * A call is queued on the application's stream and nothing on the host
 * waits for it. What a blocking call's wait does for its kernels (stop
 * them when a local peer dies, departs, passes HAR_TIMEOUT or a failure is
 * recorded; report a peer whose call differs) a thread of har's does for
 * these: it looks at every engine with queued calls not yet done every
 * WATCH_NAP, reading only host memory (the push kernels' flags and
 * records, the segment, the peers' liveness), and makes no MPI or CUDA
 * call. It starts with the first queued call and sleeps while none is
 * outstanding. */
#define WATCH_NAP_NS 100000

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_wake = PTHREAD_COND_INITIALIZER;
static ipc_t *watch_list;
static int watch_started;

/* The last queued push call in one word, which the watch reads in one
 * load: its number, and the blocks its kernel launched in the low byte. */
#define ENQ_LAST(seq, blocks) ((uint64_t)(seq) << 8 | (uint64_t)(blocks))
_Static_assert(HAR_DEV_PUSH_BLOCKS < 256, "a push call's blocks fit ENQ_LAST's low byte");

/* Has d's last queued call ended (every block it launched done)? */
static int enqueued_done(const ipc_t *d)
{
    uint64_t last = atomic_load(&d->enq_last);
    return push_call_done(d, last >> 8, (int)(last & 0xff));
}

/* The difference recorded (in `records`, NULL: push_host->differs) by
 * the kernels of call `seq`, which this rank queued as `mine` and nobody
 * waits for: reported as a blocking call's wait would. */
static har_status_t queued_difference(ipc_t *d, const har_arrival_t *mine, uint64_t seq, const char *step,
                                      const uint64_t *records)
{
    har_call_t call;  /* what recorded_difference needs of the call: its record */
    memset(&call, 0, sizeof call);
    call.count = mine->count;
    call.red.type_code = mine->type;
    call.red.dev_op = mine->op;
    call_watch_t w = {d, d->enq_node, &call, mine->call, seq, d->push_blocks, step, records};
    return recorded_difference(&w);
}

/* A difference the kernels of a queued call recorded (a record of a
 * blocking call is its own wait's to report). */
static har_status_t enqueued_difference(ipc_t *d)
{
    for (int b = 0; b < d->push_blocks; b++) {
        uint64_t seq = ((volatile const uint64_t *)d->push_host->differs)[4 * b];
        if (!seq || __atomic_load_n(&d->enq_ring[seq % ENQ_RING].seq, __ATOMIC_ACQUIRE) != seq) continue;
        return queued_difference(d, &d->enq_ring[seq % ENQ_RING].call, seq, "enqueued", NULL);
    }
    return HAR_OK;
}

/* A difference the kernels of a replayed graph recorded (their own
 * records: their calls are numbered apart), reported once. */
static har_status_t graph_difference(ipc_t *d)
{
    for (int b = 0; b < d->push_blocks; b++) {
        const volatile uint64_t *rec = d->push_host->graph_differs + 4 * b;
        uint64_t seq = rec[0];
        if (!seq || seq <= d->graph_differs_seen) continue;
        d->graph_differs_seen = seq;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        const har_arrival_t *mine = &d->graph_calls[(uint32_t)rec[3] % ENQ_RING];  /* the call it was in */
        har_arrival_t theirs = recorded_call(rec, mine);
        if (har_node_arrival_differs(mine, &theirs) == HAR_OK) {
            /* The peer replayed a captured call this rank captured too, at
             * another place in its order: which call of this rank's met it
             * is not recorded. */
            har_note("local rank %d replayed captured call %u where this rank replayed another",
                     (int)rec[1], (unsigned)theirs.call);
            har_node_fail_call(d->enq_node, atomic_load(&d->enq_call), HAR_ERR_TRUNCATE, (int)rec[1], "graph");
            return HAR_ERR_TRUNCATE;
        }
        return queued_difference(d, mine, seq, "graph", d->push_host->graph_differs);
    }
    return HAR_OK;
}

/* How often the watch looks at the peers of a communicator whose calls
 * were captured into graphs: a replay is the application's, unseen. */
#define GRAPH_CHECK_EVERY 0.01

/* The watch's look at d: 1 while it has queued calls outstanding or calls
 * captured into graphs, 0 once neither (or once it stopped them). */
static int watch_one(ipc_t *d)
{
    uint64_t block0 = ((volatile const uint64_t *)d->push_host->done)[0];
    int done = enqueued_done(d);
    har_status_t st = enqueued_difference(d);
    if (st == HAR_OK && d->captured) st = graph_difference(d);
    if (st == HAR_OK && !done) {
        /* HAR_TIMEOUT counts from the last call done: calls queued back to
         * back may keep some outstanding for longer than that. */
        if (!d->enq_since || block0 != d->enq_block0) d->enq_since = har_node_seg_now(), d->enq_block0 = block0;
        st = har_node_poll_here(d->enq_node, atomic_load(&d->enq_call), d->enq_since, "enqueued");
    } else if (st == HAR_OK && d->captured && har_node_seg_now() - d->graph_checked > GRAPH_CHECK_EVERY) {
        /* No time-out: whether a replay runs is not known. */
        d->graph_checked = har_node_seg_now();
        st = har_node_poll_here(d->enq_node, atomic_load(&d->enq_call), d->graph_checked, "graph");
    }
    if (st == HAR_OK) {
        if (done) d->enq_since = 0;
        return !done || d->captured;
    }
    stop_kernels(d);
    const har_failure_t *why = har_node_record(d->enq_node);
    har_log(HAR_LOG_ERROR, "har_allreduce_enqueue: the all-reduces queued on this communicator were stopped: %s%s%s "
            "(the next all-reduce on it fails and says more)", har_status_what(st), why && why->detail[0] ? ": " : "",
            why ? why->detail : "");
    return 0;
}

static void *watch_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&watch_lock);
    for (;;) {
        while (!watch_list) pthread_cond_wait(&watch_wake, &watch_lock);
        for (ipc_t **p = &watch_list; *p;) {
            ipc_t *d = *p;
            if (watch_one(d)) {
                p = &d->watch_next;
                continue;
            }
            *p = d->watch_next;
            atomic_store(&d->watched, 0);
            /* A call queued after the look at its flags, whose caller saw
             * d still watched (both sides store, then load: one sees the
             * other's store). */
            if ((!enqueued_done(d) || atomic_load(&d->captured)) && !*d->abort_host) {
                atomic_store(&d->watched, 1);
                d->watch_next = watch_list;
                watch_list = d;
                break;
            }
        }
        pthread_mutex_unlock(&watch_lock);
        struct timespec nap = {0, WATCH_NAP_NS};
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&watch_lock);
    }
    return NULL;
}

/* Puts d in the watch's list (after its enq_last was stored). */
static har_status_t watch(ipc_t *d)
{
    if (atomic_load(&d->watched)) return HAR_OK;
    har_status_t st = HAR_OK;
    pthread_mutex_lock(&watch_lock);
    if (!watch_started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, watch_thread, NULL) == 0) watch_started = 1;
        else har_note("could not start the thread that watches queued all-reduces"), st = HAR_ERR_INTERNAL;
        pthread_attr_destroy(&attr);
    }
    if (st == HAR_OK && !atomic_load(&d->watched)) {
        atomic_store(&d->watched, 1);
        d->watch_next = watch_list;
        watch_list = d;
        pthread_cond_signal(&watch_wake);
    }
    pthread_mutex_unlock(&watch_lock);
    return st;
}

/* Before d goes: its queued calls end (every local rank queued them before
 * the state's free met), or the watch stops them; then out of its list. */
static void unwatch(ipc_t *d)
{
    while (d->push_host && d->push_blocks && !enqueued_done(d) && !*d->abort_host) sched_yield();
    pthread_mutex_lock(&watch_lock);
    for (ipc_t **p = &watch_list; *p; p = &(*p)->watch_next)
        if (*p == d) {
            *p = d->watch_next;
            break;
        }
    pthread_mutex_unlock(&watch_lock);
}

/* Queues a push call on `stream`: buffers elsewhere than this GPU go
 * through enq_stage, copied in and out on the stream. A call captured into
 * a graph runs at each replay, on the graphs' push area: it follows no
 * other call (a graph's kernels are ordered among themselves by the
 * graph; waiting in it for work outside is refused by CUDA) and the host
 * has nothing to watch until it runs. */
static har_status_t ipc_enqueue(void *engine, har_node_t *node, const har_call_t *call, uint64_t no, void *stream,
                                int captured)
{
    ipc_t *d = engine;
    har_cuda_scope_t scope;
    har_status_t st = har_cuda_enter(d->gpu, &scope);
    int here = call->in_kind == HAR_MEM_DEVICE && call->out_kind == HAR_MEM_DEVICE && call->gpu == d->gpu;
    if (st == HAR_OK && captured && !here) {
        har_note("a call captured into a CUDA graph takes device buffers on the communicator's GPU only");
        st = HAR_ERR_BUFFER;
    }
    har_call_t staged = *call;
    /* NULL, the legacy default stream, by the handle that names it: `tail`
     * NULL means that no call is outstanding. */
    d->queue = stream ? (cudaStream_t)stream : cudaStreamLegacy;
    /* After the call before it, copy in included: that call's kernel reads
     * the scratch until it ends. */
    uint64_t after = 0;
    if (st == HAR_OK && !captured) st = follow_tail(d, here ? &after : NULL);
    if (st == HAR_OK && !here) {
        if (!d->enq_stage)
            st = har_cuda_status(cudaMalloc((void **)&d->enq_stage, 2 * d->push_max), "cudaMalloc (staging)");
        staged.in = d->enq_stage;
        staged.out = d->enq_stage + d->push_max;
        if (st == HAR_OK)
            st = har_cuda_status(cudaMemcpyAsync(d->enq_stage, call->in, call->bytes, cudaMemcpyDefault, d->queue),
                                 "copy to the GPU");
    }
    call_watch_t w;
    if (st == HAR_OK) st = launch_push(d, node, &staged, no, after, captured, NULL, &w);
    d->enq_node = node;
    atomic_store(&d->enq_call, no);
    if (st == HAR_OK && captured) {
        har_node_arrival_of(&d->graph_calls[no % ENQ_RING], call, no);
        atomic_store(&d->captured, 1);
        st = watch(d);
    } else if (st == HAR_OK) {
        /* Watched before the copy back: into pageable host memory it makes
         * the host wait for the kernel, which only the watch can stop. */
        har_node_arrival_of(&d->enq_ring[w.id % ENQ_RING].call, call, no);
        __atomic_store_n(&d->enq_ring[w.id % ENQ_RING].seq, w.id, __ATOMIC_RELEASE);  /* the description first */
        atomic_store(&d->enq_last, ENQ_LAST(w.id, w.blocks));
        st = watch(d);
    }
    if (st == HAR_OK && !here)
        st = har_cuda_status(cudaMemcpyAsync(call->out, staged.out, call->bytes, cudaMemcpyDefault, d->queue),
                             "copy from the GPU");
    if (st == HAR_OK && !captured && here) {
        d->tail = d->queue;
        d->tail_push = w.id;
        d->tail_push_blocks = w.blocks;
    } else if (st == HAR_OK && !captured && (st = tail_event(d)) == HAR_OK &&
               (st = har_cuda_status(cudaEventRecord(d->tail_end, d->queue), "cudaEventRecord")) == HAR_OK) {
        d->tail = d->queue;
        d->tail_push = 0;
    }
    if (st != HAR_OK) stop_failed(d);
    har_cuda_leave(&scope);
    return st;
}

/* The kernels reduce the 32- and 64-bit types with every op; a device
 * segment serves at most HAR_DEV_MAX_RANKS ranks (its flag area). Push is
 * its one-shot on one node up to HAR_DEVICE_PUSH_MAX. */
const har_engine_t har_engine_ipc = {
    .can = {.path = HAR_PATH_IPC, .takes = HAR_TAKES_DEVICE,
            .shots = HAR_BIT(ONE_SHOT) | HAR_BIT(TWO_SHOT) | HAR_BIT(PUSH),
            .kernel_types = 1, .across = HAR_BIT(RAILS), .shared_gpu = 1, .max_local = HAR_DEV_MAX_RANKS,
            .rank = 1, .device_slot = 1, .one_shot_max = HAR_SETTING(device_one_shot_max),
            .ahead_max = HAR_SETTING(device_ahead_max), .start_max = HAR_SETTING(device_start_max)},
    .setup = ipc_setup, .run = ipc_run, .start = ipc_start, .test = ipc_test, .enqueue = ipc_enqueue,
    .destroy = ipc_destroy};
