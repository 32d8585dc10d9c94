/* har-bench: MPI_Allreduce through har beside the alternatives, in one run,
 * interleaved size by size on the same buffers.
 *
 *   har-bench [--min BYTES] [--max BYTES] [--type float|double|int|long]
 *             [--op sum|max|min|prod] [--device] [--iters N] [--warmup N]
 *             [--buffers K] [--check] [--csv FILE] [--quiet] [--tuning TABLE]
 *
 * Candidates: "har" (the intercepted MPI_Allreduce), "mpi" (the MPI's own
 * PMPI_Allreduce; device buffers are staged through host memory around it,
 * as users without a CUDA-aware MPI do), and with --device, where NCCL
 * loads (HAR_NCCL names it), "nccl" (ncclAllReduce, then the stream
 * synchronised: the same blocking contract) and "nccl_ring_ll" (NCCL pinned
 * to the Ring algorithm and LL protocol).
 *
 * --tuning TABLE (the tuning run; not "--tune", which Open MPI's mpirun
 * takes for itself) times har's own paths instead: one_shot, two_shot,
 * host_segment, nccl, mpi, each forced with har_set_algo and checked to have
 * served. It writes the tuning table by the rule in pick_winners, which
 * scripts/derive-tuning applies to the CSV too.
 *
 * Every timed call starts after a barrier, so that one candidate's skew
 * between ranks does not land on the next, and the order of candidates
 * rotates; a call's time is the maximum over ranks. The table gives medians, ratios and bus bandwidth (algorithm
 * bandwidth x 2(n-1)/n); the CSV adds 10th/90th percentiles. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "har.h"
#ifdef HAR_BENCH_CUDA
#include <cuda_runtime.h>
#include "nccl_api.h"
#endif

typedef struct { const char *name; MPI_Datatype type; size_t size; int nccl; } type_opt_t;
static const type_opt_t type_opts[] = {
    {"float", MPI_FLOAT, 4, 7}, {"double", MPI_DOUBLE, 8, 8}, {"int", MPI_INT, 4, 2}, {"long", MPI_LONG, 8, 4}};
static const struct { const char *name; MPI_Op op; int nccl; } op_opts[] = {
    {"sum", MPI_SUM, 0}, {"max", MPI_MAX, 2}, {"min", MPI_MIN, 3}, {"prod", MPI_PROD, 1}};

/* What each candidate runs; tuning candidates are har forced to one path. */
typedef enum { RUN_HAR, RUN_MPI, RUN_NCCL, RUN_NCCL_RING_LL, RUN_FORCED } run_t;
typedef struct {
    const char *name;
    run_t run;
    unsigned must_serve;  /* forced: path bits (har.h) the call must show */
    int active;           /* still timed (tuning drops clear losers) */
    int behind;           /* consecutive sizes at 4x the best or worse */
} cand_t;
#define MAX_CANDS 6
static cand_t cands[MAX_CANDS];
static int ncands;

static struct {
    size_t min_bytes, max_bytes;
    const type_opt_t *type;
    MPI_Op op;
    const char *op_name;
    int op_nccl, device, iters, warmup, buffers, check, quiet;
    const char *csv, *tune;
} opt = {4, 64 << 20, &type_opts[0], MPI_SUM, "sum", 0, 0, 0, 5, 4, 0, 0, NULL, NULL};

static int rank, nranks, local_size, nnodes;
static char *host_stage;

#ifdef HAR_BENCH_CUDA
static struct {
    har_nccl_api_t api;
    har_ncclComm_t comm, ring_ll;
    cudaStream_t stream;
} nccl;
#endif

static void die(const char *msg)
{
    if (rank == 0) fprintf(stderr, "har-bench: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void *buf_alloc(size_t bytes)
{
#ifdef HAR_BENCH_CUDA
    if (opt.device) {
        void *p = NULL;
        if (cudaMalloc(&p, bytes) != cudaSuccess) die("cudaMalloc failed");
        return p;
    }
#endif
    void *p = malloc(bytes);
    if (!p) die("out of memory");
    return p;
}

static void buf_free(void *p)
{
#ifdef HAR_BENCH_CUDA
    if (opt.device) { cudaFree(p); return; }
#endif
    free(p);
}

static void to_buf(void *dst, const void *src, size_t bytes)
{
#ifdef HAR_BENCH_CUDA
    if (opt.device) { cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice); return; }
#endif
    memcpy(dst, src, bytes);
}

static void from_buf(void *dst, const void *src, size_t bytes)
{
#ifdef HAR_BENCH_CUDA
    if (opt.device) { cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost); return; }
#endif
    memcpy(dst, src, bytes);
}

/* Small integers stored in the element type: sums are exact, so a result can
 * be checked exactly whatever the order of reduction. */
static double value(size_t i, int r) { return (double)((i * 7 + (size_t)r * 3) % 11); }

static void fill(char *host, size_t n, int r)
{
    for (size_t i = 0; i < n; i++) {
        double v = value(i, r);
        switch (opt.type->type == MPI_FLOAT ? 0 : opt.type->type == MPI_DOUBLE ? 1 : opt.type->type == MPI_INT ? 2 : 3) {
        case 0: ((float *)host)[i] = (float)v; break;
        case 1: ((double *)host)[i] = v; break;
        case 2: ((int *)host)[i] = (int)v; break;
        default: ((long *)host)[i] = (long)v; break;
        }
    }
}

static int verify(const char *host, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double expect = value(i, 0);
        for (int r = 1; r < nranks; r++) {
            double v = value(i, r);
            if (opt.op == MPI_SUM) expect += v;
            else if (opt.op == MPI_PROD) expect *= v;
            else if (opt.op == MPI_MAX) expect = v > expect ? v : expect;
            else expect = v < expect ? v : expect;
        }
        double got = opt.type->type == MPI_FLOAT ? ((const float *)host)[i]
                   : opt.type->type == MPI_DOUBLE ? ((const double *)host)[i]
                   : opt.type->type == MPI_INT ? ((const int *)host)[i] : ((const long *)host)[i];
        if (opt.op == MPI_PROD ? fabs(got - expect) > 1e-6 * fabs(expect) : got != expect) return 0;
    }
    return 1;
}

static int one_call(const cand_t *c, void *buf, size_t n)
{
    int count = (int)n, rc;
    switch (c->run) {
    case RUN_FORCED:
        har_set_algo(c->name);
        rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD);
        har_set_algo("auto");
        return rc;
    case RUN_HAR:
        return MPI_Allreduce(MPI_IN_PLACE, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD);
    case RUN_MPI:
        if (!opt.device) return PMPI_Allreduce(MPI_IN_PLACE, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD);
        from_buf(host_stage, buf, n * opt.type->size);
        rc = PMPI_Allreduce(MPI_IN_PLACE, host_stage, count, opt.type->type, opt.op, MPI_COMM_WORLD);
        to_buf(buf, host_stage, n * opt.type->size);
#ifdef HAR_BENCH_CUDA
        /* A copy from pageable memory may still be landing: it is this
         * candidate's cost, not the next one's. */
        cudaDeviceSynchronize();
#endif
        return rc;
    case RUN_NCCL:
    case RUN_NCCL_RING_LL:
#ifdef HAR_BENCH_CUDA
        if (nccl.api.all_reduce(buf, buf, n, opt.type->nccl, opt.op_nccl,
                                c->run == RUN_NCCL ? nccl.comm : nccl.ring_ll, nccl.stream) != 0)
            return MPI_ERR_OTHER;
        return cudaStreamSynchronize(nccl.stream) == cudaSuccess ? MPI_SUCCESS : MPI_ERR_OTHER;
#endif
        break;
    }
    return MPI_ERR_OTHER;
}

static void add_cand(const char *name, run_t run, unsigned must_serve)
{
    cands[ncands++] = (cand_t){name, run, must_serve, 1, 0};
}

#ifdef HAR_BENCH_CUDA
/* One NCCL communicator over the world, or NULL on every rank. With
 * ring_ll, NCCL reads NCCL_ALGO/NCCL_PROTO while it is made (its tuning),
 * so they are set just for that; nccl_setup makes this one first, before
 * any NCCL thread exists that could read the environment meanwhile. */
static har_ncclComm_t nccl_comm(int ring_ll)
{
    struct { har_ncclUniqueId id; int ok; } id = {{{0}}, 1};
    if (rank == 0) id.ok = nccl.api.get_unique_id(&id.id) == 0;
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!id.ok) return NULL;
    char *algo = getenv("NCCL_ALGO"), *proto = getenv("NCCL_PROTO");
    char *saved_algo = algo ? strdup(algo) : NULL, *saved_proto = proto ? strdup(proto) : NULL;
    if (ring_ll) {
        setenv("NCCL_ALGO", "Ring", 1);
        setenv("NCCL_PROTO", "LL", 1);
    }
    har_ncclComm_t comm = NULL;
    int ok = nccl.api.comm_init_rank(&comm, nranks, id.id, rank) == 0;
    if (ring_ll) {
        if (saved_algo) setenv("NCCL_ALGO", saved_algo, 1); else unsetenv("NCCL_ALGO");
        if (saved_proto) setenv("NCCL_PROTO", saved_proto, 1); else unsetenv("NCCL_PROTO");
    }
    free(saved_algo);
    free(saved_proto);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok && comm) {
        nccl.api.comm_abort(comm);  /* made here, but not on every rank */
        comm = NULL;
    }
    return ok ? comm : NULL;
}

/* NCCL beside har, when every rank can load it. */
static void nccl_setup(void)
{
    const char *lib = getenv("HAR_NCCL") ? getenv("HAR_NCCL") : "libnccl.so.2";
    char why[256] = "";
    int ok = strcmp(lib, "0") != 0 && har_nccl_load(&nccl.api, lib, why, sizeof why) == 0 &&
             cudaStreamCreate(&nccl.stream) == cudaSuccess;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok) nccl.ring_ll = nccl_comm(1);
    if (ok) nccl.comm = nccl_comm(0);
    if (nccl.comm) add_cand("nccl", RUN_NCCL, 0);
    if (nccl.comm && nccl.ring_ll) add_cand("nccl_ring_ll", RUN_NCCL_RING_LL, 0);
    if (rank == 0 && nccl.comm)
        printf("# NCCL %d.%d.%d from %s\n", nccl.api.version / 10000, nccl.api.version / 100 % 100,
               nccl.api.version % 100, lib);
    else if (rank == 0)
        printf("# NCCL not measured: %s\n", why[0] ? why : "it could not be set up on every rank");
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t parse_bytes(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

static void parse_args(int argc, char **argv)
{
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(arg, "--min") && val) opt.min_bytes = parse_bytes(argv[++a]);
        else if (!strcmp(arg, "--max") && val) opt.max_bytes = parse_bytes(argv[++a]);
        else if (!strcmp(arg, "--iters") && val) opt.iters = atoi(argv[++a]);
        else if (!strcmp(arg, "--warmup") && val) opt.warmup = atoi(argv[++a]);
        else if (!strcmp(arg, "--buffers") && val) opt.buffers = atoi(argv[++a]);
        else if (!strcmp(arg, "--csv") && val) opt.csv = argv[++a];
        else if (!strcmp(arg, "--tuning") && val) opt.tune = argv[++a];
        else if (!strcmp(arg, "--check")) opt.check = 1;
        else if (!strcmp(arg, "--quiet")) opt.quiet = 1;
        else if (!strcmp(arg, "--device")) opt.device = 1;
        else if (!strcmp(arg, "--type") && val) {
            opt.type = NULL;
            for (size_t t = 0; t < sizeof type_opts / sizeof *type_opts; t++)
                if (!strcmp(val, type_opts[t].name)) opt.type = &type_opts[t];
            if (!opt.type) die("unknown --type");
            a++;
        } else if (!strcmp(arg, "--op") && val) {
            opt.op_name = NULL;
            for (size_t o = 0; o < sizeof op_opts / sizeof *op_opts; o++)
                if (!strcmp(val, op_opts[o].name)) {
                    opt.op = op_opts[o].op;
                    opt.op_name = op_opts[o].name;
                    opt.op_nccl = op_opts[o].nccl;
                }
            if (!opt.op_name) die("unknown --op");
            a++;
        } else die("usage: har-bench [--min B] [--max B] [--type T] [--op O] [--device] [--iters N] "
                   "[--warmup N] [--buffers K] [--check] [--csv FILE] [--quiet] [--tuning TABLE]");
    }
    if (opt.buffers < 1) opt.buffers = 1;
}

/* Ranks per node and nodes, as har sees them (HAR_NODE_SIZE splits nodes). */
static void node_shape(void)
{
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local_size);
    const char *pretend = getenv("HAR_NODE_SIZE");
    if (pretend && atoi(pretend) > 0 && atoi(pretend) < local_size) local_size = atoi(pretend);
    nnodes = nranks / local_size;
    int sizes[2] = {-local_size, local_size};  /* min and max in one call */
    MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (opt.tune && (-sizes[0] != sizes[1] || nranks % local_size))
        die("--tuning needs nodes of equal size: a table row names one ranks-per-node count");
#ifdef HAR_BENCH_CUDA
    if (opt.device) {
        int local, ndev = 0;
        MPI_Comm_rank(node, &local);
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) die("--device: no GPU visible");
        cudaSetDevice(local % ndev);
    }
#else
    if (opt.device) die("--device: har-bench was built without CUDA");
#endif
    MPI_Comm_free(&node);
}

static unsigned long long served_bits(const unsigned long long before[HAR_PATH_COUNT])
{
    unsigned long long now[HAR_PATH_COUNT], bits = 0;
    har_counters(now);
    for (int p = 0; p < HAR_PATH_COUNT; p++)
        if (now[p] > before[p]) bits |= 1ull << p;
    return bits;
}

/* The tuning rule: at the first size the fastest candidate wins; at each
 * larger one the previous winner stays while its median is within 5% of
 * the fastest's (noise must not split the table into flickering rows), else
 * the fastest takes over. Failed or untimed candidates (median 0) never win.
 * scripts/derive-tuning implements the same rule. */
static void pick_winners(double med[][MAX_CANDS], int nsizes, int *winner)
{
    int prev = -1;
    for (int k = 0; k < nsizes; k++) {
        int best = -1;
        for (int c = 0; c < ncands; c++)
            if (med[k][c] > 0 && (best < 0 || med[k][c] < med[k][best])) best = c;
        if (best >= 0 && prev >= 0 && med[k][prev] > 0 && med[k][prev] <= 1.05 * med[k][best]) best = prev;
        winner[k] = best;
        if (best >= 0) prev = best;
    }
}

/* Writes the tuning table: runs of sizes with one winner merged, the last
 * run covering every larger size. */
static void write_table(const size_t *sizes, const int *winner, int nsizes)
{
    FILE *f = fopen(opt.tune, "w");
    if (!f) die("cannot write the --tuning file");
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(f, "# har tuning table, written by har-bench --tuning on %s (har %s)\n", when, har_version());
    fprintf(f, "# %d ranks, %d per node, %d node(s), %s %s, %s buffers; winners by the rule of pick_winners\n", nranks,
            local_size, nnodes, opt.type->name, opt.op_name, opt.device ? "device" : "host");
    fprintf(f, "# memory ranks_per_node nodes up_to_bytes algo\n");
    for (int k = 0; k < nsizes; k++) {
        if (winner[k] < 0) continue;
        int next = k + 1;
        while (next < nsizes && winner[next] < 0) next++;
        if (next < nsizes && winner[next] == winner[k]) continue;
        char max[32];
        if (next < nsizes) snprintf(max, sizeof max, "%zu", sizes[k]);
        else snprintf(max, sizeof max, "inf");
        fprintf(f, "%s %d %d %s %s\n", opt.device ? "device" : "host", local_size, nnodes, max,
                cands[winner[k]].name);
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    parse_args(argc, argv);
    node_shape();
    if (opt.tune) {
        unsigned seg = opt.device ? 1u << HAR_PATH_IPC : 1u << HAR_PATH_HOST_SEGMENT;
        if (nnodes == 1) add_cand("one_shot", RUN_FORCED, seg | 1u << HAR_PATH_ONE_SHOT);
        add_cand("two_shot", RUN_FORCED, seg | 1u << HAR_PATH_TWO_SHOT);
        if (opt.device && nnodes == 1) {
            add_cand("host_segment", RUN_FORCED, 1u << HAR_PATH_HOST_SEGMENT);
            add_cand("nccl", RUN_FORCED, 1u << HAR_PATH_NCCL);
        }
        if (nnodes == 1) add_cand("mpi", RUN_FORCED, 1u << HAR_PATH_FORWARDED);
    } else {
        add_cand("har", RUN_HAR, 0);
        add_cand("mpi", RUN_MPI, 0);
#ifdef HAR_BENCH_CUDA
        if (opt.device) nccl_setup();
#endif
    }
    size_t max_n = opt.max_bytes / opt.type->size;
    if (max_n == 0) die("--max is smaller than one element");
    char *host = malloc(max_n * opt.type->size);
    host_stage = malloc(max_n * opt.type->size);
    void **bufs = malloc((size_t)opt.buffers * sizeof *bufs);
    for (int b = 0; b < opt.buffers; b++) bufs[b] = buf_alloc(max_n * opt.type->size);
    FILE *csv = NULL;
    if (opt.csv && rank == 0 && !(csv = fopen(opt.csv, "w"))) die("cannot write the CSV file");
    if (csv) fprintf(csv, "bytes,candidate,ranks,ranks_per_node,nodes,buffers,type,op,median_us,p10_us,p90_us,"
                          "algbw_GBs,busbw_GBs,checked\n");
    if (rank == 0) {
        printf("# har-bench%s: %d ranks (%d per node, %d node(s)), %s %s, %s buffers (rotating over %d), "
               "time = max over ranks per call, median us\n", opt.tune ? " --tuning" : "", nranks, local_size,
               nnodes, opt.type->name, opt.op_name, opt.device ? "device" : "host", opt.buffers);
        printf("%12s", "bytes");
        for (int c = 0; c < ncands; c++) printf(" %12s", cands[c].name);
        if (opt.tune) printf(" %12s\n", "fastest");
        else printf(" %8s %9s %10s %s\n", "har/mpi", ncands > 2 ? "har/nccl" : "", "har_busbw", "checked");
        fflush(stdout);
    }
    size_t sizes[64];
    static double medians[64][MAX_CANDS];  /* per size; 0: failed or not timed */
    int winner[64], nsizes = 0, all_ok = 1;
    double factor = nranks > 1 ? 2.0 * (nranks - 1) / nranks : 1.0;
    for (size_t bytes = opt.min_bytes; bytes <= opt.max_bytes && nsizes < 64; bytes *= 2) {
        size_t n = bytes / opt.type->size;
        if (n == 0) continue;
        int iters = opt.iters ? opt.iters : (int)fmin(1000, fmax(10, 2e8 / (double)bytes));
        double *t[MAX_CANDS] = {0}, med[MAX_CANDS] = {0}, p10[MAX_CANDS] = {0}, p90[MAX_CANDS] = {0};
        int ok[MAX_CANDS] = {0}, timed[MAX_CANDS] = {0};
        for (int c = 0; c < ncands; c++) {
            if (!cands[c].active) continue;
            /* Correctness first, outside the timing: fresh data, one call,
             * check; a forced path must really have served it. */
            unsigned long long before[HAR_PATH_COUNT];
            har_counters(before);
            fill(host, n, rank);
            to_buf(bufs[0], host, n * opt.type->size);
            ok[c] = one_call(&cands[c], bufs[0], n) == MPI_SUCCESS;
            int served = (served_bits(before) & cands[c].must_serve) == cands[c].must_serve;
            from_buf(host, bufs[0], n * opt.type->size);
            if (opt.check) ok[c] = ok[c] && verify(host, n);
            int agreed[2] = {ok[c], served};
            MPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            ok[c] = agreed[0];
            timed[c] = agreed[1];  /* a forced path that cannot serve this size is not timed */
            all_ok &= ok[c];
            if (timed[c]) t[c] = calloc((size_t)iters, sizeof(double));
        }
        /* Interleaved: each candidate in turn, on the same rotating buffers,
         * starting with a different one each iteration so that none always
         * follows a slow one (a long staged call lets the GPU's clocks drop).
         * The data grow by repeated sums here; only timing matters now. */
        for (int it = -opt.warmup; it < iters; it++)
            for (int k = 0; k < ncands; k++) {
                int c = (it + opt.warmup + k) % ncands;
                if (!timed[c]) continue;
                void *buf = bufs[(it + opt.warmup) % opt.buffers];
                PMPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                one_call(&cands[c], buf, n);
                double dt = MPI_Wtime() - t0;
                if (it >= 0) t[c][it] = dt;
            }
        int best = -1;
        for (int c = 0; c < ncands; c++) {
            if (!timed[c]) continue;
            MPI_Allreduce(MPI_IN_PLACE, t[c], iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(t[c], (size_t)iters, sizeof(double), cmp_double);
            /* Rounded as the CSV prints it: scripts/derive-tuning must pick
             * the same winners from the CSV as --tuning does here. */
            med[c] = round(t[c][iters / 2] * 1e9) / 1e3;
            p10[c] = t[c][iters / 10] * 1e6;
            p90[c] = t[c][iters * 9 / 10] * 1e6;
            free(t[c]);
            if (ok[c] && (best < 0 || med[c] < med[best])) best = c;
        }
        /* --tuning: a path 4x slower than the best at two sizes in a row is not
         * timed at larger ones (staging and the MPI only fall further behind). */
        for (int c = 0; opt.tune && best >= 0 && c < ncands; c++) {
            if (!timed[c]) continue;
            cands[c].behind = med[c] >= 4 * med[best] ? cands[c].behind + 1 : 0;
            if (cands[c].behind >= 2) cands[c].active = 0;
        }
        for (int c = 0; c < ncands; c++) medians[nsizes][c] = timed[c] && ok[c] ? med[c] : 0;
        sizes[nsizes++] = n * opt.type->size;
        double real_bytes = (double)(n * opt.type->size);
        if (rank == 0) {
            printf("%12zu", n * opt.type->size);
            for (int c = 0; c < ncands; c++)
                if (timed[c]) printf(" %12.2f", med[c]);
                else printf(" %12s", "-");
            if (opt.tune) {
                printf(" %12s%s\n", best >= 0 ? cands[best].name : "-", opt.check && !all_ok ? " FAILED" : "");
            } else {
                char vs_nccl[16] = "";
                if (ncands > 2 && timed[2]) snprintf(vs_nccl, sizeof vs_nccl, "%.2f", med[0] / med[2]);
                printf(" %8.2f %9s %8.2fGB %s\n", med[0] / med[1], vs_nccl, real_bytes / med[0] * 1e-3 * factor,
                       opt.check ? (ok[0] && ok[1] ? "yes" : "FAILED") : "no");
            }
            fflush(stdout);
            for (int c = 0; csv && c < ncands; c++)
                if (timed[c])
                    fprintf(csv, "%zu,%s,%d,%d,%d,%s,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,%s\n", n * opt.type->size,
                            cands[c].name, nranks, local_size, nnodes, opt.device ? "device" : "host",
                            opt.type->name, opt.op_name, med[c], p10[c], p90[c], real_bytes / med[c] * 1e-3,
                            real_bytes / med[c] * 1e-3 * factor, opt.check ? (ok[c] ? "yes" : "FAILED") : "no");
        }
        if (bytes > opt.max_bytes / 2) break;
    }
    if (csv) fclose(csv);
    if (opt.tune && rank == 0) {
        pick_winners(medians, nsizes, winner);
        write_table(sizes, winner, nsizes);
    }
#ifdef HAR_BENCH_CUDA
    /* Idle, so abort is a local teardown (destroy may wait for the peers). */
    if (nccl.comm) nccl.api.comm_abort(nccl.comm);
    if (nccl.ring_ll) nccl.api.comm_abort(nccl.ring_ll);
#endif
    for (int b = 0; b < opt.buffers; b++) buf_free(bufs[b]);
    free(bufs); free(host); free(host_stage);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
