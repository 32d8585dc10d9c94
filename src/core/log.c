/* Log lines: one write per line, so that ranks sharing stderr do not
 * interleave within a line. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/log.h"

int har_log_level;
static int log_rank = -1;
static char host[64];

void har_log_set_rank(int rank)
{
    log_rank = rank;
    har_hostname();
}

const char *har_hostname(void)
{
    if (!host[0] && gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    return host;
}

static void vlog(int level, const char *file, int line, const char *fmt, va_list ap)
{
    static const char *const tags[] = {"error", "warning", "info", "debug", "trace"};
    char text[1024];
    int n;
    if (log_rank >= 0) n = snprintf(text, sizeof text, "har[%d %s] %s: ", log_rank, host, tags[level + 1]);
    else n = snprintf(text, sizeof text, "har[pid %d] %s: ", (int)getpid(), tags[level + 1]);
    if (file) {
        const char *src = strstr(file, "src/");
        n += snprintf(text + n, sizeof text - (size_t)n, "%s:%d: ", src ? src + 4 : file, line);
    }
    if (n > 0 && (size_t)n < sizeof text) vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", text);
}

void har_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, NULL, 0, fmt, ap);
    va_end(ap);
}

void har_log_at(int level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, level >= HAR_LOG_DEBUG ? file : NULL, line, fmt, ap);
    va_end(ap);
}

static __thread char note[256], taken[256];

void har_note(const char *fmt, ...)
{
    if (note[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, sizeof note, fmt, ap);
    va_end(ap);
    HAR_LOG(HAR_LOG_DEBUG, "noted: %s", note);
}

const char *har_note_take(void)
{
    memcpy(taken, note, sizeof taken);
    note[0] = '\0';
    return taken;
}

void har_note_clear(void) { note[0] = '\0'; }

static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
static har_once_t *once_list;

void har_warn_once(har_once_t *once, const char *fmt, ...)
{
    pthread_mutex_lock(&once_lock);
    int first = once->count++ == 0;
    if (first) {
        char text[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        once->text = strdup(text);
        once->next = once_list;
        once_list = once;
    }
    pthread_mutex_unlock(&once_lock);
    if (first) har_log(HAR_LOG_WARN, "%s", once->text ? once->text : fmt);
}

void har_log_summary(void)
{
    pthread_mutex_lock(&once_lock);
    for (har_once_t *o = once_list; o; o = o->next)
        if (o->count > 1) har_log(HAR_LOG_WARN, "said %lu times in all: %s", o->count, o->text ? o->text : "");
    pthread_mutex_unlock(&once_lock);
}
