/* har-info: what this har was built with, what the MPI underneath can do
 * with device memory, and every HAR_* variable with its value and source.
 *   har-info              full report (run it under mpirun or alone)
 *   har-info --variables  the variable table in markdown (the README's copy)
 *   har-info --paths      path names for HAR_REQUIRE_PATH */
#include <stdio.h>
#include <string.h>
#include "../internal.h"
#include "../dev.h"
#include "../nccl_api.h"
#ifdef HAR_HAVE_HWLOC
#include <hwloc.h>
#endif
#ifdef HAR_HAVE_UCX
#include <ucp/api/ucp_version.h>
#endif

static void print_paths(void)
{
    for (int p = 0; p < HAR_PATH_COUNT; p++) printf("%s\n", har_path_name((har_path_t)p));
}

static void print_machine(void)
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

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--paths") == 0) {
        print_paths();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--variables") == 0) {
        har_config_load();
        har_config_print(stdout, 1);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: har-info [--variables | --paths]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    har_init();
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    printf("har %s\n", har_version());
    printf("build:\n");
    printf("  MPI: %s (%s)\n", har_mpi_flavour(), lib);
#ifdef HAR_HAVE_CUDA
    printf("  CUDA: yes (driver API %d; used only in processes that load libcuda themselves; here: %s)\n",
           HAR_CUDA_VERSION, har_cuda_available() ? "loaded" : "not loaded");
#else
    printf("  CUDA: no (host memory only)\n");
#endif
#ifdef HAR_HAVE_UCX
    printf("  UCX: %d.%d (headers)\n", UCP_API_MAJOR, UCP_API_MINOR);
#else
    printf("  UCX: not found\n");
#endif
#ifdef HAR_HAVE_KERNELS
    printf("  CUDA IPC kernels: built in (CUDA runtime linked statically)\n");
#else
    printf("  CUDA IPC kernels: not built (device buffers go through host memory)\n");
#endif
    print_machine();
    har_nccl_api_t nccl;
    char why[256] = "HAR_NCCL=0";
    if (strcmp(har_cfg.nccl.s, "0") != 0 && har_nccl_load(&nccl, har_cfg.nccl.s, why, sizeof why) == 0)
        printf("  NCCL: %d.%d.%d, from %s (device buffers on one node)\n", nccl.version / 10000,
               nccl.version / 100 % 100, nccl.version % 100, har_cfg.nccl.s);
    else
        printf("  NCCL: not loadable (%s)\n", why);
    printf("MPI and device memory (after overrides):\n");
    printf("  point-to-point on device memory: %s\n", har_mpi_cuda_p2p() ? "yes" : "no");
    printf("  MPI_Allreduce on device memory: %s\n", har_mpi_cuda_reduce() ? "yes" : "no (har stages it)");
    har_algo_cfg_t a;
    har_algo_cfg_local(&a);
    printf("memory per communicator (at most HAR_MAX_COMMS=%lld of them per process):\n", har_cfg.max_comms.i);
    printf("  host segment: %lld bytes per local rank (two slots), shared by the node\n", 2 * a.slot_bytes + 256);
    printf("  CUDA IPC segment: %lld bytes of GPU memory per rank (two slots and flags)\n",
           2 * ((a.device_slot_bytes + 4095) / 4096 * 4096) + (long long)(HAR_DEV_FLAG_BYTES));
    const har_tune_row_t *rows;
    const char *source;
    int nrows = har_tune_active(&rows, &source);
    printf("tuning table (%s, %d rows; HAR_ALGO=%s):\n", source, nrows, har_cfg.algo.s);
    for (int i = 0; i < nrows; i++) {
        char max[32] = "inf";
        if (rows[i].max_bytes != UINT64_MAX) snprintf(max, sizeof max, "%llu", (unsigned long long)rows[i].max_bytes);
        printf("  %s buffers, %u ranks per node, %u node(s), up to %s bytes: %s\n", rows[i].device ? "device" : "host",
               rows[i].local_size, rows[i].nodes, max, har_algo_name((har_algo_t)rows[i].algo));
    }
    printf("variables:\n");
    har_config_print(stdout, 0);
    printf("paths (HAR_REQUIRE_PATH):");
    for (int p = 0; p < HAR_PATH_COUNT; p++) printf(" %s", har_path_name((har_path_t)p));
    printf("\n");
    har_finalize();
    MPI_Finalize();
    return 0;
}
