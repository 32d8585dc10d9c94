/* The plan of one call: which engine serves it, one-shot or two-shot, the
 * chunk, and the paths the counters will show. Pure: no MPI, no CUDA. Every
 * rank of a node plans from the same inputs (what the ranks share, rank 0's
 * settings, what the node agreed at arrival), so every rank plans alike. */
#ifndef HAR_PLAN_H
#define HAR_PLAN_H

#include "core/config.h"
#include "plan/tuning.h"

/* The engines har runs, each a path name too (har.h); the fourth plan
 * target, the MPI's own all-reduce, is no engine (entry.c forwards). Adding
 * an engine: its entry here, its rules in plan.c (har_plan_candidates), its
 * folder, which defines har_engine_<name> (engine.h). */
#define HAR_ENGINE_LIST(X) X(HOST_SEGMENT, host_segment) X(IPC, ipc) X(NCCL, nccl)

/* A communicator's settings: rank 0's values of the RANK0 variables,
 * derived into the form the plan and the engines use. */
typedef struct {
    long long node_size, min_bytes, max_bytes, slot_bytes, one_shot_max;
    long long device_slot_bytes, device_one_shot_max, nccl_min_bytes;
    double timeout;
    int inter_mpi, check;
    unsigned algo;              /* HAR_ALGO: paths every plan must show where one can; 0: auto */
    int ntune;
    har_tune_row_t tune[HAR_TUNE_MAX_ROWS];
} har_settings_t;

/* Everything but the table, from a configuration's values. */
HAR_HIDDEN void har_settings_from(const har_config_t *cfg, har_settings_t *s);

/* What a call's plan depends on: the same on every local rank. */
typedef struct {
    uint64_t bytes;
    size_t elem;
    int local_size, nnodes, uniform;
    int device;                 /* every local rank holds device buffers on its own engine's GPU (agreed) */
    int shared_gpu;             /* some local ranks share a GPU (agreed at the device survey) */
    int dev_type, dev_op;       /* the kernels' codes (kernels.h), HAR_DT_NONE / HAR_OP_NONE if none */
    unsigned engines;           /* engines not ruled out on this node: set up, or yet to try */
    unsigned forced;            /* paths the plan must show (HAR_ALGO, har_set_algo); 0: none */
    const char *cls;            /* machine class of the buffers' kind, for the table; NULL: unknown */
} har_plan_in_t;

typedef struct {
    int engine;                 /* HAR_PATH_MPI, _HOST_SEGMENT, _IPC or _NCCL */
    int one_shot;
    size_t chunk_bytes;         /* one pass through a slot; the same for both segments across nodes */
    unsigned paths;             /* engine, shot and inter-node paths: what the counters show */
    const har_tune_row_t *row;  /* the table row that decided, if one did */
} har_plan_t;

HAR_HIDDEN har_plan_t har_plan(const har_plan_in_t *in, const har_settings_t *s);
/* The candidate plans' path masks, in the order the thresholds prefer them;
 * returns how many (at most 8). */
HAR_HIDDEN int har_plan_candidates(const har_plan_in_t *in, const har_settings_t *s, unsigned *cand);

/* The most blocks a device kernel of one rank may have so that the blocks
 * of every rank that may share its GPU fit on it at once (each waits for
 * the same block of its peers): `per_sm` blocks fit on a multiprocessor,
 * the GPU has `gpu_sms` of them and this rank's context may use `ctx_sms`
 * (fewer under an MPS limit), and `clients` ranks may run kernels on it.
 * At most `max_blocks`; 0 when not even one block each fits. */
HAR_HIDDEN int har_plan_grid(int per_sm, int ctx_sms, int gpu_sms, int clients, int max_blocks);

/* Elements per pass through a slot of `slot_bytes`: whole 64-byte units. */
HAR_HIDDEN size_t har_chunk_elems(size_t slot_bytes, size_t elem_size);
/* Shard i of n elements split among `parts`: starts and lengths are
 * multiples of 64 bytes except the last shard's end. */
HAR_HIDDEN void har_shard(size_t n, size_t elem_size, int parts, int i, size_t *off, size_t *len);

#endif
