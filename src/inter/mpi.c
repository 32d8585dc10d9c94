/* The MPI's own all-reduce on the rail, a transport of inter.h: waited for
 * like any other exchange (it checks counts itself; a failure of a
 * collective cannot be cancelled, and the communicator fails for good). It
 * inherits the MPI's reductions, bugs included (README, Limitations). */
#include "inter/inter.h"

/* b->n fits an int: a block is at most a chunk (at most 1 GiB, ring.c). */
static har_status_t mpi_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    MPI_Request req;
    int posted = PMPI_Iallreduce(MPI_IN_PLACE, b->data, (int)b->n, b->call->type, b->call->op, node->notice_comm, &req);
    return har_node_exchange(node, posted, &req, "inter_mpi");
}

/* Host memory only: "CUDA-aware" MPIs that reduce device memory in
 * MPI_Allreduce are not told apart here yet. */
const har_inter_t har_inter_mpi = {HAR_PATH_INTER_MPI, HAR_TAKES_HOST, NULL, mpi_allreduce};
