/* The node context an engine works in: this rank's place in the
 * communicator and its node, the node's internal communicators, the host
 * segment, and rank 0's settings. Engines take this, not the whole
 * per-communicator state. Every wait that involves peers, and every
 * failure, goes through node/failure.h. */
#ifndef HAR_NODE_H
#define HAR_NODE_H

#include <sys/types.h>
#include "core/status.h"
#include "node/segment.h"
#include "node/watch.h"
#include "plan/plan.h"

/* Local ranks a node segment serves; larger nodes go to the MPI. */
#define HAR_MAX_LOCAL 256

/* Where each local rank is, exchanged at set-up. */
typedef struct {
    int comm_rank, world_rank;
    pid_t pid;
    unsigned long pid_ns;        /* /proc/self/ns/pid's inode: pids compare only within one namespace */
} har_peer_t;

/* A rank this one exchanges with across nodes: its ranks in the
 * communicator and in MPI_COMM_WORLD, its host, and where its death watch
 * listens. */
typedef struct {
    int32_t comm_rank, world_rank;
    char host[48];
    har_node_watch_addr_t watch;
} har_across_peer_t;

typedef struct har_node {
    MPI_Comm comm;                  /* the application's communicator */
#ifdef HAR_HAVE_MPIX_STREAM
    /* MPICH: comm's MPIX_Stream where it is a stream communicator, whose
     * requests only MPIX_Stream_progress moves (MPI_Test does not). A flag
     * beside it, not MPIX_STREAM_NULL: a node zeroed by memset (har-info's
     * survey) must read as none, and MPICH's null stream is not 0. */
    int comm_has_stream;
    MPIX_Stream comm_stream;
#endif
    int rank, size;                 /* in it */
    int local_rank, local_size, node, nnodes;
    int uniform;                    /* every node holds local_size ranks: rails; else leader mode */
    int cores;                      /* this rank's share of the cores it may run on, at set-up (at least 1) */
    MPI_Comm node_comm, rail_comm, leader_comm;  /* MPI_COMM_NULL where unused */
    const har_settings_t *set;      /* rank 0's */
    har_node_seg_t seg;                  /* the host segment: control lines and slots */
    unsigned host_seq;              /* host-segment chunks so far: the slot parity; the same on every local rank */
    char *scratch;                  /* slot_bytes: ring blocks, staging of device output */
    struct har_ring_msgs *ring_msgs; /* the ring's small messages, across nodes (inter.h) */
    struct har_inter_nccl *inter_nccl;  /* NCCL's communicator on the rail, once made (inter/nccl.c) */
    har_peer_t *peers;              /* by local rank; NULL until exchanged */
    uint64_t call;                  /* the call in progress, for messages */
    /* Failure notices between nodes: a receive is always posted on the
     * communicator this rank exchanges data with across nodes (its rail, or
     * the leaders'), and every wait on it tests it. */
    MPI_Comm notice_comm;           /* the rail, or the leaders': where the ring runs */
    int across_rank, across_size;   /* this rank's place there */
    har_across_peer_t *across;      /* every rank there, by its place (NULL until the transports' set-up):
                                     * a time-out waiting for one names it */
    har_node_watch_t watch;              /* connections to the ring neighbours across nodes, closed by a death */
    MPI_Request notice_req;
    har_failure_t notice_in;
    har_failure_t *early;           /* the failure, while no segment holds it (before, or after a failed set-up) */
} har_node_t;

#include "node/failure.h"

#endif
