/* What the device engines share (built with the kernels): working on the
 * buffers' GPU, and waiting for a stream while watching the local peers. */
#ifndef HAR_STREAM_H
#define HAR_STREAM_H

#include "node/node.h"

/* The GPU an engine works on for one call, and what to put back. */
typedef struct {
    void *saved;        /* the thread's context before */
    int switched;
} har_cuda_scope_t;

/* Makes `device` current unless it is already (the arrival made sure its
 * context exists: har makes none). */
HAR_HIDDEN har_status_t har_cuda_enter(int device, har_cuda_scope_t *scope);
HAR_HIDDEN void har_cuda_leave(const har_cuda_scope_t *scope);

/* An engine's own way to notice trouble and to stop its work on the stream. */
typedef struct {
    har_status_t (*poll)(void *ctx);  /* HAR_OK while its work is healthy; may be NULL */
    void (*stop)(void *ctx);          /* makes the work on the stream end */
    void *ctx;
} har_cuda_watch_t;

/* Waits for `stream` (a cudaStream_t). Spins briefly, then yields and
 * checks the local peers' liveness, HAR_TIMEOUT and the engine's poll; on
 * trouble it stops the work, waits for the stream, and fails. */
HAR_HIDDEN har_status_t har_cuda_wait(void *stream, har_node_t *node, const har_cuda_watch_t *watch, const char *step);
/* The same for `event` (a cudaEvent_t recorded on `stream`). */
HAR_HIDDEN har_status_t har_cuda_wait_event(void *stream, void *event, har_node_t *node, const har_cuda_watch_t *watch,
                                            const char *step);
/* The same until `done(ctx)` returns 1 (flags a kernel on `stream` writes
 * to mapped host memory: no stream query on the common path). */
HAR_HIDDEN har_status_t har_cuda_wait_flags(void *stream, int (*done)(void *ctx), void *ctx, har_node_t *node,
                                            const har_cuda_watch_t *watch, const char *step);
/* Makes a non-blocking stream: the application's legacy default stream
 * never waits for har's kernels there, which may wait for the peers. With
 * a blocking stream a cudaMemcpy waited for every MPI_Iallreduce queued
 * before it, and so for peers that might reach that call only after their
 * own cudaMemcpy: ranks that queue calls on two communicators in
 * different orders (as MPI allows) waited for each other for ever. What a
 * blocking stream gave besides, that har's kernels read their input only
 * after the work the application queued there before the call (a
 * cudaMemcpy from pageable memory returns before its bytes land), is
 * har_cuda_mark_legacy's. */
HAR_HIDDEN har_status_t har_cuda_stream_create(void **stream);
/* Marks the work queued on the legacy default stream so far: an event
 * recorded there (`*event`, made on first need), which a stream then
 * follows (har_cuda_follow). Every call, with no query first: under MPS
 * a cudaStreamQuery cost more than the record and the wait together.
 * Recorded as the application calls, even where the launch comes later
 * (the launch thread): recorded then, it would also cover the
 * application's work queued after the call (its next layer's kernels). */
HAR_HIDDEN har_status_t har_cuda_mark_legacy(void **event);
/* `stream` waits for `event`'s last record. */
HAR_HIDDEN har_status_t har_cuda_follow(void *stream, void *event);
/* HAR_OK, or HAR_ERR_CUDA after logging what failed (and clearing a
 * non-sticky error: har leaves no error behind for the application). */
HAR_HIDDEN har_status_t har_cuda_status(int cuda_error, const char *what);

#endif
