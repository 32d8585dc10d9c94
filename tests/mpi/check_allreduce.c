/* Correctness matrix for MPI_Allreduce through har.
 *
 * Every rank generates every rank's input from (seed, case, rank), so each
 * computes the reference alone, with its own arithmetic (not har's): exact
 * for integers (wrapping, as unsigned), a double sum with an error bound
 * that scales with sum|x| for floats. Results must also be bitwise identical
 * on all ranks, and har's counters must show the expected paths served each
 * call (--expect), or the MPI (the cases har must hand to it, always checked).
 *
 *   check_allreduce [--seed S] [--sample K] [--counts a,b,..] [--expect p1,p2]
 *                   [--comms N] [--no-mpi-cases] [--any-path] [--types t1,t2] [--ops o1,o2]
 *                   [--steps N] [--device [--mixed|--mixed-late|--warm] [--host-first] [--other-gpu]]
 *                   [--managed] [--nonblocking]
 * --sample K: about one case in K, picked by the seed, and the first case
 * always.
 * --expect across: the transport between nodes that the README's rule
 * gives for the call's size: HAR_INTER's, else doubling up to
 * HAR_DOUBLING_MAX bytes (default 64 KiB) and the ring above.
 * --steps N: every case took exactly N node synchronisation steps (the test
 * build's har_test_steps). --host-first: a host all-reduce on every
 * communicator before the GPU is picked (the start-up order many
 * applications have), then one device all-reduce whose path is not
 * asserted (the node learns of CUDA during it). --mixed: odd world ranks
 * keep host buffers; --mixed-late: the same after two device all-reduces of
 * every rank on every communicator, which set the device engines up (then
 * the device ranks may go ahead of the arrival and the others join);
 * --warm: the same two device all-reduces, with no mixing after them (a
 * communicator's first device call surveys the node at an arrival, so only
 * later ones may go ahead). --other-gpu: the buffers live on another GPU
 * than the current one. --nonblocking: each case is an MPI_Iallreduce,
 * completed by MPI_Wait, a loop of MPI_Test, MPI_Waitall or a loop of
 * MPI_Testany in turn (a case har hands to the MPI then counts no path).
 * Exit 0 only if every case passed on every rank. */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"
#ifdef HAR_TEST_CUDA
#include <cuda_runtime.h>
#endif

typedef enum { INT, FLT, BOOL, BYTE } kind_t;
typedef struct { MPI_Datatype t; const char *name; kind_t kind; int size, is_signed; } type_t;
typedef struct { MPI_Op op; const char *name; } op_t;

static type_t types[] = {
    {MPI_SIGNED_CHAR, "signed_char", INT, 1, 1}, {MPI_UNSIGNED_CHAR, "unsigned_char", INT, 1, 0},
    {MPI_SHORT, "short", INT, sizeof(short), 1}, {MPI_UNSIGNED_SHORT, "unsigned_short", INT, sizeof(short), 0},
    {MPI_INT, "int", INT, sizeof(int), 1}, {MPI_UNSIGNED, "unsigned", INT, sizeof(int), 0},
    {MPI_LONG, "long", INT, sizeof(long), 1}, {MPI_UNSIGNED_LONG, "unsigned_long", INT, sizeof(long), 0},
    {MPI_LONG_LONG, "long_long", INT, 8, 1}, {MPI_UNSIGNED_LONG_LONG, "unsigned_long_long", INT, 8, 0},
    {MPI_INT8_T, "int8", INT, 1, 1}, {MPI_UINT8_T, "uint8", INT, 1, 0},
    {MPI_INT16_T, "int16", INT, 2, 1}, {MPI_UINT16_T, "uint16", INT, 2, 0},
    {MPI_INT32_T, "int32", INT, 4, 1}, {MPI_UINT32_T, "uint32", INT, 4, 0},
    {MPI_INT64_T, "int64", INT, 8, 1}, {MPI_UINT64_T, "uint64", INT, 8, 0},
    {MPI_FLOAT, "float", FLT, 4, 1}, {MPI_DOUBLE, "double", FLT, 8, 1},
    {MPI_C_BOOL, "c_bool", BOOL, sizeof(bool), 0}, {MPI_BYTE, "byte", BYTE, 1, 0},
};
#define NTYPES (int)(sizeof types / sizeof types[0])

static op_t ops[10];
static int nops;

/* Which (type, op) pairs the MPI standard allows (and har serves). */
static int allowed(const type_t *t, MPI_Op op)
{
    int arith = op == MPI_SUM || op == MPI_PROD || op == MPI_MIN || op == MPI_MAX;
    int logical = op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
    int bitwise = op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR;
    switch (t->kind) {
    case INT: return 1;
    case FLT: return arith;
    case BOOL: return logical;
    case BYTE: return bitwise;
    }
    return 0;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Little-endian low bytes of v; sizes known to the compiler, so no call. */
static void store_u(char *e, uint64_t v, int size)
{
    switch (size) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(e, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(e, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(e, &x, 4); break; }
    default: memcpy(e, &v, 8); break;
    }
}

/* Element i of rank r's input for one case: values chosen so that the op
 * is interesting (small factors for products, wide values for bitwise
 * ops). Counter-based (splitmix64 at the element's place), so any element
 * of any rank's input can be made alone. */
static void element(char *e, const type_t *t, MPI_Op op, size_t i, uint64_t seed)
{
    uint64_t s = seed + i * 0x9e3779b97f4a7c15ull, r = splitmix(&s);
    if (t->kind == FLT) {
        double v = op == MPI_PROD ? 0.5 + (double)(r >> 11) / 9007199254740992.0
                                  : 2.0 * (double)(r >> 11) / 9007199254740992.0 - 1.0;
        if (op == MPI_SUM) v *= 1000.0;
        if (t->size == 4) { float f = (float)v; memcpy(e, &f, 4); }
        else memcpy(e, &v, 8);
    } else if (t->kind == BOOL) {
        bool b = r & 1; memcpy(e, &b, sizeof b);
    } else {
        uint64_t v = r;
        if (op == MPI_PROD) v = (r % 5) - 2;         /* -2..2: products stay meaningful */
        else if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) v = (r % 4 == 0) ? 0 : r % 7;
        store_u(e, v, t->size);                      /* little-endian low bytes */
    }
}

static void fill(char *buf, const type_t *t, MPI_Op op, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) element(buf + i * (size_t)t->size, t, op, i, seed);
}

/* The seed of rank r's input in a case. */
static uint64_t rank_seed(uint64_t seed, int r) { return seed ^ (0x1000003ull * (uint64_t)(r + 1)); }

static uint64_t load_u(const char *e, int size)
{
    switch (size) {
    case 1: { uint8_t x; memcpy(&x, e, 1); return x; }
    case 2: { uint16_t x; memcpy(&x, e, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, e, 4); return x; }
    default: { uint64_t x; memcpy(&x, e, 8); return x; }
    }
}

static int64_t load_s(const char *e, int size)
{
    uint64_t v = load_u(e, size);
    int shift = 64 - 8 * size;
    return shift ? (int64_t)(v << shift) >> shift : (int64_t)v;
}

static double load_f(const char *e, int size)
{
    if (size == 4) { float f; memcpy(&f, e, 4); return f; }
    double d; memcpy(&d, e, 8); return d;
}

/* Checks result element i against the reduction of all ranks' inputs
 * (element i of each, made here: in[r] holds 8 bytes per rank). */
static int check_elem(const type_t *t, MPI_Op op, char **in, int nranks, size_t i, const char *got, uint64_t seed)
{
    const size_t at = 0;
    for (int r = 0; r < nranks; r++) element(in[r], t, op, i, rank_seed(seed, r));
    if (t->kind == FLT) {
        double ref = load_f(in[0] + at, t->size), mag = fabs(ref);
        for (int r = 1; r < nranks; r++) {
            double x = load_f(in[r] + at, t->size);
            if (op == MPI_SUM) ref += x;
            else if (op == MPI_PROD) ref *= x;
            else if (op == MPI_MIN) ref = x < ref ? x : ref;
            else ref = x > ref ? x : ref;
            mag = op == MPI_PROD ? fabs(ref) : mag + fabs(x);
        }
        double eps = t->size == 4 ? FLT_EPSILON : DBL_EPSILON;
        double bound = (op == MPI_SUM || op == MPI_PROD) ? 2.0 * nranks * eps * mag : 0.0;
        return fabs(load_f(got, t->size) - ref) <= bound;
    }
    uint64_t mask = t->size == 8 ? ~0ull : (1ull << (8 * t->size)) - 1;
    uint64_t acc = load_u(in[0] + at, t->size);
    for (int r = 1; r < nranks; r++) {
        uint64_t x = load_u(in[r] + at, t->size);
        if (op == MPI_SUM) acc += x;
        else if (op == MPI_PROD) acc *= x;
        else if (op == MPI_MIN || op == MPI_MAX) {
            int less = t->is_signed ? load_s(in[r] + at, t->size) < load_s((char *)&acc, t->size) : (x & mask) < (acc & mask);
            if ((op == MPI_MIN) == less && x != acc) acc = x;
        } else if (op == MPI_LAND) acc = (acc & mask) && (x & mask);
        else if (op == MPI_LOR) acc = (acc & mask) || (x & mask);
        else if (op == MPI_LXOR) acc = !(acc & mask) != !(x & mask);
        else if (op == MPI_BAND) acc &= x;
        else if (op == MPI_BOR) acc |= x;
        else acc ^= x;
    }
    return (load_u(got, t->size) & mask) == (acc & mask);
}

/* A hash of a result, 8 bytes at a time (results are compared by it). */
static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int world_rank;
/* har's counters, read by name (har.h): a call took a path when its counter grew. */
#define MAX_COUNTERS 256 /* the paths, then two per collective har wraps */
static unsigned long long before[MAX_COUNTERS];
static int ncounters, seen_at, mpi_at, iallreduce_at;
static int nonblocking;  /* --nonblocking */
static int expect_paths[MAX_COUNTERS], nexpect, expect_mpi, any_path;
static int expect_across; /* --expect across: its place in expect_paths + 1, or 0 */
static long expect_steps = -1;

/* The transport between nodes a call of `bytes` takes, by the README's
 * rule, from the same variables the library reads. HAR_INTER=nccl: NCCL,
 * unless HAR_NCCL=0 says it cannot serve (then by size); the tests that
 * expect it keep to the types and ops NCCL reduces. */
static int across_path(size_t bytes)
{
    const char *inter = getenv("HAR_INTER"), *max = getenv("HAR_DOUBLING_MAX"), *nccl = getenv("HAR_NCCL");
    if (inter && !strcmp(inter, "nccl")) {
        if (!nccl || strcmp(nccl, "0")) return har_counter_index("inter_nccl");
    } else if (inter && strcmp(inter, "auto")) {
        return har_counter_index(!strcmp(inter, "mpi") ? "inter_mpi" : inter);
    }
    char *end = NULL;
    double limit = max ? strtod(max, &end) : 65536;
    if (end && *end) limit *= *end == 'K' || *end == 'k' ? 1024.0 : *end == 'M' || *end == 'm' ? 1048576.0 : 1073741824.0;
    return har_counter_index(bytes <= limit ? "doubling" : "ring");
}
unsigned long long har_test_steps(void);  /* the test build of libhar */

/* Paths that served the last call, checked against what was expected. */
static int check_paths(int mpi_expected, size_t bytes, char *why, size_t len)
{
    if (expect_across) expect_paths[expect_across - 1] = across_path(bytes);
    unsigned long long now[MAX_COUNTERS];
    har_counters(now, MAX_COUNTERS);
    int ok = now[seen_at] == before[seen_at] + 1;
    int fwd = now[mpi_at] > before[mpi_at];
    if (nonblocking && (mpi_expected || expect_mpi)) {
        /* the MPI's own non-blocking call: har saw it, and counts no path */
        ok = now[iallreduce_at] == before[iallreduce_at] + 1 && now[seen_at] == before[seen_at];
    } else if (any_path) {
        /* --any-path: a tuning table picks the path; only "seen once" holds */
    } else if (mpi_expected || expect_mpi) {
        ok = ok && fwd;
    } else {
        ok = ok && !fwd;
        for (int k = 0; k < nexpect; k++)
            ok = ok && now[expect_paths[k]] > before[expect_paths[k]];
    }
    if (!ok) {
        size_t n = (size_t)snprintf(why, len, "paths:");
        for (int p = 0; p < ncounters; p++)
            if (now[p] > before[p]) n += (size_t)snprintf(why + n, len - n, " %s", har_counter_name(p));
        n += (size_t)snprintf(why + n, len - n, "; expected:");
        if (mpi_expected || expect_mpi) n += (size_t)snprintf(why + n, len - n, " mpi");
        for (int k = 0; !(mpi_expected || expect_mpi) && k < nexpect; k++)
            n += (size_t)snprintf(why + n, len - n, " %s", har_counter_name(expect_paths[k]));
    }
    return ok;
}

typedef struct { MPI_Comm comm; const char *name; uint64_t hash; } comm_t;

/* --device: the call gets device copies of the buffers (built with
 * HAR_TEST_CUDA); with --mixed, odd world ranks keep host buffers; with
 * --managed, the copies are managed memory; with --other-gpu, they are on
 * the next GPU, not the current one. The copies may still be landing (on
 * the legacy default stream) as the call starts: har's stream waits for
 * them. */
static int use_device, mixed, managed, host_first, other_gpu, warm;

#ifdef HAR_TEST_CUDA
static int my_gpu = -1, ngpus;

static cudaError_t alloc_device(void **p, size_t bytes)
{
    return managed ? cudaMallocManaged(p, bytes, cudaMemAttachGlobal) : cudaMalloc(p, bytes);
}
#endif

/* The call as the case makes it: blocking, or (--nonblocking) started and
 * completed by each of four completion calls in turn. */
static int reduce_call(const void *in, void *out, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    if (!nonblocking) return MPI_Allreduce(in, out, count, t, op, comm);
    static unsigned calls;
    MPI_Request req;
    MPI_Status status;
    int rc = MPI_Iallreduce(in, out, count, t, op, comm, &req), flag = 0, index;
    if (rc != MPI_SUCCESS) return rc;
    switch (calls++ % 4) {
    case 0:
        return MPI_Wait(&req, &status);
    case 1:
        while (rc == MPI_SUCCESS && !flag) rc = MPI_Test(&req, &flag, &status);
        return rc;
    case 2:
        return MPI_Waitall(1, &req, &status);
    default:
        while (rc == MPI_SUCCESS && !flag) rc = MPI_Testany(1, &req, &index, &flag, &status);
        return rc;
    }
}

static int allreduce(const void *in, char *out, size_t bytes, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
#ifdef HAR_TEST_CUDA
    if (use_device && !(mixed && world_rank % 2)) {
        char *din = NULL, *dout = NULL;
        size_t alloc = bytes ? bytes : 1;
        if (other_gpu) cudaSetDevice((my_gpu + 1) % ngpus);  /* the buffers' GPU, for everything but the call */
        if (alloc_device((void **)&dout, alloc) != cudaSuccess ||
            (in != MPI_IN_PLACE && alloc_device((void **)&din, alloc) != cudaSuccess)) {
            fprintf(stderr, "cudaMalloc failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        cudaMemcpy(dout, out, bytes, cudaMemcpyDefault);  /* poison, or the input when in place */
        if (din) cudaMemcpy(din, in, bytes, cudaMemcpyDefault);
        if (other_gpu) {
            cudaDeviceSynchronize();  /* har's stream waits for the current GPU's work only */
            cudaSetDevice(my_gpu);
        }
        int rc = reduce_call(din ? din : MPI_IN_PLACE, dout, count, t, op, comm);
        if (other_gpu) cudaSetDevice((my_gpu + 1) % ngpus);
        if (cudaMemcpy(out, dout, bytes, cudaMemcpyDefault) != cudaSuccess) rc = MPI_ERR_OTHER;
        cudaFree(din);
        cudaFree(dout);
        if (other_gpu) cudaSetDevice(my_gpu);
        return rc;
    }
#endif
    (void)bytes;
    return reduce_call(in, out, count, t, op, comm);
}

/* One case: returns 1 if it passed on this rank. */
static int run_case(comm_t *c, const type_t *t, const op_t *o, size_t count, int inplace,
                    uint64_t seed, int mpi_expected)
{
    int rank, size;
    MPI_Comm_rank(c->comm, &rank);
    MPI_Comm_size(c->comm, &size);
    size_t bytes = count * (size_t)t->size;
    char **in = malloc((size_t)size * sizeof *in), *mine = malloc(bytes + 1);
    for (int r = 0; r < size; r++) in[r] = malloc(8);  /* one element of each rank's input, for the reference */
    fill(mine, t, o->op, count, rank_seed(seed, rank));
    char *out = malloc(bytes + 1);
    memset(out, 0xA5, bytes);  /* poison: unwritten elements fail */
    if (inplace) memcpy(out, mine, bytes);
    har_counters(before, MAX_COUNTERS);
    unsigned long long steps = har_test_steps();
    int rc = allreduce(inplace ? MPI_IN_PLACE : mine, out, bytes, (int)count, t->t, o->op, c->comm);
    steps = har_test_steps() - steps;
    char why[256] = "";
    int ok = rc == MPI_SUCCESS;
    if (!ok) snprintf(why, sizeof why, "MPI error %d", rc);
    if (ok && expect_steps >= 0 && steps != (unsigned long long)expect_steps) {
        ok = 0;
        snprintf(why, sizeof why, "%llu node synchronisation steps, not %ld", steps, expect_steps);
    }
    /* Rank 0 checks every element against the reference; the others check
     * the first elements and a stride (a rank whose own result alone is
     * wrong shows there), and every rank's result must equal rank 0's
     * bitwise (the hash below): so every element of every rank is checked,
     * at a fraction of the reference's cost. */
    size_t bad = 0, first_bad = 0, stride = rank == 0 ? 1 : 61;
    for (size_t i = 0; ok && i < count; i += i < 256 ? 1 : stride)
        if (!check_elem(t, o->op, in, size, i, out + i * (size_t)t->size, seed) && bad++ == 0) first_bad = i;
    if (bad) { ok = 0; snprintf(why, sizeof why, "%zu wrong elements, first at %zu", bad, first_bad); }
    if (ok && !check_paths(mpi_expected || count == 0, bytes, why, sizeof why)) ok = 0;
    /* Bitwise identity across ranks is checked once per communicator at the
     * end, over a running hash of every result (fewer MPI calls: MPICH
     * busy-polls, and oversubscribed ranks would wait on each other). */
    c->hash = (c->hash ^ fnv(out, bytes)) * 1099511628211ull;
    if (!ok)
        fprintf(stderr, "FAIL rank %d: comm %s type %s op %s count %zu%s: %s\n", world_rank, c->name,
                t->name, o->name, count, inplace ? " in-place" : "", why);
    for (int r = 0; r < size; r++) free(in[r]);
    free(in); free(mine); free(out);
    return ok;
}

/* Cases har must hand to the MPI: still correct, and counted as mpi. */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static int mpi_cases(MPI_Comm comm)
{
    int rank, size, ok = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char why[256];
    long double ld = rank + 1, ld_out = 0;
    har_counters(before, MAX_COUNTERS);
    reduce_call(&ld, &ld_out, 1, MPI_LONG_DOUBLE, MPI_SUM, comm);
    ok &= ld_out == (long double)size * (size + 1) / 2 && check_paths(1, 0, why, sizeof why);
    double complex z = rank + 1.0 * I, z_out;
    har_counters(before, MAX_COUNTERS);
    reduce_call(&z, &z_out, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, comm);
    ok &= creal(z_out) == size * (size - 1) / 2.0 && cimag(z_out) == size && check_paths(1, 0, why, sizeof why);
    struct { double v; int i; } pair = {rank * 1.5, rank}, pair_out;
    har_counters(before, MAX_COUNTERS);
    reduce_call(&pair, &pair_out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm);
    ok &= pair_out.i == size - 1 && check_paths(1, 0, why, sizeof why);
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    int v[3] = {rank, 1, 2 * rank}, v_out[3];
    har_counters(before, MAX_COUNTERS);
    reduce_call(v, v_out, 3, MPI_INT, op, comm);
    ok &= v_out[1] == size && v_out[0] == size * (size - 1) / 2 && check_paths(1, 0, why, sizeof why);
    MPI_Op_free(&op);
    struct { short v; int i; } spair = {(short)(10 - rank), rank}, spair_out;
    har_counters(before, MAX_COUNTERS);
    reduce_call(&spair, &spair_out, 1, MPI_SHORT_INT, MPI_MINLOC, comm);
    ok &= spair_out.i == size - 1 && check_paths(1, 0, why, sizeof why);
    if (!ok) fprintf(stderr, "FAIL rank %d: a case for the MPI was wrong or not served by it\n", world_rank);
    return ok;
}

static size_t parse_list(const char *s, size_t *out, size_t max)
{
    size_t n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end) out[n++] = strtoull(s, &end, 10);
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    ncounters = har_counter_count();
    seen_at = har_counter_index("seen");
    mpi_at = har_counter_index("mpi");
    iallreduce_at = har_counter_index("iallreduce");
    if (ncounters > MAX_COUNTERS || seen_at < 0 || mpi_at < 0 || iallreduce_at < 0) {
        fprintf(stderr, "check_allreduce: har's counters are not what this test knows\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    uint64_t seed = 12345;
    long sample = 0;
    int ncomms = 4, with_mpi_cases = 1;
    char *only_types = NULL, *only_ops = NULL;  /* ",name,name," */
    size_t counts[32] = {0, 1, 7, 63, 64, 1000, 65537}, ncounts = 7;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--seed") && a + 1 < argc) seed = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--sample") && a + 1 < argc) sample = atol(argv[++a]);
        else if (!strcmp(argv[a], "--counts") && a + 1 < argc) ncounts = parse_list(argv[++a], counts, 32);
        else if (!strcmp(argv[a], "--comms") && a + 1 < argc) ncomms = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--no-mpi-cases")) with_mpi_cases = 0;
        else if (!strcmp(argv[a], "--any-path")) any_path = 1;
        else if (!strcmp(argv[a], "--device")) use_device = 1;
        else if (!strcmp(argv[a], "--mixed")) mixed = 1;
        else if (!strcmp(argv[a], "--mixed-late")) mixed = 2;
        else if (!strcmp(argv[a], "--warm")) warm = 1;
        else if (!strcmp(argv[a], "--host-first")) host_first = 1;
        else if (!strcmp(argv[a], "--other-gpu")) other_gpu = 1;
        else if (!strcmp(argv[a], "--steps") && a + 1 < argc) expect_steps = atol(argv[++a]);
        else if (!strcmp(argv[a], "--managed")) use_device = managed = 1;
        else if (!strcmp(argv[a], "--nonblocking")) nonblocking = 1;
        else if (!strcmp(argv[a], "--types") && a + 1 < argc) {
            only_types = malloc(strlen(argv[++a]) + 3);
            sprintf(only_types, ",%s,", argv[a]);
        }
        else if (!strcmp(argv[a], "--ops") && a + 1 < argc) {
            only_ops = malloc(strlen(argv[++a]) + 3);
            sprintf(only_ops, ",%s,", argv[a]);
        }
        else if (!strcmp(argv[a], "--expect") && a + 1 < argc) {
            char *list = argv[++a];
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                if (!strcmp(tok, "across")) {
                    expect_across = ++nexpect;  /* its place in expect_paths, + 1: set per call */
                    continue;
                }
                int p = har_counter_index(tok);
                if (p < 0) { fprintf(stderr, "unknown path %s\n", tok); MPI_Abort(MPI_COMM_WORLD, 2); }
                expect_paths[nexpect++] = p;
                expect_mpi |= !strcmp(tok, "mpi") || !strcmp(tok, "staged");
            }
        } else { fprintf(stderr, "unknown argument %s\n", argv[a]); MPI_Abort(MPI_COMM_WORLD, 2); }
    }
    ops[nops++] = (op_t){MPI_SUM, "sum"}; ops[nops++] = (op_t){MPI_PROD, "prod"};
    ops[nops++] = (op_t){MPI_MIN, "min"}; ops[nops++] = (op_t){MPI_MAX, "max"};
    ops[nops++] = (op_t){MPI_LAND, "land"}; ops[nops++] = (op_t){MPI_LOR, "lor"};
    ops[nops++] = (op_t){MPI_LXOR, "lxor"}; ops[nops++] = (op_t){MPI_BAND, "band"};
    ops[nops++] = (op_t){MPI_BOR, "bor"}; ops[nops++] = (op_t){MPI_BXOR, "bxor"};

    /* Several communicators, used in interleaved order: the world, a
     * duplicate, odd/even halves, and all but rank 0 in reverse order. */
    comm_t comms[4];
    int nc = 0;
    comms[nc++] = (comm_t){MPI_COMM_WORLD, "world", 0};
    MPI_Comm dup, half, rev;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    comms[nc++] = (comm_t){dup, "dup", 0};
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
    if (size >= 4) comms[nc++] = (comm_t){half, "half", 0};
    MPI_Comm_split(MPI_COMM_WORLD, world_rank == 0 ? MPI_UNDEFINED : 0, -world_rank, &rev);
    if (size >= 3) comms[nc++] = (comm_t){rev, "reversed", 0};
    if (nc > ncomms) nc = ncomms;
    /* --host-first: every communicator's first all-reduce is on host memory,
     * before this process touches CUDA. --nonblocking: a blocking one first
     * too, which makes har's state (its started calls are har's only on a
     * communicator a blocking call set up). */
    for (int k = 0; (host_first || nonblocking) && k < nc; k++) {
        int one = 1;
        if (comms[k].comm != MPI_COMM_NULL) MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, comms[k].comm);
    }
#ifdef HAR_TEST_CUDA
    /* One GPU per local rank, round robin, as launchers usually arrange. */
    MPI_Comm node;
    int local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    if (cudaGetDeviceCount(&ngpus) == cudaSuccess && ngpus > 0) cudaSetDevice(my_gpu = local % ngpus);
#endif
    /* --host-first: the call in which a node first sees CUDA still goes by
     * the host segment (the peers learn of it during that call; README,
     * "Arrival"); the GPU engines serve from the next. That call is made
     * here, its result checked, its path not asserted. */
    for (int k = 0; host_first && use_device && k < nc; k++) {
        if (comms[k].comm == MPI_COMM_NULL) continue;
        int one = 1, n;
        MPI_Comm_size(comms[k].comm, &n);
        if (allreduce(MPI_IN_PLACE, (char *)&one, sizeof one, 1, MPI_INT, MPI_SUM, comms[k].comm) != MPI_SUCCESS ||
            one != n) {
            fprintf(stderr, "FAIL rank %d: comm %s: the first device call gave %d, not %d\n", world_rank,
                    comms[k].name, one, n);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    if (mixed == 2 || warm) {
        int late = mixed == 2;
        mixed = 0;
        for (int k = 0; use_device && k < nc; k++)
            for (int i = 0; i < 2 && comms[k].comm != MPI_COMM_NULL; i++) {
                int one = 1, n;
                MPI_Comm_size(comms[k].comm, &n);
                if (allreduce(MPI_IN_PLACE, (char *)&one, sizeof one, 1, MPI_INT, MPI_SUM, comms[k].comm) !=
                        MPI_SUCCESS || one != n) {
                    fprintf(stderr, "FAIL rank %d: comm %s: a device call before the cases gave %d, not %d\n",
                            world_rank, comms[k].name, one, n);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
        mixed = late;
    }
    if (world_rank == 0) printf("check_allreduce: %d ranks, seed %llu, %s, %s buffers\n", size,
                                (unsigned long long)seed, sample ? "sampled" : "full matrix",
                                use_device ? (mixed ? "mixed device/host" : "device") : "host");
    long ncase = 0, nfail = 0, index = 0;
    char wanted[64];
    uint64_t pick = seed;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int oi = 0; oi < nops; oi++) {
            if (!allowed(&types[ti], ops[oi].op)) continue;
            snprintf(wanted, sizeof wanted, ",%s,", types[ti].name);
            if (only_types && !strstr(only_types, wanted)) continue;
            snprintf(wanted, sizeof wanted, ",%s,", ops[oi].name);
            if (only_ops && !strstr(only_ops, wanted)) continue;
            for (size_t ci = 0; ci < ncounts; ci++)
                for (int inplace = 0; inplace < 2; inplace++, index++) {
                    /* The first case always: a sampled run that made none would
                     * pass every check, the ones that must fail included. */
                    if (sample && splitmix(&pick) % (uint64_t)sample != 0 && index > 0) continue;
                    comm_t *c = &comms[index % nc];
                    if (c->comm == MPI_COMM_NULL) continue;
                    if (c->comm == rev && world_rank == 0) continue;
                    uint64_t case_seed = seed * 1000003ull + (uint64_t)index;
                    ncase++;
                    nfail += !run_case(c, &types[ti], &ops[oi], counts[ci], inplace, case_seed, 0);
                }
        }
    if (with_mpi_cases) { ncase++; nfail += !mpi_cases(MPI_COMM_WORLD); }
    for (int k = 0; k < nc; k++) {
        if (comms[k].comm == MPI_COMM_NULL) continue;
        int csize;
        MPI_Comm_size(comms[k].comm, &csize);
        uint64_t *all = malloc((size_t)csize * sizeof *all);
        MPI_Allgather(&comms[k].hash, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comms[k].comm);
        for (int r = 0; r < csize; r++)
            if (all[r] != comms[k].hash) {
                fprintf(stderr, "FAIL rank %d: comm %s: results differ bitwise from rank %d's\n", world_rank,
                        comms[k].name, r);
                nfail++;
                break;
            }
        free(all);
    }
    long totals[2] = {ncase, nfail}, sums[2];
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0) printf("check_allreduce: %ld case runs over all ranks, %ld failed\n", sums[0], sums[1]);
    int failed = nfail > 0, any;
    MPI_Reduce(&failed, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    if (rev != MPI_COMM_NULL) MPI_Comm_free(&rev);
    MPI_Finalize();
    return any ? 1 : 0;
}
