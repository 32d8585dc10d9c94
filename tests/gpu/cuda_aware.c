/* Test shim, preloaded under har: stands in for an MPI that moves device
 * memory in point-to-point calls and reduces it in MPI_Iallreduce (none of
 * the MPIs on the test machines does). Device buffers given to PMPI_Isend,
 * PMPI_Irecv and PMPI_Iallreduce go through host copies made here; a
 * result's copy lands on the device when PMPI_Testall (har's own way to
 * complete them), PMPI_Test or PMPI_Wait (an application's request the MPI
 * serves) finds it done. With HAR_MPI_CUDA_P2P=1 har's ring then
 * hands device pointers to "the MPI", and with HAR_MPI_CUDA_NONBLOCKING=1
 * HAR_INTER=mpi does; the shim counts them, and says how many at exit, so
 * a test can tell that the step between nodes got device memory and made
 * no host copy of its own. The copies run on a
 * stream of the shim's and are waited for: a plain cudaMemcpy from pageable
 * memory may return before its bytes land, and the legacy stream it uses
 * does not order work on har's non-blocking streams after it; an MPI that
 * moves device memory has its data in place when a request completes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <mpi.h>

#define MAX_STAGED 256
#define BY_STATUS SIZE_MAX

static struct {
    MPI_Request req;
    void *host;        /* the shim's copy, freed at completion; NULL: the entry is free */
    const void *from;  /* in it, what goes to dev at completion */
    void *dev;         /* a receive's or a reduction's destination; NULL for a send */
    size_t bytes;      /* a reduction's result; BY_STATUS: a receive's, from its status */
} staged[MAX_STAGED];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long device_sends, device_recvs, device_allreduces;

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
static void remember(MPI_Request req, void *host, const void *from, void *dev, size_t bytes)
{
    int i;
    pthread_mutex_lock(&lock);
    for (i = 0; i < MAX_STAGED && staged[i].host; i++) continue;
    if (i < MAX_STAGED) {
        staged[i].req = req;
        staged[i].host = host;
        staged[i].from = from;
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
    if (rc == MPI_SUCCESS) remember(*req, host, NULL, NULL, bytes);
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
    if (rc == MPI_SUCCESS) remember(*req, host, host, buf, BY_STATUS);
    __atomic_fetch_add(&device_recvs, 1, __ATOMIC_RELAXED);
    return rc;
}

/* A reduction of device memory, in host copies: the input (the result's
 * buffer in place) copied here, the result to the device at completion. */
int PMPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                    MPI_Request *req)
{
    static int (*real)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Iallreduce");
    int in_place = sbuf == MPI_IN_PLACE, sdev = !in_place && on_device(sbuf), rdev = on_device(rbuf);
    if (!sdev && !rdev) return real(sbuf, rbuf, count, type, op, comm, req);
    size_t bytes = bytes_of(count, type);
    char *host = malloc(2 * bytes + 1);  /* the input's copy, then the result's */
    if (!host) return MPI_ERR_OTHER;
    const void *in = sbuf;
    if ((in_place && copy(host, rbuf, bytes, cudaMemcpyDeviceToHost) != 0) ||
        (sdev && copy(host, sbuf, bytes, cudaMemcpyDeviceToHost) != 0)) {
        free(host);
        return MPI_ERR_OTHER;
    }
    if (sdev) in = host;
    char *out = rdev ? (in_place ? host : host + bytes) : rbuf;
    int rc = real(in_place ? MPI_IN_PLACE : in, out, count, type, op, comm, req);
    if (rc == MPI_SUCCESS) remember(*req, host, out, rdev ? rbuf : NULL, bytes);
    else free(host);
    __atomic_fetch_add(&device_allreduces, 1, __ATOMIC_RELAXED);
    return rc;
}

/* Completed staged requests: a receive's or a reduction's bytes go to the
 * device. */
static void finish(const MPI_Request *before, const MPI_Request *after, const MPI_Status *status, int n)
{
    pthread_mutex_lock(&lock);
    for (int k = 0; k < n; k++) {
        if (before[k] == MPI_REQUEST_NULL || after[k] != MPI_REQUEST_NULL) continue;
        for (int i = 0; i < MAX_STAGED; i++) {
            if (!staged[i].host || staged[i].req != before[k]) continue;
            if (staged[i].dev) {
                size_t bytes = staged[i].bytes;
                int got = 0;
                if (bytes == BY_STATUS) PMPI_Get_count(&status[k], MPI_BYTE, &got), bytes = (size_t)got;
                copy(staged[i].dev, staged[i].from, bytes, cudaMemcpyHostToDevice);
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

int PMPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    static int (*real)(MPI_Request *, int *, MPI_Status *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Test");
    MPI_Request before = *req;
    MPI_Status mine;
    int rc = real(req, flag, &mine);
    if (rc == MPI_SUCCESS && *flag) finish(&before, req, &mine, 1);
    if (status != MPI_STATUS_IGNORE) *status = mine;
    return rc;
}

int PMPI_Wait(MPI_Request *req, MPI_Status *status)
{
    static int (*real)(MPI_Request *, MPI_Status *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Wait");
    MPI_Request before = *req;
    MPI_Status mine;
    int rc = real(req, &mine);
    if (rc == MPI_SUCCESS) finish(&before, req, &mine, 1);
    if (status != MPI_STATUS_IGNORE) *status = mine;
    return rc;
}

__attribute__((destructor)) static void say(void)
{
    if (device_sends || device_recvs || device_allreduces)
        fprintf(stderr, "cuda_aware shim: %llu device sends, %llu device receives, %llu device all-reduces\n",
                device_sends, device_recvs, device_allreduces);
}
