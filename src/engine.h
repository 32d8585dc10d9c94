/* What an engine is: the narrow interface between the call driver
 * (comm/call.c) and each engine's folder. The MPI itself is the one plan
 * target that is no engine here: forwarding lives in entry.c. */
#ifndef HAR_ENGINE_H
#define HAR_ENGINE_H

#include "comm/node.h"
#include "cuda/mem.h"
#include "cuda/survey.h"
#include "host/reduce.h"

/* One all-reduce, as this rank sees it. */
typedef struct {
    const char *in;                 /* == out for MPI_IN_PLACE */
    char *out;
    size_t count;
    uint64_t bytes;
    har_reduce_t red;
    MPI_Datatype type;
    MPI_Op op;
    har_mem_kind_t in_kind, out_kind;
    int device;                     /* GPU holding both buffers (ordinal here), or -1 */
    int cuda;                       /* the application has loaded libcuda */
    int loaded_me, loaded_all;      /* the first chunk's input is already in this rank's / every rank's host slot */
} har_call_t;

/* What ranks must agree on about a call (and its number on the
 * communicator), as the arrival and the ring's header carry it. */
static inline void har_arrival_of(har_arrival_t *a, const har_call_t *call, uint64_t no)
{
    a->call = (uint32_t)no;
    a->count = call->count;
    a->type = call->red.type_code;
    a->op = (int8_t)call->red.dev_op;
}

/* "count 12 int32 sum (call 3)", for messages. */
static inline const char *har_arrival_text(const har_arrival_t *a, char *buf, size_t len)
{
    return har_call_text(a->count, a->type, a->op, a->call, buf, len);
}

typedef enum {
    HAR_ENGINE_READY,               /* set up on every local rank */
    HAR_ENGINE_NOT_HERE,            /* cannot serve this node (said at debug level): not a failure */
    HAR_ENGINE_FAILED               /* its set-up failed somewhere (said in one warning) */
} har_engine_setup_t;

typedef struct {
    /* Collective over the node, at a call every local rank makes; every
     * rank returns the same answer, and *engine is set when READY. `gpu` is
     * the node's device survey (NULL for host-only engines). */
    har_engine_setup_t (*setup)(har_node_t *node, const har_gpu_t *gpu, void **engine);
    har_status_t (*run)(void *engine, har_node_t *node, const har_call_t *call, const har_plan_t *plan);
    /* Local: no MPI call. Every call has completed on every local rank
     * (the state's free meets its peers first). */
    void (*destroy)(void *engine);
} har_engine_ops_t;

/* Each engine's folder defines one (plan.h's HAR_ENGINE_LIST names them). */
extern HAR_HIDDEN const har_engine_ops_t har_engine_host_segment, har_engine_ipc, har_engine_nccl;

#endif
