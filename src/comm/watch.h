/* The death watch across nodes: a TCP connection between each rank and
 * each of its ring neighbours on other nodes (the rail, or the leaders'
 * communicator), over which nothing travels once it is made. The kernel
 * closes a process's sockets however the process ends, so a connection
 * that closes without the word "bye" tells of a death even when no rank
 * is left on the dead rank's node to tell the others (one rank per node,
 * or a node whose ranks all die at once). A host that loses power or a
 * cut link closes nothing: HAR_TIMEOUT bounds those waits.
 *
 * Made at a communicator's set-up, bounded to a second, never waited for
 * on the per-call path: where a neighbour cannot be reached (a firewall,
 * no common address) that side simply goes unwatched. A connection counts
 * only once the neighbour has answered a greeting that carries a number it
 * published, so a connection that reaches another process (an address
 * every node has, such as a container bridge's) is never taken for it. */
#ifndef HAR_WATCH_H
#define HAR_WATCH_H

#include <stdint.h>
#include "core/common.h"

#define HAR_WATCH_ADDRS 4

/* What a rank publishes (inside har_across_peer_t): where its listening
 * socket is, and the number a greeting must carry. */
typedef struct {
    uint32_t addr[HAR_WATCH_ADDRS];  /* IPv4, network order; loopback last */
    uint16_t port;                   /* network order; 0: no watch */
    uint16_t naddr;
    uint64_t nonce;
} har_watch_addr_t;

typedef struct {
    int listen_fd;                   /* during set-up only */
    int fd[2];                       /* 0: to the right neighbour, 1: from the left; -1: unwatched */
    int peer[2];                     /* their places across nodes */
    uint64_t nonce;
} har_watch_t;

/* Nothing watched (a node context's initial state). */
HAR_HIDDEN void har_watch_none(har_watch_t *w);
/* Before the set-up's exchange: a listening socket, described in `mine`
 * (port 0 if none could be made). */
HAR_HIDDEN void har_watch_listen(har_watch_t *w, har_watch_addr_t *mine);
/* After it, every rank at once: connects to the right neighbour (at place
 * `right_rank`, published `right`) and takes the left one's connection
 * (`left_rank`, `left`), within a second; then stops listening. */
HAR_HIDDEN void har_watch_join(har_watch_t *w, int me, int right_rank, const har_watch_addr_t *right, int left_rank,
                               const har_watch_addr_t *left);
/* A watched neighbour whose connection closed without "bye": its place
 * across nodes; -1 if none. One poll(2) of at most two sockets. */
HAR_HIDDEN int har_watch_lost(har_watch_t *w);
/* Says "bye" on every connection and closes them (a communicator freed). */
HAR_HIDDEN void har_watch_close(har_watch_t *w);

#endif
