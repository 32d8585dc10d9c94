/* What the MPI entry points (mpi_wrappers/) call. */
#ifndef HAR_ENTRY_H
#define HAR_ENTRY_H

#include "core/common.h"
#include "stage/stage.h"  /* har_count_t, har_binding_t */

/* After the MPI's own initialisation: reads the configuration, registers
 * har's error classes, and (`from_mpi_init`: inside MPI_Init, where every
 * rank of the world is) counts the job's ranks per machine. Safe to call
 * more than once. */
HAR_HIDDEN void har_init(int from_mpi_init);
/* Before the MPI's own finalisation: releases every communicator's state. */
HAR_HIDDEN void har_finalize(void);
/* MPI_Comm_free and MPI_Comm_disconnect: the calls har started on *comm
 * end first, then the MPI's. */
HAR_HIDDEN int har_comm_free(MPI_Comm *comm);
HAR_HIDDEN int har_comm_disconnect(MPI_Comm *comm);


/* Every all-reduce entry point's one path (har_allreduce is it for int
 * counts): serves the call or hands it to the MPI. */
HAR_HIDDEN int har_allreduce_count(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                   MPI_Comm comm, har_binding_t binding);
/* A stream-ordered all-reduce on har's kernels (har_allreduce_enqueue's
 * fast path; `captured`: the stream is being captured into a CUDA graph):
 * 1 when har queued it on `stream`, or failed it there (its code in *rc);
 * 0 when the kernels cannot take it, which every rank decides alike. */
HAR_HIDDEN int har_enqueue_on_kernels(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                      MPI_Comm comm, void *stream, int captured, int *rc);
/* har_allreduce_enqueue of any count: on the kernels, else the blocking
 * call of that binding once the stream's work is done. */
HAR_HIDDEN int har_allreduce_enqueue_count(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type,
                                           MPI_Op op, MPI_Comm comm, void *stream, har_binding_t binding);
/* MPI_Iallreduce's way in: 1 when har served or started the call (its
 * request in *req, the call's code in *rc), 0 when the MPI's non-blocking
 * call is to serve it. */
HAR_HIDDEN int har_iallreduce_start(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                    MPI_Comm comm, MPI_Request *req, int *rc);

/* The persistent all-reduce (entry/requests.c keeps its request). At its
 * making: in *call the call described once for every start, or NULL
 * where har cannot serve it (every start is the MPI's: a decision every
 * rank makes alike). MPI_ERR_NO_MEM when the description cannot be kept:
 * the request is not to be made (a rank whose starts all went to the MPI
 * would not meet its peers'). */
struct har_call;
HAR_HIDDEN int har_persistent_describe(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type,
                                       MPI_Op op, MPI_Comm comm, struct har_call **call);
/* At each MPI_Start: whether har serves this start, decided as for
 * MPI_Iallreduce (every rank alike). HAR_START_OWN: har's call in *pending
 * (NULL: it ended before returning), its code in *rc; HAR_START_FAILED: it
 * failed at its start (*rc); HAR_START_MPI: the MPI's request serves it. */
typedef enum { HAR_START_MPI, HAR_START_OWN, HAR_START_FAILED } har_start_t;
struct har_comm_pending;
HAR_HIDDEN har_start_t har_persistent_start(const struct har_call *call, MPI_Comm comm,
                                            struct har_comm_pending **pending, int *rc);
#endif
