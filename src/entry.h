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


/* Every all-reduce entry point's one path (har_allreduce is it for int
 * counts): serves the call or hands it to the MPI. */
HAR_HIDDEN int har_allreduce_count(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                   MPI_Comm comm, har_binding_t binding);
/* MPI_Iallreduce's way in: 1 when har served or started the call (its
 * request in *req, the call's code in *rc), 0 when the MPI's non-blocking
 * call is to serve it. */
HAR_HIDDEN int har_iallreduce_start(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                    MPI_Comm comm, MPI_Request *req, int *rc);

#endif
