/* The Fortran datatypes through har against the MPI's own, from C.
 *
 * For every Fortran type har may serve and every op it has, on counts 1,
 * 7 and 1001: the same inputs through MPI_Allreduce (har) and
 * PMPI_Allreduce (the MPI alone) must give the same error class and, on
 * success, the same bytes; har's counters must show it served the pair
 * exactly where the MPI standard allows the op on the type's group
 * (written here, from the standard's table), and handed it to the MPI
 * everywhere else, where the MPI reports the error itself. Inputs differ
 * per rank and element: integers include values whose sums and products
 * wrap, floating-point values are small multiples of 1/4 (every sum and
 * product exact in any order), LOGICAL values include true patterns other
 * than 1.
 *
 * Rank 0 prints one line per type; any difference is printed by the rank
 * that saw it. Exit 0 when everything matched. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"

typedef enum { INTEGER, FLOATING, LOGICAL } group_t;
typedef struct { MPI_Datatype type; const char *name; group_t group; } type_case_t;
typedef enum { ARITH, LOGIC, BITWISE } op_group_t;
typedef struct { MPI_Op op; const char *name; op_group_t group; } op_case_t;

/* MPI standard, "Predefined Reduction Operations": MAX, MIN, SUM, PROD
 * take Fortran integers and floating point; LAND, LOR, LXOR C integers
 * and Logical (not Fortran integers); BAND, BOR, BXOR C and Fortran
 * integers and Byte (not floating point or Logical). */
static int allowed(group_t t, op_group_t o)
{
    switch (o) {
    case ARITH: return t == INTEGER || t == FLOATING;
    case LOGIC: return t == LOGICAL;
    default: return t == INTEGER;
    }
}

static int rank, nranks, failures;

static void put(unsigned char *p, size_t size, int64_t v)
{
    int8_t v1 = (int8_t)v; int16_t v2 = (int16_t)v; int32_t v4 = (int32_t)v;
    memcpy(p, size == 1 ? (void *)&v1 : size == 2 ? (void *)&v2 : size == 4 ? (void *)&v4 : (void *)&v, size);
}

static void fill(unsigned char *buf, const type_case_t *t, size_t size, int n, int rank)
{
    static const int64_t ints[] = {0, 1, -1, 3, -7, 100, 127, -128, 32767, 1 << 20, INT32_MAX, INT32_MIN,
                                   INT64_MAX, 0x5555555555555555ll, -12345678901ll};
    static const double reals[] = {0.25, -1.5, 2, 3, -0.75, 1, 4, -8, 0};
    static const int64_t logicals[] = {0, 1, 2, -1, 0, 1};
    for (int i = 0; i < n; i++) {
        int k = i * 7 + rank * 3;
        unsigned char *p = buf + (size_t)i * size;
        if (t->group == INTEGER) put(p, size, ints[k % (int)(sizeof ints / sizeof *ints)]);
        else if (t->group == LOGICAL) put(p, size, logicals[k % (int)(sizeof logicals / sizeof *logicals)]);
        else {
            double d = reals[k % (int)(sizeof reals / sizeof *reals)];
            float f = (float)d;
            memcpy(p, size == 4 ? (void *)&f : (void *)&d, size);
        }
    }
}

#ifdef OPEN_MPI
static int64_t get(const unsigned char *p, size_t size)
{
    int8_t v1; int16_t v2;
    if (size == 1) return memcpy(&v1, p, 1), v1;
    return memcpy(&v2, p, 2), v2;
}
#endif

/* Open MPI 4.1's vector (AVX) reductions saturate 8- and 16-bit integer
 * sums where its scalar code wraps, so its answer depends on the count
 * (open-mpi/ompi#8045, "wontfix"); har wraps, as MPICH does. Where only
 * that differs, har's answer is checked against a wrapping sum of every
 * rank's inputs and the MPI's must be saturated. */
static int saturated_by_open_mpi(const type_case_t *t, size_t size, const op_case_t *o, int n,
                                 const unsigned char *got, const unsigned char *want)
{
#ifdef OPEN_MPI
    if (t->group != INTEGER || size > 2 || o->op != MPI_SUM) return 0;
    unsigned char *one = malloc(size * (size_t)n);
    int64_t lo = size == 1 ? INT8_MIN : INT16_MIN, hi = size == 1 ? INT8_MAX : INT16_MAX;
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        /* A saturating sum differs from a wrapping one only where a partial
         * sum, in whatever order the MPI adds, leaves the type's range: then
         * the sum of the positive inputs or of the negative ones does. */
        int64_t sum = 0, pos = 0, neg = 0;
        for (int r = 0; r < nranks; r++) {
            fill(one, t, size, i + 1, r);
            int64_t v = get(one + (size_t)i * size, size);
            sum += v;
            if (v > 0) pos += v; else neg += v;
        }
        unsigned char wrapped[2];
        put(wrapped, size, sum);
        ok = memcmp(got + (size_t)i * size, wrapped, size) == 0 &&
             (memcmp(got + (size_t)i * size, want + (size_t)i * size, size) == 0 || pos > hi || neg < lo);
    }
    free(one);
    return ok;
#else
    (void)t; (void)size; (void)o; (void)n; (void)got; (void)want;
    return 0;
#endif
}

static unsigned long long counter(const char *name)
{
    unsigned long long v[64] = {0};
    har_counters(v, 64);
    int k = har_counter_index(name);
    return k >= 0 && k < 64 ? v[k] : 0;
}

static int error_class(int rc)
{
    int cls = -1;
    if (rc == MPI_SUCCESS) return MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    return cls;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const type_case_t types[] = {
        {MPI_INTEGER, "MPI_INTEGER", INTEGER},   {MPI_INTEGER1, "MPI_INTEGER1", INTEGER},
        {MPI_INTEGER2, "MPI_INTEGER2", INTEGER}, {MPI_INTEGER4, "MPI_INTEGER4", INTEGER},
        {MPI_INTEGER8, "MPI_INTEGER8", INTEGER}, {MPI_REAL, "MPI_REAL", FLOATING},
        {MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", FLOATING},
        {MPI_REAL4, "MPI_REAL4", FLOATING},      {MPI_REAL8, "MPI_REAL8", FLOATING},
        {MPI_LOGICAL, "MPI_LOGICAL", LOGICAL},
    };
    const op_case_t ops[] = {
        {MPI_SUM, "sum", ARITH},   {MPI_PROD, "prod", ARITH}, {MPI_MIN, "min", ARITH}, {MPI_MAX, "max", ARITH},
        {MPI_LAND, "land", LOGIC}, {MPI_LOR, "lor", LOGIC},   {MPI_LXOR, "lxor", LOGIC},
        {MPI_BAND, "band", BITWISE}, {MPI_BOR, "bor", BITWISE}, {MPI_BXOR, "bxor", BITWISE},
    };
    static const int counts[] = {1, 7, 1001};
    enum { MAXN = 1001 };
    unsigned char *in = malloc(MAXN * 8), *got = malloc(MAXN * 8), *want = malloc(MAXN * 8);

    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const type_case_t *t = &types[ti];
        int size = 0;
        if (t->type == MPI_DATATYPE_NULL || PMPI_Type_size(t->type, &size) != MPI_SUCCESS || size <= 0 || size > 8) {
            if (rank == 0) printf("types: %s: not in this MPI, not tried\n", t->name);
            continue;
        }
        char served[128] = "", to_mpi[256] = "";
        for (size_t oi = 0; oi < sizeof ops / sizeof *ops; oi++) {
            const op_case_t *o = &ops[oi];
            int ok = allowed(t->group, o->group), cls_har = 0, cls_mpi = 0;
            for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
                int n = counts[ci];
                fill(in, t, (size_t)size, n, rank);
                memset(got, 0xa5, (size_t)n * size);
                memset(want, 0xa5, (size_t)n * size);
                unsigned long long mpi0 = counter("mpi"), seg0 = counter("host_segment");
                cls_har = error_class(MPI_Allreduce(in, got, n, t->type, o->op, MPI_COMM_WORLD));
                int by_mpi = counter("mpi") > mpi0, by_har = counter("host_segment") > seg0;
                cls_mpi = error_class(PMPI_Allreduce(in, want, n, t->type, o->op, MPI_COMM_WORLD));
                const char *why = NULL;
                if (cls_har != cls_mpi) why = "another error class than the MPI's";
                else if (cls_har == MPI_SUCCESS && memcmp(got, want, (size_t)n * size) != 0) {
                    if (saturated_by_open_mpi(t, (size_t)size, o, n, got, want)) {
                        if (rank == 0)
                            printf("types: note: %s sum count %d: Open MPI saturates where har wraps "
                                   "(open-mpi/ompi#8045); har's answer is the wrapping sum\n", t->name, n);
                    } else
                        why = "another result than the MPI's";
                }
                else if (ok && !by_har) why = "not served by har, though the standard allows it";
                else if (!ok && !by_mpi) why = "served by har, though the standard forbids it";
                if (why) {
                    int at = 0;
                    while (at < n - 1 && !memcmp(got + (size_t)at * size, want + (size_t)at * size, (size_t)size)) at++;
                    uint64_t g = 0, w = 0;
                    memcpy(&g, got + (size_t)at * size, (size_t)size);
                    memcpy(&w, want + (size_t)at * size, (size_t)size);
                    failures++;
                    printf("types: FAIL rank %d: %s %s count %d: %s (error class %d with har, %d without; "
                           "element %d: 0x%llx with har, 0x%llx without)\n",
                           rank, t->name, o->name, n, why, cls_har, cls_mpi, at, (unsigned long long)g,
                           (unsigned long long)w);
                }
            }
            char *list = ok ? served : to_mpi;
            snprintf(list + strlen(list), (ok ? sizeof served : sizeof to_mpi) - strlen(list), " %s", o->name);
            if (!ok && cls_mpi == MPI_ERR_OP) snprintf(to_mpi + strlen(to_mpi), sizeof to_mpi - strlen(to_mpi), "(MPI_ERR_OP)");
            else if (!ok) snprintf(to_mpi + strlen(to_mpi), sizeof to_mpi - strlen(to_mpi), "(class %d)", cls_mpi);
        }
        if (rank == 0) printf("types: %s (%d bytes): served:%s; to the MPI:%s\n", t->name, size, served, to_mpi);
    }
    int total = 0;
    PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("types: %s (%d differences)\n", total ? "FAIL" : "ok", total);
    free(in); free(got); free(want);
    MPI_Finalize();
    return total ? 1 : 0;
}
