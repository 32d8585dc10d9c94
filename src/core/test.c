/* Test hooks (test.h). */
#include "core/test.h"
#ifdef HAR_TEST_HOOKS
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/config.h"
#include "core/log.h"

static int world_rank = -1;
static unsigned long passes;

void har_test_set_rank(int rank) { world_rank = rank; }

void har_test_point(const char *point)
{
    char where[32];
    int rank, used = 0;
    unsigned long nth = 1;
    double seconds;
    for (const char *s = HAR_CFG(test_stall).s;
         sscanf(s, "%d:%31[^:,]:%lf%n", &rank, where, &seconds, &used) == 3; s += used + (s[used] == ',')) {
        if (rank != world_rank || strcmp(where, point) != 0 || seconds <= 0) continue;
        struct timespec nap = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        nanosleep(&nap, NULL);
    }
    if (sscanf(HAR_CFG(test_kill).s, "%d:%31[^:]:%lu", &rank, where, &nth) < 2 || rank != world_rank ||
        strcmp(where, point) != 0 || __atomic_add_fetch(&passes, 1, __ATOMIC_RELAXED) != nth)
        return;
    har_log(HAR_LOG_WARN, "HAR_TEST_KILL: world rank %d dies at %s", world_rank, point);
    kill(getpid(), SIGKILL);
}
#endif
