/* har: hierarchical MPI_Allreduce.
 *
 * Applications need nothing from this header: linking -lhar before the MPI
 * library (or LD_PRELOAD=libhar.so) makes every MPI_Allreduce go through har.
 * This header is for tools and tests that want to see what har did.
 *
 * Error contract: every har_ function that can fail returns an MPI error code
 * (MPI_SUCCESS on success). Failures inside an all-reduce go through the
 * communicator's error handler, exactly like the MPI's own errors; the codes
 * of har's own error classes are listed below and named by MPI_Error_string.
 */
#ifndef HAR_H
#define HAR_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAR_API __attribute__((visibility("default")))

#define HAR_VERSION_MAJOR 0
#define HAR_VERSION_MINOR 1
#define HAR_VERSION_PATCH 0

HAR_API const char *har_version(void);

/* The ways a call can be served. One call usually counts on several paths
 * (for example host_segment + two_shot + rails + ring); "seen" counts every
 * MPI_Allreduce that reached har. */
#define HAR_PATH_LIST(X)                                                        \
    X(SEEN, "seen", "every MPI_Allreduce that reached har")                    \
    X(FORWARDED, "forwarded", "handed to the MPI's own MPI_Allreduce")         \
    X(STAGED, "staged", "forwarded with device buffers staged through host")   \
    X(HOST_SEGMENT, "host_segment", "reduced inside the node on host shared memory") \
    X(IPC, "ipc", "reduced inside the node by GPU kernels over CUDA IPC")      \
    X(ONE_SHOT, "one_shot", "every local rank reduced the whole vector")       \
    X(TWO_SHOT, "two_shot", "reduce-scatter of shards, then all-gather")       \
    X(RAILS, "rails", "nodes of equal size: local rank i carries shard i")     \
    X(LEADER, "leader", "nodes of unequal size: local rank 0 carries the node") \
    X(RING, "ring", "inter-node ring over MPI point-to-point")                  \
    X(INTER_MPI, "inter_mpi", "inter-node step by the MPI's MPI_Allreduce")     \
    X(NCCL, "nccl", "device buffers reduced by NCCL (loaded at run time)")

typedef enum {
#define HAR_PATH_ENUM(id, name, doc) HAR_PATH_##id,
    HAR_PATH_LIST(HAR_PATH_ENUM)
#undef HAR_PATH_ENUM
    HAR_PATH_COUNT
} har_path_t;

/* "seen", "forwarded", ...; NULL for an unknown value. */
HAR_API const char *har_path_name(har_path_t path);
/* The path of that name, or -1. */
HAR_API int har_path_from_name(const char *name);

/* Counters of this process since MPI_Init (or the last reset). */
HAR_API void har_counters(unsigned long long counts[HAR_PATH_COUNT]);
HAR_API void har_counters_reset(void);

/* har's own error conditions. har_error_code() gives the MPI error code that
 * carries each (registered with MPI_Add_error_class at MPI_Init). */
#define HAR_ERROR_LIST(X)                                                        \
    X(PEER_DEAD, "har: a peer process on this node died during an all-reduce") \
    X(TIMEOUT, "har: a peer did not arrive within HAR_TIMEOUT")                \
    X(PEER_FAILED, "har: a peer on this node reported a failure")              \
    X(WRONG_PATH, "har: call not served by the path HAR_REQUIRE_PATH demands") \
    X(CUDA, "har: a CUDA call failed while moving device memory")

typedef enum {
#define HAR_ERROR_ENUM(id, msg) HAR_ERR_##id,
    HAR_ERROR_LIST(HAR_ERROR_ENUM)
#undef HAR_ERROR_ENUM
    HAR_ERR_COUNT
} har_error_t;

HAR_API int har_error_code(har_error_t err);

/* Forces how later all-reduces in this process are served, as HAR_ALGO does:
 * "auto" (the tuning table, then thresholds), "one_shot", "two_shot",
 * "host_segment", "nccl" or "mpi"; a path that cannot serve a call leaves
 * it to "auto". Every rank must make the same call between the same two
 * all-reduces (har-bench --tune does). MPI_SUCCESS, or MPI_ERR_ARG for an
 * unknown name. */
HAR_API int har_set_algo(const char *name);

/* The intercepted MPI_Allreduce, callable directly. */
HAR_API int har_allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);

#ifdef __cplusplus
}
#endif
#endif
