/* The paths a call can take: one vocabulary for the counters, the tuning
 * table, HAR_ALGO, HAR_REQUIRE_PATH, har-bench and the tests. A call counts
 * on several (host_segment + two_shot + rails + ring, say); exactly one
 * engine serves it, or the MPI.
 *
 * The engines, one line each: X(id, name, built, doc). `built` is 1 where
 * this build has the engine (its file in src/engines/, listed in Makefile.am,
 * defines har_engine_<name>: see engines/engine.h); its name is known in
 * every build, so that tables and settings read alike everywhere. Adding an
 * engine: its line here, its file, its tests. */
#ifndef HAR_PATHS_H
#define HAR_PATHS_H

#include "core/common.h"

#ifdef HAR_HAVE_KERNELS
#define HAR_KERNELS_BUILT 1
#else
#define HAR_KERNELS_BUILT 0
#endif

#define HAR_ENGINE_LIST(X)                                                                        \
    X(HOST_SEGMENT, host_segment, 1, "CPU reduction in a node segment of host shared memory")      \
    X(IPC, ipc, HAR_KERNELS_BUILT, "GPU kernels over a CUDA IPC node segment")                    \
    X(NCCL, nccl, HAR_KERNELS_BUILT, "NCCL on the node (loaded at run time)")                     \
    HAR_TEST_ENGINE_LIST(X)

/* The test build's engine, which shows what adding one takes. */
#ifdef HAR_TEST_HOOKS
#define HAR_TEST_ENGINE_LIST(X) \
    X(FAKE, fake, 1, "test build: every rank gathers every input and reduces it alone (src/engines/fake_engine.c)")
#else
#define HAR_TEST_ENGINE_LIST(X)
#endif

/* The paths around the engines: X(id, name, doc). */
#define HAR_PATHS_BEFORE_ENGINES(X)                                                              \
    X(SEEN, "seen", "every MPI_Allreduce that reached har")                                      \
    X(MPI, "mpi", "engine: the MPI's own MPI_Allreduce")                                         \
    X(STAGED, "staged", "mpi with this rank's device buffers copied through host memory")
#define HAR_PATHS_AFTER_ENGINES(X)                                                               \
    X(ONE_SHOT, "one_shot", "every local rank reduced the whole vector")                         \
    X(TWO_SHOT, "two_shot", "reduce-scatter of shards, then all-gather")                         \
    X(RAILS, "rails", "nodes of equal size: local rank i carries shard i")                       \
    X(LEADER, "leader", "nodes of unequal size: local rank 0 carries the node")                  \
    X(RING, "ring", "inter-node ring over MPI point-to-point: the least data")                  \
    X(DOUBLING, "doubling", "inter-node recursive doubling over MPI point-to-point: the fewest steps") \
    X(INTER_MPI, "inter_mpi", "inter-node step by the MPI's MPI_Allreduce")                        \
    X(INTER_NCCL, "inter_nccl", "inter-node step by NCCL on the rail (HAR_INTER=nccl): device memory, host blocks through a device copy") \
    X(STREAMED, "streamed", "one rank per node, host buffers: the ring read the input and wrote the result as it went") \
    X(PUSH, "push", "one-shot kernels with no barrier and no host step: each rank pushed its input into every peer's memory with the call's number beside it") \
    X(AHEAD, "ahead", "device kernels launched with no host step before them: the local ranks met on the GPU (HAR_DEVICE_AHEAD_MAX, HAR_DEVICE_START_MAX for MPI_Iallreduce and MPI_Start; the push kernels always do)") \
    X(ENQUEUED, "enqueued", "har_allreduce_enqueue: the kernels queued on the application's stream, the host not waiting for them") \
    X(CAPTURED, "captured", "enqueued into a CUDA graph the stream was capturing: counted once, when captured; every replay is a new call") \
    X(PROGRESSED, "progressed", "MPI_Iallreduce or MPI_Start across nodes: har's blocking path, moved on by the completion calls (counted when it ends)") \
    X(LAUNCHER, "launcher", "MPI_Iallreduce or MPI_Start on the kernels of one node: the call returned before their launch, which a thread of har's made (HAR_LAUNCH_THREAD)")

typedef enum {
#define HAR_PATH_ENUM(id, name, doc) HAR_PATH_##id,
#define HAR_ENGINE_ENUM(id, name, built, doc) HAR_PATH_##id,
    HAR_PATHS_BEFORE_ENGINES(HAR_PATH_ENUM)
    HAR_ENGINE_LIST(HAR_ENGINE_ENUM)
    HAR_PATHS_AFTER_ENGINES(HAR_PATH_ENUM)
#undef HAR_PATH_ENUM
#undef HAR_ENGINE_ENUM
    HAR_PATH_COUNT
} har_path_t;
_Static_assert(HAR_PATH_COUNT <= 32, "paths are bits of an unsigned mask");

#define HAR_BIT(p) (1u << HAR_PATH_##p)

/* "seen", "mpi", ...; NULL for an unknown value. */
HAR_HIDDEN const char *har_path_name(int path);
HAR_HIDDEN const char *har_path_doc(int path);
/* The path of that name, or -1. */
HAR_HIDDEN int har_path_from_name(const char *name);

#endif
