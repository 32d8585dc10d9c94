/* What the entry points of mpi_wrappers/requests.c and entry/collectives.c call:
 * the collectives other than MPI_Allreduce, and MPI_Allreduce's
 * non-blocking and persistent forms. Each goes to the MPI untouched unless
 * one of its buffers is device memory that the MPI cannot take in that
 * call (har_cuda_mpi_p2p/reduce/nonblocking); then its buffers are staged
 * through host memory (src/stage/). Each is counted (its name) and, when
 * staged on this rank, counted again (name_staged). */
#ifndef HAR_COLLECTIVES_H
#define HAR_COLLECTIVES_H

#include "core/common.h"
#include "stage/stage.h" /* har_count_t, har_binding_t */
#ifdef OPEN_MPI
#include <mpi-ext.h> /* OMPI_HAVE_MPI_EXT_PCOLLREQ: MPIX_Allreduce_init */
#endif

/* The counted calls, in the counters' order after the paths: X(id, name). */
#define HAR_COLL_LIST(X)                                                                        \
    X(IALLREDUCE, iallreduce) X(ALLREDUCE_INIT, allreduce_init)                                  \
    X(BCAST, bcast) X(IBCAST, ibcast) X(REDUCE, reduce) X(IREDUCE, ireduce)                      \
    X(ALLGATHER, allgather) X(IALLGATHER, iallgather) X(ALLGATHERV, allgatherv)                  \
    X(IALLGATHERV, iallgatherv) X(REDUCE_SCATTER_BLOCK, reduce_scatter_block)                    \
    X(IREDUCE_SCATTER_BLOCK, ireduce_scatter_block) X(REDUCE_SCATTER, reduce_scatter)            \
    X(IREDUCE_SCATTER, ireduce_scatter) X(GATHER, gather) X(IGATHER, igather)                    \
    X(GATHERV, gatherv) X(IGATHERV, igatherv) X(SCATTER, scatter) X(ISCATTER, iscatter)          \
    X(SCATTERV, scatterv) X(ISCATTERV, iscatterv) X(ALLTOALL, alltoall) X(IALLTOALL, ialltoall)  \
    X(ALLTOALLV, alltoallv) X(IALLTOALLV, ialltoallv)

typedef enum {
#define HAR_COLL_ENUM(id, name) HAR_COLL_##id,
    HAR_COLL_LIST(HAR_COLL_ENUM)
#undef HAR_COLL_ENUM
    HAR_COLL_COUNT
} har_coll_t;

/* entry/entry.c: counts a call (staged: its name_staged counter), and makes sure
 * har is set up (0: MPI is not initialised, or finalised). */
HAR_HIDDEN void har_count_coll(har_coll_t coll, int staged);
HAR_HIDDEN int har_entry_ready(void);

/* Every function below serves both bindings of its call: the int one
 * (binding HAR_BINDING_INT, its counts widened) and, where the MPI has
 * them (HAR_HAVE_MPI_C_COUNTS), the MPI-4 large-count _c one
 * (HAR_BINDING_LARGE), and hands the call on to the MPI's own of the same
 * binding. The arrays of the v forms are the binding's: int counts and
 * displacements, or MPI_Count counts and MPI_Aint displacements. */
HAR_HIDDEN int har_iallreduce(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request *req, har_binding_t binding);
/* MPI_Allreduce_init (MPI 4, and Open MPI 5, which reports MPI 3.1 but
 * has it) or MPIX_Allreduce_init (Open MPI 4.1's pcollreq extension),
 * whichever this MPI has; absent where it has neither. */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAR_HAVE_ALLREDUCE_INIT 1
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define HAR_HAVE_ALLREDUCE_INIT 1
#define HAR_ALLREDUCE_INIT_IS_MPIX 1
#endif
#ifdef HAR_HAVE_ALLREDUCE_INIT
HAR_HIDDEN int har_allreduce_init(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm, MPI_Info info, MPI_Request *req, har_binding_t binding);
#endif

/* Blocking (req NULL) and non-blocking forms in one function each. */
HAR_HIDDEN int har_bcast(void *buf, har_count_t count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req,
                         har_binding_t binding);
HAR_HIDDEN int har_reduce(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm, MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_allgather(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf,
                             har_count_t rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req,
                             har_binding_t binding);
HAR_HIDDEN int har_allgatherv(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf,
                              const void *rcounts, const void *displs, MPI_Datatype rtype, MPI_Comm comm,
                              MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_reduce_scatter_block(const void *sbuf, void *rbuf, har_count_t rcount, MPI_Datatype type,
                                        MPI_Op op, MPI_Comm comm, MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_reduce_scatter(const void *sbuf, void *rbuf, const void *rcounts, MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm, MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_gather(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                          MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_gatherv(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf,
                           const void *rcounts, const void *displs, MPI_Datatype rtype, int root, MPI_Comm comm,
                           MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_scatter(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                           MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_scatterv(const void *sbuf, const void *scounts, const void *displs, MPI_Datatype stype,
                            void *rbuf, har_count_t rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                            MPI_Request *req, har_binding_t binding);
HAR_HIDDEN int har_alltoall(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf,
                            har_count_t rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req,
                            har_binding_t binding);
HAR_HIDDEN int har_alltoallv(const void *sbuf, const void *scounts, const void *sdispls, MPI_Datatype stype,
                             void *rbuf, const void *rcounts, const void *rdispls, MPI_Datatype rtype, MPI_Comm comm,
                             MPI_Request *req, har_binding_t binding);

#endif
