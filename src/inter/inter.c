/* Which transport carries a communicator's blocks between nodes, and the
 * one place device data is staged through host memory for a transport that
 * cannot take it (inter.h). */
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

har_status_t har_inter_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    const har_inter_t *t = transport(node);
    if (b->kind == HAR_MEM_HOST || (t->takes & HAR_TAKES_DEVICE)) return t->allreduce(node, b);
    size_t bytes = b->n * b->call->red.elem_size;
    har_inter_block_t staged = *b;
    staged.data = b->host;
    staged.kind = HAR_MEM_HOST;
    har_status_t st = har_mem_copy(b->host, HAR_MEM_HOST, b->data, b->kind, bytes);
    if (st == HAR_OK) st = t->allreduce(node, &staged);
    if (st == HAR_OK) st = har_mem_copy(b->data, b->kind, b->host, HAR_MEM_HOST, bytes);
    return st;
}
