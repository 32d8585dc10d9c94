/* Every HAR_* variable in one table: field, type, default, scope, range,
 * choices and meaning. Read once at MPI_Init, validated (a bad value is
 * refused with one warning naming it, and the default is used), printed by
 * har-info. Variables of scope RANK0 steer the algorithm: a communicator
 * plans with rank 0's values, broadcast when it is set up. */
#ifndef HAR_CONFIG_H
#define HAR_CONFIG_H

#include <stdio.h>
#include "core/paths.h"

typedef enum { HAR_T_BOOL, HAR_T_INT, HAR_T_SIZE, HAR_T_SECONDS, HAR_T_STR, HAR_T_ENUM, HAR_T_CHOICE } har_var_type_t;
enum { LOCAL = 0, RANK0 = 1 };
#define HAR_GIB (1ll << 30)

/* X(field, type, default, scope, min, max, choices, meaning). min and max
 * bound numbers (sizes in bytes; a size whose default is "auto" also takes
 * auto, read as -1: har picks); choices lists an ENUM's words, and for a
 * CHOICE is "plan" where only what a plan can choose is allowed (else any
 * path name). */
#define HAR_VAR_LIST(X)                                                                         \
    X(enable, HAR_T_BOOL, "1", LOCAL, 0, 1, NULL,                                               \
      "0 forwards every MPI_Allreduce to the MPI untouched (set it alike on every rank)")         \
    X(verbose, HAR_T_INT, "0", LOCAL, 0, 3, NULL,                                               \
      "0 quiet; 1 counters at MPI_Finalize; 2 set-up decisions; 3 every call")                  \
    X(require_path, HAR_T_CHOICE, "", LOCAL, 0, 0, NULL,                                        \
      "path names joined by +: any call that does not show them all fails with an MPI error")   \
    X(mpi_cuda_p2p, HAR_T_ENUM, "auto", LOCAL, 0, 0, "auto,0,1",                                \
      "auto (what the MPI says: har-info shows it), 0 or 1: can the MPI send and receive device memory") \
    X(mpi_cuda_reduce, HAR_T_ENUM, "auto", LOCAL, 0, 0, "auto,0,1",                             \
      "auto, 0 or 1: can the MPI's own MPI_Allreduce and other blocking collectives take device memory (auto: yes where the MPI moves it)") \
    X(mpi_cuda_nonblocking, HAR_T_ENUM, "auto", LOCAL, 0, 0, "auto,0,1",                        \
      "auto, 0 or 1: can the MPI's non-blocking and persistent collectives take device memory (auto: only where MPI 4.1's memory kinds say so; CUDA-aware Open MPI 4.1 crashes on it in MPI_Iallreduce); where they can, HAR_INTER=mpi hands device data to the MPI as it is") \
    X(node_size, HAR_T_INT, "0", RANK0, 0, 1 << 20, NULL,                                       \
      "k>0 splits each node into pretend nodes of k ranks (testing on one machine)")            \
    X(min_bytes, HAR_T_SIZE, "0", RANK0, 0, 1ll << 50, NULL, "calls smaller than this go to the MPI") \
    X(max_bytes, HAR_T_SIZE, "1G", RANK0, 0, 1ll << 50, NULL, "calls larger than this go to the MPI") \
    X(slot_bytes, HAR_T_SIZE, "1M", RANK0, 128, HAR_GIB, NULL,                                  \
      "bytes of each rank's data slot in the host node segment (two are kept per rank)")        \
    X(one_shot_max, HAR_T_SIZE, "16K", RANK0, 0, 1ll << 50, NULL,                               \
      "largest message reduced one-shot on a single node")                                      \
    X(ipc, HAR_T_BOOL, "1", LOCAL, 0, 1, NULL,                                                  \
      "0: no CUDA IPC engine; device buffers then take NCCL or the host segment")               \
    X(ipc_shared_gpu, HAR_T_ENUM, "auto", LOCAL, 0, 0, "auto,0,1",                              \
      "ranks sharing a GPU use the kernels: auto, where every local rank's contexts go through MPS; 1 also without MPS (their kernels then time-slice and wait on each other); 0 never") \
    X(device_slot_bytes, HAR_T_SIZE, "32M", RANK0, 1 << 20, 16 * HAR_GIB, NULL,                 \
      "bytes of each rank's data slot in the CUDA IPC segment (two per rank, GPU memory)")      \
    X(device_one_shot_max, HAR_T_SIZE, "256K", RANK0, 0, 1ll << 50, NULL,                       \
      "largest message on device buffers reduced one-shot on a single node")                    \
    X(device_push_max, HAR_T_SIZE, "64K", RANK0, 0, 4 << 20, NULL,                              \
      "largest one-shot message on device buffers that the push kernels serve on a single node (no barrier, no host step; each rank keeps 8 x ranks x this much GPU memory for it: two areas for calls and two for calls captured into CUDA graphs, lines twice the payload); 0: never") \
    X(device_ahead_max, HAR_T_SIZE, "1M", RANK0, 0, 1ll << 50, NULL,                              \
      "largest message on device buffers on a single node whose kernels are launched with no host step before them (they wait for their peers on the GPU); larger ones first wait for every local rank on the host; the push kernels never do; 0: only they") \
    X(device_start_max, HAR_T_SIZE, "256M", RANK0, 0, 1ll << 50, NULL,                            \
      "largest MPI_Iallreduce or start of a persistent all-reduce on device buffers on a single node that har's kernels serve, launched with no host step as HAR_DEVICE_AHEAD_MAX's blocking calls are (the request completes when they end); larger ones are staged through the MPI; a rank whose buffers are not on the kernels' GPU joins on copies in GPU memory; 0: only the push kernels' sizes") \
    X(device_host_max, HAR_T_SIZE, "128K", RANK0, 0, 1ll << 50, NULL,                           \
      "where no tuning-table row fits, device messages across nodes of at most this size go through the host segment (one copy each way) rather than the kernels; 0: never") \
    X(device_pipeline, HAR_T_BOOL, "1", LOCAL, 0, 1, NULL,                                      \
      "across nodes, device chunks overlap: the GPU reduces and copies the next while the host carries one between nodes; 0: one at a time (to compare)") \
    X(algo, HAR_T_CHOICE, "auto", RANK0, 0, 0, "plan",                                          \
      "auto (tuning table, then thresholds), or path names joined by + that every call must show where a plan can: mpi, host_segment, ipc, nccl, one_shot, two_shot, push") \
    X(tuning, HAR_T_STR, "builtin", RANK0, 0, 0, NULL,                                          \
      "builtin (the shipped table), none (thresholds only), or a table file written by har-bench --tuning") \
    X(nccl, HAR_T_STR, "libnccl.so.2", LOCAL, 0, 0, NULL,                                       \
      "NCCL library loaded at run time for device buffers on one node (a name or a path); 0: never") \
    X(nccl_min_bytes, HAR_T_SIZE, "64M", RANK0, 0, 1ll << 50, NULL,                             \
      "where no tuning-table row fits, device messages of at least this size go to NCCL (when it loads); 0: never") \
    X(reduce_threads, HAR_T_INT, "0", LOCAL, 0, 64, NULL,                                       \
      "threads per rank for large host reductions; 0: the rank's cores, at most 4")             \
    X(inter, HAR_T_ENUM, "auto", RANK0, 0, 0, "auto,ring,doubling,mpi,nccl",                    \
      "the inter-node step: auto (doubling up to HAR_DOUBLING_MAX bytes, the ring above), or always har's ring, har's recursive doubling, the MPI's MPI_Allreduce on the rail (mpi), or NCCL on the rail (nccl: where every rank of the communicator loads NCCL and has a GPU, for the types and ops NCCL reduces, not under HAR_CHECK; else as auto)") \
    X(doubling_max, HAR_T_SIZE, "64K", RANK0, 0, 1ll << 50, NULL,                               \
      "with HAR_INTER=auto, calls of at most this many bytes cross nodes by recursive doubling (log2 of the nodes steps), larger ones by the ring (2(nodes-1) steps, the least data)") \
    X(ring_message, HAR_T_SIZE, "auto", RANK0, 0, HAR_GIB, NULL,                                \
      "the ring's blocks between nodes travel as messages of at most this many bytes, each reduced as it comes while the next ones are on the way; auto: 60K under Open MPI, 16K under MPICH (what each sends without a rendezvous over TCP); 0: each block as one message (to compare); HAR_RING_SEGMENT, its old name, still serves") \
    X(max_comms, HAR_T_INT, "16", LOCAL, 0, 4096, NULL,                                         \
      "communicators per process that get a node segment; later ones go to the MPI")            \
    X(timeout, HAR_T_SECONDS, "0", RANK0, 0, 1e7, NULL,                                         \
      "seconds a rank may wait for a peer before failing; 0 waits for ever (a dead peer is detected either way)") \
    X(watch, HAR_T_BOOL, "1", RANK0, 0, 1, NULL,                                                \
      "1: each rank that crosses nodes holds a TCP connection to its ring neighbours on other nodes, whose closing tells of a death that no local peer is left to report (one rank per node, or a whole node's ranks); 0: none, and HAR_TIMEOUT alone bounds such waits") \
    X(progress_thread, HAR_T_BOOL, "1", RANK0, 0, 1, NULL,                                      \
      "under MPI_THREAD_MULTIPLE, a thread of har's moves MPI_Iallreduce and persistent starts across nodes (made at the first; it sleeps while none runs); 0: the MPI serves them there (staged on device buffers)") \
    X(launch_thread, HAR_T_ENUM, "0", LOCAL, 0, 0, "auto,0,1",                                   \
      "1: MPI_Iallreduce and MPI_Start on har's kernels hand the launch to a thread of har's and return before it, leaving more of the call to overlap with host work, at some cost to the call's own time and to other calls beside the spinning thread (docs/PERFORMANCE.md; the thread spins 200 us after its last launch, then sleeps; a call that finds it asleep launches itself, and wakes it if it came within 200 us of the call before); 0: every call launches its own kernels; auto: 1 where the process may run on two cores or more") \
    X(check, HAR_T_BOOL, "0", RANK0, 0, 1, NULL,                                                \
      "1: checking mode: every slot and shard checksummed by its writer and verified by each reader, results compared across ranks; the first difference fails the call naming writer, reader and shard (NCCL and the IPC kernels are not used)") \
    HAR_TEST_VAR_LIST(X)

/* Test hooks: only in the test build of the library (HAR_TEST_HOOKS), which
 * the suite links; the installed libhar reads none of them. */
#ifdef HAR_TEST_HOOKS
#define HAR_TEST_VAR_LIST(X)                                                                    \
    X(test_corrupt, HAR_T_STR, "", LOCAL, 0, 0, NULL,                                           \
      "test build: RANK:INDEX, rank RANK of the communicator flips one element of its result of every call har serves") \
    X(test_corrupt_slot, HAR_T_STR, "", LOCAL, 0, 0, NULL,                                      \
      "test build: RANK:INDEX, rank RANK of the communicator flips element INDEX of its host slot right after publishing its checksums") \
    X(test_corrupt_ring, HAR_T_INT, "-1", LOCAL, -1, 1 << 30, NULL,                             \
      "test build: rank RANK of the communicator flips a byte of each block it sends between nodes (ring or doubling), after its checksum") \
    X(test_ipc_fail, HAR_T_BOOL, "0", LOCAL, 0, 1, NULL,                                        \
      "test build: the CUDA IPC engine's set-up fails on local rank 0, so the node disables it") \
    X(test_nccl_fail, HAR_T_BOOL, "0", LOCAL, 0, 1, NULL,                                       \
      "test build: the NCCL engine's set-up fails on local rank 0, so the node disables it")    \
    X(test_check_calls, HAR_T_BOOL, "0", LOCAL, 0, 1, NULL,                                     \
      "test build: 1, the ring and doubling start each call with the check of every rank's call that NCCL between nodes takes (tested without a GPU)") \
    X(test_kill, HAR_T_STR, "", LOCAL, 0, 0, NULL,                                              \
      "test build: RANK:POINT[:N], world rank RANK kills itself the Nth time it passes POINT")    \
    X(test_stall, HAR_T_STR, "", LOCAL, 0, 0, NULL,                                             \
      "test build: RANK:POINT:SECONDS[,...], world rank RANK sleeps that long each time it passes POINT (a window held open for a test)") \
    X(test_cuda_at, HAR_T_STR, "", LOCAL, 0, 0, NULL,                                           \
      "test build: RANK:CALL, rank RANK of every communicator (* for all) acts as if it had a CUDA context from its call number CALL on") \
    X(test_no_socket, HAR_T_INT, "-1", LOCAL, -1, 1 << 30, NULL,                                \
      "test build: local rank RANK cannot reach local rank 0's socket (as from another network namespace), so the node takes a named segment") \
    X(test_gpus, HAR_T_STR, "", LOCAL, 0, 0, NULL,                                              \
      "test build: FILE, the device survey sees the GPUs recorded there (tests/mpi/gpus/) instead of asking the driver and NVML") \
    X(test_stage, HAR_T_INT, "0", LOCAL, 0, 2, NULL,                                            \
      "test build: 1 stages host buffers of the collectives har wraps as if they were device memory the MPI cannot take; 2 also flips the first byte of every result copied back")
#else
#define HAR_TEST_VAR_LIST(X)
#endif

enum {
#define HAR_VAR_ENUM(name, type, def, scope, lo, hi, choices, doc) HAR_V_##name,
    HAR_VAR_LIST(HAR_VAR_ENUM)
#undef HAR_VAR_ENUM
    HAR_NVARS
};

#define HAR_VAR_TEXT 1024  /* room for a path (HAR_TUNING, HAR_NCCL) */
typedef struct {
    long long i;        /* bool, int, size, enum index, choice mask */
    double d;           /* seconds */
    char s[HAR_VAR_TEXT];
    const char *source; /* "default" or "environment" */
} har_value_t;

typedef struct { har_value_t v[HAR_NVARS]; } har_config_t;

/* This process's values. */
extern HAR_HIDDEN har_config_t har_cfg;
#define HAR_CFG(name) (har_cfg.v[HAR_V_##name])

/* Reads and validates every variable, warning as `report` says: nothing
 * (a tool that only lists them), this rank's own refused values (every
 * rank: a value bad on one rank only is said by that rank), or also those
 * of the variables whose rank 0's value is used, and unknown names (world
 * rank 0). */
enum { HAR_REPORT_NONE, HAR_REPORT_OWN, HAR_REPORT_ALL };
HAR_HIDDEN void har_config_load(int report);
/* Opens a file a setting names, for reading, without ever blocking (a FIFO
 * or a device would) and only if it is a regular file: its descriptor, or
 * -1 with errno (EISDIR for a directory, EINVAL for anything else that is
 * not a regular file). */
HAR_HIDDEN int har_open_setting_file(const char *path);
/* Every variable: value, source, meaning; as the README's markdown table. */
HAR_HIDDEN void har_config_print(FILE *out, int markdown);
/* Packs the RANK0 values of `cfg` into `buf` (har_config_rank0_bytes long),
 * or unpacks them over `cfg`: the broadcast of a communicator's set-up. */
HAR_HIDDEN size_t har_config_rank0_bytes(void);
HAR_HIDDEN void har_config_rank0_pack(const har_config_t *cfg, void *buf);
HAR_HIDDEN void har_config_rank0_unpack(har_config_t *cfg, const void *buf);

/* Path names joined by '+' (HAR_ALGO, HAR_REQUIRE_PATH, table rows) as a
 * mask of (1u << HAR_PATH_x); `allowed` limits the names. 0 with *ok = 0 on
 * an unknown name; "auto" and "" are 0 with *ok = 1. */
HAR_HIDDEN unsigned har_choice_parse(const char *text, unsigned allowed, int *ok);
HAR_HIDDEN void har_choice_format(unsigned mask, char *buf, size_t len);
/* A size in bytes: a number with an optional K, M or G (binary) and an
 * optional B; -1 if it is not one. */
HAR_HIDDEN double har_parse_size(const char *text);
/* The names a choice may use: the engines (the MPI among them) and shots. */
#define HAR_ENGINE_BIT(id, name, built, doc) | HAR_BIT(id)
#define HAR_ENGINE_BITS (0 HAR_ENGINE_LIST(HAR_ENGINE_BIT))
#define HAR_CHOICE_NAMES (HAR_ENGINE_BITS | HAR_BIT(MPI) | HAR_BIT(ONE_SHOT) | HAR_BIT(TWO_SHOT) | HAR_BIT(PUSH))

#endif
