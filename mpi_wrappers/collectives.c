/* The entry points of the collectives other than MPI_Allreduce, made from
 * one list: each collective's blocking and non-blocking form, in the int
 * binding, (where the MPI has them) the MPI-4 large-count _c one, and
 * (under Open MPI, whose Fortran bindings call PMPI_* themselves) the
 * Fortran spellings fortran.h gives. Every entry point calls its internal
 * in src/entry/collectives.h, the blocking form with no request; nothing
 * else lives here. A collective added to the list gets every form at
 * once, and tests/fortran/fortran.sh checks that libhar's Fortran entry
 * points are exactly its C ones that the MPI's Fortran library has too. */
#include "entry/collectives.h"

#include "export.h"
#include "fortran.h"

/* X(NAME, INAME, INTERNAL, (PARAMETERS), (ARGUMENTS), FORTRAN, IFORTRAN,
 * (FORTRAN PARAMETERS), (FORTRAN ARGUMENTS)): the blocking form's name and
 * parameters (MPI_NAME), the non-blocking form's name (MPI_INAME, the same
 * parameters and a request), and the arguments its internal takes before
 * the request and the binding; then the Fortran names, in upper and in
 * lower case (the preprocessor cannot change case), and the Fortran entry
 * point's parameters and the internal's arguments made of them: buffers by
 * address, every INTEGER and handle by reference (an f08 handle is a type
 * holding the INTEGER handle), converted by fortran.h's F_* macros, whose
 * F_SEND takes the Fortran MPI_IN_PLACE where the standard allows it
 * (send buffers, and a scatter's receive buffer at the root). COUNT,
 * COUNTS and DISPLS are the C binding's types of a count, an array of
 * counts and an array of displacements. */
#define HAR_COLLECTIVES(X, COUNT, COUNTS, DISPLS)                                                                    \
    X(Bcast, Ibcast, har_bcast,                                                                                      \
      (void *buffer, COUNT count, MPI_Datatype datatype, int root, MPI_Comm comm),                                   \
      (buffer, count, datatype, root, comm),                                                                         \
      MPI_BCAST, MPI_IBCAST, mpi_bcast, mpi_ibcast,                                                                  \
      (void *buffer, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root, MPI_Fint *comm),                           \
      (F_BUF(buffer), F_INT(count), F_TYPE(datatype), F_INT(root), F_COMM(comm)))                                    \
    X(Reduce, Ireduce, har_reduce,                                                                                   \
      (const void *sendbuf, void *recvbuf, COUNT count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm),  \
      (sendbuf, recvbuf, count, datatype, op, root, comm),                                                           \
      MPI_REDUCE, MPI_IREDUCE, mpi_reduce, mpi_ireduce,                                                              \
      (void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *root,              \
       MPI_Fint *comm),                                                                                              \
      (F_SEND(sendbuf), F_BUF(recvbuf), F_INT(count), F_TYPE(datatype), F_OP(op), F_INT(root), F_COMM(comm)))        \
    X(Allgather, Iallgather, har_allgather,                                                                          \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, MPI_Comm comm),                                                                        \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),                                            \
      MPI_ALLGATHER, MPI_IALLGATHER, mpi_allgather, mpi_iallgather,                                                  \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,                   \
       MPI_Fint *recvtype, MPI_Fint *comm),                                                                          \
      (F_SEND(sendbuf), F_INT(sendcount), F_TYPE(sendtype), F_BUF(recvbuf), F_INT(recvcount), F_TYPE(recvtype),      \
       F_COMM(comm)))                                                                                                \
    X(Allgatherv, Iallgatherv, har_allgatherv,                                                                       \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, const COUNTS recvcounts[],        \
       const DISPLS displs[], MPI_Datatype recvtype, MPI_Comm comm),                                                 \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm),                                   \
      MPI_ALLGATHERV, MPI_IALLGATHERV, mpi_allgatherv, mpi_iallgatherv,                                              \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts,                  \
       MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm),                                                        \
      (F_SEND(sendbuf), F_INT(sendcount), F_TYPE(sendtype), F_BUF(recvbuf), F_INTS(recvcounts), F_INTS(displs),      \
       F_TYPE(recvtype), F_COMM(comm)))                                                                              \
    X(Reduce_scatter_block, Ireduce_scatter_block, har_reduce_scatter_block,                                         \
      (const void *sendbuf, void *recvbuf, COUNT recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),        \
      (sendbuf, recvbuf, recvcount, datatype, op, comm),                                                             \
      MPI_REDUCE_SCATTER_BLOCK, MPI_IREDUCE_SCATTER_BLOCK, mpi_reduce_scatter_block, mpi_ireduce_scatter_block,      \
      (void *sendbuf, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm),         \
      (F_SEND(sendbuf), F_BUF(recvbuf), F_INT(recvcount), F_TYPE(datatype), F_OP(op), F_COMM(comm)))                 \
    X(Reduce_scatter, Ireduce_scatter, har_reduce_scatter,                                                           \
      (const void *sendbuf, void *recvbuf, const COUNTS recvcounts[], MPI_Datatype datatype, MPI_Op op,              \
       MPI_Comm comm),                                                                                               \
      (sendbuf, recvbuf, recvcounts, datatype, op, comm),                                                            \
      MPI_REDUCE_SCATTER, MPI_IREDUCE_SCATTER, mpi_reduce_scatter, mpi_ireduce_scatter,                              \
      (void *sendbuf, void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm),        \
      (F_SEND(sendbuf), F_BUF(recvbuf), F_INTS(recvcounts), F_TYPE(datatype), F_OP(op), F_COMM(comm)))               \
    X(Gather, Igather, har_gather,                                                                                   \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, int root, MPI_Comm comm),                                                              \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm),                                      \
      MPI_GATHER, MPI_IGATHER, mpi_gather, mpi_igather,                                                              \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,                   \
       MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm),                                                          \
      (F_SEND(sendbuf), F_INT(sendcount), F_TYPE(sendtype), F_BUF(recvbuf), F_INT(recvcount), F_TYPE(recvtype),      \
       F_INT(root), F_COMM(comm)))                                                                                   \
    X(Gatherv, Igatherv, har_gatherv,                                                                                \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, const COUNTS recvcounts[],        \
       const DISPLS displs[], MPI_Datatype recvtype, int root, MPI_Comm comm),                                       \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm),                             \
      MPI_GATHERV, MPI_IGATHERV, mpi_gatherv, mpi_igatherv,                                                          \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts,                  \
       MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm),                                        \
      (F_SEND(sendbuf), F_INT(sendcount), F_TYPE(sendtype), F_BUF(recvbuf), F_INTS(recvcounts), F_INTS(displs),      \
       F_TYPE(recvtype), F_INT(root), F_COMM(comm)))                                                                 \
    X(Scatter, Iscatter, har_scatter,                                                                                \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, int root, MPI_Comm comm),                                                              \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm),                                      \
      MPI_SCATTER, MPI_ISCATTER, mpi_scatter, mpi_iscatter,                                                          \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,                   \
       MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm),                                                          \
      (F_BUF(sendbuf), F_INT(sendcount), F_TYPE(sendtype), F_SEND(recvbuf), F_INT(recvcount), F_TYPE(recvtype),      \
       F_INT(root), F_COMM(comm)))                                                                                   \
    X(Scatterv, Iscatterv, har_scatterv,                                                                             \
      (const void *sendbuf, const COUNTS sendcounts[], const DISPLS displs[], MPI_Datatype sendtype, void *recvbuf,  \
       COUNT recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm),                                             \
      (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm),                             \
      MPI_SCATTERV, MPI_ISCATTERV, mpi_scatterv, mpi_iscatterv,                                                      \
      (void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *displs, MPI_Fint *sendtype, void *recvbuf,                     \
       MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm),                                     \
      (F_BUF(sendbuf), F_INTS(sendcounts), F_INTS(displs), F_TYPE(sendtype), F_SEND(recvbuf), F_INT(recvcount),      \
       F_TYPE(recvtype), F_INT(root), F_COMM(comm)))                                                                 \
    X(Alltoall, Ialltoall, har_alltoall,                                                                             \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, MPI_Comm comm),                                                                        \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),                                            \
      MPI_ALLTOALL, MPI_IALLTOALL, mpi_alltoall, mpi_ialltoall,                                                      \
      (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,                   \
       MPI_Fint *recvtype, MPI_Fint *comm),                                                                          \
      (F_SEND(sendbuf), F_INT(sendcount), F_TYPE(sendtype), F_BUF(recvbuf), F_INT(recvcount), F_TYPE(recvtype),      \
       F_COMM(comm)))                                                                                                \
    X(Alltoallv, Ialltoallv, har_alltoallv,                                                                          \
      (const void *sendbuf, const COUNTS sendcounts[], const DISPLS sdispls[], MPI_Datatype sendtype, void *recvbuf, \
       const COUNTS recvcounts[], const DISPLS rdispls[], MPI_Datatype recvtype, MPI_Comm comm),                     \
      (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm),                        \
      MPI_ALLTOALLV, MPI_IALLTOALLV, mpi_alltoallv, mpi_ialltoallv,                                                  \
      (void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtype, void *recvbuf,                    \
       MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm),                                 \
      (F_SEND(sendbuf), F_INTS(sendcounts), F_INTS(sdispls), F_TYPE(sendtype), F_BUF(recvbuf), F_INTS(recvcounts),   \
       F_INTS(rdispls), F_TYPE(recvtype), F_COMM(comm)))

#define UNPAREN(...) __VA_ARGS__

/* Both forms of one collective in one C binding (SUFFIX: empty or _c). */
#define ENTRY_POINTS(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, SUFFIX, BINDING)                                   \
    HAR_EXPORT int MPI_##NAME##SUFFIX PARAMETERS { return INTERNAL(UNPAREN ARGUMENTS, NULL, BINDING); }              \
    HAR_EXPORT int MPI_##INAME##SUFFIX(UNPAREN PARAMETERS, MPI_Request *request)                                     \
    {                                                                                                                \
        return INTERNAL(UNPAREN ARGUMENTS, request, BINDING);                                                        \
    }

#define INT_BINDING(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, ...) \
    ENTRY_POINTS(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, , HAR_BINDING_INT)
HAR_COLLECTIVES(INT_BINDING, int, int, int)

#ifdef HAR_HAVE_MPI_C_COUNTS
#define LARGE_COUNT_BINDING(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, ...) \
    ENTRY_POINTS(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, _c, HAR_BINDING_LARGE)
HAR_COLLECTIVES(LARGE_COUNT_BINDING, MPI_Count, MPI_Count, MPI_Aint)
#endif

#ifdef OPEN_MPI
/* Both forms in Fortran, every spelling: ierror set where given, the
 * request handed back as a Fortran handle. MPICH's Fortran collectives
 * call the C entry points above. */
#define FORTRAN_BINDING(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, UPPER, IUPPER, lower, ilower, FPARAMETERS,       \
                        FARGUMENTS)                                                                                  \
    static void lower##_f(UNPAREN FPARAMETERS, MPI_Fint *ierror)                                                     \
    {                                                                                                                \
        int rc = INTERNAL(UNPAREN FARGUMENTS, NULL, HAR_BINDING_INT);                                                \
        har_fortran_set_ierror(ierror, rc);                                                                          \
    }                                                                                                                \
    HAR_FORTRAN_SPELLINGS(lower##_f, UPPER, lower)                                                                   \
    static void ilower##_f(UNPAREN FPARAMETERS, MPI_Fint *request, MPI_Fint *ierror)                                 \
    {                                                                                                                \
        MPI_Request req;                                                                                             \
        int rc = INTERNAL(UNPAREN FARGUMENTS, &req, HAR_BINDING_INT);                                                \
        if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(req);                                                     \
        har_fortran_set_ierror(ierror, rc);                                                                          \
    }                                                                                                                \
    HAR_FORTRAN_SPELLINGS(ilower##_f, IUPPER, ilower)
HAR_COLLECTIVES(FORTRAN_BINDING, int, int, int)
#endif
