/* Builds without the CUDA kernels (no nvcc, or no CUDA at all): the device
 * engines are absent, and device buffers take the host segment. */
#include "core/log.h"
#include "engine.h"

static har_engine_setup_t absent_setup(har_node_t *node, const har_gpu_t *gpu, void **engine)
{
    (void)gpu;
    *engine = NULL;
    har_node_agree(node, 0, 1, "device engines", "this har was built without the CUDA kernels",
                   "device buffers take the host segment");
    return HAR_ENGINE_NOT_HERE;
}

static har_status_t absent_run(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan)
{
    (void)engine; (void)node; (void)call; (void)plan;
    return HAR_ERR_INTERNAL;  /* never planned: set-up said NOT_HERE */
}

static void absent_destroy(void *engine) { (void)engine; }

const har_engine_ops_t har_engine_ipc = {absent_setup, absent_run, absent_destroy};
const har_engine_ops_t har_engine_nccl = {absent_setup, absent_run, absent_destroy};
