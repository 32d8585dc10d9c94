/* The death watch's handshake across nodes (node/watch.c) and the keyed
 * hash under it (core/secret.c), between forked processes over loopback:
 * two neighbours join and see each other die or leave; a stranger that
 * connects first, or that answers at a neighbour's address, is never taken
 * for the neighbour, so it can neither fake a death nor keep the real one
 * out; a listener slow to ack is not given up on once it may count the
 * connection (a death it would see that never happened); a process out of
 * descriptors ends its join at once instead of spinning on a connection it
 * cannot accept. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "node/watch.h"
#include "core/secret.h"
#include "unit.h"

static void nap(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

/* SipHash-2-4's published test vectors: key 00..0f, messages 00..(n-1). */
static void test_tag(void)
{
    har_secret_t key;
    unsigned char msg[16];
    for (int i = 0; i < 16; i++) key.b[i] = (uint8_t)i, msg[i] = (unsigned char)i;
    CHECK(har_secret_tag(&key, msg, 0) == 0x726fdb47dd0e0e31ull, "empty message");
    CHECK(har_secret_tag(&key, msg, 15) == 0xa129ca6149be45e5ull, "15 bytes");
    CHECK(har_secret_tag(&key, msg, 8) == 0x93f5f5799a932462ull, "8 bytes");
    key.b[0] ^= 1;
    CHECK(har_secret_tag(&key, msg, 15) != 0xa129ca6149be45e5ull, "another key, another tag");
    CHECK(har_secret_equal(msg, msg, 16) && !har_secret_equal(msg, msg + 1, 15), "constant-time compare");
}

/* Forks a neighbour at place 1 (this process is place 0, p = 2: each is
 * the other's left and right). `then` says what the neighbour does after
 * joining: 'd' dies, 'b' says bye after 5 calls, 's' joins late (a
 * stranger came first). It swaps addresses with it (`theirs`). */
static pid_t neighbour(har_node_watch_addr_t *mine, har_node_watch_t *w, int pipe_fd[2], char then,
                       har_node_watch_addr_t *theirs)
{
    har_node_watch_listen(w, mine);
    pid_t pid = fork();
    if (pid == 0) {
        har_node_watch_t cw;
        har_node_watch_addr_t caddr, paddr;
        har_node_watch_listen(&cw, &caddr);
        if (write(pipe_fd[1], &caddr, sizeof caddr) != sizeof caddr) _exit(3);
        if (read(pipe_fd[1], &paddr, sizeof paddr) != sizeof paddr) _exit(3);
        if (then == 's') nap(0.2);
        har_node_watch_join(&cw, 1, 0, &paddr, 0, &paddr);
        int joined = cw.fd[0] >= 0 && cw.fd[1] >= 0;
        char ok = joined ? 'j' : 'n';
        if (write(pipe_fd[1], &ok, 1) != 1) _exit(3);
        if (read(pipe_fd[1], &ok, 1) != 1) _exit(3);  /* the parent says when */
        har_node_watch_bye_t bye = {5, HAR_ERR_PEER_DEAD, 7, "n07"};
        if (then == 'b') har_node_watch_close(&cw, &bye);
        _exit(0);  /* 'd': its sockets close without a word */
    }
    CHECK(read(pipe_fd[0], theirs, sizeof *theirs) == sizeof *theirs, "neighbour's address");
    CHECK(write(pipe_fd[0], mine, sizeof *mine) == sizeof *mine, "our address");
    return pid;
}

/* One join of this process with a forked neighbour, then its end. */
static void test_pair(char then)
{
    int sp[2];
    har_node_watch_t w;
    har_node_watch_addr_t mine, theirs;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) return;
    pid_t pid = neighbour(&mine, &w, sp, then, &theirs);
    har_node_watch_join(&w, 0, 1, &theirs, 1, &theirs);
    char joined = 0;
    CHECK(read(sp[0], &joined, 1) == 1 && joined == 'j', "the neighbour watches both ways (%c)", joined);
    CHECK(w.fd[0] >= 0 && w.fd[1] >= 0, "this side watches both ways");
    const har_node_watch_bye_t *left = NULL;
    CHECK(har_node_watch_lost(&w, 0, &left) == -1, "nobody lost while the neighbour lives");
    CHECK(write(sp[0], "x", 1) == 1, "go");
    waitpid(pid, NULL, 0);
    int who = -1;
    for (int i = 0; i < 200 && who < 0; i++, nap(0.005)) who = har_node_watch_lost(&w, 3, &left);
    if (then == 'd') {
        CHECK(who == 1 && !left, "a death seen: place %d", who);
    } else {
        CHECK(who == -1, "a bye after 5 calls is no loss in call 3 (place %d)", who);
        CHECK(har_node_watch_lost(&w, 5, &left) == 1 && left && left->calls == 5 && left->seen_world == 7 &&
              left->seen_status == HAR_ERR_PEER_DEAD && !strcmp(left->seen_host, "n07"),
              "but it is in call 5, as a rank that left, with what it had seen");
    }
    har_node_watch_close(&w, &(har_node_watch_bye_t){0, 0, -1, ""});
    close(sp[0]);
    close(sp[1]);
}

/* A stranger connects to this rank's listener before the real neighbour,
 * says hello as the neighbour would and answers the challenge with a tag
 * it cannot make: it must not be taken, the real neighbour must be, and
 * the stranger's going must not count as a death. */
static void test_stranger_calls(void)
{
    int sp[2];
    har_node_watch_t w;
    har_node_watch_addr_t mine, theirs;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) return;
    pid_t pid = neighbour(&mine, &w, sp, 's', &theirs);
    pid_t stranger = fork();
    if (stranger == 0) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = mine.port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct { uint32_t magic; int32_t from, to; uint32_t unused; uint64_t challenge; } hello = {0x68617277u, 1, 0, 0, 7};
        uint64_t answer[2], guess = 0x1234;
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) _exit(1);
        if (send(s, &hello, sizeof hello, 0) != sizeof hello) _exit(1);
        if (recv(s, answer, sizeof answer, MSG_WAITALL) == sizeof answer) send(s, &guess, sizeof guess, 0);
        nap(0.6);
        _exit(0);  /* closes: must not look like the neighbour's death */
    }
    har_node_watch_join(&w, 0, 1, &theirs, 1, &theirs);
    char joined = 0;
    CHECK(read(sp[0], &joined, 1) == 1 && joined == 'j', "the real neighbour joined after the stranger");
    CHECK(w.fd[1] >= 0, "the real left neighbour is watched");
    waitpid(stranger, NULL, 0);
    const har_node_watch_bye_t *left = NULL;
    CHECK(har_node_watch_lost(&w, 0, &left) == -1, "the stranger's close is no death");
    CHECK(write(sp[0], "x", 1) == 1, "go");
    waitpid(pid, NULL, 0);
    har_node_watch_close(&w, &(har_node_watch_bye_t){0, 0, -1, ""});
    close(sp[0]);
    close(sp[1]);
}

/* A stranger listens where the right neighbour is said to be (a wrong
 * address that answers), knows the protocol but not the key: the dialer
 * must not take its connection. */
static void test_stranger_answers(void)
{
    har_node_watch_t w, fake_w;
    har_node_watch_addr_t mine, fake;
    har_node_watch_listen(&fake_w, &fake);  /* only for a port and a key that are not the stranger's */
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) != 0)
        return;
    fake.port = a.sin_port;
    fake.naddr = 1;
    fake.addr[0] = htonl(INADDR_LOOPBACK);
    pid_t stranger = fork();
    if (stranger == 0) {
        int s = accept(l, NULL, NULL);
        uint64_t hello[3], answer[2] = {99, 0xdeadbeef}, confirm;
        if (s < 0 || recv(s, hello, sizeof hello, MSG_WAITALL) != sizeof hello) _exit(1);
        send(s, answer, sizeof answer, 0);
        if (recv(s, &confirm, sizeof confirm, MSG_WAITALL) == sizeof confirm) send(s, "A", 1, 0);
        nap(1.5);
        _exit(0);
    }
    close(l);
    har_node_watch_listen(&w, &mine);
    har_node_watch_addr_t none;
    memset(&none, 0, sizeof none);  /* no left neighbour: it will not call */
    har_node_watch_join(&w, 0, 1, &fake, 1, &none);
    CHECK(w.fd[0] < 0, "a connection whose answer carries no valid tag is not the right neighbour");
    kill(stranger, SIGKILL);
    waitpid(stranger, NULL, 0);
    const har_node_watch_bye_t *left = NULL;
    CHECK(har_node_watch_lost(&w, 0, &left) == -1, "so its end is nobody's death");
    har_node_watch_close(&w, &(har_node_watch_bye_t){0, 0, -1, ""});
    har_node_watch_close(&fake_w, &(har_node_watch_bye_t){0, 0, -1, ""});
}

/* The right neighbour, played by a child that knows its key, is slow: it
 * answers at once but acks the dialer's confirmation only after `delay`
 * seconds, past the dialer's time for one address (and, at 1.2 s, past
 * its whole join). The listener counts the connection from its ack, so
 * the dialer must wait for it: it watches that connection, and the child
 * never sees it close. */
static void test_slow_ack(double delay)
{
    har_node_watch_t w, right_w;
    har_node_watch_addr_t mine, right, none;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) {
        CHECK(0, "a socket pair for the slow neighbour");
        return;
    }
    har_node_watch_listen(&right_w, &right);
    CHECK(right.port != 0, "a listening socket for the slow neighbour");
    right.naddr = 1;
    right.addr[0] = htonl(INADDR_LOOPBACK);
    pid_t child = fork();
    if (child == 0) {
        close(sp[0]);
        struct { uint32_t magic; int32_t from, to; uint32_t unused; uint64_t challenge; } hello;
        uint64_t answer[2] = {0x5eed, 0}, confirm;
        char verdict = 'x';
        int s = -1;
        for (int i = 0; i < 2000 && s < 0; i++, nap(0.001)) s = accept(right_w.listen_fd, NULL, NULL);
        if (s >= 0) fcntl(s, F_SETFL, 0);  /* blocking reads from here */
        if (s < 0 || recv(s, &hello, sizeof hello, MSG_WAITALL) != sizeof hello) _exit(1);
        answer[1] = har_node_watch_tag(&right.key, "answer", hello.from, hello.to, hello.challenge, answer[0]);
        if (send(s, answer, sizeof answer, 0) != sizeof answer) _exit(1);
        if (recv(s, &confirm, sizeof confirm, MSG_WAITALL) != sizeof confirm) _exit(1);
        if (confirm != har_node_watch_tag(&right.key, "confirm", hello.from, hello.to, hello.challenge, answer[0]))
            _exit(1);
        nap(delay);
        char ack = 'A', got;
        if (send(s, &ack, 1, MSG_NOSIGNAL) == 1) {
            nap(0.3);  /* the dialer has its ack; does it keep the connection? */
            verdict = recv(s, &got, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN ? 'k' : 'c';
        }
        if (write(sp[1], &verdict, 1) != 1) _exit(3);
        if (read(sp[1], &got, 1) != 1) _exit(3);  /* the parent says when */
        _exit(0);
    }
    close(sp[1]);  /* a child that fails early: the reads below see the end, not a hang */
    close(right_w.listen_fd);
    har_node_watch_listen(&w, &mine);
    memset(&none, 0, sizeof none);  /* no left neighbour: it will not call */
    har_node_watch_join(&w, 0, 1, &right, 1, &none);
    char verdict = 0;
    CHECK(read(sp[0], &verdict, 1) == 1 && verdict == 'k',
          "a listener that acks %.1f s after the confirmation keeps a live connection (%c)", delay, verdict);
    CHECK(w.fd[0] >= 0, "the dialer waited for that ack and watches its right neighbour");
    const har_node_watch_bye_t *left = NULL;
    CHECK(har_node_watch_lost(&w, 0, &left) == -1, "nobody lost while the slow neighbour lives");
    CHECK(write(sp[0], "x", 1) == 1, "go");
    waitpid(child, NULL, 0);
    har_node_watch_close(&w, &(har_node_watch_bye_t){0, 0, -1, ""});
    close(sp[0]);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/* This process out of descriptors (every one below RLIMIT_NOFILE taken)
 * while its neighbour's connection waits in its listener's backlog: it
 * can neither accept it nor dial. Its join must end at once, watching
 * neither side, not spin on the readable listener until its time-out. */
static void test_no_descriptors(void)
{
    enum { LIMIT = 64 };  /* above what poll needs (it refuses more descriptors than the limit) */
    int sp[2], fill[LIMIT], nfill = 0;
    har_node_watch_t w;
    har_node_watch_addr_t mine, theirs;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) return;
    pid_t pid = neighbour(&mine, &w, sp, 'd', &theirs);
    nap(0.1);  /* its dial reaches the backlog */
    struct rlimit was, low;
    getrlimit(RLIMIT_NOFILE, &was);
    low = was;
    low.rlim_cur = LIMIT;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "a low limit");
    while (nfill < LIMIT && (fill[nfill] = dup(0)) >= 0) nfill++;
    CHECK(nfill < LIMIT && errno == EMFILE, "no descriptor left (%d taken)", nfill);
    double t0 = seconds(), c0 = cpu_seconds();
    har_node_watch_join(&w, 0, 1, &theirs, 1, &theirs);
    double took = seconds() - t0, cpu = cpu_seconds() - c0;
    while (nfill > 0) close(fill[--nfill]);
    setrlimit(RLIMIT_NOFILE, &was);
    CHECK(took < 0.5 && cpu < 0.2, "out of descriptors, the join ends at once: %.2f s, %.2f s of CPU", took, cpu);
    CHECK(w.fd[0] < 0 && w.fd[1] < 0, "and watches neither side");
    char joined = 0;
    CHECK(read(sp[0], &joined, 1) == 1 && joined == 'n', "nor does the neighbour (%c)", joined);
    CHECK(write(sp[0], "x", 1) == 1, "go");
    waitpid(pid, NULL, 0);
    close(sp[0]);
    close(sp[1]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_tag();
    test_pair('d');
    test_pair('b');
    test_stranger_calls();
    test_stranger_answers();
    test_slow_ack(0.5);
    test_slow_ack(1.2);
    test_no_descriptors();
    printf("test_watch: %lu checks, %lu failed\n", checks, failures);
    return failures != 0;
}
