/* Staging through host memory (stage.h): the pool, the spans a call
 * touches, each collective's preparation, the copies. */
#include <pthread.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/log.h"
#include "stage/stage.h"

/* ---- the pool ------------------------------------------------------------ */

/* Each buffer carries its size in a header of one cache line before it. */
#define HEADER 64
static struct {
    pthread_mutex_t lock;
    int n;
    char *buf[HAR_STAGE_KEEP];
    size_t total;
} pool = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, 0};

static size_t size_of(const char *buf) { return *(const size_t *)(buf - HEADER); }

void *har_stage_get(size_t bytes)
{
    if (bytes == 0) bytes = 1;
    int best = -1;
    pthread_mutex_lock(&pool.lock);
    for (int i = 0; i < pool.n; i++)  /* the smallest kept buffer that is large enough */
        if (size_of(pool.buf[i]) >= bytes && (best < 0 || size_of(pool.buf[i]) < size_of(pool.buf[best]))) best = i;
    char *buf = NULL;
    if (best >= 0) {
        buf = pool.buf[best];
        pool.total -= size_of(buf);
        pool.buf[best] = pool.buf[--pool.n];
    }
    pthread_mutex_unlock(&pool.lock);
    if (buf) return buf;
    void *raw = NULL;
    if (bytes > SIZE_MAX - HEADER || posix_memalign(&raw, HEADER, HEADER + bytes) != 0) return NULL;
    *(size_t *)raw = bytes;
    return (char *)raw + HEADER;
}

void har_stage_put(void *p)
{
    char *buf = p;
    if (!buf) return;
    size_t size = size_of(buf);
    pthread_mutex_lock(&pool.lock);
    /* One buffer of any size stays (a loop of one large staged call reuses
     * it), more only within the byte bound. */
    if (pool.n < HAR_STAGE_KEEP && (pool.n == 0 || pool.total + size <= HAR_STAGE_KEEP_BYTES)) {
        pool.buf[pool.n++] = buf;
        pool.total += size;
        buf = NULL;
    }
    pthread_mutex_unlock(&pool.lock);
    if (buf) free(buf - HEADER);
}

int har_stage_kept(size_t *bytes)
{
    pthread_mutex_lock(&pool.lock);
    int n = pool.n;
    if (bytes) *bytes = pool.total;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

void har_stage_finalize(void)
{
    pthread_mutex_lock(&pool.lock);
    for (int i = 0; i < pool.n; i++) free(pool.buf[i] - HEADER);
    pool.n = 0;
    pool.total = 0;
    pthread_mutex_unlock(&pool.lock);
}

#ifdef HAR_TEST_HOOKS
int har_test_stage(void) { return (int)HAR_CFG(test_stage).i; }
#endif

/* ---- spans --------------------------------------------------------------- */

/* Block k of a v form: its count and its displacement, in the binding's
 * widths. */
static MPI_Count block_count(const har_blocks_t *v, int k)
{
    return v->binding == HAR_BINDING_LARGE ? ((const MPI_Count *)v->counts)[k] : ((const int *)v->counts)[k];
}
static MPI_Aint block_displ(const har_blocks_t *v, int k)
{
    return v->binding == HAR_BINDING_LARGE ? ((const MPI_Aint *)v->displs)[k] : ((const int *)v->displs)[k];
}

/* Side i of the call: blocks of elements of `type` at `p`, either one block
 * of `count` elements or (v not NULL) n blocks, v's counts at its
 * displacements in extents. The MPI may touch from the lowest element's true lower bound to
 * the highest's true upper bound; where it writes fewer bytes than that
 * (gaps between blocks, holes in the type), an output is copied in first
 * too, so the copy back leaves those bytes as they were. -1: arguments har
 * does not judge (the MPI gets the call untouched and says what is wrong). */
static int add(har_stage_t *s, const har_stage_ask_t *a, int i, const void *p, MPI_Datatype type, MPI_Count count,
               int n, const har_blocks_t *v, int in, int out)
{
    int staged = a->kind[i] != HAR_MEM_HOST;
#ifdef HAR_TEST_HOOKS
    staged |= har_test_stage() != 0;
#endif
    if (!staged || !p || p == MPI_IN_PLACE) return 0;
    if (type == MPI_DATATYPE_NULL) return -1;  /* asking about it would raise MPI_COMM_WORLD's handler */
    MPI_Aint lb, extent, tlb, textent;
    int size;
    if (PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &tlb, &textent) != MPI_SUCCESS || PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return -1;
    MPI_Aint lo = 0, hi = 0, data = 0;
    int any = 0;
    for (int k = 0; k < (v ? n : 1); k++) {
        MPI_Count c = v ? block_count(v, k) : count;
        MPI_Aint d = v ? block_displ(v, k) : 0;
        if (c < 0) return -1;
        if (c == 0) continue;
        /* elements d .. d + c - 1, `extent` apart (which may be negative) */
        MPI_Aint a0 = d * extent + tlb, a1 = (d + c - 1) * extent + tlb;
        MPI_Aint b_lo = a0 < a1 ? a0 : a1, b_hi = (a0 < a1 ? a1 : a0) + textent;
        if (!any || b_lo < lo) lo = b_lo;
        if (!any || b_hi > hi) hi = b_hi;
        any = 1;
        data += c * size;
    }
    if (!any) return 0;  /* nothing to move: the MPI gets the pointer as it is */
    har_span_t *sp = &s->s[i];
    sp->user = (char *)p;
    sp->first = lo;
    sp->bytes = (size_t)(hi - lo);
    sp->kind = a->kind[i];
    sp->out = (unsigned char)out;
    sp->in = (unsigned char)(in || (out && data < hi - lo));
    return 0;
}

/* Gives every span its host copy and, if asked, the inputs. */
static int allocate(har_stage_t *s, const har_stage_ask_t *a)
{
    s->comm = a->comm;
    if (!s->s[HAR_SEND].user && !s->s[HAR_RECV].user) return HAR_STAGE_UNTOUCHED;
    for (int i = 0; i < 2; i++) {
        har_span_t *sp = &s->s[i];
        if (!sp->user) continue;
        if (!(sp->host = har_stage_get(sp->bytes))) {
            har_log(HAR_LOG_ERROR, "no host memory to stage %zu bytes", sp->bytes);
            s->err = MPI_ERR_NO_MEM;
            har_stage_release(s);
            return HAR_STAGE_FAILED;
        }
    }
    if (a->copy_in && har_stage_in(s) != HAR_OK) {
        har_stage_release(s);
        return HAR_STAGE_FAILED;
    }
    return HAR_STAGE_STAGED;
}

/* Where this rank stands in comm; 0 where har leaves the call to the MPI:
 * a null communicator or an inter-communicator (whose roots and groups
 * har does not stage: see the README). */
static int rank_in(MPI_Comm comm, int *rank, int *size)
{
    int inter = 1;
    return comm != MPI_COMM_NULL && PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter &&
           PMPI_Comm_rank(comm, rank) == MPI_SUCCESS && PMPI_Comm_size(comm, size) == MPI_SUCCESS;
}

static void start(har_stage_t *s) { memset(s, 0, sizeof *s); }

/* A v form's arrays are there (NULL ones are the MPI's to report). */
static int blocks_given(const har_blocks_t *v) { return !v || (v->counts && v->displs); }

int har_stage_prepare_allreduce(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, void *rbuf,
                                har_count_t count, MPI_Datatype type)
{
    int in_place = sbuf == MPI_IN_PLACE;
    start(s);
    /* The same spans on every rank, inter-communicators included. */
    if (a->comm == MPI_COMM_NULL || add(s, a, HAR_SEND, sbuf, type, count, 0, NULL, 1, 0) ||
        add(s, a, HAR_RECV, rbuf, type, count, 0, NULL, in_place, 1))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

int har_stage_prepare_bcast(har_stage_t *s, const har_stage_ask_t *a, void *buf, har_count_t count, MPI_Datatype type,
                            int root)
{
    int rank, size;
    start(s);
    if (!rank_in(a->comm, &rank, &size) || root < 0 || root >= size ||
        add(s, a, HAR_SEND, buf, type, count, 0, NULL, rank == root, rank != root))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

int har_stage_prepare_reduce(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, void *rbuf, har_count_t count,
                             MPI_Datatype type, int root)
{
    int rank, size;
    start(s);
    if (!rank_in(a->comm, &rank, &size) || root < 0 || root >= size) return HAR_STAGE_UNTOUCHED;
    int in_place = sbuf == MPI_IN_PLACE && rank == root;  /* elsewhere MPI_IN_PLACE is the MPI's to refuse */
    if ((sbuf == MPI_IN_PLACE && rank != root) || add(s, a, HAR_SEND, sbuf, type, count, 0, NULL, 1, 0) ||
        (rank == root && add(s, a, HAR_RECV, rbuf, type, count, 0, NULL, in_place, 1)))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

int har_stage_prepare_allgather(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, har_count_t scount,
                                MPI_Datatype stype, void *rbuf, har_count_t rcount, const har_blocks_t *rv,
                                MPI_Datatype rtype)
{
    int rank, size, in_place = sbuf == MPI_IN_PLACE;
    start(s);
    /* In place, this rank's block is already in rbuf: copied in with it. */
    if (!rank_in(a->comm, &rank, &size) || !blocks_given(rv) ||
        add(s, a, HAR_SEND, sbuf, stype, scount, 0, NULL, 1, 0) ||
        add(s, a, HAR_RECV, rbuf, rtype, rcount * size, size, rv, in_place, 1))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

int har_stage_prepare_reduce_scatter(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, void *rbuf,
                                     har_count_t rcount, const har_blocks_t *rv, MPI_Datatype type)
{
    int rank, size, in_place = sbuf == MPI_IN_PLACE;
    start(s);
    if (!rank_in(a->comm, &rank, &size) || (rv && !rv->counts)) return HAR_STAGE_UNTOUCHED;
    MPI_Count total = 0, mine = rcount;
    if (rv) {
        for (int k = 0; k < size; k++) total += block_count(rv, k);
        mine = block_count(rv, rank);
    } else {
        total = rcount * size;
    }
    /* The input is the whole vector (in rbuf when in place); this rank's
     * block of the result lands at the start of rbuf. */
    if (add(s, a, HAR_SEND, sbuf, type, total, 0, NULL, 1, 0) ||
        add(s, a, HAR_RECV, rbuf, type, in_place ? total : mine, 0, NULL, in_place, 1))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

int har_stage_prepare_gather(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, har_count_t scount,
                             MPI_Datatype stype, void *rbuf, har_count_t rcount, const har_blocks_t *rv,
                             MPI_Datatype rtype, int root)
{
    int rank, size;
    start(s);
    if (!rank_in(a->comm, &rank, &size) || root < 0 || root >= size) return HAR_STAGE_UNTOUCHED;
    int in_place = sbuf == MPI_IN_PLACE && rank == root;
    if ((sbuf == MPI_IN_PLACE && rank != root) || add(s, a, HAR_SEND, sbuf, stype, scount, 0, NULL, 1, 0))
        return HAR_STAGE_UNTOUCHED;
    /* rbuf matters at the root only (and holds the root's block when in place). */
    if (rank == root &&
        (!blocks_given(rv) || add(s, a, HAR_RECV, rbuf, rtype, rcount * size, size, rv, in_place, 1)))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

int har_stage_prepare_scatter(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, har_count_t scount,
                              const har_blocks_t *sv, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                              MPI_Datatype rtype, int root)
{
    int rank, size;
    start(s);
    if (!rank_in(a->comm, &rank, &size) || root < 0 || root >= size) return HAR_STAGE_UNTOUCHED;
    /* sbuf matters at the root only; there rbuf may be MPI_IN_PLACE (the
     * root's block stays in sbuf). */
    if (rank == root && (!blocks_given(sv) || add(s, a, HAR_SEND, sbuf, stype, scount * size, size, sv, 1, 0)))
        return HAR_STAGE_UNTOUCHED;
    if ((rbuf == MPI_IN_PLACE && rank != root) || add(s, a, HAR_RECV, rbuf, rtype, rcount, 0, NULL, 0, 1))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

int har_stage_prepare_alltoall(har_stage_t *s, const har_stage_ask_t *a, const void *sbuf, har_count_t scount,
                               const har_blocks_t *sv, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                               const har_blocks_t *rv, MPI_Datatype rtype)
{
    int rank, size, in_place = sbuf == MPI_IN_PLACE;
    start(s);
    /* In place, rbuf holds the input, laid out as the output. */
    if (!rank_in(a->comm, &rank, &size) || (!in_place && !blocks_given(sv)) || !blocks_given(rv) ||
        add(s, a, HAR_SEND, sbuf, stype, scount * size, size, sv, 1, 0) ||
        add(s, a, HAR_RECV, rbuf, rtype, rcount * size, size, rv, in_place, 1))
        return HAR_STAGE_UNTOUCHED;
    return allocate(s, a);
}

/* ---- copies -------------------------------------------------------------- */

static void say_copy_failed(void)
{
    har_log(HAR_LOG_ERROR, "staging through host memory: %s", har_note_take());
}

har_status_t har_stage_in(har_stage_t *s)
{
    for (int i = 0; i < 2; i++) {
        har_span_t *sp = &s->s[i];
        if (sp->host && sp->in &&
            har_cuda_copy(sp->host, HAR_MEM_HOST, sp->user + sp->first, sp->kind, sp->bytes) != HAR_OK) {
            say_copy_failed();
            s->err = har_error_code(HAR_ERR_CUDA);
            return HAR_ERR_CUDA;
        }
    }
    return HAR_OK;
}

har_status_t har_stage_out(har_stage_t *s)
{
    for (int i = 0; i < 2; i++) {
        har_span_t *sp = &s->s[i];
        if (!sp->host || !sp->out) continue;
        if (har_cuda_copy(sp->user + sp->first, sp->kind, sp->host, HAR_MEM_HOST, sp->bytes) != HAR_OK) {
            say_copy_failed();
            s->err = har_error_code(HAR_ERR_CUDA);
            return HAR_ERR_CUDA;
        }
#ifdef HAR_TEST_HOOKS
        if (har_test_stage() == 2 && sp->kind == HAR_MEM_HOST && sp->bytes) sp->user[sp->first] ^= 1;
#endif
    }
    return HAR_OK;
}

void har_stage_release(har_stage_t *s)
{
    for (int i = 0; i < 2; i++) {
        har_stage_put(s->s[i].host);
        s->s[i].host = NULL;
    }
}

int har_stage_error(const har_stage_t *s)
{
    PMPI_Comm_call_errhandler(s->comm, s->err);
    return s->err;
}

int har_stage_finish(har_stage_t *s, int rc)
{
    if (rc == MPI_SUCCESS && har_stage_out(s) != HAR_OK) rc = -1;
    har_stage_release(s);
    return rc == -1 ? har_stage_error(s) : rc;
}
