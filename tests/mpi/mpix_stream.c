/* MPICH's stream communicators through har (MPICH 4.1 on; built only
 * where the MPI has them). A CUDA stream's MPIX_Stream (info "type"
 * "cudaStream_t", "value" by MPIX_Info_set_hex: the legacy default stream
 * here, whose eight zero bytes MPICH writes as "[8]"), a communicator on
 * it and a duplicate of that:
 *   mpix_stream [--calls N] [--seed S]
 * - MPIX_Allreduce_enqueue (and its _c binding) on them, random sizes (1 to
 *   20000), int, int64 and double, sum, max and min, in place or not: every
 *   result exact, every call counted "seen" and "host_segment" by har (no
 *   GPU here: its blocking call, the stream having nothing to wait for);
 * - on MPI_COMM_WORLD (no stream) and on a communicator of a stream without
 *   CUDA, it is the MPI's own: the class PMPIX_Allreduce_enqueue gives,
 *   and har counts nothing;
 * - bad input on the stream's communicator: MPI_Allreduce's class;
 * - a "value" that is no cudaStream_t: MPI_ERR_INFO_VALUE where the MPI
 *   has no CUDA (the MPI's own answer where it has);
 * - everything freed, the streams last. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    return (z ^ (z >> 27)) * 0x94d049bb133111ebull ^ (z >> 31);
}

static long long input(long long i, int r, int tag) { return (i * 5 + r * 7 + tag) % 13 - 6; }

static long long reduce(long long a, long long b, int op) { return op == 0 ? a + b : op == 1 ? (a > b ? a : b) : (a < b ? a : b); }

static int error_class(int rc)
{
    int cls = rc;
    MPI_Error_class(rc, &cls);
    return cls;
}

static unsigned long long count_of(const char *path)
{
    unsigned long long v[64];
    int i = har_counter_index(path);
    har_counters(v, 64);
    return i >= 0 ? v[i] : 0;
}

static unsigned long long seen_count(void) { return count_of("seen"); }

int main(int argc, char **argv)
{
    long calls = 400;
    uint64_t seed = 1;
    for (int a = 1; a + 1 < argc; a++) {
        if (!strcmp(argv[a], "--calls")) calls = atol(argv[++a]);
        else if (!strcmp(argv[a], "--seed")) seed = strtoull(argv[++a], NULL, 10);
    }
    MPI_Init(&argc, &argv);
    int rank, size, wrong = 0, bad_class = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    void *legacy = NULL;  /* cudaStream_t 0 */
    MPIX_Info_set_hex(info, "value", &legacy, sizeof legacy);
    MPIX_Stream cuda_stream, cpu_stream;
    int rc = MPIX_Stream_create(info, &cuda_stream);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpix_stream: rank %d: MPIX_Stream_create of a cudaStream_t failed (class %d)\n", rank,
                error_class(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm comms[2], plain;
    MPIX_Stream_comm_create(MPI_COMM_WORLD, cuda_stream, &comms[0]);
    MPI_Comm_dup(comms[0], &comms[1]);
    MPIX_Stream_create(MPI_INFO_NULL, &cpu_stream);
    MPIX_Stream_comm_create(MPI_COMM_WORLD, cpu_stream, &plain);
    for (int k = 0; k < 2; k++) MPI_Comm_set_errhandler(comms[k], MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(plain, MPI_ERRORS_RETURN);

    const MPI_Datatype types[3] = {MPI_INT, MPI_INT64_T, MPI_DOUBLE};
    const MPI_Op ops[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
    enum { MAX_N = 20000 };
    char *in = malloc(MAX_N * 8), *out = malloc(MAX_N * 8);
    /* With no GPU har serves them on the host segment (the MPI's own
     * MPI_Allreduce on one rank, where there is nothing to reduce). */
    const char *path = size > 1 ? "host_segment" : "mpi";
    unsigned long long seen_before = seen_count(), path_before = count_of(path);
    uint64_t shared = seed;
    for (long c = 0; c < calls; c++) {
        int k = (int)(next(&shared) % 2), type = (int)(next(&shared) % 3), op = (int)(next(&shared) % 3);
        int n = 1 + (int)(next(&shared) % MAX_N), in_place = next(&shared) % 2 == 0, large = next(&shared) % 4 == 0;
        int tag = (int)(c % 1000);
        char *src = in_place ? out : in;
        for (int i = 0; i < n; i++) {
            long long v = input(i, rank, tag);
            if (type == 0) ((int *)src)[i] = (int)v;
            else if (type == 1) ((int64_t *)src)[i] = v;
            else ((double *)src)[i] = (double)v;
        }
        const void *send = in_place ? MPI_IN_PLACE : in;
        rc = large ? MPIX_Allreduce_enqueue_c(send, out, (MPI_Count)n, types[type], ops[op], comms[k])
                   : MPIX_Allreduce_enqueue(send, out, n, types[type], ops[op], comms[k]);
        wrong += rc != MPI_SUCCESS;
        for (int i = 0; rc == MPI_SUCCESS && i < n; i++) {
            long long want = input(i, 0, tag), got;
            for (int r = 1; r < size; r++) want = reduce(want, input(i, r, tag), op);
            got = type == 0 ? ((int *)out)[i] : type == 1 ? ((int64_t *)out)[i] : (long long)((double *)out)[i];
            if (got != want) {
                wrong++;
                break;
            }
        }
    }
    int all_seen = seen_count() - seen_before == (unsigned long long)calls &&
                   count_of(path) - path_before == (unsigned long long)calls;

    /* No CUDA stream behind the communicator: the MPI's own call. */
    int x = 1, y = 0, mpi_own = 1;
    MPI_Comm others[2] = {MPI_COMM_WORLD, plain};
    for (int k = 0; k < 2; k++) {
        unsigned long long before = seen_count();
        int mine = MPIX_Allreduce_enqueue(&x, &y, 1, MPI_INT, MPI_SUM, others[k]);
        int theirs = PMPIX_Allreduce_enqueue(&x, &y, 1, MPI_INT, MPI_SUM, others[k]);
        if (error_class(mine) != error_class(theirs) || seen_count() != before) {
            mpi_own = 0;
            fprintf(stderr, "mpix_stream: rank %d: communicator %d without a CUDA stream: class %d, the MPI's %d, "
                    "%llu seen by har\n", rank, k, error_class(mine), error_class(theirs), seen_count() - before);
        }
    }
    /* Bad input on the stream's communicator: MPI_Allreduce's class. */
    double dx = 1, dy = 0;
    /* (Not MPI_DATATYPE_NULL: MPICH 5.0.2's MPI_Allreduce asserts on it.) */
    struct { void *in, *out; MPI_Datatype type; MPI_Op op; } cases[2] = {
        {&x, &y, MPI_INT, MPI_OP_NULL}, {&dx, &dy, MPI_DOUBLE, MPI_BAND}};
    for (int t = 0; t < 2; t++) {
        int mine = MPIX_Allreduce_enqueue(cases[t].in, cases[t].out, 1, cases[t].type, cases[t].op, comms[1]);
        int theirs = MPI_Allreduce(cases[t].in, cases[t].out, 1, cases[t].type, cases[t].op, comms[1]);
        if (mine == MPI_SUCCESS || error_class(mine) != error_class(theirs)) {
            bad_class++;
            fprintf(stderr, "mpix_stream: rank %d: bad input %d: class %d, MPI_Allreduce's %d\n", rank, t,
                    error_class(mine), error_class(theirs));
        }
    }
    /* A value that is no cudaStream_t. */
    int mpi_has_cuda = 0, bad_value_class = -1;
    MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &mpi_has_cuda);
    if (!mpi_has_cuda) {
        MPI_Info_set(info, "value", "not hex");
        MPIX_Stream junk;
        bad_value_class = error_class(MPIX_Stream_create(info, &junk));
        if (bad_value_class != MPI_ERR_INFO_VALUE) bad_class++;
    }
    MPI_Info_free(&info);
    for (int k = 0; k < 2; k++) MPI_Comm_free(&comms[k]);
    MPI_Comm_free(&plain);
    int freed = MPIX_Stream_free(&cuda_stream) == MPI_SUCCESS && MPIX_Stream_free(&cpu_stream) == MPI_SUCCESS;

    long totals[4] = {wrong, !all_seen, bad_class + !mpi_own, !freed}, sums[4];
    MPI_Reduce(totals, sums, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);  /* not MPI_Allreduce: not under test */
    MPI_Bcast(sums, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpix_stream: %d ranks, %ld MPIX_Allreduce_enqueue (seed %llu) on a CUDA stream's communicator and "
               "its duplicate (the MPI %s CUDA): %ld wrong; every call served by har (%s): %s; without a CUDA stream the "
               "MPI's own, bad input and values refused as the MPI does: %s; streams freed: %s\n",
               size, calls, (unsigned long long)seed, mpi_has_cuda ? "with" : "without", sums[0], path,
               sums[1] ? "NO" : "yes", sums[2] ? "NO" : "yes", sums[3] ? "NO" : "yes");
    free(in), free(out);
    MPI_Finalize();
    return sums[0] || sums[1] || sums[2] || sums[3];
}
