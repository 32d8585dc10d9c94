/* Log lines on stderr, prefixed with the rank and host. Errors and warnings
 * always print; the rest follows HAR_VERBOSE. Debug and trace lines also
 * name the source line. */
#ifndef HAR_LOG_H
#define HAR_LOG_H

#include "core/common.h"

enum { HAR_LOG_ERROR = -1, HAR_LOG_WARN = 0, HAR_LOG_INFO = 1, HAR_LOG_DEBUG = 2, HAR_LOG_TRACE = 3 };

/* HAR_VERBOSE, set when the configuration is read. */
extern HAR_HIDDEN int har_log_level;

HAR_HIDDEN void har_log_set_rank(int rank);
/* This machine's name, as log lines and failure messages give it. */
HAR_HIDDEN const char *har_hostname(void);
HAR_HIDDEN void har_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
HAR_HIDDEN void har_log_at(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define HAR_LOG(level, ...) \
    do { if ((level) <= har_log_level) har_log_at((level), __FILE__, __LINE__, __VA_ARGS__); } while (0)

/* A warning said once where it arises; later ones are counted, and the count
 * is said at MPI_Finalize. One har_once_t per place (HAR_WARN_ONCE makes it). */
typedef struct har_once {
    unsigned long count;
    char *text;                 /* the first message, for the summary */
    struct har_once *next;
} har_once_t;
HAR_HIDDEN void har_warn_once(har_once_t *once, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define HAR_WARN_ONCE(...) do { static har_once_t once_; har_warn_once(&once_, __VA_ARGS__); } while (0)
/* The details of a failure, said once: the function that finds the cause
 * notes it (the first note of a thread stands until taken), and whoever
 * records the failure takes it into the one message that says it, on every
 * rank that stops for it (node/failure.c), or into the warning of a set-up
 * that fails. */
HAR_HIDDEN void har_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The note ("" if none), which is then cleared. */
HAR_HIDDEN const char *har_note_take(void);
/* Forgets a note nobody took (each call starts with none). */
HAR_HIDDEN void har_note_clear(void);

/* Prints "said N times" for every warning that came more than once. */
HAR_HIDDEN void har_log_summary(void);

#endif
