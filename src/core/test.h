/* Test hooks: compiled into the test build only (HAR_TEST_HOOKS). */
#ifndef HAR_TEST_H
#define HAR_TEST_H

#include "core/common.h"

#ifdef HAR_TEST_HOOKS
/* HAR_TEST_KILL=RANK:POINT[:N]: world rank RANK kills itself (SIGKILL) the
 * Nth time (default 1) it passes POINT, to test that a death at any moment
 * ends every survivor cleanly and leaves nothing behind.
 * HAR_TEST_STALL=RANK:POINT:SECONDS[,...]: world rank RANK sleeps there
 * each time, holding a window open (the node segment's socket, say) for a
 * test; several, comma-separated, each on its own. */
HAR_HIDDEN void har_test_point(const char *point);
HAR_HIDDEN void har_test_set_rank(int world_rank);
#define HAR_TEST_POINT(point) har_test_point(point)
#else
#define HAR_TEST_POINT(point) ((void)0)
#endif

#endif
