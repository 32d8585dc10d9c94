/* Staging device buffers through host memory, for an MPI that cannot take
 * device memory in a call: the one place har does it (the all-reduce it
 * hands to the MPI, the other collectives, and their non-blocking and
 * persistent forms, whose requests src/entry/requests.c finishes).
 *
 * A call has at most two buffers (its send and its receive side). Each that
 * holds device memory and matters on this rank gets a span: the bytes the
 * MPI may touch, from the datatype's true extent and the counts (and
 * displacements) of the call. The MPI is handed the host copy, shifted so
 * that the same offsets land in it; inputs are copied in before the MPI is
 * called, outputs back once the operation is complete. */
#ifndef HAR_STAGE_H
#define HAR_STAGE_H

#include "core/status.h"
#include "cuda/driver.h"

/* An element count as the MPI-4 large-count ("_c") bindings carry it; the
 * int bindings' counts widen into it. MPI_Count is MPI-3's, so every MPI
 * har builds against has it, also one without the _c bindings (configure
 * defines HAR_HAVE_MPI_C_COUNTS where the MPI has them). */
typedef MPI_Count har_count_t;

/* The binding a call came through: a call har hands to the MPI goes to
 * the MPI's own of the same binding (PMPI_Allreduce, or PMPI_Allreduce_c
 * for HAR_BINDING_LARGE), so its count is never cut to an int. */
typedef enum { HAR_BINDING_INT, HAR_BINDING_LARGE } har_binding_t;

typedef struct {
    char *user;          /* the application's buffer */
    char *host;          /* its host copy (NULL: the MPI gets `user` itself) */
    MPI_Aint first;      /* offset from user of the first byte the MPI may touch */
    size_t bytes;        /* how many bytes from there */
    har_mem_kind_t kind; /* of user */
    unsigned char in;    /* copied to host before the MPI reads it */
    unsigned char out;   /* copied back once the MPI has written it */
} har_span_t;

enum { HAR_SEND = 0, HAR_RECV = 1 };
typedef struct {
    har_span_t s[2]; /* [HAR_SEND], [HAR_RECV] */
    MPI_Comm comm;   /* whose error handler a failed copy goes through */
    int err;         /* the MPI error code of a failure */
} har_stage_t;

/* What preparing a call found: hand the call to the MPI untouched (nothing to stage,
 * or arguments har will not judge: the MPI reports them), or staged (the
 * inputs copied in), or a failure (no memory, a failed copy). */
enum { HAR_STAGE_UNTOUCHED = 0, HAR_STAGE_STAGED = 1, HAR_STAGE_FAILED = -1 };

/* The buffer the MPI gets for side i: the host copy, shifted, or the user's. */
static inline void *har_stage_buffer(const har_stage_t *s, int i, const void *p)
{
    return s->s[i].host ? (void *)(s->s[i].host - s->s[i].first) : (void *)p;
}

/* ---- preparing a call: which buffers matter on this rank, their spans --
 * kinds[HAR_SEND], kinds[HAR_RECV]: the buffers' memory kinds as the caller
 * found them; a side is staged where its kind is not host (or, in the test
 * build under HAR_TEST_STAGE, wherever it matters). Each returns one of the
 * values above; STAGED means the inputs are already in the host copies
 * (`copy_in` 0: only allocated, for a persistent request that copies them
 * at each start). */
typedef struct {
    har_mem_kind_t kind[2];
    int copy_in;
    MPI_Comm comm;
} har_stage_ask_t;

HAR_HIDDEN int har_stage_prepare_allreduce(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, void *rbuf,
                                           har_count_t count, MPI_Datatype type);
/* The counts and displacements of a v form's blocks, one per rank: int
 * arrays from the int bindings, MPI_Count counts and MPI_Aint
 * displacements from the _c ones. A NULL pointer to one: not a v form. */
typedef struct {
    const void *counts, *displs;
    har_binding_t binding;
} har_blocks_t;

HAR_HIDDEN int har_stage_prepare_bcast(har_stage_t *s, const har_stage_ask_t *a, void *buf, har_count_t count,
                                       MPI_Datatype type, int root);
HAR_HIDDEN int har_stage_prepare_reduce(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, void *rbuf,
                                        har_count_t count, MPI_Datatype type, int root);
/* Allgather, and allgatherv where rv is not NULL. */
HAR_HIDDEN int har_stage_prepare_allgather(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf,
                                           har_count_t scount, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                                           const har_blocks_t *rv, MPI_Datatype rtype);
/* Reduce_scatter_block, and reduce_scatter where rv is not NULL (its
 * counts only). */
HAR_HIDDEN int har_stage_prepare_reduce_scatter(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, void *rbuf,
                                                har_count_t rcount, const har_blocks_t *rv, MPI_Datatype type);
/* Gather, and gatherv where rv is not NULL. */
HAR_HIDDEN int har_stage_prepare_gather(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, har_count_t scount,
                                        MPI_Datatype stype, void *rbuf, har_count_t rcount, const har_blocks_t *rv,
                                        MPI_Datatype rtype, int root);
/* Scatter, and scatterv where sv is not NULL. */
HAR_HIDDEN int har_stage_prepare_scatter(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, har_count_t scount,
                                         const har_blocks_t *sv, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                                         MPI_Datatype rtype, int root);
/* Alltoall, and alltoallv where sv and rv are not NULL. */
HAR_HIDDEN int har_stage_prepare_alltoall(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf,
                                          har_count_t scount, const har_blocks_t *sv, MPI_Datatype stype, void *rbuf,
                                          har_count_t rcount, const har_blocks_t *rv, MPI_Datatype rtype);

/* Copies the inputs into the host copies (a persistent request, at each
 * start); HAR_OK or HAR_ERR_CUDA. */
HAR_HIDDEN har_status_t har_stage_in(har_stage_t *s);
/* Copies the outputs back to the application's buffers. */
HAR_HIDDEN har_status_t har_stage_out(har_stage_t *s);
/* Gives the host copies back to the pool. */
HAR_HIDDEN void har_stage_release(har_stage_t *s);
/* After the MPI's blocking call returned rc: copies back on success,
 * releases, and returns rc or the copy's error (through the handler). */
HAR_HIDDEN int har_stage_finish(har_stage_t *s, int rc);
/* The error code of a failed preparation or copy, through the handler of comm. */
HAR_HIDDEN int har_stage_error(const har_stage_t *s);


/* ---- the pool of host buffers ---------------------------------------------
 * A buffer of at least `bytes` (NULL when memory runs out); back with put.
 * Buffers given back are kept for reuse, at most HAR_STAGE_KEEP of them and
 * HAR_STAGE_KEEP_BYTES in all (the largest go first); a caller never waits
 * for one (two collectives that ranks enter in different orders could
 * deadlock on it). */
#define HAR_STAGE_KEEP 8
#define HAR_STAGE_KEEP_BYTES (256u << 20)
HAR_HIDDEN void *har_stage_get(size_t bytes);
HAR_HIDDEN void har_stage_put(void *buf);
/* How many the pool holds now, and their bytes (the test build shows them). */
HAR_HIDDEN int har_stage_kept(size_t *bytes);
HAR_HIDDEN void har_stage_finalize(void);

#ifdef HAR_TEST_HOOKS
/* HAR_TEST_STAGE (test build): 1 stages host buffers as if they were
 * device memory, so the staging runs without a GPU; 2 also flips the first
 * byte of each output it copies back (the tests' checks must catch it). */
HAR_HIDDEN int har_test_stage(void);
#endif

#endif
