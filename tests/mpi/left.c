/* A rank that leaves while its peers still wait for it: communicator A
 * fails (the last rank calls MPI_Allreduce on it with another count), then
 * rank 1 calls MPI_Finalize at once while the others make an all-reduce on
 * communicator B, which waits for rank 1 in vain. Every rank left on B must
 * get an error (not hang), and har must say that rank 1 left (not that it
 * died) and what it had seen fail before (the test reads the messages).
 * With --bypass rank 1 calls PMPI_Finalize, past har's MPI_Finalize, as a
 * tool or binding that calls the MPI beneath har does: har's backstop
 * (the deletion of MPI_COMM_SELF's attributes) must tell the same.
 *   left [COUNT] [--bypass] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, n = argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : 10;
    int bypass = argc > 1 && strcmp(argv[argc - 1], "--bypass") == 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(b, MPI_ERRORS_RETURN);
    double *buf = calloc(2 * (size_t)n, sizeof *buf);
    int one = 1, ok = 1;
    /* Both communicators set up and working. */
    ok &= MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, a) == MPI_SUCCESS && one == size;
    one = 1;
    ok &= MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, b) == MPI_SUCCESS && one == size;
    int rc_a = MPI_Allreduce(MPI_IN_PLACE, buf, rank == size - 1 ? 2 * n : n, MPI_DOUBLE, MPI_SUM, a);
    ok &= rc_a != MPI_SUCCESS;
    if (rank == 1) {
        printf("left: rank 1: A %s, leaving: %s\n", rc_a != MPI_SUCCESS ? "failed" : "SUCCEEDED",
               ok ? "as expected" : "WRONG");
        fflush(stdout);
        if (bypass)
            PMPI_Finalize();
        else
            MPI_Finalize();
        return ok ? 0 : 1;
    }
    int rc_b = MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, b);
    ok &= rc_b != MPI_SUCCESS;
    printf("left: rank %d: A %s, B %s: %s\n", rank, rc_a != MPI_SUCCESS ? "failed" : "SUCCEEDED",
           rc_b != MPI_SUCCESS ? "failed" : "SUCCEEDED", ok ? "as expected" : "WRONG");
    fflush(stdout);
    free(buf);
    MPI_Finalize();
    return ok ? 0 : 1;
}
