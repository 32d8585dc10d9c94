/* Unit test of the pure planning functions (src/plan/).
 *
 * har_plan_shard: every rank computes every shard's place on its own, so the
 * layout must tile [0, n) exactly, keep shards apart by whole 64-byte units
 * (two writers never share a cache line) and stay balanced.
 * har_plan_chunk_elems: chunks that fill a slot with whole units.
 * har_plan: against a reference written here from the rules as the README
 * states them (forced choice where a plan meets it, the table's row where
 * one fits, else the thresholds), over sizes, shapes, memory kinds, engines
 * on offer and forced choices; the paths and chunk of every plan. The plan
 * reads the engines' descriptors as this build registers them (the test
 * build's fake engine among them); the reference knows their rules apart.
 * har_plan_tune_parse/lookup: the row format, machine classes, bad lines.
 * har_plan_tune_derive: the rule that makes rows from measurements, on noise,
 * clear winners, dropped candidates and the committed style of data.
 * har_plan_grid: the kernels' grid never asks more blocks of a GPU than fit
 * at once, over every rank that may share it.
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
#include "core/types.h"
#include "engines/engine.h"
#include "plan/derive.h"
#include "plan/plan.h"

#define ALIGN 64  /* bytes: the alignment plan.h promises for shards and chunks */

#include "unit.h"

#define B(p) (1u << HAR_PATH_##p)
#define HOST1 (B(HOST_SEGMENT) | B(ONE_SHOT))
#define HOST2 (B(HOST_SEGMENT) | B(TWO_SHOT))
#define IPC1 (B(IPC) | B(ONE_SHOT))
#define IPC2 (B(IPC) | B(TWO_SHOT))
#define PUSH1 (IPC1 | B(PUSH))

static void check_shards(size_t n, size_t elem, int parts)
{
    size_t unit = ALIGN / elem;              /* elements in one 64-byte unit */
    size_t units = (n + unit - 1) / unit;    /* a partial tail counts as a unit */
    size_t fair = units / (size_t)parts;     /* each shard holds fair or fair + 1 units */
    size_t end = 0;                          /* where the previous shard ended */
    unsigned long before = failures;
    for (int i = 0; i < parts && failures == before; i++) {
        size_t off, len;
        har_plan_shard(n, elem, parts, i, &off, &len);
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
    size_t bytes = har_plan_chunk_elems(slot, elem) * elem;
    CHECK(bytes > 0 && bytes % ALIGN == 0, "elem=%zu slot=%zu: chunk of %zu bytes", elem, slot, bytes);
    if (slot >= ALIGN)
        CHECK(bytes <= slot && bytes > slot - ALIGN,
              "elem=%zu slot=%zu: chunk of %zu bytes is not the most whole units that fit", elem, slot, bytes);
    else  /* a chunk must make progress even when the slot is smaller than a unit */
        CHECK(bytes == ALIGN, "elem=%zu slot=%zu: chunk of %zu bytes, want one unit", elem, slot, bytes);
}

/* ---- the plan, against a reference of the README's rules ----------------- */

#define FAKE B(FAKE)
static int check_mode;  /* HAR_CHECK in the settings being swept */

/* Is engine `path` built here and on offer? */
static int offered(const har_plan_in_t *in, int path) { return har_engine_set()->by_path[path] && (in->engines & (1u << path)); }

/* What can serve the call, as the README lists it. */
static int can_serve(unsigned choice, const har_plan_in_t *in)
{
    int one_node = in->nnodes == 1;
    int kernels = in->dev_type != HAR_DT_NONE && in->dev_op != HAR_OP_NONE;
    int nccl_op = in->dev_op == HAR_OP_SUM || in->dev_op == HAR_OP_PROD || in->dev_op == HAR_OP_MIN ||
                  in->dev_op == HAR_OP_MAX;
    int ipc = in->on_device && offered(in, HAR_PATH_IPC) && kernels && in->local_size <= 8 && !check_mode;
    if (choice == HOST2) return 1;
    if (choice == HOST1) return one_node;
    if (choice == IPC1 || choice == PUSH1) return ipc && one_node;
    if (choice == IPC2) return ipc && (one_node || in->uniform);
    if (choice == B(NCCL))
        return in->on_device && offered(in, HAR_PATH_NCCL) && kernels && nccl_op && one_node && !in->shared_gpu &&
               !check_mode;
    if (choice == FAKE) return offered(in, HAR_PATH_FAKE) && (in->forced & FAKE) && one_node && !check_mode;
    /* Not where a started call runs in a fiber (har_plan_in_t.progressed), unless forced. */
    if (choice == B(MPI)) return (one_node && !in->progressed) || (in->forced & B(MPI));
    return 0;
}

/* The thresholds' preference, written out: the order in which the README
 * says they try what can serve. */
static int thresholds_order(const har_plan_in_t *in, const har_settings_t *s, unsigned *order)
{
    int n = 0, one_node = in->nnodes == 1;
    /* Small device calls across nodes: the host segment first. */
    if (in->on_device && !one_node && s->device_host_max > 0 && in->bytes <= (uint64_t)s->device_host_max)
        order[n++] = HOST2;
    if (in->on_device) {
        if (s->nccl_min_bytes > 0 && in->bytes >= (uint64_t)s->nccl_min_bytes) order[n++] = B(NCCL);
        /* The push kernels first, up to HAR_DEVICE_PUSH_MAX of what is one-shot. */
        if (one_node && in->bytes <= (uint64_t)s->device_one_shot_max && s->device_push_max > 0 &&
            in->bytes <= (uint64_t)s->device_push_max)
            order[n++] = PUSH1;
        if (one_node && in->bytes <= (uint64_t)s->device_one_shot_max) order[n++] = IPC1, order[n++] = IPC2;
        else order[n++] = IPC2, order[n++] = IPC1;
        order[n++] = B(NCCL);  /* before copying device buffers through host memory */
    }
    if (one_node && in->bytes <= (uint64_t)s->one_shot_max) order[n++] = HOST1, order[n++] = HOST2;
    else order[n++] = HOST2, order[n++] = HOST1;
    order[n++] = FAKE;  /* only ever when forced */
    order[n++] = B(MPI);
    return n;
}

/* Keeps the choices that meet `want`, if any does. */
static void keep_meeting(unsigned *c, int *n, unsigned want)
{
    int m = 0;
    for (int k = 0; k < *n; k++) m += (c[k] & want) == want;
    if (!want || !m) return;
    m = 0;
    for (int k = 0; k < *n; k++)
        if ((c[k] & want) == want) c[m++] = c[k];
    *n = m;
}

/* The plan the README promises: among what can serve, in the thresholds'
 * order, those meeting the forced choice (if any do), then those meeting
 * the table's row (if any do); the first. */
static unsigned reference(const har_plan_in_t *in, const har_settings_t *s, const har_plan_tune_row_t *row)
{
    unsigned order[16], cand[16];
    int n = thresholds_order(in, s, order), m = 0;
    for (int k = 0; k < n; k++) {
        int seen = 0;
        for (int j = 0; j < m; j++) seen |= cand[j] == order[k];
        if (!seen && can_serve(order[k], in)) cand[m++] = order[k];
    }
    keep_meeting(cand, &m, in->forced);
    keep_meeting(cand, &m, row ? row->choice : 0);
    return m ? cand[0] : B(MPI);
}

/* Started calls planned ahead beyond HAR_DEVICE_AHEAD_MAX: the sweeps must reach some. */
static unsigned long started_beyond_blocking;

static void check_plan(const har_plan_in_t *in, const har_settings_t *s)
{
    har_plan_t p = har_plan(in, s);
    const har_plan_tune_row_t *row = har_plan_tune_lookup(s->tune, s->ntune, in->on_device, in->cls, in->local_size,
                                                          in->nnodes, in->bytes);
    check_mode = s->check;
    unsigned want = reference(in, s, row);
    unsigned got = p.paths & (HOST1 | HOST2 | IPC1 | IPC2 | B(PUSH) | B(NCCL) | FAKE | B(MPI));
    CHECK(got == want, "bytes=%" PRIu64 " local=%d nodes=%d uniform=%d device=%d engines=%#x forced=%#x check=%d "
          "row=%s: got %#x, want %#x", in->bytes, in->local_size, in->nnodes, in->uniform, in->on_device, in->engines,
          in->forced, (int)s->check, row ? "yes" : "no", got, want);
    int engine_bit = 1u << p.engine;
    CHECK((p.paths & engine_bit) && (p.engine == HAR_PATH_MPI || har_engine_set()->by_path[p.engine]),
          "plan engine %d not among its paths %#x", p.engine, p.paths);
    CHECK(p.one_shot == !!(p.paths & B(ONE_SHOT)), "one_shot %d but paths %#x", p.one_shot, p.paths);
    unsigned transports = B(RING) | B(DOUBLING) | B(INTER_MPI) | B(INTER_NCCL);
    int inter = !!(p.paths & (B(RAILS) | B(LEADER) | transports));
    CHECK(inter == (in->nnodes > 1 && p.engine != HAR_PATH_MPI),
          "nodes=%d engine %d: inter-node paths %#x", in->nnodes, p.engine, p.paths);
    /* The transport: HAR_INTER's, or by size, doubling up to HAR_DOUBLING_MAX;
     * NCCL only where the communicator agreed to it, for its own types
     * (32- and 64-bit floats and integers) and ops (sum, prod, min, max),
     * not under HAR_CHECK, else by size. */
    int t = in->dev_type, o = in->dev_op;
    int nccl_reduces = (t == HAR_DT_F32 || t == HAR_DT_F64 || t == HAR_DT_I32 || t == HAR_DT_U32 || t == HAR_DT_I64 ||
                        t == HAR_DT_U64) && (o == HAR_OP_SUM || o == HAR_OP_PROD || o == HAR_OP_MIN || o == HAR_OP_MAX);
    int by_size = in->bytes <= (uint64_t)s->doubling_max ? HAR_PATH_DOUBLING : HAR_PATH_RING;
    int transport = s->inter_path == HAR_PATH_INTER_NCCL
                        ? (in->nccl_across && !s->check && nccl_reduces ? HAR_PATH_INTER_NCCL : by_size)
                    : s->inter_path != HAR_INTER_AUTO ? s->inter_path
                                                      : by_size;
    if (inter)
        CHECK((p.paths & B(RAILS)) == (in->uniform ? B(RAILS) : 0u) &&
                  (p.paths & transports) == 1u << transport && p.inter == transport,
              "inter-node paths %#x, transport %d (uniform %d, bytes %" PRIu64 ", HAR_INTER %d)", p.paths, p.inter,
              in->uniform, in->bytes, s->inter_path);
    else
        CHECK(p.inter == -1, "no step between nodes, but transport %d", p.inter);
    /* Ahead (no host step before the kernels): the IPC kernels on one node, device buffers, push calls and
     * calls up to HAR_DEVICE_AHEAD_MAX (HAR_DEVICE_START_MAX for started ones). */
    long long ahead_max = in->started ? s->device_start_max : s->device_ahead_max;
    int ahead = p.engine == HAR_PATH_IPC && in->nnodes == 1 && in->on_device &&
                ((p.paths & B(PUSH)) || (ahead_max > 0 && in->bytes <= (uint64_t)ahead_max));
    CHECK(!!(p.paths & B(AHEAD)) == ahead, "ahead: paths %#x, want %d (engine %d, nodes %d, bytes %" PRIu64 ")",
          p.paths, ahead, p.engine, in->nnodes, in->bytes);
    if (p.engine == HAR_PATH_IPC && in->nnodes == 1 && in->on_device && in->started &&
        in->bytes > (uint64_t)s->device_ahead_max && (p.paths & B(AHEAD)))
        started_beyond_blocking++;
    /* Streamed: the ring alone on its node, on host buffers, by the host segment, unchecked. */
    int streamed = transport == HAR_PATH_RING && inter && in->local_size == 1 && in->uniform && in->host_buffers &&
                   !s->check && p.engine == HAR_PATH_HOST_SEGMENT;
    CHECK(p.streamed == streamed && !!(p.paths & B(STREAMED)) == streamed,
          "streamed %d, paths %#x; want %d (local %d, uniform %d, host buffers %d, transport %d, engine %d, check %d)",
          p.streamed, p.paths, streamed, in->local_size, in->uniform, in->host_buffers, p.inter, p.engine, (int)s->check);
    size_t host = (size_t)s->slot_bytes, dev = (size_t)s->device_slot_bytes;
    size_t chunk = in->nnodes > 1 ? (host < dev ? host : dev) : p.engine == HAR_PATH_IPC ? dev : host;
    CHECK(p.chunk_bytes == chunk, "chunk %zu, want %zu", p.chunk_bytes, chunk);
    CHECK(p.row == NULL || p.row == row, "the plan names a row the lookup did not find");
}

static void sweep_plans(const har_settings_t *s)
{
    static const int locals[] = {1, 2, 3, 8, 9}, nodes[] = {1, 2, 4};
    static const unsigned forced[] = {0, B(MPI), HOST1, HOST2, B(HOST_SEGMENT), B(ONE_SHOT), B(TWO_SHOT),
                                      B(IPC), IPC1, IPC2, B(PUSH), PUSH1, B(NCCL), B(NCCL) | B(ONE_SHOT), FAKE};
    static const unsigned engines[] = {B(HOST_SEGMENT), B(HOST_SEGMENT) | B(IPC), B(HOST_SEGMENT) | B(NCCL),
                                       B(HOST_SEGMENT) | B(IPC) | B(NCCL), B(HOST_SEGMENT) | B(IPC) | B(NCCL) | FAKE};
    static const int kinds[][2] = {{HAR_DT_F32, HAR_OP_SUM}, {HAR_DT_I64, HAR_OP_BXOR}, {HAR_DT_NONE, HAR_OP_SUM},
                                   {HAR_DT_U64, HAR_OP_MAX}};
    uint64_t sizes[] = {1, 4, 64, 1000, 1u << 20, (uint64_t)INT_MAX * 8, (uint64_t)s->one_shot_max,
                        (uint64_t)s->one_shot_max + 1, (uint64_t)s->device_one_shot_max,
                        (uint64_t)s->device_one_shot_max + 1, (uint64_t)s->device_push_max,
                        (uint64_t)s->device_push_max + 1, (uint64_t)s->nccl_min_bytes,
                        (uint64_t)s->nccl_min_bytes - 1, (uint64_t)s->doubling_max,
                        (uint64_t)s->doubling_max + 1, (uint64_t)s->device_host_max,
                        (uint64_t)s->device_host_max + 1, (uint64_t)s->device_ahead_max,
                        (uint64_t)s->device_ahead_max + 1, (uint64_t)s->device_start_max,
                        (uint64_t)s->device_start_max + 1};
    for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++)
        for (size_t l = 0; l < 5; l++)
            for (size_t k = 0; k < 3; k++)
                for (int uniform = 0; uniform < 2; uniform++)
                    for (int device = 0; device < 2; device++)
                        for (size_t e = 0; e < 5; e++)
                            for (size_t f = 0; f < sizeof forced / sizeof forced[0]; f++)
                                for (size_t t = 0; t < 4; t++)
                                    for (int shared = 0; shared < 2; shared++) {
                                        har_plan_in_t in = {sizes[b], 4, locals[l], nodes[k], uniform || nodes[k] == 1,
                                                            device, shared, kinds[t][0], kinds[t][1],
                                                            har_engine_set(), engines[e], forced[f], "TEST_CLASS/1",
                                                            !device, 0, (int)((b + f + shared) % 2),
                                                            (int)((b + e + t) % 2)};
                                        check_plan(&in, s);
                                        in.host_buffers = 0;  /* device buffers the node did not agree on */
                                        check_plan(&in, s);
                                        in.started = 1;  /* MPI_Iallreduce, MPI_Start */
                                        check_plan(&in, s);
                                    }
}

/* ---- the table ------------------------------------------------------------ */

static void check_table(void)
{
    static const char table[] =
        "# comment\n"
        "\n"
        "device GPU_A/nvlink 2 1 1000 ipc+two_shot\n"
        "  device GPU_A/nvlink 2 1 100000 nccl   \n"
        "device GPU_A/nvlink 2 1 inf mpi\n"
        "device * 2 1 inf host_segment\n"
        "host CPU_X/16 4 1 4096 mpi\n"
        "host * 4 2 inf mpi\n";
    har_settings_t s = {.slot_bytes = 1 << 20, .device_slot_bytes = 32 << 20, .one_shot_max = 16384, .inter_path = HAR_PATH_RING,
                        .device_one_shot_max = 262144, .device_host_max = 131072};
    int bad = 0;
    s.ntune = har_plan_tune_parse(table, s.tune, HAR_TUNE_MAX_ROWS, &bad);
    CHECK(s.ntune == 6, "table: %d rows, want 6 (bad line %d)", s.ntune, bad);
    unsigned all = B(HOST_SEGMENT) | B(IPC) | B(NCCL);
    struct { uint64_t bytes; int local, nodes, device; unsigned engines; const char *cls; unsigned want; } cases[] = {
        {1, 2, 1, 1, all, "GPU_A/nvlink", IPC2},               /* first row */
        {1000, 2, 1, 1, all, "GPU_A/nvlink", IPC2},            /* its last byte */
        {1001, 2, 1, 1, all, "GPU_A/nvlink", B(NCCL)},         /* the next row */
        {100000, 2, 1, 1, B(HOST_SEGMENT) | B(IPC), "GPU_A/nvlink", IPC1},  /* NCCL not on offer: thresholds */
        {1000, 2, 1, 1, B(HOST_SEGMENT) | B(NCCL), "GPU_B/none", HOST1},  /* the "*" row: host segment */
        {1u << 20, 2, 1, 1, B(HOST_SEGMENT) | B(NCCL), "GPU_B/none", HOST2},
        {1u << 30, 2, 1, 1, all, "GPU_A/nvlink", B(MPI)},      /* inf */
        {1, 2, 1, 1, all, "GPU_B/pcie", HOST1},                /* another class: the "*" row */
        {1u << 20, 2, 1, 1, all, NULL, HOST2},                 /* class unknown: the "*" row, host thresholds */
        {1u << 20, 2, 1, 0, B(HOST_SEGMENT) | B(NCCL), "X", HOST2},  /* host buffers: no NCCL */
        {1u << 30, 2, 1, 0, all, "CPU_X/16", HOST2},           /* host buffers: no row for 2 ranks */
        {100, 4, 1, 0, all, "CPU_X/16", B(MPI)},
        {100, 4, 1, 0, all, "CPU_X/8", HOST1},                 /* other cores per rank: thresholds */
        {5000, 4, 1, 0, all, "CPU_X/16", HOST1},               /* past the host row: thresholds */
        {100, 4, 2, 0, all, "CPU_X/16", HOST2},                /* two nodes: "mpi" is no candidate there */
        {100, 2, 2, 1, all, "GPU_A/nvlink", HOST2},            /* device, two nodes, small: the host segment */
        {1u << 20, 2, 2, 1, all, "GPU_A/nvlink", IPC2},        /* past HAR_DEVICE_HOST_MAX: the kernels */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* A build without CUDA has no device engines, and no call of its
         * is on device buffers. */
        if (cases[i].device && !har_engines[HAR_PATH_IPC]) continue;
        har_plan_in_t in = {cases[i].bytes, 4, cases[i].local, cases[i].nodes, 1, cases[i].device, 0, HAR_DT_F32,
                            HAR_OP_SUM, har_engine_set(), cases[i].engines, 0, cases[i].cls, !cases[i].device, 0, 0, 0};
        har_plan_t p = har_plan(&in, &s);
        unsigned got = p.paths & (HOST1 | HOST2 | IPC1 | IPC2 | B(NCCL) | B(MPI));
        CHECK(got == cases[i].want, "table case %zu (bytes %" PRIu64 ", %s): got %#x, want %#x", i, cases[i].bytes,
              cases[i].cls ? cases[i].cls : "no class", got, cases[i].want);
        check_plan(&in, &s);
    }
    /* A forced choice beats the table. */
    har_plan_in_t in = {1, 4, 2, 1, 1, 1, 0, HAR_DT_F32, HAR_OP_SUM, har_engine_set(), all, B(HOST_SEGMENT),
                        "GPU_A/nvlink", 0, 0, 0, 0};
    CHECK(har_plan(&in, &s).engine == HAR_PATH_HOST_SEGMENT, "forced host_segment over the table");

    static const char *const bad_tables[] = {
        "gpu X 2 1 10 nccl\n", "device X 0 1 10 nccl\n", "device X 2 0 10 nccl\n", "device X 2 1 10 fast\n",
        "device X 2 1 10 auto\n", "device X 2 1 -5 nccl\n", "device X 2 1 10 nccl extra\n",
        "device X 2 1 1e3 nccl\n", "device X 2 1 nccl\n", "device 2 1 10 nccl\n", "device X 2 1 10 ipc+ring\n",
        "device X 2 1 10 ipc++one_shot\n", "# fine\ndevice X 2 1 10 nccl\nhost x 1 10 mpi\n"};
    static const int bad_lines[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3};
    har_plan_tune_row_t rows[HAR_TUNE_MAX_ROWS];
    for (size_t i = 0; i < sizeof bad_tables / sizeof bad_tables[0]; i++) {
        bad = 0;
        int n = har_plan_tune_parse(bad_tables[i], rows, HAR_TUNE_MAX_ROWS, &bad);
        CHECK(n == -1 && bad == bad_lines[i], "bad table %zu: %d rows, bad line %d (want -1, line %d)", i, n, bad,
              bad_lines[i]);
    }
    /* More rows than fit. */
    char big[64 * 40] = "";
    for (int i = 0; i <= HAR_TUNE_MAX_ROWS; i++) strcat(big, "host * 2 1 10 mpi\n");
    CHECK(har_plan_tune_parse(big, rows, HAR_TUNE_MAX_ROWS, &bad) == -1 && bad == HAR_TUNE_MAX_ROWS + 1,
          "a table of %d rows was accepted", HAR_TUNE_MAX_ROWS + 1);
    /* A row formats back to the text it came from. */
    char text[256];
    har_plan_tune_format(&s.tune[1], text, sizeof text);
    CHECK(strcmp(text, "device GPU_A/nvlink 2 1 100000 nccl") == 0, "row formatted as '%s'", text);
    /* The shipped table parses. */
    CHECK(har_plan_tune_parse(har_plan_tune_builtin, rows, HAR_TUNE_MAX_ROWS, &bad) >= 0,
          "the built-in table: bad line %d", bad);
}

/* ---- the tuning rule ------------------------------------------------------- */

typedef struct { uint64_t bytes; unsigned choice; double median, p90; } meas_t;

static int derive(const meas_t *m, int n, har_plan_tune_row_t *rows)
{
    har_measure_t in[64];
    for (int i = 0; i < n; i++) in[i] = (har_measure_t){m[i].bytes, m[i].choice, m[i].median, m[i].p90, 1};
    har_plan_tune_row_t shape = {0, 1, 2, 0, 0, "C/1"};
    return har_plan_tune_derive(in, n, &shape, rows, HAR_TUNE_MAX_ROWS);
}

static void check_derive(void)
{
    har_plan_tune_row_t rows[HAR_TUNE_MAX_ROWS];
    /* Noise: B is 3% faster at some sizes, A at others; A won the first. */
    meas_t noise[] = {{4, HOST1, 1.00, 1.10}, {4, B(MPI), 1.02, 1.12},  {8, HOST1, 1.03, 1.13},
                      {8, B(MPI), 1.00, 1.10}, {16, HOST1, 1.00, 1.10}, {16, B(MPI), 0.97, 1.07},
                      {32, HOST1, 1.01, 1.11}, {32, B(MPI), 1.03, 1.13}};
    int n = derive(noise, 8, rows);
    CHECK(n == 1 && rows[0].choice == HOST1 && rows[0].max_bytes == UINT64_MAX, "noise: %d rows", n);
    /* Faster by 10% but within A's spread (p90 above A's median): no switch. */
    meas_t spread[] = {{4, HOST1, 1.00, 1.05}, {4, B(MPI), 1.20, 1.30}, {8, HOST1, 1.00, 1.05},
                       {8, B(MPI), 0.90, 1.20}, {16, HOST1, 1.00, 1.05}, {16, B(MPI), 0.90, 1.20}};
    n = derive(spread, 6, rows);
    CHECK(n == 1 && rows[0].choice == HOST1, "spread: %d rows, first %#x", n, n > 0 ? rows[0].choice : 0);
    /* Clearly faster at one size only, then not: no switch. */
    meas_t once[] = {{4, HOST1, 1.00, 1.05}, {4, HOST2, 2.00, 2.10}, {8, HOST1, 1.00, 1.05},
                     {8, HOST2, 0.50, 0.55}, {16, HOST1, 1.00, 1.05}, {16, HOST2, 1.10, 1.20}};
    n = derive(once, 6, rows);
    CHECK(n == 1 && rows[0].choice == HOST1, "one clear size: %d rows", n);
    /* Clearly faster at two sizes in a row: it takes over from the first. */
    meas_t twice[] = {{4, HOST1, 1.00, 1.05}, {4, HOST2, 2.00, 2.10}, {8, HOST1, 2.00, 2.10},
                      {8, HOST2, 1.50, 1.60}, {16, HOST1, 4.00, 4.20}, {16, HOST2, 2.00, 2.10},
                      {32, HOST1, 8.00, 8.20}, {32, HOST2, 4.00, 4.10}};
    n = derive(twice, 8, rows);
    CHECK(n == 2 && rows[0].choice == HOST1 && rows[0].max_bytes == 4 && rows[1].choice == HOST2 &&
              rows[1].max_bytes == UINT64_MAX, "two clear sizes: %d rows", n);
    /* The last size needs no next one; a dropped winner gives way. */
    meas_t last[] = {{4, HOST1, 1.00, 1.05}, {4, B(MPI), 2.00, 2.10}, {8, B(MPI), 3.00, 3.10},
                     {16, B(MPI), 3.00, 3.10}, {16, HOST2, 1.00, 1.10}};
    n = derive(last, 5, rows);
    CHECK(n == 3 && rows[0].choice == HOST1 && rows[0].max_bytes == 4 && rows[1].choice == B(MPI) &&
              rows[1].max_bytes == 8 && rows[2].choice == HOST2, "last size and dropped winner: %d rows", n);
    /* Failed measurements never win. */
    har_measure_t failed[] = {{4, HOST1, 1.0, 1.1, 0}, {4, HOST2, 2.0, 2.1, 1}};
    har_plan_tune_row_t shape = {0, 1, 2, 0, 0, "C/1"};
    n = har_plan_tune_derive(failed, 2, &shape, rows, HAR_TUNE_MAX_ROWS);
    CHECK(n == 1 && rows[0].choice == HOST2, "a failed candidate won");
}

/* ---- the kernels' grid ------------------------------------------------------ */

/* Every client of a GPU running the grid at once must fit on it, and on
 * the multiprocessors this context may use; the grid is as large as that
 * allows, up to the cap. The numbers are the H200's (132 multiprocessors,
 * one block of the kernels each) and others around them. */
static void check_grid(void)
{
    static const int per_sms[] = {0, 1, 2, 3}, sms[] = {1, 2, 7, 66, 108, 132}, clients[] = {0, 1, 2, 3, 4, 8, 9,
                                                                                             132, 133, 300};
    for (size_t a = 0; a < sizeof per_sms / sizeof *per_sms; a++)
        for (size_t g = 0; g < sizeof sms / sizeof *sms; g++)
            for (size_t x = 0; x <= g; x++)  /* a context's share: never more than the GPU has */
                for (size_t c = 0; c < sizeof clients / sizeof *clients; c++)
                    for (int cap = 1; cap <= 64; cap *= 4) {
                        int per_sm = per_sms[a], gpu = sms[g], ctx = sms[x], n = clients[c];
                        int grid = har_plan_grid(per_sm, ctx, gpu, n, cap);
                        long long fit = (long long)per_sm * gpu;
                        CHECK(grid >= 0 && grid <= cap, "grid %d outside 0..%d", grid, cap);
                        CHECK((long long)grid * n <= fit && grid <= per_sm * ctx,
                              "per_sm %d, %d of %d SMs, %d clients: grid %d does not fit", per_sm, ctx, gpu, n, grid);
                        if (n > 0 && grid < cap)  /* one more block each would not fit */
                            CHECK((long long)(grid + 1) * n > fit || grid + 1 > per_sm * ctx,
                                  "per_sm %d, %d of %d SMs, %d clients: grid %d could be larger", per_sm, ctx, gpu, n,
                                  grid);
                    }
    /* The case that hung: 4 ranks on one H200, at most 33 blocks each. */
    CHECK(har_plan_grid(1, 132, 132, 4, 64) == 33, "4 ranks on an H200: grid %d", har_plan_grid(1, 132, 132, 4, 64));
    CHECK(har_plan_grid(1, 132, 132, 8, 64) == 16, "8 ranks on an H200: grid %d", har_plan_grid(1, 132, 132, 8, 64));
    CHECK(har_plan_grid(1, 132, 132, 1, 64) == 64, "one rank on an H200: grid %d", har_plan_grid(1, 132, 132, 1, 64));
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
    /* Plans: thresholds at their edges, both inter-node engines, then
     * whatever this environment's HAR_* variables give (table aside). */
    static const long long shots[] = {0, 64, 16384, 1ll << 30};
    static const int inters[] = {HAR_INTER_AUTO, HAR_PATH_RING, HAR_PATH_DOUBLING, HAR_PATH_INTER_MPI,
                                 HAR_PATH_INTER_NCCL};
    for (size_t o = 0; o < 4; o++)
        for (size_t d = 0; d < 4; d++)
            for (size_t m = 0; m < 4; m++) {
                har_settings_t s = {.slot_bytes = 1 << 20, .device_slot_bytes = 32 << 20, .one_shot_max = shots[o],
                                    .device_one_shot_max = shots[d], .nccl_min_bytes = shots[m],
                                    .inter_path = inters[(o + d + m) % 5], .doubling_max = shots[(m + 1) % 4],
                                    .device_host_max = shots[(o + m) % 4], .device_push_max = shots[(d + m + 1) % 4],
                                    .device_ahead_max = shots[(o + d + 2) % 4],
                                    .device_start_max = shots[(o + m + 3) % 4],
                                    .check = d == 3 && m == 3,
                                    .max_bytes = 1ll << 50};
                sweep_plans(&s);
            }
    /* A build without CUDA has no kernels to plan them on. */
    CHECK(started_beyond_blocking > 0 || !har_engines[HAR_PATH_IPC],
          "no started call was planned on the kernels beyond HAR_DEVICE_AHEAD_MAX");
    check_table();
    check_derive();
    check_grid();
    har_config_load(0);
    har_settings_t env;
    har_plan_settings_from(&har_cfg, &env);
    sweep_plans(&env);

    printf("test_plan: %s: %lu checks, %lu failed (seed %" PRIu64 ")\n",
           failures ? "FAIL" : "ok", checks, failures, seed);
    return failures ? 1 : 0;
}
