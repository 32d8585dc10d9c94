/* Declarations shared by har's own sources. Nothing here is exported. */
#ifndef HAR_INTERNAL_H
#define HAR_INTERNAL_H

#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <mpi.h>
#include "har.h"

#define HAR_HIDDEN __attribute__((visibility("hidden")))

/* ---- config.c: every HAR_* variable ------------------------------------ */

typedef enum { HAR_T_BOOL, HAR_T_INT, HAR_T_SIZE, HAR_T_SECONDS, HAR_T_STR } har_var_type_t;

/* One row per variable: field, type, default, meaning. "algo" rows steer the
 * algorithm and are broadcast from rank 0 when a communicator is set up, so
 * that every rank plans alike. */
#define HAR_VAR_LIST(X)                                                              \
    X(enable, HAR_T_BOOL, "1", 0,                                                   \
      "0 forwards every MPI_Allreduce to the MPI untouched (set it alike on every rank)")                        \
    X(verbose, HAR_T_INT, "0", 0,                                                   \
      "0 quiet; 1 counters at MPI_Finalize; 2 set-up decisions; 3 every call")      \
    X(require_path, HAR_T_STR, "", 0,                                               \
      "path name (see har-info): any call not served by it fails with an MPI error") \
    X(mpi_cuda_p2p, HAR_T_STR, "auto", 0,                                           \
      "auto, 0 or 1: can the MPI send and receive device memory")                       \
    X(mpi_cuda_reduce, HAR_T_STR, "auto", 0,                                        \
      "auto, 0 or 1: can the MPI's own MPI_Allreduce reduce device memory")             \
    X(node_size, HAR_T_INT, "0", 1,                                                 \
      "k>0 splits each node into pretend nodes of k ranks (testing on one machine)") \
    X(min_bytes, HAR_T_SIZE, "0", 1,                                                \
      "calls smaller than this go to the MPI")                                      \
    X(max_bytes, HAR_T_SIZE, "1G", 1,                                               \
      "calls larger than this go to the MPI")                                       \
    X(slot_bytes, HAR_T_SIZE, "1M", 1,                                              \
      "bytes of each rank's data slot in the node segment (two are kept per rank)") \
    X(one_shot_max, HAR_T_SIZE, "16K", 1,                                           \
      "largest message reduced one-shot on a single node")                          \
    X(ipc, HAR_T_BOOL, "1", 0,                                                      \
      "0: no CUDA IPC segment; device buffers then take the host segment")          \
    X(ipc_shared_gpu, HAR_T_BOOL, "0", 0,                                           \
      "1: ranks sharing a GPU use the kernels too (with MPS; without it their kernels time-slice and wait on each other)") \
    X(device_slot_bytes, HAR_T_SIZE, "32M", 1,                                      \
      "bytes of each rank's data slot in the CUDA IPC segment (two per rank, GPU memory)") \
    X(device_one_shot_max, HAR_T_SIZE, "256K", 1,                                   \
      "largest message on device buffers reduced one-shot on a single node")        \
    X(algo, HAR_T_STR, "auto", 1,                                                   \
      "auto (tuning table, then thresholds), or force one of one_shot, two_shot, host_segment, nccl, mpi where it can serve") \
    X(tuning, HAR_T_STR, "builtin", 0,                                              \
      "builtin (the shipped table), none (thresholds only), or a table file written by har-bench --tuning") \
    X(nccl, HAR_T_STR, "libnccl.so.2", 0,                                           \
      "NCCL library loaded at run time for device buffers on one node (a name or a path); 0: never") \
    X(nccl_min_bytes, HAR_T_SIZE, "64M", 1,                                         \
      "where no tuning-table row fits, device messages of at least this size go to NCCL (when it loads); 0: never") \
    X(reduce_threads, HAR_T_INT, "0", 0,                                            \
      "threads per rank for large host reductions; 0: the rank's cores, at most 4") \
    X(inter, HAR_T_STR, "ring", 1,                                                  \
      "ring or mpi: the inter-node step by har's ring or by the MPI's MPI_Allreduce")      \
    X(max_comms, HAR_T_INT, "16", 0,                                                \
      "communicators per process that get a node segment; later ones go to the MPI") \
    X(timeout, HAR_T_SECONDS, "0", 1,                                               \
      "seconds a rank may wait for a peer before failing; 0 waits for ever (a dead peer is detected either way)") \
    X(test_corrupt, HAR_T_STR, "", 0,                                               \
      "test only: RANK:INDEX flips one result element on that rank")                \
    X(test_ipc_fail, HAR_T_BOOL, "0", 0,                                            \
      "test only: the CUDA IPC set-up check fails on local rank 0, so the node falls back") \
    X(test_require_gpu, HAR_T_BOOL, "0", 0,                                         \
      "test suite only: GPU tests fail instead of being skipped without a GPU")        \
    X(test_seed, HAR_T_STR, "", 0,                                                  \
      "test suite only: seed of the sampled runs (default: a new one, printed)")    \
    X(test_timeout, HAR_T_SECONDS, "300", 0,                                        \
      "test suite only: time limit of one MPI job")                                 \
    X(test_mpis, HAR_T_STR, "openmpi mpich", 0,                                     \
      "test suite only: the MPIs scripts/test builds and tests against")

#define HAR_VAR_TEXT 1024  /* room for a path (HAR_TUNING, HAR_NCCL) */
typedef struct {
#define HAR_VAR_FIELD(name, type, def, algo, doc) \
    struct { long long i; double d; char s[HAR_VAR_TEXT]; const char *source; } name;
    HAR_VAR_LIST(HAR_VAR_FIELD)
#undef HAR_VAR_FIELD
} har_config_t;

extern HAR_HIDDEN har_config_t har_cfg;
HAR_HIDDEN void har_config_load(void);
HAR_HIDDEN void har_config_warn_unknown(void);
/* Prints every variable: value, source, meaning (markdown table if asked). */
HAR_HIDDEN void har_config_print(FILE *out, int markdown);

/* ---- tune.c: the tuning table (pure: no MPI, no CUDA) ------------------- */

/* The ways har can serve a call on one node. */
#define HAR_ALGO_LIST(X) X(AUTO, "auto") X(ONE_SHOT, "one_shot") X(TWO_SHOT, "two_shot") \
    X(HOST_SEGMENT, "host_segment") X(NCCL, "nccl") X(MPI, "mpi")
typedef enum {
#define HAR_ALGO_ENUM(id, name) HAR_ALGO_##id,
    HAR_ALGO_LIST(HAR_ALGO_ENUM)
#undef HAR_ALGO_ENUM
    HAR_ALGO_COUNT
} har_algo_t;
#define HAR_ALGO_BIT(a) (1u << HAR_ALGO_##a)
HAR_HIDDEN const char *har_algo_name(har_algo_t a);
HAR_HIDDEN int har_algo_from_name(const char *name);  /* -1: unknown */

/* One row: calls on `device` (1) or host (0) buffers, on communicators of
 * `nodes` nodes of `local_size` ranks, of at most `max_bytes`, go to `algo`. */
typedef struct {
    uint64_t max_bytes;
    uint32_t nodes;
    uint16_t local_size;
    uint8_t device, algo;
} har_tune_row_t;
#define HAR_TUNE_MAX_ROWS 64

/* Parses a table (see src/tuning.txt). Returns the number of rows, or -1
 * with the 1-based number of the first bad line in *bad_line. */
HAR_HIDDEN int har_tune_parse(const char *text, har_tune_row_t *rows, int max_rows, int *bad_line);
/* The first row that fits the call; HAR_ALGO_AUTO when none does. */
HAR_HIDDEN har_algo_t har_tune_lookup(const har_tune_row_t *rows, int nrows, int device, int local_size, int nodes,
                                      uint64_t bytes);
/* The table HAR_TUNING names (parsed once); `source` says where it came from. */
HAR_HIDDEN int har_tune_active(const har_tune_row_t **rows, const char **source);
HAR_HIDDEN extern const char har_tune_builtin[];

/* The algorithm settings a communicator plans with (rank 0's, broadcast). */
typedef struct {
    long long node_size, min_bytes, max_bytes, slot_bytes, one_shot_max;
    long long device_slot_bytes, device_one_shot_max, nccl_min_bytes;
    double timeout;
    int inter_mpi, algo, ntune;
    har_tune_row_t tune[HAR_TUNE_MAX_ROWS];
} har_algo_cfg_t;
HAR_HIDDEN void har_algo_cfg_local(har_algo_cfg_t *a);

/* ---- log.c -------------------------------------------------------------- */

enum { HAR_LOG_ERROR = -1, HAR_LOG_WARN = 0, HAR_LOG_INFO = 1, HAR_LOG_DEBUG = 2, HAR_LOG_TRACE = 3 };
HAR_HIDDEN void har_log_set_rank(int rank);
HAR_HIDDEN void har_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define HAR_LOG(level, ...) \
    do { if ((level) <= har_cfg.verbose.i) har_log((level), __VA_ARGS__); } while (0)

/* ---- reduce_cpu.c ------------------------------------------------------- */

/* inout[i] = inout[i] op in[i], for n elements. */
typedef void (*har_reduce_fn)(void *restrict inout, const void *restrict in, size_t n);

typedef struct {
    har_reduce_fn fn;   /* NULL: har does not serve this (type, op) */
    size_t elem_size;
    int dev_type, dev_op;  /* har_dtype_t, har_opcode_t (dev.h): HAR_DT_NONE if no kernel serves it */
} har_reduce_t;

/* Looks up the reduction of a predefined datatype and op. */
HAR_HIDDEN har_reduce_t har_reduce_lookup(MPI_Datatype type, MPI_Op op);

/* ---- mem.c: memory kind and copies -------------------------------------- */

typedef enum { HAR_MEM_HOST = 0, HAR_MEM_DEVICE = 1, HAR_MEM_MANAGED = 2 } har_mem_kind_t;

HAR_HIDDEN har_mem_kind_t har_mem_kind(const void *p);
/* Copy between any two kinds; returns 0 or -1 (logged). The _kinds form
 * takes kinds already known, so a call asks CUDA about each buffer once. */
HAR_HIDDEN int har_mem_copy(void *dst, const void *src, size_t bytes);
HAR_HIDDEN int har_mem_copy_kinds(void *dst, har_mem_kind_t dst_kind, const void *src, har_mem_kind_t src_kind,
                                  size_t bytes);
HAR_HIDDEN int har_cuda_available(void);
/* Has the calling thread a current CUDA context (made by the application)? */
HAR_HIDDEN int har_cuda_context_current(void);
/* What the MPI underneath can do with device memory, after overrides. */
HAR_HIDDEN int har_mpi_cuda_p2p(void);
HAR_HIDDEN int har_mpi_cuda_reduce(void);
HAR_HIDDEN void har_mem_init(void);
HAR_HIDDEN void har_mem_finalize(void);
/* A host buffer of at least `bytes` for one call; release with har_stage_put. */
HAR_HIDDEN void *har_stage_get(size_t bytes);
HAR_HIDDEN void har_stage_put(void *buf);

/* ---- gate.c / counters -------------------------------------------------- */

HAR_HIDDEN void har_count(unsigned paths);  /* paths: bit mask of (1u << HAR_PATH_x) */
HAR_HIDDEN int har_init(void);
HAR_HIDDEN void har_finalize(void);
HAR_HIDDEN int har_error_raise(MPI_Comm comm, har_error_t err);
HAR_HIDDEN int har_forward(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                           MPI_Op op, MPI_Comm comm, unsigned *paths);
HAR_HIDDEN const char *har_mpi_flavour(void);
/* The algorithm forced on a communicator: har_set_algo's, else HAR_ALGO. */
HAR_HIDDEN int har_forced_algo(const har_algo_cfg_t *cfg);

#define HAR_BIT(p) (1u << HAR_PATH_##p)

#endif
