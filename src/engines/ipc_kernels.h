/* The reduction kernels over a CUDA IPC node segment. Shared by C (ipc_engine.c)
 * and CUDA (ipc_kernels.cu). */
#ifndef HAR_KERNELS_H
#define HAR_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "core/types.h"

#define HAR_DEV_MAX_RANKS 8     /* local ranks a device segment serves */
#define HAR_DEV_MAX_BLOCKS 64   /* blocks per kernel: enough to fill NVLink */
#define HAR_DEV_THREADS 512     /* threads per block */
#define HAR_DEV_LINE 128
/* Flag area at the start of each rank's segment: one line per (writer,
 * block), written only by that writer (remote store, local poll), then one
 * line for the set-up probe. */
#define HAR_DEV_PROBE_OFFSET ((size_t)HAR_DEV_MAX_RANKS * HAR_DEV_MAX_BLOCKS * HAR_DEV_LINE)
#define HAR_DEV_FLAG_BYTES (HAR_DEV_PROBE_OFFSET + 4096)

/* The push kernels' area in each rank's segment (after the flag area,
 * before the data slots; ipc_engine.c lays it out): per call parity, one line per
 * (writer, block) where the writer puts the call's count and signature,
 * then a data region per writer. Both carry the call's flag beside every
 * 4 bytes (ipc_kernels.cu): a region of HAR_DEV_PUSH_REGION(max) bytes holds
 * max bytes of a call's input. */
#define HAR_DEV_PUSH_REGION(max) (2 * (size_t)(max))
/* The push kernels' grid, at most (half the node's safe grid may be
 * smaller: ipc_engine.c). A call launches the blocks its lines need
 * (har_dev_push_grid), 4 at least: 4 to 16 KiB, 8 at 32 KiB, 16 at
 * 64 KiB. A fixed grid of 8 had taken 3-6 % longer than one of 4 from 4 B
 * to 16 KiB, and 8-15 % less at 64 KiB; fewer than 4 took up to 15 %
 * longer (one H100 under MPS, 4 and 8 ranks; DESIGN.md note 56). */
#define HAR_DEV_PUSH_BLOCKS 16
#define HAR_DEV_PUSH_MIN_GRID 4

/* One push call: every pointer as mapped here. */
typedef struct {
    char *data[HAR_DEV_MAX_RANKS];   /* this parity's data region of every local rank */
    char *lines[HAR_DEV_MAX_RANKS];  /* this parity's (writer, block) lines of every local rank */
    size_t region;                   /* bytes per writer in a data region: HAR_DEV_PUSH_REGION(its max) */
    const char *in;
    char *out;
    size_t n;                        /* elements */
    int nranks, me, dtype, op;
    uint64_t seq;                    /* push calls so far, this one included: the same on every rank */
    uint64_t count, sig;             /* what every peer must have called too (har_engine_dev_push_sig) */
    volatile int *abort;             /* host-mapped: the host sets it to stop waiting blocks */
    uint64_t *done;                  /* host-mapped: block b stores seq in done[b] once its output is written */
    uint64_t *differs;               /* host-mapped, 4 words per block: {seq, local rank, its count, its signature}
                                      * of a peer whose call differs */
    volatile uint64_t *stamps;       /* NULL, or where block 0 notes the GPU's clock at 4 steps of the call
                                      * (tests/gpu/latency_probe.cu times the protocol with them) */
    /* A call captured into a CUDA graph, whose every replay is a new call
     * that the host never sees: `counter` (device memory of this rank's
     * own: {the last such call done, blocks finished}) numbers it, every
     * block taking seq = counter[0] + 1 as it starts and the last block to
     * finish storing seq there; data and lines are then parity 0's, parity
     * 1's `parity_bytes` further. NULL: seq and the pointers are the
     * call's. Such calls have a push area of their own (ipc_engine.c). */
    uint64_t *counter;
    size_t parity_bytes;
    /* Order between streams, on the GPU: each block stores seq in
     * done_dev[b] (device memory of this rank's own; NULL: not) as it
     * ends, and where `after` is not 0 every block first waits there for
     * every block of the call numbered `after`, queued before it on
     * another stream. Calls run in the order they were queued on every
     * rank, which the push areas need (ipc_kernels.cu), with no event recorded
     * per call. */
    uint64_t *done_dev;
    uint64_t after;
    int after_blocks;                /* the blocks the call numbered `after` launched */
} har_push_args_t;

/* The blocks a push call launches: as many as give each thread one line
 * (8 bytes of the vector), at least HAR_DEV_PUSH_MIN_GRID, at most the
 * node's push grid (every rank's the same). */
static inline int har_dev_push_grid(size_t n, size_t elem_size, int grid)
{
    size_t lines = (n * elem_size + 7) / 8;
    size_t want = (lines + HAR_DEV_THREADS - 1) / HAR_DEV_THREADS;
    if (want < HAR_DEV_PUSH_MIN_GRID) want = HAR_DEV_PUSH_MIN_GRID;
    return want < (size_t)grid ? (int)want : grid;
}

/* Bytes of the (writer, block) lines at the start of each parity's push area. */
#define HAR_DEV_PUSH_LINES ((size_t)HAR_DEV_MAX_RANKS * HAR_DEV_PUSH_BLOCKS * HAR_DEV_LINE)

/* The push kernels' signature of a call: its type, op and number on the
 * communicator (with the count, what the ranks must agree on). */
static inline uint64_t har_engine_dev_push_sig(uint32_t type, int op, uint32_t call)
{
    return ((uint64_t)type << 40) | ((uint64_t)(uint8_t)op << 32) | call;
}

/* What one kernel does with one chunk. */
typedef enum {
    HAR_DEV_WHOLE,   /* copy in, reduce, (two-shot: all-gather): one node */
    HAR_DEV_REDUCE,  /* copy in, reduce this rank's shard: before the inter-node step */
    HAR_DEV_GATHER   /* all-gather of finished shards: after it */
} har_engine_dev_phase_t;

typedef struct {
    char *slot[HAR_DEV_MAX_RANKS];   /* this chunk's slot of every local rank, as mapped here */
    char *flags[HAR_DEV_MAX_RANKS];  /* every rank's flag area, as mapped here */
    const char *in;
    char *out;
    size_t n, elem;
    int nranks, me, dtype, op, one_shot, phase, aligned;
    uint64_t epoch;                  /* its barriers meet at epoch+1 (copy in) and epoch+2 (gather) */
    volatile int *abort;             /* host-mapped: the host sets it to stop spinning blocks */
    /* One node (HAR_DEV_WHOLE): what every peer must have called too
     * (count, har_engine_dev_push_sig), checked at the first barrier, since a
     * rank may launch before its peers arrive; a peer whose call differs is
     * recorded in `differs` (host-mapped, 4 words per block: {call_id, local
     * rank, its count, its signature}). */
    uint64_t count, sig, call_id;
    uint64_t *differs;
    /* Set on a call's last chunk on one node: each block stores epoch + 1
     * there (host-mapped, a word per block) as it ends, after its output,
     * and the host waits for those words rather than asking the stream. */
    uint64_t *done;
} har_engine_dev_args_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Launches one chunk's kernel on `stream` (a cudaStream_t); 0 or a cudaError_t. */
int har_engine_dev_launch(const har_engine_dev_args_t *a, int blocks, void *stream);
/* Queues one push call on `stream`, `blocks` blocks; 0 or a cudaError_t.
 * `early`: launched with programmatic stream serialization where the GPU
 * has it (compute capability 9.0 on), so that the kernel is scheduled as
 * the kernel before it on the stream ends, not only after; it waits for
 * that kernel's end and memory (griddepcontrol.wait) before anything. */
int har_engine_dev_push(const har_push_args_t *a, int blocks, void *stream, int early);
/* Queues on `stream` a wait (one thread) until done_dev[b] >= after for
 * each of `blocks` blocks, or until *abort is set: the push call numbered
 * `after` ended, for work that is not a push kernel; 0 or a cudaError_t. */
int har_engine_dev_wait_push(const uint64_t *done_dev, int blocks, uint64_t after, volatile int *abort, void *stream);
/* Blocks for a chunk of `bytes`, at most `max_blocks` (the grid the node
 * agreed): the same on every rank. */
int har_engine_dev_blocks(size_t bytes, int max_blocks);
/* Blocks of any of the kernels that fit on one multiprocessor at once, by
 * the occupancy the runtime computes for the current GPU; -1 if it cannot
 * say. A block waits for the same block of every peer, so a grid is only
 * safe when every block of every rank on a GPU can be resident together. */
int har_engine_dev_blocks_per_sm(void);
/* acc[i] = acc[i] op in[i] for n elements of device memory, queued on
 * `stream`: the ring's reduction where its blocks are device memory. */
int har_engine_dev_fold(void *acc, const void *in, size_t n, int dtype, int op, void *stream);
/* Copies 16 bytes from `peer` (another GPU's memory) to `out` with a kernel:
 * proof that this GPU can load from that one. 0 or a cudaError_t. */
int har_engine_dev_probe(const void *peer, void *out, void *stream);
/* Queues an empty kernel of one thread on `stream`: har-bench's launch
 * floor (the cost of any call that launches and waits). 0 or a cudaError_t. */
int har_engine_dev_empty(void *stream);
#ifdef __cplusplus
}
#endif

#endif
