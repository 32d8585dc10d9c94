/* The death watch across nodes (watch.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "comm/watch.h"
#include "core/log.h"
#include "host/segment.h"

#define GREETING_MAGIC 0x68617277u  /* "harw" */
#define ANSWER 'A'
#define BYE 'B'
#define JOIN_SECONDS 1.0     /* healthy networks join in a round trip */
#define ADDRESS_SECONDS 0.3  /* an address that does not answer by then: the next one */

typedef struct {
    uint32_t magic;
    int32_t from, to;   /* places across nodes */
    uint32_t unused;
    uint64_t nonce;     /* the one `to` published */
} greeting_t;

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

void har_watch_none(har_watch_t *w)
{
    w->listen_fd = w->fd[0] = w->fd[1] = -1;
    w->peer[0] = w->peer[1] = -1;
    w->nonce = 0;
}

void har_watch_listen(har_watch_t *w, har_watch_addr_t *mine)
{
    memset(mine, 0, sizeof *mine);
    har_watch_none(w);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0 ||
        getrandom(&w->nonce, sizeof w->nonce, GRND_NONBLOCK) != sizeof w->nonce) {
        HAR_LOG(HAR_LOG_DEBUG, "death watch: no listening socket (%s)", strerror(errno));
        if (fd >= 0) close(fd);
        return;
    }
    /* Every IPv4 address of an interface that is up, loopback last (it
     * serves only neighbours in this network namespace). */
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (int loopback = 0; loopback < 2; loopback++)
            for (struct ifaddrs *i = ifs; i && mine->naddr < HAR_WATCH_ADDRS; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                    !(i->ifa_flags & IFF_LOOPBACK) == !loopback)
                    mine->addr[mine->naddr++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        freeifaddrs(ifs);
    }
    w->listen_fd = fd;
    mine->port = a.sin_port;
    mine->nonce = w->nonce;
}

/* Starts a connection to address k of `to`; -1 if none could start. */
static int dial(const har_watch_addr_t *to, int k)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = to->port, .sin_addr.s_addr = to->addr[k]};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) close_fd(&fd);
    return fd;
}

void har_watch_join(har_watch_t *w, int me, int right_rank, const har_watch_addr_t *right, int left_rank,
                    const har_watch_addr_t *left)
{
    enum { DIALLING, GREETED, DONE } out = DIALLING;
    int k = 0, dialled = -1, taken = -1;
    double start = har_seg_now(), tried = start;
    if (w->listen_fd < 0) return;
    if (right->port == 0 || right->naddr == 0) out = DONE;
    else dialled = dial(right, 0);
    int expect_left = left->port != 0 && left->naddr != 0;  /* else it will not call */
    while ((out != DONE || (expect_left && w->fd[1] < 0)) && har_seg_now() - start < JOIN_SECONDS) {
        /* The right neighbour: a connection that takes the greeting and
         * answers; an address that refuses, closes or stays silent gives
         * way to the next. */
        if (out != DONE && (dialled < 0 || har_seg_now() - tried > ADDRESS_SECONDS)) {
            close_fd(&dialled);
            out = DIALLING;
            if (++k >= right->naddr) out = DONE;
            else dialled = dial(right, k), tried = har_seg_now();
            continue;
        }
        struct pollfd p[3] = {{dialled, out == DIALLING ? POLLOUT : POLLIN, 0}, {w->listen_fd, POLLIN, 0},
                              {taken, POLLIN, 0}};
        if (poll(p, 3, 10) < 0 && errno != EINTR) break;
        if (out != DONE && p[0].revents) {
            int err = 0;
            socklen_t len = sizeof err;
            greeting_t g = {GREETING_MAGIC, me, right_rank, 0, right->nonce};
            char answer = 0;
            if (out == DIALLING) {
                if (getsockopt(dialled, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0 &&
                    send(dialled, &g, sizeof g, MSG_NOSIGNAL) == (ssize_t)sizeof g)
                    out = GREETED;
                else close_fd(&dialled);  /* the next address, at the top */
            } else if (recv(dialled, &answer, 1, MSG_DONTWAIT) == 1 && answer == ANSWER) {
                w->fd[0] = dialled, w->peer[0] = right_rank, dialled = -1, out = DONE;
            } else close_fd(&dialled);
        }
        /* The left neighbour: one connection at a time, greeted for this
         * rank, or closed. */
        if (taken < 0 && w->fd[1] < 0 && (p[1].revents & POLLIN))
            taken = accept4(w->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        else if (taken >= 0 && p[2].revents) {
            greeting_t g;
            char answer = ANSWER;
            if (recv(taken, &g, sizeof g, MSG_DONTWAIT) == (ssize_t)sizeof g && g.magic == GREETING_MAGIC &&
                g.to == me && g.from == left_rank && g.nonce == w->nonce &&
                send(taken, &answer, 1, MSG_NOSIGNAL) == 1)
                w->fd[1] = taken, w->peer[1] = left_rank, taken = -1;
            else close_fd(&taken);
        }
    }
    close_fd(&dialled);
    close_fd(&taken);
    close_fd(&w->listen_fd);
    HAR_LOG(HAR_LOG_DEBUG, "death watch: place %d %s its right neighbour %d, %s its left %d", me,
            w->fd[0] >= 0 ? "watches" : "cannot watch", right_rank, w->fd[1] >= 0 ? "watches" : "cannot watch",
            left_rank);
}

int har_watch_lost(har_watch_t *w)
{
    struct pollfd p[2] = {{w->fd[0], POLLIN, 0}, {w->fd[1], POLLIN, 0}};  /* a negative fd is skipped */
    if ((w->fd[0] < 0 && w->fd[1] < 0) || poll(p, 2, 0) <= 0) return -1;
    for (int k = 0; k < 2; k++) {
        if (w->fd[k] < 0 || !p[k].revents) continue;
        char c = 0;
        ssize_t got = recv(w->fd[k], &c, 1, MSG_DONTWAIT);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (got == 1) {  /* "bye": it left in order (its last data may still be on the way) */
            close_fd(&w->fd[k]);
            continue;
        }
        return w->peer[k];  /* closed or reset without a word: the process is gone */
    }
    return -1;
}

void har_watch_close(har_watch_t *w)
{
    static const char bye = BYE;
    for (int k = 0; k < 2; k++)
        if (w->fd[k] >= 0) {
            /* Never SIGPIPE: the neighbour may be gone already. */
            if (send(w->fd[k], &bye, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
                HAR_LOG(HAR_LOG_DEBUG, "death watch: no bye to place %d (%s)", w->peer[k], strerror(errno));
            close_fd(&w->fd[k]);
        }
    close_fd(&w->listen_fd);
}
