// Reduction kernels over CUDA IPC-mapped peer memory, in two families.
//
// The barrier kernels: one kernel per chunk. Each block owns the same
// sub-ranges on every rank, and synchronises only with the same block index
// on the peers: a flag line per (writer, block) in the reader's own memory,
// written remotely with a system-scope release after the block's data,
// polled locally (relaxed loads, then an acquire fence). On one node a
// rank may launch before its peers have called (HAR_DEVICE_AHEAD_MAX;
// HAR_DEVICE_START_MAX for MPI_Iallreduce and MPI_Start): its
// blocks then wait for theirs on the GPU, and the first barrier carries
// each call's count and signature so that a differing call is found, not
// mixed. Elsewhere the host has seen every peer arrive before launching.
//
// The push kernels (further down): one-shot calls on one node that no host
// step precedes; their blocks wait only for their peers' data.
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>
#include "engines/ipc_kernels.h"
#include "plan/shard.h"

namespace {

// A fence.sc.sys before it (__threadfence_system) makes this store a
// release: one fence for all the peers' flags instead of one per flag.
__device__ __forceinline__ void store_relaxed_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Polls are relaxed loads, and one acquire fence follows the last: the
// same order as an acquiring load in the loop without its cost on every
// spin (8 ranks under MPS: 33 us a call, against 40-45 with ld.acquire).
__device__ __forceinline__ uint64_t load_relaxed_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void acquire_fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

__device__ __forceinline__ uint64_t *flag(char *area, int writer, int block)
{
    return (uint64_t *)(area + ((size_t)writer * HAR_DEV_MAX_BLOCKS + block) * HAR_DEV_LINE);
}

// The words of a (writer, block) flag line: the writer's epoch, then the
// count and signature of its calls in two places taken in turn (on one node
// every kernel takes two epochs, so a.epoch / 2 alternates). A writer
// writes its next call's pair only after its current kernel ended, and that
// needed every peer's flag of the current call, set after the peer's
// previous kernel, the reader of the other pair, ended: so the pair a
// reader compares is never overwritten before it looks.
enum { FLAG_EPOCH = 0, FLAG_CALL = 2 };

__device__ __forceinline__ uint64_t *call_words(char *area, int writer, int block, uint64_t epoch)
{
    return flag(area, writer, block) + FLAG_CALL + 2 * (epoch / 2 % 2);
}

// Every block of this rank meets the same block of every peer at epoch e.
// Where `header` is set, each writer also hands every peer its call's count
// and signature, and each peer compares them with its own: a peer whose
// call differs is recorded for the host (a.differs) and the block stops, as
// every rank's does (a difference is seen from both sides), so no kernel
// mixes two calls' data. Returns false if the block is to stop: the
// difference, or the host's abort flag (a peer died or timed out).
__device__ bool barrier(const har_engine_dev_args_t &a, uint64_t e, bool header)
{
    __shared__ int stop;
    __syncthreads();  // the whole block's writes come before thread 0's release
    if (threadIdx.x == 0) {
        stop = 0;
        if (header)
            for (int p = 0; p < a.nranks; p++) {
                if (p == a.me) continue;
                volatile uint64_t *words = call_words(a.flags[p], a.me, blockIdx.x, a.epoch);
                words[0] = a.count;
                words[1] = a.sig;
            }
        __threadfence_system();
        for (int p = 0; p < a.nranks; p++)
            if (p != a.me) store_relaxed_sys(flag(a.flags[p], a.me, blockIdx.x) + FLAG_EPOCH, e);
        for (int p = 0; p < a.nranks && !stop; p++) {
            if (p == a.me) continue;
            for (unsigned spins = 1; load_relaxed_sys(flag(a.flags[a.me], p, blockIdx.x) + FLAG_EPOCH) < e; spins++)
                if ((spins & 1023) == 0 && *a.abort) { stop = 1; break; }
        }
        acquire_fence_sys();
        for (int p = 0; header && p < a.nranks && !stop; p++) {
            if (p == a.me) continue;
            const volatile uint64_t *words = call_words(a.flags[a.me], p, blockIdx.x, a.epoch);
            uint64_t count = words[0], sig = words[1];
            if (count == a.count && sig == a.sig) continue;
            volatile uint64_t *record = a.differs + 4 * blockIdx.x;
            record[1] = (uint64_t)p;
            record[2] = count;
            record[3] = sig;
            record[0] = a.call_id;  // last: the host matches it to this kernel
            stop = 1;
        }
    }
    __syncthreads();
    return !stop;
}

// The range of shard s that block b handles.
__device__ void block_range(const har_engine_dev_args_t &a, int shards, int s, size_t *off, size_t *len)
{
    size_t soff, slen, boff;
    har_plan_shard(a.n, a.elem, shards, s, &soff, &slen);  // the host side's shards, exactly
    har_plan_shard(slen, a.elem, gridDim.x, blockIdx.x, &boff, len);
    *off = soff + boff;
}

template <typename T> struct unsigned_of { typedef T type; };
template <> struct unsigned_of<int32_t> { typedef uint32_t type; };
template <> struct unsigned_of<int64_t> { typedef uint64_t type; };

// Integer sum and product wrap in unsigned arithmetic, like the host path.
template <typename T, int OP> __device__ __forceinline__ T apply(T x, T y)
{
    typedef typename unsigned_of<T>::type U;
    if constexpr (OP == HAR_OP_MIN) return y < x ? y : x;
    else if constexpr (OP == HAR_OP_MAX) return y > x ? y : x;
    else if constexpr (OP == HAR_OP_SUM) return (T)((U)x + (U)y);
    else if constexpr (OP == HAR_OP_PROD) return (T)((U)x * (U)y);
    else if constexpr (OP == HAR_OP_BAND) return x & y;
    else if constexpr (OP == HAR_OP_BOR) return x | y;
    else if constexpr (OP == HAR_OP_BXOR) return x ^ y;
    else if constexpr (OP == HAR_OP_LAND) return (T)((x != 0) && (y != 0));
    else if constexpr (OP == HAR_OP_LOR) return (T)((x != 0) || (y != 0));
    else return (T)((x != 0) != (y != 0));
}

// Vectors per thread in flight: a block's loads are issued together, so a
// chunk of up to BATCH * 512 * 16 bytes per block waits for one round trip
// to memory, not one per vector (a store in between would keep the
// compiler from hoisting the next loads above it).
constexpr int BATCH = 4;

// The vectors [0, nvec) of the reduction below, for N sources known when
// compiled: every source's loads are issued before any is reduced, so a
// vector waits for one round trip, not one per rank. Eight vectors per
// thread in flight.
template <typename T, int OP, int N> __device__ void reduce_vectors(char *dst, char *const *src, size_t off, size_t nvec)
{
    constexpr int V = 16 / sizeof(T), B = 8 / N > 0 ? 8 / N : 1;
    typedef union { uint4 raw; T e[V]; } vec_t;
    for (size_t v0 = threadIdx.x; v0 < nvec; v0 += B * blockDim.x) {
        vec_t x[N][B];
#pragma unroll
        for (int b = 0; b < B; b++) {
            size_t v = v0 + b * blockDim.x;
#pragma unroll
            for (int r = 0; r < N; r++)
                if (v < nvec) x[r][b].raw = *(const uint4 *)(src[r] + (off + v * V) * sizeof(T));
        }
#pragma unroll
        for (int b = 0; b < B; b++) {
            size_t v = v0 + b * blockDim.x;
#pragma unroll
            for (int r = 1; r < N; r++)
#pragma unroll
                for (int k = 0; k < V; k++) x[0][b].e[k] = apply<T, OP>(x[0][b].e[k], x[r][b].e[k]);
            if (v < nvec) *(uint4 *)(dst + (off + v * V) * sizeof(T)) = x[0][b].raw;
        }
    }
}

// The same for any count of sources: one rank's loads after another's.
template <typename T, int OP>
__device__ void reduce_vectors_any(char *dst, char *const *src, int nsrc, size_t off, size_t nvec)
{
    constexpr int V = 16 / sizeof(T);
    typedef union { uint4 raw; T e[V]; } vec_t;
    for (size_t v0 = threadIdx.x; v0 < nvec; v0 += BATCH * blockDim.x) {
        vec_t acc[BATCH], x[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            size_t v = v0 + b * blockDim.x;
            if (v < nvec) acc[b].raw = *(const uint4 *)(src[0] + (off + v * V) * sizeof(T));
        }
        for (int r = 1; r < nsrc; r++) {
#pragma unroll
            for (int b = 0; b < BATCH; b++) {
                size_t v = v0 + b * blockDim.x;
                if (v < nvec) x[b].raw = *(const uint4 *)(src[r] + (off + v * V) * sizeof(T));
            }
#pragma unroll
            for (int b = 0; b < BATCH; b++)
#pragma unroll
                for (int k = 0; k < V; k++) acc[b].e[k] = apply<T, OP>(acc[b].e[k], x[b].e[k]);
        }
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            size_t v = v0 + b * blockDim.x;
            if (v < nvec) *(uint4 *)(dst + (off + v * V) * sizeof(T)) = acc[b].raw;
        }
    }
}

// dst[i] = src[0][i] op src[1][i] op ... for i in [off, off+len): ranks in
// order, 16-byte loads where every pointer allows them. The node sizes
// machines have (2, 4, 8 GPUs) get code of their own.
template <typename T, int OP>
__device__ void reduce_range(char *dst, char *const *src, int nsrc, size_t off, size_t len, bool vec)
{
    constexpr int V = 16 / sizeof(T);
    size_t done = 0;
    if (vec) {
        size_t nvec = len / V;
        switch (nsrc) {
        case 2: reduce_vectors<T, OP, 2>(dst, src, off, nvec); break;
        case 4: reduce_vectors<T, OP, 4>(dst, src, off, nvec); break;
        case 8: reduce_vectors<T, OP, 8>(dst, src, off, nvec); break;
        default: reduce_vectors_any<T, OP>(dst, src, nsrc, off, nvec);
        }
        done = nvec * V;
    }
    for (size_t i = done + threadIdx.x; i < len; i += blockDim.x) {
        T acc = ((const T *)src[0])[off + i];
        for (int r = 1; r < nsrc; r++) acc = apply<T, OP>(acc, ((const T *)src[r])[off + i]);
        ((T *)dst)[off + i] = acc;
    }
}

template <typename T> __device__ void copy_range(char *dst, const char *src, size_t off, size_t len, bool vec)
{
    constexpr int V = 16 / sizeof(T);
    size_t done = 0;
    if (vec) {
        size_t nvec = len / V;
        for (size_t v0 = threadIdx.x; v0 < nvec; v0 += BATCH * blockDim.x) {
            uint4 x[BATCH];
#pragma unroll
            for (int b = 0; b < BATCH; b++) {
                size_t v = v0 + b * blockDim.x;
                if (v < nvec) x[b] = *(const uint4 *)(src + (off + v * V) * sizeof(T));
            }
#pragma unroll
            for (int b = 0; b < BATCH; b++) {
                size_t v = v0 + b * blockDim.x;
                if (v < nvec) *(uint4 *)(dst + (off + v * V) * sizeof(T)) = x[b];
            }
        }
        done = nvec * V;
    }
    for (size_t i = done + threadIdx.x; i < len; i += blockDim.x) ((T *)dst)[off + i] = ((const T *)src)[off + i];
}

// A block's end told to the host (har_engine_dev_args_t.done), after its output.
__device__ __forceinline__ void tell_ended(const har_engine_dev_args_t &a)
{
    if (!a.done) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        *(volatile uint64_t *)&a.done[blockIdx.x] = a.epoch + 1;
    }
}

template <typename T, int OP> __global__ void __launch_bounds__(HAR_DEV_THREADS) allreduce(har_engine_dev_args_t a)
{
    const int shards = a.one_shot ? 1 : a.nranks;
    const bool vec = a.aligned;  // slots are always aligned; the user's buffers may not be
    size_t off, len;
    if (a.phase != HAR_DEV_GATHER) {
        for (int s = 0; s < shards; s++) {
            block_range(a, shards, s, &off, &len);
            copy_range<T>(a.slot[a.me], a.in, off, len, vec);
        }
        if (!barrier(a, a.epoch + 1, a.phase == HAR_DEV_WHOLE)) return;
        if (a.one_shot) {
            block_range(a, 1, 0, &off, &len);
            reduce_range<T, OP>(a.out, a.slot, a.nranks, off, len, vec);
            tell_ended(a);
            return;
        }
        block_range(a, shards, a.me, &off, &len);
        reduce_range<T, OP>(a.slot[a.me], a.slot, a.nranks, off, len, true);
        if (a.phase == HAR_DEV_REDUCE) return;
    }
    if (!barrier(a, a.epoch + 2, false)) return;
    for (int s = 0; s < shards; s++) {
        block_range(a, shards, s, &off, &len);
        copy_range<T>(a.out, a.slot[s], off, len, vec);
    }
    tell_ended(a);
}

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// ---- The push kernels: one-shot with no barrier and no host step ----
//
// The data carries its own flag (an LL protocol): every 16-byte line a
// writer stores is two 64-bit words, each 4 bytes of payload beside the
// call's flag, stored and loaded whole (a 64-bit access is single-copy
// atomic), so a reader that sees the call's flag in both words holds the
// call's payload. No fence orders data before a flag, and the reader
// needs none after it: one store latency and one load latency per call,
// where a separate flag costs a system fence between them (1.5 us of a
// 4-rank call under MPS, measured by tests/gpu/latency_probe.cu).
//
// A call launches as few blocks as give each thread one line (8 bytes of
// the vector; har_dev_push_grid), and block b of every rank owns the same
// range of lines where the calls agree. Each block first writes, in every
// peer's area, its (writer, block) header: two lines holding the call's
// count and signature (type, op, call number). It then stores its input's
// lines into its own region of every peer's data area. The thread of peer
// p waits for p's header in its own memory, re-arms it, and compares it
// with its own call: a peer whose count or signature differs is recorded
// for the host (a->differs) and the block writes nothing. Otherwise each
// thread reads its lines from every peer at once, waits for the ones not
// there yet, reduces them with its own input in rank order (every rank
// gets the same bits) into the output, and re-arms the lines it read
// (zero: no call's flag). A block waits for ever only if the host never
// sets the abort flag: it does on a time-out, a dead peer or a failure
// heard elsewhere (stream.c's waits). A peer whose call launched fewer
// blocks never writes the headers this rank's further blocks wait for;
// block 0, which every call has, records the difference, and they end on
// its record, with no host step (a started call nobody tests yet must end
// too).
//
// Each block stores the call's number in done[b] as it ends; the host
// waits for the blocks the call launched only. The blocks past them hold
// an older call's number, which is done too: calls on one stream end in
// turn, and a call that follows one on another stream waits for every
// block that call launched (`after`).
//
// Two areas alternate by call parity, and a writer cannot overwrite a line
// its reader has not finished with: a rank writes call k+2 only after its
// call k+1 ended, which needed every peer's call k+1 header in block 0,
// which each peer writes from a kernel queued after its call k kernel,
// the reader (and re-armer) of call k's lines, has ended. So when call k
// looks, a data line or a header holds zero or call k's flag: equality is
// the test, and a flag never comes round to an old line's value however
// long a line lies unused.

__device__ __forceinline__ uint64_t *push_line(char *lines, int writer, int block)
{
    return (uint64_t *)(lines + ((size_t)writer * HAR_DEV_PUSH_BLOCKS + block) * HAR_DEV_LINE);
}

__device__ __forceinline__ uint64_t load_volatile(const uint64_t *p) { return *(const volatile uint64_t *)p; }

// A call's flag: its number, never zero (zero is a re-armed line).
__device__ __forceinline__ uint32_t ll_flag(uint64_t seq) { return (uint32_t)(seq % 0xffffffffu) + 1; }

__device__ __forceinline__ void ll_store(uint64_t *line, uint32_t w0, uint32_t w1, uint32_t flag)
{
    uint64_t a = (uint64_t)flag << 32 | w0, b = (uint64_t)flag << 32 | w1;
    asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(line), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ void ll_load(const uint64_t *line, uint64_t *a, uint64_t *b)
{
    asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(line));
}

__device__ __forceinline__ bool ll_holds(uint64_t a, uint64_t b, uint32_t flag)
{
    return (uint32_t)(a >> 32) == flag && (uint32_t)(b >> 32) == flag;
}

// Line i of a vector of n elements of T as two payload words (zero past the end).
template <typename T> __device__ __forceinline__ void ll_payload(const char *v, size_t n, size_t i, uint32_t *w)
{
    if constexpr (sizeof(T) == 8) {
        uint64_t x = ((const uint64_t *)v)[i];
        w[0] = (uint32_t)x, w[1] = (uint32_t)(x >> 32);
    } else {
        w[0] = ((const uint32_t *)v)[2 * i];
        w[1] = 2 * i + 1 < n ? ((const uint32_t *)v)[2 * i + 1] : 0;
    }
}

template <typename T> __device__ __forceinline__ void ll_elements(const uint32_t *w, T *e)
{
    if constexpr (sizeof(T) == 8) {
        uint64_t x = (uint64_t)w[1] << 32 | w[0];
        memcpy(e, &x, 8);
    } else {
        memcpy(&e[0], &w[0], 4);
        memcpy(&e[1], &w[1], 4);
    }
}

// Line i of writer r in this rank's data area.
__device__ __forceinline__ uint64_t *push_data_line(const har_push_args_t &a, size_t shift, int r, size_t i)
{
    return (uint64_t *)(a.data[a.me] + shift + (size_t)r * a.region) + 2 * i;
}

// Block 0's thread 0 notes the global timer at the protocol's steps where
// a.stamps is set (tests/gpu/latency_probe.cu times them).
#define PUSH_STAMP(a, k)                                                                            \
    do {                                                                                            \
        if ((a).stamps && blockIdx.x == 0 && threadIdx.x == 0) (a).stamps[k] = global_ns();        \
    } while (0)

// One push call by this block: call `seq` (the launch's, or a replayed
// call's number from the GPU's counter) on the area `shift` bytes past the
// lines and data of the arguments (a replayed call's parity). Passed
// beside them, not written into them: modified, their arrays would leave
// the kernel's parameters for local memory in the loops below. False if
// the host asked to stop.
template <typename T, int OP>
__device__ __forceinline__ bool push_call(const har_push_args_t &a, const uint64_t seq, const size_t shift)
{
    __shared__ int stop, differs;
    constexpr int E = 8 / sizeof(T);  // elements per line
    PUSH_STAMP(a, 0);
    const uint32_t flag = ll_flag(seq);
    const size_t lines = (a.n + E - 1) / E;
    // The lines go to as few blocks as give each thread one: a block more
    // with lines to wait for costs more than its threads save (at 256 B,
    // lines on 4 blocks rather than 2 took 0.35 us more with 4 ranks and
    // 0.9 us with 8, on one H100 under MPS). The grid is the call's
    // (har_dev_push_grid), so every rank splits them alike where the calls
    // agree; a block without lines still writes and reads the headers.
    const int blocks_used = (int)min((size_t)gridDim.x, (lines + blockDim.x - 1) / blockDim.x);
    size_t off = 0, len = 0;
    if ((int)blockIdx.x < blocks_used) har_plan_shard(lines, 8, blocks_used, blockIdx.x, &off, &len);
    if (threadIdx.x == 0) stop = 0, differs = 0;
    if (a.after) {
        // The call before it, on another stream: every block of it ended
        // (each stored after a system fence, so its lines are re-armed), as
        // one stream would have it. Not this block's alone: which lines a
        // block reads depends on the call's size, so call k+2's block 0
        // may write lines that call k's block 3 has not read yet.
        if (threadIdx.x == 0) {
            for (int b = 0; b < a.after_blocks && !stop; b++)
                for (unsigned spins = 1; load_relaxed_sys(&a.done_dev[b]) < a.after; spins++)
                    if ((spins & 1023) == 0 && *a.abort) {
                        stop = 1;
                        break;
                    }
            acquire_fence_sys();
        }
        __syncthreads();
        if (stop) return false;
    }
    const int t = threadIdx.x;
    if (t < a.nranks && t != a.me) {
        uint64_t *header = push_line(a.lines[t] + shift, a.me, blockIdx.x);
        ll_store(header, (uint32_t)a.count, (uint32_t)(a.count >> 32), flag);
        ll_store(header + 2, (uint32_t)a.sig, (uint32_t)(a.sig >> 32), flag);
    }
    const size_t mine = (size_t)a.me * a.region;
    for (size_t i = off + t; i < off + len; i += blockDim.x) {
        uint32_t w[2];
        ll_payload<T>(a.in, a.n, i, w);
        for (int p = 0; p < a.nranks; p++)
            if (p != a.me) ll_store((uint64_t *)(a.data[p] + shift + mine) + 2 * i, w[0], w[1], flag);
    }
    PUSH_STAMP(a, 1);
    __syncthreads();  // stop and differs are zero before any thread below can set them
    if (t < a.nranks && t != a.me) {
        uint64_t *header = push_line(a.lines[a.me] + shift, t, blockIdx.x);
        uint64_t c0, c1, s0, s1;
        bool told = false;
        for (unsigned spins = 1;; spins++) {
            ll_load(header, &c0, &c1);
            ll_load(header + 2, &s0, &s1);
            if (ll_holds(c0, c1, flag) && ll_holds(s0, s1, flag)) {
                ll_store(header, 0, 0, 0);
                ll_store(header + 2, 0, 0, 0);
                break;
            }
            if ((spins & 1023) != 0) continue;
            if (*a.abort || *(volatile int *)&stop) {
                stop = 1;
                break;
            }
            // A peer whose call launched fewer blocks never writes the
            // headers of this rank's further blocks; block 0, which every
            // call has, records the difference, and they end on it as if
            // they had found it (no host step needed: a started call
            // nobody tests yet must end too).
            if (blockIdx.x > 0 && load_volatile(&a.differs[0]) == seq) {
                told = true;
                break;
            }
        }
        uint64_t count = (uint32_t)c0 | (uint64_t)(uint32_t)c1 << 32, sig = (uint32_t)s0 | (uint64_t)(uint32_t)s1 << 32;
        if (told) {
            differs = 1;
        } else if (!stop && (count != a.count || sig != a.sig) && atomicCAS(&differs, 0, 1) == 0) {
            volatile uint64_t *record = a.differs + 4 * blockIdx.x;  // one peer per block, one writer
            record[1] = (uint64_t)t;
            record[2] = count;
            record[3] = sig;
            __threadfence_system();  // the host may read the record while other blocks still wait
            record[0] = seq;
        }
    }
    __syncthreads();
    PUSH_STAMP(a, 2);
    if (stop) return false;
    if (!differs) {
        for (size_t i = off + t; i < off + len && !*(volatile int *)&stop; i += blockDim.x) {
            uint64_t x[HAR_DEV_MAX_RANKS][2];
            unsigned missing = ((1u << a.nranks) - 1) & ~(1u << a.me);
            for (unsigned spins = 1; missing; spins++) {
                // Every missing peer's line is loaded before any is looked at: one round trip, not one per peer.
#pragma unroll
                for (int r = 0; r < HAR_DEV_MAX_RANKS; r++)
                    if (missing >> r & 1) ll_load(push_data_line(a, shift, r, i), &x[r][0], &x[r][1]);
#pragma unroll
                for (int r = 0; r < HAR_DEV_MAX_RANKS; r++)
                    if ((missing >> r & 1) && ll_holds(x[r][0], x[r][1], flag)) missing &= ~(1u << r);
                if (missing && (spins & 1023) == 0 && (*a.abort || *(volatile int *)&stop)) {
                    stop = 1;
                    break;
                }
            }
            if (missing) break;
            T acc[E];
#pragma unroll
            for (int r = 0; r < HAR_DEV_MAX_RANKS; r++) {
                if (r >= a.nranks) break;
                uint32_t w[2];
                if (r == a.me) ll_payload<T>(a.in, a.n, i, w);
                else w[0] = (uint32_t)x[r][0], w[1] = (uint32_t)x[r][1];
                T e[E];
                ll_elements<T>(w, e);
#pragma unroll
                for (int k = 0; k < E; k++) acc[k] = r == 0 ? e[k] : apply<T, OP>(acc[k], e[k]);
            }
#pragma unroll
            for (int k = 0; k < E; k++)
                if (i * E + k < a.n) ((T *)a.out)[i * E + k] = acc[k];
#pragma unroll
            for (int r = 0; r < HAR_DEV_MAX_RANKS; r++)
                if (r < a.nranks && r != a.me) ll_store(push_data_line(a, shift, r, i), 0, 0, 0);
        }
    }
    __syncthreads();
    PUSH_STAMP(a, 3);
    if (stop) return false;
    if (threadIdx.x == 0) {
        __threadfence_system();  // the output, and any record of a difference, before the host sees done
        *(volatile uint64_t *)&a.done[blockIdx.x] = seq;
        if (a.done_dev) store_relaxed_sys(&a.done_dev[blockIdx.x], seq);
    }
    return true;
}

template <typename T, int OP> __global__ void __launch_bounds__(HAR_DEV_THREADS) push(const har_push_args_t a)
{
#if __CUDA_ARCH__ >= 900
    // Launched early (har_engine_dev_push): the work before it on the
    // stream may still run; this waits for its end and its memory. A no-op
    // when launched plainly.
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    if (!a.counter) {
        push_call<T, OP>(a, a.seq, 0);
        return;
    }
    // A replayed call: its number from the counter, which the kernel before
    // it on the stream (the graph's order) left complete.
    const uint64_t seq = *(volatile uint64_t *)&a.counter[0] + 1;
    if (!push_call<T, OP>(a, seq, (seq & 1) * a.parity_bytes)) return;
    __syncthreads();  // every thread of the block is done with the call
    if (threadIdx.x == 0 &&
        atomicAdd((unsigned long long *)&a.counter[1], 1ull) == (unsigned long long)gridDim.x - 1) {
        a.counter[1] = 0;
        *(volatile uint64_t *)&a.counter[0] = seq;
    }
}

__global__ void probe(const uint4 *peer, uint4 *out) { *out = __ldcv(peer); }  // not from any cache

// acc[i] = acc[i] op in[i]: a block the ring received, folded in where it is.
template <typename T, int OP> __global__ void fold(T *acc, const T *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc[i] = apply<T, OP>(acc[i], in[i]);
}

template <typename T, int OP> int fold_one(void *acc, const void *in, size_t n, cudaStream_t s)
{
    int blocks = (int)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024);
    fold<T, OP><<<blocks > 0 ? blocks : 1, 256, 0, s>>>((T *)acc, (const T *)in, n);
    return (int)cudaGetLastError();
}

template <typename T> int fold_type(int op, void *acc, const void *in, size_t n, cudaStream_t s)
{
    switch (op) {
    case HAR_OP_SUM: return fold_one<T, HAR_OP_SUM>(acc, in, n, s);
    case HAR_OP_PROD: return fold_one<T, HAR_OP_PROD>(acc, in, n, s);
    case HAR_OP_MIN: return fold_one<T, HAR_OP_MIN>(acc, in, n, s);
    case HAR_OP_MAX: return fold_one<T, HAR_OP_MAX>(acc, in, n, s);
    }
    if constexpr (std::is_integral<T>::value) {
        switch (op) {
        case HAR_OP_BAND: return fold_one<T, HAR_OP_BAND>(acc, in, n, s);
        case HAR_OP_BOR: return fold_one<T, HAR_OP_BOR>(acc, in, n, s);
        case HAR_OP_BXOR: return fold_one<T, HAR_OP_BXOR>(acc, in, n, s);
        case HAR_OP_LAND: return fold_one<T, HAR_OP_LAND>(acc, in, n, s);
        case HAR_OP_LOR: return fold_one<T, HAR_OP_LOR>(acc, in, n, s);
        case HAR_OP_LXOR: return fold_one<T, HAR_OP_LXOR>(acc, in, n, s);
        }
    }
    return (int)cudaErrorInvalidValue;
}

template <typename T, int OP> int launch_one(const har_engine_dev_args_t *a, int blocks, cudaStream_t s, bool)
{
    allreduce<T, OP><<<blocks, HAR_DEV_THREADS, 0, s>>>(*a);
    return (int)cudaGetLastError();
}

template <typename T, int OP> int launch_one(const har_push_args_t *a, int blocks, cudaStream_t s, bool early)
{
    if (!early) {
        push<T, OP><<<blocks, HAR_DEV_THREADS, 0, s>>>(*a);
        return (int)cudaGetLastError();
    }
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(HAR_DEV_THREADS);
    cfg.stream = s;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return (int)cudaLaunchKernelEx(&cfg, push<T, OP>, *a);
}

template <typename T, typename A> int launch_int(const A *a, int blocks, cudaStream_t s, bool early)
{
    switch (a->op) {
    case HAR_OP_SUM: return launch_one<T, HAR_OP_SUM>(a, blocks, s, early);
    case HAR_OP_PROD: return launch_one<T, HAR_OP_PROD>(a, blocks, s, early);
    case HAR_OP_MIN: return launch_one<T, HAR_OP_MIN>(a, blocks, s, early);
    case HAR_OP_MAX: return launch_one<T, HAR_OP_MAX>(a, blocks, s, early);
    case HAR_OP_BAND: return launch_one<T, HAR_OP_BAND>(a, blocks, s, early);
    case HAR_OP_BOR: return launch_one<T, HAR_OP_BOR>(a, blocks, s, early);
    case HAR_OP_BXOR: return launch_one<T, HAR_OP_BXOR>(a, blocks, s, early);
    case HAR_OP_LAND: return launch_one<T, HAR_OP_LAND>(a, blocks, s, early);
    case HAR_OP_LOR: return launch_one<T, HAR_OP_LOR>(a, blocks, s, early);
    case HAR_OP_LXOR: return launch_one<T, HAR_OP_LXOR>(a, blocks, s, early);
    }
    return (int)cudaErrorInvalidValue;
}

template <typename T, typename A> int launch_float(const A *a, int blocks, cudaStream_t s, bool early)
{
    switch (a->op) {
    case HAR_OP_SUM: return launch_one<T, HAR_OP_SUM>(a, blocks, s, early);
    case HAR_OP_PROD: return launch_one<T, HAR_OP_PROD>(a, blocks, s, early);
    case HAR_OP_MIN: return launch_one<T, HAR_OP_MIN>(a, blocks, s, early);
    case HAR_OP_MAX: return launch_one<T, HAR_OP_MAX>(a, blocks, s, early);
    }
    return (int)cudaErrorInvalidValue;
}

// Blocks of one kernel that can be resident on one multiprocessor at once:
// the least over the instantiations listed (-1 if the runtime cannot say).
template <typename T, int... OPS> int fewest_resident()
{
    const void *kernels[] = {(const void *)allreduce<T, OPS>..., (const void *)push<T, OPS>...};
    int least = 1 << 30;
    for (const void *k : kernels) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, HAR_DEV_THREADS, 0) != cudaSuccess) return -1;
        least = n < least ? n : least;
    }
    return least;
}

template <typename T> int fewest_int()
{
    return fewest_resident<T, HAR_OP_SUM, HAR_OP_PROD, HAR_OP_MIN, HAR_OP_MAX, HAR_OP_BAND, HAR_OP_BOR, HAR_OP_BXOR,
                           HAR_OP_LAND, HAR_OP_LOR, HAR_OP_LXOR>();
}

template <typename T> int fewest_float() { return fewest_resident<T, HAR_OP_SUM, HAR_OP_PROD, HAR_OP_MIN, HAR_OP_MAX>(); }

}  // namespace

// tests/gpu/latency_probe.cu includes this file for its kernels alone.
#ifndef HAR_KERNELS_ONLY
extern "C" int har_engine_dev_blocks_per_sm(void)
{
    int per[] = {fewest_float<float>(), fewest_float<double>(), fewest_int<int32_t>(), fewest_int<uint32_t>(),
                 fewest_int<int64_t>(), fewest_int<uint64_t>()};
    int least = 1 << 30;
    for (int n : per) {
        if (n < 0) {
            cudaGetLastError();
            return -1;
        }
        least = n < least ? n : least;
    }
    return least;
}

extern "C" int har_engine_dev_blocks(size_t bytes, int max_blocks)
{
    size_t blocks = bytes / (32 << 10);  // 32 KiB per block before adding more
    return blocks < 1 ? 1 : blocks > (size_t)max_blocks ? max_blocks : (int)blocks;
}

// Either kernel family, by its arguments' type.
template <typename A> int launch_any(const A *a, int blocks, void *stream, bool early = false)
{
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->dtype) {
    case HAR_DT_F32: return launch_float<float>(a, blocks, s, early);
    case HAR_DT_F64: return launch_float<double>(a, blocks, s, early);
    case HAR_DT_I32: return launch_int<int32_t>(a, blocks, s, early);
    case HAR_DT_U32: return launch_int<uint32_t>(a, blocks, s, early);
    case HAR_DT_I64: return launch_int<int64_t>(a, blocks, s, early);
    case HAR_DT_U64: return launch_int<uint64_t>(a, blocks, s, early);
    }
    return (int)cudaErrorInvalidValue;
}

extern "C" int har_engine_dev_launch(const har_engine_dev_args_t *a, int blocks, void *stream)
{
    return launch_any(a, blocks, stream);
}

// Programmatic stream serialization: compute capability 9.0 on (the
// current GPU's, asked once per GPU).
static bool launches_early()
{
    static signed char known[64];  // 0 not asked, 1 yes, -1 no
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
    if (!known[dev])
        known[dev] = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9
                         ? 1 : -1;
    return known[dev] > 0;
}

extern "C" int har_engine_dev_push(const har_push_args_t *a, int blocks, void *stream, int early)
{
    return launch_any(a, blocks, stream, early && launches_early());
}

extern "C" int har_engine_dev_fold(void *acc, const void *in, size_t n, int dtype, int op, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case HAR_DT_F32: return fold_type<float>(op, acc, in, n, s);
    case HAR_DT_F64: return fold_type<double>(op, acc, in, n, s);
    case HAR_DT_I32: return fold_type<int32_t>(op, acc, in, n, s);
    case HAR_DT_U32: return fold_type<uint32_t>(op, acc, in, n, s);
    case HAR_DT_I64: return fold_type<int64_t>(op, acc, in, n, s);
    case HAR_DT_U64: return fold_type<uint64_t>(op, acc, in, n, s);
    }
    return (int)cudaErrorInvalidValue;
}

extern "C" int har_engine_dev_probe(const void *peer, void *out, void *stream)
{
    probe<<<1, 1, 0, (cudaStream_t)stream>>>((const uint4 *)peer, (uint4 *)out);
    cudaError_t e = cudaGetLastError();
    return (int)(e != cudaSuccess ? e : cudaStreamSynchronize((cudaStream_t)stream));
}

__global__ void wait_push(const uint64_t *done_dev, int blocks, uint64_t after, volatile int *abort)
{
    for (int b = 0; b < blocks; b++)
        for (unsigned spins = 1; load_relaxed_sys(&done_dev[b]) < after; spins++)
            if ((spins & 1023) == 0 && *abort) return;
    acquire_fence_sys();
}

extern "C" int har_engine_dev_wait_push(const uint64_t *done_dev, int blocks, uint64_t after, volatile int *abort,
                                        void *stream)
{
    wait_push<<<1, 1, 0, (cudaStream_t)stream>>>(done_dev, blocks, after, abort);
    return (int)cudaGetLastError();
}

/* Does nothing: the launch floor that har-bench times beside har. */
__global__ void empty_kernel() {}

extern "C" int har_engine_dev_empty(void *stream)
{
    empty_kernel<<<1, 1, 0, (cudaStream_t)stream>>>();
    return (int)cudaGetLastError();
}
#endif
