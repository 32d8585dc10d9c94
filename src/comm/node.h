/* The node context an engine works in: this rank's place in the
 * communicator and its node, the node's internal communicators, the host
 * segment, and rank 0's settings. Engines take this, not the whole
 * per-communicator state. */
#ifndef HAR_NODE_H
#define HAR_NODE_H

#include "core/status.h"
#include "host/segment.h"
#include "plan/plan.h"

/* Local ranks a node segment serves; larger nodes go to the MPI. */
#define HAR_MAX_LOCAL 256

typedef struct har_node {
    MPI_Comm comm;                  /* the application's communicator */
    int rank, size;                 /* in it */
    int local_rank, local_size, node, nnodes;
    int uniform;                    /* every node holds local_size ranks: rails; else leader mode */
    MPI_Comm node_comm, rail_comm, leader_comm;  /* MPI_COMM_NULL where unused */
    const har_settings_t *set;      /* rank 0's */
    har_seg_t seg;                  /* the host segment: control lines and slots */
    unsigned host_seq;              /* host-segment chunks so far: the slot parity; the same on every local rank */
    char *scratch;                  /* slot_bytes: ring blocks, staging of device output */
} har_node_t;

/* Waits for every local rank to finish the step this rank just finished. */
HAR_HIDDEN har_status_t har_node_wait_all(har_node_t *node, const char *step);
/* Waits for one local rank. */
HAR_HIDDEN har_status_t har_node_wait_one(har_node_t *node, int peer, const char *step);
/* While the GPU works: are the local peers alive, and within HAR_TIMEOUT of
 * `started` (har_seg_now())? Marks the segment failed (logged) if not. */
HAR_HIDDEN har_status_t har_node_check_peers(har_node_t *node, double started, const char *step);
/* Agreement over the node communicator: 1 on every local rank if `ok` is 1
 * on all. Otherwise the lowest local rank where it failed says why in one
 * warning (`quiet`: at debug level), "<what>: <why>; <consequence>". */
HAR_HIDDEN int har_node_agree(har_node_t *node, int ok, int quiet, const char *what, const char *why,
                              const char *consequence);

#endif
