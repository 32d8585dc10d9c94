/* Which transport carries a communicator's blocks between nodes (inter.h). */
#include "core/log.h"
#include "inter/inter.h"

/* HAR_INTER's words, in the configuration table's order ("ring,mpi"). */
static const har_inter_t *const transports[] = {&har_inter_ring, &har_inter_mpi};

static const har_inter_t *transport(const har_node_t *node)
{
    for (size_t t = 0; t < sizeof transports / sizeof *transports; t++)
        if (transports[t]->path == node->set->inter_path) return transports[t];
    return transports[0];
}

har_status_t har_inter_setup(har_node_t *node)
{
    if (node->nnodes == 1) return HAR_OK;
    const har_inter_t *t = transport(node);
    return t->setup ? t->setup(node) : HAR_OK;
}

int har_inter_takes(const har_node_t *node, har_mem_kind_t kind)
{
    if (kind == HAR_MEM_HOST) return (transport(node)->takes & HAR_TAKES_HOST) != 0;
    return (transport(node)->takes & HAR_TAKES_DEVICE) && har_mpi_cuda_p2p();
}

har_status_t har_inter_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    if (!har_inter_takes(node, b->kind)) {  /* a caller's mistake, never the user's */
        har_note("the transport between nodes cannot take this memory");
        har_node_fail(node, HAR_ERR_INTERNAL, -1, "inter");
        return HAR_ERR_INTERNAL;
    }
    return transport(node)->allreduce(node, b);
}
