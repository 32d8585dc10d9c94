/* The MPI entry points har replaces. Each one calls the MPI's own PMPI_
 * version and har's internals; nothing else lives here. */
#include "entry.h"

#define HAR_EXPORT __attribute__((visibility("default")))

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

HAR_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm)
{
    return har_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
