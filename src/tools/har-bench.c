/* har-bench: MPI_Allreduce through har beside the alternatives, in one run,
 * interleaved size by size on the same buffers.
 *
 *   har-bench [--min BYTES] [--max BYTES] [--type float|double|int|long]
 *             [--op sum|max|min|prod] [--device] [--cuda-first] [--iters N]
 *             [--warmup N] [--buffers K] [--out-of-place] [--check] [--csv FILE]
 *             [--quiet] [--tuning TABLE] [--nonblocking] [--enqueue] [--thread-multiple]
 *             [--har-only]
 *
 * Candidates: "har" (the intercepted MPI_Allreduce), "mpi" (the MPI's own
 * PMPI_Allreduce, on the device buffers where it reduces device memory
 * (har_cuda_mpi_reduce), else staged through host memory around it, as
 * users without a CUDA-aware MPI do: a "# mpi:" line says which and why), and with --device, where NCCL
 * loads (HAR_NCCL names it), "nccl" (ncclAllReduce, then the stream
 * synchronised: the same blocking contract) and "nccl_ring_ll" (NCCL pinned
 * to the Ring algorithm and LL protocol), and "floor": an empty kernel
 * launched on a stream of its own and the stream synchronised, by every
 * rank at once, timed like the others (no data, no peers: what any call
 * that launches and waits costs at least), with har's time as a multiple
 * of it in the har/floor column.
 *
 * Start-up order: by default the ranks agree on their node shape with a
 * host all-reduce (through har) before they pick a GPU, as many
 * applications do; with --cuda-first each rank picks its GPU before
 * MPI_Init. The har_paths column prints the paths har's timed calls took,
 * from its counters; har-bench's own bookkeeping goes to PMPI_Allreduce so
 * that the counters at MPI_Finalize count measured calls only.
 *
 * --tuning TABLE (the tuning run; not "--tune", which Open MPI's mpirun
 * takes for itself) times har's own choices instead, each forced with
 * har_set_algo and checked to have served: host_segment+one_shot,
 * host_segment+two_shot, mpi, and with --device ipc+one_shot (the push
 * kernels where they fit), ipc+two_shot and nccl. It writes the table by the rule of src/plan/derive.c, keyed by
 * the machine class har reports.
 *
 * --nonblocking times MPI_Iallreduce and MPI_Wait instead, the way the OSU
 * Micro-Benchmarks' osu_iallreduce does: "har" and "mpi" (PMPI_Iallreduce;
 * device buffers staged around it as above) are the pure communication,
 * post then wait, beside "har_blocking" (MPI_Allreduce through har); then
 * each is timed again with host compute between the post and the wait
 * that lasts its own pure communication's median (a clock spin, no MPI
 * call: nothing progresses the MPI meanwhile but the MPI itself), and
 * overlap = 100 x (1 - (total - compute) / pure), within 0 and 100. The
 * paths column of a non-blocking call says "staged" where har staged it
 * through host memory and "mpi" where the MPI took it as it was. Where the
 * MPI has the persistent all-reduce, "har_persistent" is MPI_Start and
 * MPI_Wait on a request made once per size and buffer (MPI_Allreduce_init,
 * MPIX_ under Open MPI 4.1), timed and overlapped the same way.
 *
 * --thread-multiple initialises the MPI with MPI_THREAD_MULTIPLE, as
 * mpi4py does (the header line says what the MPI provided): across nodes
 * har's started calls are then moved by a thread of its own.
 *
 * --enqueue (with --device) times har_allreduce_enqueue, the all-reduce
 * queued on a stream: "har_enqueue" is one call queued on a non-blocking
 * stream and that stream synchronised (the blocking contract again), beside
 * "har" (MPI_Allreduce) and "floor"; then, per size, streams of 100 calls
 * queued back to back and the stream synchronised once (stream_us: per
 * call, the maximum over ranks of each stream's time, median of the
 * streams), the same with an empty kernel of the application's before
 * each call (kernels_us), the host time of one queued call while the
 * stream is busy with the calls before it (host_us: each rank's median
 * over a stream, then the maximum over ranks, median of the streams), the
 * host time of launching that empty kernel on the same busy stream, timed
 * the same way (launch_us: what no call that launches a kernel can go
 * below), a stream of 100 such empty kernels alone, per kernel, as
 * stream_us (empties_us: what no stream of calls that each launch a
 * kernel can go below), and a CUDA graph of 100 such calls captured once
 * and replayed (graph_us: per call, as stream_us; "-" at sizes har does
 * not capture).
 *
 * Calls are in place (MPI_IN_PLACE), as gradient all-reduces are; with
 * --out-of-place each takes a send buffer of its own beside the result's
 * (the MPI's own all-reduce then copies the input first, which in place it
 * need not).
 *
 * Every timed call starts after a barrier, so that one candidate's skew
 * between ranks does not land on the next, and the order of candidates
 * rotates; a call's time is the maximum over ranks. The table gives
 * medians, ratios and bus bandwidth (algorithm bandwidth x 2(n-1)/n); the
 * CSV adds 10th/90th percentiles.
 *
 * --har-only times har and the floor alone (no MPI, no NCCL): at a GiB the
 * staged MPI takes over a second a call, so comparing builds of har at large
 * sizes (scripts/ab-bench) would spend minutes on a column nobody reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/config.h"
#include "cuda/mpi_cuda.h"
#include "engines/engine.h"
#ifdef OPEN_MPI
#include <mpi-ext.h> /* OMPI_HAVE_MPI_EXT_PCOLLREQ: MPIX_Allreduce_init */
#endif
#include "plan/derive.h"
#ifdef HAR_BENCH_CUDA
#include <cuda_runtime.h>
#include "cuda/nccl.h"
#ifdef HAR_HAVE_KERNELS
#include "engines/ipc_kernels.h"
#define HAR_BENCH_FLOOR 1
#endif
#endif

typedef struct { const char *name; MPI_Datatype type; size_t size; int nccl; } type_opt_t;
static const type_opt_t type_opts[] = {
    {"float", MPI_FLOAT, 4, 7}, {"double", MPI_DOUBLE, 8, 8}, {"int", MPI_INT, 4, 2}, {"long", MPI_LONG, 8, 4}};
static const struct { const char *name; MPI_Op op; int nccl; } op_opts[] = {
    {"sum", MPI_SUM, 0}, {"max", MPI_MAX, 2}, {"min", MPI_MIN, 3}, {"prod", MPI_PROD, 1}};

/* What each candidate runs; tuning candidates are har forced to one choice. */
typedef enum {
    RUN_HAR, RUN_MPI, RUN_NCCL, RUN_NCCL_RING_LL, RUN_FORCED, RUN_FLOOR, RUN_HAR_NB, RUN_MPI_NB, RUN_HAR_PERSISTENT,
    RUN_HAR_ENQUEUE
} run_t;

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)  /* as src/entry/collectives.h */
#define ALLREDUCE_INIT MPI_Allreduce_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define ALLREDUCE_INIT MPIX_Allreduce_init
#endif
/* --nonblocking: the persistent requests of the size being timed, one per
 * buffer (made and freed around each size), and whether the MPI staged
 * them (har's counter of staged inits went up). */
static MPI_Request *persistent;
static void **persistent_bufs;
static int persistent_staged;
typedef struct {
    const char *name;
    run_t run;
    unsigned must_serve;  /* forced: the paths (har.h) every call must show */
    int active;           /* still timed (tuning drops clear losers) */
    int behind;           /* consecutive sizes at 4x the best or worse */
} cand_t;
#define MAX_CANDS 8
#define MAX_SIZES 64
static cand_t cands[MAX_CANDS];
static int ncands;

static const char usage[] =
    "usage: har-bench [--min BYTES] [--max BYTES] [--type float|double|int|long] [--op sum|max|min|prod]\n"
    "                 [--device] [--cuda-first] [--iters N] [--warmup N] [--buffers K] [--out-of-place]\n"
    "                 [--check] [--csv FILE] [--quiet] [--tuning TABLE] [--nonblocking] [--enqueue]\n"
    "                 [--thread-multiple] [--har-only]\n"
    "Run it under mpirun; sizes are bytes, with K, M or G. See the README's Benchmark section.\n";

static struct {
    size_t min_bytes, max_bytes;
    const type_opt_t *type;
    MPI_Op op;
    const char *op_name;
    int op_nccl, device, cuda_first, iters, warmup, buffers, out_of_place, check, quiet, nonblocking, enqueue;
    int thread_multiple, har_only;
    const char *csv, *tune;
} opt = {4, 64 << 20, &type_opts[0], MPI_SUM, "sum", 0, 0, 0, 0, 5, 4, 0, 0, 0, 0, 0, 0, 0, NULL, NULL};

static int rank, nranks, local_size, nnodes;
static char *host_stage;

#ifdef HAR_BENCH_CUDA
static struct {
    har_nccl_api_t api;
    har_ncclComm_t comm, ring_ll;
    cudaStream_t stream;
} nccl;
static cudaStream_t floor_stream;  /* blocking, as har's own */
static cudaStream_t enqueue_stream;  /* --enqueue: the application's, non-blocking */
#endif

/* A failure on this rank alone: said by it, then the job ends. */
static void die(const char *msg)
{
    fprintf(stderr, "har-bench: rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* A condition every rank finds (options, the machine's shape): said once,
 * and no rank leaves before rank 0 has said it (an abort from another rank
 * could cut its message off). */
static void die_all(const char *msg)
{
    if (rank == 0) fprintf(stderr, "har-bench: %s\n", msg);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    exit(2);
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

/* The candidates' order in iteration `it`: a permutation drawn from `it`
 * alone, so that every rank draws the same. */
static void draw_order(int it, int order[])
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(it + 1000003);
    for (int c = 0; c < ncands; c++) order[c] = c;
    for (int c = ncands - 1; c > 0; c--) {
        x ^= x >> 29, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 32;
        int j = (int)(x % (uint64_t)(c + 1)), t = order[c];
        order[c] = order[j];
        order[j] = t;
    }
}

/* Host work between a non-blocking call's post and its wait: the clock
 * spun for that long, with no MPI call. */
static void host_compute(double seconds)
{
    if (seconds <= 0) return;
    for (double t0 = MPI_Wtime(); MPI_Wtime() - t0 < seconds;) {
    }
}

/* One call of candidate c: the input in `in` (NULL: in place in buf),
 * the result in buf; a non-blocking one with `compute` seconds of host
 * work between its post and its wait. */
static int one_call(const cand_t *c, const void *in, void *buf, size_t n, double compute)
{
    int count = (int)n, rc;
    const void *send = in ? in : MPI_IN_PLACE;
    MPI_Request req;
    switch (c->run) {
    case RUN_HAR_NB:
        rc = MPI_Iallreduce(send, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS) return rc;
        host_compute(compute);
        return MPI_Wait(&req, MPI_STATUS_IGNORE);
    case RUN_HAR_PERSISTENT: {
        int b = 0;
        while (persistent_bufs[b] != buf) b++;
        rc = MPI_Start(&persistent[b]);
        if (rc != MPI_SUCCESS) return rc;
        host_compute(compute);
        return MPI_Wait(&persistent[b], MPI_STATUS_IGNORE);
    }
    case RUN_MPI_NB:
        if (!opt.device || har_cuda_mpi_nonblocking()) {
            rc = PMPI_Iallreduce(send, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD, &req);
            if (rc != MPI_SUCCESS) return rc;
            host_compute(compute);
            return PMPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        /* Staged as a user would, as RUN_MPI is. */
        from_buf(host_stage, in ? in : buf, n * opt.type->size);
        rc = PMPI_Iallreduce(MPI_IN_PLACE, host_stage, count, opt.type->type, opt.op, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS) return rc;
        host_compute(compute);
        rc = PMPI_Wait(&req, MPI_STATUS_IGNORE);
        to_buf(buf, host_stage, n * opt.type->size);
#ifdef HAR_BENCH_CUDA
        cudaStreamSynchronize(cudaStreamLegacy);
#endif
        return rc;
    case RUN_FORCED:
        har_set_algo(c->name);
        rc = MPI_Allreduce(send, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD);
        har_set_algo("auto");
        return rc;
    case RUN_HAR:
        return MPI_Allreduce(send, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD);
    case RUN_MPI:
        /* Device buffers as they are where the MPI reduces device memory
         * (a CUDA-aware MPI: the figure its users compare against). */
        if (!opt.device || har_cuda_mpi_reduce())
            return PMPI_Allreduce(send, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD);
        /* Otherwise staged as a user would: the input to host memory, the
         * MPI in place there, the result back. */
        from_buf(host_stage, in ? in : buf, n * opt.type->size);
        rc = PMPI_Allreduce(MPI_IN_PLACE, host_stage, count, opt.type->type, opt.op, MPI_COMM_WORLD);
        to_buf(buf, host_stage, n * opt.type->size);
#ifdef HAR_BENCH_CUDA
        /* A copy from pageable memory may still be landing: it is this
         * candidate's cost, not the next one's. */
        cudaStreamSynchronize(cudaStreamLegacy);
#endif
        return rc;
    case RUN_NCCL:
    case RUN_NCCL_RING_LL:
#ifdef HAR_BENCH_CUDA
        if (nccl.api.all_reduce(in ? in : buf, buf, n, opt.type->nccl, opt.op_nccl,
                                c->run == RUN_NCCL ? nccl.comm : nccl.ring_ll, nccl.stream) != 0)
            return MPI_ERR_OTHER;
        return cudaStreamSynchronize(nccl.stream) == cudaSuccess ? MPI_SUCCESS : MPI_ERR_OTHER;
#endif
        break;
    case RUN_HAR_ENQUEUE:
#ifdef HAR_BENCH_CUDA
        rc = har_allreduce_enqueue(send, buf, count, opt.type->type, opt.op, MPI_COMM_WORLD, enqueue_stream);
        if (rc != MPI_SUCCESS) return rc;
        return cudaStreamSynchronize(enqueue_stream) == cudaSuccess ? MPI_SUCCESS : MPI_ERR_OTHER;
#endif
        break;
    case RUN_FLOOR:
        /* What any call that launches a kernel and waits for it costs at
         * least: no data, no peers. */
#ifdef HAR_BENCH_FLOOR
        if (har_engine_dev_empty(floor_stream) != 0) return MPI_ERR_OTHER;
        return cudaStreamSynchronize(floor_stream) == cudaSuccess ? MPI_SUCCESS : MPI_ERR_OTHER;
#endif
        break;
    }
    return MPI_ERR_OTHER;
}

/* The index of the first candidate that runs `run`, or -1. */
static int cand_of(run_t run)
{
    for (int c = 0; c < ncands; c++)
        if (cands[c].run == run) return c;
    return -1;
}

static void add_cand(const char *name, run_t run)
{
    int ok = 1;
    if (ncands == MAX_CANDS) return;
    unsigned must = run == RUN_FORCED ? har_choice_parse(name, HAR_CHOICE_NAMES, &ok) : 0;
    cands[ncands++] = (cand_t){name, run, must, 1, 0};
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
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
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
    int ok = strcmp(lib, "0") != 0 && har_cuda_nccl_load(&nccl.api, lib, why, sizeof why) &&
             cudaStreamCreate(&nccl.stream) == cudaSuccess;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok) nccl.ring_ll = nccl_comm(1);
    if (ok) nccl.comm = nccl_comm(0);
    if (nccl.comm) add_cand("nccl", RUN_NCCL);
    if (nccl.comm && nccl.ring_ll) add_cand("nccl_ring_ll", RUN_NCCL_RING_LL);
    if (rank == 0 && nccl.comm)
        printf("# NCCL %d.%d.%d from %s\n", nccl.api.version / 10000, nccl.api.version / 100 % 100,
               nccl.api.version % 100, lib);
    else if (rank == 0)
        printf("# NCCL not measured: %s\n", why[0] ? why : "it could not be set up on every rank");
}

/* The GPU of this rank's local rank, before MPI exists: from the launcher. */
static void cuda_first(void)
{
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!local) local = getenv("MPI_LOCALRANKID");
    if (!local) local = getenv("SLURM_LOCALID");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return;  /* node_shape says so later */
    cudaSetDevice((local ? atoi(local) : 0) % ndev);
    cudaFree(0);  /* the context, now */
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_bytes(const char *s, size_t *out)
{
    double v = har_parse_size(s);  /* as HAR_* sizes are read */
    *out = v >= 1 ? (size_t)v : 0;
    return v >= 1;
}

/* Before MPI_Init: --help and mistakes end here, without a launcher's banner. */
static void parse_args(int argc, char **argv)
{
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        int ok = 1;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage, stdout);
            exit(0);
        }
        if (!strcmp(arg, "--min") && val) ok = parse_bytes(argv[++a], &opt.min_bytes);
        else if (!strcmp(arg, "--max") && val) ok = parse_bytes(argv[++a], &opt.max_bytes);
        else if (!strcmp(arg, "--iters") && val) opt.iters = atoi(argv[++a]);
        else if (!strcmp(arg, "--warmup") && val) opt.warmup = atoi(argv[++a]);
        else if (!strcmp(arg, "--buffers") && val) opt.buffers = atoi(argv[++a]);
        else if (!strcmp(arg, "--csv") && val) opt.csv = argv[++a];
        else if (!strcmp(arg, "--tuning") && val) opt.tune = argv[++a];
        else if (!strcmp(arg, "--check")) opt.check = 1;
        else if (!strcmp(arg, "--out-of-place")) opt.out_of_place = 1;
        else if (!strcmp(arg, "--quiet")) opt.quiet = 1;
        else if (!strcmp(arg, "--nonblocking")) opt.nonblocking = 1;
        else if (!strcmp(arg, "--enqueue")) opt.enqueue = 1;
        else if (!strcmp(arg, "--thread-multiple")) opt.thread_multiple = 1;
        else if (!strcmp(arg, "--har-only")) opt.har_only = 1;
        else if (!strcmp(arg, "--device")) opt.device = 1;
        else if (!strcmp(arg, "--cuda-first")) opt.cuda_first = opt.device = 1;
        else if (!strcmp(arg, "--type") && val) {
            opt.type = NULL;
            for (size_t t = 0; t < sizeof type_opts / sizeof *type_opts; t++)
                if (!strcmp(val, type_opts[t].name)) opt.type = &type_opts[t];
            ok = opt.type != NULL;
            a++;
        } else if (!strcmp(arg, "--op") && val) {
            opt.op_name = NULL;
            for (size_t o = 0; o < sizeof op_opts / sizeof *op_opts; o++)
                if (!strcmp(val, op_opts[o].name)) {
                    opt.op = op_opts[o].op;
                    opt.op_name = op_opts[o].name;
                    opt.op_nccl = op_opts[o].nccl;
                }
            ok = opt.op_name != NULL;
            a++;
        } else ok = 0;
        if (!ok) {
            fprintf(stderr, "har-bench: bad argument %s%s%s\n%s", arg, val ? " " : "", val ? val : "", usage);
            exit(2);
        }
    }
    if (opt.tune && opt.nonblocking) {
        fprintf(stderr, "har-bench: --tuning times the blocking call; --nonblocking is for comparing\n");
        exit(2);
    }
    if (opt.har_only && (opt.tune || opt.nonblocking || opt.enqueue)) {
        fprintf(stderr, "har-bench: --har-only times the blocking call beside the floor alone\n");
        exit(2);
    }
    if (opt.enqueue && (!opt.device || opt.tune || opt.nonblocking)) {
        fprintf(stderr, "har-bench: --enqueue times device buffers (--device), alone\n");
        exit(2);
    }
#ifndef HAR_BENCH_CUDA
    if (opt.enqueue) {
        fprintf(stderr, "har-bench: built without CUDA: no --enqueue\n");
        exit(2);
    }
#endif
    if (opt.buffers < 1) opt.buffers = 1;
    if (opt.max_bytes < opt.min_bytes) opt.max_bytes = opt.min_bytes;
}

/* Ranks per node and nodes, as har sees them (HAR_NODE_SIZE splits nodes),
 * agreed with a host all-reduce; then, unless --cuda-first picked it
 * already, this rank's GPU. */
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
        die_all("--tuning needs nodes of equal size: a table row names one ranks-per-node count");
    if (opt.tune && nnodes > 1 && pretend && atoi(pretend) > 0)
        die_all("--tuning on pretend nodes (HAR_NODE_SIZE) would write rows for several nodes measured on one host");
    if (opt.tune && opt.out_of_place)
        die_all("--tuning times calls in place, as the table's rows are read for every call; --out-of-place is for comparing");
#ifdef HAR_BENCH_CUDA
    if (opt.device && !opt.cuda_first) {
        int local, ndev = 0;
        MPI_Comm_rank(node, &local);
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) die("--device: no GPU visible");
        cudaSetDevice(local % ndev);
    }
#else
    if (opt.device) die_all("--device: har-bench was built without CUDA");
#endif
    MPI_Comm_free(&node);
}

/* Counter `index` (har.h), 0 if there is none. */
static unsigned long long counter_value(int index)
{
    unsigned long long v[256];
    int n = har_counters(v, 256);
    return index >= 0 && index < n && index < 256 ? v[index] : 0;
}

static unsigned served_bits(const unsigned long long before[HAR_PATH_COUNT])
{
    unsigned long long now[HAR_PATH_COUNT];
    unsigned bits = 0;
    har_counters(now, HAR_PATH_COUNT);
    for (int p = 1; p < HAR_PATH_COUNT; p++)
        if (now[p] > before[p]) bits |= 1u << p;
    return bits;
}

/* Writes the tuning table of this run's shape and machine class. */
static void write_table(const size_t *sizes, double med[][MAX_CANDS], double p90[][MAX_CANDS], int nsizes,
                        const char *cls)
{
    har_measure_t m[MAX_SIZES * MAX_CANDS];
    har_plan_tune_row_t shape = {0, (uint32_t)nnodes, (uint16_t)local_size, (uint8_t)opt.device, 0, ""}, rows[64];
    int n = 0;
    snprintf(shape.cls, sizeof shape.cls, "%s", cls);
    for (int k = 0; k < nsizes; k++)
        for (int c = 0; c < ncands; c++)
            if (med[k][c] > 0) m[n++] = (har_measure_t){sizes[k], cands[c].must_serve, med[k][c], p90[k][c], 1};
    int nrows = har_plan_tune_derive(m, n, &shape, rows, 64);
    FILE *f = fopen(opt.tune, "w");
    if (!f) die("cannot write the --tuning file");
    time_t now = time(NULL);
    char when[32], text[256];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(f, "# har tuning table, written by har-bench --tuning on %s (har %s)\n", when, har_version());
    fprintf(f, "# %d ranks, %d per node, %d node(s), %s %s, %s buffers; the rule of src/plan/derive.c\n", nranks,
            local_size, nnodes, opt.type->name, opt.op_name, opt.device ? "device" : "host");
    fprintf(f, "# memory class ranks_per_node nodes up_to_bytes choice\n");
    for (int r = 0; r < nrows; r++) {
        har_plan_tune_format(&rows[r], text, sizeof text);
        fprintf(f, "%s\n", text);
    }
    fclose(f);
}

#ifdef HAR_BENCH_CUDA
/* --enqueue: streams of ENQUEUE_STREAM calls queued back to back on the
 * rotating buffers (with an empty kernel before each: `kernels`), the
 * stream synchronised once; per call, the maximum over ranks, the median
 * of the streams. *host: the median over a stream of one call's host time
 * (max over ranks, median of the streams). The data grow by repeated
 * sums: only timing matters here. The graph is timed only where har's
 * kernels queued the calls (`capturable`): har refuses to capture the
 * others (larger than HAR_DEVICE_PUSH_MAX, across nodes); *graph_us is
 * then NAN. */
#define ENQUEUE_STREAM 100
static int enqueue_one(size_t n, void **bufs, void **ins, int k)
{
    int slot = k % opt.buffers;
    return har_allreduce_enqueue(ins[slot] ? ins[slot] : MPI_IN_PLACE, bufs[slot], (int)n, opt.type->type, opt.op,
                                 MPI_COMM_WORLD, enqueue_stream);
}

static void enqueue_streams(size_t n, void **bufs, void **ins, int iters, int capturable, double *stream_us,
                            double *kernels_us, double *host_us, double *launch_us, double *empties_us, double *graph_us)
{
    int reps = iters / 10 < 5 ? 5 : iters / 10 > 50 ? 50 : iters / 10;
    double *per[6];
    for (int k = 0; k < 6; k++) per[k] = calloc((size_t)reps, sizeof(double));
    double host[ENQUEUE_STREAM], launch[ENQUEUE_STREAM];
    for (int rep = -1; rep < reps; rep++)
        for (int kernels = 0; kernels < 2; kernels++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int k = 0; k < ENQUEUE_STREAM; k++) {
                double h0 = MPI_Wtime();
#ifdef HAR_BENCH_FLOOR
                if (kernels && har_engine_dev_empty(enqueue_stream) != 0) die("kernel launch failed");
#endif
                double h1 = MPI_Wtime();
                if (enqueue_one(n, bufs, ins, k) != MPI_SUCCESS) die("har_allreduce_enqueue failed");
                host[k] = MPI_Wtime() - h1;
                launch[k] = h1 - h0;
            }
            if (cudaStreamSynchronize(enqueue_stream) != cudaSuccess) die("cudaStreamSynchronize failed");
            double dt = (MPI_Wtime() - t0) / ENQUEUE_STREAM;
            qsort(host, ENQUEUE_STREAM, sizeof *host, cmp_double);
            qsort(launch, ENQUEUE_STREAM, sizeof *launch, cmp_double);
            if (rep >= 0) {
                per[kernels][rep] = dt;
                if (!kernels) per[2][rep] = host[ENQUEUE_STREAM / 2];
                else per[4][rep] = launch[ENQUEUE_STREAM / 2];
            }
        }
#ifdef HAR_BENCH_FLOOR
    for (int rep = -1; rep < reps; rep++) {
        PMPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < ENQUEUE_STREAM; k++)
            if (har_engine_dev_empty(enqueue_stream) != 0) die("kernel launch failed");
        if (cudaStreamSynchronize(enqueue_stream) != cudaSuccess) die("cudaStreamSynchronize failed");
        if (rep >= 0) per[5][rep] = (MPI_Wtime() - t0) / ENQUEUE_STREAM;
    }
#endif
    /* The same calls captured once into a graph, replayed. */
    if (capturable) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        if (cudaStreamBeginCapture(enqueue_stream, cudaStreamCaptureModeGlobal) != cudaSuccess) die("capture failed");
        for (int k = 0; k < ENQUEUE_STREAM; k++)
            if (enqueue_one(n, bufs, ins, k) != MPI_SUCCESS) die("har_allreduce_enqueue failed in a capture");
        if (cudaStreamEndCapture(enqueue_stream, &graph) != cudaSuccess ||
            cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
            die("capture failed");
        for (int rep = -1; rep < reps; rep++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (cudaGraphLaunch(exec, enqueue_stream) != cudaSuccess ||
                cudaStreamSynchronize(enqueue_stream) != cudaSuccess)
                die("graph replay failed");
            if (rep >= 0) per[3][rep] = (MPI_Wtime() - t0) / ENQUEUE_STREAM;
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    }
    double *out[6] = {stream_us, kernels_us, host_us, graph_us, launch_us, empties_us};
    for (int k = 0; k < 6; k++) {
        if (k == 3 && !capturable) {
            *out[k] = NAN;  /* every rank alike: `capturable` is agreed */
        } else {
            PMPI_Allreduce(MPI_IN_PLACE, per[k], reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(per[k], (size_t)reps, sizeof(double), cmp_double);
            *out[k] = round(per[k][reps / 2] * 1e9) / 1e3;
        }
        free(per[k]);
    }
}
#endif

int main(int argc, char **argv)
{
    parse_args(argc, argv);
#ifdef HAR_BENCH_CUDA
    if (opt.cuda_first) cuda_first();
#endif
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, opt.thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    node_shape();
    if (opt.tune) {
        /* Every plan of every engine built here that can serve this shape. */
        static char names[2 * HAR_PATH_COUNT][48];
        int k = 0;
        for (int e = 0; e < HAR_PATH_COUNT; e++) {
            const har_engine_traits_t *t = har_engine_set()->by_path[e];
            if (!t || t->forced_only || !(t->takes & (opt.device ? HAR_TAKES_DEVICE : HAR_TAKES_HOST))) continue;
            if (nnodes > 1 && !(t->across & HAR_BIT(RAILS))) continue;
            const char *name = har_path_name(e);
            if (!t->shots) snprintf(names[k], sizeof names[k], "%s", name), add_cand(names[k++], RUN_FORCED);
            if (nnodes == 1 && (t->shots & HAR_BIT(ONE_SHOT)))
                snprintf(names[k], sizeof names[k], "%s+one_shot", name), add_cand(names[k++], RUN_FORCED);
            if (t->shots & HAR_BIT(TWO_SHOT))
                snprintf(names[k], sizeof names[k], "%s+two_shot", name), add_cand(names[k++], RUN_FORCED);
        }
        if (nnodes == 1) add_cand("mpi", RUN_FORCED);
    } else if (opt.enqueue) {
        add_cand("har_enqueue", RUN_HAR_ENQUEUE);
        add_cand("har", RUN_HAR);
#ifdef HAR_BENCH_CUDA
        if (cudaStreamCreateWithFlags(&enqueue_stream, cudaStreamNonBlocking) != cudaSuccess)
            die("cudaStreamCreate failed");
#endif
    } else if (opt.nonblocking) {
        add_cand("har", RUN_HAR_NB);
        add_cand("mpi", RUN_MPI_NB);
        add_cand("har_blocking", RUN_HAR);
#ifdef ALLREDUCE_INIT
        add_cand("har_persistent", RUN_HAR_PERSISTENT);
#endif
    } else {
        add_cand("har", RUN_HAR);
        if (!opt.har_only) add_cand("mpi", RUN_MPI);
    }
    if (!opt.tune) {
#ifdef HAR_BENCH_CUDA
        if (opt.device && !opt.har_only) nccl_setup();
#endif
#ifdef HAR_BENCH_FLOOR
        int floor_ok = opt.device && cudaStreamCreate(&floor_stream) == cudaSuccess;
        PMPI_Allreduce(MPI_IN_PLACE, &floor_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (floor_ok) add_cand("floor", RUN_FLOOR);
#endif
    }
    const int mpi_c = cand_of(RUN_MPI), nccl_c = cand_of(RUN_NCCL), floor_c = cand_of(RUN_FLOOR), blocking_c = opt.nonblocking ? cand_of(RUN_HAR) : -1;
    const int persistent_c = cand_of(RUN_HAR_PERSISTENT);
    const int staged_counter = har_counter_index("iallreduce_staged");
    size_t max_n = opt.max_bytes / opt.type->size;
    if (max_n == 0) die_all("--max is smaller than one element");
    char *host = malloc(max_n * opt.type->size);
    host_stage = malloc(max_n * opt.type->size);
    void **bufs = malloc((size_t)opt.buffers * sizeof *bufs), **ins = calloc((size_t)opt.buffers, sizeof *ins);
    for (int b = 0; b < opt.buffers; b++) {
        bufs[b] = buf_alloc(max_n * opt.type->size);
        if (opt.out_of_place) ins[b] = buf_alloc(max_n * opt.type->size);
    }
    persistent = calloc((size_t)opt.buffers, sizeof *persistent);
    persistent_bufs = bufs;
    const int staged_init_counter = har_counter_index("allreduce_init_staged");
    FILE *csv = NULL;
    if (opt.csv && rank == 0 && !(csv = fopen(opt.csv, "w"))) die("cannot write the CSV file");
    if (csv) fprintf(csv, "bytes,candidate,ranks,ranks_per_node,nodes,buffers,class,type,op,median_us,p10_us,p90_us,"
                          "algbw_GBs,busbw_GBs,paths,checked,in_place,compute_us,total_us,overlap_pct,stream_us,kernels_us,host_us,graph_us,"
                          "launch_us,empties_us\n");
    if (rank == 0) {
        printf("# har-bench%s%s: %d ranks (%d per node, %d node(s)), %s %s, %s buffers (rotating over %d, %s), %s, "
               "time = max over ranks per call, median us\n",
               opt.tune ? " --tuning" : opt.nonblocking ? " --nonblocking" : opt.enqueue ? " --enqueue" : "",
               provided == MPI_THREAD_MULTIPLE ? " under MPI_THREAD_MULTIPLE" : "",
               nranks, local_size,
               nnodes, opt.type->name, opt.op_name, opt.device ? "device" : "host", opt.buffers,
               opt.out_of_place ? "a send buffer each" : "in place",
               !opt.device ? "host memory" : opt.cuda_first ? "CUDA before MPI_Init" : "host all-reduce before CUDA");
        if (opt.har_only) printf("# --har-only: neither the MPI nor NCCL timed\n");
        if (opt.device && !opt.tune && !opt.enqueue && !opt.har_only) {
            const har_cuda_mpi_answer_t *a = opt.nonblocking ? &har_cuda_mpi()->nonblocking : &har_cuda_mpi()->reduce;
            printf("# mpi: the MPI's own %s %s (%s)\n", opt.nonblocking ? "MPI_Iallreduce" : "MPI_Allreduce",
                   a->yes ? "on the device buffers" : "on host copies, staged around it", a->why);
        }
        printf("%12s", "bytes");
        for (int c = 0; c < ncands; c++) printf(" %*s", opt.tune ? 22 : 12, cands[c].name);
        if (opt.tune) printf(" %22s\n", "fastest");
        else if (opt.enqueue)
            printf(" %9s %9s %10s %9s %9s %10s %10s %8s %9s %9s %9s %-28s %s\n", "enq/har", floor_c >= 0 ? "enq/floor" : "",
                   "stream_us", floor_c >= 0 ? "str/floor" : "", "str/har", "empties_us", "kernels_us", "host_us",
                   "launch_us", "graph_us", "graph/har", "har_enqueue_paths", "checked");
        else if (opt.nonblocking)
            printf(" %8s %9s %9s %9s %8s %8s %8s %-24s %s\n", "har/mpi", "har/blk", persistent_c >= 0 ? "prs/blk" : "",
                   floor_c >= 0 ? "har/floor" : "", "har_ovl%", "mpi_ovl%", persistent_c >= 0 ? "prs_ovl%" : "",
                   "har_paths", persistent_c >= 0 ? "prs_paths, checked" : "checked");
        else printf(" %8s %9s %9s %10s %-24s %s\n", mpi_c >= 0 ? "har/mpi" : "", nccl_c >= 0 ? "har/nccl" : "",
                    floor_c >= 0 ? "har/floor" : "", "har_busbw", "har_paths", "checked");
        fflush(stdout);
    }
    size_t sizes[MAX_SIZES];
    static double medians[MAX_SIZES][MAX_CANDS], p90s[MAX_SIZES][MAX_CANDS];  /* 0: failed or not timed */
    int nsizes = 0, all_ok = 1;
    char cls[HAR_CLASS_LEN] = "?";
    double factor = nranks > 1 ? 2.0 * (nranks - 1) / nranks : 1.0;
    for (size_t bytes = opt.min_bytes; bytes <= opt.max_bytes && nsizes < MAX_SIZES; bytes *= 2) {
        size_t n = bytes / opt.type->size;
        if (n == 0) continue;
        int iters = opt.iters ? opt.iters : (int)fmin(1000, fmax(10, 2e8 / (double)bytes));
        double *t[MAX_CANDS] = {0}, med[MAX_CANDS] = {0}, p10[MAX_CANDS] = {0}, p90[MAX_CANDS] = {0};
        int ok[MAX_CANDS] = {0}, timed[MAX_CANDS] = {0};
        unsigned paths[MAX_CANDS] = {0}, mixed[MAX_CANDS] = {0};
#ifdef ALLREDUCE_INIT
        if (persistent_c >= 0) {
            unsigned long long staged_before = counter_value(staged_init_counter);
            for (int b = 0; b < opt.buffers; b++)
                if (ALLREDUCE_INIT(ins[b] ? ins[b] : MPI_IN_PLACE, bufs[b], (int)n, opt.type->type, opt.op,
                                   MPI_COMM_WORLD, MPI_INFO_NULL, &persistent[b]) != MPI_SUCCESS)
                    die_all("MPI_Allreduce_init failed");
            persistent_staged = counter_value(staged_init_counter) > staged_before;
        }
#endif
        for (int c = 0; c < ncands; c++) {
            if (!cands[c].active) continue;
            /* Correctness first, outside the timing: fresh data, one call,
             * check; a forced choice must really have served it. */
            unsigned long long before[HAR_PATH_COUNT];
            har_counters(before, HAR_PATH_COUNT);
            fill(host, n, rank);
            to_buf(opt.out_of_place ? ins[0] : bufs[0], host, n * opt.type->size);
#ifdef HAR_BENCH_CUDA
            /* The copy from pageable memory may still be landing, and the
             * queued call's non-blocking stream does not wait for it. */
            if (cands[c].run == RUN_HAR_ENQUEUE) cudaStreamSynchronize(cudaStreamLegacy);
#endif
            ok[c] = one_call(&cands[c], ins[0], bufs[0], n, 0) == MPI_SUCCESS;
            int served = (served_bits(before) & cands[c].must_serve) == cands[c].must_serve;
            from_buf(host, bufs[0], n * opt.type->size);
            if (opt.check && cands[c].run != RUN_FLOOR) ok[c] = ok[c] && verify(host, n);
            int agreed[2] = {ok[c], served};
            PMPI_Allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            ok[c] = agreed[0];
            timed[c] = agreed[1];  /* a forced choice that cannot serve this size is not timed */
            all_ok &= ok[c];
            if (timed[c]) t[c] = calloc((size_t)iters, sizeof(double));
        }
        /* Interleaved: each candidate in turn, on the same rotating buffers,
         * in an order drawn afresh each iteration (the same on every rank)
         * so that none follows a slow one more often than another does (a
         * long staged call lets the GPU's clocks drop; a rotation skipping
         * candidates that are not timed would favour some). The data grow
         * by repeated sums here; only timing matters now. */
        int order[MAX_CANDS];
        for (int it = -opt.warmup; it < iters; it++)
            for (int k = 0; k < ncands; k++) {
                if (k == 0) draw_order(it, order);
                int c = order[k];
                if (!timed[c]) continue;
                int slot = (it + opt.warmup) % opt.buffers;
                const int nonblocking = cands[c].run == RUN_HAR_NB || cands[c].run == RUN_HAR_PERSISTENT;
                unsigned long long before[HAR_PATH_COUNT], staged = nonblocking ? counter_value(staged_counter) : 0;
                har_counters(before, HAR_PATH_COUNT);
                PMPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                one_call(&cands[c], ins[slot], bufs[slot], n, 0);
                double dt = MPI_Wtime() - t0;
                unsigned took = served_bits(before);
                if (nonblocking && !took)  /* the MPI's request served it, staged or not */
                    took = counter_value(staged_counter) > staged ||
                                   (cands[c].run == RUN_HAR_PERSISTENT && persistent_staged)
                               ? HAR_BIT(STAGED)
                               : HAR_BIT(MPI);
                if (it >= 0) t[c][it] = dt;
                if (it >= 0 && took) {
                    mixed[c] |= paths[c] && paths[c] != took;
                    paths[c] = took;
                }
            }
        /* har knows the class once it has served calls on these buffers. */
        if (strcmp(cls, "?") == 0 && har_machine_class(MPI_COMM_WORLD, opt.device, cls, sizeof cls) != MPI_SUCCESS)
            snprintf(cls, sizeof cls, "?");
        int best = -1;
        for (int c = 0; c < ncands; c++) {
            if (!timed[c]) continue;
            PMPI_Allreduce(MPI_IN_PLACE, t[c], iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(t[c], (size_t)iters, sizeof(double), cmp_double);
            /* Rounded as the CSV prints it: har-info --derive-tuning must pick
             * the same rows from the CSV as --tuning does here. */
            med[c] = round(t[c][iters / 2] * 1e9) / 1e3;
            p10[c] = round(t[c][iters / 10] * 1e9) / 1e3;
            p90[c] = round(t[c][iters * 9 / 10] * 1e9) / 1e3;
            free(t[c]);
            t[c] = NULL;
            if (ok[c] && cands[c].run != RUN_FLOOR && (best < 0 || med[c] < med[best])) best = c;
        }
        /* --nonblocking: each non-blocking candidate again, with host work
         * as long as its pure communication between the post and the wait,
         * taking turns as above. */
        double total[MAX_CANDS] = {0}, overlap[MAX_CANDS] = {0};
        for (int k = 0; opt.nonblocking && k < ncands; k++)
            if (timed[k] && (cands[k].run == RUN_HAR_NB || cands[k].run == RUN_MPI_NB ||
                             cands[k].run == RUN_HAR_PERSISTENT))
                t[k] = calloc((size_t)iters, sizeof(double));
        for (int it = -opt.warmup; opt.nonblocking && it < iters; it++)
            for (int k = 0; k < ncands; k++) {
                if (k == 0) draw_order(it, order);
                int c = order[k], slot = (it + opt.warmup) % opt.buffers;
                if (!t[c]) continue;
                PMPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                one_call(&cands[c], ins[slot], bufs[slot], n, med[c] * 1e-6);
                if (it >= 0) t[c][it] = MPI_Wtime() - t0;
            }
        for (int c = 0; c < ncands; c++) {
            if (!t[c]) continue;
            PMPI_Allreduce(MPI_IN_PLACE, t[c], iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(t[c], (size_t)iters, sizeof(double), cmp_double);
            total[c] = round(t[c][iters / 2] * 1e9) / 1e3;
            overlap[c] = fmax(0, fmin(100, 100 * (1 - (total[c] - med[c]) / med[c])));
            free(t[c]);
            t[c] = NULL;
        }
        double stream_us = 0, kernels_us = 0, host_us = 0, launch_us = 0, empties_us = 0, graph_us = 0;
#ifdef HAR_BENCH_CUDA
        if (opt.enqueue && timed[0] && ok[0]) {
            int capturable = (paths[0] & HAR_BIT(ENQUEUED)) && !mixed[0];
            PMPI_Allreduce(MPI_IN_PLACE, &capturable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            enqueue_streams(n, bufs, ins, iters, capturable, &stream_us, &kernels_us, &host_us, &launch_us,
                            &empties_us, &graph_us);
        }
#endif
        for (int b = 0; persistent_c >= 0 && b < opt.buffers; b++) MPI_Request_free(&persistent[b]);
        /* --tuning: a choice 4x slower than the best at two sizes in a row is
         * not timed at larger ones (staging and the MPI only fall further behind). */
        for (int c = 0; opt.tune && best >= 0 && c < ncands; c++) {
            if (!timed[c]) continue;
            cands[c].behind = med[c] >= 4 * med[best] ? cands[c].behind + 1 : 0;
            if (cands[c].behind >= 2) cands[c].active = 0;
        }
        for (int c = 0; c < ncands; c++) {
            medians[nsizes][c] = timed[c] && ok[c] ? med[c] : 0;
            p90s[nsizes][c] = p90[c];
        }
        sizes[nsizes++] = n * opt.type->size;
        double real_bytes = (double)(n * opt.type->size);
        if (rank == 0) {
            char took[MAX_CANDS][96];
            for (int c = 0; c < ncands; c++) {
                if (mixed[c]) snprintf(took[c], sizeof took[c], "mixed");
                else if (paths[c]) har_choice_format(paths[c], took[c], sizeof took[c]);
                else snprintf(took[c], sizeof took[c], "-");
            }
            printf("%12zu", n * opt.type->size);
            for (int c = 0; c < ncands; c++)
                if (timed[c]) printf(" %*.2f", opt.tune ? 22 : 12, med[c]);
                else printf(" %*s", opt.tune ? 22 : 12, "-");
            if (opt.tune) {
                printf(" %22s%s\n", best >= 0 ? cands[best].name : "-", opt.check && !all_ok ? " FAILED" : "");
            } else if (opt.enqueue) {
                char vs_floor[16] = "", str_floor[16] = "", graph[16] = "-", graph_vs[16] = "-";
                if (floor_c >= 0 && timed[floor_c]) {
                    snprintf(vs_floor, sizeof vs_floor, "%.2f", med[0] / med[floor_c]);
                    snprintf(str_floor, sizeof str_floor, "%.2f", stream_us / med[floor_c]);
                }
                if (!isnan(graph_us)) {
                    snprintf(graph, sizeof graph, "%.2f", graph_us);
                    snprintf(graph_vs, sizeof graph_vs, "%.2f", graph_us / med[1]);
                }
                printf(" %9.2f %9s %10.2f %9s %9.2f %10.2f %10.2f %8.2f %9.2f %9s %9s %-28s %s\n", med[0] / med[1],
                       vs_floor, stream_us, str_floor, stream_us / med[1], empties_us, kernels_us, host_us, launch_us,
                       graph, graph_vs, took[0], opt.check ? (ok[0] && ok[1] ? "yes" : "FAILED") : "no");
            } else if (opt.nonblocking) {
                char vs_blocking[16] = "-", vs_floor[16] = "", prs[16] = "", prs_ovl[16] = "", prs_took[100] = "";
                int all = ok[0] && ok[1];
                if (timed[blocking_c]) snprintf(vs_blocking, sizeof vs_blocking, "%.2f", med[0] / med[blocking_c]);
                if (floor_c >= 0 && timed[floor_c]) snprintf(vs_floor, sizeof vs_floor, "%.2f", med[0] / med[floor_c]);
                if (persistent_c >= 0) {
                    all &= ok[persistent_c];
                    snprintf(prs_took, sizeof prs_took, "%s ", took[persistent_c]);
                    if (timed[persistent_c] && timed[blocking_c]) {
                        snprintf(prs, sizeof prs, "%.2f", med[persistent_c] / med[blocking_c]);
                        snprintf(prs_ovl, sizeof prs_ovl, "%.0f", overlap[persistent_c]);
                    }
                }
                printf(" %8.2f %9s %9s %9s %8.0f %8.0f %8s %-24s %s%s\n", med[0] / med[1], vs_blocking, prs, vs_floor,
                       overlap[0], overlap[1], prs_ovl, took[0], prs_took, opt.check ? (all ? "yes" : "FAILED") : "no");
            } else {
                char vs_mpi[16] = "", vs_nccl[16] = "", vs_floor[16] = "";
                if (mpi_c >= 0 && timed[mpi_c]) snprintf(vs_mpi, sizeof vs_mpi, "%.2f", med[0] / med[mpi_c]);
                if (nccl_c >= 0 && timed[nccl_c]) snprintf(vs_nccl, sizeof vs_nccl, "%.2f", med[0] / med[nccl_c]);
                if (floor_c >= 0 && timed[floor_c]) snprintf(vs_floor, sizeof vs_floor, "%.2f", med[0] / med[floor_c]);
                printf(" %8s %9s %9s %8.2fGB %-24s %s\n", vs_mpi, vs_nccl, vs_floor,
                       real_bytes / med[0] * 1e-3 * factor, took[0],
                       opt.check ? (ok[0] && (mpi_c < 0 || ok[mpi_c]) ? "yes" : "FAILED") : "no");
            }
            fflush(stdout);
            for (int c = 0; csv && c < ncands; c++) {
                if (!timed[c]) continue;
                fprintf(csv, "%zu,%s,%d,%d,%d,%s,%s,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,%s,%s,%s,", n * opt.type->size,
                        cands[c].name, nranks, local_size, nnodes, opt.device ? "device" : "host",
                        cls, opt.type->name, opt.op_name, med[c], p10[c], p90[c],
                        real_bytes / med[c] * 1e-3, real_bytes / med[c] * 1e-3 * factor, took[c],
                        opt.check && cands[c].run != RUN_FLOOR ? (ok[c] ? "yes" : "FAILED") : "no",
                        opt.out_of_place ? "no" : "yes");
                /* --nonblocking: the host work, the time with it, the overlap */
                if (total[c] > 0) fprintf(csv, "%.3f,%.3f,%.1f", med[c], total[c], overlap[c]);
                else fprintf(csv, ",,");
                /* --enqueue: the streams of queued calls */
                if (opt.enqueue && cands[c].run == RUN_HAR_ENQUEUE) {
                    char graph[32] = "";  /* empty: not capturable */
                    if (!isnan(graph_us)) snprintf(graph, sizeof graph, "%.3f", graph_us);
                    fprintf(csv, ",%.3f,%.3f,%.3f,%s,%.3f,%.3f\n", stream_us, kernels_us, host_us, graph, launch_us,
                            empties_us);
                }
                else fprintf(csv, ",,,,,,\n");
            }
            if (csv) fflush(csv);  /* a run that dies later keeps the sizes it measured */
        }
        if (bytes > opt.max_bytes / 2) break;
    }
    if (csv) fclose(csv);
    if (opt.tune && rank == 0) write_table(sizes, medians, p90s, nsizes, cls);
#ifdef HAR_BENCH_CUDA
    /* Idle, so abort is a local teardown (destroy may wait for the peers). */
    if (nccl.comm) nccl.api.comm_abort(nccl.comm);
    if (nccl.ring_ll) nccl.api.comm_abort(nccl.ring_ll);
    if (floor_stream) cudaStreamDestroy(floor_stream);
    if (enqueue_stream) cudaStreamDestroy(enqueue_stream);
#endif
    for (int b = 0; b < opt.buffers; b++) {
        buf_free(bufs[b]);
        if (ins[b]) buf_free(ins[b]);
    }
    free(bufs); free(ins); free(host); free(host_stage); free(persistent);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
