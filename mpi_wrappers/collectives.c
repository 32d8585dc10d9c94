/* The entry points of the collectives other than MPI_Allreduce, blocking
 * and non-blocking, in the int bindings and (where the MPI has them) the
 * MPI-4 large-count _c ones: each calls its internal in src/collectives.h
 * (the blocking form with no request); nothing else lives here. */
#include "collectives.h"

#include "export.h"

HAR_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    return har_bcast(buffer, count, datatype, root, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                          MPI_Request *request)
{
    return har_bcast(buffer, count, datatype, root, comm, request, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                          MPI_Comm comm)
{
    return har_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                           MPI_Comm comm, MPI_Request *request)
{
    return har_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, request, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm)
{
    return har_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return har_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return har_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, NULL,
                          HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                               const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                               MPI_Request *request)
{
    return har_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request,
                          HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                        MPI_Op op, MPI_Comm comm)
{
    return har_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                         MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return har_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                                  MPI_Op op, MPI_Comm comm)
{
    return har_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                                   MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return har_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return har_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    return har_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                      HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return har_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, NULL,
                       HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                            MPI_Comm comm, MPI_Request *request)
{
    return har_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request,
                       HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return har_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                            MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    return har_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                       HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return har_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL,
                        HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                             MPI_Request *request)
{
    return har_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                        HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm)
{
    return har_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return har_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                             void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                             MPI_Comm comm)
{
    return har_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, NULL,
                         HAR_BINDING_INT);
}

HAR_EXPORT int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                              void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                              MPI_Comm comm, MPI_Request *request)
{
    return har_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                         request, HAR_BINDING_INT);
}

#ifdef HAR_HAVE_MPI_C_COUNTS
/* The large-count bindings (MPI 4). */

HAR_EXPORT int MPI_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    return har_bcast(buffer, count, datatype, root, comm, NULL, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Ibcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm,
                            MPI_Request *request)
{
    return har_bcast(buffer, count, datatype, root, comm, request, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Reduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                            int root, MPI_Comm comm)
{
    return har_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, NULL, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Ireduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                             int root, MPI_Comm comm, MPI_Request *request)
{
    return har_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, request, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Allgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                               MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    return har_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Iallgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                                MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return har_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
                         HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                                const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                                MPI_Comm comm)
{
    return har_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, NULL,
                          HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Iallgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                                 const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                                 MPI_Comm comm, MPI_Request *request)
{
    return har_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request,
                          HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Reduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount,
                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return har_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, NULL, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Ireduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount,
                                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return har_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Reduce_scatter_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[],
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return har_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, NULL, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Ireduce_scatter_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[],
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return har_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Gather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                            MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return har_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL,
                      HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Igather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                             MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                             MPI_Request *request)
{
    return har_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                      HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                             const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                             MPI_Comm comm)
{
    return har_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, NULL,
                       HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Igatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                              const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                              MPI_Comm comm, MPI_Request *request)
{
    return har_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request,
                       HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Scatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                             MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return har_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL,
                       HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Iscatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                              MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                              MPI_Request *request)
{
    return har_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                       HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Scatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                              MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                              int root, MPI_Comm comm)
{
    return har_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL,
                        HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Iscatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                               MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                               int root, MPI_Comm comm, MPI_Request *request)
{
    return har_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                        HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                              MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    return har_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Ialltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
                               MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return har_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                               MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[],
                               const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    return har_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, NULL,
                         HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Ialltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                                MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[],
                                const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    return har_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                         request, HAR_BINDING_LARGE);
}

#endif
