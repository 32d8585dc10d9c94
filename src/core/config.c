/* Every HAR_* variable, read once from the environment and validated (the
 * table lives in config.h so that fields and documentation cannot drift). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/config.h"
#include "core/log.h"

har_config_t har_cfg;

typedef struct {
    const char *field, *doc, *def, *choices;
    har_var_type_t type;
    int scope;
    double lo, hi;
} har_var_desc_t;

static const har_var_desc_t vars[HAR_NVARS] = {
#define HAR_VAR_DESC(name, type, def, scope, lo, hi, choices, doc) {#name, doc, def, choices, type, scope, lo, hi},
    HAR_VAR_LIST(HAR_VAR_DESC)
#undef HAR_VAR_DESC
};

unsigned har_choice_parse(const char *text, unsigned allowed, int *ok)
{
    unsigned mask = 0;
    *ok = 1;
    if (!*text || strcmp(text, "auto") == 0) return 0;
    while (*text) {
        size_t len = strcspn(text, "+");
        char name[32];
        int p = -1;
        if (len < sizeof name) {
            memcpy(name, text, len);
            name[len] = '\0';
            p = har_path_from_name(name);
        }
        if (p < 0 || !(allowed & (1u << p))) {
            *ok = 0;
            return 0;
        }
        mask |= 1u << p;
        text += len + (text[len] == '+');
    }
    return mask;
}

void har_choice_format(unsigned mask, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    if (!mask) snprintf(buf, len, "auto");
    for (int p = 0; p < HAR_PATH_COUNT && n < len; p++)
        if (mask & (1u << p)) n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "+" : "", har_path_name(p));
}

static void env_name(const char *field, char *out, size_t len)
{
    size_t n = (size_t)snprintf(out, len, "HAR_%s", field);
    for (size_t k = 4; k < n && k < len; k++) out[k] = (char)toupper((unsigned char)out[k]);
}

double har_parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v)) return -1;
    switch (toupper((unsigned char)*end)) {
    case 'K': v *= 1024.0; end++; break;
    case 'M': v *= 1024.0 * 1024; end++; break;
    case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    return *end ? -1 : floor(v);
}

/* 1 and the value in *v if `text` is valid for variable d; else 0 and a
 * reason in `why`. */
static int parse_value(const har_var_desc_t *d, const char *text, har_value_t *v, char *why, size_t why_len)
{
    char *end;
    double num = 0;
    if (strlen(text) >= sizeof v->s) {
        snprintf(why, why_len, "longer than %zu characters", sizeof v->s - 1);
        return 0;
    }
    snprintf(v->s, sizeof v->s, "%s", text);
    v->i = 0;
    v->d = 0;
    switch (d->type) {
    case HAR_T_BOOL:
    case HAR_T_INT:
        errno = 0;
        num = (double)strtoll(text, &end, 10);
        if (end == text || *end || errno) {
            snprintf(why, why_len, "not a whole number");
            return 0;
        }
        break;
    case HAR_T_SIZE:
        if (strcmp(d->def, "auto") == 0 && strcmp(text, "auto") == 0) {  /* har picks it (-1) */
            v->i = -1;
            v->d = -1;
            return 1;
        }
        num = har_parse_size(text);
        if (num < 0) {
            snprintf(why, why_len, "not a size in bytes (a number, optionally with K, M or G)%s",
                     strcmp(d->def, "auto") == 0 ? ", or auto" : "");
            return 0;
        }
        break;
    case HAR_T_SECONDS:
        errno = 0;
        num = strtod(text, &end);
        if (end == text || *end || errno || !isfinite(num)) {
            snprintf(why, why_len, "not a number of seconds");
            return 0;
        }
        break;
    case HAR_T_STR:
        return 1;
    case HAR_T_ENUM: {
        const char *c = d->choices;
        for (int k = 0; *c; k++) {
            size_t len = strcspn(c, ",");
            if (strlen(text) == len && strncmp(text, c, len) == 0) {
                v->i = k;
                return 1;
            }
            c += len + (c[len] == ',');
        }
        snprintf(why, why_len, "not one of %s", d->choices);
        return 0;
    }
    case HAR_T_CHOICE: {
        int ok, plan_only = d->choices && strcmp(d->choices, "plan") == 0;
        v->i = har_choice_parse(text, plan_only ? HAR_CHOICE_NAMES : ~0u, &ok);
        if (!ok && plan_only) {
            char names[64];
            har_choice_format(HAR_CHOICE_NAMES, names, sizeof names);
            snprintf(why, why_len, "not auto, or names from %s joined by +", names);
        } else if (!ok) {
            snprintf(why, why_len, "not path names joined by + (har-info lists them)");
        }
        return ok;
    }
    }
    if (num < d->lo || num > d->hi) {
        snprintf(why, why_len, "outside %.0f..%.0f", d->lo, d->hi);
        return 0;
    }
    v->i = (long long)num;
    v->d = num;
    return 1;
}

int har_open_setting_file(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    int err = fstat(fd, &st) != 0 ? errno : S_ISREG(st.st_mode) ? 0 : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    /* Reads of a regular file never wait anyway; plain blocking reads from here. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* Edits (insert, delete, substitute) from a[0..la) to b; b is a known
 * name, shorter than 64 characters; a may be any length. */
static size_t edit_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b), prev[64], cur[64];
    if (lb >= 64) return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof *cur);
    }
    return prev[lb];
}

extern char **environ;

/* Settings that were renamed: the old name still serves, with a warning,
 * while the new one is unset. */
static const struct {
    const char *old_name, *field;
} renamed[] = {
    {"HAR_RING_SEGMENT", "ring_message"}, /* "segment" is the node's shared memory */
};

static const char *renamed_from(const char *field)
{
    for (size_t i = 0; i < sizeof renamed / sizeof *renamed; i++)
        if (strcmp(renamed[i].field, field) == 0) return renamed[i].old_name;
    return NULL;
}

static int is_old_name(const char *entry, size_t len)
{
    for (size_t i = 0; i < sizeof renamed / sizeof *renamed; i++)
        if (strlen(renamed[i].old_name) == len && strncmp(renamed[i].old_name, entry, len) == 0) return 1;
    return 0;
}

/* Unknown HAR_* names, with the closest known one when one is close (at
 * most a third of the name's letters differ). HAR_TEST_* names belong to
 * the test suite and its build of the library, HAR_LIBRARY to har-run and
 * the environment module (the libhar.so to preload). */
static void warn_unknown(void)
{
    char known[64];
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "HAR_", 4) != 0 || strncmp(*e, "HAR_TEST_", 9) == 0 || strncmp(*e, "HAR_LIBRARY=", 12) == 0)
            continue;
        size_t len = strcspn(*e, "="), best_d = SIZE_MAX, i;
        if (is_old_name(*e, len)) continue;
        const char *best = NULL;
        for (i = 0; i < HAR_NVARS; i++) {
            env_name(vars[i].field, known, sizeof known);
            if (strlen(known) == len && strncmp(known, *e, len) == 0) break;
            size_t d = edit_distance(*e, len, known);
            if (d < best_d) best_d = d, best = vars[i].field;
        }
        if (i < HAR_NVARS) continue;
        if (best && best_d <= len / 3) {
            env_name(best, known, sizeof known);
            har_log(HAR_LOG_WARN, "unknown variable %.*s ignored (did you mean %s?)", (int)len, *e, known);
        } else {
            har_log(HAR_LOG_WARN, "unknown variable %.*s ignored (har-info --variables lists the known ones)", (int)len, *e);
        }
    }
}

void har_config_load(int report)
{
    char name[64], why[160];
    for (size_t i = 0; i < HAR_NVARS; i++) {
        har_value_t *v = &har_cfg.v[i];
        parse_value(&vars[i], vars[i].def, v, why, sizeof why);
        v->source = "default";
        env_name(vars[i].field, name, sizeof name);
        const char *env = getenv(name), *set_as = name, *old_name = renamed_from(vars[i].field);
        int says = report == HAR_REPORT_ALL || (report == HAR_REPORT_OWN && vars[i].scope != RANK0);
        if (old_name && getenv(old_name)) {
            if (env && says) har_log(HAR_LOG_WARN, "%s ignored: %s, its new name, is set", old_name, name);
            if (!env) env = getenv(set_as = old_name);
        }
        if (!env) continue;
        har_value_t parsed;
        if (parse_value(&vars[i], env, &parsed, why, sizeof why)) {
            *v = parsed;
            v->source = "environment";
            if (set_as == old_name && says)
                har_log(HAR_LOG_WARN, "%s is now called %s; its value is used", old_name, name);
        } else if (says) {
            har_log(HAR_LOG_WARN, "%s=%.200s refused (%s); using the default, %s", set_as, env, why,
                    *vars[i].def ? vars[i].def : "(none)");
        }
    }
    har_log_level = (int)HAR_CFG(verbose).i;
    if (report == HAR_REPORT_ALL) warn_unknown();
}

static const char *type_name(har_var_type_t t)
{
    switch (t) {
    case HAR_T_BOOL: return "bool";
    case HAR_T_INT: return "int";
    case HAR_T_SIZE: return "bytes";
    case HAR_T_SECONDS: return "seconds";
    case HAR_T_STR: return "string";
    case HAR_T_ENUM: return "word";
    case HAR_T_CHOICE: return "paths";
    }
    return "?";
}

void har_config_print(FILE *out, int markdown)
{
    char name[64];
    if (markdown)
        fprintf(out, "| variable | type | default | meaning |\n| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < HAR_NVARS; i++) {
        env_name(vars[i].field, name, sizeof name);
        const har_value_t *v = &har_cfg.v[i];
        if (markdown)
            fprintf(out, "| `%s` | %s | %s%s%s | %s%s |\n", name, type_name(vars[i].type),
                    *vars[i].def ? "`" : "", *vars[i].def ? vars[i].def : "(none)", *vars[i].def ? "`" : "",
                    vars[i].doc, vars[i].scope == RANK0 ? " (rank 0's value is used)" : "");
        else
            fprintf(out, "  %-24s = %-8s (%s)  %s\n", name, v->s, v->source, vars[i].doc);
    }
}

size_t har_config_rank0_bytes(void)
{
    size_t n = 0;
    for (size_t i = 0; i < HAR_NVARS; i++) n += vars[i].scope == RANK0 ? sizeof(har_value_t) : 0;
    return n;
}

void har_config_rank0_pack(const har_config_t *cfg, void *buf)
{
    char *at = buf;
    for (size_t i = 0; i < HAR_NVARS; i++)
        if (vars[i].scope == RANK0) {
            memcpy(at, &cfg->v[i], sizeof cfg->v[i]);
            at += sizeof cfg->v[i];
        }
}

void har_config_rank0_unpack(har_config_t *cfg, const void *buf)
{
    const char *at = buf;
    for (size_t i = 0; i < HAR_NVARS; i++)
        if (vars[i].scope == RANK0) {
            const char *source = cfg->v[i].source;  /* a pointer: meaningful only in the process that set it */
            memcpy(&cfg->v[i], at, sizeof cfg->v[i]);
            cfg->v[i].source = source;
            at += sizeof cfg->v[i];
        }
}
