/* One all-reduce as this rank sees it, and what the ranks of a node must
 * agree on about it: the engines serve it, the step between nodes carries
 * its arrival record in the first block's header. */
#ifndef HAR_ALLREDUCE_H
#define HAR_ALLREDUCE_H

#include <mpi.h>
#include "core/types.h"
#include "host/reduce.h"
#include "node/segment.h"

/* One all-reduce, as this rank sees it. */
typedef struct har_call {
    const char *in;                 /* == out for MPI_IN_PLACE */
    char *out;
    size_t count;
    uint64_t bytes;
    har_reduce_t red;
    MPI_Datatype type;
    MPI_Op op;
    har_mem_kind_t in_kind, out_kind;
    int gpu;                        /* ordinal here of the GPU holding both buffers, or -1 */
    int cuda;                       /* the application has loaded libcuda */
    har_buffers_t bad;              /* this rank's buffers cannot be used: the node fails the call at its arrival */
    /* The arrival (comm/call.c) carried the first chunk's input into the
     * host slot of this rank / of every local rank (an engine's preload). */
    int loaded_me, loaded_all;
    int beside;                     /* another call of this process was in progress when it began (comm/call.c) */
} har_call_t;

/* What ranks must agree on about a call (and its number on the
 * communicator), as the arrival and the ring's header carry it. */
static inline void har_node_arrival_of(har_arrival_t *a, const har_call_t *call, uint64_t no)
{
    a->call = (uint32_t)no;
    a->count = call->count;
    a->type = call->red.type_code;
    a->op = (int8_t)call->red.dev_op;
    a->bad = call->bad;
}

/* "count 12 int32 sum (call 3)", for messages. */
static inline const char *har_node_arrival_text(const har_arrival_t *a, char *buf, size_t len)
{
    return har_host_reduce_text(a->count, a->type, a->op, a->call, buf, len);
}

#endif
