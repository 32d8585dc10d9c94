/* What the MPI underneath can do with device memory (mpi_cuda.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "core/config.h"
#include "cuda/mpi_cuda.h"

static har_cuda_mpi_facts_t facts = {"", -1, -1, ""};
static har_cuda_mpi_t answers;

/* Does a list of memory allocation kinds ("system,mpi,cuda:device,...")
 * hold CUDA device memory: "cuda" with no restrictor, or with "device"? */
static int kinds_hold_cuda_device(const char *kinds)
{
    char list[sizeof facts.alloc_kinds], *save = NULL;
    snprintf(list, sizeof list, "%s", kinds);
    for (char *kind = strtok_r(list, ", ", &save); kind; kind = strtok_r(NULL, ", ", &save))
        if (strcmp(kind, "cuda") == 0 || (strncmp(kind, "cuda:", 5) == 0 && strstr(kind + 5, "device"))) return 1;
    return 0;
}

static void answer(har_cuda_mpi_answer_t *a, int yes, const char *why)
{
    a->yes = yes;
    snprintf(a->why, sizeof a->why, "%s", why);
}

/* The user's word over the MPI's: "0" or "1" wins, named. */
static void override(har_cuda_mpi_answer_t *a, const char *setting, const char *name)
{
    if (strcmp(setting, "0") != 0 && strcmp(setting, "1") != 0) return;
    a->yes = setting[0] == '1';
    snprintf(a->why, sizeof a->why, "%s=%s, your setting", name, setting);
}

void har_cuda_mpi_decide(const har_cuda_mpi_facts_t *f, const char *const settings[3], har_cuda_mpi_t *out)
{
    int open_mpi = strncmp(f->library, "Open MPI", 8) == 0;
    char why[160];
    memset(out, 0, sizeof *out);
    if (kinds_hold_cuda_device(f->alloc_kinds)) {
        /* MPI 4.1: a kind listed there is taken by every operation. */
        snprintf(why, sizeof why, "MPI_COMM_WORLD's mpi_memory_alloc_kinds lists CUDA device memory (%.60s)",
                 f->alloc_kinds);
        answer(&out->p2p, 1, why);
        answer(&out->reduce, 1, why);
        answer(&out->nonblocking, 1, why);
    } else {
        if (f->cuda_query == 1)
            answer(&out->p2p, 1, "MPIX_Query_cuda_support() says 1");
        else if (f->gpu_query == 1)
            answer(&out->p2p, 1, "MPIX_GPU_query_support(CUDA) says 1");
        else if (f->cuda_query == 0)
            answer(&out->p2p, 0, "MPIX_Query_cuda_support() says 0");
        else if (f->gpu_query == 0)
            answer(&out->p2p, 0, "MPIX_GPU_query_support(CUDA) says 0");
        else
            answer(&out->p2p, 0, "the MPI has no CUDA query and lists no CUDA memory kind");
        /* No API says whether the collectives reduce device memory. Open
         * MPI built with CUDA stages it through the host in its blocking
         * collectives (coll/cuda), MPICH built with GPU support reduces it
         * (yaksa): an MPI that moves device memory is taken to reduce it. */
        if (out->p2p.yes)
            answer(&out->reduce, 1, "recorded: an MPI that moves device memory reduces it in its blocking collectives");
        else
            answer(&out->reduce, 0, out->p2p.why);
        /* Non-blocking ones are another matter: CUDA-aware Open MPI 4.1
         * and 5.0 reduce on the host in libnbc and crash on device
         * buffers; nothing tells of any MPI that they are safe. */
        if (out->p2p.yes && open_mpi)
            answer(&out->nonblocking, 0, "recorded: Open MPI's non-blocking collectives crash on device buffers");
        else if (out->p2p.yes)
            answer(&out->nonblocking, 0, "no MPI's answer covers its non-blocking collectives");
        else
            answer(&out->nonblocking, 0, out->p2p.why);
    }
    override(&out->p2p, settings[0], "HAR_MPI_CUDA_P2P");
    override(&out->reduce, settings[1], "HAR_MPI_CUDA_REDUCE");
    override(&out->nonblocking, settings[2], "HAR_MPI_CUDA_NONBLOCKING");
}

/* The MPI's own answers, looked up at run time: the query functions differ
 * between MPIs and releases, and linking one would tie libhar to it. */
static void gather(har_cuda_mpi_facts_t *f)
{
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (PMPI_Get_library_version(text, &len) == MPI_SUCCESS) {
        text[strcspn(text, "\r\n")] = '\0';
        snprintf(f->library, sizeof f->library, "%s", text);
    }
    int (*cuda_query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    f->cuda_query = cuda_query ? cuda_query() != 0 : -1;
    int (*gpu_query)(int, int *) = (int (*)(int, int *))dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support");
    int supported = 0;
    f->gpu_query = -1;
    if (gpu_query && gpu_query(0 /* MPIX_GPU_SUPPORT_CUDA */, &supported) == MPI_SUCCESS) f->gpu_query = supported != 0;
    MPI_Info info = MPI_INFO_NULL;
    int flag = 0;
    f->alloc_kinds[0] = '\0';
    if (PMPI_Comm_get_info(MPI_COMM_WORLD, &info) != MPI_SUCCESS || info == MPI_INFO_NULL) return;
#if MPI_VERSION >= 4
    int size = (int)sizeof f->alloc_kinds;
    PMPI_Info_get_string(info, "mpi_memory_alloc_kinds", &size, f->alloc_kinds, &flag);
#else
    PMPI_Info_get(info, "mpi_memory_alloc_kinds", (int)sizeof f->alloc_kinds - 1, f->alloc_kinds, &flag);
#endif
    if (!flag) f->alloc_kinds[0] = '\0';
    PMPI_Info_free(&info);
}

void har_cuda_mpi_init(void)
{
    gather(&facts);
    const char *settings[3] = {HAR_CFG(mpi_cuda_p2p).s, HAR_CFG(mpi_cuda_reduce).s, HAR_CFG(mpi_cuda_nonblocking).s};
    har_cuda_mpi_decide(&facts, settings, &answers);
}

const har_cuda_mpi_facts_t *har_cuda_mpi_facts(void) { return &facts; }
const har_cuda_mpi_t *har_cuda_mpi(void) { return &answers; }
int har_cuda_mpi_p2p(void) { return answers.p2p.yes; }
int har_cuda_mpi_reduce(void) { return answers.reduce.yes; }
int har_cuda_mpi_nonblocking(void) { return answers.nonblocking.yes; }
