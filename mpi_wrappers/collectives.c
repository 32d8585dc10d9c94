/* The entry points of the collectives other than MPI_Allreduce, made from
 * one list: each collective's blocking and non-blocking form, in the int
 * binding and (where the MPI has them) the MPI-4 large-count _c one. Every
 * entry point calls its internal in src/entry/collectives.h, the blocking form
 * with no request; nothing else lives here. */
#include "entry/collectives.h"

#include "export.h"

/* X(NAME, INAME, INTERNAL, (PARAMETERS), (ARGUMENTS)): the blocking form's
 * name and parameters (MPI_NAME), the non-blocking form's name (MPI_INAME,
 * the same parameters and a request), and the arguments its internal takes
 * before the request and the binding. COUNT, COUNTS and DISPLS are the
 * binding's types of a count, an array of counts and an array of
 * displacements. */
#define HAR_COLLECTIVES(X, COUNT, COUNTS, DISPLS)                                                                     \
    X(Bcast, Ibcast, har_bcast, (void *buffer, COUNT count, MPI_Datatype datatype, int root, MPI_Comm comm),         \
      (buffer, count, datatype, root, comm))                                                                         \
    X(Reduce, Ireduce, har_reduce,                                                                                   \
      (const void *sendbuf, void *recvbuf, COUNT count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm),  \
      (sendbuf, recvbuf, count, datatype, op, root, comm))                                                           \
    X(Allgather, Iallgather, har_allgather,                                                                          \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, MPI_Comm comm),                                                                        \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))                                            \
    X(Allgatherv, Iallgatherv, har_allgatherv,                                                                       \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, const COUNTS recvcounts[],        \
       const DISPLS displs[], MPI_Datatype recvtype, MPI_Comm comm),                                                 \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm))                                   \
    X(Reduce_scatter_block, Ireduce_scatter_block, har_reduce_scatter_block,                                         \
      (const void *sendbuf, void *recvbuf, COUNT recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),        \
      (sendbuf, recvbuf, recvcount, datatype, op, comm))                                                             \
    X(Reduce_scatter, Ireduce_scatter, har_reduce_scatter,                                                           \
      (const void *sendbuf, void *recvbuf, const COUNTS recvcounts[], MPI_Datatype datatype, MPI_Op op,              \
       MPI_Comm comm),                                                                                               \
      (sendbuf, recvbuf, recvcounts, datatype, op, comm))                                                            \
    X(Gather, Igather, har_gather,                                                                                   \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, int root, MPI_Comm comm),                                                              \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm))                                      \
    X(Gatherv, Igatherv, har_gatherv,                                                                                \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, const COUNTS recvcounts[],        \
       const DISPLS displs[], MPI_Datatype recvtype, int root, MPI_Comm comm),                                       \
      (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm))                             \
    X(Scatter, Iscatter, har_scatter,                                                                                \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, int root, MPI_Comm comm),                                                              \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm))                                      \
    X(Scatterv, Iscatterv, har_scatterv,                                                                             \
      (const void *sendbuf, const COUNTS sendcounts[], const DISPLS displs[], MPI_Datatype sendtype, void *recvbuf,  \
       COUNT recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm),                                             \
      (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm))                             \
    X(Alltoall, Ialltoall, har_alltoall,                                                                             \
      (const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf, COUNT recvcount,                  \
       MPI_Datatype recvtype, MPI_Comm comm),                                                                        \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))                                            \
    X(Alltoallv, Ialltoallv, har_alltoallv,                                                                          \
      (const void *sendbuf, const COUNTS sendcounts[], const DISPLS sdispls[], MPI_Datatype sendtype,                \
       void *recvbuf, const COUNTS recvcounts[], const DISPLS rdispls[], MPI_Datatype recvtype, MPI_Comm comm),      \
      (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm))

#define UNPAREN(...) __VA_ARGS__

/* Both forms of one collective in one binding (SUFFIX: empty or _c). */
#define ENTRY_POINTS(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, SUFFIX, BINDING)                                   \
    HAR_EXPORT int MPI_##NAME##SUFFIX PARAMETERS { return INTERNAL(UNPAREN ARGUMENTS, NULL, BINDING); }              \
    HAR_EXPORT int MPI_##INAME##SUFFIX(UNPAREN PARAMETERS, MPI_Request *request)                                     \
    {                                                                                                                \
        return INTERNAL(UNPAREN ARGUMENTS, request, BINDING);                                                        \
    }

#define INT_BINDING(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS) \
    ENTRY_POINTS(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, , HAR_BINDING_INT)
HAR_COLLECTIVES(INT_BINDING, int, int, int)

#ifdef HAR_HAVE_MPI_C_COUNTS
#define LARGE_COUNT_BINDING(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS) \
    ENTRY_POINTS(NAME, INAME, INTERNAL, PARAMETERS, ARGUMENTS, _c, HAR_BINDING_LARGE)
HAR_COLLECTIVES(LARGE_COUNT_BINDING, MPI_Count, MPI_Count, MPI_Aint)
#endif
