/* Steps, waits and liveness on the node segment (segment.h).
 *
 * A step is finished by bumping this rank's epoch with a release store; a
 * waiter loads it with acquire. Waits spin briefly, then yield, then sleep:
 * ranks are often oversubscribed, and a spinning waiter would steal the core
 * of the peer it waits for. A late peer is normal; a dead one (its liveness
 * lock gone), one past the time-out, or a failure another local rank
 * reported ends the wait. No wait here runs while this rank has data
 * requests outstanding (the inter-node step completes its requests before
 * the rank signals); the one request always posted, the receive of failure
 * notices from other nodes, is tested in the slow path through `heard`. */
#define _GNU_SOURCE  /* F_OFD_GETLK */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include "core/fiber.h"
#include "node/segment.h"

#define SPINS 2000
#define YIELDS 200

#ifdef HAR_TEST_HOOKS
static unsigned long long steps;
unsigned long long har_node_seg_steps(void) { return __atomic_load_n(&steps, __ATOMIC_RELAXED); }
#endif

uint64_t har_node_seg_signal(har_node_seg_t *seg)
{
#ifdef HAR_TEST_HOOKS
    __atomic_fetch_add(&steps, 1, __ATOMIC_RELAXED);
#endif
    atomic_store_explicit(&har_node_seg_ctl(seg, seg->me)->epoch, ++seg->my_epoch, memory_order_release);
    return seg->my_epoch;
}

int har_node_seg_fail(har_node_seg_t *seg, const har_failure_t *why)
{
    uint32_t none = 0;
    if (atomic_load(&seg->hdr->failed)) return 0;
    /* Our own control line: nobody else writes it, and the release of the
     * compare-and-swap publishes it. If another rank wins, ours is unread. */
    har_node_seg_ctl(seg, seg->me)->failure = *why;
    return atomic_compare_exchange_strong(&seg->hdr->failed, &none, (uint32_t)seg->me + 1);
}

const har_failure_t *har_node_seg_failure(const har_node_seg_t *seg)
{
    uint32_t who = atomic_load(&seg->hdr->failed);
    return who && who <= (uint32_t)seg->nranks ? &har_node_seg_ctl(seg, (int)who - 1)->failure : NULL;
}

double har_node_seg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Is rank `peer` still attached? HAR_OK while its liveness lock is held
 * (exactly as long as its process lives and keeps the segment); else
 * HAR_ERR_PEER_LEFT if it let go in order, HAR_ERR_PEER_DEAD if not. */
static har_status_t peer_state(har_node_seg_t *seg, int peer)
{
    har_ctl_t *ctl = har_node_seg_ctl(seg, peer);
    if (!atomic_load(&ctl->dead)) {
        if (!atomic_load(&ctl->attached)) return HAR_OK;  /* no lock to look at yet */
        struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = peer, .l_len = 1};
        if (fcntl(seg->fd, F_OFD_GETLK, &lock) != 0) return HAR_OK;  /* cannot tell: assume alive */
        if (lock.l_type != F_UNLCK) return HAR_OK;
        atomic_store(&ctl->dead, 1);  /* for the other waiters */
    }
    /* `left` is stored before the lock goes (har_node_seg_leave). */
    return atomic_load_explicit(&ctl->left, memory_order_acquire) ? HAR_ERR_PEER_LEFT : HAR_ERR_PEER_DEAD;
}

/* The slow path's checks on one peer (-1: none); `listen`: and the
 * notices from other nodes (an MPI call). */
static har_status_t check(har_node_seg_t *seg, int peer, double started, double timeout, int listen, int *culprit)
{
    *culprit = -1;
    if (atomic_load(&seg->hdr->failed) || (listen && seg->heard && seg->heard(seg->heard_ctx)))
        return HAR_ERR_PEER_FAILED;
    har_status_t gone = peer >= 0 ? peer_state(seg, peer) : HAR_OK;
    if (gone != HAR_OK) {
        *culprit = peer;
        return gone;
    }
    if (timeout > 0 && har_node_seg_now() - started > timeout) {
        if (peer >= 0 && atomic_load(&har_node_seg_ctl(seg, peer)->waiting_across)) return HAR_OK;
        *culprit = peer;
        return HAR_ERR_TIMEOUT;
    }
    return HAR_OK;
}

har_status_t har_node_seg_wait(har_node_seg_t *seg, int peer, uint64_t epoch, double timeout, int *culprit)
{
    har_ctl_t *ctl = har_node_seg_ctl(seg, peer);
    *culprit = -1;
    /* A fiber gives the thread back at once: it spins in its caller's
     * completion call, which the application may be polling. */
    int fiber = har_fiber_inside();
    for (int i = 0; i < (fiber ? 1 : SPINS); i++)
        if (atomic_load_explicit(&ctl->epoch, memory_order_acquire) >= epoch) return HAR_OK;
    double start = har_node_seg_now();
    struct timespec nap = {0, 20000};
    for (unsigned long i = 0;; i++) {
        if (atomic_load_explicit(&ctl->epoch, memory_order_acquire) >= epoch) return HAR_OK;
        if (i < YIELDS && !fiber) {
            har_fiber_pause(NULL);
            continue;
        }
        har_fiber_pause(fiber && i < HAR_FIBER_PASSES ? NULL : &nap);
        if (nap.tv_nsec < 1000000) nap.tv_nsec += nap.tv_nsec / 4;
        if (i % HAR_FIBER_PASSES || i == 0) continue;  /* the checks below are slower than a flag load */
        har_status_t st = check(seg, peer, start, timeout, 1, culprit);
        if (st == HAR_OK) continue;
        /* It may have finished the step just before it left. */
        if (atomic_load_explicit(&ctl->epoch, memory_order_acquire) >= epoch) return HAR_OK;
        return st;
    }
}

har_status_t har_node_seg_wait_all(har_node_seg_t *seg, uint64_t epoch, double timeout, int *culprit)
{
    for (int r = 0; r < seg->nranks; r++) {
        if (r == seg->me) continue;
        har_status_t st = har_node_seg_wait(seg, r, epoch, timeout, culprit);
        if (st != HAR_OK) return st;
    }
    return HAR_OK;
}

har_status_t har_node_seg_poll_peers(har_node_seg_t *seg, uint64_t exchange, double started, double timeout, int listen,
                                     int *culprit)
{
    har_status_t st = check(seg, -1, started, timeout, listen, culprit);
    for (int peer = 0; st == HAR_OK && peer < seg->nranks; peer++) {
        if (peer == seg->me || (st = peer_state(seg, peer)) == HAR_OK) continue;
        if (har_node_seg_left_after(seg, peer, exchange)) {
            st = HAR_OK;
            continue;
        }
        *culprit = peer;
    }
    return st;
}
