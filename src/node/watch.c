/* The death watch across nodes (watch.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "node/watch.h"
#include "core/log.h"
#include "node/segment.h"

#define HELLO_MAGIC 0x68617277u  /* "harw" */
#define ACK 'A'
#define BYE 'B'
#define JOIN_SECONDS 1.0     /* healthy networks join in two round trips */
#define ADDRESS_SECONDS 0.3  /* an address that does not answer by then: the next one */
/* A dialer that has sent its confirmation waits for the listener's
 * decision (its ack, or a close) however long its own timers say: the
 * listener counts the connection from the moment it acks, so a dialer
 * that gave up then would leave it watching a closed connection, a death
 * that never happened. The listener decides within its own join's second;
 * the rest is for a machine with more ranks than cores. */
#define DECISION_SECONDS 5.0
#define PENDING 8            /* connections the listener holds at once while they prove themselves */

/* The handshake: hello (dialer), answer (listener), confirm (dialer), ack
 * (listener). Each end proves it knows the listener's key by a tag over
 * both challenges, so no tag can be replayed on another connection. */
typedef struct {
    uint32_t magic;
    int32_t from, to;    /* places across nodes */
    uint32_t unused;
    uint64_t challenge;  /* the dialer's */
} hello_t;
typedef struct {
    uint64_t challenge;  /* the listener's */
    uint64_t tag;        /* har_node_watch_tag("answer") */
} answer_t;

uint64_t har_node_watch_tag(const har_secret_t *key, const char *what, int32_t from, int32_t to, uint64_t dialer,
                           uint64_t listener)
{
    struct {
        char what[8];
        int32_t from, to;
        uint64_t dialer, listener;
    } m;
    memset(&m, 0, sizeof m);
    memcpy(m.what, what, strnlen(what, sizeof m.what));  /* zero-padded by the memset */
    m.from = from, m.to = to, m.dialer = dialer, m.listener = listener;
    return har_secret_tag(key, &m, sizeof m);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Takes exactly n bytes if they have all come: 1; 0 while they have not;
 * -1 if the connection closed or failed first. */
static int take(int fd, void *buf, size_t n)
{
    ssize_t got = recv(fd, buf, n, MSG_DONTWAIT | MSG_PEEK);
    if (got < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (got == 0) return -1;
    if ((size_t)got < n) return 0;
    return recv(fd, buf, n, MSG_DONTWAIT) == (ssize_t)n ? 1 : -1;
}

static int put(int fd, const void *buf, size_t n) { return send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n; }

void har_node_watch_none(har_node_watch_t *w)
{
    memset(w, 0, sizeof *w);
    w->listen_fd = w->fd[0] = w->fd[1] = -1;
    w->peer[0] = w->peer[1] = -1;
}

void har_node_watch_listen(har_node_watch_t *w, har_node_watch_addr_t *mine)
{
    memset(mine, 0, sizeof *mine);
    har_node_watch_none(w);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, PENDING) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0 || har_random(&w->key, sizeof w->key) != 0) {
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
    mine->key = w->key;
}

/* Starts a connection to address k of `to`; -1 if none could start. */
static int dial(const har_node_watch_addr_t *to, int k)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = to->port, .sin_addr.s_addr = to->addr[k]};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) close_fd(&fd);
    return fd;
}

/* The dialing side: one connection at a time to the right neighbour. */
typedef struct {
    enum { DIALLING, HELLO_SENT, CONFIRMED, DONE } state;
    int fd, k;
    double tried, confirmed;  /* when the address was dialled; when the confirmation went */
    uint64_t challenge;
} dialer_t;

/* The dialer's next step on a connection that has something to say;
 * returns 0 when the connection is no good (the next address). */
static int dialer_step(dialer_t *d, har_node_watch_t *w, int me, int right_rank, const har_node_watch_addr_t *right)
{
    if (d->state == DIALLING) {
        int err = 0;
        socklen_t len = sizeof err;
        hello_t h = {HELLO_MAGIC, me, right_rank, 0, 0};
        if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err || har_random(&d->challenge, 8) != 0)
            return 0;
        h.challenge = d->challenge;
        d->state = HELLO_SENT;
        return put(d->fd, &h, sizeof h);
    }
    if (d->state == HELLO_SENT) {
        answer_t a;
        int got = take(d->fd, &a, sizeof a);
        if (got <= 0) return got == 0;
        /* Only a holder of the neighbour's key can make this tag. */
        if (a.tag != har_node_watch_tag(&right->key, "answer", me, right_rank, d->challenge, a.challenge)) return 0;
        uint64_t confirm = har_node_watch_tag(&right->key, "confirm", me, right_rank, d->challenge, a.challenge);
        d->state = CONFIRMED;
        d->confirmed = har_node_seg_now();
        return put(d->fd, &confirm, sizeof confirm);
    }
    char ack = 0;
    int got = take(d->fd, &ack, 1);
    if (got <= 0) return got == 0;
    if (ack != ACK) return 0;
    w->fd[0] = d->fd, w->peer[0] = right_rank, d->fd = -1, d->state = DONE;
    return 1;
}

/* The listening side: connections from anyone, each until it proves itself
 * the left neighbour, fails to, or a newer one needs its place. */
typedef struct {
    int fd;
    int answered;
    double since;
    uint64_t dialer, listener;  /* the challenges */
} caller_t;

/* take() on a caller that has something to read. Neighbours send each
 * message whole, so one that stays incomplete is a stranger's: it is
 * dropped after ADDRESS_SECONDS rather than polled readable, in a spin,
 * until the join ends. */
static int caller_take(caller_t *c, void *buf, size_t n)
{
    int got = take(c->fd, buf, n);
    if (got == 0 && har_node_seg_now() - c->since > ADDRESS_SECONDS) close_fd(&c->fd);
    return got;
}

static void listener_step(caller_t *c, har_node_watch_t *w, int me, int left_rank)
{
    if (!c->answered) {
        hello_t h;
        answer_t a;
        int got = caller_take(c, &h, sizeof h);
        if (got == 0) return;
        if (got < 0 || h.magic != HELLO_MAGIC || h.to != me || h.from != left_rank ||
            har_random(&a.challenge, sizeof a.challenge) != 0) {
            close_fd(&c->fd);
            return;
        }
        c->dialer = h.challenge, c->listener = a.challenge;
        a.tag = har_node_watch_tag(&w->key, "answer", left_rank, me, c->dialer, c->listener);
        c->answered = 1;
        if (!put(c->fd, &a, sizeof a)) close_fd(&c->fd);
        return;
    }
    uint64_t confirm;
    char ack = ACK, next;
    int got = caller_take(c, &confirm, sizeof confirm);
    if (got == 0) return;
    /* A dialer that waited for the ack in vain (DECISION_SECONDS) closed
     * after its confirmation: the close, queued behind it, says not to count
     * the connection (an ack into it would still be sent). */
    if (got > 0 && w->fd[1] < 0 &&
        confirm == har_node_watch_tag(&w->key, "confirm", left_rank, me, c->dialer, c->listener) &&
        recv(c->fd, &next, 1, MSG_PEEK | MSG_DONTWAIT) != 0 && put(c->fd, &ack, 1)) {
        w->fd[1] = c->fd, w->peer[1] = left_rank, c->fd = -1;
        return;
    }
    close_fd(&c->fd);
}

/* A new connection, in a free place or the oldest one's; 0 where none
 * can be taken for good (no descriptor left: the connection stays in the
 * backlog, readable, and polling it again would only spin). */
static int admit(int listen_fd, caller_t *callers)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM;
    caller_t *c = &callers[0];
    for (int k = 0; k < PENDING && c->fd >= 0; k++)
        if (callers[k].fd < 0 || callers[k].since < c->since) c = &callers[k];
    close_fd(&c->fd);
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->since = har_node_seg_now();
    return 1;
}

void har_node_watch_join(har_node_watch_t *w, int me, int right_rank, const har_node_watch_addr_t *right, int left_rank,
                         const har_node_watch_addr_t *left)
{
    dialer_t d = {DONE, -1, 0, 0, 0, 0};
    caller_t callers[PENDING];
    double start = har_node_seg_now();
    for (int k = 0; k < PENDING; k++) callers[k].fd = -1;
    if (w->listen_fd < 0) return;
    if (right->port != 0 && right->naddr != 0) d.state = DIALLING, d.fd = dial(right, 0), d.tried = start;
    int expect_left = left->port != 0 && left->naddr != 0;  /* else it will not call */
    for (;;) {
        double now = har_node_seg_now();
        int pending = d.state != DONE || (expect_left && w->fd[1] < 0);
        int deciding = d.state == CONFIRMED && now - d.confirmed < DECISION_SECONDS;
        if (!pending || (now - start >= JOIN_SECONDS && !deciding)) break;
        /* The right neighbour: a connection that completes the handshake;
         * an address that refuses, closes, stays silent or cannot prove
         * itself gives way to the next. */
        if (d.state != DONE && (d.fd < 0 || (!deciding && now - d.tried > ADDRESS_SECONDS))) {
            close_fd(&d.fd);
            d.state = ++d.k >= right->naddr || now - start >= JOIN_SECONDS ? DONE : DIALLING;
            if (d.state == DIALLING) d.fd = dial(right, d.k), d.tried = har_node_seg_now();
            continue;
        }
        struct pollfd p[2 + PENDING] = {{d.fd, d.state == DIALLING ? POLLOUT : POLLIN, 0},
                                        {w->fd[1] < 0 ? w->listen_fd : -1, POLLIN, 0}};
        for (int k = 0; k < PENDING; k++) p[2 + k] = (struct pollfd){callers[k].fd, POLLIN, 0};
        if (poll(p, 2 + PENDING, 10) < 0 && errno != EINTR) break;
        if (d.state != DONE && p[0].revents && !dialer_step(&d, w, me, right_rank, right)) close_fd(&d.fd);
        for (int k = 0; k < PENDING; k++)
            if (callers[k].fd >= 0 && p[2 + k].revents) listener_step(&callers[k], w, me, left_rank);
        if ((p[1].revents & POLLIN) && !admit(w->listen_fd, callers)) {
            close_fd(&w->listen_fd);  /* its left neighbour cannot be taken: not watched (said below) */
            expect_left = 0;
        }
    }
    close_fd(&d.fd);
    for (int k = 0; k < PENDING; k++) close_fd(&callers[k].fd);
    close_fd(&w->listen_fd);
    HAR_LOG(HAR_LOG_DEBUG, "death watch: place %d %s its right neighbour %d, %s its left %d", me,
            w->fd[0] >= 0 ? "watches" : "cannot watch", right_rank, w->fd[1] >= 0 ? "watches" : "cannot watch",
            left_rank);
}

int har_node_watch_lost(har_node_watch_t *w, uint64_t call, const har_node_watch_bye_t **left)
{
    /* A negative fd is skipped; a close shows as POLLRDHUP even when a part of a bye came before it. */
    struct pollfd p[2] = {{w->fd[0], POLLIN | POLLRDHUP, 0}, {w->fd[1], POLLIN | POLLRDHUP, 0}};
    if (w->fd[0] >= 0 || w->fd[1] >= 0) poll(p, 2, 0);
    for (int k = 0; k < 2; k++) {
        if (w->fd[k] >= 0 && p[k].revents) {
            unsigned char bye[1 + sizeof(har_node_watch_bye_t)];
            int got = take(w->fd[k], bye, sizeof bye);
            if (got == 0 && !(p[k].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
            close_fd(&w->fd[k]);
            if (got <= 0 || bye[0] != BYE) {  /* closed or reset without a word: the process is gone */
                *left = NULL;
                return w->peer[k];
            }
            memcpy(&w->bye[k], bye + 1, sizeof w->bye[k]);
            w->bye[k].seen_host[sizeof w->bye[k].seen_host - 1] = '\0';
            w->said_bye[k] = 1;
        }
        /* It left in order: only a call it never made waits for it in vain. */
        if (w->said_bye[k] && call >= w->bye[k].calls) {
            *left = &w->bye[k];
            return w->peer[k];
        }
    }
    return -1;
}

void har_node_watch_close(har_node_watch_t *w, const har_node_watch_bye_t *said)
{
    unsigned char bye[1 + sizeof *said] = {BYE};
    memcpy(bye + 1, said, sizeof *said);
    for (int k = 0; k < 2; k++)
        if (w->fd[k] >= 0) {
            /* Never SIGPIPE: the neighbour may be gone already. */
            if (send(w->fd[k], bye, sizeof bye, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof bye)
                HAR_LOG(HAR_LOG_DEBUG, "death watch: no bye to place %d (%s)", w->peer[k], strerror(errno));
            close_fd(&w->fd[k]);
        }
    close_fd(&w->listen_fd);
}
