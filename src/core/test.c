/* Test hooks (test.h). */
#include "core/test.h"
#ifdef HAR_TEST_HOOKS
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/config.h"
#include "core/log.h"

static int world_rank = -1;
static unsigned long passes;

void har_test_set_rank(int rank) { world_rank = rank; }

void har_test_point(const char *point)
{
    char where[32];
    int rank;
    unsigned long nth = 1;
    if (sscanf(HAR_CFG(test_kill).s, "%d:%31[^:]:%lu", &rank, where, &nth) < 2 || rank != world_rank ||
        strcmp(where, point) != 0 || __atomic_add_fetch(&passes, 1, __ATOMIC_RELAXED) != nth)
        return;
    har_log(HAR_LOG_WARN, "HAR_TEST_KILL: world rank %d dies at %s", world_rank, point);
    kill(getpid(), SIGKILL);
}
#endif
