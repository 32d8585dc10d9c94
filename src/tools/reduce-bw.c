/* reduce-bw: bandwidth of har's host reductions beside memcpy's, one core,
 * on this machine. Bytes counted as the kernel moves them: a reduction reads
 * two operands and writes one (3n), memcpy reads one and writes one (2n).
 *   reduce-bw [MAX_BYTES]    (not installed; built by make check) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "host/reduce.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of `reps` runs of one operation over `bytes`. */
static double time_op(har_reduce_fn fn, char *a, const char *b, size_t bytes, size_t elem)
{
    double t[15];
    int reps = 15;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (fn) fn(a, b, bytes / elem);
        else memcpy(a, b, bytes);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp);
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    size_t max = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
    char *a = aligned_alloc(4096, max), *b = aligned_alloc(4096, max);
    if (!a || !b) return 1;
    memset(a, 1, max);
    memset(b, 2, max);
    struct { const char *name; MPI_Datatype t; MPI_Op op; } ops[] = {
        {"float sum", MPI_FLOAT, MPI_SUM}, {"double sum", MPI_DOUBLE, MPI_SUM},
        {"int32 sum", MPI_INT32_T, MPI_SUM}, {"int64 max", MPI_INT64_T, MPI_MAX}};
    printf("%12s %12s", "bytes", "memcpy GB/s");
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) printf(" %13s", ops[k].name);
    printf("\n");
    for (size_t bytes = 64 << 10; bytes <= max; bytes *= 4) {
        printf("%12zu %12.1f", bytes, 2.0 * (double)bytes / time_op(NULL, a, b, bytes, 1) * 1e-9);
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            har_reduce_t r = har_host_reduce_lookup(ops[k].t, ops[k].op);
            printf(" %13.1f", 3.0 * (double)bytes / time_op(r.fn, a, b, bytes, r.elem_size) * 1e-9);
        }
        printf("\n");
    }
    free(a);
    free(b);
    return 0;
}
