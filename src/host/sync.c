/* Steps, waits and liveness on the node segment.
 *
 * A step is finished by bumping this rank's epoch with a release store; a
 * waiter loads it with acquire. Waits spin briefly, then yield, then sleep:
 * ranks are often oversubscribed, and a spinning waiter would steal the core
 * of the peer it waits for. A late peer is normal; a dead one (its liveness
 * lock gone) or one past HAR_TIMEOUT ends the wait with an error.
 * No wait here runs while this rank has MPI requests outstanding: the ring
 * completes its requests (PMPI_Waitall) before the rank signals, so these
 * waits never need to drive MPI progress. */
#define _GNU_SOURCE  /* F_OFD_GETLK */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include "core/log.h"
#include "host/segment.h"

#define SPINS 2000
#define YIELDS 200

#ifdef HAR_TEST_HOOKS
static unsigned long long steps;
unsigned long long har_seg_steps(void) { return __atomic_load_n(&steps, __ATOMIC_RELAXED); }
#endif

uint64_t har_seg_signal(har_seg_t *seg)
{
#ifdef HAR_TEST_HOOKS
    __atomic_fetch_add(&steps, 1, __ATOMIC_RELAXED);
#endif
    atomic_store_explicit(&har_seg_ctl(seg, seg->me)->epoch, ++seg->my_epoch, memory_order_release);
    return seg->my_epoch;
}

void har_seg_fail(har_seg_t *seg) { atomic_store(&seg->hdr->failed, 1); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Is rank `peer` still attached? Its liveness lock is held exactly as long
 * as its process lives and keeps the segment. */
static int peer_alive(har_seg_t *seg, int peer)
{
    har_ctl_t *ctl = har_seg_ctl(seg, peer);
    if (atomic_load(&ctl->dead)) return 0;
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = peer, .l_len = 1};
    if (fcntl(seg->fd, F_OFD_GETLK, &lock) != 0) return 1;  /* cannot tell: assume alive */
    if (lock.l_type != F_UNLCK) return 1;
    atomic_store(&ctl->dead, 1);  /* for the other waiters */
    return 0;
}

har_wait_rc_t har_seg_wait(har_seg_t *seg, int peer, uint64_t epoch, const har_wait_ctx_t *ctx)
{
    har_ctl_t *ctl = har_seg_ctl(seg, peer);
    for (int i = 0; i < SPINS; i++)
        if (atomic_load_explicit(&ctl->epoch, memory_order_acquire) >= epoch) return HAR_WAIT_OK;
    double start = now();
    struct timespec nap = {0, 20000};
    for (unsigned long i = 0;; i++) {
        if (atomic_load_explicit(&ctl->epoch, memory_order_acquire) >= epoch) return HAR_WAIT_OK;
        if (i < YIELDS) { sched_yield(); continue; }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 1000000) nap.tv_nsec += nap.tv_nsec / 4;
        if (i % 16) continue;  /* the checks below are slower than a flag load */
        har_wait_rc_t rc = HAR_WAIT_OK;
        if (atomic_load(&seg->hdr->failed)) rc = HAR_WAIT_FAILED;
        else if (!peer_alive(seg, peer)) rc = HAR_WAIT_DEAD;
        else if (ctx->timeout > 0 && now() - start > ctx->timeout) rc = HAR_WAIT_TIMEOUT;
        if (rc == HAR_WAIT_OK) continue;
        /* It may have finished the step just before it left. */
        if (atomic_load_explicit(&ctl->epoch, memory_order_acquire) >= epoch) return HAR_WAIT_OK;
        static const char *const what[] = {"", "local peer %d died", "local peer %d did not arrive within HAR_TIMEOUT",
                                           "stopped waiting for local peer %d: a local rank reported a failure"};
        char msg[128];
        snprintf(msg, sizeof msg, what[rc], peer);
        har_log(HAR_LOG_ERROR, "rank %d (node %d): %s; step %s, epoch %llu", ctx->comm_rank, ctx->node, msg,
                ctx->step, (unsigned long long)epoch);
        har_seg_fail(seg);
        return rc;
    }
}

har_wait_rc_t har_seg_check_peers(har_seg_t *seg, double started, const har_wait_ctx_t *ctx)
{
    har_wait_rc_t rc = HAR_WAIT_OK;
    int peer = 0;
    if (atomic_load(&seg->hdr->failed)) rc = HAR_WAIT_FAILED;
    for (; rc == HAR_WAIT_OK && peer < seg->nranks; peer++)
        if (peer != seg->me && !peer_alive(seg, peer)) rc = HAR_WAIT_DEAD;
    if (rc == HAR_WAIT_OK && ctx->timeout > 0 && now() - started > ctx->timeout) rc = HAR_WAIT_TIMEOUT;
    if (rc == HAR_WAIT_OK) return rc;
    char msg[128];
    if (rc == HAR_WAIT_DEAD) snprintf(msg, sizeof msg, "local peer %d died", peer - 1);
    else snprintf(msg, sizeof msg, "%s", rc == HAR_WAIT_TIMEOUT ? "a local peer did not finish within HAR_TIMEOUT"
                                                                 : "a local rank reported a failure");
    har_log(HAR_LOG_ERROR, "rank %d (node %d): %s; step %s, epoch %llu", ctx->comm_rank, ctx->node, msg, ctx->step,
            (unsigned long long)seg->my_epoch);
    har_seg_fail(seg);
    return rc;
}

double har_seg_now(void) { return now(); }

har_wait_rc_t har_seg_wait_all(har_seg_t *seg, uint64_t epoch, const har_wait_ctx_t *ctx)
{
    for (int r = 0; r < seg->nranks; r++) {
        if (r == seg->me) continue;
        har_wait_rc_t rc = har_seg_wait(seg, r, epoch, ctx);
        if (rc != HAR_WAIT_OK) return rc;
    }
    return HAR_WAIT_OK;
}
