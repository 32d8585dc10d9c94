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
    int dev_type, dev_op;    /* the kernels' codes (cuda/kernels.h); HAR_DT_NONE / HAR_OP_NONE if no kernel serves it */
    /* What ranks must agree on, as numbers that mean the same in every
     * process (MPI handles are addresses that differ between them): the
     * element's kind, width and signedness, and the op (HAR_OP_*). */
    uint16_t type_code;
    int16_t op_code;
} har_reduce_t;
/* "int32", "float", ... for a type_code, in messages. */
HAR_HIDDEN const char *har_type_code_name(uint16_t code, char *buf, size_t len);
HAR_HIDDEN const char *har_op_code_name(int code);

/* The reduction of a predefined datatype and op. */
HAR_HIDDEN har_reduce_t har_reduce_lookup(MPI_Datatype type, MPI_Op op);

/* dst op= src[0], then op= src[1], ... over n elements, split across worker
 * threads when the message is large and this rank has cores to spare. */
HAR_HIDDEN void har_reduce_many(har_reduce_fn fn, size_t elem, char *dst, char *const *src, int nsrc, size_t n,
                                int local_size);

#endif
