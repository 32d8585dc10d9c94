/* The death watch across nodes: a TCP connection between each rank and
 * each of its ring neighbours on other nodes (the rail, or the leaders'
 * communicator), over which nothing travels once it is made. The kernel
 * closes a process's sockets however the process ends, so a connection
 * that closes without the word "bye" tells of a death even when no rank
 * is left on the dead rank's node to tell the others (one rank per node,
 * or a node whose ranks all die at once). A host that loses power or a
 * cut link closes nothing: HAR_TIMEOUT bounds those waits.
 *
 * Made at a communicator's set-up, bounded to a second (five where a
 * neighbour that answered is slow to ack: both ends must agree on whether
 * a connection counts), never waited for on the per-call path: where a
 * neighbour cannot be reached (a firewall, no common address) that side
 * simply goes unwatched.
 *
 * Anyone on the network can connect to a listening port, and an address of
 * the neighbour's may reach another process (an address every node has,
 * such as a container bridge's), so a connection counts only once each end
 * has proved that it knows the key the listening rank published over the
 * MPI: a challenge each way, answered with a keyed hash of both challenges
 * (core/secret.h). The key never crosses the network, and a stranger can
 * neither be taken for a neighbour nor, by closing, fake a death. A rank
 * that leaves in order (MPI_Comm_free, MPI_Finalize) says "bye" with the
 * number of calls it made: a neighbour still waiting in a later call
 * knows that it left rather than died. */
#ifndef HAR_WATCH_H
#define HAR_WATCH_H

#include <stdint.h>
#include "core/common.h"
#include "core/secret.h"

#define HAR_WATCH_ADDRS 4

/* What a rank publishes (inside har_across_peer_t): where its listening
 * socket is, and the number a greeting must carry. */
typedef struct {
    uint32_t addr[HAR_WATCH_ADDRS];  /* IPv4, network order; loopback last */
    uint16_t port;                   /* network order; 0: no watch */
    uint16_t naddr;
    har_secret_t key;                /* what both ends of a connection to this rank prove they know */
} har_node_watch_addr_t;

/* What a rank says when it leaves in order: how many calls it made on the
 * communicator, and the last failure its process reported on any (why it
 * may have left early), for the message of a neighbour that still waits. */
typedef struct {
    uint64_t calls;
    int32_t seen_status;             /* har_status_t; 0: it saw none */
    int32_t seen_world;              /* that failure's rank at fault in MPI_COMM_WORLD; -1: unknown */
    char seen_host[48];
} har_node_watch_bye_t;

typedef struct {
    int listen_fd;                   /* during set-up only */
    int fd[2];                       /* 0: to the right neighbour, 1: from the left; -1: unwatched */
    int peer[2];                     /* their places across nodes */
    int said_bye[2];
    har_node_watch_bye_t bye[2];          /* what a neighbour said when it left */
    har_secret_t key;
} har_node_watch_t;

/* Nothing watched (a node context's initial state). */
HAR_HIDDEN void har_node_watch_none(har_node_watch_t *w);
/* Before the set-up's exchange: a listening socket, described in `mine`
 * (port 0 if none could be made). */
HAR_HIDDEN void har_node_watch_listen(har_node_watch_t *w, har_node_watch_addr_t *mine);
/* After it, every rank at once: connects to the right neighbour (at place
 * `right_rank`, published `right`) and takes the left one's connection
 * (`left_rank`, `left`), within a second (more only to hear whether a
 * right neighbour that answered counts the connection); then stops
 * listening. */
HAR_HIDDEN void har_node_watch_join(har_node_watch_t *w, int me, int right_rank, const har_node_watch_addr_t *right,
                                    int left_rank, const har_node_watch_addr_t *left);
/* A watched neighbour that is gone while this rank waits in call number
 * `call` (from 0): its place across nodes, with *left NULL if its
 * connection closed without "bye" (it died), or what it said if it said
 * "bye" before making that call (it left); -1 if none. One poll(2) of at
 * most two sockets. */
HAR_HIDDEN int har_node_watch_lost(har_node_watch_t *w, uint64_t call, const har_node_watch_bye_t **left);
/* The handshake's keyed hash: over which message (`what`: "answer" from
 * the listener, "confirm" from the dialer), who to whom (places across
 * nodes) and both challenges. */
HAR_HIDDEN uint64_t har_node_watch_tag(const har_secret_t *key, const char *what, int32_t from, int32_t to,
                                       uint64_t dialer, uint64_t listener);
/* Says "bye" on every connection and closes them (a communicator freed,
 * or MPI_Finalize). */
HAR_HIDDEN void har_node_watch_close(har_node_watch_t *w, const har_node_watch_bye_t *bye);

#endif
