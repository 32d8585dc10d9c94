/* Which transport carries a block between nodes (inter.h). */
#include <stdio.h>
#include "core/config.h"
#include "core/log.h"
#include "core/paths.h"
#include "inter/inter.h"

static const har_inter_t *const transports[] = {&har_inter_ring, &har_inter_doubling, &har_inter_mpi,
#if HAR_KERNELS_BUILT
                                                &har_inter_nccl
#endif
};
#define NTRANSPORTS (sizeof transports / sizeof *transports)

static const har_inter_t *transport(int path)
{
    for (size_t t = 0; t < NTRANSPORTS; t++)
        if (transports[t]->path == path) return transports[t];
    return NULL;
}

har_status_t har_inter_setup(har_node_t *node)
{
    if (node->nnodes == 1) return HAR_OK;
    har_status_t st = HAR_OK;
    for (size_t t = 0; t < NTRANSPORTS && st == HAR_OK; t++)
        if (transports[t]->setup) st = transports[t]->setup(node);
    return st;
}

void har_inter_release(har_node_t *node)
{
    for (size_t t = 0; t < NTRANSPORTS; t++)
        if (transports[t]->release) transports[t]->release(node);
}

#if !HAR_KERNELS_BUILT
int har_inter_nccl_here(char *why, size_t len)
{
    snprintf(why, len, "this har was built without CUDA");
    return 0;
}
#endif

int har_inter_path(size_t i) { return i < NTRANSPORTS ? transports[i]->path : -1; }

int har_inter_takes(int path, har_mem_kind_t kind)
{
    const har_inter_t *t = transport(path);
    if (!t) return 0;
    return kind == HAR_MEM_HOST || (t->takes_device && t->takes_device());
}

int har_inter_uses_scratch(int path)
{
    const har_inter_t *t = transport(path);
    return t && t->uses_scratch;
}

har_status_t har_inter_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    if (!har_inter_takes(b->path, b->kind)) {  /* a caller's mistake, never the user's */
        har_note("the transport between nodes cannot take this memory");
        har_node_fail(node, HAR_ERR_INTERNAL, -1, "inter");
        return HAR_ERR_INTERNAL;
    }
#ifdef HAR_TEST_HOOKS
    /* The check NCCL's calls take, tested where no GPU is: before the ring's
     * or doubling's first block. */
    if (HAR_CFG(test_check_calls).i && b->first && b->path != HAR_PATH_INTER_NCCL) {
        har_status_t st = har_inter_check_calls(node, b, "inter (HAR_TEST_CHECK_CALLS)");
        if (st != HAR_OK) return st;
    }
#endif
    return transport(b->path)->allreduce(node, b);
}
