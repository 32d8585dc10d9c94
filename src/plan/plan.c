/* The plan of a call and the shard layout. Pure functions of what every
 * local rank shares, so every rank plans the same call the same way. */
#include <string.h>
#include "plan/plan.h"
#include "cuda/kernels.h"

#define SHARD_ALIGN 64  /* shards never share a cache line between writers */

void har_settings_from(const har_config_t *cfg, har_settings_t *s)
{
    memset(s, 0, sizeof *s);
    s->node_size = cfg->v[HAR_V_node_size].i;
    s->min_bytes = cfg->v[HAR_V_min_bytes].i;
    s->max_bytes = cfg->v[HAR_V_max_bytes].i;
    /* Whole 128-byte lines (host) and 4 KiB pages (device): slots start on them. */
    s->slot_bytes = (cfg->v[HAR_V_slot_bytes].i + 127) / 128 * 128;
    s->one_shot_max = cfg->v[HAR_V_one_shot_max].i;
    s->device_slot_bytes = (cfg->v[HAR_V_device_slot_bytes].i + 4095) / 4096 * 4096;
    s->device_one_shot_max = cfg->v[HAR_V_device_one_shot_max].i;
    s->nccl_min_bytes = cfg->v[HAR_V_nccl_min_bytes].i;
    s->timeout = cfg->v[HAR_V_timeout].d;
    s->inter_mpi = cfg->v[HAR_V_inter].i == 1;
    s->check = (int)cfg->v[HAR_V_check].i;
    s->algo = (unsigned)cfg->v[HAR_V_algo].i;
}

/* NCCL reduces these types with sum, prod, min and max only. */
static int nccl_serves(int dev_type, int dev_op)
{
    return dev_type != HAR_DT_NONE && (dev_op == HAR_OP_SUM || dev_op == HAR_OP_PROD || dev_op == HAR_OP_MIN ||
                                       dev_op == HAR_OP_MAX);
}

int har_plan_candidates(const har_plan_in_t *in, const har_settings_t *s, unsigned *cand)
{
    int n = 0, one_node = in->nnodes == 1;
    int host_one = one_node && in->bytes <= (uint64_t)s->one_shot_max;
    int ipc_one = one_node && in->bytes <= (uint64_t)s->device_one_shot_max;
    /* Across nodes, nodes may hold different memory kinds: only plans that
     * chunk alike and ring alike whatever the kind remain (two-shot on either
     * segment), and the MPI only when forced (the same everywhere). */
    int ipc = in->device && (in->engines & HAR_BIT(IPC)) && in->dev_type != HAR_DT_NONE &&
              in->dev_op != HAR_OP_NONE && (one_node || in->uniform);
    int nccl = in->device && (in->engines & HAR_BIT(NCCL)) && one_node && !in->shared_gpu &&
               nccl_serves(in->dev_type, in->dev_op);
    unsigned host = HAR_BIT(HOST_SEGMENT), ipc_bit = HAR_BIT(IPC), one = HAR_BIT(ONE_SHOT), two = HAR_BIT(TWO_SHOT);
    /* The thresholds' order: NCCL for large device messages (it passed the
     * kernels from 32 MiB on 2 H200s), the kernels, NCCL (far faster than
     * copying device buffers through host memory), the host segment. */
    int nccl_first = nccl && s->nccl_min_bytes > 0 && in->bytes >= (uint64_t)s->nccl_min_bytes;
    if (nccl_first) cand[n++] = HAR_BIT(NCCL);
    if (ipc) {
        cand[n++] = ipc_bit | (ipc_one ? one : two);
        if (one_node) cand[n++] = ipc_bit | (ipc_one ? two : one);
    }
    if (nccl && !nccl_first) cand[n++] = HAR_BIT(NCCL);
    cand[n++] = host | (host_one ? one : two);
    if (one_node) cand[n++] = host | (host_one ? two : one);
    if (one_node || (in->forced & HAR_BIT(MPI))) cand[n++] = HAR_BIT(MPI);
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
    unsigned cand[8];
    int n = har_plan_candidates(in, s, cand);
    /* HAR_ALGO first, then the table's row; a choice no candidate meets is
     * passed over, and the thresholds' order decides among what is left. */
    narrow(cand, &n, in->forced);
    p.row = har_tune_lookup(s->tune, s->ntune, in->device, in->cls, in->local_size, in->nnodes, in->bytes);
    if (p.row && !narrow(cand, &n, p.row->choice)) p.row = NULL;  /* no candidate meets it: it did not decide */
    unsigned chosen = cand[0];
    p.engine = chosen & HAR_BIT(NCCL) ? HAR_PATH_NCCL : chosen & HAR_BIT(IPC) ? HAR_PATH_IPC
             : chosen & HAR_BIT(HOST_SEGMENT) ? HAR_PATH_HOST_SEGMENT : HAR_PATH_MPI;
    p.one_shot = (chosen & HAR_BIT(ONE_SHOT)) != 0;
    p.paths = chosen;
    if (in->nnodes > 1 && (p.engine == HAR_PATH_HOST_SEGMENT || p.engine == HAR_PATH_IPC))
        p.paths |= (in->uniform ? HAR_BIT(RAILS) : HAR_BIT(LEADER)) | (s->inter_mpi ? HAR_BIT(INTER_MPI) : HAR_BIT(RING));
    /* Across nodes the rails pair ranks of nodes that may use different
     * segments: both chunk by the smaller slot, from settings all share. */
    size_t host = (size_t)s->slot_bytes, dev = (size_t)s->device_slot_bytes;
    if (in->nnodes > 1) p.chunk_bytes = host < dev ? host : dev;
    else p.chunk_bytes = p.engine == HAR_PATH_IPC ? dev : host;
    return p;
}

int har_plan_grid(int per_sm, int ctx_sms, int gpu_sms, int clients, int max_blocks)
{
    if (per_sm <= 0 || ctx_sms <= 0 || gpu_sms <= 0 || clients <= 0) return 0;
    long long own = (long long)per_sm * ctx_sms, shared = (long long)per_sm * gpu_sms / clients;
    long long grid = own < shared ? own : shared;
    return grid < max_blocks ? (int)grid : max_blocks;
}

size_t har_chunk_elems(size_t slot_bytes, size_t elem_size)
{
    /* A chunk fills a slot; keep it a whole number of aligned units. */
    size_t unit = SHARD_ALIGN / elem_size;
    size_t chunk = slot_bytes / elem_size / unit * unit;
    return chunk ? chunk : unit;
}

void har_shard(size_t n, size_t elem_size, int parts, int i, size_t *off, size_t *len)
{
    size_t unit = SHARD_ALIGN / elem_size;
    size_t units = (n + unit - 1) / unit;
    size_t first = units * (size_t)i / (size_t)parts, last = units * (size_t)(i + 1) / (size_t)parts;
    size_t begin = first * unit, end = last * unit;
    if (begin > n) begin = n;
    if (end > n) end = n;
    *off = begin;
    *len = end - begin;
}
