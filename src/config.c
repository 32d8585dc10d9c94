/* Every HAR_* variable, read once from the environment (the table lives in
 * internal.h so that fields and documentation cannot drift apart). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

har_config_t har_cfg;

typedef struct {
    const char *field, *doc, *def;
    har_var_type_t type;
    int algo;
} har_var_desc_t;

static const har_var_desc_t vars[] = {
#define HAR_VAR_DESC(name, type, def, algo, doc) {#name, doc, def, type, algo},
    HAR_VAR_LIST(HAR_VAR_DESC)
#undef HAR_VAR_DESC
};
#define NVARS (sizeof vars / sizeof vars[0])

/* Field i of har_cfg, in table order (all fields have the same layout). */
typedef struct { long long i; double d; char s[HAR_VAR_TEXT]; const char *source; } har_value_t;
static har_value_t *value_at(size_t i) { return &((har_value_t *)&har_cfg)[i]; }

static void env_name(const char *field, char *out, size_t len)
{
    size_t n = (size_t)snprintf(out, len, "HAR_%s", field);
    for (size_t k = 4; k < n && k < len; k++) out[k] = (char)toupper((unsigned char)out[k]);
}

/* "4M" -> 4194304; returns -1 on a malformed number. */
static long long parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    switch (toupper((unsigned char)*end)) {
    case 'K': v *= 1024.0; end++; break;
    case 'M': v *= 1024.0 * 1024; end++; break;
    case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    return *end ? -1 : (long long)v;
}

static int parse_value(const har_var_desc_t *d, const char *text, har_value_t *v)
{
    char *end;
    snprintf(v->s, sizeof v->s, "%s", text);
    switch (d->type) {
    case HAR_T_BOOL:
    case HAR_T_INT:
        v->i = strtoll(text, &end, 10);
        return end != text && !*end;
    case HAR_T_SIZE:
        v->i = parse_size(text);
        return v->i >= 0;
    case HAR_T_SECONDS:
        v->d = strtod(text, &end);
        return end != text && !*end && v->d >= 0;
    case HAR_T_STR:
        return strlen(text) < sizeof v->s;
    }
    return 0;
}

void har_config_load(void)
{
    char name[64];
    for (size_t i = 0; i < NVARS; i++) {
        har_value_t *v = value_at(i);
        parse_value(&vars[i], vars[i].def, v);
        v->source = "default";
        env_name(vars[i].field, name, sizeof name);
        const char *env = getenv(name);
        if (!env) continue;
        har_value_t parsed;
        if (parse_value(&vars[i], env, &parsed)) {
            *v = parsed;
            v->source = "environment";
        } else {
            har_log(HAR_LOG_WARN, "%s=%s is not a valid value; using %s", name, env, vars[i].def);
        }
    }
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];
    if (la >= 63 || lb >= 63) return 99;
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof cur);
    }
    return prev[lb];
}

extern char **environ;

void har_config_warn_unknown(void)
{
    char name[64], known[64], best[64];
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "HAR_", 4) != 0) continue;
        size_t len = strcspn(*e, "=");
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        size_t best_d = 99, i;
        for (i = 0; i < NVARS; i++) {
            env_name(vars[i].field, known, sizeof known);
            if (strcmp(known, name) == 0) break;
            size_t d = edit_distance(name, known);
            if (d < best_d) { best_d = d; snprintf(best, sizeof best, "%s", known); }
        }
        if (i == NVARS)
            har_log(HAR_LOG_WARN, "unknown variable %s ignored (did you mean %s?)", name, best);
    }
}

static const char *type_name(har_var_type_t t)
{
    switch (t) {
    case HAR_T_BOOL: return "bool";
    case HAR_T_INT: return "int";
    case HAR_T_SIZE: return "bytes";
    case HAR_T_SECONDS: return "seconds";
    case HAR_T_STR: return "string";
    }
    return "?";
}

void har_config_print(FILE *out, int markdown)
{
    char name[64];
    if (markdown)
        fprintf(out, "| variable | type | default | meaning |\n| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < NVARS; i++) {
        env_name(vars[i].field, name, sizeof name);
        const har_value_t *v = value_at(i);
        if (markdown)
            fprintf(out, "| `%s` | %s | %s%s%s | %s%s |\n", name, type_name(vars[i].type),
                    *vars[i].def ? "`" : "", *vars[i].def ? vars[i].def : "(none)", *vars[i].def ? "`" : "",
                    vars[i].doc, vars[i].algo ? " (rank 0's value is used)" : "");
        else
            fprintf(out, "  %-22s = %-8s (%s)  %s\n", name, v->s, v->source, vars[i].doc);
    }
}

void har_algo_cfg_local(har_algo_cfg_t *a)
{
    memset(a, 0, sizeof *a);
    a->node_size = har_cfg.node_size.i;
    a->min_bytes = har_cfg.min_bytes.i;
    a->max_bytes = har_cfg.max_bytes.i;
    /* Whole 128-byte lines, at least one: slots and scratch use this size. */
    a->slot_bytes = (har_cfg.slot_bytes.i + 127) / 128 * 128;
    if (a->slot_bytes < 128) a->slot_bytes = 128;
    a->one_shot_max = har_cfg.one_shot_max.i;
    a->device_slot_bytes = har_cfg.device_slot_bytes.i < (1 << 20) ? (1 << 20) : har_cfg.device_slot_bytes.i;
    a->device_one_shot_max = har_cfg.device_one_shot_max.i;
    a->nccl_min_bytes = har_cfg.nccl_min_bytes.i;
    a->timeout = har_cfg.timeout.d;
    a->inter_mpi = strcmp(har_cfg.inter.s, "mpi") == 0;
    int algo = har_algo_from_name(har_cfg.algo.s);
    a->algo = algo < 0 ? HAR_ALGO_AUTO : algo;  /* har_init warned */
    const har_tune_row_t *rows;
    a->ntune = har_tune_active(&rows, NULL);
    memcpy(a->tune, rows, (size_t)a->ntune * sizeof *rows);
}
