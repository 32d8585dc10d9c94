/* What the MPI underneath can do with device memory (mpi_cuda.h). */
#include <dlfcn.h>
#include <string.h>
#include "core/config.h"
#include "cuda/mpi_cuda.h"

static int mpi_p2p = -1, mpi_reduce = -1, mpi_nonblocking = -1;

/* The MPI's own answer, looked up at run time: the query functions differ
 * between MPIs and releases, and linking one would tie libhar to it. */
static int mpi_query_cuda(void)
{
    int (*ompi_query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    if (ompi_query) return ompi_query() != 0;
    int (*mpich_query)(int, int *) = (int (*)(int, int *))dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support");
    int supported = 0;
    if (mpich_query && mpich_query(0 /* MPIX_GPU_SUPPORT_CUDA */, &supported) == MPI_SUCCESS)
        return supported != 0;
    return 0;
}

static int with_override(const char *setting, int detected)
{
    if (strcmp(setting, "0") == 0) return 0;
    if (strcmp(setting, "1") == 0) return 1;
    return detected;
}

void har_mpi_cuda_init(void)
{
    int detected = mpi_query_cuda();
    /* Both MPIs that answer the query stage or reduce device buffers inside
     * their collectives once they can move them, so one answer covers both
     * capabilities unless the user says otherwise. */
    mpi_p2p = with_override(HAR_CFG(mpi_cuda_p2p).s, detected);
    mpi_reduce = with_override(HAR_CFG(mpi_cuda_reduce).s, detected);
    /* Even CUDA-aware Open MPI 4.1 crashes on device memory in
     * MPI_Iallreduce: only the user's word says an MPI can. */
    mpi_nonblocking = with_override(HAR_CFG(mpi_cuda_nonblocking).s, 0);
}

int har_mpi_cuda_p2p(void) { return mpi_p2p; }
int har_mpi_cuda_reduce(void) { return mpi_reduce; }
int har_mpi_cuda_nonblocking(void) { return mpi_nonblocking; }
