/* MPI_Allreduce_c (MPI-4 large counts) through har, with har's counters.
 *
 * large_count small: odd counts (1, 7, 1001, 65537, 300001) of MPI_INT and
 * MPI_DOUBLE sums, in place and not, on MPI_COMM_WORLD and a duplicate:
 * every call served by har (its host_segment counter moves), every element
 * checked against a reference computed here; MPI_LONG_DOUBLE, which har
 * leaves to the MPI, forwarded (the mpi counter moves) with the right
 * answer; MPI_DATATYPE_NULL giving the MPI's own error class
 * (PMPI_Allreduce_c's; not with --no-bad-input, for an MPI that aborts on
 * it itself); MPI_Iallreduce_c and MPI_Allreduce_init_c (started
 * twice, on new data) counted by har's wrappers and checked, and, under the
 * test build's HAR_TEST_STAGE=1, staged.
 *
 * large_count large: one in-place MPI_BOR of 2^31 + 1001 MPI_BYTE elements
 * (a count no int holds; 2 GiB and more per rank), served by har (run it
 * with HAR_MAX_BYTES above that), checked on a sample: the first and last
 * MiB, the MiB around 2^31, and every 4099th byte.
 *
 * large_count bcast: one MPI_Bcast_c of 2^31 + 1001 MPI_BYTE elements from
 * the last rank, through har's wrapper (staged under HAR_TEST_STAGE=1, its
 * counters say), checked on the same sample.
 *
 * Prints "large_count: ok ..." from rank 0 when everything matched, a
 * line per difference from the rank that saw it, and exits 1 then. Built
 * everywhere; where the MPI has no MPI_Allreduce_c it says so and exits 77. */
#ifdef HAVE_CONFIG_H
#include <config.h>  /* HAR_HAVE_MPI_C_COUNTS */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"

#ifndef HAR_HAVE_MPI_C_COUNTS
int main(void)
{
    printf("large_count: this MPI has no MPI_Allreduce_c (MPI-4 large counts)\n");
    return 77;
}
#else

static int rank, nranks, failures;

static void fail(const char *what, long long n, long long i, double got, double want)
{
    if (++failures <= 10)
        printf("large_count: FAIL rank %d: %s count %lld element %lld: got %.17g, want %.17g\n", rank, what, n, i, got,
               want);
}

static unsigned long long counter(const char *name)
{
    unsigned long long v[64] = {0};
    har_counters(v, 64);
    int k = har_counter_index(name);
    return k >= 0 && k < 64 ? v[k] : 0;
}

/* Did exactly the one call since `before` take path `name`? */
static void expect_path(const char *name, unsigned long long before, const char *what, long long n)
{
    if (counter(name) != before + 1) {
        failures++;
        printf("large_count: FAIL rank %d: %s count %lld: not counted under %s\n", rank, what, n, name);
    }
}

static int ivalue(int r, MPI_Count i) { return (int)((i * 7 + r * 13) % 2001) - 1000; }
static double dvalue(int r, MPI_Count i) { return (double)((i * 3 + r * 5) % 101) * 0.25; }

/* Under HAR_TEST_STAGE=1 har stages host buffers as if they were device
 * memory: its name_staged counters move too. */
static int staging(void)
{
    const char *v = getenv("HAR_TEST_STAGE");
    return v && !strcmp(v, "1");
}

/* Did the one call since `before` reach har's wrapper `name` (and, when
 * staging, its name_staged counter)? */
static void expect_wrapped(const char *name, unsigned long long before, unsigned long long before_staged)
{
    char staged[64];
    snprintf(staged, sizeof staged, "%s_staged", name);
    if (counter(name) != before + 1 || counter(staged) != before_staged + (unsigned long long)staging()) {
        failures++;
        printf("large_count: FAIL rank %d: %s: counted %llu, staged %llu, before %llu and %llu\n", rank, name,
               counter(name), counter(staged), before, before_staged);
    }
}

static void check_sum(const char *what, const int *got, MPI_Count n, int round)
{
    for (MPI_Count i = 0; i < n; i++) {
        int want = 0;
        for (int r = 0; r < nranks; r++) want += ivalue(r + round, i);
        if (got[i] != want) fail(what, (long long)n, (long long)i, got[i], want);
    }
}

/* The non-blocking and persistent all-reduce's _c forms. */
static void requests(void)
{
    static const MPI_Count counts[] = {7, 65537};
    for (size_t k = 0; k < 2; k++) {
        MPI_Count n = counts[k];
        int *s = malloc((size_t)n * sizeof *s), *r = malloc((size_t)n * sizeof *r);
        for (MPI_Count i = 0; i < n; i++) s[i] = ivalue(rank, i);
        MPI_Request req;
        unsigned long long b = counter("iallreduce"), bs = counter("iallreduce_staged");
        MPI_Iallreduce_c(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
        expect_wrapped("iallreduce", b, bs);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        check_sum("MPI_Iallreduce_c", r, n, 0);
        b = counter("allreduce_init");
        bs = counter("allreduce_init_staged");
        MPI_Allreduce_init_c(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
        expect_wrapped("allreduce_init", b, bs);
        for (int round = 0; round < 2; round++) {
            for (MPI_Count i = 0; i < n; i++) s[i] = ivalue(rank + round, i);
            MPI_Start(&req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            check_sum("MPI_Allreduce_init_c", r, n, round);
        }
        MPI_Request_free(&req);
        free(s);
        free(r);
    }
}

static int no_bad_input;  /* --no-bad-input: the MPI aborts on a null datatype itself */

static void small(void)
{
    static const MPI_Count counts[] = {1, 7, 1001, 65537, 300001};
    MPI_Comm comms[2] = {MPI_COMM_WORLD, MPI_COMM_NULL};
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    for (int c = 0; c < 2; c++)
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
            for (int inplace = 0; inplace < 2; inplace++) {
                MPI_Count n = counts[k];
                int *is = malloc((size_t)n * sizeof *is), *ir = malloc((size_t)n * sizeof *ir);
                double *ds = malloc((size_t)n * sizeof *ds), *dr = malloc((size_t)n * sizeof *dr);
                for (MPI_Count i = 0; i < n; i++) {
                    is[i] = ir[i] = ivalue(rank, i);
                    ds[i] = dr[i] = dvalue(rank, i);
                }
                unsigned long long before = counter("host_segment");
                MPI_Allreduce_c(inplace ? MPI_IN_PLACE : is, ir, n, MPI_INT, MPI_SUM, comms[c]);
                expect_path("host_segment", before, "MPI_INT", (long long)n);
                before = counter("host_segment");
                MPI_Allreduce_c(inplace ? MPI_IN_PLACE : ds, dr, n, MPI_DOUBLE, MPI_SUM, comms[c]);
                expect_path("host_segment", before, "MPI_DOUBLE", (long long)n);
                for (MPI_Count i = 0; i < n; i++) {
                    int iw = 0;
                    double dw = 0;
                    for (int r = 0; r < nranks; r++) {
                        iw += ivalue(r, i);
                        dw += dvalue(r, i);
                    }
                    if (ir[i] != iw) fail("MPI_INT sum", (long long)n, (long long)i, ir[i], iw);
                    if (dr[i] != dw) fail("MPI_DOUBLE sum", (long long)n, (long long)i, dr[i], dw);
                }
                free(is); free(ir); free(ds); free(dr);
            }
    MPI_Comm_free(&comms[1]);

    /* What har does not serve goes to the MPI through PMPI_Allreduce_c. */
    long double ls[5], lr[5];
    for (int i = 0; i < 5; i++) ls[i] = (long double)(rank + i);
    unsigned long long before = counter("mpi");
    MPI_Allreduce_c(ls, lr, 5, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    expect_path("mpi", before, "MPI_LONG_DOUBLE", 5);
    for (int i = 0; i < 5; i++) {
        long double w = (long double)nranks * i + (long double)nranks * (nranks - 1) / 2;
        if (lr[i] != w) fail("MPI_LONG_DOUBLE sum", 5, i, (double)lr[i], (double)w);
    }

    /* Bad input: the MPI's own error class (where the MPI checks it). */
    if (no_bad_input) {
        requests();
        return;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int a[4] = {0}, b[4], cls_har = -1, cls_mpi = -1;
    MPI_Error_class(MPI_Allreduce_c(a, b, 4, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD), &cls_har);
    MPI_Error_class(PMPI_Allreduce_c(a, b, 4, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD), &cls_mpi);
    if (cls_har != cls_mpi || cls_har == MPI_SUCCESS) {
        failures++;
        printf("large_count: FAIL rank %d: MPI_DATATYPE_NULL: error class %d with har, %d without\n", rank, cls_har,
               cls_mpi);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    requests();
}

/* Rank r's bytes hold the bits r, r + nranks, ... of a hash of the
 * element's index (all 64 bits of it, so an element 2^31 away differs), so
 * the OR over ranks is the hash itself. */
static unsigned char hash(uint64_t i) { return (unsigned char)((i * 0x9E3779B97F4A7C15ull) >> 56); }

static unsigned char mask(int r)
{
    unsigned char m = 0;
    for (int bit = r; bit < 8; bit += nranks) m |= (unsigned char)(1u << bit);
    return m;
}

/* buf holds hash(i) at i: checked on the first and last MiB, the MiB
 * around 2^31 and every 4099th byte. */
static void check_sample(const unsigned char *buf, MPI_Count n, const char *what)
{
    const MPI_Count mib = 1 << 20, mid = (MPI_Count)1 << 31;
    long long checked = 0;
    for (MPI_Count i = 0; i < n; i++) {
        int sampled = i < mib || i >= n - mib || (i >= mid - mib / 2 && i < mid + mib / 2) || i % 4099 == 0;
        if (!sampled) continue;
        checked++;
        if (buf[i] != hash((uint64_t)i)) fail(what, (long long)n, (long long)i, buf[i], hash((uint64_t)i));
    }
    if (rank == 0) printf("large_count: %lld of %lld bytes checked\n", checked, (long long)n);
}

static void large(void)
{
    const MPI_Count n = ((MPI_Count)1 << 31) + 1001;
    unsigned char *buf = malloc((size_t)n), m = mask(rank);
    if (!buf) {
        printf("large_count: FAIL rank %d: no memory for %lld bytes\n", rank, (long long)n);
        failures++;
        return;
    }
    for (MPI_Count i = 0; i < n; i++) buf[i] = hash((uint64_t)i) & m;
    unsigned long long before = counter("host_segment");
    MPI_Allreduce_c(MPI_IN_PLACE, buf, n, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
    expect_path("host_segment", before, "MPI_BYTE bor", (long long)n);
    check_sample(buf, n, "MPI_BYTE bor");
    free(buf);
}

/* One MPI_Bcast_c of a count no int holds, from the last rank. */
static void bcast(void)
{
    const MPI_Count n = ((MPI_Count)1 << 31) + 1001;
    unsigned char *buf = malloc((size_t)n);
    int root = nranks - 1;
    if (!buf) {
        printf("large_count: FAIL rank %d: no memory for %lld bytes\n", rank, (long long)n);
        failures++;
        return;
    }
    for (MPI_Count i = 0; i < n; i++) buf[i] = rank == root ? hash((uint64_t)i) : 0;
    unsigned long long b = counter("bcast"), bs = counter("bcast_staged");
    MPI_Bcast_c(buf, n, MPI_BYTE, root, MPI_COMM_WORLD);
    expect_wrapped("bcast", b, bs);
    check_sample(buf, n, "MPI_Bcast_c");
    free(buf);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *what = argc > 1 ? argv[1] : "";
    no_bad_input = argc > 2 && !strcmp(argv[2], "--no-bad-input");
    if (!strcmp(what, "small")) small();
    else if (!strcmp(what, "large")) large();
    else if (!strcmp(what, "bcast")) bcast();
    else {
        fprintf(stderr, "usage: large_count small [--no-bad-input]|large|bcast\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int total = 0;
    PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("large_count: %s: %s (%d differences)\n", what, total ? "FAIL" : "ok", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
#endif
