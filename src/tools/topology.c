/* har-info --topology [--json] [--measure]: the node check-up. For every
 * rank (one process, or each rank under mpirun): its GPU, that GPU's NUMA
 * node and CPUs and the CPUs the rank may run on, whether MPS serves it;
 * for every pair of GPUs rank 0's process sees: peer access, NVLinks or the
 * PCIe path between them (NVML), and whether a kernel on one really loads
 * what was written on the other; whether the node's ranks share GPUs, and
 * which engines serve its device buffers and why not. --measure adds the
 * two numbers that say whether the IPC path can pay: peer copy bandwidth
 * per GPU pair, and the time of a small all-reduce through the node
 * segment (host and device buffers). Human-readable by default; --json for
 * programs. The GPU probes make contexts on rank 0's GPUs, as an
 * application would; har itself never does. */
#define _GNU_SOURCE  /* sched_getaffinity */
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "comm/state.h"
#include "core/log.h"
#include "host/numa.h"
#include "engines/engine.h"
#include "cuda/nccl.h"
#include "tools/tools.h"
#ifdef HAR_HAVE_HWLOC
#include <hwloc.h>
#endif
#ifdef HAR_HAVE_KERNELS
#include <cuda_runtime_api.h>
#include "engines/ipc_kernels.h"
#endif

typedef struct {
    int world, local, ordinal, numa, mps, gpus;
    char host[48], uuid[40], name[64], bus[32], gpu_cpus[96], my_cpus[96];
} rank_row_t;

typedef struct {
    int a, b, access_ab, access_ba, nvlinks, probed, probe_ok;
    char path[24];
    double gbps;  /* --measure: a to b, 0 if not measured */
} pair_row_t;

/* A CPU set as a list: "0-7,16". */
static void cpu_list(const cpu_set_t *set, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && n < len; c++) {
        if (!CPU_ISSET(c, set) || (c > 0 && CPU_ISSET(c - 1, set))) continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) e++;
        n += (size_t)snprintf(out + n, len - n, e > c ? "%s%d-%d" : "%s%d", n ? "," : "", c, e);
    }
}

#ifdef HAR_HAVE_CUDA
/* NVML, where the driver has it: links and the PCIe path between GPUs. */
static struct {
    int (*init)(void), (*by_bus)(const char *, void **), (*ancestor)(void *, void *, int *);
    int (*link_state)(void *, unsigned, int *), (*remote)(void *, unsigned, void *);
} nvml;

static int nvml_open(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    *(void **)&nvml.init = dlsym(lib, "nvmlInit_v2");
    *(void **)&nvml.by_bus = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml.ancestor = dlsym(lib, "nvmlDeviceGetTopologyCommonAncestor");
    *(void **)&nvml.link_state = dlsym(lib, "nvmlDeviceGetNvLinkState");
    *(void **)&nvml.remote = dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    return nvml.init && nvml.by_bus && nvml.ancestor && nvml.init() == 0;
}

/* NVLinks from a to b, and the PCIe path as nvidia-smi names it. */
static void nvml_pair(const char *bus_a, const char *bus_b, pair_row_t *p)
{
    static const struct { int level; const char *name; } levels[] = {
        {0, "same board"}, {10, "PIX (one switch)"}, {20, "PXB (switches)"}, {30, "PHB (host bridge)"},
        {40, "NODE (one socket)"}, {50, "SYS (across sockets)"}};
    void *a = NULL, *b = NULL;
    int level = -1;
    snprintf(p->path, sizeof p->path, "unknown");
    if (nvml.by_bus(bus_a, &a) != 0 || nvml.by_bus(bus_b, &b) != 0) return;
    if (nvml.ancestor(a, b, &level) == 0)
        for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
            if (levels[i].level == level) snprintf(p->path, sizeof p->path, "%s", levels[i].name);
    /* nvmlPciInfo_t begins with the bus id string (32 bytes, legacy 16). */
    char info[256];
    for (unsigned link = 0; nvml.link_state && nvml.remote && link < 18; link++) {
        int on = 0;
        if (nvml.link_state(a, link, &on) != 0 || on != 1 || nvml.remote(a, link, info) != 0) continue;
        p->nvlinks += strncasecmp(info, bus_b, strlen(bus_b)) == 0 || strcasecmp(info + 32, bus_b) == 0;
    }
}
#endif

#ifdef HAR_HAVE_KERNELS
/* A kernel on GPU a loads 16 bytes GPU b wrote, with peer access enabled:
 * what the IPC engine's set-up proves before it serves. */
static int probe(int a, int b)
{
    uint32_t want[4] = {0x68617221u, (uint32_t)b, (uint32_t)a, 0}, got[4] = {0};
    void *there = NULL, *out = NULL;
    int ok = cudaSetDevice(b) == cudaSuccess && cudaMalloc(&there, 16) == cudaSuccess &&
             cudaMemcpy(there, want, 16, cudaMemcpyHostToDevice) == cudaSuccess && cudaSetDevice(a) == cudaSuccess;
    cudaError_t e = ok ? cudaDeviceEnablePeerAccess(b, 0) : cudaErrorUnknown;
    ok = ok && (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) && cudaMalloc(&out, 16) == cudaSuccess &&
         har_engine_dev_probe(there, out, NULL) == cudaSuccess &&
         cudaMemcpy(got, out, 16, cudaMemcpyDeviceToHost) == cudaSuccess && memcmp(got, want, 16) == 0;
    cudaFree(out);
    cudaSetDevice(b);
    cudaFree(there);
    cudaGetLastError();
    return ok;
}

/* GB/s of a 64 MiB copy from GPU a's memory to b's, median of 5. */
static double peer_bandwidth(int a, int b)
{
    const size_t bytes = 64 << 20;
    void *src = NULL, *dst = NULL;
    cudaEvent_t t0, t1;
    float ms[5] = {0};
    if (cudaSetDevice(a) != cudaSuccess || cudaMalloc(&src, bytes) != cudaSuccess || cudaSetDevice(b) != cudaSuccess ||
        cudaMalloc(&dst, bytes) != cudaSuccess)
        return 0;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    cudaMemcpyPeer(dst, b, src, a, bytes);  /* warm */
    for (int i = 0; i < 5; i++) {
        cudaEventRecord(t0, 0);
        cudaMemcpyPeer(dst, b, src, a, bytes);
        cudaEventRecord(t1, 0);
        cudaEventSynchronize(t1);
        cudaEventElapsedTime(&ms[i], t0, t1);
    }
    for (int i = 1; i < 5; i++)  /* a sort of five */
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) { float x = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = x; }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaFree(dst);
    cudaSetDevice(a);
    cudaFree(src);
    cudaGetLastError();
    return ms[2] > 0 ? (double)bytes / (ms[2] * 1e-3) * 1e-9 : 0;
}
#endif

/* This rank's row. */
static void my_row(int world, int local, rank_row_t *r)
{
    cpu_set_t set;
    memset(r, 0, sizeof *r);
    r->world = world;
    r->local = local;
    r->ordinal = r->numa = -1;
    snprintf(r->host, sizeof r->host, "%s", har_hostname());
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpu_list(&set, r->my_cpus, sizeof r->my_cpus);
#ifdef HAR_HAVE_CUDA
    const har_cuda_device_api_t *cu = har_cuda_device_api();
    CUdevice dev;
    CUuuid u;
    if (!cu || cu->device_get_count(&r->gpus) != CUDA_SUCCESS || r->gpus < 1) return;
    r->ordinal = local % r->gpus;
    if (cu->device_get(&dev, r->ordinal) != CUDA_SUCCESS || cu->device_get_uuid(&u, dev) != CUDA_SUCCESS ||
        cu->device_get_name(r->name, sizeof r->name, dev) != CUDA_SUCCESS ||
        cu->device_get_pci_bus_id(r->bus, sizeof r->bus, dev) != CUDA_SUCCESS)
        return;
    if (cu->device_get_attribute(&r->mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) != CUDA_SUCCESS) r->mps = 0;
    for (int i = 0; i < 16; i++) snprintf(r->uuid + 2 * i, 3, "%02x", u.bytes[i]);
    r->numa = har_host_pci_numa_node("/sys", r->bus);
    har_host_pci_cpus("/sys", r->bus, r->gpu_cpus, sizeof r->gpu_cpus);
#endif
}

/* Pairs of the GPUs rank 0's process sees. */
static int pairs_of(int ngpus, int measure, pair_row_t *pairs, int max)
{
    int n = 0;
#ifdef HAR_HAVE_CUDA
    const har_cuda_device_api_t *cu = har_cuda_device_api();
    int have_nvml = nvml_open();
    for (int a = 0; cu && a < ngpus; a++)
        for (int b = a + 1; b < ngpus && n < max; b++) {
            pair_row_t *p = &pairs[n++];
            char bus_a[32] = "", bus_b[32] = "";
            CUdevice da, db;
            memset(p, 0, sizeof *p);
            p->a = a;
            p->b = b;
            snprintf(p->path, sizeof p->path, "unknown");
            if (cu->device_get(&da, a) != CUDA_SUCCESS || cu->device_get(&db, b) != CUDA_SUCCESS) continue;
            cu->device_can_access_peer(&p->access_ab, da, db);
            cu->device_can_access_peer(&p->access_ba, db, da);
            cu->device_get_pci_bus_id(bus_a, sizeof bus_a, da);
            cu->device_get_pci_bus_id(bus_b, sizeof bus_b, db);
            if (have_nvml) nvml_pair(bus_a, bus_b, p);
#ifdef HAR_HAVE_KERNELS
            p->probed = p->access_ab && p->access_ba;
            p->probe_ok = p->probed && probe(a, b) && probe(b, a);
            if (measure && p->probe_ok) p->gbps = peer_bandwidth(a, b);
#else
            (void)measure;
#endif
        }
#else
    (void)ngpus; (void)measure; (void)pairs; (void)max;
#endif
    return n;
}


/* ---- shared with har-info's report ------------------------------------------ */

void har_info_machine(void)
{
#ifdef HAR_HAVE_HWLOC
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
        printf("  machine: %d cores, %d NUMA nodes (hwloc %s)\n",
               hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
               hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE), HWLOC_VERSION);
        hwloc_topology_destroy(topo);
    }
#else
    printf("  machine: hwloc not built in\n");
#endif
}

/* This node's GPUs, surveyed as har does at a communicator's first call on
 * device buffers (its class, shared GPUs, MPS): loads the driver here (har
 * itself never does), which makes no context. */
int har_info_survey(MPI_Comm node, int local_rank, har_cuda_gpu_t *gpu)
{
#ifdef HAR_HAVE_CUDA
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    int (*cu_init)(unsigned) = lib ? (int (*)(unsigned))dlsym(lib, "cuInit") : NULL;
    int (*cu_count)(int *) = lib ? (int (*)(int *))dlsym(lib, "cuDeviceGetCount") : NULL;
    int n = 0, ok = cu_init && cu_count && cu_init(0) == 0 && cu_count(&n) == 0 && n > 0;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    har_node_t ctx;  /* the survey's exchanges need only these */
    memset(&ctx, 0, sizeof ctx);
    ctx.node_comm = node;
    ctx.notice_req = MPI_REQUEST_NULL;
    PMPI_Comm_rank(node, &ctx.local_rank);
    PMPI_Comm_size(node, &ctx.local_size);
    return ok && har_cuda_survey(&ctx, local_rank % n, gpu) == HAR_OK;
#else
    (void)node; (void)local_rank; (void)gpu;
    return 0;
#endif
}

/* Microseconds per small all-reduce through har on this communicator,
 * median of 200 after a warm-up, and the paths they took. */
static double small_call(MPI_Comm comm, void *buf, char *paths, size_t len)
{
    double t[200];
    unsigned long long before[HAR_PATH_COUNT], after[HAR_PATH_COUNT];
    for (int i = 0; i < 20; i++) MPI_Allreduce(MPI_IN_PLACE, buf, 1, MPI_INT, MPI_SUM, comm);
    har_counters(before, HAR_PATH_COUNT);
    for (int i = 0; i < 200; i++) {
        PMPI_Barrier(comm);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, 1, MPI_INT, MPI_SUM, comm);
        t[i] = MPI_Wtime() - t0;
    }
    har_counters(after, HAR_PATH_COUNT);
    unsigned took = 0;
    for (int p = 1; p < HAR_PATH_COUNT; p++) took |= after[p] > before[p] ? 1u << p : 0;
    har_choice_format(took, paths, len);
    PMPI_Allreduce(MPI_IN_PLACE, t, 200, MPI_DOUBLE, MPI_MAX, comm);
    for (int i = 1; i < 200; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
    return t[100] * 1e6;
}

int har_info_topology(int json, int measure)
{
    int world, size, local;
    MPI_Comm node;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &local);
    har_cuda_gpu_t gpu;
    memset(&gpu, 0, sizeof gpu);
    int have_gpu = har_info_survey(node, local, &gpu);  /* loads the driver, as an application would */
    rank_row_t mine, *rows = world == 0 ? calloc((size_t)size, sizeof *rows) : NULL;
    my_row(world, local, &mine);
    PMPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, rows, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    pair_row_t pairs[64];
    int npairs = world == 0 && mine.gpus > 1 ? pairs_of(mine.gpus, measure, pairs, 64) : 0;

    /* Which engines serve this node's device buffers, and why not. */
    int local_size;
    PMPI_Comm_size(node, &local_size);
    har_settings_t s;
    har_plan_settings_from(&har_cfg, &s);
    har_plan_in_t in = {.bytes = 1 << 20, .elem = 4, .local_size = local_size, .nnodes = 1, .uniform = 1,
                        .on_device = 1, .shared_gpu = gpu.shared_gpu, .dev_type = HAR_DT_F32, .dev_op = HAR_OP_SUM,
                        .engine_set = har_engine_set(), .engines = ~0u, .cls = gpu.cls};
    char why_not[HAR_PATH_COUNT][96] = {{0}}, nccl_why[256];
    har_nccl_api_t api;
    int nccl_loads =
        strcmp(HAR_CFG(nccl).s, "0") != 0 && har_cuda_nccl_load(&api, HAR_CFG(nccl).s, nccl_why, sizeof nccl_why);
    for (int e = 0; e < HAR_PATH_COUNT; e++) {
        const har_engine_traits_t *t = har_engine_set()->by_path[e];
        const char *why = t ? har_plan_why_not(t, &in, &s) : "not built";
        if (t && t->forced_only) why = NULL;  /* the test build's: only when forced */
        if (!why && e == HAR_PATH_IPC && !gpu.reachable && !(gpu.shared_gpu && gpu.mps))
            why = gpu.shared_gpu ? "ranks share a GPU without MPS" : "the GPUs cannot all reach each other";
        if (!why && e == HAR_PATH_NCCL && !nccl_loads) why = "NCCL does not load (HAR_NCCL)";
        int device_only = t && !(t->takes & HAR_TAKES_HOST);
        snprintf(why_not[e], sizeof why_not[e], "%s", !have_gpu && device_only ? "no GPU visible" : why ? why : "");
    }

    /* --measure: the cost of one node synchronisation, on host and device buffers. */
    double host_us = 0, dev_us = 0;
    char host_paths[96] = "-", dev_paths[96] = "-";
    int one = 1;
    if (measure && local_size > 1) host_us = small_call(node, &one, host_paths, sizeof host_paths);
#ifdef HAR_HAVE_KERNELS
    void *dev = NULL;
    int ok = have_gpu && cudaSetDevice(gpu.ordinal) == cudaSuccess && cudaMalloc(&dev, 64) == cudaSuccess;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, node);
    if (measure && local_size > 1 && ok) dev_us = small_call(node, dev, dev_paths, sizeof dev_paths);
    cudaFree(dev);
#endif

    if (world == 0) {
        if (json) {
            printf("{\"ranks\": [");
            for (int r = 0; r < size; r++)
                printf("%s\n  {\"world_rank\": %d, \"host\": \"%s\", \"local_rank\": %d, \"gpu\": %d, \"uuid\": \"%s\", "
                       "\"name\": \"%s\", \"bus\": \"%s\", \"numa_node\": %d, \"gpu_cpus\": \"%s\", \"rank_cpus\": \"%s\", "
                       "\"mps\": %s}", r ? "," : "", rows[r].world, rows[r].host, rows[r].local, rows[r].ordinal,
                       rows[r].uuid, rows[r].name, rows[r].bus, rows[r].numa, rows[r].gpu_cpus, rows[r].my_cpus,
                       rows[r].mps ? "true" : "false");
            printf("],\n \"gpu_pairs\": [");
            for (int i = 0; i < npairs; i++)
                printf("%s\n  {\"a\": %d, \"b\": %d, \"peer_access\": %s, \"nvlinks\": %d, \"pcie_path\": \"%s\", "
                       "\"probe\": \"%s\", \"copy_GBs\": %.1f}", i ? "," : "", pairs[i].a, pairs[i].b,
                       pairs[i].access_ab && pairs[i].access_ba ? "true" : "false", pairs[i].nvlinks, pairs[i].path,
                       !pairs[i].probed ? "not run" : pairs[i].probe_ok ? "passed" : "failed", pairs[i].gbps);
            printf("],\n \"node\": {\"ranks\": %d, \"class\": \"%s\", \"shared_gpu\": %s, \"mps\": %s, \"reachable\": %s},\n",
                   local_size, have_gpu ? gpu.cls : "", gpu.shared_gpu ? "true" : "false", gpu.mps ? "true" : "false",
                   gpu.reachable ? "true" : "false");
            printf(" \"engines\": {");
            for (int e = 0, k = 0; e < HAR_PATH_COUNT; e++)
                if (har_engine_set()->by_path[e] || (e == HAR_PATH_IPC || e == HAR_PATH_NCCL))
                    printf("%s\"%s\": \"%s\"", k++ ? ", " : "", har_path_name(e), why_not[e][0] ? why_not[e] : "serves");
            printf("},\n \"small_allreduce_us\": {\"host\": %.2f, \"host_paths\": \"%s\", \"device\": %.2f, "
                   "\"device_paths\": \"%s\"}}\n", host_us, host_paths, dev_us, dev_paths);
        } else {
            printf("har-info --topology: %d rank(s); this node: %d rank(s)\n", size, local_size);
            har_info_machine();
            for (int r = 0; r < size; r++) {
                const rank_row_t *x = &rows[r];
                printf("  rank %d (%s, local %d): ", x->world, x->host, x->local);
                if (x->ordinal < 0) printf("no GPU visible");
                else printf("GPU %d %s %s (uuid %.8s...), NUMA node %d, its CPUs %s; MPS %s", x->ordinal, x->name,
                            x->bus, x->uuid, x->numa, x->gpu_cpus[0] ? x->gpu_cpus : "?", x->mps ? "yes" : "no");
                printf("; runs on CPUs %s\n", x->my_cpus);
            }
            for (int i = 0; i < npairs; i++) {
                const pair_row_t *p = &pairs[i];
                printf("  GPUs %d-%d: peer access %s, %d NVLink(s), PCIe %s, write-and-verify %s", p->a, p->b,
                       p->access_ab && p->access_ba ? "yes" : "no", p->nvlinks, p->path,
                       !p->probed ? "not run" : p->probe_ok ? "passed" : "FAILED");
                if (p->gbps > 0) printf(", copy %.1f GB/s", p->gbps);
                printf("\n");
            }
            if (have_gpu)
                printf("  node: class %s; %s; MPS %s\n", gpu.cls,
                       gpu.shared_gpu ? "ranks share GPUs" : "a GPU per rank",
                       gpu.mps ? "serves every rank" : "does not serve every rank");
            printf("  engines for device buffers here:\n");
            for (int e = 0; e < HAR_PATH_COUNT; e++)
                if (e == HAR_PATH_HOST_SEGMENT || e == HAR_PATH_IPC || e == HAR_PATH_NCCL || har_engine_set()->by_path[e])
                    printf("    %-13s %s\n", har_path_name(e), why_not[e][0] ? why_not[e] : "serves");
            if (measure && local_size > 1) {
                printf("  a 4-byte all-reduce through har on this node: host %.2f us (%s)", host_us, host_paths);
                if (dev_us > 0) printf(", device %.2f us (%s)", dev_us, dev_paths);
                printf("\n");
            } else if (measure) {
                printf("  (the small all-reduce needs 2 or more ranks on the node: run under mpirun)\n");
            }
        }
    }
    free(rows);
    har_cuda_gpu_release(&gpu);
    PMPI_Comm_free(&node);
    return 0;
}
