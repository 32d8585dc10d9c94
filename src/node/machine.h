/* This machine: how many of the job's ranks run on it (any of them may
 * share this rank's GPU), and its class for the tuning table's host rows. */
#ifndef HAR_MACHINE_H
#define HAR_MACHINE_H

#include <stddef.h>
#include "core/common.h"

/* Counts MPI_COMM_WORLD's ranks on this machine; collective over
 * MPI_COMM_WORLD, which only MPI_Init's wrapper may do. */
HAR_HIDDEN void har_node_census(void);
/* MPI_COMM_WORLD's ranks on this machine (the kernel's boot id: hosts made
 * of namespaces on one machine count as one), this one included; 0 if not
 * counted (MPI was initialised through an entry point har does not wrap).
 * Any of them may share this rank's GPU: device engines size their grids
 * by it. */
HAR_HIDDEN int har_node_machine_ranks(void);
/* "CPU_MODEL/cores per rank": the class the tuning table's host rows are
 * keyed by (cores per rank: the cores this process may run on, shared by
 * the node's ranks). */
HAR_HIDDEN void har_node_cpu_class(int cores_per_rank, char *out, size_t len);

#endif
