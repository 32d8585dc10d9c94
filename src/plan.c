/* Algorithm choice and shard layout. Pure functions of what every rank
 * shares (count, datatype size, ranks per node, nodes, rank 0's settings),
 * so every rank plans the same call the same way. */
#include "hier.h"

#define SHARD_ALIGN 64  /* shards never share a cache line between writers */

har_plan_t har_plan(size_t count, size_t elem_size, int local_size, int nnodes, const har_algo_cfg_t *cfg)
{
    har_plan_t p;
    size_t bytes = count * elem_size;
    p.one_shot = nnodes == 1 && bytes <= (size_t)cfg->one_shot_max && local_size > 1;
    /* A chunk fills a slot; keep it a whole number of aligned units. */
    size_t unit = SHARD_ALIGN / elem_size;
    size_t chunk = (size_t)cfg->slot_bytes / elem_size / unit * unit;
    p.chunk_elems = chunk ? chunk : unit;
    return p;
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
