/* Rank-prefixed log lines on stderr. Errors and warnings always print;
 * the rest follows HAR_VERBOSE (see HAR_LOG in internal.h). */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "internal.h"

static int log_rank = -1;

void har_log_set_rank(int rank) { log_rank = rank; }

void har_log(int level, const char *fmt, ...)
{
    static const char *const tags[] = {"error", "warning", "info", "debug", "trace"};
    char line[1024];
    int n;
    if (log_rank >= 0)
        n = snprintf(line, sizeof line, "har[%d] %s: ", log_rank, tags[level + 1]);
    else
        n = snprintf(line, sizeof line, "har[pid %d] %s: ", (int)getpid(), tags[level + 1]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);  /* one write per line: ranks do not interleave mid-line */
}
