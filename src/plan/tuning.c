/* The tuning table: parsing, lookup, loading. A row names the machine class
 * it was measured on; rows of another class are not used. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/config.h"
#include "core/log.h"
#include "plan/tuning.h"

void har_plan_class_word(const char *text, char *out, size_t len)
{
    size_t n = 0;
    int space = 0;
    for (const char *c = text; *c && n + 1 < len; c++) {
        if (isspace((unsigned char)*c)) { space = n > 0; continue; }
        if (space && n + 2 < len) out[n++] = '_';
        space = 0;
        out[n++] = *c;
    }
    out[n] = '\0';
}

/* One line: "memory class ranks_per_node nodes up_to_bytes choice"; 1 if it
 * made a row, 0 if blank or comment, -1 if malformed. */
static int parse_line(const char *line, har_plan_tune_row_t *row)
{
    char memory[16], cls[HAR_CLASS_LEN], max[32], choice[96];
    long local, nodes;
    int used = 0, ok;
    line += strspn(line, " \t\r");
    if (*line == '#' || *line == '\0') return 0;
    /* %n after a space skips trailing blanks, \r of a CRLF file included */
    if (sscanf(line, "%15s %63s %ld %ld %31s %95s %n", memory, cls, &local, &nodes, max, choice, &used) != 6 ||
        line[used])
        return -1;
    if (strcmp(memory, "device") && strcmp(memory, "host")) return -1;
    if (local < 1 || local > 65535 || nodes < 1 || nodes > 1L << 30) return -1;
    row->choice = har_choice_parse(choice, HAR_CHOICE_NAMES, &ok);
    if (!ok || !row->choice) return -1;
    if (strcmp(max, "inf") == 0) {
        row->max_bytes = UINT64_MAX;
    } else {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(max, &end, 10);
        if (*end || end == max || errno || max[0] == '-') return -1;
        row->max_bytes = v;
    }
    row->on_device = memory[0] == 'd';
    row->local_size = (uint16_t)local;
    row->nodes = (uint32_t)nodes;
    snprintf(row->cls, sizeof row->cls, "%s", cls);
    return 1;
}

int har_plan_tune_parse(const char *text, har_plan_tune_row_t *rows, int max_rows, int *bad_line)
{
    int n = 0, line_no = 0;
    char line[256];
    while (*text) {
        size_t len = strcspn(text, "\n");
        line_no++;
        if (len >= sizeof line) {
            *bad_line = line_no;
            return -1;
        }
        memcpy(line, text, len);
        line[len] = '\0';
        text += len + (text[len] == '\n');
        har_plan_tune_row_t row;
        int r = parse_line(line, &row);
        if (r < 0 || (r > 0 && n == max_rows)) {
            *bad_line = line_no;
            return -1;
        }
        if (r > 0) rows[n++] = row;
    }
    return n;
}

int har_plan_tune_fits(const har_plan_tune_row_t *row, int on_device, const char *cls, int local_size, int nodes,
                       uint64_t bytes)
{
    return row->on_device == !!on_device && row->local_size == local_size && row->nodes == (uint32_t)nodes &&
           bytes <= row->max_bytes && (strcmp(row->cls, "*") == 0 || (cls && strcmp(row->cls, cls) == 0));
}

const har_plan_tune_row_t *har_plan_tune_lookup(const har_plan_tune_row_t *rows, int nrows, int on_device,
                                                const char *cls, int local_size, int nodes, uint64_t bytes) {
    for (int i = 0; i < nrows; i++)
        if (har_plan_tune_fits(&rows[i], on_device, cls, local_size, nodes, bytes)) return &rows[i];
    return NULL;
}

void har_plan_tune_format(const har_plan_tune_row_t *row, char *buf, size_t len)
{
    char max[32] = "inf", choice[96];
    if (row->max_bytes != UINT64_MAX) snprintf(max, sizeof max, "%llu", (unsigned long long)row->max_bytes);
    har_choice_format(row->choice, choice, sizeof choice);
    snprintf(buf, len, "%s %s %u %u %s %s", row->on_device ? "device" : "host", row->cls, row->local_size, row->nodes,
             max, choice);
}

/* A regular file's text, up to HAR_TUNE_MAX_TEXT bytes; NULL with errno
 * (EISDIR for a directory, EINVAL for a FIFO or a device, EFBIG past the
 * limit). */
static char *read_table(const char *path)
{
    int fd = har_open_setting_file(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    char *text = malloc(HAR_TUNE_MAX_TEXT + 1);
    size_t len = text ? fread(text, 1, HAR_TUNE_MAX_TEXT + 1, f) : 0;
    fclose(f);
    if (text && len > HAR_TUNE_MAX_TEXT) {
        free(text);
        errno = EFBIG;
        return NULL;
    }
    if (text) text[len] = '\0';
    return text;
}

int har_plan_tune_load(const char *setting, har_plan_tune_row_t *rows, int max_rows, char *source, size_t len,
                       int report) {
    int bad = 0, n;
    if (strcmp(setting, "none") == 0) {
        snprintf(source, len, "none (thresholds only)");
        return 0;
    }
    if (strcmp(setting, "builtin") != 0) {
        char *text = read_table(setting);
        if (!text) {
            if (report)
                har_log(HAR_LOG_WARN, "HAR_TUNING=%s refused: %s; using the built-in table", setting,
                        errno == EFBIG    ? "larger than 64 KiB"
                        : errno == EINVAL ? "not a regular file"
                                          : strerror(errno));
        } else {
            n = har_plan_tune_parse(text, rows, max_rows, &bad);
            free(text);
            if (n >= 0) {
                snprintf(source, len, "%s", setting);
                return n;
            }
            if (report)
                har_log(HAR_LOG_WARN, "HAR_TUNING=%s refused: line %d is not \"memory class ranks_per_node nodes "
                        "up_to_bytes choice\" (or more than %d rows); using the built-in table", setting, bad, max_rows);
        }
    }
    n = har_plan_tune_parse(har_plan_tune_builtin, rows, max_rows, &bad);
    snprintf(source, len, "built-in");
    return n < 0 ? 0 : n;  /* the built-in table parses: tests/unit/test_plan checks it */
}
