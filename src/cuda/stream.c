/* Device-engine helpers (stream.h). */
#include <sched.h>
#include <cuda_runtime_api.h>
#include "core/log.h"
#include "cuda/mem.h"
#include "cuda/stream.h"

har_status_t har_gpu_check(int cuda_error, const char *what)
{
    if (cuda_error == cudaSuccess) return HAR_OK;
    har_note("%s: %s", what, cudaGetErrorString((cudaError_t)cuda_error));
    cudaGetLastError();
    return HAR_ERR_CUDA;
}

har_status_t har_gpu_enter(int device, har_gpu_scope_t *scope)
{
    int current = -1;
    scope->saved = har_cuda_context_save();
    scope->switched = 0;
    if (scope->saved && cudaGetDevice(&current) == cudaSuccess && current == device) return HAR_OK;
    scope->switched = 1;
    return har_gpu_check(cudaSetDevice(device), "making the buffers' GPU current");
}

void har_gpu_leave(const har_gpu_scope_t *scope)
{
    if (scope->switched) har_cuda_context_restore(scope->saved);
}

/* Waits for a stream, or for an event recorded on it. */
static har_status_t wait_for(cudaStream_t s, cudaEvent_t ev, har_node_t *node, const har_gpu_watch_t *watch,
                             const char *step)
{
    double started = har_seg_now();
    for (unsigned long i = 0;; i++) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(s);
        if (e == cudaSuccess) return HAR_OK;
        if (e != cudaErrorNotReady) return har_gpu_check(e, step);
        if (i < 4096) continue;  /* the common case: done within microseconds */
        sched_yield();
        if (i % 256) continue;
        har_status_t st = har_node_check(node, started, step);
        if (st == HAR_OK && watch->poll) st = watch->poll(watch->ctx);
        if (st != HAR_OK) {
            watch->stop(watch->ctx);
            cudaStreamSynchronize(s);
            cudaGetLastError();
            return st;
        }
    }
}

har_status_t har_gpu_wait(void *stream, har_node_t *node, const har_gpu_watch_t *watch, const char *step)
{
    return wait_for((cudaStream_t)stream, NULL, node, watch, step);
}

har_status_t har_gpu_wait_event(void *stream, void *event, har_node_t *node, const har_gpu_watch_t *watch,
                                const char *step)
{
    return wait_for((cudaStream_t)stream, (cudaEvent_t)event, node, watch, step);
}
