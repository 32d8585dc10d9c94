/* One rank (or every rank, with --all) passes buffers that cannot be used
 * to an all-reduce that har serves, the others good ones: a null send or
 * receive buffer, the same buffer twice (not MPI_IN_PLACE), or send and
 * receive buffers that overlap. The rank at fault must get MPI_ERR_BUFFER,
 * every other rank an error too, at once (no rank may wait for ever), and
 * nobody wrong data; the communicator fails for good after it, and another
 * one works. With --forwarded the call is one har hands to the MPI (the
 * test sets HAR_MAX_BYTES): the communicator stays usable.
 *   bad_buffer null-send|null-recv|same|overlap [--rank R] [--all] [--count N] [--forwarded] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, n = 100, all = 0, culprit = -1, forwarded = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *what = argc > 1 ? argv[1] : "null-recv";
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "--all")) all = 1;
        else if (!strcmp(argv[a], "--forwarded")) forwarded = 1;
        else if (!strcmp(argv[a], "--rank") && a + 1 < argc) culprit = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--count") && a + 1 < argc) n = atoi(argv[++a]);
    }
    if (culprit < 0) culprit = size - 1;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int one = 1;
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, comm);  /* sets up har's state */
    int *in = malloc((size_t)(n + 1) * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    for (int i = 0; i <= n; i++) in[i] = i;
    const void *sbuf = in;
    void *rbuf = out;
    int bad = all || rank == culprit;
    if (bad && !strcmp(what, "null-send")) sbuf = NULL;
    else if (bad && !strcmp(what, "null-recv")) rbuf = NULL;
    else if (bad && !strcmp(what, "same")) rbuf = in;
    else if (bad && !strcmp(what, "overlap")) rbuf = in + 1;
    else if (bad) {
        fprintf(stderr, "usage: bad_buffer null-send|null-recv|same|overlap [--rank R] [--all] [--count N] "
                        "[--forwarded]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rc = MPI_Allreduce(sbuf, rbuf, n, MPI_INT, MPI_SUM, comm), cls = -1;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    int later = MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, comm);
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    int v = 1, fine = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, other) == MPI_SUCCESS && v == size;
    int ok = rc != MPI_SUCCESS && (!bad || cls == MPI_ERR_BUFFER) && (later == MPI_SUCCESS) == forwarded && fine;
    printf("bad_buffer: rank %d: %s%s: class %d, later call %s, other communicator %s: %s\n", rank, what,
           bad ? " (this rank)" : "", cls, later != MPI_SUCCESS ? "failed" : "SUCCEEDED", fine ? "fine" : "BROKEN",
           ok ? "as expected" : "WRONG");
    MPI_Comm_free(&other);
    MPI_Comm_free(&comm);
    free(in);
    free(out);
    MPI_Finalize();
    return ok ? 0 : 1;
}
