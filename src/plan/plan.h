/* The plan of one call: which engine serves it, one-shot or two-shot, the
 * chunk, and the paths the counters will show. Pure: no MPI, no CUDA. Every
 * rank of a node plans from the same inputs (what the ranks share, rank 0's
 * settings, what the node agreed at arrival), so every rank plans alike. */
#ifndef HAR_PLAN_H
#define HAR_PLAN_H

#include <stddef.h>
#include "core/config.h"
#include "core/types.h"
#include "plan/shard.h"
#include "plan/tuning.h"

/* A communicator's settings: a field for each RANK0 variable of the table
 * (core/config.h), holding rank 0's value in the form the plan and the
 * engines use (sizes rounded to what they cut, HAR_RING_MESSAGE's auto
 * resolved: every node must cut the ring's blocks alike), then what is
 * derived from them. Numbers are long long, seconds double, a CHOICE its
 * mask (HAR_ALGO: paths every plan must show where one can; 0: auto); a
 * text (HAR_TUNING) becomes the table below. */
#define HAR_SETTING_FIELD_LOCAL(name, type)
#define HAR_SETTING_FIELD_RANK0(name, type) HAR_SETTING_FIELD_##type(name)
#define HAR_SETTING_FIELD_HAR_T_BOOL(name) long long name;
#define HAR_SETTING_FIELD_HAR_T_INT(name) long long name;
#define HAR_SETTING_FIELD_HAR_T_SIZE(name) long long name;
#define HAR_SETTING_FIELD_HAR_T_ENUM(name) long long name;
#define HAR_SETTING_FIELD_HAR_T_SECONDS(name) double name;
#define HAR_SETTING_FIELD_HAR_T_CHOICE(name) unsigned name;
#define HAR_SETTING_FIELD_HAR_T_STR(name)
#define HAR_SETTING_FIELD(name, type, def, scope, lo, hi, choices, doc) HAR_SETTING_FIELD_##scope(name, type)
typedef struct {
    HAR_VAR_LIST(HAR_SETTING_FIELD)
    int inter_path;             /* HAR_INTER's transport between nodes (HAR_PATH_RING, _DOUBLING or _INTER_MPI),
                                 * or HAR_INTER_AUTO: by the call's size (har_plan_inter) */
    int ntune;
    har_plan_tune_row_t tune[HAR_TUNE_MAX_ROWS];
} har_settings_t;

#define HAR_INTER_AUTO (-1)

/* HAR_RING_MESSAGE=auto: the largest message the MPI sends between hosts
 * without a rendezvous round trip, as measured over TCP (2 hosts of
 * namespaces over veth): Open MPI's TCP eager limit is 64 KiB, so 60 KiB
 * and a header fit; MPICH over UCX took 1.1-1.4 x its own all-reduce's
 * time from 64 to 256 KiB with 60 KiB messages and 0.64-0.83 x with 16 KiB
 * ones. libhar is built against one MPI, so its header says which; built
 * for the standard ABI, MPICH's (the one MPI that implements it today). */
#if defined(MPICH_VERSION) || defined(MPI_ABI_VERSION)
#define HAR_RING_MESSAGE_AUTO (16 << 10)
#else
#define HAR_RING_MESSAGE_AUTO (60 << 10)
#endif

/* Everything but the table, from a configuration's values. */
HAR_HIDDEN void har_plan_settings_from(const har_config_t *cfg, har_settings_t *s);

/* What an engine can serve, as its descriptor (engines/engine.h) states it: every
 * rule the plan applies to it. What only its set-up can find out (peer
 * access, MPS, a library that loads) the node agrees on there. */
enum { HAR_TAKES_HOST = 1, HAR_TAKES_DEVICE = 2 };
/* A setting an engine's trait names: a long long of har_settings_t, by its
 * place plus one, so that a trait left out (zero) names none. */
#define HAR_SETTING(field) ((ptrdiff_t)offsetof(har_settings_t, field) + 1)
typedef struct {
    int path;                   /* its path, HAR_PATH_x */
    unsigned takes;             /* HAR_TAKES_HOST: any buffers, copied in and out; HAR_TAKES_DEVICE: device
                                 * buffers of every local rank, on the GPU its set-up chose */
    unsigned shots;             /* HAR_BIT(ONE_SHOT) and HAR_BIT(TWO_SHOT) it runs; 0: an algorithm of its own */
    int kernel_types;           /* only the types the device kernels reduce (core/types.h) */
    unsigned ops;               /* the ops it reduces (HAR_OP_BIT), 0: every op har serves */
    unsigned across;            /* across nodes, the layouts it serves: HAR_BIT(RAILS), HAR_BIT(LEADER); 0: one node */
    int shared_gpu;             /* serves ranks that share a GPU */
    int max_local;              /* most ranks on a node, 0: no limit */
    int checked;                /* HAR_CHECK verifies what it moves; under HAR_CHECK only such engines serve */
    int forced_only;            /* serves only calls that HAR_ALGO or har_set_algo send it */
    int device_slot;            /* passes through HAR_DEVICE_SLOT_BYTES (else HAR_SLOT_BYTES) */
    int starts_anywhere;        /* its non-blocking calls (har_engine_t.start) need no arrival and take any
                                 * buffers: every rank starts them, whatever the plan's other rules */
    int streams;                /* alone on its node, it hands a ring across nodes the application's host
                                 * buffers: nobody else reads its slot, so no copy of the whole vector
                                 * goes in or out of it (inter.h) */
    /* The thresholds' order: engines by rank, lowest first, except that one
     * whose first_from setting (HAR_SETTING; 0: none) is above 0
     * comes first for calls of at least that many bytes, and one whose
     * first_across_max setting is above 0 first for calls on device
     * buffers across nodes of at most that many; one-shot is preferred up
     * to the one_shot_max setting. On one node, calls on device buffers of
     * at most its ahead_max setting (start_max for started calls:
     * non-blocking and persistent), and all its push calls, go ahead: no
     * host step before its kernels, which meet on the GPU. */
    int rank;
    ptrdiff_t first_from, first_across_max, one_shot_max, ahead_max, start_max;
} har_engine_traits_t;

/* The engines built here, as the plan reads them: by path (NULL for paths
 * that are no engine built here), and, for calls on host and on device
 * buffers, the paths of those that take them in the thresholds' order of
 * rank (fixed for a build: sorted once, off the per-call path). */
typedef struct {
    const har_engine_traits_t *by_path[HAR_PATH_COUNT];
    int ranked[2][HAR_PATH_COUNT], n[2];  /* [0]: host buffers, [1]: device buffers */
} har_engine_set_t;
/* Fills set->ranked from set->by_path. */
HAR_HIDDEN void har_plan_rank_engines(har_engine_set_t *set);

/* What a call's plan depends on: the same on every local rank. */
typedef struct {
    uint64_t bytes;
    size_t elem;
    int local_size, nnodes, uniform;
    int on_device;              /* every local rank holds device buffers on its own engine's GPU (agreed) */
    int shared_gpu;             /* some local ranks share a GPU (agreed at the device survey) */
    int dev_type, dev_op;       /* the type and op codes (core/types.h), HAR_DT_NONE if no kernel reduces it */
    const har_engine_set_t *engine_set;  /* the engines built here */
    unsigned engines;           /* engines not ruled out on this node: set up, or yet to try */
    unsigned forced;            /* paths the plan must show (HAR_ALGO, har_set_algo); 0: none */
    const char *cls;            /* machine class of the buffers' kind, for the table; NULL: unknown */
    int host_buffers;           /* this rank's send and receive buffers are host memory (with one local
                                 * rank, the node's: only then does the plan read it) */
    int started;                /* a non-blocking call or a start of a persistent one (MPI matches these
                                 * only with their like: every rank's call is one) */
    int nccl_across;            /* every rank of the communicator agreed at set-up that NCCL can carry
                                 * its blocks between nodes (asked by HAR_INTER=nccl) */
    int progressed;             /* a started call on har's blocking path in a fiber: the MPI is no
                                 * candidate (its call on the application's communicator could come
                                 * between the application's own calls there) */
} har_plan_in_t;

typedef struct {
    int engine;                 /* HAR_PATH_MPI, _HOST_SEGMENT, _IPC or _NCCL */
    int one_shot;
    size_t chunk_bytes;         /* one pass through a slot; the same for both segments across nodes */
    int inter;                  /* across nodes, the transport's path (HAR_PATH_RING, _DOUBLING, _INTER_MPI) */
    int streamed;               /* the engine hands the transport the application's buffers (HAR_PATH_STREAMED) */
    unsigned paths;             /* engine, shot and inter-node paths: what the counters show */
    const har_plan_tune_row_t *row;  /* the table row that decided, if one did */
} har_plan_t;

HAR_HIDDEN har_plan_t har_plan(const har_plan_in_t *in, const har_settings_t *s);
/* The transport between nodes of a call: every node plans it alike, from
 * the call's size, type and op, rank 0's settings and what the whole
 * communicator agreed at set-up. */
HAR_HIDDEN int har_plan_inter(const har_plan_in_t *in, const har_settings_t *s);
/* The candidate plans' path masks, in the order the thresholds prefer them;
 * returns how many (at most HAR_PLAN_MAX). */
#define HAR_PLAN_MAX (2 * HAR_PATH_COUNT)
HAR_HIDDEN int har_plan_candidates(const har_plan_in_t *in, const har_settings_t *s, unsigned *cand);
/* Why an engine cannot serve calls like this one (for HAR_VERBOSE), or
 * NULL if it can. */
HAR_HIDDEN const char *har_plan_why_not(const har_engine_traits_t *e, const har_plan_in_t *in, const har_settings_t *s);
/* Calls outside HAR_MIN_BYTES..HAR_MAX_BYTES go to the MPI, before any
 * step of har's (every rank sees the same bounds and size). */
HAR_HIDDEN int har_plan_declines(uint64_t bytes, const har_settings_t *s);

/* The most blocks a device kernel of one rank may have so that the blocks
 * of every rank that may share its GPU fit on it at once (each waits for
 * the same block of its peers): `per_sm` blocks fit on a multiprocessor,
 * the GPU has `gpu_sms` of them and this rank's context may use `ctx_sms`
 * (fewer under an MPS limit), and `clients` ranks may run kernels on it.
 * At most `max_blocks`; 0 when not even one block each fits. */
HAR_HIDDEN int har_plan_grid(int per_sm, int ctx_sms, int gpu_sms, int clients, int max_blocks);

/* Elements per pass through a slot of `slot_bytes`: whole 64-byte units. */
HAR_HIDDEN size_t har_plan_chunk_elems(size_t slot_bytes, size_t elem_size);
/* har_plan_shard: plan/shard.h. */

#endif
