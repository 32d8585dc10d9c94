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
 * unlinked as soon as every rank has mapped it. */
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
#include <time.h>
#include <unistd.h>
#include "comm/share.h"
#include "core/config.h"
#include "core/log.h"
#include "core/test.h"

#define NAME_LEN 64  /* fits an abstract socket's address */
static unsigned counter;

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

/* A peer: the descriptor from rank 0, or -1 (this rank gives up; the
 * agreement says so). Bounded by the node's checks. */
static int fetch(har_node_t *node, const char *name, har_status_t *st)
{
    struct sockaddr_un addr;
    socklen_t len = address(&addr, name);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), fd = -1, connected = 0;
#ifdef HAR_TEST_HOOKS
    if (HAR_CFG(test_no_socket).i == node->local_rank) {
        if (s >= 0) close(s);
        return -1;
    }
#endif
    double started = har_seg_now();
    for (unsigned long i = 0; s >= 0 && fd < 0; i++) {
        if (!connected) {
            connected = connect(s, (struct sockaddr *)&addr, len) == 0 || errno == EISCONN;
            if (!connected && errno != EAGAIN && errno != EINPROGRESS) {
                HAR_LOG(HAR_LOG_DEBUG, "reaching local rank 0's socket: %s", strerror(errno));
                break;
            }
        }
        struct pollfd p = {s, POLLIN, 0};
        if (connected && poll(&p, 1, 1) == 1) {
            fd = recv_fd(s);
            if (fd < 0) break;  /* rank 0 closed: it gave up or died */
        }
        if (i % 64 == 63 && (*st = har_node_check(node, started, "segment")) != HAR_OK) break;
    }
    if (s >= 0) close(s);
    return fd;
}

/* Rank 0: hands `fd` to every peer that connects until the agreement
 * request completes. */
static har_status_t serve(har_node_t *node, int listener, int fd, MPI_Request *agree)
{
    double started = har_seg_now();
    for (unsigned long i = 0;; i++) {
        int done = 0;
        if (PMPI_Test(agree, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            har_node_fail(node, HAR_ERR_INTERNAL, -1, "segment");
            return HAR_ERR_INTERNAL;
        }
        if (done) return HAR_OK;
        struct pollfd p = {listener, POLLIN, 0};
        if (listener >= 0 && poll(&p, 1, 1) == 1) {
            int conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
            if (conn >= 0) {
                send_fd(conn, fd);
                close(conn);
            }
        } else if (listener < 0) {
            sched_yield();
        }
        har_status_t st;
        if (i % 64 == 63 && (st = har_node_check(node, started, "segment")) != HAR_OK) return st;
    }
}

/* Everyone's `ok`, agreed (min), with rank 0 serving connections meanwhile. */
static har_status_t agree(har_node_t *node, int *ok, int listener, int fd)
{
    MPI_Request req;
    int mine = *ok;
    int posted = PMPI_Iallreduce(&mine, ok, 1, MPI_INT, MPI_MIN, node->node_comm, &req);
    if (posted == MPI_SUCCESS && node->local_rank == 0) return serve(node, listener, fd, &req);
    return har_node_exchange(node, posted, &req, "segment");
}

/* Rank 0's name for the segment (empty: none) to every local rank. */
static har_status_t share_name(har_node_t *node, char name[NAME_LEN])
{
    MPI_Request req;
    return har_node_exchange(node, PMPI_Ibcast(name, NAME_LEN, MPI_CHAR, 0, node->node_comm, &req), &req, "segment");
}

static har_status_t by_socket(har_node_t *node, size_t slot, int *ok)
{
    char name[NAME_LEN] = "";
    int fd = -1, listener = -1;
    har_status_t st;
    if (node->local_rank == 0 && (fd = har_seg_create(node->local_size, slot)) >= 0) {
        struct sockaddr_un addr;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(name, sizeof name, "har-%d-%u-%lx", (int)getpid(),
                 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED), (unsigned long)now.tv_nsec);
        socklen_t len = address(&addr, name);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (listener < 0 || bind(listener, (struct sockaddr *)&addr, len) != 0 || listen(listener, 64) != 0) {
            HAR_LOG(HAR_LOG_DEBUG, "an abstract socket for the segment: %s", strerror(errno));
            name[0] = '\0';
        }
    }
    HAR_TEST_POINT("segment-made");
    st = share_name(node, name);
    if (st == HAR_OK && node->local_rank != 0 && name[0]) fd = fetch(node, name, &st);
    HAR_TEST_POINT("segment-shared");
    *ok = st == HAR_OK && name[0] && fd >= 0 &&
          har_seg_attach(&node->seg, node->local_rank == 0 ? dup(fd) : fd, node->local_rank) == HAR_OK;
    if (st == HAR_OK) st = agree(node, ok, listener, fd);
    if (listener >= 0) close(listener);
    if (node->local_rank == 0 && fd >= 0) close(fd);  /* its mapping keeps its own descriptor */
    if (st != HAR_OK || !*ok) har_node_drop_segment(node);
    return st;
}

static har_status_t by_name(har_node_t *node, size_t slot, int *ok)
{
    char name[NAME_LEN] = "";
    har_status_t st;
    if (node->local_rank == 0) {
        har_seg_clean(HAR_LOG_WARN);
        /* The time too: hosts made of PID namespaces may share /dev/shm. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(name, sizeof name, "/har-%d-%u-%lx", (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED),
                 (unsigned long)now.tv_nsec);
        if (har_seg_create_named(&node->seg, name, node->local_size, slot) != HAR_OK) name[0] = '\0';
    }
    HAR_TEST_POINT("segment-named");
    st = share_name(node, name);
    int fd = -1;
    if (st == HAR_OK && node->local_rank != 0 && name[0] && (fd = har_seg_open_named(name)) >= 0)
        har_seg_attach(&node->seg, fd, node->local_rank);
    *ok = st == HAR_OK && node->seg.base != NULL;
    if (st == HAR_OK) st = agree(node, ok, -1, -1);
    /* Everyone has mapped it, or given up: the name can go. */
    if (node->local_rank == 0 && name[0]) har_seg_unlink(name);
    if (st != HAR_OK || !*ok) har_node_drop_segment(node);
    return st;
}

har_status_t har_share_segment(har_node_t *node, size_t slot, int *ok)
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
