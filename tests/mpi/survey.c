/* The device survey (src/cuda/survey.c) on a recorded machine: every rank
 * surveys its node's GPUs from the description in HAR_TEST_GPUS (the test
 * build reads it in the driver's and NVML's place; format in
 * src/cuda/survey_recorded.c), with a node context made as har-info makes one, and
 * checks what the node agreed against the values the caller expects for
 * that machine. Every rank must find them, and every rank of a node the
 * same GPUs.
 *
 * Usage: survey --gpus N --shared 0|1 --same K[,K...] --reach 0|1 --mps 0|1
 *               --class CLASS [--nodes K]
 *   --gpus   distinct GPUs among the node's ranks
 *   --same   ranks on each local rank's GPU, itself included (one value:
 *            the same for all)
 *   --nodes  split MPI_COMM_WORLD into K nodes of consecutive ranks
 *   Each rank's ordinal comes from the description's "rank R gpu N" line.
 * survey --probe: exit 0, or 77 where har was built without CUDA headers.
 * Exit 0 when every check passes on every rank, 1 otherwise. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "cuda/survey.h"

static int failures;

#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        if (!(cond)) {                                                   \
            char msg_[2048];                                              \
            snprintf(msg_, sizeof msg_, __VA_ARGS__);                    \
            fprintf(stderr, "FAIL rank %d: %s\n", world_rank, msg_);     \
            failures++;                                                  \
        }                                                                \
    } while (0)

static int world_rank;

/* The ordinal the description gives this rank's buffers, or -1. */
static int my_ordinal(const char *file)
{
    FILE *f = fopen(file, "r");
    char line[512];
    int r, n, found = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, " rank %d gpu %d", &r, &n) == 2 && r == world_rank) found = n;
    if (f) fclose(f);
    return found;
}

static int usage(void)
{
    fprintf(stderr, "usage: survey --gpus N --shared 0|1 --same K[,K...] --reach 0|1 --mps 0|1 --class CLASS "
                    "[--nodes K] | --probe\n");
    return 2;
}

int main(int argc, char **argv)
{
    int gpus = -1, shared = -1, reach = -1, mps = -1, nodes = 1, nsame = 0, same[256];
    const char *cls = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--probe") == 0) {
#ifdef HAR_HAVE_CUDA
            return 0;
#else
            printf("har built without CUDA headers: no device survey\n");
            return 77;
#endif
        }
        if (!v) return usage();
        i++;
        if (strcmp(a, "--gpus") == 0) gpus = atoi(v);
        else if (strcmp(a, "--shared") == 0) shared = atoi(v);
        else if (strcmp(a, "--reach") == 0) reach = atoi(v);
        else if (strcmp(a, "--mps") == 0) mps = atoi(v);
        else if (strcmp(a, "--nodes") == 0) nodes = atoi(v);
        else if (strcmp(a, "--class") == 0) cls = v;
        else if (strcmp(a, "--same") == 0) {
            for (char *p = (char *)v, *end; *p && nsame < 256; p = end + (*end == ',')) {
                same[nsame++] = (int)strtol(p, &end, 10);
                if (end == p) return usage();
            }
        } else return usage();
    }
    if (gpus < 0 || shared < 0 || reach < 0 || mps < 0 || !cls || !nsame || nodes < 1) return usage();

    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    har_config_load(world_rank == 0);
    const char *file = HAR_CFG(test_gpus).s;
    CHECK(*file, "HAR_TEST_GPUS is not set (or this is not the test build)");
    MPI_Comm node = MPI_COMM_WORLD;
    if (nodes > 1) MPI_Comm_split(MPI_COMM_WORLD, world_rank * nodes / size, world_rank, &node);

    /* The node context har-info's survey_gpus makes: the survey's exchanges need only these. */
    har_node_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.node_comm = node;
    ctx.notice_req = MPI_REQUEST_NULL;
    MPI_Comm_rank(node, &ctx.local_rank);
    MPI_Comm_size(node, &ctx.local_size);
    int me = ctx.local_rank, n = ctx.local_size, ordinal = my_ordinal(file);
    CHECK(ordinal >= 0, "%s has no line \"rank %d gpu N\"", file, world_rank);

    har_cuda_gpu_t gpu;
    char found[HAR_CLASS_LEN] = "?";
    har_status_t st = har_cuda_survey(&ctx, ordinal, &gpu);
    CHECK(st == HAR_OK, "har_cuda_survey failed: %d", (int)st);
    if (st == HAR_OK) {
        snprintf(found, sizeof found, "%s", gpu.cls);
        int want_same = same[me < nsame ? me : nsame - 1];
        CHECK(gpu.ordinal == ordinal && gpu.nranks == n, "ordinal %d of %d ranks, expected %d of %d", gpu.ordinal,
              gpu.nranks, ordinal, n);
        CHECK(gpu.shared_gpu == shared, "shared_gpu %d, expected %d", gpu.shared_gpu, shared);
        CHECK(gpu.same_gpu == want_same, "same_gpu %d, expected %d", gpu.same_gpu, want_same);
        CHECK(gpu.reachable == reach, "reachable %d, expected %d", gpu.reachable, reach);
        CHECK(gpu.mps == mps, "mps %d, expected %d", gpu.mps, mps);
        CHECK(strcmp(gpu.cls, cls) == 0, "class %s, expected %s", gpu.cls, cls);
        int distinct = 0;
        for (int r = 0; r < n; r++) {
            int q = 0;
            while (q < r && memcmp(gpu.uuid[q], gpu.uuid[r], 16) != 0) q++;
            distinct += q == r;
        }
        CHECK(distinct == gpus, "%d distinct GPUs, expected %d", distinct, gpus);
        /* Every rank of the node: the same verdict and the same GPU for each rank. */
        struct { int shared, reach, mps; char cls[HAR_CLASS_LEN]; unsigned char uuid[256][16]; } mine, first;
        memset(&mine, 0, sizeof mine);
        mine.shared = gpu.shared_gpu;
        mine.reach = gpu.reachable;
        mine.mps = gpu.mps;
        memcpy(mine.cls, gpu.cls, sizeof mine.cls);
        memcpy(mine.uuid, gpu.uuid, (size_t)(n < 256 ? n : 256) * 16);
        first = mine;
        MPI_Bcast(&first, (int)sizeof first, MPI_BYTE, 0, node);
        CHECK(memcmp(&first, &mine, sizeof mine) == 0, "local rank %d disagrees with local rank 0 (class %s, %s)", me,
              gpu.cls, first.cls);
        har_cuda_gpu_release(&gpu);
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("survey: %s: %d ranks in %d node(s), class %s, %d failed check(s)\n", all ? "FAIL" : "ok", size,
               nodes, found, all);
    if (node != MPI_COMM_WORLD) MPI_Comm_free(&node);
    MPI_Finalize();
    return all ? 1 : 0;
}
