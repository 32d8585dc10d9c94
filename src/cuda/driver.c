/* The application's libcuda, bound by har: memory kinds, copies, contexts,
 * streams (driver.h). */
#define _GNU_SOURCE  /* dl_iterate_phdr's dlpi_adds */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/log.h"
#include "cuda/driver.h"

#ifdef HAR_HAVE_CUDA
#include <cuda.h>

static struct {
    int loaded;
    CUresult (*pointer_get_attribute)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*pointer_get_attributes)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*ctx_push)(CUcontext);
    CUresult (*ctx_pop)(CUcontext *);
    CUresult (*primary_ctx_get_state)(CUdevice, unsigned int *, int *);
    CUresult (*memcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus *);  /* CUDA 10 on; may be NULL */
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*ctx_get_exec_affinity)(CUexecAffinityParam *, CUexecAffinityType);  /* CUDA 11.4 on; may be NULL */
    har_cuda_device_api_t dev;
} cu;
static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;

/* The loader's count of objects loaded so far: a cheap way to know that
 * nothing new (libcuda among others) was loaded since the last look. */
static int count_adds(struct dl_phdr_info *info, size_t size, void *adds)
{
    (void)size;
    *(unsigned long long *)adds = info->dlpi_adds;
    return 1;  /* the counter is the same in every entry: stop at the first */
}

/* Binds the driver entry points if the application has loaded libcuda.
 * The loader's count is recorded only once an attempt has finished, under
 * the lock: a thread that arrives while another binds waits for it instead
 * of taking the count as "looked already, no CUDA" (it would then hand a
 * device pointer to the MPI as host memory). */
static int cuda_bind(void)
{
    static unsigned long long tried_adds = ~0ull;  /* the count at the last finished attempt */
    if (__atomic_load_n(&cu.loaded, __ATOMIC_ACQUIRE)) return 1;
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    /* an attempt that finished since the first look may have bound it */
    if (adds == __atomic_load_n(&tried_adds, __ATOMIC_ACQUIRE)) return __atomic_load_n(&cu.loaded, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&cu_lock);
    void *lib = cu.loaded || adds == tried_adds ? NULL : dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (lib) {
        *(void **)&cu.pointer_get_attribute = dlsym(lib, "cuPointerGetAttribute");
        *(void **)&cu.pointer_get_attributes = dlsym(lib, "cuPointerGetAttributes");
        *(void **)&cu.ctx_get_current = dlsym(lib, "cuCtxGetCurrent");
        *(void **)&cu.ctx_get_device = dlsym(lib, "cuCtxGetDevice");
        *(void **)&cu.ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
        *(void **)&cu.ctx_push = dlsym(lib, "cuCtxPushCurrent_v2");
        *(void **)&cu.ctx_pop = dlsym(lib, "cuCtxPopCurrent_v2");
        *(void **)&cu.primary_ctx_get_state = dlsym(lib, "cuDevicePrimaryCtxGetState");
        *(void **)&cu.memcpy = dlsym(lib, "cuMemcpy");
        *(void **)&cu.stream_synchronize = dlsym(lib, "cuStreamSynchronize");
        *(void **)&cu.get_error_string = dlsym(lib, "cuGetErrorString");
        *(void **)&cu.stream_is_capturing = dlsym(lib, "cuStreamIsCapturing");
        *(void **)&cu.dev.device_get = dlsym(lib, "cuDeviceGet");
        *(void **)&cu.dev.device_get_count = dlsym(lib, "cuDeviceGetCount");
        *(void **)&cu.dev.device_get_name = dlsym(lib, "cuDeviceGetName");
        *(void **)&cu.dev.device_get_uuid = dlsym(lib, "cuDeviceGetUuid_v2");
        *(void **)&cu.dev.device_can_access_peer = dlsym(lib, "cuDeviceCanAccessPeer");
        *(void **)&cu.dev.device_get_pci_bus_id = dlsym(lib, "cuDeviceGetPCIBusId");
        *(void **)&cu.dev.device_get_attribute = dlsym(lib, "cuDeviceGetAttribute");
        *(void **)&cu.ctx_get_exec_affinity = dlsym(lib, "cuCtxGetExecAffinity");
        int ok = cu.pointer_get_attribute && cu.pointer_get_attributes && cu.ctx_get_current && cu.ctx_get_device && cu.ctx_set_current &&
                 cu.ctx_push && cu.ctx_pop && cu.primary_ctx_get_state && cu.memcpy && cu.stream_synchronize && cu.get_error_string &&
                 cu.dev.device_get && cu.dev.device_get_count && cu.dev.device_get_name && cu.dev.device_get_uuid &&
                 cu.dev.device_can_access_peer && cu.dev.device_get_pci_bus_id && cu.dev.device_get_attribute;
        if (ok) __atomic_store_n(&cu.loaded, 1, __ATOMIC_RELEASE);
        else har_log(HAR_LOG_WARN, "libcuda is loaded but lacks the driver calls har needs");
        dlclose(lib);  /* drops only our reference: the application's keeps it loaded */
    }
    __atomic_store_n(&tried_adds, adds, __ATOMIC_RELEASE);
    int loaded = cu.loaded;
    pthread_mutex_unlock(&cu_lock);
    return loaded;
}

har_mem_kind_t har_cuda_mem_kind(const void *p, int *device)
{
    unsigned int type = 0;
    int managed = 0, ordinal = -1;
    *device = -1;
    if (!p || p == MPI_IN_PLACE || !cuda_bind()) return HAR_MEM_HOST;
    /* The plural query answers "unknown" (type 0) for memory CUDA does not
     * know, instead of failing: ordinary host memory raises no CUDA error. */
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *values[3] = {&type, &managed, &ordinal};
    if (cu.pointer_get_attributes(3, attrs, values, (CUdeviceptr)p) != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE)
        return HAR_MEM_HOST;
    *device = ordinal;
    return managed ? HAR_MEM_MANAGED : HAR_MEM_DEVICE;
}

int har_cuda_loaded(void) { return cuda_bind(); }

int har_cuda_context_current(void)
{
    CUcontext ctx = NULL;
    return cuda_bind() && cu.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx != NULL;
}

int har_cuda_context_for(int device)
{
    CUcontext ctx = NULL;
    CUdevice cur = -1, dev = -1;
    unsigned int flags = 0;
    int active = 0;
    if (!cuda_bind() || device < 0) return 0;
    if (cu.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx && cu.ctx_get_device(&cur) == CUDA_SUCCESS &&
        cu.dev.device_get(&dev, device) == CUDA_SUCCESS && cur == dev)
        return 1;
    return cu.dev.device_get(&dev, device) == CUDA_SUCCESS &&
           cu.primary_ctx_get_state(dev, &flags, &active) == CUDA_SUCCESS && active;
}

int har_cuda_current_device(void)
{
    CUcontext ctx = NULL;
    CUdevice cur = -1, dev = -1;
    if (!cuda_bind() || cu.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx || cu.ctx_get_device(&cur) != CUDA_SUCCESS)
        return -1;
    for (int ordinal = 0; cu.dev.device_get(&dev, ordinal) == CUDA_SUCCESS; ordinal++)
        if (dev == cur) return ordinal;
    return -1;
}

void *har_cuda_context_save(void)
{
    CUcontext ctx = NULL;
    if (cuda_bind()) cu.ctx_get_current(&ctx);
    return ctx;
}

void har_cuda_context_restore(void *ctx)
{
    if (cuda_bind()) cu.ctx_set_current((CUcontext)ctx);
}

const har_cuda_device_api_t *har_cuda_device_api(void) { return cuda_bind() ? &cu.dev : NULL; }

int har_cuda_context_sms(void)
{
    CUexecAffinityParam aff;
    if (!cuda_bind() || !cu.ctx_get_exec_affinity ||
        cu.ctx_get_exec_affinity(&aff, CU_EXEC_AFFINITY_TYPE_SM_COUNT) != CUDA_SUCCESS)
        return -1;
    return (int)aff.param.smCount.val;
}

har_status_t har_cuda_copy(void *dst, har_mem_kind_t dst_kind, const void *src, har_mem_kind_t src_kind, size_t bytes)
{
    if (bytes == 0) return HAR_OK;
    if (dst_kind == HAR_MEM_HOST && src_kind == HAR_MEM_HOST) {
        memcpy(dst, src, bytes);
        return HAR_OK;
    }
    /* cuMemcpy needs a current context; borrow the buffer's own if the
     * calling thread has none, and put things back as they were. */
    CUcontext cur = NULL, owner = NULL;
    cu.ctx_get_current(&cur);
    if (!cur) {
        const void *dev = dst_kind != HAR_MEM_HOST ? dst : src;
        cu.pointer_get_attribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)dev);
        if (owner) cu.ctx_push(owner);
    }
    CUresult r = cu.memcpy((CUdeviceptr)dst, (CUdeviceptr)src, bytes);
    /* Into device memory cuMemcpy may return before the bytes land (from
     * pageable host memory, or from device memory): wait for them, since
     * the caller may hand the buffer to work that does not follow the
     * legacy default stream the copy went on (a result har returns, which
     * the application reads on a non-blocking stream). */
    if (r == CUDA_SUCCESS && dst_kind != HAR_MEM_HOST) r = cu.stream_synchronize(CU_STREAM_LEGACY);
    if (owner) cu.ctx_pop(&owner);
    if (r != CUDA_SUCCESS) {
        const char *msg = "unknown";
        cu.get_error_string(r, &msg);
        har_note("cuMemcpy of %zu bytes failed: %s", bytes, msg);
        return HAR_ERR_CUDA;
    }
    return HAR_OK;
}

har_status_t har_cuda_stream_wait(void *stream)
{
    if (!cuda_bind()) return HAR_OK;  /* no CUDA in the process: no stream to wait for */
    CUresult r = cu.stream_synchronize((CUstream)stream);
    if (r == CUDA_SUCCESS) return HAR_OK;
    const char *msg = "unknown";
    cu.get_error_string(r, &msg);
    har_note("cuStreamSynchronize: %s", msg);
    return HAR_ERR_CUDA;
}

int har_cuda_stream_capturing(void *stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return cuda_bind() && cu.stream_is_capturing && cu.stream_is_capturing((CUstream)stream, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}
#else
har_mem_kind_t har_cuda_mem_kind(const void *p, int *device)
{
    (void)p;
    *device = -1;
    return HAR_MEM_HOST;
}
int har_cuda_loaded(void) { return 0; }
int har_cuda_context_current(void) { return 0; }
int har_cuda_context_for(int device) { (void)device; return 0; }
int har_cuda_current_device(void) { return -1; }
int har_cuda_context_sms(void) { return -1; }
void *har_cuda_context_save(void) { return NULL; }
void har_cuda_context_restore(void *ctx) { (void)ctx; }
har_status_t har_cuda_copy(void *dst, har_mem_kind_t dst_kind, const void *src, har_mem_kind_t src_kind, size_t bytes)
{
    (void)dst_kind; (void)src_kind;
    if (bytes) memcpy(dst, src, bytes);
    return HAR_OK;
}
har_status_t har_cuda_stream_wait(void *stream) { (void)stream; return HAR_OK; }
int har_cuda_stream_capturing(void *stream) { (void)stream; return 0; }
#endif
