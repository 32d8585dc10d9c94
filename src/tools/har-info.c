/* har-info: what this har was built with, what the MPI underneath can do
 * with device memory, the machine classes here and which tuning-table rows
 * apply to them, and every HAR_* variable with its value and source.
 *   har-info                        full report (alone, or under mpirun for this node's shape)
 *   har-info --variables            the variable table in markdown (the README's copy)
 *   har-info --paths                path names (HAR_REQUIRE_PATH, HAR_ALGO, the table)
 *   har-info --derive-tuning CSV... the tuning table from har-bench --tuning CSVs
 *   har-info --clean                removes segments in /dev/shm left by processes that died
 *                                   (only the named fallback can leave one)
 *   har-info --stale                how many there are, removing none (the tests' residue
 *                                   check, blind to live jobs' segments)
 *   har-info --topology [--json] [--measure]   the node check-up (topology.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/state.h"
#include "core/config.h"
#include "core/log.h"
#include "cuda/mpi_cuda.h"
#include "engines/ipc_kernels.h"
#include "engines/engine.h"
#include "entry/entry.h"
#include "inter/inter.h"
#include "cuda/nccl.h"
#include "plan/derive.h"
#include "node/machine.h"
#include "tools/tools.h"
#ifdef HAR_HAVE_UCX
#include <ucp/api/ucp_version.h>
#endif

/* ---- --derive-tuning ------------------------------------------------------ */

#define MAX_SHAPES 32

typedef struct {
    har_plan_tune_row_t shape;
    const char *file;
    har_measure_t m[512];
    int n;
} shape_t;

static int column(char *const *names, int n, const char *want)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], want) == 0) return i;
    return -1;
}

/* Splits a CSV line in place (no quoted fields in har-bench's CSVs). */
static int split(char *line, char **fields, int max)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *f = line; n < max; f++) {
        fields[n++] = f;
        f += strcspn(f, ",");
        if (!*f) break;
        *f = '\0';
    }
    return n;
}

static int derive_tuning(int nfiles, char **files)
{
    static shape_t shapes[MAX_SHAPES];
    int nshapes = 0;
    for (int i = 0; i < nfiles; i++) {
        FILE *f = fopen(files[i], "r");
        char line[1024], head[1024], *names[32], *fields[32];
        if (!f || !fgets(head, sizeof head, f)) {
            fprintf(stderr, "har-info: cannot read %s\n", files[i]);
            return 1;
        }
        int nn = split(head, names, 32);
        int c_bytes = column(names, nn, "bytes"), c_cand = column(names, nn, "candidate"),
            c_mem = column(names, nn, "buffers"), c_cls = column(names, nn, "class"),
            c_local = column(names, nn, "ranks_per_node"), c_nodes = column(names, nn, "nodes"),
            c_med = column(names, nn, "median_us"), c_p90 = column(names, nn, "p90_us"),
            c_ok = column(names, nn, "checked");
        if (c_bytes < 0 || c_cand < 0 || c_mem < 0 || c_cls < 0 || c_local < 0 || c_nodes < 0 || c_med < 0 ||
            c_p90 < 0 || c_ok < 0) {
            fprintf(stderr, "har-info: %s lacks a column of har-bench --tuning's CSV (class and p90_us included)\n",
                    files[i]);
            return 1;
        }
        while (fgets(line, sizeof line, f)) {
            int n = split(line, fields, 32), ok;
            if (n < nn) continue;
            unsigned choice = har_choice_parse(fields[c_cand], HAR_CHOICE_NAMES, &ok);
            if (!ok || !choice) continue;  /* not a tuning candidate */
            har_plan_tune_row_t shape = {0, (uint32_t)atoi(fields[c_nodes]), (uint16_t)atoi(fields[c_local]),
                                    (uint8_t)(strcmp(fields[c_mem], "device") == 0), 0, ""};
            snprintf(shape.cls, sizeof shape.cls, "%s", fields[c_cls]);
            int s = 0;
            while (s < nshapes && !(shapes[s].shape.on_device == shape.on_device && shapes[s].shape.nodes == shape.nodes &&
                                    shapes[s].shape.local_size == shape.local_size &&
                                    strcmp(shapes[s].shape.cls, shape.cls) == 0))
                s++;
            if (s == nshapes) {
                if (nshapes == MAX_SHAPES) continue;
                shapes[nshapes].shape = shape;
                shapes[nshapes].file = files[i];
                shapes[nshapes++].n = 0;
            } else if (shapes[s].file != files[i]) {
                fprintf(stderr, "har-info: %s and %s both measure %s %s %u %u: keep only the newer\n",
                        shapes[s].file, files[i], shape.on_device ? "device" : "host", shape.cls, shape.local_size,
                        shape.nodes);
                return 1;
            }
            if (shapes[s].n < 512)
                shapes[s].m[shapes[s].n++] = (har_measure_t){strtoull(fields[c_bytes], NULL, 10), choice,
                                                             atof(fields[c_med]), atof(fields[c_p90]),
                                                             strcmp(fields[c_ok], "FAILED") != 0};
        }
        fclose(f);
    }
    printf("# har tuning table. Generated by har-info --derive-tuning from har-bench --tuning\n");
    printf("# measurements; do not edit by hand.\n");
    for (int i = 0; i < nfiles; i++) {
        const char *base = strrchr(files[i], '/');
        printf("#   from %s\n", base ? base + 1 : files[i]);
    }
    printf("# memory class ranks_per_node nodes up_to_bytes choice\n");
    for (int s = 0; s < nshapes; s++) {
        har_plan_tune_row_t rows[HAR_TUNE_MAX_ROWS];
        char text[256];
        int n = har_plan_tune_derive(shapes[s].m, shapes[s].n, &shapes[s].shape, rows, HAR_TUNE_MAX_ROWS);
        for (int r = 0; r < n; r++) {
            har_plan_tune_format(&rows[r], text, sizeof text);
            printf("%s\n", text);
        }
    }
    return 0;
}

/* ---- the report ----------------------------------------------------------- */


/* The classes of this node and the rows of the table that apply to them. */
static void print_rows(const har_settings_t *s, const char *host_cls, int local_size, int nnodes, MPI_Comm node,
                       int local_rank)
{
    char text[256];
    har_cuda_gpu_t gpu;
    memset(&gpu, 0, sizeof gpu);
    int have_dev = har_info_survey(node, local_rank, &gpu);
    const char *dev_cls = gpu.cls, *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
    printf("machine classes here (%d ranks per node, %d node(s)):\n", local_size, nnodes);
    printf("  host buffers: %s\n", host_cls);
    printf("  device buffers: %s\n", have_dev ? dev_cls : "(no GPU visible, or har built without CUDA)");
    if (have_dev) {
        /* Ranks sharing a GPU run the kernels side by side only under MPS. */
        printf("GPUs of this node's %d ranks: %s; MPS %s (CUDA_MPS_PIPE_DIRECTORY=%s)\n", local_size,
               gpu.shared_gpu ? "some ranks share a GPU" : "a GPU per rank",
               gpu.mps ? "serves every rank's contexts" : "does not serve every rank's contexts",
               pipe ? pipe : "unset: /tmp/nvidia-mps");
        har_cuda_gpu_release(&gpu);
    }
    printf("tuning table (HAR_TUNING=%s, %d rows; HAR_ALGO=%s):\n", HAR_CFG(tuning).s, s->ntune, HAR_CFG(algo).s);
    for (int i = 0; i < s->ntune; i++) {
        const har_plan_tune_row_t *r = &s->tune[i];
        const char *cls = r->on_device ? (have_dev ? dev_cls : NULL) : host_cls, *why;
        if (strcmp(r->cls, "*") != 0 && (!cls || strcmp(r->cls, cls) != 0)) why = "not here: another machine class";
        else if (r->local_size != local_size || r->nodes != (uint32_t)nnodes)
            why = "not here: another shape";
        else why = "applies here";
        har_plan_tune_format(r, text, sizeof text);
        printf("  %-72s %s\n", text, why);
    }
    if (!s->ntune) printf("  (none: the thresholds decide)\n");
}

static void report(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, v = 1;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    printf("har %s\n", har_version());
    printf("build:\n");
    printf("  MPI: %s\n", lib);
#ifdef HAR_HAVE_CUDA
    printf("  CUDA: yes (driver API %d; used only in processes that load libcuda themselves)\n", HAR_CUDA_VERSION);
#else
    printf("  CUDA: no (host memory only)\n");
#endif
#ifdef HAR_HAVE_UCX
    printf("  UCX: %d.%d (headers)\n", UCP_API_MAJOR, UCP_API_MINOR);
#else
    printf("  UCX: not found\n");
#endif
    printf("  engines:");
    for (int e = 0; e < HAR_PATH_COUNT; e++)
        if (har_engines[e]) printf(" %s", har_path_name(e));
    printf(" (and the MPI)%s\n", HAR_KERNELS_BUILT ? "; the CUDA runtime linked statically for the kernels" : "");
    har_info_machine();
    har_nccl_api_t nccl;
    char why[256] = "HAR_NCCL=0";
    if (strcmp(HAR_CFG(nccl).s, "0") != 0 && har_cuda_nccl_load(&nccl, HAR_CFG(nccl).s, why, sizeof why))
        printf("  NCCL: %d.%d.%d, from %s (device buffers on one node)\n", nccl.version / 10000,
               nccl.version / 100 % 100, nccl.version % 100, HAR_CFG(nccl).s);
    else
        printf("  NCCL: not loadable (%s)\n", why);
    const har_cuda_mpi_facts_t *f = har_cuda_mpi_facts();
    const har_cuda_mpi_t *a = har_cuda_mpi();
    printf("MPI and device memory (%s):\n", f->library);
    printf("  it says: MPIX_Query_cuda_support %s, MPIX_GPU_query_support(CUDA) %s, mpi_memory_alloc_kinds %s\n",
           f->cuda_query < 0 ? "absent" : f->cuda_query ? "1" : "0",
           f->gpu_query < 0 ? "absent" : f->gpu_query ? "1" : "0", f->alloc_kinds[0] ? f->alloc_kinds : "not given");
    printf("  point-to-point on device memory: %s (%s)\n", a->p2p.yes ? "yes" : "no", a->p2p.why);
    printf("  MPI_Allreduce and the other blocking collectives: %s (%s)\n",
           a->reduce.yes ? "yes" : "no, har stages them", a->reduce.why);
    printf("  non-blocking and persistent collectives: %s (%s)\n",
           a->nonblocking.yes ? "yes" : "no, har stages them", a->nonblocking.why);
    /* What those answers make of the step between nodes on device data. */
    printf("  between nodes, device shards reach");
    for (size_t t = 0; har_inter_path(t) >= 0; t++)
        printf("%s %s %s", t ? ";" : "", har_path_name(har_inter_path(t)),
               har_inter_takes(har_inter_path(t), HAR_MEM_DEVICE) ? "as they are" : "through pinned host memory");
    printf("\n");
    /* One all-reduce on the world sets its state up: this node's shape,
     * classes and rank 0's settings, as an application's would. */
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    har_comm_t *c = har_comm_peek(MPI_COMM_WORLD);
    if (c && c->mode == HAR_COMM_SERVED) {
        printf("memory per communicator (at most HAR_MAX_COMMS=%lld of them per process):\n", HAR_CFG(max_comms).i);
        printf("  host segment: %zu bytes, shared by the node's %d ranks\n",
               har_node_seg_bytes(c->node.local_size, (size_t)c->set.slot_bytes), c->node.local_size);
        printf("  CUDA IPC engine: %lld bytes of GPU memory per rank (%d slots and flags)\n",
               (c->node.nnodes > 1 ? 3 : 2) * c->set.device_slot_bytes + (long long)HAR_DEV_FLAG_BYTES,
               c->node.nnodes > 1 ? 3 : 2);
        print_rows(&c->set, c->host_cls, c->node.local_size, c->node.nnodes, c->node.node_comm, c->node.local_rank);
    } else {
        /* One process: a node of one rank, with this process's settings. */
        static har_settings_t s;
        char source[HAR_VAR_TEXT], cls[HAR_CLASS_LEN];
        har_plan_settings_from(&har_cfg, &s);
        s.ntune = har_plan_tune_load(HAR_CFG(tuning).s, s.tune, HAR_TUNE_MAX_ROWS, source, sizeof source, 1);
        har_node_cpu_class(1, cls, sizeof cls);
        print_rows(&s, cls, 1, 1, MPI_COMM_SELF, 0);
    }
    printf("variables:\n");
    har_config_print(stdout, 0);
    printf("paths:");
    for (int p = 0; p < HAR_PATH_COUNT; p++) printf(" %s", har_path_name(p));
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--paths") == 0) {
        for (int p = 0; p < HAR_PATH_COUNT; p++) printf("%-13s %s\n", har_path_name(p), har_path_doc(p));
        /* the counters after the paths: the other collectives har wraps */
        for (int i = HAR_PATH_COUNT; i < har_counter_count(); i++)
            printf("%-13s counter: %s\n", har_counter_name(i),
                   strstr(har_counter_name(i), "_staged") ? "those calls staged through host memory on this rank"
                                                          : "calls of this collective that reached har");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--variables") == 0) {
        har_config_load(HAR_REPORT_NONE);
        har_config_print(stdout, 1);
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "--derive-tuning") == 0) return derive_tuning(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "--clean") == 0) {
        int removed = har_node_seg_clean(1, HAR_LOG_WARN);
        printf("har-info --clean: %d stale segment(s) removed from /dev/shm\n", removed);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--stale") == 0) {
        printf("%d\n", har_node_seg_clean(0, HAR_LOG_WARN));
        return 0;
    }
    int topology = argc > 1 && strcmp(argv[1], "--topology") == 0, json = 0, measure = 0;
    for (int a = 2; topology && a < argc; a++) {
        if (strcmp(argv[a], "--json") == 0) json = 1;
        else if (strcmp(argv[a], "--measure") == 0) measure = 1;
        else topology = 0;
    }
    if (argc > 1 && !topology) {
        fprintf(stderr, "usage: har-info [--variables | --paths | --derive-tuning CSV... | --clean | --stale |\n"
                        "                 --topology [--json] [--measure]]\n");
        return strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Every rank takes part in the report's collectives; rank 0 prints it. */
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    if (topology) har_info_topology(json, measure);
    else report();
    MPI_Finalize();
    return 0;
}
