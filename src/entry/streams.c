/* MPICH's stream communicators (streams.h). An MPIX_Stream made with an
 * info of "type" "cudaStream_t" carries a CUDA stream, and a communicator
 * made on it (MPIX_Stream_comm_create, or a duplicate of one) queues its
 * *_enqueue calls there. har records each such stream; MPIX_Allreduce_enqueue
 * on a communicator whose stream (MPIX_Comm_get_stream) is one of them is
 * then har's stream-ordered all-reduce on that CUDA stream.
 *
 * Two cases, told apart by MPIX_GPU_query_support:
 *  - the MPI was built with CUDA: it makes the stream itself; a call har's
 *    kernels cannot queue goes to the MPI's own MPIX_Allreduce_enqueue,
 *    which is stream-ordered too;
 *  - it was not (it aborts on such an info): har makes a stream without the
 *    CUDA keys (the MPI still needs one for the communicator, which takes a
 *    reserved VCI as any MPIX_Stream does) and stands in for the CUDA
 *    stream: a call the kernels cannot queue is har's blocking all-reduce
 *    once the stream's work is done, as har_allreduce_enqueue does. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/log.h"
#include "cuda/driver.h"
#include "entry/entry.h"
#include "entry/streams.h"

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int har_info_hex_decode(const char *text, void *out, size_t len)
{
    unsigned char *bytes = out;
    size_t n = 0;
    for (const char *p = text; *p;) {
        if (*p == '[') {
            char *end;
            unsigned long long zeros = strtoull(p + 1, &end, 10);
            if (end == p + 1 || *end != ']' || zeros > len - n) return -1;
            memset(bytes + n, 0, (size_t)zeros);
            n += (size_t)zeros;
            p = end + 1;
            continue;
        }
        int high = hex_digit(p[0]), low = high < 0 ? -1 : hex_digit(p[1]);
        if (low < 0 || n == len) return -1;
        bytes[n++] = (unsigned char)(high << 4 | low);
        p += 2;
    }
    return n == len ? 0 : -1;
}

#ifdef HAR_HAVE_MPIX_STREAM
/* The CUDA streams' MPIX_Streams not freed yet. */
typedef struct {
    uint64_t handle;  /* the MPIX_Stream, as an integer or a pointer */
    void *cuda;       /* its cudaStream_t */
    int mpi_made;     /* the MPI made it a CUDA stream (else har stands in) */
} known_stream_t;

static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static known_stream_t *known;
static size_t nknown, known_cap;

static uint64_t handle_key(MPIX_Stream s)
{
    uint64_t key = 0;
    memcpy(&key, &s, sizeof s < sizeof key ? sizeof s : sizeof key);
    return key;
}

static int remember(MPIX_Stream s, void *cuda, int mpi_made)
{
    pthread_mutex_lock(&known_lock);
    if (nknown == known_cap) {
        size_t cap = known_cap ? 2 * known_cap : 8;
        known_stream_t *more = realloc(known, cap * sizeof *more);
        if (!more) {
            pthread_mutex_unlock(&known_lock);
            return 0;
        }
        known = more, known_cap = cap;
    }
    known[nknown++] = (known_stream_t){handle_key(s), cuda, mpi_made};
    pthread_mutex_unlock(&known_lock);
    return 1;
}

static void forget(uint64_t key)
{
    pthread_mutex_lock(&known_lock);
    for (size_t i = 0; i < nknown; i++)
        if (known[i].handle == key) {
            known[i] = known[--nknown];
            break;
        }
    pthread_mutex_unlock(&known_lock);
}

static int lookup(MPIX_Stream s, known_stream_t *out)
{
    uint64_t key = handle_key(s);
    int found = 0;
    pthread_mutex_lock(&known_lock);
    for (size_t i = 0; i < nknown && !found; i++)
        if (known[i].handle == key) *out = known[i], found = 1;
    pthread_mutex_unlock(&known_lock);
    return found;
}

/* The info's string under key, or "" where it has none. */
static void info_string(MPI_Info info, const char *key, char *buf, int len)
{
    int flag = 0;
    if (info == MPI_INFO_NULL || PMPI_Info_get_string(info, key, &len, buf, &flag) != MPI_SUCCESS || !flag)
        buf[0] = '\0';
}

int har_mpix_stream_create(MPI_Info info, MPIX_Stream *stream)
{
    char type[32], value[128];
    info_string(info, "type", type, (int)sizeof type);
    if (strcmp(type, "cudaStream_t") != 0) return PMPIX_Stream_create(info, stream);
    int mpi_has_cuda = 0;
    if (PMPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &mpi_has_cuda) != MPI_SUCCESS) mpi_has_cuda = 0;
    void *cuda = NULL;
    info_string(info, "value", value, (int)sizeof value);
    if (har_info_hex_decode(value, &cuda, sizeof cuda) != 0) {
        if (mpi_has_cuda) return PMPIX_Stream_create(info, stream);  /* its own word on the value */
        har_log(HAR_LOG_ERROR, "MPIX_Stream_create: the info's \"value\" (\"%s\") is not a cudaStream_t set by "
                "MPIX_Info_set_hex", value);
        return PMPI_Comm_call_errhandler(MPI_COMM_SELF, MPI_ERR_INFO_VALUE), MPI_ERR_INFO_VALUE;
    }
    int rc = PMPIX_Stream_create(mpi_has_cuda ? info : MPI_INFO_NULL, stream);
    if (rc == MPI_SUCCESS && !remember(*stream, cuda, mpi_has_cuda)) {
        PMPIX_Stream_free(stream);
        return PMPI_Comm_call_errhandler(MPI_COMM_SELF, MPI_ERR_NO_MEM), MPI_ERR_NO_MEM;
    }
    return rc;
}

int har_mpix_stream_free(MPIX_Stream *stream)
{
    uint64_t key = stream ? handle_key(*stream) : 0;
    int rc = PMPIX_Stream_free(stream);
    if (rc == MPI_SUCCESS) forget(key);
    return rc;
}

static int mpi_enqueue(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       har_binding_t binding)
{
    if (binding == HAR_BINDING_LARGE) return PMPIX_Allreduce_enqueue_c(sbuf, rbuf, count, type, op, comm);
    return PMPIX_Allreduce_enqueue(sbuf, rbuf, (int)count, type, op, comm);
}

int har_mpix_allreduce_enqueue(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                               MPI_Comm comm, har_binding_t binding)
{
    /* A communicator of one stream per process: its stream 0 is it and it
     * has no stream 1 (one of several, MPIX_Stream_comm_create_multiplex,
     * is the MPI's to serve or refuse). */
    MPIX_Stream first = MPIX_STREAM_NULL, second = MPIX_STREAM_NULL;
    known_stream_t k;
    if (comm == MPI_COMM_NULL || PMPIX_Comm_get_stream(comm, 0, &first) != MPI_SUCCESS ||
        PMPIX_Comm_get_stream(comm, 1, &second) != MPI_SUCCESS || second != MPIX_STREAM_NULL || !lookup(first, &k))
        return mpi_enqueue(sbuf, rbuf, count, type, op, comm, binding);
    if (!k.mpi_made) return har_allreduce_enqueue_count(sbuf, rbuf, count, type, op, comm, k.cuda, binding);
    int rc;
    if (har_enqueue_on_kernels(sbuf, rbuf, count, type, op, comm, k.cuda, har_cuda_stream_capturing(k.cuda), &rc))
        return rc;
    return mpi_enqueue(sbuf, rbuf, count, type, op, comm, binding);
}
#endif
