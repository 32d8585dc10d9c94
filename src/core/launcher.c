/* The launch thread (launcher.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include "core/config.h"
#include "core/launcher.h"
#include "core/log.h"

/* How long the thread spins for the next piece after its last one before
 * it sleeps: an application that posts a call every few tens of
 * microseconds (a loop of MPI_Iallreduce) finds it awake; one idle for
 * longer launches in its own thread (har_launcher_run). */
#define LAUNCHER_IDLE_NS 200000
/* Pieces handed off and not yet run: comm/call.c keeps at most two calls
 * in flight per communicator, and hands off only one communicator's. */
#define LAUNCHER_RING 8

static struct {
    pthread_t id;
    int made, failed;                    /* the caller's: made once, or could not be */
    double last_call;                    /* the caller's: when it last had a piece */
    struct { har_launch_fn_t fn; void *arg; } ring[LAUNCHER_RING];
    _Atomic uint64_t head;               /* pieces handed off (the caller writes) */
    _Atomic uint64_t tail;               /* pieces run (the thread writes) */
    _Atomic int asleep, stop;
    int roused;                          /* woken for the next piece (under the lock) */
    pthread_mutex_t lock;                /* for the sleep and the wake */
    pthread_cond_t wake;
} L = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* One look's wait while the thread spins: the processor's spin hint, which
 * leaves a hyperthread sibling (the application's thread, perhaps) its
 * share of the core. */
static inline void spin_hint(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int har_thread_create(pthread_t *id, void *(*main)(void *), void *arg)
{
    sigset_t all, was;
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    int rc = pthread_create(id, NULL, main, arg);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return rc;
}

/* Sleeps until a piece is handed off, a call that found it asleep wakes
 * it for the next one, or the thread is stopped. The
 * caller's check of `asleep` after it publishes a piece, and this check
 * of `head` after `asleep` is set, are both sequentially consistent: one
 * of the two sees the other, so a piece is never left while the thread
 * sleeps. */
static void sleep_until_handed(uint64_t ran)
{
    pthread_mutex_lock(&L.lock);
    atomic_store(&L.asleep, 1);
    while (atomic_load(&L.head) == ran && !atomic_load(&L.stop) && !L.roused) pthread_cond_wait(&L.wake, &L.lock);
    L.roused = 0;
    atomic_store(&L.asleep, 0);
    pthread_mutex_unlock(&L.lock);
}

static void *launcher_main(void *arg)
{
    (void)arg;
    uint64_t ran = atomic_load(&L.tail);
    double idle_from = now_s();
    for (unsigned looks = 1;; looks++) {
        if (atomic_load_explicit(&L.head, memory_order_acquire) != ran) {
            L.ring[ran % LAUNCHER_RING].fn(L.ring[ran % LAUNCHER_RING].arg);
            atomic_store_explicit(&L.tail, ++ran, memory_order_release);
            idle_from = now_s();
            continue;
        }
        if (atomic_load(&L.stop)) break;
        if (looks % 64) {
            /* A system call per look (sched_yield) slowed the other
             * threads of a 16-vCPU machine with 4 ranks: their launches
             * and syncs took 1.7 us more (DESIGN.md note 71). */
            spin_hint();
            continue;
        }
        if (now_s() - idle_from < LAUNCHER_IDLE_NS * 1e-9) {
            sched_yield();  /* now and then: a rank's threads may share a core */
            continue;
        }
        sleep_until_handed(ran);
        idle_from = now_s();
    }
    return NULL;
}

int har_launcher_allowed(void)
{
    static int known = -1;
    int allowed = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (allowed < 0) {
        const char *v = HAR_CFG(launch_thread).s;
        if (!strcmp(v, "auto")) {
            cpu_set_t cores;
            allowed = sched_getaffinity(0, sizeof cores, &cores) == 0 && CPU_COUNT(&cores) >= 2;
        } else {
            allowed = !strcmp(v, "1");
        }
        __atomic_store_n(&known, allowed, __ATOMIC_RELAXED);
    }
    return allowed;
}

/* The thread, made on first need; 0 where it cannot be. */
static int launcher_made(void)
{
    if (L.made) return 1;
    if (L.failed || !har_launcher_allowed()) return 0;
    int rc = har_thread_create(&L.id, launcher_main, NULL);
    if (rc != 0) {
        L.failed = 1;
        HAR_LOG(HAR_LOG_WARN, "no thread to launch started calls' kernels (%s): MPI_Iallreduce and MPI_Start "
                "launch them before they return", strerror(rc));
        return 0;
    }
    L.made = 1;
    HAR_LOG(HAR_LOG_DEBUG, "a thread of har's launches the kernels of started calls (HAR_LAUNCH_THREAD)");
    return 1;
}

void har_launcher_drain(void)
{
    uint64_t handed = atomic_load_explicit(&L.head, memory_order_relaxed);
    while (atomic_load_explicit(&L.tail, memory_order_acquire) != handed) sched_yield();
}

/* Wakes the thread (it sleeps only with nothing handed off). */
static void wake(void)
{
    pthread_mutex_lock(&L.lock);
    L.roused = 1;
    pthread_cond_signal(&L.wake);
    pthread_mutex_unlock(&L.lock);
}

int har_launcher_run(har_launch_fn_t fn, void *arg, int may_hand)
{
    if (may_hand && launcher_made() && !atomic_load(&L.stop)) {
        uint64_t handed = atomic_load_explicit(&L.head, memory_order_relaxed);
        double now = now_s(), since = now - L.last_call;
        L.last_call = now;
        if (atomic_load(&L.asleep)) {
            /* This piece would wait for the scheduler: it runs here. The
             * thread is woken for the next only where pieces come closer
             * together than its idle time, as in a loop of calls; one
             * that comes alone, as a training step's buckets a millisecond
             * apart do, would pay the wake (a system call) and find the
             * thread asleep again at the next. */
            if (since < LAUNCHER_IDLE_NS * 1e-9) wake();
        } else if (handed - atomic_load_explicit(&L.tail, memory_order_acquire) < LAUNCHER_RING) {
            L.ring[handed % LAUNCHER_RING].fn = fn;
            L.ring[handed % LAUNCHER_RING].arg = arg;
            atomic_store(&L.head, handed + 1);
            if (atomic_load(&L.asleep)) wake();  /* it went to sleep as the piece came */
            return 1;
        }
    }
    har_launcher_drain();
    fn(arg);
    return 0;
}

void har_launcher_stop(void)
{
    if (!L.made) return;
    atomic_store(&L.stop, 1);
    wake();
    pthread_join(L.id, NULL);  /* it runs what was handed off first */
    L.made = 0;
    L.failed = 1;  /* never made again */
}
