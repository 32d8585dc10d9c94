/* The node segment on host shared memory, and the synchronisation on it.
 * MPI-free, so that tests can drive it from forked processes.
 *
 * The segment is anonymous memory (memfd_create): it never has a name, so
 * nothing of it can outlive its last user, whatever the moment of death.
 * Local rank 0 makes it and passes the file descriptor to its peers
 * (node/share.c). Where that cannot be done, a named segment in /dev/shm is
 * the fallback: its creator holds its liveness lock from the moment the
 * name exists, the name goes as soon as every rank has mapped it, and a
 * named segment whose locks nobody holds is stale (har_node_seg_clean). */
#ifndef HAR_SEGMENT_H
#define HAR_SEGMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

#define HAR_LINE 128  /* slots start on this boundary; each writer owns whole lines */

/* What a rank says of its call at the call's first synchronisation (the
 * arrival), so that the node agrees without an MPI call, and so that ranks
 * whose arguments differ are caught before any data moves. */
enum {
    HAR_ARRIVE_LOADED = 1,  /* its input of the call's first chunk is in its host slot already */
    HAR_ARRIVE_CTX = 2,     /* it has a CUDA context for its buffers' GPU */
    HAR_ARRIVE_SAME = 4,    /* its buffers are on the GPU its device engines use (or none is set up) */
    HAR_ARRIVE_AHEAD = 8,   /* it went ahead of the arrival without waiting (comm/call.c) */
    /* On a communicator not set up for device buffers (comm/call.c):
     * this process made a non-blocking device call that the MPI served
     * for want of that set-up; it has a current CUDA context. */
    HAR_ARRIVE_WANTS_DEVICE = 16,
    HAR_ARRIVE_CURRENT_CTX = 32,
    /* Another call of this process was in progress when this one began
     * (threads): the node keeps it off the kernels (comm/call.c). */
    HAR_ARRIVE_BESIDE = 64,
};
/* Why a rank's buffers cannot be used (every rank learns it at the arrival,
 * so that the call fails everywhere instead of leaving the others waiting). */
typedef enum {
    HAR_BUFFERS_OK = 0,
    HAR_BUFFER_NULL_SEND,
    HAR_BUFFER_NULL_RECV,
    HAR_BUFFERS_SAME,       /* the same address twice, not MPI_IN_PLACE */
    HAR_BUFFERS_OVERLAP,
} har_buffers_t;
typedef struct {
    uint64_t count;
    uint32_t call;          /* the call's number on this communicator (low bits) */
    uint16_t type;          /* har_reduce_t's type_code and dev_op */
    int8_t op;
    uint8_t flags;
    int32_t dev;            /* ordinal + 1 of the GPU holding both buffers; 0: not both on one GPU */
    uint32_t bad;           /* har_buffers_t */
} har_arrival_t;

/* "its receive buffer is null", for messages. */
static inline const char *har_node_buffers_text(uint32_t bad)
{
    switch (bad) {
    case HAR_BUFFER_NULL_SEND: return "its send buffer is null";
    case HAR_BUFFER_NULL_RECV: return "its receive buffer is null";
    case HAR_BUFFERS_SAME: return "its send and receive buffers are the same (not MPI_IN_PLACE)";
    case HAR_BUFFERS_OVERLAP: return "its send and receive buffers overlap";
    default: return "its buffers are fine";
    }
}

/* Do two ranks' calls differ, and as what? HAR_OK (the same call),
 * HAR_ERR_OP (the same count and datatype, another op) or HAR_ERR_TRUNCATE
 * (another count, datatype or call): the classes the MPIs give. */
static inline har_status_t har_node_arrival_differs(const har_arrival_t *a, const har_arrival_t *b)
{
    if (a->count != b->count || a->type != b->type) return HAR_ERR_TRUNCATE;
    return a->op != b->op ? HAR_ERR_OP : a->call != b->call ? HAR_ERR_TRUNCATE : HAR_OK;
}

/* Why a rank gave up, written by the first rank that did (before it marks
 * the segment failed), so that every local rank can say who and why. */
typedef struct {
    int32_t status;         /* har_status_t */
    int32_t culprit;        /* rank in the communicator of the dead, late or mismatched rank; -1: none */
    int32_t culprit_world;  /* its rank in MPI_COMM_WORLD; -1: unknown */
    int32_t reporter;       /* rank in the communicator of the rank that found it */
    uint64_t call;
    char step[16];
    char host[48];          /* the culprit's host */
    char detail[192];       /* what the rank that found it knew more (core/log.h's note) */
} har_failure_t;

/* Per-rank control line, written only by its owner (except `dead`, which the
 * first rank to find the owner gone sets; `attached` tells it when the
 * owner's liveness lock can be trusted). An arrival record is written
 * before the release that ends the call's first step and read after the
 * acquire that waits for it; two, by call parity, since a rank can be one
 * call ahead of a peer that has not read its record yet. The epoch and both
 * records fill one 64-byte cache line: a waiter that has read the epoch
 * reads the record at no further cost. */
typedef struct {
    _Atomic uint64_t epoch;   /* steps this rank has finished; only grows */
    _Atomic uint32_t dead;
    _Atomic uint32_t attached;  /* its liveness lock is taken */
    har_arrival_t arrival[2];
    har_failure_t failure;    /* valid once hdr->failed names this rank */
    /* In a long wait for a rank on another node: a local peer's time-out
     * leaves the blame to this rank's own, which names that rank. */
    _Atomic uint32_t waiting_across;
    /* Set before this rank lets go of the segment in order (MPI_Comm_free,
     * MPI_Finalize), so that a peer still waiting for it says it left, not
     * that it died: 1, or 2 when `failure` holds the last failure this
     * process saw on another communicator (why it may have left early). */
    _Atomic uint32_t left;
    /* Stored before `left`: how many calls it made on the communicator
     * (har_node_seg_left_after). */
    _Atomic uint64_t calls_made;
} har_ctl_t;
_Static_assert(offsetof(har_ctl_t, failure) == 64, "epoch and arrival records share one cache line");
/* No MPI exchange is waited for (har_node_seg_poll_peers, har_node_seg_left_after). */
#define HAR_SEG_NO_EXCHANGE UINT64_MAX

typedef struct {
    uint64_t magic;
    uint32_t nranks;
    /* 0, or 1 + the local rank whose control line says why it gave up: every
     * waiter stops. Set once (compare and swap). */
    _Atomic uint32_t failed;
    uint64_t slot_bytes;
    /* The first call from which every call starts with an arrival step:
     * set (once) by the first rank that finds a CUDA context in its process,
     * to its call number + 1, so that every rank reads it before that call. */
    _Atomic uint64_t cuda_from_call;
} har_node_seg_hdr_t;

typedef struct {
    char *base;
    size_t size, slot_bytes, ctl_stride;
    /* Called from a long wait's slow path: nonzero stops the wait with
     * HAR_ERR_PEER_FAILED (a failure heard from elsewhere). May be NULL. */
    int (*heard)(void *ctx);
    void *heard_ctx;
    int fd;                   /* kept open: it carries this rank's liveness lock */
    int nranks, me;
    har_node_seg_hdr_t *hdr;
    char *sums;               /* HAR_CHECK's checksums, sums_stride per rank */
    size_t sums_stride;
    char *slots;
    uint64_t my_epoch;        /* local copy of ctl(me)->epoch */
} har_node_seg_t;

/* Makes an anonymous segment for nranks, its pages reserved now (a small
 * /dev/shm fails here, not later with SIGBUS). Its fd, or -1 (logged). */
int har_node_seg_create(int nranks, size_t slot_bytes);
/* The named fallback: creates /dev/shm`name` and attaches to it as rank 0
 * in one go, so that its liveness lock is held from the start. */
har_status_t har_node_seg_create_named(har_node_seg_t *seg, const char *name, int nranks, size_t slot_bytes);
/* Maps the segment open on `fd` (taken over, closed) as rank `me` and
 * takes this rank's liveness lock: a write lock on byte `me` of the segment
 * file, an open-file-description lock, on a description of its own (the
 * file reopened), so it belongs to the process (not to the thread that
 * attached) and the kernel drops it when the process dies, in any PID
 * namespace. Until a rank has attached, its missing lock says nothing:
 * the checks here skip it (the node's pid checks cover that time). */
har_status_t har_node_seg_attach(har_node_seg_t *seg, int fd, int me);
/* Opens a named segment's fd (the fallback's peers), or -1 (logged). */
int har_node_seg_open_named(const char *name);
void har_node_seg_unlink(const char *name);
void har_node_seg_detach(har_node_seg_t *seg);
/* Detaches in order after `calls` calls: peers that still wait for this
 * rank in a later call learn that it left (HAR_ERR_PEER_LEFT) and, if
 * `seen` is not NULL, what it had seen fail elsewhere. */
void har_node_seg_leave(har_node_seg_t *seg, uint64_t calls, const har_failure_t *seen);
size_t har_node_seg_bytes(int nranks, size_t slot_bytes);
/* Named segments in /dev/shm whose liveness locks nobody holds (left by
 * processes that died between creating and unlinking): how many there
 * are, each removed, and said at `level`, where `remove`. Those of live
 * jobs are not counted. */
int har_node_seg_clean(int remove, int level);

static inline har_ctl_t *har_node_seg_ctl(const har_node_seg_t *seg, int rank)
{
    return (har_ctl_t *)(seg->base + HAR_LINE + (size_t)rank * seg->ctl_stride);
}
/* Did `peer` leave in order after making call `call` (numbered from 0)?
 * Then a rank waiting in that call for an MPI exchange is not held up by
 * it: the peer completed its side, and the MPI delivers what it sent
 * before it freed the communicator or finalized. Only for MPI exchanges:
 * kernels or segment steps of a peer that left with calls open may never
 * run. */
static inline int har_node_seg_left_after(const har_node_seg_t *seg, int peer, uint64_t call)
{
    const har_ctl_t *ctl = har_node_seg_ctl(seg, peer);
    return call != HAR_SEG_NO_EXCHANGE && atomic_load_explicit(&ctl->left, memory_order_acquire) &&
           atomic_load_explicit(&ctl->calls_made, memory_order_relaxed) > call;  /* stored before `left` */
}
/* The checksums rank publishes for its slot of this parity: one per shard,
 * then one of its reduced shard (HAR_CHECK). Written only by that rank. */
static inline uint64_t *har_node_seg_sums(const har_node_seg_t *seg, int rank, unsigned parity)
{
    return (uint64_t *)(seg->sums + (size_t)rank * seg->sums_stride) + (size_t)(parity & 1) * ((size_t)seg->nranks + 1);
}
/* Rank's slot of the given parity (two per rank, used alternately). */
static inline char *har_node_seg_slot(const har_node_seg_t *seg, int rank, unsigned parity)
{
    return seg->slots + ((size_t)rank * 2 + (parity & 1)) * seg->slot_bytes;
}

/* Finishes one step: release, so that peers that see the new epoch also see
 * every write this rank made before. Returns the new epoch. */
uint64_t har_node_seg_signal(har_node_seg_t *seg);
/* Waits until `peer` has finished step `epoch` (acquire). HAR_OK, or why it
 * stopped: HAR_ERR_PEER_DEAD (its lock is gone), HAR_ERR_PEER_LEFT (gone
 * after har_node_seg_leave), HAR_ERR_TIMEOUT (past
 * `timeout` seconds; 0: none), HAR_ERR_PEER_FAILED (some local rank gave up:
 * har_node_seg_failure says who and why); *culprit: the local rank at fault, or
 * -1. Nothing is logged here: the caller knows the names. */
har_status_t har_node_seg_wait(har_node_seg_t *seg, int peer, uint64_t epoch, double timeout, int *culprit);
/* Waits for every rank of the segment. */
har_status_t har_node_seg_wait_all(har_node_seg_t *seg, uint64_t epoch, double timeout, int *culprit);
/* While something else waits (a GPU stream, an MPI request): the same
 * checks as a wait's slow path, on every peer but one that left after
 * making call `exchange` (HAR_SEG_NO_EXCHANGE: none), with the time-out
 * counted from `started` (har_node_seg_now()); without `listen`, the notices
 * from other nodes are not tested (an MPI call: for a thread of har's
 * own). */
har_status_t har_node_seg_poll_peers(har_node_seg_t *seg, uint64_t exchange, double started, double timeout, int listen,
                                     int *culprit);
double har_node_seg_now(void);
/* Records why this rank gives up and tells every local peer to stop
 * waiting. The first report wins; returns 1 if it was this one. */
int har_node_seg_fail(har_node_seg_t *seg, const har_failure_t *why);
/* The first report, or NULL while the segment has not failed. */
const har_failure_t *har_node_seg_failure(const har_node_seg_t *seg);

#ifdef HAR_TEST_HOOKS
/* Steps signalled by this process since it started (tests count them). */
unsigned long long har_node_seg_steps(void);
#endif

#endif
