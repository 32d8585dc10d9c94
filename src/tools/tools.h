/* What har-info.c takes from topology.c: the node check-up, and the GPU
 * survey and machine line its report shares with it. */
#ifndef HAR_TOOLS_H
#define HAR_TOOLS_H

#include "cuda/survey.h"

/* This node's GPUs, surveyed as har does at a communicator's first call on
 * device buffers; collective over MPI_COMM_WORLD. 0 if none is visible. */
int har_info_survey(MPI_Comm node, int local_rank, har_cuda_gpu_t *gpu);
/* "  machine: N cores, M NUMA nodes (hwloc V)", from hwloc where built in. */
void har_info_machine(void);
/* har-info --topology; collective over MPI_COMM_WORLD, rank 0 prints. */
int har_info_topology(int json, int measure);

#endif
