/* What the MPI entry points (mpi_wrappers/) call. */
#ifndef HAR_ENTRY_H
#define HAR_ENTRY_H

#include "core/common.h"

/* After the MPI's own initialisation: reads the configuration, registers
 * har's error classes, and (`from_mpi_init`: inside MPI_Init, where every
 * rank of the world is) counts the job's ranks per machine. Safe to call
 * more than once. */
HAR_HIDDEN void har_init(int from_mpi_init);
/* Before the MPI's own finalisation: releases every communicator's state. */
HAR_HIDDEN void har_finalize(void);

/* An element count as the MPI-4 large-count ("_c") bindings carry it; the
 * int bindings' counts widen into it. MPI_Count is MPI-3's, so every MPI
 * har builds against has it, also one without the _c bindings (configure
 * defines HAR_HAVE_MPI_C_COUNTS where the MPI has them). */
typedef MPI_Count har_count_t;

/* The binding a call came through: a call har hands to the MPI goes to
 * the MPI's own of the same binding (PMPI_Allreduce, or PMPI_Allreduce_c
 * for HAR_BINDING_LARGE), so its count is never cut to an int. */
typedef enum { HAR_BINDING_INT, HAR_BINDING_LARGE } har_binding_t;

/* Every all-reduce entry point's one path (har_allreduce is it for int
 * counts): serves the call or hands it to the MPI. */
HAR_HIDDEN int har_allreduce_count(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                                   MPI_Comm comm, har_binding_t binding);

#endif
