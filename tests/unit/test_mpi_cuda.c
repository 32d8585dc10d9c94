/* What har concludes of an MPI's abilities with device memory, from the
 * answers real MPIs gave (recorded with their own MPI_Get_library_version,
 * MPIX_Query_cuda_support, MPIX_GPU_query_support and MPI_COMM_WORLD's
 * mpi_memory_alloc_kinds), from MPI 4.1's memory kinds, and under the
 * user's settings: the rule alone (har_cuda_mpi_decide), no MPI run. */
#include <string.h>
#include "cuda/mpi_cuda.h"
#include "unit.h"

static const char *const automatic[3] = {"auto", "auto", "auto"};

/* Checks one case: the three answers (1/0) and a word of each reason. */
static void expect(const char *name, const har_cuda_mpi_facts_t *f, const char *const settings[3], int p2p, int reduce,
                   int nonblocking, const char *why_p2p, const char *why_reduce, const char *why_nonblocking)
{
    har_cuda_mpi_t a;
    har_cuda_mpi_decide(f, settings, &a);
    CHECK(a.p2p.yes == p2p && strstr(a.p2p.why, why_p2p), "%s: point-to-point %d (%s)", name, a.p2p.yes, a.p2p.why);
    CHECK(a.reduce.yes == reduce && strstr(a.reduce.why, why_reduce), "%s: reduce %d (%s)", name, a.reduce.yes,
          a.reduce.why);
    CHECK(a.nonblocking.yes == nonblocking && strstr(a.nonblocking.why, why_nonblocking), "%s: non-blocking %d (%s)",
          name, a.nonblocking.yes, a.nonblocking.why);
}

int main(void)
{
    /* Recorded answers. */
    const har_cuda_mpi_facts_t debian_ompi = {"Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4", 0, -1, ""};
    const har_cuda_mpi_facts_t debian_mpich = {"MPICH Version:\t4.0.2", 0, 0, ""};
    const har_cuda_mpi_facts_t cuda_ompi = {"Open MPI v4.1.4, package: Open MPI root@vm Distribution, ident: 4.1.4", 1,
                                            -1, ""};
    const har_cuda_mpi_facts_t pip_ompi5 = {"Open MPI v5.0.11, package: Open MPI user@localhost Distribution", 0, -1,
                                            ""};
    expect("Debian's Open MPI 4.1.4", &debian_ompi, automatic, 0, 0, 0, "MPIX_Query_cuda_support() says 0",
           "says 0", "says 0");
    expect("Debian's MPICH 4.0.2", &debian_mpich, automatic, 0, 0, 0, "MPIX_Query_cuda_support() says 0", "says 0",
           "says 0");
    expect("Open MPI 4.1.4 built with CUDA and UCX (scripts/build-cuda-mpi)", &cuda_ompi, automatic, 1, 1, 0,
           "MPIX_Query_cuda_support() says 1", "recorded", "Open MPI's non-blocking collectives crash");
    expect("Open MPI 5.0.11 of the package index", &pip_ompi5, automatic, 0, 0, 0, "says 0", "says 0", "says 0");
    /* MPICH 5.0.2 lists its memory kinds (MPI 4.1), without CUDA's, also
     * when mpiexec is asked for cuda:device. */
    const har_cuda_mpi_facts_t pip_mpich5 = {"MPICH Version:      5.0.2", 0, 0, "mpi,system"};
    expect("MPICH 5.0.2 of the package index", &pip_mpich5, automatic, 0, 0, 0, "MPIX_Query_cuda_support() says 0",
           "says 0", "says 0");

    /* MPICH's own query alone, and no query at all. */
    const har_cuda_mpi_facts_t gpu_mpich = {"MPICH Version:\t4.2.0", -1, 1, ""};
    expect("an MPICH with GPU support", &gpu_mpich, automatic, 1, 1, 0, "MPIX_GPU_query_support(CUDA) says 1",
           "recorded", "no MPI's answer");
    const har_cuda_mpi_facts_t silent = {"Some MPI 1.0", -1, -1, ""};
    expect("an MPI with no query", &silent, automatic, 0, 0, 0, "no CUDA query", "no CUDA query", "no CUDA query");

    /* MPI 4.1's memory allocation kinds: CUDA device memory, listed, is
     * taken by every operation; other kinds say nothing of it. */
    const char *const kinds_yes[] = {"system,mpi,cuda:device", "mpi,cuda", "system, cuda:host:device", "cuda"};
    for (size_t i = 0; i < sizeof kinds_yes / sizeof *kinds_yes; i++) {
        har_cuda_mpi_facts_t f = silent;
        snprintf(f.alloc_kinds, sizeof f.alloc_kinds, "%s", kinds_yes[i]);
        expect(kinds_yes[i], &f, automatic, 1, 1, 1, "mpi_memory_alloc_kinds", "mpi_memory_alloc_kinds",
               "mpi_memory_alloc_kinds");
    }
    const char *const kinds_no[] = {"system,mpi", "system,mpi,cuda:host", "cudax", "rocm:device", "mpi,cuda:managed"};
    for (size_t i = 0; i < sizeof kinds_no / sizeof *kinds_no; i++) {
        har_cuda_mpi_facts_t f = debian_ompi;
        snprintf(f.alloc_kinds, sizeof f.alloc_kinds, "%s", kinds_no[i]);
        expect(kinds_no[i], &f, automatic, 0, 0, 0, "says 0", "says 0", "says 0");
    }

    /* The user's word wins, named, each setting on its own. */
    const char *const mixed[3] = {"0", "auto", "1"};
    expect("CUDA-aware Open MPI, HAR_MPI_CUDA_P2P=0 HAR_MPI_CUDA_NONBLOCKING=1", &cuda_ompi, mixed, 0, 1, 1,
           "HAR_MPI_CUDA_P2P=0", "recorded", "HAR_MPI_CUDA_NONBLOCKING=1");
    const char *const all_yes[3] = {"1", "1", "1"};
    expect("Debian's Open MPI, every setting 1", &debian_ompi, all_yes, 1, 1, 1, "HAR_MPI_CUDA_P2P=1",
           "HAR_MPI_CUDA_REDUCE=1", "HAR_MPI_CUDA_NONBLOCKING=1");

    printf("test_mpi_cuda: %s: %lu checks, %lu failed\n", failures ? "FAIL" : "ok", checks, failures);
    return failures != 0;
}
