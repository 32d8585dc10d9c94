/* The plan of a call and the shard layout. Pure functions of what every
 * local rank shares, so every rank plans the same call the same way. */
#include <string.h>
#include "plan/plan.h"
#include "core/types.h"


void har_plan_settings_from(const har_config_t *cfg, har_settings_t *s)
{
    memset(s, 0, sizeof *s);
#define COPY_LOCAL(name, type)
#define COPY_RANK0(name, type) COPY_##type(name)
#define COPY_HAR_T_BOOL(name) s->name = cfg->v[HAR_V_##name].i;
#define COPY_HAR_T_INT(name) s->name = cfg->v[HAR_V_##name].i;
#define COPY_HAR_T_SIZE(name) s->name = cfg->v[HAR_V_##name].i;
#define COPY_HAR_T_ENUM(name) s->name = cfg->v[HAR_V_##name].i;
#define COPY_HAR_T_SECONDS(name) s->name = cfg->v[HAR_V_##name].d;
#define COPY_HAR_T_CHOICE(name) s->name = (unsigned)cfg->v[HAR_V_##name].i;
#define COPY_HAR_T_STR(name)
#define COPY(name, type, def, scope, lo, hi, choices, doc) COPY_##scope(name, type)
    HAR_VAR_LIST(COPY)
    /* Whole 128-byte lines (host) and 4 KiB pages (device): slots start on them. */
    s->slot_bytes = (s->slot_bytes + 127) / 128 * 128;
    s->device_slot_bytes = (s->device_slot_bytes + 4095) / 4096 * 4096;
    s->device_push_max = s->device_push_max / 64 * 64;  /* whole shard units */
    if (s->ring_message < 0) s->ring_message = HAR_RING_MESSAGE_AUTO;
    static const int inter_paths[] = {HAR_INTER_AUTO, HAR_PATH_RING, HAR_PATH_DOUBLING, HAR_PATH_INTER_MPI,
                                      HAR_PATH_INTER_NCCL};  /* HAR_INTER's words, in order */
    s->inter_path = inter_paths[s->inter];
}

int har_plan_declines(uint64_t bytes, const har_settings_t *s)
{
    return bytes < (uint64_t)s->min_bytes || bytes > (uint64_t)s->max_bytes;
}

static long long setting(const har_settings_t *s, ptrdiff_t at)
{
    return at ? *(const long long *)((const char *)s + at - 1) : 0;
}

/* Whether `ops` (a mask of HAR_OP_*) holds the call's op. */
static int reduces_op(unsigned ops, const har_plan_in_t *in)
{
    return in->dev_op != HAR_OP_NONE && (ops >> in->dev_op & 1);
}

const char *har_plan_why_not(const har_engine_traits_t *e, const har_plan_in_t *in, const har_settings_t *s)
{
    unsigned bit = 1u << e->path;
    if (e->forced_only && !(in->forced & bit)) return "serves only calls forced to it";
    if (!(e->takes & (in->on_device ? HAR_TAKES_DEVICE : HAR_TAKES_HOST)))
        return in->on_device ? "takes no device buffers" : "takes only device buffers on every local rank";
    if (e->kernel_types && in->dev_type == HAR_DT_NONE) return "does not reduce this type";
    if (e->ops && !reduces_op(e->ops, in)) return "does not reduce this op";
    if (in->nnodes > 1 && !(e->across & (in->uniform ? HAR_BIT(RAILS) : HAR_BIT(LEADER))))
        return in->uniform ? "serves one node only" : "does not serve nodes of different sizes";
    if (in->shared_gpu && !e->shared_gpu) return "does not serve ranks that share a GPU";
    if (e->max_local && in->local_size > e->max_local) return "more ranks on the node than it serves";
    if (s->check && !e->checked) return "HAR_CHECK cannot verify it";
    return NULL;
}

void har_plan_rank_engines(har_engine_set_t *set)
{
    for (int dev = 0; dev < 2; dev++) {
        int *ranked = set->ranked[dev], n = 0;
        for (int p = 0; p < HAR_PATH_COUNT; p++) {
            const har_engine_traits_t *e = set->by_path[p];
            if (!e || !(e->takes & (dev ? HAR_TAKES_DEVICE : HAR_TAKES_HOST))) continue;
            int at = n++;  /* by rank, the list's order among equals */
            while (at > 0 && set->by_path[ranked[at - 1]]->rank > e->rank) ranked[at] = ranked[at - 1], at--;
            ranked[at] = p;
        }
        set->n[dev] = n;
    }
}

int har_plan_candidates(const har_plan_in_t *in, const har_settings_t *s, unsigned *cand)
{
    const har_engine_traits_t *order[HAR_PATH_COUNT];
    int n = 0, k = 0, one_node = in->nnodes == 1;
    const har_engine_set_t *set = in->engine_set;
    int dev = in->on_device != 0;
    for (int i = 0; i < set->n[dev]; i++) {
        const har_engine_traits_t *e = set->by_path[set->ranked[dev][i]];
        if (!(in->engines & (1u << e->path)) || har_plan_why_not(e, in, s)) continue;
        /* Past its first_from size an engine comes first (NCCL passed the
         * kernels from 32 MiB on 2 H200s), and so does one up to its
         * first_across_max on device buffers across nodes (the host
         * segment: one copy each way cost less than the kernels and their
         * copies up to 128 KiB, 2 hosts of 1 rank on an H200); the rest keep
         * their order. */
        long long from = setting(s, e->first_from), across_max = setting(s, e->first_across_max);
        int first = (from > 0 && in->bytes >= (uint64_t)from) ||
                    (!one_node && in->on_device && across_max > 0 && in->bytes <= (uint64_t)across_max);
        int at = first ? 0 : k;
        for (int j = k++; j > at; j--) order[j] = order[j - 1];
        order[at] = e;
    }
    unsigned one = HAR_BIT(ONE_SHOT), two = HAR_BIT(TWO_SHOT);
    for (int i = 0; i < k; i++) {
        const har_engine_traits_t *e = order[i];
        unsigned bit = 1u << e->path;
        if (!e->shots) {
            cand[n++] = bit;
            continue;
        }
        /* Across nodes only two-shot: every node's engine then rings alike. */
        int prefer_one = one_node && in->bytes <= (uint64_t)setting(s, e->one_shot_max);
        unsigned first = prefer_one ? one : two, second = prefer_one ? two : one;
        /* The push kernels are a one-shot of their own, first where they
         * fit: a row or HAR_ALGO that asks for one-shot keeps them. */
        if (prefer_one && (e->shots & HAR_BIT(PUSH)) && in->on_device && s->device_push_max > 0 &&
            in->bytes <= (uint64_t)s->device_push_max)
            cand[n++] = bit | one | HAR_BIT(PUSH);
        if (e->shots & first) cand[n++] = bit | first;
        if (one_node && (e->shots & second)) cand[n++] = bit | second;
    }
    if ((one_node && !in->progressed) || (in->forced & HAR_BIT(MPI)) || !n) cand[n++] = HAR_BIT(MPI);
    return n;
}

/* Keeps the candidates that show every path of `want`, if any does;
 * returns whether any did. */
static int narrow(unsigned *cand, int *n, unsigned want)
{
    int kept = 0;
    for (int k = 0; k < *n; k++) kept += (cand[k] & want) == want;
    if (!want || !kept) return 0;
    kept = 0;
    for (int k = 0; k < *n; k++)
        if ((cand[k] & want) == want) cand[kept++] = cand[k];
    *n = kept;
    return 1;
}

har_plan_t har_plan(const har_plan_in_t *in, const har_settings_t *s)
{
    har_plan_t p;
    memset(&p, 0, sizeof p);
    unsigned cand[HAR_PLAN_MAX];
    int n = har_plan_candidates(in, s, cand);
    /* HAR_ALGO first, then the table's row; a choice no candidate meets is
     * passed over, and the thresholds' order decides among what is left. */
    narrow(cand, &n, in->forced);
    p.row = har_plan_tune_lookup(s->tune, s->ntune, in->on_device, in->cls, in->local_size, in->nnodes, in->bytes);
    if (p.row && !narrow(cand, &n, p.row->choice)) p.row = NULL;  /* no candidate meets it: it did not decide */
    unsigned chosen = cand[0];
    unsigned engine = chosen & HAR_ENGINE_BITS;  /* a plan shows one engine, or the MPI */
    p.engine = engine ? __builtin_ctz(engine) : HAR_PATH_MPI;
    p.one_shot = (chosen & HAR_BIT(ONE_SHOT)) != 0;
    p.paths = chosen;
    if (engine && in->nnodes == 1 && in->on_device) {
        const har_engine_traits_t *e = in->engine_set->by_path[p.engine];
        long long ahead_max = setting(s, in->started ? e->start_max : e->ahead_max);
        if ((chosen & HAR_BIT(PUSH)) || (ahead_max > 0 && in->bytes <= (uint64_t)ahead_max)) p.paths |= HAR_BIT(AHEAD);
    }
    p.inter = in->nnodes > 1 && p.engine != HAR_PATH_MPI ? har_plan_inter(in, s) : -1;
    if (p.inter >= 0) p.paths |= (in->uniform ? HAR_BIT(RAILS) : HAR_BIT(LEADER)) | (1u << p.inter);
    /* A rank alone on its node hands the ring its host buffers (inter.h);
     * not under HAR_CHECK, which verifies whole blocks in har's memory. */
    p.streamed = p.inter == HAR_PATH_RING && in->local_size == 1 && in->uniform && in->host_buffers && !s->check &&
                 in->engine_set->by_path[p.engine]->streams;
    if (p.streamed) p.paths |= HAR_BIT(STREAMED);
    /* Across nodes the rails pair ranks of nodes that may use different
     * engines: all chunk by the smaller slot, from settings all share. */
    size_t host = (size_t)s->slot_bytes, dev = (size_t)s->device_slot_bytes;
    if (in->nnodes > 1) p.chunk_bytes = host < dev ? host : dev;
    else p.chunk_bytes = engine && in->engine_set->by_path[p.engine]->device_slot ? dev : host;
    return p;
}

/* Recursive doubling crosses in log2(nodes) steps of the whole block (one
 * more each way where the count of nodes is no power of two), the ring in
 * 2(nodes-1) steps of 1/nodes of it: small calls are worth the steps. NCCL
 * only where asked, agreed and able (HAR_INTER's doc); else as auto. */
int har_plan_inter(const har_plan_in_t *in, const har_settings_t *s)
{
    int nccl = s->inter_path == HAR_PATH_INTER_NCCL;
    int nccl_reduces = in->dev_type != HAR_DT_NONE && reduces_op(HAR_NCCL_OPS, in);
    if (nccl && in->nccl_across && !s->check && nccl_reduces)
        return HAR_PATH_INTER_NCCL;
    if (s->inter_path != HAR_INTER_AUTO && !nccl) return s->inter_path;
    return in->bytes <= (uint64_t)s->doubling_max ? HAR_PATH_DOUBLING : HAR_PATH_RING;
}

int har_plan_grid(int per_sm, int ctx_sms, int gpu_sms, int clients, int max_blocks)
{
    if (per_sm <= 0 || ctx_sms <= 0 || gpu_sms <= 0 || clients <= 0) return 0;
    long long own = (long long)per_sm * ctx_sms, shared = (long long)per_sm * gpu_sms / clients;
    long long grid = own < shared ? own : shared;
    return grid < max_blocks ? (int)grid : max_blocks;
}

size_t har_plan_chunk_elems(size_t slot_bytes, size_t elem_size)
{
    /* A chunk fills a slot; keep it a whole number of aligned units. */
    size_t unit = HAR_SHARD_ALIGN / elem_size;
    size_t chunk = slot_bytes / elem_size / unit * unit;
    return chunk ? chunk : unit;
}
