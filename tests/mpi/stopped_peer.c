/* HAR_TIMEOUT with a stopped peer: rank 1 stops itself (SIGSTOP) inside the
 * communicator's life; rank 0's next all-reduce must end with har's timeout
 * error through the error handler, not hang. Rank 0 then wakes rank 1, whose
 * call must fail too (the node segment was marked failed), and both carry on
 * with the MPI's own all-reduce. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include "har.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int pids[64], pid = (int)getpid(), v = 1, ok = 1;
    MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, comm);  /* sets up har's state */
    ok &= v == size;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) raise(SIGSTOP);
    v = 1;
    int rc = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, comm);
    int cls = -1;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (rank == 0) {
        ok &= rc == har_error_code(HAR_ERR_TIMEOUT);
        kill(pids[1], SIGCONT);
    } else {
        ok &= rc != MPI_SUCCESS;
    }
    printf("stopped_peer: rank %d: all-reduce returned class %d (%s)\n", rank, cls, ok ? "as expected" : "WRONG");
    /* The communicator now goes to the MPI, and still works. */
    v = 1;
    rc = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, comm);
    ok &= rc == MPI_SUCCESS && v == size;
    unsigned long long counts[HAR_PATH_COUNT];
    har_counters(counts);
    ok &= counts[HAR_PATH_FORWARDED] >= 1;
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return ok ? 0 : 1;
}
