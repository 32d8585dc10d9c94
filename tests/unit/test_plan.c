/* Unit test of the pure planning functions (src/plan.c).
 *
 * har_shard: every rank computes every shard's place on its own, so the
 * layout must tile [0, n) exactly, keep shards apart by whole 64-byte units
 * (two writers never share a cache line) and stay balanced.
 * har_choose: a forced algorithm where it can serve, else the tuning table's
 * row where one fits and can serve, else NCCL from HAR_NCCL_MIN_BYTES where
 * it is on offer, else one-shot exactly for small messages on one node with
 * peers; har_tune_parse: good tables and each kind of bad
 * line; har_chunk_elems: chunks that fill a slot with whole units.
 *
 * Usage: test_plan [SEED]. Exit 0 on success, 1 on failure. */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Chunks fill a slot with whole units, and always make progress. */
static void check_chunk(size_t slot, size_t elem)
{
    size_t bytes = har_chunk_elems(slot, elem) * elem;
    CHECK(bytes > 0 && bytes % ALIGN == 0, "elem=%zu slot=%zu: chunk of %zu bytes", elem, slot, bytes);
    if (slot >= ALIGN)
        CHECK(bytes <= slot && bytes > slot - ALIGN,
              "elem=%zu slot=%zu: chunk of %zu bytes is not the most whole units that fit", elem, slot, bytes);
    else  /* a chunk must make progress even when the slot is smaller than a unit */
        CHECK(bytes == ALIGN, "elem=%zu slot=%zu: chunk of %zu bytes, want one unit", elem, slot, bytes);
}

#define ALL_ALGOS ((1u << HAR_ALGO_COUNT) - 1)

/* Without a table row: forced algorithms where they can serve, else
 * one-shot exactly for small messages on one node with peers. */
static void check_choice(size_t bytes, int local, int nnodes, int device, const har_algo_cfg_t *cfg)
{
    har_choice_t ch0;
    int one_node = nnodes == 1 && local > 1;
    long long max = device ? cfg->device_one_shot_max : cfg->one_shot_max;
    har_algo_t thresholds = one_node && bytes <= (size_t)max ? HAR_ALGO_ONE_SHOT : HAR_ALGO_TWO_SHOT;
    if (device && one_node && cfg->nccl_min_bytes > 0 && bytes >= (size_t)cfg->nccl_min_bytes)
        thresholds = HAR_ALGO_NCCL;
    for (int forced = HAR_ALGO_AUTO; forced < HAR_ALGO_COUNT; forced++) {
        har_choice_t ch = har_choose(bytes, local, nnodes, device, ALL_ALGOS, forced, cfg);
        int can = forced == HAR_ALGO_TWO_SHOT || forced == HAR_ALGO_MPI ||
                  (forced == HAR_ALGO_ONE_SHOT && one_node) || (forced == HAR_ALGO_HOST_SEGMENT && device) ||
                  (forced == HAR_ALGO_NCCL && device && one_node);
        har_algo_t want = can ? (har_algo_t)forced : thresholds;
        CHECK(ch.algo == want, "bytes=%zu local=%d nodes=%d device=%d forced %s: got %s, want %s", bytes, local,
              nnodes, device, har_algo_name(forced), har_algo_name(ch.algo), har_algo_name(want));
        int one = want == HAR_ALGO_ONE_SHOT ||
                  (want == HAR_ALGO_HOST_SEGMENT && one_node && bytes <= (size_t)cfg->one_shot_max);
        CHECK(ch.one_shot == one, "bytes=%zu local=%d nodes=%d device=%d forced %s: one_shot=%d", bytes, local,
              nnodes, device, har_algo_name(forced), ch.one_shot);
    }
    /* Without NCCL on offer, the thresholds never pick it. */
    ch0 = har_choose(bytes, local, nnodes, device, ALL_ALGOS & ~HAR_ALGO_BIT(NCCL), HAR_ALGO_AUTO, cfg);
    CHECK(ch0.algo != HAR_ALGO_NCCL, "bytes=%zu: NCCL chosen though not offered", bytes);
    /* Nothing offered: two-shot serves every call. */
    har_choice_t ch = har_choose(bytes, local, nnodes, device, 0, HAR_ALGO_NCCL, cfg);
    CHECK(ch.algo == HAR_ALGO_TWO_SHOT && !ch.one_shot, "bytes=%zu: %s when nothing was offered", bytes,
          har_algo_name(ch.algo));
}

/* Sizes around the interesting byte counts of one configuration. */
static void sweep_choice(const har_algo_cfg_t *cfg)
{
    static const int locals[] = {1, 2, 3, 8}, nodes[] = {1, 2, 4};
    size_t sizes[] = {0, 1, 4, 64, 1000, 1u << 20, (size_t)INT_MAX * 8, (size_t)cfg->one_shot_max,
                      (size_t)cfg->one_shot_max + 1, (size_t)cfg->device_one_shot_max,
                      (size_t)cfg->device_one_shot_max + 1, (size_t)cfg->nccl_min_bytes,
                      (size_t)cfg->nccl_min_bytes - 1};
    for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++)
        for (size_t l = 0; l < sizeof locals / sizeof locals[0]; l++)
            for (size_t k = 0; k < sizeof nodes / sizeof nodes[0]; k++)
                for (int device = 0; device < 2; device++)
                    check_choice(sizes[b], locals[l], nodes[k], device, cfg);
}

/* Table rows steer the choice where they fit and where their algorithm can
 * serve; elsewhere the thresholds decide. */
static void check_table(void)
{
    static const char table[] =
        "# comment\n"
        "\n"
        "device 2 1 1000 two_shot\n"
        "  device 2 1 100000 nccl   \n"
        "device 2 1 inf mpi\n"
        "host 4 1 4096 mpi\n"
        "host 4 2 inf mpi\n";
    har_algo_cfg_t cfg = {.slot_bytes = 1 << 20, .one_shot_max = 16384, .device_one_shot_max = 262144};
    int bad = 0;
    cfg.ntune = har_tune_parse(table, cfg.tune, HAR_TUNE_MAX_ROWS, &bad);
    CHECK(cfg.ntune == 5, "table: %d rows, want 5 (bad line %d)", cfg.ntune, bad);
    struct { size_t bytes; int local, nodes, device; unsigned avail; har_algo_t want; } cases[] = {
        {1, 2, 1, 1, ALL_ALGOS, HAR_ALGO_TWO_SHOT},       /* first row */
        {1000, 2, 1, 1, ALL_ALGOS, HAR_ALGO_TWO_SHOT},    /* its last byte */
        {1001, 2, 1, 1, ALL_ALGOS, HAR_ALGO_NCCL},        /* the next row */
        {100000, 2, 1, 1, ALL_ALGOS & ~HAR_ALGO_BIT(NCCL), HAR_ALGO_ONE_SHOT},  /* NCCL not offered: thresholds */
        {1u << 30, 2, 1, 1, ALL_ALGOS, HAR_ALGO_MPI},     /* inf */
        {1u << 30, 2, 1, 0, ALL_ALGOS, HAR_ALGO_TWO_SHOT},/* host buffers: no row */
        {100, 3, 1, 1, ALL_ALGOS, HAR_ALGO_ONE_SHOT},     /* other ranks per node: no row */
        {100, 4, 1, 0, ALL_ALGOS, HAR_ALGO_MPI},
        {5000, 4, 1, 0, ALL_ALGOS, HAR_ALGO_ONE_SHOT},    /* past the host row: thresholds */
        {100, 4, 2, 0, ALL_ALGOS, HAR_ALGO_TWO_SHOT},     /* two nodes: table "mpi" cannot apply */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        har_choice_t ch = har_choose(cases[i].bytes, cases[i].local, cases[i].nodes, cases[i].device,
                                     cases[i].avail, HAR_ALGO_AUTO, &cfg);
        CHECK(ch.algo == cases[i].want, "table case %zu (bytes %zu): got %s, want %s", i, cases[i].bytes,
              har_algo_name(ch.algo), har_algo_name(cases[i].want));
    }
    /* A forced algorithm beats the table. */
    har_choice_t ch = har_choose(1, 2, 1, 1, ALL_ALGOS, HAR_ALGO_HOST_SEGMENT, &cfg);
    CHECK(ch.algo == HAR_ALGO_HOST_SEGMENT, "forced host_segment over the table: %s", har_algo_name(ch.algo));

    static const char *const bad_tables[] = {
        "gpu 2 1 10 nccl\n", "device 0 1 10 nccl\n", "device 2 0 10 nccl\n", "device 2 1 10 fast\n",
        "device 2 1 10 auto\n", "device 2 1 -5 nccl\n", "device 2 1 10 nccl extra\n", "device 2 1 1e3 nccl\n",
        "device 2 1 nccl\n", "# fine\ndevice 2 1 10 nccl\nhost x 1 10 mpi\n"};
    static const int bad_lines[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3};
    har_tune_row_t rows[HAR_TUNE_MAX_ROWS];
    for (size_t i = 0; i < sizeof bad_tables / sizeof bad_tables[0]; i++) {
        bad = 0;
        int n = har_tune_parse(bad_tables[i], rows, HAR_TUNE_MAX_ROWS, &bad);
        CHECK(n == -1 && bad == bad_lines[i], "bad table %zu: %d rows, bad line %d (want -1, line %d)", i, n, bad,
              bad_lines[i]);
    }
    /* More rows than fit. */
    char big[64 * 40] = "";
    for (int i = 0; i <= HAR_TUNE_MAX_ROWS; i++) strcat(big, "host 2 1 10 mpi\n");
    CHECK(har_tune_parse(big, rows, HAR_TUNE_MAX_ROWS, &bad) == -1 && bad == HAR_TUNE_MAX_ROWS + 1,
          "a table of %d rows was accepted", HAR_TUNE_MAX_ROWS + 1);
    /* The shipped table parses. */
    CHECK(har_tune_parse(har_tune_builtin, rows, HAR_TUNE_MAX_ROWS, &bad) >= 0, "the built-in table: bad line %d",
          bad);
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

    /* Chunks: slots below, at and around one unit. */
    static const long long slots[] = {0, 1, 63, 64, 65, 127, 128, 1000, 4096, 1 << 20, (1 << 20) + 3, 1ll << 30};
    for (size_t s = 0; s < sizeof slots / sizeof slots[0]; s++)
        for (size_t e = 0; e < 4; e++) check_chunk((size_t)slots[s], elems[e]);
    /* Choices: one-shot thresholds at their edges, then whatever this
     * environment's HAR_* variables give (its table included). */
    static const long long shots[] = {0, 1, 64, 16384, 1ll << 30};
    for (size_t o = 0; o < sizeof shots / sizeof shots[0]; o++)
        for (size_t d = 0; d < sizeof shots / sizeof shots[0]; d++)
            for (size_t m = 0; m < sizeof shots / sizeof shots[0]; m++) {
                har_algo_cfg_t cfg = {.one_shot_max = shots[o], .device_one_shot_max = shots[d],
                                      .nccl_min_bytes = shots[m]};
                sweep_choice(&cfg);
            }
    check_table();
    har_config_load();
    har_algo_cfg_t env;
    har_algo_cfg_local(&env);
    env.ntune = 0;  /* check_choice assumes no row fits */
    sweep_choice(&env);

    printf("test_plan: %s: %lu checks, %lu failed (seed %" PRIu64 ")\n",
           failures ? "FAIL" : "ok", checks, failures, seed);
    return failures ? 1 : 0;
}
