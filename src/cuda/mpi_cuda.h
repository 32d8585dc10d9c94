/* What the MPI underneath can do with device memory, and how har knows.
 * Facts are gathered once after the MPI's initialisation (its own answers,
 * looked up at run time: Open MPI's MPIX_Query_cuda_support, MPICH's
 * MPIX_GPU_query_support, MPI 4.1's memory allocation kinds), then one pure
 * rule turns them and the user's word (HAR_MPI_CUDA_*) into three answers,
 * each with its reason. The answers decide what har stages (stage/, entry/)
 * and what the step between nodes may hand the MPI as it is (inter/);
 * har-info prints them with their reasons. */
#ifndef HAR_MPI_CUDA_H
#define HAR_MPI_CUDA_H

#include "core/common.h"

/* What the MPI says of itself. */
typedef struct {
    char library[96];           /* MPI_Get_library_version's first line (cut) */
    int cuda_query;             /* MPIX_Query_cuda_support(): 1 or 0; -1 where the MPI has none */
    int gpu_query;              /* MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA): 1 or 0; -1: none */
    char alloc_kinds[160];      /* MPI_COMM_WORLD's "mpi_memory_alloc_kinds" info (MPI 4.1); "": not given */
} har_cuda_mpi_facts_t;

/* One capability: whether the MPI has it, and why har thinks so. */
typedef struct {
    int yes;
    char why[160];
} har_cuda_mpi_answer_t;

typedef struct {
    har_cuda_mpi_answer_t p2p;          /* sends and receives device memory */
    har_cuda_mpi_answer_t reduce;       /* its blocking collectives (MPI_Allreduce) take device memory */
    har_cuda_mpi_answer_t nonblocking;  /* its non-blocking and persistent collectives do */
} har_cuda_mpi_t;

/* The rule, pure: the facts and the three settings ("auto", "0" or "1",
 * in the order of har_cuda_mpi_t) to the answers. */
HAR_HIDDEN void har_cuda_mpi_decide(const har_cuda_mpi_facts_t *facts, const char *const settings[3],
                                    har_cuda_mpi_t *out);

/* Once, after the MPI's initialisation: gathers the facts, applies the
 * settings. */
HAR_HIDDEN void har_cuda_mpi_init(void);
HAR_HIDDEN const har_cuda_mpi_facts_t *har_cuda_mpi_facts(void);
HAR_HIDDEN const har_cuda_mpi_t *har_cuda_mpi(void);

/* The answers alone. */
HAR_HIDDEN int har_cuda_mpi_p2p(void);
HAR_HIDDEN int har_cuda_mpi_reduce(void);
HAR_HIDDEN int har_cuda_mpi_nonblocking(void);

#endif
