/* The device survey (survey.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/log.h"
#include "cuda/driver.h"
#include "cuda/survey.h"

void har_cuda_gpu_release(har_cuda_gpu_t *gpu)
{
    free(gpu->uuid);
    gpu->uuid = NULL;
}

#ifdef HAR_HAVE_CUDA
enum { LINK_NONE, LINK_PCIE, LINK_NVLINK };
static const char *const link_names[] = {"none", "pcie", "nvlink"};

/* Does NVML show an active NVLink on the GPU at this PCI address? */
static int nvlink_active(const char *bus_id)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    int (*init)(void), (*shutdown)(void), (*by_bus)(const char *, void **), (*state)(void *, unsigned, int *);
    *(void **)&init = dlsym(lib, "nvmlInit_v2");
    *(void **)&shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&by_bus = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&state = dlsym(lib, "nvmlDeviceGetNvLinkState");
    int active = 0;
    void *dev = NULL;
    if (init && shutdown && by_bus && state && init() == 0) {
        if (by_bus(bus_id, &dev) == 0)
            for (unsigned link = 0; link < 18 && !active; link++) {  /* NVML_NVLINK_MAX_LINKS */
                int on = 0;
                active = state(dev, link, &on) == 0 && on == 1;
            }
        shutdown();
    }
    dlclose(lib);
    return active;
}

/* The product asks the driver and NVML; the test build may ask a recorded
 * machine instead (HAR_TEST_GPUS). */
static har_cuda_api_t gpu_api(void)
{
    har_cuda_api_t api = {har_cuda_device_api(), nvlink_active};
#ifdef HAR_TEST_HOOKS
    har_cuda_recorded(&api);
#endif
    return api;
}

static int ordinal_of(const har_cuda_api_t *api, const unsigned char uuid[16])
{
    const har_cuda_device_api_t *cu = api->cu;
    int n = 0;
    if (!cu || cu->device_get_count(&n) != CUDA_SUCCESS) return -1;
    for (int d = 0; d < n; d++) {
        CUdevice dev;
        CUuuid u;
        if (cu->device_get(&dev, d) == CUDA_SUCCESS && cu->device_get_uuid(&u, dev) == CUDA_SUCCESS &&
            memcmp(u.bytes, uuid, 16) == 0)
            return d;
    }
    return -1;
}

int har_cuda_ordinal(const unsigned char uuid[16])
{
    har_cuda_api_t api = gpu_api();
    return ordinal_of(&api, uuid);
}

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

har_status_t har_cuda_survey(har_node_t *node, int device, har_cuda_gpu_t *gpu)
{
    har_cuda_api_t api = gpu_api();
    const har_cuda_device_api_t *cu = api.cu;
    struct { unsigned char uuid[16]; uint64_t name; } mine, *all = NULL;
    char name[256] = "", bus[32] = "", word[HAR_CLASS_LEN - 8];
    CUdevice dev;
    CUuuid uuid;
    memset(gpu, 0, sizeof *gpu);
    memset(&mine, 0, sizeof mine);
    gpu->ordinal = device;
    gpu->nranks = node->local_size;
    int me = node->local_rank;
    MPI_Request req;
    har_status_t st = HAR_ERR_INTERNAL;
    int mps = 0;
    int ok = cu && cu->device_get(&dev, device) == CUDA_SUCCESS && cu->device_get_uuid(&uuid, dev) == CUDA_SUCCESS &&
             cu->device_get_name(name, sizeof name, dev) == CUDA_SUCCESS &&
             cu->device_get_pci_bus_id(bus, sizeof bus, dev) == CUDA_SUCCESS;
    /* Drivers before CUDA 12.3 lack the attribute: MPS is then not known to serve. */
    if (ok && cu->device_get_attribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) != CUDA_SUCCESS) mps = 0;
    if (ok) {
        snprintf(gpu->bus, sizeof gpu->bus, "%s", bus);
        memcpy(mine.uuid, uuid.bytes, 16);
        mine.name = hash(name);
    }
    all = calloc((size_t)gpu->nranks, sizeof *all);
    gpu->uuid = calloc((size_t)gpu->nranks, sizeof *gpu->uuid);
    if (all && gpu->uuid)
        st = har_node_exchange(node, PMPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                                                     node->node_comm, &req), &req, "device survey");
    else
        har_node_fail(node, st, -1, "device survey");
    if (st != HAR_OK) {
        free(all);
        har_cuda_gpu_release(gpu);
        return st;
    }
    int reach = ok, shared = 0;
    for (int r = 0; r < gpu->nranks; r++) {
        memcpy(gpu->uuid[r], all[r].uuid, 16);
        for (int q = 0; q < r; q++) shared |= memcmp(all[q].uuid, all[r].uuid, 16) == 0;
        gpu->same_gpu += memcmp(all[r].uuid, all[me].uuid, 16) == 0;
        if (r == me || !reach) continue;
        int peer = ordinal_of(&api, all[r].uuid), can = peer == device;
        CUdevice peer_dev;
        if (peer >= 0 && !can && cu->device_get(&peer_dev, peer) == CUDA_SUCCESS &&
            cu->device_can_access_peer(&can, dev, peer_dev) != CUDA_SUCCESS)
            can = 0;
        reach = peer >= 0 && can;
    }
    int link = !reach ? LINK_NONE : api.nvlink_active(bus) ? LINK_NVLINK : LINK_PCIE;
    /* Agreed: the smallest reach, link and MPS; names equal iff min == max. */
    uint64_t mine_facts[5] = {mine.name, ~mine.name, (uint64_t)reach, (uint64_t)link, (uint64_t)(ok && mps)}, agree[5];
    free(all);
    st = har_node_exchange(node, PMPI_Iallreduce(mine_facts, agree, 5, MPI_UINT64_T, MPI_MIN, node->node_comm, &req),
                           &req, "device survey");
    if (st != HAR_OK) {
        har_cuda_gpu_release(gpu);
        return st;
    }
    gpu->shared_gpu = shared;
    gpu->reachable = (int)agree[2];
    gpu->mps = (int)agree[4];
    har_plan_class_word(name, word, sizeof word);
    if (agree[0] != ~agree[1]) snprintf(gpu->cls, sizeof gpu->cls, "mixed");
    else snprintf(gpu->cls, sizeof gpu->cls, "%s/%s", word,
                  shared ? (gpu->mps ? "mps" : "shared") : link_names[agree[3]]);
    HAR_LOG(HAR_LOG_DEBUG, "device survey: GPU %d (%s, %s), local GPUs %s, %s, class %s", device, name, bus,
            shared ? "shared between ranks" : gpu->reachable ? "reach each other" : "do not all reach each other",
            gpu->mps ? "every context through MPS" : "not every context through MPS", gpu->cls);
    return HAR_OK;
}
#else
int har_cuda_ordinal(const unsigned char uuid[16])
{
    (void)uuid;
    return -1;
}
har_status_t har_cuda_survey(har_node_t *node, int device, har_cuda_gpu_t *gpu)
{
    (void)node;
    memset(gpu, 0, sizeof *gpu);
    gpu->ordinal = device;
    return HAR_ERR_CUDA;  /* unreachable: without CUDA no buffer is device memory */
}
#endif
