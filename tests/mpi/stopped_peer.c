/* HAR_TIMEOUT with a stopped peer: rank 1 stops itself (SIGSTOP) between two
 * all-reduces. Every rank's next all-reduce must end with an error through
 * the error handler, not hang: rank 0 (rank 1's node) by har's local time-out,
 * ranks on other (pretend) nodes by the inter-node ring's time-out, rank 1
 * itself, once rank 0 wakes it, because its node segment was marked failed.
 * Later calls on the communicator keep failing on every rank (no rank can
 * know which calls its peers finished, so none is handed to the MPI), while
 * other communicators still work. */
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
    ok &= rc != MPI_SUCCESS;
    if (rank == 0) {
        /* its own time-out, or the other node's news of the same */
        ok &= rc == har_error_code(HAR_ERR_TIMEOUT) || rc == har_error_code(HAR_ERR_PEER_FAILED);
        kill(pids[1], SIGCONT);
    }
    /* The communicator stays failed everywhere. */
    v = 1;
    rc = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, comm);
    ok &= rc == har_error_code(HAR_ERR_PEER_FAILED);
    /* Another communicator is untouched. */
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    v = 1;
    rc = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, other);
    ok &= rc == MPI_SUCCESS && v == size;
    printf("stopped_peer: rank %d: failed call class %d, later call failed too, other communicator %s: %s\n", rank,
           cls, rc == MPI_SUCCESS ? "fine" : "BROKEN", ok ? "as expected" : "WRONG");
    MPI_Comm_free(&other);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return ok ? 0 : 1;
}
