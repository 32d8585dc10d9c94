/* What the MPI underneath can do with device memory: its own answer where
 * it gives one (Open MPI's MPIX_Query_cuda_support, MPICH's
 * MPIX_GPU_query_support), looked up at run time, and the user's word
 * (HAR_MPI_CUDA_*) over it. Decides what har stages (stage/, entry/) and
 * what the step between nodes may hand the MPI as it is (inter/). */
#ifndef HAR_MPI_CUDA_H
#define HAR_MPI_CUDA_H

#include "core/common.h"

/* What the MPI underneath can do with device memory, after overrides. */
HAR_HIDDEN int har_mpi_cuda_p2p(void);
HAR_HIDDEN int har_mpi_cuda_reduce(void);
/* Its non-blocking and persistent collectives (HAR_MPI_CUDA_NONBLOCKING:
 * no MPI's answer covers them, so auto is 0). */
HAR_HIDDEN int har_mpi_cuda_nonblocking(void);
/* Once, after the MPI's initialisation: asks the MPI, applies the
 * settings. */
HAR_HIDDEN void har_mpi_cuda_init(void);

#endif
