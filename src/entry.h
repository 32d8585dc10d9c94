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

#endif
