/* Creating, mapping and releasing the node segment (POSIX shared memory).
 *
 * Layout: header line, one control line per rank (HAR_LINE bytes each), then
 * two data slots per rank, each on a HAR_LINE boundary. */
#define _GNU_SOURCE  /* F_OFD_SETLK */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/log.h"
#include "host/segment.h"

#define SEG_MAGIC 0x6861722d73656731ull  /* "har-seg1" */

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static size_t ctl_stride(void) { return round_up(sizeof(har_ctl_t), HAR_LINE); }

size_t har_seg_bytes(int nranks, size_t slot_bytes)
{
    return HAR_LINE + (size_t)nranks * ctl_stride() + (size_t)nranks * 2 * round_up(slot_bytes, HAR_LINE);
}

int har_seg_create(const char *name, int nranks, size_t slot_bytes)
{
    slot_bytes = round_up(slot_bytes, HAR_LINE);
    size_t size = har_seg_bytes(nranks, slot_bytes);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        har_log(HAR_LOG_WARN, "shm_open(%s): %s", name, strerror(errno));
        return -1;
    }
    int err = posix_fallocate(fd, 0, (off_t)size);
    if (err) {
        har_log(HAR_LOG_WARN, "cannot reserve %zu bytes of shared memory for %s: %s "
                "(is /dev/shm too small? HAR_SLOT_BYTES sets the size)", size, name, strerror(err));
        close(fd);
        shm_unlink(name);
        return -1;
    }
    char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        har_log(HAR_LOG_WARN, "mmap of %zu bytes (%s): %s", size, name, strerror(errno));
        shm_unlink(name);
        return -1;
    }
    har_seg_hdr_t *hdr = (har_seg_hdr_t *)base;
    hdr->nranks = (uint32_t)nranks;
    hdr->slot_bytes = slot_bytes;
    atomic_init(&hdr->cuda_from_call, UINT64_MAX);  /* no rank has CUDA yet */
    /* Written last: attach checks it, so a half-made segment is never used. */
    __atomic_store_n(&hdr->magic, SEG_MAGIC, __ATOMIC_RELEASE);
    munmap(base, size);
    return 0;
}

int har_seg_attach(har_seg_t *seg, const char *name, int me)
{
    memset(seg, 0, sizeof *seg);
    int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0) {
        har_log(HAR_LOG_WARN, "shm_open(%s): %s", name, strerror(errno));
        return -1;
    }
    struct stat st;
    char *base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > HAR_LINE)
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        har_log(HAR_LOG_WARN, "cannot map %s: %s", name, strerror(errno));
        close(fd);
        return -1;
    }
    seg->base = base;
    seg->size = (size_t)st.st_size;
    seg->hdr = (har_seg_hdr_t *)base;
    if (__atomic_load_n(&seg->hdr->magic, __ATOMIC_ACQUIRE) != SEG_MAGIC || (int)seg->hdr->nranks <= me ||
        seg->size < har_seg_bytes((int)seg->hdr->nranks, seg->hdr->slot_bytes)) {
        har_log(HAR_LOG_WARN, "%s is not a har segment for rank %d", name, me);
        munmap(base, seg->size);
        close(fd);
        return -1;
    }
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = me, .l_len = 1};
    if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
        har_log(HAR_LOG_WARN, "cannot take the liveness lock of rank %d in %s: %s", me, name, strerror(errno));
        munmap(base, seg->size);
        close(fd);
        return -1;
    }
    seg->fd = fd;
    seg->nranks = (int)seg->hdr->nranks;
    seg->me = me;
    seg->slot_bytes = seg->hdr->slot_bytes;
    seg->ctl_stride = ctl_stride();
    seg->slots = base + HAR_LINE + (size_t)seg->nranks * seg->ctl_stride;
    seg->my_epoch = atomic_load_explicit(&har_seg_ctl(seg, me)->epoch, memory_order_relaxed);
    return 0;
}

void har_seg_unlink(const char *name) { shm_unlink(name); }

void har_seg_detach(har_seg_t *seg)
{
    if (!seg->base) return;
    munmap(seg->base, seg->size);
    close(seg->fd);  /* drops the liveness lock */
    seg->base = NULL;
}
