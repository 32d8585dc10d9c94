/* The node segment on host shared memory, and the synchronisation on it.
 * MPI-free, so that tests can drive it from forked processes. */
#ifndef HAR_SEGMENT_H
#define HAR_SEGMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HAR_LINE 128  /* one flag line per writer; slots start on this boundary */

/* What a rank says of its call at the call's first synchronisation (the
 * arrival), so that the node agrees without an MPI call. */
enum {
    HAR_ARRIVE_LOADED = 1,  /* its input of the call's first chunk is in its host slot already */
    HAR_ARRIVE_CTX = 2,     /* it has a CUDA context for its buffers' GPU */
    HAR_ARRIVE_SAME = 4,    /* its buffers are on the GPU its device engines use (or none is set up) */
};
typedef struct {
    uint32_t flags;
    int32_t dev;            /* ordinal + 1 of the GPU holding both buffers; 0: not both on one GPU */
    uint64_t call;          /* the call's number on this communicator */
} har_arrival_t;

/* Per-rank control line, written only by its owner (except `dead`, which the
 * first rank to find the owner gone sets). An arrival record is written
 * before the release that ends the call's first step and read after the
 * acquire that waits for it; two, by call parity, since a rank can be one
 * call ahead of a peer that has not read its record yet. */
typedef struct {
    _Atomic uint64_t epoch;   /* steps this rank has finished; only grows */
    _Atomic uint32_t dead;
    uint32_t unused;
    har_arrival_t arrival[2];
} har_ctl_t;

typedef struct {
    uint64_t magic;
    uint32_t nranks;
    _Atomic uint32_t failed;  /* some rank gave up: everyone stops waiting */
    uint64_t slot_bytes;
    /* The first call from which every call starts with an arrival step:
     * set (once) by the first rank that finds a CUDA context in its process,
     * to its call number + 1, so that every rank reads it before that call. */
    _Atomic uint64_t cuda_from_call;
} har_seg_hdr_t;

typedef struct {
    char *base;
    size_t size, slot_bytes, ctl_stride;
    int fd;                   /* kept open: it carries this rank's liveness lock */
    int nranks, me;
    har_seg_hdr_t *hdr;
    char *slots;
    uint64_t my_epoch;        /* local copy of ctl(me)->epoch */
} har_seg_t;

/* Creates and sizes the named segment (pages reserved now, so that a small
 * /dev/shm fails here and not later with SIGBUS). 0 or -1 (logged). */
int har_seg_create(const char *name, int nranks, size_t slot_bytes);
/* Maps it as rank `me` and takes this rank's liveness lock: a write lock on
 * byte `me` of the segment file, an open-file-description lock, so it belongs
 * to the process (not to the thread that attached) and the kernel drops it
 * when the process dies, in any PID namespace. A rank that has not attached
 * yet looks dead to a waiter: wait only on ranks known to have attached (the
 * set-up's collective after attaching guarantees it). */
int har_seg_attach(har_seg_t *seg, const char *name, int me);
void har_seg_unlink(const char *name);
void har_seg_detach(har_seg_t *seg);
size_t har_seg_bytes(int nranks, size_t slot_bytes);

static inline har_ctl_t *har_seg_ctl(const har_seg_t *seg, int rank)
{
    return (har_ctl_t *)(seg->base + HAR_LINE + (size_t)rank * seg->ctl_stride);
}
/* Rank's slot of the given parity (two per rank, used alternately). */
static inline char *har_seg_slot(const har_seg_t *seg, int rank, unsigned parity)
{
    return seg->slots + ((size_t)rank * 2 + (parity & 1)) * seg->slot_bytes;
}

/* What a wait reports when it fails. */
typedef struct {
    const char *step;         /* "input", "shard", ... */
    int comm_rank, node;
    double timeout;           /* seconds; 0 = none */
} har_wait_ctx_t;

typedef enum { HAR_WAIT_OK = 0, HAR_WAIT_DEAD, HAR_WAIT_TIMEOUT, HAR_WAIT_FAILED } har_wait_rc_t;

/* Finishes one step: release, so that peers that see the new epoch also see
 * every write this rank made before. Returns the new epoch. */
uint64_t har_seg_signal(har_seg_t *seg);
/* Waits until `peer` has finished step `epoch` (acquire). */
har_wait_rc_t har_seg_wait(har_seg_t *seg, int peer, uint64_t epoch, const har_wait_ctx_t *ctx);
/* Waits for every rank of the segment. */
har_wait_rc_t har_seg_wait_all(har_seg_t *seg, uint64_t epoch, const har_wait_ctx_t *ctx);
/* While something else waits (a GPU stream): the same checks as a wait's
 * slow path, on every peer, with the time-out counted from `started`
 * (har_seg_now()). Logs and marks the segment failed on trouble. */
har_wait_rc_t har_seg_check_peers(har_seg_t *seg, double started, const har_wait_ctx_t *ctx);
double har_seg_now(void);
/* Tells every peer to stop waiting: this rank will not take part any more. */
void har_seg_fail(har_seg_t *seg);
#ifdef HAR_TEST_HOOKS
/* Steps signalled by this process since it started (tests count them). */
unsigned long long har_seg_steps(void);
#endif

#endif
