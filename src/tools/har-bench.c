/* har-bench: MPI_Allreduce through har beside the alternatives, in one run,
 * interleaved size by size on the same buffers.
 *
 *   har-bench [--min BYTES] [--max BYTES] [--type float|double|int|long]
 *             [--op sum|max|min|prod] [--device] [--iters N] [--warmup N]
 *             [--buffers K] [--check] [--csv FILE] [--quiet]
 *
 * Candidates: "har" (the intercepted MPI_Allreduce) and "mpi" (the MPI's own
 * PMPI_Allreduce; device buffers are staged through host memory around it, as
 * users without a CUDA-aware MPI do). Each iteration's time is the maximum
 * over ranks; the table gives medians with 10th/90th percentiles, ratios,
 * and bus bandwidth (algorithm bandwidth x 2(n-1)/n). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"
#ifdef HAR_BENCH_CUDA
#include <cuda_runtime.h>
#endif

typedef struct { const char *name; MPI_Datatype type; size_t size; } type_opt_t;
static const type_opt_t type_opts[] = {
    {"float", MPI_FLOAT, 4}, {"double", MPI_DOUBLE, 8}, {"int", MPI_INT, 4}, {"long", MPI_LONG, 8}};
static const struct { const char *name; MPI_Op op; } op_opts[] = {
    {"sum", MPI_SUM}, {"max", MPI_MAX}, {"min", MPI_MIN}, {"prod", MPI_PROD}};

enum { CAND_HAR, CAND_MPI, NCAND };
static const char *const cand_names[NCAND] = {"har", "mpi"};

static struct {
    size_t min_bytes, max_bytes;
    const type_opt_t *type;
    MPI_Op op;
    const char *op_name;
    int device, iters, warmup, buffers, check, quiet;
    const char *csv;
} opt = {4, 64 << 20, &type_opts[0], MPI_SUM, "sum", 0, 0, 5, 4, 0, 0, NULL};

static int rank, nranks;
static char *host_stage;

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

static int one_call(int cand, void *buf, size_t n)
{
    if (cand == CAND_HAR) return MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, opt.type->type, opt.op, MPI_COMM_WORLD);
    if (!opt.device) return PMPI_Allreduce(MPI_IN_PLACE, buf, (int)n, opt.type->type, opt.op, MPI_COMM_WORLD);
    size_t bytes = n * opt.type->size;
    from_buf(host_stage, buf, bytes);
    int rc = PMPI_Allreduce(MPI_IN_PLACE, host_stage, (int)n, opt.type->type, opt.op, MPI_COMM_WORLD);
    to_buf(buf, host_stage, bytes);
    return rc;
}

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

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(arg, "--min") && val) opt.min_bytes = parse_bytes(argv[++a]);
        else if (!strcmp(arg, "--max") && val) opt.max_bytes = parse_bytes(argv[++a]);
        else if (!strcmp(arg, "--iters") && val) opt.iters = atoi(argv[++a]);
        else if (!strcmp(arg, "--warmup") && val) opt.warmup = atoi(argv[++a]);
        else if (!strcmp(arg, "--buffers") && val) opt.buffers = atoi(argv[++a]);
        else if (!strcmp(arg, "--csv") && val) opt.csv = argv[++a];
        else if (!strcmp(arg, "--check")) opt.check = 1;
        else if (!strcmp(arg, "--quiet")) opt.quiet = 1;
        else if (!strcmp(arg, "--device")) opt.device = 1;
        else if (!strcmp(arg, "--type") && val) {
            opt.type = NULL;
            for (size_t t = 0; t < sizeof type_opts / sizeof *type_opts; t++)
                if (!strcmp(argv[a + 1], type_opts[t].name)) opt.type = &type_opts[t];
            if (!opt.type) die("unknown --type");
            a++;
        } else if (!strcmp(arg, "--op") && val) {
            opt.op_name = NULL;
            for (size_t o = 0; o < sizeof op_opts / sizeof *op_opts; o++)
                if (!strcmp(argv[a + 1], op_opts[o].name)) { opt.op = op_opts[o].op; opt.op_name = op_opts[o].name; }
            if (!opt.op_name) die("unknown --op");
            a++;
        } else die("usage: har-bench [--min B] [--max B] [--type T] [--op O] [--device] [--iters N] "
                   "[--warmup N] [--buffers K] [--check] [--csv FILE] [--quiet]");
    }
#ifndef HAR_BENCH_CUDA
    if (opt.device) die("--device: har-bench was built without CUDA");
#else
    if (opt.device) {
        MPI_Comm node;
        int local, ndev = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) die("--device: no GPU visible");
        cudaSetDevice(local % ndev);
    }
#endif
    size_t max_n = opt.max_bytes / opt.type->size;
    if (max_n == 0) die("--max is smaller than one element");
    char *host = malloc(max_n * opt.type->size);
    host_stage = malloc(max_n * opt.type->size);
    void **bufs = malloc((size_t)opt.buffers * sizeof *bufs);
    for (int b = 0; b < opt.buffers; b++) bufs[b] = buf_alloc(max_n * opt.type->size);
    FILE *csv = NULL;
    if (opt.csv && rank == 0 && !(csv = fopen(opt.csv, "w"))) die("cannot write the CSV file");
    if (csv) fprintf(csv, "bytes,candidate,ranks,buffers,type,op,median_us,p10_us,p90_us,algbw_GBs,busbw_GBs,checked\n");
    if (rank == 0) {
        printf("# har-bench: %d ranks, %s %s, %s buffers (rotating over %d), time = max over ranks per call\n",
               nranks, opt.type->name, opt.op_name, opt.device ? "device" : "host", opt.buffers);
        printf("%12s %12s %12s %9s %12s %10s %s\n", "bytes", "har_us", "mpi_us", "har/mpi",
               "har_busbw", "mpi_busbw", "checked");
    }
    int all_ok = 1;
    for (size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
        size_t n = bytes / opt.type->size;
        if (n == 0) continue;
        int iters = opt.iters ? opt.iters : (int)fmin(1000, fmax(10, 2e8 / (double)bytes));
        double *t[NCAND], med[NCAND], p10[NCAND], p90[NCAND];
        int ok[NCAND];
        for (int c = 0; c < NCAND; c++) {
            t[c] = calloc((size_t)iters, sizeof(double));
            /* Correctness first, outside the timing: fresh data, one call, check. */
            fill(host, n, rank);
            to_buf(bufs[0], host, n * opt.type->size);
            ok[c] = one_call(c, bufs[0], n) == MPI_SUCCESS;
            from_buf(host, bufs[0], n * opt.type->size);
            if (opt.check) ok[c] = ok[c] && verify(host, n);
            PMPI_Allreduce(MPI_IN_PLACE, &ok[c], 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            all_ok &= ok[c];
        }
        /* Interleaved: har, mpi, har, mpi ... on the same rotating buffers.
         * The data grow by repeated sums here; only timing matters now. */
        for (int it = -opt.warmup; it < iters; it++)
            for (int c = 0; c < NCAND; c++) {
                void *buf = bufs[(it + opt.warmup) % opt.buffers];
                double t0 = MPI_Wtime();
                one_call(c, buf, n);
                double dt = MPI_Wtime() - t0;
                if (it >= 0) t[c][it] = dt;
            }
        for (int c = 0; c < NCAND; c++) {
            PMPI_Allreduce(MPI_IN_PLACE, t[c], iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(t[c], (size_t)iters, sizeof(double), cmp_double);
            med[c] = t[c][iters / 2] * 1e6;
            p10[c] = t[c][iters / 10] * 1e6;
            p90[c] = t[c][iters * 9 / 10] * 1e6;
            free(t[c]);
        }
        double factor = nranks > 1 ? 2.0 * (nranks - 1) / nranks : 1.0, real_bytes = (double)(n * opt.type->size);
        if (rank == 0) {
            printf("%12zu %12.2f %12.2f %9.2f %10.2fGB %8.2fGB %s\n", n * opt.type->size, med[CAND_HAR],
                   med[CAND_MPI], med[CAND_HAR] / med[CAND_MPI], real_bytes / med[CAND_HAR] * 1e-3 * factor,
                   real_bytes / med[CAND_MPI] * 1e-3 * factor,
                   opt.check ? (ok[CAND_HAR] && ok[CAND_MPI] ? "yes" : "FAILED") : "no");
            fflush(stdout);
            for (int c = 0; csv && c < NCAND; c++)
                fprintf(csv, "%zu,%s,%d,%s,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,%s\n", n * opt.type->size, cand_names[c],
                        nranks, opt.device ? "device" : "host", opt.type->name, opt.op_name, med[c], p10[c],
                        p90[c], real_bytes / med[c] * 1e-3, real_bytes / med[c] * 1e-3 * factor,
                        opt.check ? (ok[c] ? "yes" : "FAILED") : "no");
        }
        if (bytes > opt.max_bytes / 2) break;
    }
    if (csv) fclose(csv);
    for (int b = 0; b < opt.buffers; b++) buf_free(bufs[b]);
    free(bufs); free(host); free(host_stage);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
