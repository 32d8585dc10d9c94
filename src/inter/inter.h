/* The inter-node step: one block of a node's reduced data all-reduced with
 * the same block of every other node, over one rail (or the leaders). */
#ifndef HAR_INTER_H
#define HAR_INTER_H

#include "engine.h"

/* In place on `data` (n elements of the call's type), across nodes over
 * this rank's rail or the leaders' communicator (node->notice_comm): har's
 * ring (reduce-scatter then all-gather, 2(P-1)/P of the data sent), or the
 * MPI's MPI_Allreduce when HAR_INTER=mpi. `tmp` holds tmp_bytes, at least
 * the plan's chunk. `first`: the call's first chunk, whose first exchange
 * checks that both sides make the same call. */
HAR_HIDDEN har_status_t har_inter_allreduce(har_node_t *node, char *data, size_t n, const har_call_t *call, char *tmp,
                                            size_t tmp_bytes, int first);

/* At set-up, where the communicator spans nodes: the ring's header and
 * checksum messages. */
HAR_HIDDEN har_status_t har_inter_setup(har_node_t *node);

#endif
