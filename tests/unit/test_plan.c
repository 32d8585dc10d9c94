/* Unit test of the pure planning functions (src/plan.c).
 *
 * har_shard: every rank computes every shard's place on its own, so the
 * layout must tile [0, n) exactly, keep shards apart by whole 64-byte units
 * (two writers never share a cache line) and stay balanced.
 * har_plan: one-shot exactly for small messages on one node with peers, and
 * chunks that fill a slot with whole units.
 *
 * Usage: test_plan [SEED]. Exit 0 on success, 1 on failure. */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "hier.h"

#define ALIGN 64  /* bytes: the alignment hier.h promises for shards and chunks */

#include "unit.h"

static void check_shards(size_t n, size_t elem, int parts)
{
    size_t unit = ALIGN / elem;              /* elements in one 64-byte unit */
    size_t units = (n + unit - 1) / unit;    /* a partial tail counts as a unit */
    size_t fair = units / (size_t)parts;     /* each shard holds fair or fair + 1 units */
    size_t end = 0;                          /* where the previous shard ended */
    unsigned long before = failures;
    for (int i = 0; i < parts && failures == before; i++) {
        size_t off, len;
        har_shard(n, elem, parts, i, &off, &len);
        CHECK(off == end, "n=%zu elem=%zu parts=%d: shard %d starts at %zu, previous ended at %zu",
              n, elem, parts, i, off, end);
        CHECK(len <= n && off <= n - len, "n=%zu elem=%zu parts=%d: shard %d [%zu, +%zu) runs past n",
              n, elem, parts, i, off, len);
        CHECK(off * elem % ALIGN == 0, "n=%zu elem=%zu parts=%d: shard %d starts at byte %zu",
              n, elem, parts, i, off * elem);
        CHECK(len * elem % ALIGN == 0 || off + len == n,
              "n=%zu elem=%zu parts=%d: shard %d has %zu bytes and is not the tail",
              n, elem, parts, i, len * elem);
        size_t u = (len + unit - 1) / unit;
        CHECK(u == fair || u == fair + 1, "n=%zu elem=%zu parts=%d: shard %d holds %zu units, not %zu or %zu",
              n, elem, parts, i, u, fair, fair + 1);
        end = off + len;
    }
    if (failures == before)
        CHECK(end == n, "n=%zu elem=%zu parts=%d: shards end at %zu", n, elem, parts, end);
}

static void check_plan(size_t count, size_t elem, int local, int nnodes, const har_algo_cfg_t *cfg)
{
    har_plan_t p = har_plan(count, elem, local, nnodes, cfg);
    size_t slot = (size_t)cfg->slot_bytes;
    int one_shot = nnodes == 1 && local > 1 && count * elem <= (size_t)cfg->one_shot_max;
    CHECK(!!p.one_shot == one_shot, "count=%zu elem=%zu local=%d nodes=%d one_shot_max=%lld: one_shot=%d",
          count, elem, local, nnodes, cfg->one_shot_max, p.one_shot);
    size_t bytes = p.chunk_elems * elem;
    CHECK(p.chunk_elems > 0 && bytes % ALIGN == 0, "elem=%zu slot=%zu: chunk of %zu elements (%zu bytes)",
          elem, slot, p.chunk_elems, bytes);
    if (slot >= ALIGN)
        CHECK(bytes <= slot && bytes > slot - ALIGN,
              "elem=%zu slot=%zu: chunk of %zu bytes is not the most whole units that fit",
              elem, slot, bytes);
    else  /* a chunk must make progress even when the slot is smaller than a unit */
        CHECK(bytes == ALIGN, "elem=%zu slot=%zu: chunk of %zu bytes, want one unit", elem, slot, bytes);
}

/* Counts around the interesting byte sizes of one element size. */
static void sweep_plan(size_t elem, const har_algo_cfg_t *cfg)
{
    static const int locals[] = {1, 2, 3, 8}, nodes[] = {1, 2, 4};
    size_t counts[] = {0, 1, 2, 7, 63, 64, 65, 1000, 4097, 1u << 20, INT_MAX,
                       (size_t)cfg->one_shot_max / elem, (size_t)cfg->one_shot_max / elem + 1,
                       (size_t)cfg->slot_bytes / elem, (size_t)cfg->slot_bytes / elem + 1};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t l = 0; l < sizeof locals / sizeof locals[0]; l++)
            for (size_t k = 0; k < sizeof nodes / sizeof nodes[0]; k++)
                check_plan(counts[c], elem, locals[l], nodes[k], cfg);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    rng_state = seed ? seed : 1;
    static const size_t elems[] = {1, 2, 4, 8};  /* the sizes of every type har reduces */

    /* Shards: fixed edge cases, random sizes, and part counts up to large nodes and rings. */
    size_t ns[64] = {0, 1, 2, 7, 15, 16, 17, 63, 64, 65, 1000, 4097, 65537, INT_MAX};
    size_t nn = 14;
    while (nn < 54) ns[nn++] = rng() % (1u << 20);
    while (nn < 64) ns[nn++] = rng() % ((size_t)INT_MAX + 1);
    static const int many[] = {16, 64, 255, 1000};
    for (size_t e = 0; e < 4; e++)
        for (size_t i = 0; i < nn; i++) {
            for (int parts = 1; parts <= 9; parts++) check_shards(ns[i], elems[e], parts);
            for (size_t m = 0; m < sizeof many / sizeof many[0]; m++) check_shards(ns[i], elems[e], many[m]);
        }

    /* Plans: slots below, at and around one unit, and one_shot_max edges;
     * then whatever this environment's HAR_* variables give. */
    static const long long slots[] = {0, 1, 63, 64, 65, 127, 128, 1000, 4096, 1 << 20, (1 << 20) + 3, 1ll << 30};
    static const long long shots[] = {0, 1, 64, 16384, 1ll << 30};
    for (size_t s = 0; s < sizeof slots / sizeof slots[0]; s++)
        for (size_t o = 0; o < sizeof shots / sizeof shots[0]; o++)
            for (size_t e = 0; e < 4; e++) {
                har_algo_cfg_t cfg = {.slot_bytes = slots[s], .one_shot_max = shots[o]};
                sweep_plan(elems[e], &cfg);
            }
    har_config_load();
    har_algo_cfg_t env;
    har_algo_cfg_local(&env);
    for (size_t e = 0; e < 4; e++) sweep_plan(elems[e], &env);

    printf("test_plan: %s: %lu checks, %lu failed (seed %" PRIu64 ")\n",
           failures ? "FAIL" : "ok", checks, failures, seed);
    return failures ? 1 : 0;
}
