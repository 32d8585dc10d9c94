/* The MPI's own all-reduce on the rail, a transport of inter.h: waited for
 * like any other exchange (it checks counts itself; a failure of a
 * collective cannot be cancelled, and the communicator fails for good). It
 * inherits the MPI's reductions, bugs included (README, Limitations). */
#include "cuda/mpi_cuda.h"
#include "inter/inter.h"

/* b->n fits an int: a block is at most a chunk (at most 1 GiB, ring.c). */
static har_status_t mpi_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    MPI_Request req;
    int posted = PMPI_Iallreduce(MPI_IN_PLACE, b->data, (int)b->n, b->call->type, b->call->op, node->notice_comm, &req);
    return har_node_exchange(node, posted, &req, "inter_mpi");
}

/* Device memory as it is only where the MPI's non-blocking collectives
 * take it (MPI 4.1's memory kinds, or HAR_MPI_CUDA_NONBLOCKING=1): its
 * blocking MPI_Allreduce might, but a wait in it could not be bounded.
 * CUDA-aware Open MPI's non-blocking collectives crash on device buffers
 * (cuda/mpi_cuda.c): there the engine copies through pinned host memory,
 * as under an MPI with no CUDA. */
const har_inter_t har_inter_mpi = {HAR_PATH_INTER_MPI, har_cuda_mpi_nonblocking, 0, NULL, mpi_allreduce, NULL};
