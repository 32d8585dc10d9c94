/* The tuning table: which algorithm serves a call of a given size, memory
 * kind and shape of communicator, as measured by har-bench --tuning. Parsing
 * and lookup are pure; the active table is read once, from HAR_TUNING. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static const char *const algo_names[] = {
#define HAR_ALGO_NAME(id, name) name,
    HAR_ALGO_LIST(HAR_ALGO_NAME)
#undef HAR_ALGO_NAME
};

const char *har_algo_name(har_algo_t a) { return (unsigned)a < HAR_ALGO_COUNT ? algo_names[a] : "?"; }

int har_algo_from_name(const char *name)
{
    for (int a = 0; a < HAR_ALGO_COUNT; a++)
        if (strcmp(name, algo_names[a]) == 0) return a;
    return -1;
}

/* One line: "memory ranks_per_node nodes up_to_bytes algo"; 1 if it made a
 * row, 0 if blank or comment, -1 if malformed. */
static int parse_line(const char *line, har_tune_row_t *row)
{
    char memory[16], max[32], algo[32];
    long local, nodes;
    int used = 0;
    line += strspn(line, " \t\r");
    if (*line == '#' || *line == '\0') return 0;
    /* %n after a space skips trailing blanks, \r of a CRLF file included */
    if (sscanf(line, "%15s %ld %ld %31s %31s %n", memory, &local, &nodes, max, algo, &used) != 5 || line[used])
        return -1;
    int a = har_algo_from_name(algo);
    if (strcmp(memory, "device") && strcmp(memory, "host")) return -1;
    if (local < 1 || local > 65535 || nodes < 1 || nodes > 1L << 30 || a <= HAR_ALGO_AUTO) return -1;
    if (strcmp(max, "inf") == 0) {
        row->max_bytes = UINT64_MAX;
    } else {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(max, &end, 10);
        if (*end || end == max || errno || max[0] == '-') return -1;
        row->max_bytes = v;
    }
    row->device = memory[0] == 'd';
    row->local_size = (uint16_t)local;
    row->nodes = (uint32_t)nodes;
    row->algo = (uint8_t)a;
    return 1;
}

int har_tune_parse(const char *text, har_tune_row_t *rows, int max_rows, int *bad_line)
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
        har_tune_row_t row;
        int r = parse_line(line, &row);
        if (r < 0 || (r > 0 && n == max_rows)) {
            *bad_line = line_no;
            return -1;
        }
        if (r > 0) rows[n++] = row;
    }
    return n;
}

har_algo_t har_tune_lookup(const har_tune_row_t *rows, int nrows, int device, int local_size, int nodes,
                           uint64_t bytes)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].device == !!device && rows[i].local_size == local_size && rows[i].nodes == (uint32_t)nodes &&
            bytes <= rows[i].max_bytes)
            return (har_algo_t)rows[i].algo;
    return HAR_ALGO_AUTO;
}

static struct {
    pthread_once_t once;
    har_tune_row_t rows[HAR_TUNE_MAX_ROWS];
    int n;
    char source[HAR_VAR_TEXT];
} active = {PTHREAD_ONCE_INIT, {{0}}, 0, ""};

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    while (text) {
        len += fread(text + len, 1, cap - 1 - len, f);
        if (len < cap - 1) break;
        char *grown = realloc(text, cap *= 2);
        if (!grown) { free(text); text = NULL; }
        else text = grown;
    }
    fclose(f);
    if (text) text[len] = '\0';
    return text;
}

static void load_active(void)
{
    const char *setting = har_cfg.tuning.s;
    int bad = 0;
    if (strcmp(setting, "none") == 0) {
        snprintf(active.source, sizeof active.source, "none (thresholds only)");
        return;
    }
    if (strcmp(setting, "builtin") != 0) {
        char *text = read_file(setting);
        if (!text) {
            har_log(HAR_LOG_WARN, "HAR_TUNING=%s: cannot read it (%s); using the built-in table", setting,
                    strerror(errno));
        } else {
            active.n = har_tune_parse(text, active.rows, HAR_TUNE_MAX_ROWS, &bad);
            free(text);
            if (active.n >= 0) {
                snprintf(active.source, sizeof active.source, "%s", setting);
                return;
            }
            har_log(HAR_LOG_WARN, "HAR_TUNING=%s: line %d is not \"memory ranks_per_node nodes up_to_bytes algo\" "
                    "(or more than %d rows); using the built-in table", setting, bad, HAR_TUNE_MAX_ROWS);
        }
    }
    active.n = har_tune_parse(har_tune_builtin, active.rows, HAR_TUNE_MAX_ROWS, &bad);
    if (active.n < 0) active.n = 0;  /* cannot happen: tests/unit/test_plan parses it */
    snprintf(active.source, sizeof active.source, "built-in");
}

int har_tune_active(const har_tune_row_t **rows, const char **source)
{
    pthread_once(&active.once, load_active);
    *rows = active.rows;
    if (source) *source = active.source;
    return active.n;
}
