/* The CUDA driver as the application loaded it: the memory kind of a
 * buffer, copies between kinds, contexts, waiting for a stream. (What the
 * MPI can do with device memory: mpi_cuda.h; host memory near a GPU:
 * host/numa.h; staging buffers: src/stage/.)
 *
 * har never links the CUDA driver: it binds a libcuda that the application
 * already loaded (RTLD_NOLOAD). A process that never touched CUDA cannot
 * own device memory, so it gets no CUDA call and no context from har, and
 * libhar loads on machines without CUDA libraries. */
#ifndef HAR_DRIVER_H
#define HAR_DRIVER_H

#include "core/status.h"
#include "core/types.h"

/* The kind of memory at p and, for device and managed memory, the GPU that
 * holds it (ordinal in this process's numbering; -1 for host memory). One
 * driver query. */
HAR_HIDDEN har_mem_kind_t har_cuda_mem_kind(const void *p, int *device);
/* Copies between any two kinds; HAR_OK or HAR_ERR_CUDA (logged). */
HAR_HIDDEN har_status_t har_cuda_copy(void *dst, har_mem_kind_t dst_kind, const void *src, har_mem_kind_t src_kind,
                                      size_t bytes);
/* Waits for the work queued on `stream` (a CUstream or cudaStream_t; NULL:
 * the legacy default stream); HAR_OK, or HAR_ERR_CUDA with a note. */
HAR_HIDDEN har_status_t har_cuda_stream_wait(void *stream);
/* Is `stream` being captured into a CUDA graph? */
HAR_HIDDEN int har_cuda_stream_capturing(void *stream);
/* Has the application loaded libcuda? (cheap when nothing new was loaded) */
HAR_HIDDEN int har_cuda_loaded(void);
/* Has the calling thread a current CUDA context? */
HAR_HIDDEN int har_cuda_context_current(void);
/* Can har work on this GPU without making a context: the thread's current
 * context is on it, or its primary context is active? */
HAR_HIDDEN int har_cuda_context_for(int device);
/* The ordinal of the GPU of the calling thread's current context; -1 if
 * it has none. */
HAR_HIDDEN int har_cuda_current_device(void);

/* The calling thread's current context, and putting it back: a device
 * engine that must work on another GPU than the application's current one
 * restores exactly what was current, none included. */
HAR_HIDDEN void *har_cuda_context_save(void);
HAR_HIDDEN void har_cuda_context_restore(void *ctx);

/* Multiprocessors the calling thread's current context may use (fewer
 * than the GPU has under an MPS limit), or -1 if the driver cannot say. */
HAR_HIDDEN int har_cuda_context_sms(void);

/* The driver calls the device survey needs, bound from the application's
 * libcuda (NULL members before it is loaded). */
#ifdef HAR_HAVE_CUDA
#include <cuda.h>
typedef struct {
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get_name)(char *, int, CUdevice);
    CUresult (*device_get_uuid)(CUuuid *, CUdevice);
    CUresult (*device_can_access_peer)(int *, CUdevice, CUdevice);
    CUresult (*device_get_pci_bus_id)(char *, int, CUdevice);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
} har_cuda_device_api_t;
/* NULL unless libcuda is loaded and has them all. */
HAR_HIDDEN const har_cuda_device_api_t *har_cuda_device_api(void);
#endif

#endif
