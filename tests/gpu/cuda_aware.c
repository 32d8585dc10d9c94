/* Test shim, preloaded under har: stands in for an MPI that moves device
 * memory in point-to-point calls (none of the MPIs on the test machines
 * does). Device buffers given to PMPI_Isend and PMPI_Irecv go through host
 * copies made here; a receive's copy lands on the device when PMPI_Testall
 * (har's only way to complete them) finds it done. With HAR_MPI_CUDA_P2P=1
 * har's ring then hands device pointers to "the MPI"; the shim counts
 * them, and says how many at exit, so a test can tell that the ring got
 * device memory and made no host copy of its own. The copies run on a
 * stream of the shim's and are waited for: a plain cudaMemcpy from pageable
 * memory may return before its bytes land, and the legacy stream it uses
 * does not order work on har's non-blocking streams after it; an MPI that
 * moves device memory has its data in place when a request completes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <mpi.h>

#define MAX_STAGED 256

static struct {
    MPI_Request req;  /* MPI_REQUEST_NULL: free */
    void *host, *dev;  /* dev: a receive's destination; NULL for a send */
    size_t bytes;
} staged[MAX_STAGED];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long device_sends, device_recvs;

/* Copies between a device buffer and a host one, done when it returns. */
static cudaStream_t stream;
static void make_stream(void) { cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); }

static int copy(void *to, const void *from, size_t bytes, enum cudaMemcpyKind kind)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_stream);
    if (cudaMemcpyAsync(to, from, bytes, kind, stream) != cudaSuccess) return -1;
    return cudaStreamSynchronize(stream) == cudaSuccess ? 0 : -1;
}

static int on_device(const void *p)
{
    struct cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

/* A staged request that could not be remembered would never get its
 * bytes: the shim stops the test rather than let it pass on wrong data. */
static void remember(MPI_Request req, void *host, void *dev, size_t bytes)
{
    int i;
    pthread_mutex_lock(&lock);
    for (i = 0; i < MAX_STAGED && staged[i].host; i++) continue;
    if (i < MAX_STAGED) {
        staged[i].req = req;
        staged[i].host = host;
        staged[i].dev = dev;
        staged[i].bytes = bytes;
    }
    pthread_mutex_unlock(&lock);
    if (i == MAX_STAGED) {
        fprintf(stderr, "cuda_aware shim: more than %d staged requests in flight\n", MAX_STAGED);
        abort();
    }
}

static size_t bytes_of(int count, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    return (size_t)count * (size_t)size;
}

int PMPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    static int (*real)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Isend");
    if (!on_device(buf)) return real(buf, count, type, dest, tag, comm, req);
    size_t bytes = bytes_of(count, type);
    void *host = malloc(bytes ? bytes : 1);
    if (!host || copy(host, buf, bytes, cudaMemcpyDeviceToHost) != 0) return MPI_ERR_OTHER;
    int rc = real(host, count, type, dest, tag, comm, req);
    if (rc == MPI_SUCCESS) remember(*req, host, NULL, bytes);
    __atomic_fetch_add(&device_sends, 1, __ATOMIC_RELAXED);
    return rc;
}

int PMPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req)
{
    static int (*real)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Irecv");
    if (!on_device(buf)) return real(buf, count, type, src, tag, comm, req);
    size_t bytes = bytes_of(count, type);
    void *host = malloc(bytes ? bytes : 1);
    if (!host) return MPI_ERR_OTHER;
    int rc = real(host, count, type, src, tag, comm, req);
    if (rc == MPI_SUCCESS) remember(*req, host, buf, bytes);
    __atomic_fetch_add(&device_recvs, 1, __ATOMIC_RELAXED);
    return rc;
}

/* Completed staged requests: a receive's bytes go to the device. */
static void finish(const MPI_Request *before, const MPI_Request *after, const MPI_Status *status, int n)
{
    pthread_mutex_lock(&lock);
    for (int k = 0; k < n; k++) {
        if (before[k] == MPI_REQUEST_NULL || after[k] != MPI_REQUEST_NULL) continue;
        for (int i = 0; i < MAX_STAGED; i++) {
            if (!staged[i].host || staged[i].req != before[k]) continue;
            if (staged[i].dev) {
                int got = 0;
                PMPI_Get_count(&status[k], MPI_BYTE, &got);
                copy(staged[i].dev, staged[i].host, (size_t)got, cudaMemcpyHostToDevice);
            }
            free(staged[i].host);
            staged[i].host = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

int PMPI_Testall(int n, MPI_Request *reqs, int *flag, MPI_Status *statuses)
{
    static int (*real)(int, MPI_Request *, int *, MPI_Status *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Testall");
    MPI_Request stack_reqs[64], *before = n <= 64 ? stack_reqs : malloc((size_t)n * sizeof *before);
    MPI_Status stack_st[64], *mine = n <= 64 ? stack_st : malloc((size_t)n * sizeof *mine);
    if (!before || !mine) abort();
    memcpy(before, reqs, (size_t)n * sizeof *reqs);
    int rc = real(n, reqs, flag, mine);
    if (rc == MPI_SUCCESS && *flag) finish(before, reqs, mine, n);
    if (statuses != MPI_STATUSES_IGNORE) memcpy(statuses, mine, (size_t)n * sizeof *mine);
    if (n > 64) {
        free(before);
        free(mine);
    }
    return rc;
}

__attribute__((destructor)) static void say(void)
{
    if (device_sends || device_recvs)
        fprintf(stderr, "cuda_aware shim: %llu device sends, %llu device receives\n", device_sends, device_recvs);
}
