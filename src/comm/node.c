/* Node-context helpers shared by the call driver and the engines. */
#include <stdio.h>
#include "comm/node.h"
#include "core/log.h"

static har_status_t wait_status(har_wait_rc_t rc)
{
    static const har_status_t st[] = {HAR_OK, HAR_ST_PEER_DEAD, HAR_ST_TIMEOUT, HAR_ST_PEER_FAILED};
    return st[rc];
}

har_status_t har_node_wait_all(har_node_t *node, const char *step)
{
    har_wait_ctx_t ctx = {step, node->rank, node->node, node->set->timeout};
    return wait_status(har_seg_wait_all(&node->seg, node->seg.my_epoch, &ctx));
}

har_status_t har_node_wait_one(har_node_t *node, int peer, const char *step)
{
    har_wait_ctx_t ctx = {step, node->rank, node->node, node->set->timeout};
    return wait_status(har_seg_wait(&node->seg, peer, node->seg.my_epoch, &ctx));
}

har_status_t har_node_check_peers(har_node_t *node, double started, const char *step)
{
    har_wait_ctx_t ctx = {step, node->rank, node->node, node->set->timeout};
    return wait_status(har_seg_check_peers(&node->seg, started, &ctx));
}

int har_node_agree(har_node_t *node, int ok, int quiet, const char *what, const char *why, const char *consequence)
{
    struct { int ok, rank; } mine = {ok ? 1 : 0, node->local_rank}, least = {0, 0};
    if (PMPI_Allreduce(&mine, &least, 1, MPI_2INT, MPI_MINLOC, node->node_comm) != MPI_SUCCESS) {
        har_log(HAR_LOG_ERROR, "%s: agreement between local ranks failed; %s", what, consequence);
        return 0;
    }
    if (!least.ok && least.rank == node->local_rank) {
        if (quiet) HAR_LOG(HAR_LOG_DEBUG, "%s: %s (local rank %d of node %d); %s", what, why, node->local_rank,
                           node->node, consequence);
        else har_log(HAR_LOG_WARN, "%s: %s (local rank %d of node %d); %s", what, why, node->local_rank, node->node,
                     consequence);
    }
    return least.ok;
}
