/* Creating, mapping and releasing the node segment (segment.h).
 *
 * Layout: header line, one control area per rank (whole HAR_LINEs), then two
 * data slots per rank, each on a HAR_LINE boundary. */
#define _GNU_SOURCE  /* memfd_create, F_OFD_SETLK */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/log.h"
#include "node/segment.h"

#define SEG_MAGIC 0x6861722d73656732ull  /* "har-seg2" */
#define NAMED_PREFIX "har-"             /* the fallback's names in /dev/shm */

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static size_t ctl_stride(void) { return round_up(sizeof(har_ctl_t), HAR_LINE); }

/* Per rank: the checksums HAR_CHECK publishes, two parities of nranks + 1. */
static size_t sums_stride(int nranks) { return round_up(2 * ((size_t)nranks + 1) * sizeof(uint64_t), HAR_LINE); }

size_t har_node_seg_bytes(int nranks, size_t slot_bytes)
{
    return HAR_LINE + (size_t)nranks * (ctl_stride() + sums_stride(nranks)) +
           (size_t)nranks * 2 * round_up(slot_bytes, HAR_LINE);
}

/* Sizes, reserves and initialises the segment open on fd. */
static int format(int fd, int nranks, size_t slot_bytes, const char *what)
{
    slot_bytes = round_up(slot_bytes, HAR_LINE);
    size_t size = har_node_seg_bytes(nranks, slot_bytes);
    int err = posix_fallocate(fd, 0, (off_t)size);
    if (err) {
        har_log(HAR_LOG_WARN, "cannot reserve %zu bytes of shared memory for %s: %s "
                "(HAR_SLOT_BYTES sets the size)", size, what, strerror(err));
        return -1;
    }
    char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        har_log(HAR_LOG_WARN, "mmap of %zu bytes (%s): %s", size, what, strerror(errno));
        return -1;
    }
    har_node_seg_hdr_t *hdr = (har_node_seg_hdr_t *)base;
    hdr->nranks = (uint32_t)nranks;
    hdr->slot_bytes = slot_bytes;
    atomic_init(&hdr->cuda_from_call, UINT64_MAX);  /* no rank has CUDA yet */
    /* Written last: attach checks it, so a half-made segment is never used. */
    __atomic_store_n(&hdr->magic, SEG_MAGIC, __ATOMIC_RELEASE);
    munmap(base, size);
    return 0;
}

int har_node_seg_create(int nranks, size_t slot_bytes)
{
    int fd = memfd_create("har-segment", MFD_CLOEXEC);
    if (fd < 0) {
        har_log(HAR_LOG_WARN, "memfd_create: %s", strerror(errno));
        return -1;
    }
    if (format(fd, nranks, slot_bytes, "an anonymous segment") != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static har_status_t attach_own(har_node_seg_t *seg, int fd, int me);

har_status_t har_node_seg_create_named(har_node_seg_t *seg, const char *name, int nranks, size_t slot_bytes)
{
    memset(seg, 0, sizeof *seg);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        har_log(HAR_LOG_WARN, "shm_open(%s): %s", name, strerror(errno));
        return HAR_ERR_INTERNAL;
    }
    /* The creator's lock first, before the name is of use to anyone: a
     * named segment nobody holds a lock on is stale, whatever the moment. */
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    if (fcntl(fd, F_OFD_SETLK, &lock) != 0 || format(fd, nranks, slot_bytes, name) != 0) {
        close(fd);
        shm_unlink(name);
        return HAR_ERR_INTERNAL;
    }
    return attach_own(seg, fd, 0);  /* shm_open made this rank's own description */
}

int har_node_seg_open_named(const char *name)
{
    struct stat st = {0};
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        har_log(HAR_LOG_WARN, "shm_open(%s): %s", name, strerror(errno));
    } else if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
        /* Not the file local rank 0 made: someone else's under that name. */
        har_log(HAR_LOG_WARN, "/dev/shm%s is not this user's own (uid %u, mode %o): not mapped", name,
                (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Maps the segment on `fd`, an open file description of this rank's own,
 * and takes the liveness lock on it. */
static har_status_t attach_own(har_node_seg_t *seg, int fd, int me)
{
    memset(seg, 0, sizeof *seg);
    struct stat st;
    char *base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > HAR_LINE)
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        har_log(HAR_LOG_WARN, "cannot map the node segment: %s", strerror(errno));
        close(fd);
        return HAR_ERR_INTERNAL;
    }
    seg->base = base;
    seg->size = (size_t)st.st_size;
    seg->hdr = (har_node_seg_hdr_t *)base;
    if (__atomic_load_n(&seg->hdr->magic, __ATOMIC_ACQUIRE) != SEG_MAGIC || (int)seg->hdr->nranks <= me ||
        seg->size < har_node_seg_bytes((int)seg->hdr->nranks, seg->hdr->slot_bytes)) {
        har_log(HAR_LOG_WARN, "not a har segment for local rank %d", me);
        munmap(base, seg->size);
        close(fd);
        seg->base = NULL;
        return HAR_ERR_INTERNAL;
    }
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = me, .l_len = 1};
    if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
        har_log(HAR_LOG_WARN, "cannot take the liveness lock of local rank %d: %s", me, strerror(errno));
        munmap(base, seg->size);
        close(fd);
        seg->base = NULL;
        return HAR_ERR_INTERNAL;
    }
    seg->fd = fd;
    seg->nranks = (int)seg->hdr->nranks;
    seg->me = me;
    seg->slot_bytes = seg->hdr->slot_bytes;
    seg->ctl_stride = ctl_stride();
    seg->sums_stride = sums_stride(seg->nranks);
    seg->sums = base + HAR_LINE + (size_t)seg->nranks * seg->ctl_stride;
    seg->slots = seg->sums + (size_t)seg->nranks * seg->sums_stride;
    seg->my_epoch = atomic_load_explicit(&har_node_seg_ctl(seg, me)->epoch, memory_order_relaxed);
    atomic_store(&har_node_seg_ctl(seg, me)->attached, 1);
    return HAR_OK;
}

har_status_t har_node_seg_attach(har_node_seg_t *seg, int given, int me)
{
    /* A descriptor passed over a socket or inherited shares its open file
     * description with the sender's, and so would its locks: liveness needs
     * one description per rank. Reopening through /proc makes a new one. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", given);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    close(given);
    if (fd < 0) {
        seg->base = NULL;
        har_log(HAR_LOG_WARN, "cannot reopen the node segment (%s): %s", path, strerror(errno));
        return HAR_ERR_INTERNAL;
    }
    return attach_own(seg, fd, me);
}

void har_node_seg_unlink(const char *name) { shm_unlink(name); }

void har_node_seg_leave(har_node_seg_t *seg, uint64_t calls, const har_failure_t *seen)
{
    if (!seg->base) return;
    har_ctl_t *mine = har_node_seg_ctl(seg, seg->me);
    atomic_store_explicit(&mine->calls_made, calls, memory_order_relaxed);  /* before `left` (release) */
    /* Its own failure line is read only while the header names this rank,
     * which it cannot come to do from now on. */
    int tell = seen && atomic_load(&seg->hdr->failed) != (uint32_t)seg->me + 1;
    if (tell) mine->failure = *seen;
    atomic_store_explicit(&mine->left, tell ? 2 : 1, memory_order_release);
    har_node_seg_detach(seg);
}

void har_node_seg_detach(har_node_seg_t *seg)
{
    if (!seg->base) return;
    munmap(seg->base, seg->size);
    close(seg->fd);  /* drops the liveness lock */
    seg->base = NULL;
}

int har_node_seg_clean(int remove, int level)
{
    DIR *dir = opendir("/dev/shm");
    int stale = 0;
    if (!dir) return 0;
    for (struct dirent *e; (e = readdir(dir));) {
        if (strncmp(e->d_name, NAMED_PREFIX, strlen(NAMED_PREFIX)) != 0) continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
        struct stat st;
        if (fd < 0) continue;
        /* Any lock on any byte means a process lives that holds it. A file
         * still empty and new is being made (shm_open comes just before the
         * creator's lock). */
        struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        if (fstat(fd, &st) == 0 && !(st.st_size == 0 && time(NULL) - st.st_ctime < 10) &&
            fcntl(fd, F_OFD_GETLK, &lock) == 0 && lock.l_type == F_UNLCK) {
            stale++;
            if (remove) {
                shm_unlink(name);
                har_log(level, "removed /dev/shm%s (%lld bytes): a har segment left by a process that died", name,
                        (long long)st.st_size);
            }
        }
        close(fd);
    }
    closedir(dir);
    return stale;
}
