/* What an engine is: one descriptor, the narrow interface between the call
 * driver (comm/call.c) and each engine's folder. Everything about an engine
 * that the plan, the counters, HAR_ALGO, HAR_REQUIRE_PATH, har-bench,
 * har-info and the tests need is in it or in its line of paths.h's
 * HAR_ENGINE_LIST. The MPI itself is the one plan target that is no engine
 * here: forwarding lives in entry/entry.c. */
#ifndef HAR_ENGINE_H
#define HAR_ENGINE_H

#include "node/allreduce.h"
#include "node/node.h"
#include "cuda/driver.h"
#include "cuda/survey.h"

/* An engine on a communicator's node; set-up returns one of the last three. */
typedef enum {
    HAR_ENGINE_UNTRIED = 0,         /* not set up yet (a new state's zero) */
    HAR_ENGINE_READY,               /* set up on every local rank */
    HAR_ENGINE_NOT_HERE,            /* cannot serve this node (said at debug level): not a failure */
    HAR_ENGINE_FAILED               /* its set-up failed somewhere (said in one warning) */
} har_engine_state_t;

typedef struct har_engine {
    har_engine_traits_t can;        /* what it serves: the plan's rules for it (plan.h) */
    /* Set up collectively over the node, at a call every local rank makes
     * and the first time a plan picks the engine; every rank returns the
     * same answer, and *engine is set when READY. `gpu` is the node's
     * device survey (NULL before one). Devices engines find there what
     * only they can (peer access, MPS, their library). */
    har_engine_state_t (*setup)(har_node_t *node, const har_cuda_gpu_t *gpu, void **engine);
    /* Serves one call as planned; on a failure after peers were involved
     * the communicator fails for good (comm/call.h). */
    har_status_t (*run)(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan);
    /* A non-blocking call (MPI_Iallreduce) whose plan goes ahead, on a rank
     * whose buffers the engine takes as they are: start queues it and
     * returns (its handle in *op); test says, without waiting, whether it
     * ended (1, its status in *st, the handle gone) or not (0). Calls end
     * in the order they started. NULL: the engine serves blocking calls
     * only, and the MPI's non-blocking call serves the others. start may
     * add to the plan's paths how it went (launcher). */
    har_status_t (*start)(void *engine, har_node_t *node, const har_call_t *call, har_plan_t *plan,
                          uint64_t no, void **op);
    int (*test)(void *op, har_status_t *st);
    /* A stream-ordered call (har_allreduce_enqueue) whose plan goes ahead
     * on the push kernels: queued on the application's `stream` (a
     * cudaStream_t), after its work there and after every call of this
     * engine queued before, and returns; nothing on the host waits for it
     * (the engine watches it for dead peers). `captured`: the stream is
     * being captured into a CUDA graph, each replay of which is a new
     * call. NULL: the caller waits for the stream and makes a blocking
     * call instead. */
    har_status_t (*enqueue)(void *engine, har_node_t *node, const har_call_t *call, uint64_t no, void *stream,
                            int captured);
    /* Local: no MPI call. Every call has completed on every local rank
     * (the state's free meets its peers first). */
    void (*destroy)(void *engine);
    /* Where the engine's first step can carry the input (the host
     * segment's): the arrival puts this rank's first chunk of `chunk_bytes`
     * in its slot, so a call makes one node synchronisation. NULL: the
     * arrival carries no input. */
    har_status_t (*preload)(har_node_t *node, const har_call_t *call, size_t chunk_bytes);
} har_engine_t;

/* The engines built here, by path (NULL for the others and for paths that
 * are no engine): src/engines/engines.c makes it from paths.h's list. */
extern HAR_HIDDEN const har_engine_t *const har_engines[HAR_PATH_COUNT];
/* Their traits, as the plan reads them. */
HAR_HIDDEN const har_engine_set_t *har_engine_set(void);

#endif
