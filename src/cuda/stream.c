/* Device-engine helpers (stream.h). */
#include <cuda_runtime_api.h>
#include "core/fiber.h"
#include "core/log.h"
#include "cuda/driver.h"
#include "cuda/stream.h"

har_status_t har_cuda_status(int cuda_error, const char *what)
{
    if (cuda_error == cudaSuccess) return HAR_OK;
    har_note("%s: %s", what, cudaGetErrorString((cudaError_t)cuda_error));
    cudaGetLastError();
    return HAR_ERR_CUDA;
}

har_status_t har_cuda_enter(int device, har_cuda_scope_t *scope)
{
    int current = -1;
    scope->saved = har_cuda_context_save();
    scope->switched = 0;
    if (scope->saved && cudaGetDevice(&current) == cudaSuccess && current == device) return HAR_OK;
    scope->switched = 1;
    return har_cuda_status(cudaSetDevice(device), "making the buffers' GPU current");
}

void har_cuda_leave(const har_cuda_scope_t *scope)
{
    if (scope->switched) har_cuda_context_restore(scope->saved);
}

har_status_t har_cuda_stream_create(void **stream)
{
    return har_cuda_status(cudaStreamCreateWithFlags((cudaStream_t *)stream, cudaStreamNonBlocking),
                           "cudaStreamCreate");
}

har_status_t har_cuda_mark_legacy(void **event)
{
    har_status_t st = HAR_OK;
    if (!*event) st = har_cuda_status(cudaEventCreateWithFlags((cudaEvent_t *)event, cudaEventDisableTiming), "event");
    return st == HAR_OK ? har_cuda_status(cudaEventRecord((cudaEvent_t)*event, cudaStreamLegacy),
                                          "cudaEventRecord (legacy stream)")
                        : st;
}

har_status_t har_cuda_follow(void *stream, void *event)
{
    return har_cuda_status(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0), "cudaStreamWaitEvent");
}

/* How often a wait looks past its own condition: a faulted kernel (the
 * stream), the node (dead peers, HAR_TIMEOUT) and the call's watch. Not on
 * every pass past the spins: where ranks share a GPU under MPS, the server
 * answers cudaStreamQuery for one rank at a time (4.5 us a query with 4
 * ranks, 8.5 with 8: DESIGN.md note 57), and the peers' launches wait
 * behind it, so a query in a call that outlasts the spins slows the
 * call it waits for (DESIGN.md note 69). */
#define WAIT_CHECK_EVERY 1e-3

/* Waits until `done` says so (1; a negative cudaError_t fails). Spins
 * first: the common case ends within microseconds. */
static har_status_t wait_until(int (*done)(void *ctx), void *ctx, cudaStream_t s, har_node_t *node,
                               const har_cuda_watch_t *watch, const char *step)
{
    double started = har_node_seg_now(), checked = started;
    int fiber = har_fiber_inside();  /* gives the thread back at once (core/fiber.h) */
    for (unsigned long i = 0;; i++) {
        int r = done(ctx);
        if (r > 0) return HAR_OK;
        if (r < 0) return har_cuda_status(-r, step);
        if (i < 4096 && !fiber) continue;
        struct timespec nap = {0, 20000};  /* in a fiber: the core goes to the peers after HAR_FIBER_PASSES */
        har_fiber_pause(fiber && i >= HAR_FIBER_PASSES ? &nap : NULL);
        if (i % (fiber ? HAR_FIBER_PASSES : 256)) continue;
        double now = har_node_seg_now();
        if (now - checked < WAIT_CHECK_EVERY) continue;
        checked = now;
        /* A kernel that faulted never writes its flags: the stream says so. */
        cudaError_t e = cudaStreamQuery(s);
        if (e != cudaSuccess && e != cudaErrorNotReady) return har_cuda_status(e, step);
        har_status_t st = har_node_poll(node, started, step);
        if (st == HAR_OK && watch->poll) st = watch->poll(watch->ctx);
        if (st != HAR_OK) {
            watch->stop(watch->ctx);
            cudaStreamSynchronize(s);
            cudaGetLastError();
            return st;
        }
    }
}

static int cuda_done(cudaError_t e) { return e == cudaSuccess ? 1 : e == cudaErrorNotReady ? 0 : -(int)e; }
static int stream_done(void *s) { return cuda_done(cudaStreamQuery((cudaStream_t)s)); }
static int event_done(void *ev) { return cuda_done(cudaEventQuery((cudaEvent_t)ev)); }

har_status_t har_cuda_wait(void *stream, har_node_t *node, const har_cuda_watch_t *watch, const char *step)
{
    return wait_until(stream_done, stream, (cudaStream_t)stream, node, watch, step);
}

har_status_t har_cuda_wait_event(void *stream, void *event, har_node_t *node, const har_cuda_watch_t *watch,
                                 const char *step)
{
    return wait_until(event_done, event, (cudaStream_t)stream, node, watch, step);
}

har_status_t har_cuda_wait_flags(void *stream, int (*done)(void *ctx), void *ctx, har_node_t *node,
                                 const har_cuda_watch_t *watch, const char *step)
{
    return wait_until(done, ctx, (cudaStream_t)stream, node, watch, step);
}
