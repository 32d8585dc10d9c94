/* The MPI entry points har replaces. Each one calls the MPI's own PMPI_
 * version and har's internals; nothing else lives here. */
#include "entry/entry.h"

#include "export.h"

HAR_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) har_init(1);
    return rc;
}

HAR_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) har_init(1);
    return rc;
}

HAR_EXPORT int MPI_Finalize(void)
{
    har_finalize();
    return PMPI_Finalize();
}

HAR_EXPORT int MPI_Comm_free(MPI_Comm *comm) { return har_comm_free(comm); }
HAR_EXPORT int MPI_Comm_disconnect(MPI_Comm *comm) { return har_comm_disconnect(comm); }

HAR_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm)
{
    return har_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

#ifdef HAR_HAVE_MPI_C_COUNTS
/* MPI-4's large-count binding (mpi4py 4 and MPICH's Fortran bindings call
 * it wherever the MPI has it): the same path, counts beyond an int kept. */
HAR_EXPORT int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                               MPI_Op op, MPI_Comm comm)
{
    return har_allreduce_count(sendbuf, recvbuf, count, datatype, op, comm, HAR_BINDING_LARGE);
}
#endif
