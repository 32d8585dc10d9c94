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
#include "har_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HAR_API __attribute__((visibility("default")))

/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
HAR_API const char *har_version(void);

/* Counters of this process since MPI_Init (or the last reset), by name: one
 * per path a call can take ("seen": every MPI_Allreduce that reached har;
 * "mpi", "staged"; the engines "host_segment", "ipc", "nccl"; "one_shot",
 * "two_shot", "rails", "leader", "ring", "doubling", "inter_mpi", "inter_nccl",
 * "streamed", "push", "ahead", "enqueued", ...), then two per other
 * collective har wraps: its calls and those staged through host memory on
 * this rank ("iallreduce", "iallreduce_staged", "allreduce_init", "bcast",
 * "ibcast", "reduce", ... "ialltoallv_staged"). A call counts on every path
 * it took. Their number and order belong to the library that is loaded,
 * and grow as it does: look them up by name. `har-info --paths` lists
 * them. */
HAR_API int har_counter_count(void);
/* The name of counter `index`, or NULL past the end. */
HAR_API const char *har_counter_name(int index);
/* The index of the counter of that name, or -1. */
HAR_API int har_counter_index(const char *name);
/* Copies the first `n` counters into values; returns how many there are. */
HAR_API int har_counters(unsigned long long *values, int n);
HAR_API void har_counters_reset(void);

/* Every way a call har serves can fail, once: X(id, class, what the rank at
 * fault did, message). Ranks whose calls differ get the class the MPIs
 * give (MPI_ERR_TRUNCATE for another count or datatype, MPI_ERR_OP for
 * another op), and so does a rank that passes a bad buffer (null, or send
 * and receive buffers that overlap: MPI_ERR_BUFFER, as both MPIs give for
 * the same buffer twice); the others are har's own classes (class 0 here),
 * added with MPI_Add_error_class at MPI_Init and named by MPI_Error_string. */
#define HAR_ERROR_LIST(X)                                                                                    \
    X(TRUNCATE, MPI_ERR_TRUNCATE, "called MPI_Allreduce with another count or datatype",                     \
      "har: ranks called MPI_Allreduce with different counts or datatypes")                                  \
    X(OP, MPI_ERR_OP, "called MPI_Allreduce with another op", "har: ranks called MPI_Allreduce with different ops") \
    X(PEER_DEAD, 0, "died", "har: a peer process of this communicator died during an all-reduce")           \
    X(TIMEOUT, 0, "did not come within HAR_TIMEOUT", "har: a peer did not arrive within HAR_TIMEOUT")        \
    X(PEER_FAILED, 0, "failed", "har: a peer of this communicator reported a failure")                      \
    X(WRONG_PATH, 0, "was served by another path", "har: call not served by the path HAR_REQUIRE_PATH demands") \
    X(CUDA, 0, "had a CUDA call fail", "har: a CUDA call failed while moving device memory")                 \
    X(INTERNAL, 0, "had an MPI call inside har fail", "har: an MPI call inside har failed, or memory ran out") \
    X(CHECK, 0, "wrote data that a reader found changed, or got another result (HAR_CHECK)",                 \
      "har: HAR_CHECK found data that changed between writer and reader, or ranks with different results")   \
    X(PEER_LEFT, 0, "left (MPI_Finalize or MPI_Comm_free) while its peers still waited for it in an all-reduce", \
      "har: a peer of this communicator called MPI_Finalize or MPI_Comm_free during an all-reduce")         \
    X(BUFFER, MPI_ERR_BUFFER, "passed an invalid buffer", "har: a null buffer, or send and receive buffers that overlap")

typedef enum {
    HAR_SUCCESS = 0,
#define HAR_ERROR_ENUM(id, cls, did, msg) HAR_ERR_##id,
    HAR_ERROR_LIST(HAR_ERROR_ENUM)
#undef HAR_ERROR_ENUM
    HAR_ERR_COUNT
} har_error_t;

/* The MPI error code that carries `err` (MPI_SUCCESS for HAR_SUCCESS). */
HAR_API int har_error_code(har_error_t err);

/* Forces how later all-reduces in this process are served, as HAR_ALGO does.
 * A choice is "auto" (the tuning table, then thresholds) or path names
 * joined by '+' that the call must show: "ipc+one_shot", "host_segment",
 * "two_shot", "nccl", "mpi"... A choice no plan can meet leaves the call to
 * "auto". Every rank must make the same call between the same two
 * all-reduces (har-bench --tuning does). MPI_SUCCESS, or MPI_ERR_ARG for a
 * choice that names something else. */
HAR_API int har_set_algo(const char *choice);

/* The machine class har keys tuning-table rows by, for this communicator's
 * node: device buffers ("GPU_MODEL/link", link nvlink, pcie or none) or host
 * buffers ("CPU_MODEL/cores per rank"). The device class is known after the
 * first all-reduce on device buffers. MPI_SUCCESS, or MPI_ERR_OTHER when
 * it is not known (yet). */
HAR_API int har_machine_class(MPI_Comm comm, int device, char *buf, int len);

/* The intercepted MPI_Allreduce, callable directly. */
HAR_API int har_allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);

/* A stream-ordered all-reduce: the same arguments as MPI_Allreduce, and a
 * CUDA stream (a cudaStream_t; NULL is the legacy default stream, pass
 * cudaStreamPerThread for the per-thread one). The all-reduce runs on
 * `stream` after the work queued there before, and work queued there
 * after it sees `recvbuf` complete. Every rank of `comm` calls it, in the
 * same order as its other all-reduces on `comm`, with its own stream.
 *
 * Where har's kernels serve the call (one node whose GPUs reach each
 * other, a communicator whose earlier all-reduces on device buffers set
 * it up, calls up to HAR_DEVICE_PUSH_MAX bytes: the counter "enqueued"
 * counts them), it is queued and returns at once: no host thread waits
 * for it and the call wakes no host thread. Otherwise it waits for
 * `stream`, then makes the blocking all-reduce, and returns when the
 * result is in `recvbuf` (still right, not asynchronous).
 *
 * What can only be seen later (a dead or stopped peer, a peer's differing
 * call) stops the queued kernels instead of leaving them waiting, is said
 * at once on stderr, and fails the next all-reduce of this process on
 * `comm` with the class that names it; the results of the calls from the
 * failed one on are undefined. Returns MPI_SUCCESS, the MPI's error for
 * arguments the MPI would refuse, or the error of an earlier failed call;
 * errors also go through the communicator's error handler.
 *
 * On a stream being captured into a CUDA graph, a call har's kernels
 * serve (device buffers on the communicator's GPU) is captured, and every
 * replay of the graph is a new all-reduce: every rank replays its graphs
 * in the same order as its other all-reduces on `comm`, one graph of a
 * communicator at a time. Any other call is refused on a capturing stream
 * (MPI_ERR_OTHER): it would have to wait for the stream. */
HAR_API int har_allreduce_enqueue(const void *sendbuf, void *recvbuf, int count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                  void *stream);

#ifdef __cplusplus
}
#endif
#endif
