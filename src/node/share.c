/* The node segment, made by local rank 0 and mapped by every local rank
 * (share.h).
 *
 * First choice: anonymous memory (memfd) whose file descriptor rank 0 hands
 * to each peer over an abstract Unix socket (SCM_RIGHTS). Neither has a name
 * in the file system, and an abstract socket's name vanishes with the
 * socket, so no moment of death leaves anything behind. Rank 0 accepts
 * connections while the node's agreement is in flight: when it completes,
 * every peer has either received the descriptor or given up, and nobody
 * waits for a connection that will not come. Where that fails on some rank
 * (ranks in different network namespaces cannot reach an abstract socket),
 * a named segment in /dev/shm, held by its creator's lock from the start and
 * unlinked as soon as every rank has mapped it.
 *
 * Anyone on the machine can see an abstract socket's name and connect to
 * it, so the descriptor goes only to a process that proves it belongs to
 * the job: it runs as the same user (the kernel's SO_PEERCRED) and it sends
 * the random token that rank 0 gave its local peers with the name, over the
 * node communicator, which no other process can read. A peer checks the
 * other end as well: the same user and, within one PID namespace, rank 0's
 * own pid. The named fallback's file is the user's alone (mode 0600), with
 * a random name, and a peer maps it only if the user owns it. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "node/share.h"
#include "core/config.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/test.h"

#define NAME_LEN 64          /* fits an abstract socket's address */
#define PENDING 16           /* connections rank 0 holds at once while their tokens come */
#define TOKEN_SECONDS 2.0    /* a connection whose token has not come by then is dropped */

/* What rank 0 gives its local peers over the node communicator. */
typedef struct {
    char name[NAME_LEN];     /* the socket's or the segment's; empty: none */
    har_secret_t token;      /* what a connection must send to get the descriptor */
} har_offer_t;

/* A name no other process can guess: the pid and 64 random bits. */
static int make_name(char name[NAME_LEN], const char *prefix)
{
    uint64_t r;
    if (har_random(&r, sizeof r) != 0) return -1;
    snprintf(name, NAME_LEN, "%shar-%d-%016llx", prefix, (int)getpid(), (unsigned long long)r);
    return 0;
}

/* The user and pid at the other end of a Unix socket, from the kernel. */
static int peer_cred(int s, struct ucred *cred)
{
    socklen_t len = sizeof *cred;
    return getsockopt(s, SOL_SOCKET, SO_PEERCRED, cred, &len) == 0 && len == sizeof *cred ? 0 : -1;
}

/* An abstract socket's address: a leading NUL, then the name. */
static socklen_t address(struct sockaddr_un *addr, const char *name)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    size_t len = strnlen(name, NAME_LEN - 1);  /* names are made below, shorter than NAME_LEN */
    memcpy(addr->sun_path + 1, name, len);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

static void send_fd(int conn, int fd)
{
    char byte = 'h';
    struct iovec iov = {&byte, 1};
    union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(int))]; } control;
    struct msghdr msg = {0};
    memset(&control, 0, sizeof control);  /* its padding goes to the kernel too */
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(conn, &msg, MSG_NOSIGNAL) != 1) HAR_LOG(HAR_LOG_DEBUG, "sending the segment: %s", strerror(errno));
}

static int recv_fd(int conn)
{
    char byte;
    struct iovec iov = {&byte, 1};
    union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(int))]; } control;
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    if (recvmsg(conn, &msg, MSG_CMSG_CLOEXEC) != 1) return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* Is the other end of `s` local rank 0's process? The same user, and in
 * the same PID namespace the same pid (across namespaces pids say nothing). */
static int is_rank0(const har_node_t *node, int s)
{
    struct ucred cred;
    const har_peer_t *me = &node->peers[node->local_rank], *zero = &node->peers[0];
    if (peer_cred(s, &cred) != 0) return 0;
    if (cred.uid != geteuid() || (zero->pid_ns == me->pid_ns && cred.pid != zero->pid)) {
        har_log(HAR_LOG_WARN, "the node segment's socket answered from another process (uid %u, pid %d), not "
                "local rank 0: refused", (unsigned)cred.uid, (int)cred.pid);
        return 0;
    }
    return 1;
}

/* A peer: the descriptor from rank 0, or -1 (this rank gives up; the
 * agreement says so). Bounded by the node's checks. */
static int fetch(har_node_t *node, const har_offer_t *offer, har_status_t *st)
{
    struct sockaddr_un addr;
    socklen_t len = address(&addr, offer->name);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), fd = -1, connected = 0;
#ifdef HAR_TEST_HOOKS
    if (HAR_CFG(test_no_socket).i == node->local_rank) {
        if (s >= 0) close(s);
        return -1;
    }
#endif
    double started = har_node_seg_now();
    for (unsigned long i = 0; s >= 0 && fd < 0; i++) {
        if (!connected) {
            connected = connect(s, (struct sockaddr *)&addr, len) == 0 || errno == EISCONN;
            if (!connected && errno != EAGAIN && errno != EINPROGRESS) {
                HAR_LOG(HAR_LOG_DEBUG, "reaching local rank 0's socket: %s", strerror(errno));
                break;
            }
            /* A stream socket on this machine takes the token in one piece. */
            if (connected && (!is_rank0(node, s) ||
                              send(s, &offer->token, sizeof offer->token, MSG_NOSIGNAL) != sizeof offer->token))
                break;
        }
        struct pollfd p = {s, POLLIN, 0};
        if (connected && poll(&p, 1, 1) == 1) {
            fd = recv_fd(s);
            if (fd < 0) break;  /* rank 0 closed: it gave up or died */
        }
        if (fd < 0 && i % 64 == 63 && (*st = har_node_poll(node, started, "segment")) != HAR_OK) break;
    }
    if (s >= 0) close(s);
    return fd;
}

/* Rank 0: a connection waiting for its token, or -1. */
typedef struct {
    int fd;
    double since;
} pending_t;

static void drop(pending_t *p)
{
    close(p->fd);
    p->fd = -1;
}

/* Rank 0 takes a new connection: refused at once unless it comes from this
 * user; otherwise it waits for its token in a free place, or the oldest's. */
static void take(int listener, pending_t *pending)
{
    int conn = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    struct ucred cred = {.pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1};  /* as said if the kernel says nothing */
    if (conn < 0) return;
    if (peer_cred(conn, &cred) != 0 || cred.uid != geteuid()) {
        HAR_WARN_ONCE("refused a connection to the node segment's socket from another user (uid %u, pid %d)",
                      (unsigned)cred.uid, (int)cred.pid);
        close(conn);
        return;
    }
    pending_t *slot = &pending[0];
    for (int k = 0; k < PENDING && slot->fd >= 0; k++)
        if (pending[k].fd < 0 || pending[k].since < slot->since) slot = &pending[k];
    if (slot->fd >= 0) drop(slot);
    slot->fd = conn;
    slot->since = har_node_seg_now();
}

/* Rank 0 reads a pending connection's token: the descriptor for the right
 * one, a close for anything else. */
static void answer(pending_t *p, int fd, const har_secret_t *token)
{
    har_secret_t got;
    ssize_t n = recv(p->fd, &got, sizeof got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n == (ssize_t)sizeof got && har_secret_equal(&got, token, sizeof got)) send_fd(p->fd, fd);
    else if (n != 0) HAR_WARN_ONCE("refused a connection to the node segment's socket that did not present the "
                                   "job's token (another job of this user?)");
    drop(p);
}

/* Rank 0: hands `fd` to every local peer that connects until the agreement
 * request completes. */
static har_status_t serve(har_node_t *node, int listener, int fd, const har_secret_t *token, MPI_Request *agree)
{
    pending_t pending[PENDING];
    struct pollfd p[1 + PENDING];
    har_status_t st = HAR_OK;
    double started = har_node_seg_now();
    for (int k = 0; k < PENDING; k++) pending[k].fd = -1;
    for (unsigned long i = 0;; i++) {
        int done = 0;
        if (PMPI_Test(agree, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            har_node_fail(node, HAR_ERR_INTERNAL, -1, "segment");
            st = HAR_ERR_INTERNAL;
            break;
        }
        if (done) break;
        if (listener < 0) {
            sched_yield();
        } else {
            p[0] = (struct pollfd){listener, POLLIN, 0};
            for (int k = 0; k < PENDING; k++) p[1 + k] = (struct pollfd){pending[k].fd, POLLIN, 0};
            if (poll(p, 1 + PENDING, 1) > 0) {
                for (int k = 0; k < PENDING; k++)
                    if (pending[k].fd >= 0 && p[1 + k].revents) answer(&pending[k], fd, token);
                if (p[0].revents & POLLIN) take(listener, pending);
            }
            for (int k = 0; k < PENDING; k++)
                if (pending[k].fd >= 0 && har_node_seg_now() - pending[k].since > TOKEN_SECONDS) drop(&pending[k]);
        }
        if (i % 64 == 63 && (st = har_node_poll_exchange(node, started, "segment")) != HAR_OK) break;
    }
    for (int k = 0; k < PENDING; k++)
        if (pending[k].fd >= 0) drop(&pending[k]);
    return st;
}

/* Everyone's `ok`, agreed (min), with rank 0 serving connections meanwhile. */
static har_status_t agree(har_node_t *node, int *ok, int listener, int fd, const har_secret_t *token)
{
    MPI_Request req;
    int mine = *ok;
    int posted = PMPI_Iallreduce(&mine, ok, 1, MPI_INT, MPI_MIN, node->node_comm, &req);
    if (posted == MPI_SUCCESS && node->local_rank == 0) return serve(node, listener, fd, token, &req);
    return har_node_exchange(node, posted, &req, "segment");
}

/* Rank 0's offer (an empty name: none) to every local rank. */
static har_status_t share_offer(har_node_t *node, har_offer_t *offer)
{
    MPI_Request req;
    return har_node_exchange(node, PMPI_Ibcast(offer, (int)sizeof *offer, MPI_BYTE, 0, node->node_comm, &req), &req,
                             "segment");
}

static har_status_t by_socket(har_node_t *node, size_t slot, int *ok)
{
    har_offer_t offer;
    int fd = -1, listener = -1;
    har_status_t st;
    memset(&offer, 0, sizeof offer);
    if (node->local_rank == 0 && (fd = har_node_seg_create(node->local_size, slot)) >= 0) {
        struct sockaddr_un addr;
        if (make_name(offer.name, "") != 0 || har_random(&offer.token, sizeof offer.token) != 0) {
            HAR_LOG(HAR_LOG_DEBUG, "no random numbers for the segment's socket: %s", strerror(errno));
            offer.name[0] = '\0';
        } else {
            socklen_t len = address(&addr, offer.name);
            listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (listener < 0 || bind(listener, (struct sockaddr *)&addr, len) != 0 || listen(listener, 64) != 0) {
                HAR_LOG(HAR_LOG_DEBUG, "an abstract socket for the segment: %s", strerror(errno));
                offer.name[0] = '\0';
            }
        }
    }
    HAR_TEST_POINT("segment-made");
    st = share_offer(node, &offer);
    if (st == HAR_OK && node->local_rank != 0 && offer.name[0]) fd = fetch(node, &offer, &st);
    HAR_TEST_POINT("segment-shared");
    *ok = st == HAR_OK && offer.name[0] && fd >= 0 &&
          har_node_seg_attach(&node->seg, node->local_rank == 0 ? dup(fd) : fd, node->local_rank) == HAR_OK;
    if (st == HAR_OK) st = agree(node, ok, listener, fd, &offer.token);
    if (listener >= 0) close(listener);
    if (node->local_rank == 0 && fd >= 0) close(fd);  /* its mapping keeps its own descriptor */
    if (st != HAR_OK || !*ok) har_node_drop_segment(node);
    return st;
}

static har_status_t by_name(har_node_t *node, size_t slot, int *ok)
{
    har_offer_t offer;
    har_status_t st;
    memset(&offer, 0, sizeof offer);
    if (node->local_rank == 0) {
        har_node_seg_clean(1, HAR_LOG_WARN);
        /* Random, not only the pid: hosts made of PID namespaces may share /dev/shm. */
        if (make_name(offer.name, "/") != 0 ||
            har_node_seg_create_named(&node->seg, offer.name, node->local_size, slot) != HAR_OK)
            offer.name[0] = '\0';
    }
    HAR_TEST_POINT("segment-named");
    st = share_offer(node, &offer);
    int fd = -1;
    if (st == HAR_OK && node->local_rank != 0 && offer.name[0] && (fd = har_node_seg_open_named(offer.name)) >= 0)
        har_node_seg_attach(&node->seg, fd, node->local_rank);
    *ok = st == HAR_OK && node->seg.base != NULL;
    if (st == HAR_OK) st = agree(node, ok, -1, -1, NULL);
    /* Everyone has mapped it, or given up: the name can go. */
    if (node->local_rank == 0 && offer.name[0]) har_node_seg_unlink(offer.name);
    if (st != HAR_OK || !*ok) har_node_drop_segment(node);
    return st;
}

har_status_t har_node_share(har_node_t *node, size_t slot, int *ok)
{
    har_status_t st = by_socket(node, slot, ok);
    if (st == HAR_OK && !*ok) {
        HAR_LOG(HAR_LOG_DEBUG, "node %d: the segment could not be passed over a socket; a named one instead",
                node->node);
        st = by_name(node, slot, ok);
    }
    if (st == HAR_OK && *ok) har_node_attached(node);
    return st;
}
