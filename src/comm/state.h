/* Per-communicator state: made collectively on a communicator's first
 * eligible call, cached as an attribute (a duplicate gets its own), released
 * by the attribute's delete callback without MPI calls. */
#ifndef HAR_STATE_H
#define HAR_STATE_H

#include "engines/engine.h"

typedef struct {
    void *impl;
    har_engine_state_t state;
    int ctx_ranks;              /* local ranks reporting a CUDA context at its last set-up */
    int retried;                /* a failed set-up was tried once more */
} har_engine_slot_t;

/* How a communicator's calls are served. */
typedef enum {
    HAR_COMM_SERVED = 0,        /* har plans every eligible call */
    HAR_COMM_FORWARDED,         /* its set-up could not be completed on every rank: every call goes to the MPI */
    HAR_COMM_FAILED             /* a call failed after peers were involved: every later call fails */
} har_comm_mode_t;

typedef struct har_comm {
    struct har_comm *next, *prev;   /* every live state, for MPI_Finalize */
    har_node_t node;
    har_settings_t set;             /* rank 0's */
    har_comm_mode_t mode;
    uint64_t calls;                 /* calls planned on this communicator: the same count on every rank */
    int cuda_node;                  /* the node agreed some rank has CUDA: every call starts with an arrival */
    int nccl_across;                /* the communicator agreed NCCL carries blocks between nodes (HAR_INTER=nccl) */
    int surveyed;                   /* gpu holds the node's device survey */
    int set_up_by_start;            /* one node: a started call made (or tried) the device set-up in a fiber;
                                     * from then on no started call here goes to the MPI (comm/call.c) */
    har_cuda_gpu_t gpu;
    char host_cls[HAR_CLASS_LEN];   /* the class the table's host rows are keyed by */
    har_engine_slot_t eng[HAR_PATH_COUNT];  /* by engine path */
    /* Non-blocking calls started here and not yet ended, by call parity
     * (comm/call.c: a call may start only once the one two before it
     * ended). */
    struct har_comm_pending *open[2];
} har_comm_t;

HAR_HIDDEN void har_comm_init(void);
/* Releases every state (MPI_Finalize): every rank's last call is over. */
HAR_HIDDEN void har_comm_finalize(void);
/* This communicator's state, made collectively at its first eligible call
 * (`call`); NULL when the MPI refuses the attribute. Forwarded for
 * communicators har does not serve (inter-communicators, one rank) or
 * whose set-up failed on some rank (their calls go to the MPI). *st says
 * whether the set-up itself failed with peers involved (a death, a
 * time-out): then the caller fails the state for good (har_comm_fail). */
HAR_HIDDEN har_comm_t *har_comm_get(MPI_Comm comm, const har_call_t *call, har_status_t *st);
/* The state if it was made already; NULL otherwise (no MPI collective). */
HAR_HIDDEN har_comm_t *har_comm_peek(MPI_Comm comm);
/* Inside MPI_Init, where a collective over the world is safe: the world's
 * state, made there if every rank of it has a current CUDA context (a GPU
 * application, whose non-blocking calls then need no blocking call first:
 * the splits of the set-up have no non-blocking form). */
HAR_HIDDEN void har_comm_set_up_world(int world_rank);

#endif
