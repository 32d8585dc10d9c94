/* One bad call to MPI_Allreduce, named by argv[1]. Knows nothing of har: the
 * test runs each case with and without har and expects the same outcome,
 * since har hands what it cannot serve to the MPI, which reports it (or
 * fails) as it always does. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, rc = MPI_SUCCESS, cls = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int in[4] = {1, 2, 3, 4}, out[4];
    const char *what = argc > 1 ? argv[1] : "";
    /* Every rank makes the same bad call, so no rank waits on another. */
    if (!strcmp(what, "count")) rc = MPI_Allreduce(in, out, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(what, "datatype")) rc = MPI_Allreduce(in, out, 4, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(what, "op")) rc = MPI_Allreduce(in, out, 4, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD);
    else if (!strcmp(what, "comm")) rc = MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, MPI_COMM_NULL);
    else if (!strcmp(what, "op-type")) rc = MPI_Allreduce(in, out, 4, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
    else if (!strcmp(what, "alias")) rc = MPI_Allreduce(in, in, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* A failed allocation handed on: the MPI's own answer (an error, or a crash). */
    else if (!strcmp(what, "null-send")) rc = MPI_Allreduce(NULL, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(what, "null-recv")) rc = MPI_Allreduce(in, NULL, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else {
        fprintf(stderr, "usage: bad_input count|datatype|op|comm|op-type|alias|null-send|null-recv\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    printf("bad_input: rank %d: %s: %s, class %d\n", rank, what, rc == MPI_SUCCESS ? "success" : "error", cls);
    MPI_Finalize();
    return 0;
}
