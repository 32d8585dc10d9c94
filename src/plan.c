/* Algorithm choice and shard layout. Pure functions of what every rank
 * shares (bytes, datatype size, ranks per node, nodes, rank 0's settings and
 * table, and what the node agreed at arrival), so every rank plans the same
 * call the same way. */
#include "hier.h"

#define SHARD_ALIGN 64  /* shards never share a cache line between writers */

har_choice_t har_choose(size_t bytes, int local_size, int nnodes, int device, unsigned avail, int forced,
                        const har_algo_cfg_t *cfg)
{
    har_choice_t ch = {HAR_ALGO_AUTO, 0};
    avail |= HAR_ALGO_BIT(TWO_SHOT);  /* serves every call */
    /* Across nodes, nodes may hold different memory kinds and so read
     * different table rows: only choices that cannot differ between nodes
     * remain (a forced "mpi" is the same everywhere). */
    if (nnodes != 1 || local_size < 2) avail &= ~(HAR_ALGO_BIT(ONE_SHOT) | HAR_ALGO_BIT(MPI) | HAR_ALGO_BIT(NCCL));
    if (!device) avail &= ~(HAR_ALGO_BIT(HOST_SEGMENT) | HAR_ALGO_BIT(NCCL));
    if (forced == HAR_ALGO_MPI) avail |= HAR_ALGO_BIT(MPI);
    /* HAR_ALGO (or har_set_algo) first, then the table; a choice that cannot
     * serve this call falls through to the thresholds. */
    if (forced > HAR_ALGO_AUTO && (avail & (1u << forced))) ch.algo = (har_algo_t)forced;
    if (ch.algo == HAR_ALGO_AUTO) {
        har_algo_t t = har_tune_lookup(cfg->tune, cfg->ntune, device, local_size, nnodes, bytes);
        if (avail & (1u << t)) ch.algo = t;
    }
    if (ch.algo == HAR_ALGO_AUTO) {
        long long max = device ? cfg->device_one_shot_max : cfg->one_shot_max;
        if ((avail & HAR_ALGO_BIT(NCCL)) && cfg->nccl_min_bytes > 0 && bytes >= (size_t)cfg->nccl_min_bytes)
            ch.algo = HAR_ALGO_NCCL;  /* NCCL's bandwidth beat the kernels' from 32 MiB on 2 H200s */
        else if ((avail & HAR_ALGO_BIT(ONE_SHOT)) && bytes <= (size_t)max)
            ch.algo = HAR_ALGO_ONE_SHOT;
        else
            ch.algo = HAR_ALGO_TWO_SHOT;
    }
    /* Device buffers through the host segment shoot as host buffers do. */
    ch.one_shot = ch.algo == HAR_ALGO_ONE_SHOT ||
                  (ch.algo == HAR_ALGO_HOST_SEGMENT && (avail & HAR_ALGO_BIT(ONE_SHOT)) &&
                   bytes <= (size_t)cfg->one_shot_max);
    return ch;
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
