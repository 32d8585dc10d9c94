/* A hostile neighbour on the node: for SECONDS it looks for har's node
 * segment sockets (abstract Unix sockets "@har-..." in /proc/net/unix) and
 * named segments (/dev/shm/har-*), and tries to get each segment: it
 * connects, sends a guessed token and waits for a descriptor; it opens the
 * named files read-write. Whatever it gets, it scribbles on for the rest of
 * its time, as an attacker would to falsify results. It knows nothing of
 * MPI or har's code. Prints what it tried and what it got:
 *   intruder: tried S sockets, R refused, G segments obtained; saw N named segments, opened F
 *   intruder SECONDS [STOP_FILE]   (ends early once STOP_FILE exists) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_NAMES 256
#define MAX_MAPS 64

static char tried[MAX_NAMES][108];
static int ntried;
static struct { char *base; size_t size; } maps[MAX_MAPS];
static int nmaps;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int seen(const char *name)
{
    for (int i = 0; i < ntried; i++)
        if (!strcmp(tried[i], name)) return 1;
    if (ntried < MAX_NAMES) snprintf(tried[ntried++], sizeof tried[0], "%s", name);
    return 0;
}

/* Keeps a mapping of the segment on fd, to scribble on. */
static void keep(int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && nmaps < MAX_MAPS) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) maps[nmaps].base = p, maps[nmaps++].size = (size_t)st.st_size;
    }
    close(fd);
}

/* Connects to @name, sends a guessed token, waits for a descriptor: 1 got
 * one, 0 refused (closed, or nothing within a second). */
static int attempt(const char *name)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    if (len >= sizeof a.sun_path) return 0;
    memcpy(a.sun_path + 1, name, len);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    if (connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0) {
        close(s);
        return 0;
    }
    char guess[16] = {0};
    if (send(s, guess, sizeof guess, MSG_NOSIGNAL) < 0) { close(s); return 0; }
    struct pollfd p = {s, POLLIN, 0};
    int got = 0;
    if (poll(&p, 1, 1000) == 1) {
        char byte;
        struct iovec iov = {&byte, 1};
        union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(int))]; } control;
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof control.buf};
        if (recvmsg(s, &msg, 0) == 1) {
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            if (c && c->cmsg_type == SCM_RIGHTS) {
                int fd;
                memcpy(&fd, CMSG_DATA(c), sizeof fd);
                keep(fd);
                got = 1;
            }
        }
    }
    close(s);
    return got;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10, end = now() + seconds;
    const char *stop = argc > 2 ? argv[2] : NULL;
    int sockets = 0, refused = 0, obtained = 0, named = 0, opened = 0;
    unsigned char junk = 0x5a;
    while (now() < end && !(stop && access(stop, F_OK) == 0)) {
        FILE *f = fopen("/proc/net/unix", "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char *at = strstr(line, "@har-");
            if (!at) continue;
            at[strcspn(at, " \n")] = '\0';
            if (seen(at)) continue;
            sockets++;
            if (attempt(at + 1)) obtained++;
            else refused++;
        }
        if (f) fclose(f);
        DIR *d = opendir("/dev/shm");
        for (struct dirent *e; d && (e = readdir(d));) {
            char path[300];
            if (strncmp(e->d_name, "har-", 4) || seen(e->d_name)) continue;
            snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
            int fd = open(path, O_RDWR | O_CLOEXEC);
            named++;
            if (fd >= 0) opened++, keep(fd);
        }
        if (d) closedir(d);
        /* Falsify: everything past the first page (control lines and slots). */
        for (int m = 0; m < nmaps; m++)
            if (maps[m].size > 4096) memset(maps[m].base + 4096, junk++, maps[m].size - 4096);
        usleep(2000);
    }
    printf("intruder: tried %d sockets, %d refused, %d segments obtained; saw %d named segments, opened %d\n",
           sockets, refused, obtained, named, opened);
    return 0;
}
