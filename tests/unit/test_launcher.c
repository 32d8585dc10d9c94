/* The launch thread (core/launcher.c), without a GPU: pieces handed off
 * and pieces run by the caller, with gaps around the thread's idle time
 * so that it falls asleep and wakes throughout, run exactly once, in the
 * order of the calls, never two at once; a drain returns only once every
 * piece handed off has run; stopping runs what was handed off first, and
 * the pieces after run in the caller's thread. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include "core/config.h"
#include "core/launcher.h"
#include "unit.h"

#define PIECES 200000

static unsigned char ran[PIECES];
static _Atomic long next_piece;   /* the piece that must run next */
static _Atomic int running;       /* a piece is running now */
static unsigned long out_of_order, overlapping;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void spin_for(double s)
{
    for (double t0 = now_s(); now_s() - t0 < s;) {
    }
}

static void nap(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

static void piece(void *arg)
{
    long i = (long)arg;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&running, &idle, 1)) overlapping++;
    if (atomic_load(&next_piece) != i) out_of_order++;
    ran[i]++;
    atomic_store(&next_piece, i + 1);
    atomic_store(&running, 0);
}

/* Gaps: none mostly, some short, some around the idle time (200 us), a
 * few long enough that the thread sleeps; calls that may not be handed
 * off between. */
static void test_order(void)
{
    unsigned long handed = 0, here_allowed = 0, here_refused = 0, drains = 0;
    for (long i = 0; i < PIECES; i++) {
        uint64_t r = rng() % 10000;
        if (r < 20) nap(0.002 + 1e-6 * (double)(rng() % 18000));
        else if (r < 200) spin_for(1e-6 * (double)(150 + rng() % 100));
        else if (r < 2000) spin_for(1e-6 * (double)(rng() % 20));
        int may = rng() % 10 != 0;
        if (har_launcher_run(piece, (void *)i, may)) handed++;
        else if (may) here_allowed++;
        else here_refused++;
        if (rng() % 1000 == 0) {
            har_launcher_drain();
            drains++;
            CHECK(atomic_load(&next_piece) == i + 1, "after a drain every piece to %ld ran (next %ld)", i,
                  (long)atomic_load(&next_piece));
        }
    }
    har_launcher_drain();
    unsigned long missing = 0, twice = 0;
    for (long i = 0; i < PIECES; i++) missing += ran[i] == 0, twice += ran[i] > 1;
    CHECK(missing == 0 && twice == 0, "every piece ran once: %lu never, %lu more than once", missing, twice);
    CHECK(out_of_order == 0, "in the order of the calls: %lu out of order", out_of_order);
    CHECK(overlapping == 0, "one at a time: %lu ran beside another", overlapping);
    CHECK(handed > 0, "some were handed off (%lu)", handed);
    CHECK(here_allowed > 0, "some found the thread asleep and ran here (%lu)", here_allowed);
    printf("test_launcher: %d pieces: %lu handed off, %lu run here with the thread asleep, %lu here by the caller's "
           "choice, %lu drains\n", PIECES, handed, here_allowed, here_refused, drains);
}

static _Atomic int slow_done;

static void slow_piece(void *arg)
{
    (void)arg;
    nap(0.02);
    atomic_store(&slow_done, 1);
}

static void noop(void *arg) { (void)arg; }

/* Hands a no-op off until the thread takes one (a refused call wakes it). */
static int thread_awake(void)
{
    for (int i = 0; i < 20000; i++) {
        if (har_launcher_run(noop, NULL, 1)) return 1;
        nap(1e-4);
    }
    return 0;
}

static void test_drain_and_stop(void)
{
    CHECK(thread_awake(), "the thread wakes after a call found it asleep");
    atomic_store(&slow_done, 0);
    CHECK(har_launcher_run(slow_piece, NULL, 1), "an awake thread takes the piece");
    har_launcher_drain();
    CHECK(atomic_load(&slow_done), "a drain returns only once the piece handed off has run");

    CHECK(thread_awake(), "awake again");
    atomic_store(&slow_done, 0);
    CHECK(har_launcher_run(slow_piece, NULL, 1), "handed off before the stop");
    har_launcher_stop();
    CHECK(atomic_load(&slow_done), "the stop runs what was handed off first");
    atomic_store(&slow_done, 0);
    CHECK(!har_launcher_run(slow_piece, NULL, 1) && atomic_load(&slow_done), "after the stop a piece runs here");
}

int main(void)
{
    setenv("HAR_LAUNCH_THREAD", "1", 1);
    har_config_load(0);
    rng_state = (uint64_t)time(NULL) | 1;
    printf("test_launcher: seed %llu\n", (unsigned long long)rng_state);
    CHECK(har_launcher_allowed(), "HAR_LAUNCH_THREAD=1 allows the thread");
    test_order();
    test_drain_and_stop();
    printf("test_launcher: %lu checks, %lu failed\n", checks, failures);
    return failures != 0;
}
