/* Typed element-wise reductions on host memory, and the worker threads that
 * split large ones. */
#ifndef HAR_REDUCE_H
#define HAR_REDUCE_H

#include "core/common.h"

/* inout[i] = inout[i] op in[i], for n elements. */
typedef void (*har_reduce_fn)(void *restrict inout, const void *restrict in, size_t n);

typedef struct {
    har_reduce_fn fn;        /* NULL: har does not serve this (type, op) */
    size_t elem_size;
    int dev_type, dev_op;    /* the kernels' codes (engines/ipc_kernels.h); HAR_DT_NONE if no kernel serves the type */
    /* What ranks must agree on, as numbers that mean the same in every
     * process (MPI handles are addresses that differ between them): the
     * element's kind, width and signedness; the op is dev_op (HAR_OP_*). */
    uint16_t type_code;
} har_reduce_t;

/* "count 12 int32 sum (call 3)": a call's record, in messages. */
HAR_HIDDEN const char *har_host_reduce_text(uint64_t count, uint16_t type_code, int op, uint64_t call, char *buf,
                                            size_t len);

/* The reduction of a predefined datatype and op. */
HAR_HIDDEN har_reduce_t har_host_reduce_lookup(MPI_Datatype type, MPI_Op op);

#endif
