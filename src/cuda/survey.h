/* The node's GPUs, surveyed once per communicator at the first call on
 * device buffers: which GPU each local rank's buffers are on, whether ranks
 * share GPUs or can reach each other's, and the machine class that the
 * tuning table's device rows are keyed by. Uses only driver calls that need
 * no context, and NVML when the driver has it. */
#ifndef HAR_SURVEY_H
#define HAR_SURVEY_H

#include "node/node.h"
#include "cuda/driver.h"
#include "plan/tuning.h"

typedef struct {
    int ordinal;                /* this rank's GPU, as its buffers say (ordinal in this process) */
    int nranks;
    int shared_gpu;             /* some local ranks share a GPU (agreed) */
    int same_gpu;               /* local ranks on this rank's GPU, itself included */
    int mps;                    /* every local rank's contexts go through MPS (agreed) */
    char bus[32];               /* this rank's GPU's PCI bus id, as the driver gives it */
    int reachable;              /* every local rank sees every other's GPU and has peer access to it (agreed) */
    /* "GPU_MODEL/link": link nvlink, pcie or none, or how ranks share GPUs:
     * mps, or shared (time-sliced); "mixed" if models differ */
    char cls[HAR_CLASS_LEN];
    unsigned char (*uuid)[16];  /* every local rank's GPU */
} har_cuda_gpu_t;

/* Collective on the node; its exchanges bounded as every wait (node.h). */
HAR_HIDDEN har_status_t har_cuda_survey(har_node_t *node, int device, har_cuda_gpu_t *gpu);
HAR_HIDDEN void har_cuda_gpu_release(har_cuda_gpu_t *gpu);
/* Ordinal, in this process's numbering, of the GPU with this UUID; -1 if
 * this process cannot see it (CUDA_VISIBLE_DEVICES per rank, say). */
HAR_HIDDEN int har_cuda_ordinal(const unsigned char uuid[16]);

#ifdef HAR_HAVE_CUDA
/* Everything the survey learns about GPUs comes through here: the driver's
 * calls that need no context (NULL before libcuda is loaded) and whether
 * NVML shows an active NVLink on the GPU at a PCI address. One seam, so
 * that the test build can put a recorded machine in the hardware's place. */
typedef struct {
    const har_cuda_device_api_t *cu;
    int (*nvlink_active)(const char *bus_id);
} har_cuda_api_t;
#ifdef HAR_TEST_HOOKS
/* HAR_TEST_GPUS=FILE: fills `api` with the machine described in FILE, as
 * this process sees it (src/cuda/survey_recorded.c, which gives the format),
 * and returns 1; 0 when the variable is unset. */
HAR_HIDDEN int har_cuda_recorded(har_cuda_api_t *api);
#endif
#endif

#endif
