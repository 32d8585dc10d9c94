/* MPI_Iallreduce and the persistent all-reduce through whatever library
 * provides them (the MPI alone, har preloaded or relinked, har's test
 * build), completed by every completion call in a random order, mixed with
 * point-to-point requests; every result checked against a reference each
 * rank computes alone, and the bytes between elements of derived types
 * left as they were.
 *
 * requests CASE [--device [--cuda-first]] [--expect staged|untouched|har:PATH[,PATH...] [--setup-host|--setup-none]
 *          [--across] [--progressed all|some]] [--blocking-by PATH] [--seed N] [--rounds N] [--thread-multiple]
 *   inflight    5 all-reduces of different types, counts and ops at once,
 *               beside a ring of Isend/Irecv, per round
 *   deadlock    rank 0 posts MPI_Iallreduce then MPI_Send, rank 1 MPI_Recv
 *               then MPI_Iallreduce: both complete (30 s alarm otherwise)
 *   crossed     two communicators, ranks of one parity post MPI_Iallreduce
 *               on the first, copy a device buffer to the host
 *               (cudaMemcpy, on the legacy default stream), then post on
 *               the second; the others in the other order (MPI allows
 *               any order across communicators): all complete (30 s
 *               alarm otherwise)
 *   persistent  MPI_Allreduce_init (MPIX_ under Open MPI 4.1) started by
 *               MPI_Start and MPI_Startall, freed, made again
 *   threads     4 threads, each on its own communicator: inflight's
 *               rounds, then blocking all-reduces on buffers made and
 *               freed each call (77: no MPI_THREAD_MULTIPLE)
 *   badargs     bad arguments under MPI_ERRORS_RETURN: prints each call's
 *               error class (the test compares them with the MPI's own)
 *   unattended  rank 0 posts MPI_Iallreduce (256 Ki ints), its post
 *               returning before its peers post theirs (0.5 s later), and
 *               then makes no MPI call for 4 s; every other rank's wait
 *               must end within 2 s of its post: only a progress thread
 *               moves rank 0's part meanwhile (with --thread-multiple; 77
 *               without it)
 * --thread-multiple: MPI_Init_thread asks for MPI_THREAD_MULTIPLE (77 if
 * the MPI does not provide it).
 * --blocking-by PATH[,PATH...] (threads, without har:PATH): har's counters
 * say that those paths served every blocking call between them.
 * --expect: har's counters say every all-reduce of this rank was staged, or
 * none was (and that each reached har's wrapper); har:PATH: a blocking
 * MPI_Allreduce first sets har up on each communicator, and then har
 * itself serves, by PATH, every MPI_Iallreduce and every start of a
 * persistent all-reduce of a predefined type and op (the derived types'
 * stay the MPI's, unstaged on host buffers, staged on device buffers, in
 * the same completion calls), and refuses to start or free a persistent
 * request it serves while it is active.
 * --setup-none (inflight, deadlock, persistent: the world's calls): no
 * blocking call at all; har sets the world up inside MPI_Init where every
 * rank has a CUDA context (--cuda-first: made before MPI_Init, as OSU's
 * benchmarks do), and its first started calls set it up for device buffers.
 * --progressed all|some: every started call of a predefined type ran har's
 * blocking path in a fiber, or some did but not all (the others went
 * ahead on the kernels). */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include "stagetest.h"
#ifdef OPEN_MPI
#include <mpi-ext.h>
#endif

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)  /* as src/entry/collectives.h */
#define ALLREDUCE_INIT MPI_Allreduce_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define ALLREDUCE_INIT MPIX_Allreduce_init
#endif

static long long posted, posted_init;  /* this rank's calls, for the counters */
static long long posted_own, setups;   /* --expect har:PATH: calls of predefined types and ops, and set-up calls */
static long long started_own;          /* and starts of persistent requests of predefined types */
static long long blocking_made;        /* the threads case's blocking calls */
static char *blocking_by;              /* --blocking-by PATH[,PATH...] */
static int set_up;                     /* --expect har:PATH */
static int setup_host;                 /* --setup-host */
static int setup_none;                 /* --setup-none */
static int across;                     /* --across: har's started calls ran its blocking path across nodes */
static const char *progressed_want;    /* --progressed all|some */
static int thread_multiple;            /* --thread-multiple (and the threads case) */
static int cuda_first;                 /* --cuda-first */
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

/* --cuda-first: a current CUDA context before MPI_Init, on the GPU of the
 * launcher's local rank (as Open MPI, MPICH's Hydra or Slurm name it). */
static int cuda_before_init(void)
{
#ifdef HAR_TEST_CUDA
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    int n = 0, local = 0;
    if (!on_device || cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return 0;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) {
            local = atoi(getenv(vars[i]));
            break;
        }
    return cudaSetDevice(local % n) == cudaSuccess && cudaFree(0) == cudaSuccess;
#else
    return 0;
#endif
}

/* Rank r's element i of slot j in round k: small integers, so that sums
 * are exact in every type and order. */
static int value(int r, long i, int j, int k) { return (int)((i * 31 + r * 17 + j * 5 + k) % 97) - 48; }

/* ---- one all-reduce "slot": buffers, reference, check -------------------- */

enum { S_INT_SUM, S_DOUBLE_INPLACE, S_LONG_MAX, S_VECTOR, S_RESIZED, NSLOTS };
#define HOLE (-7) /* what the bytes between a derived type's elements hold, before and after */

typedef struct {
    int kind, n;        /* n elements the reduction sees */
    MPI_Datatype type;  /* what the call names */
    int count;          /* of type */
    size_t bytes;       /* of each buffer */
    size_t stride;      /* bytes from one element to the next in the buffer */
    size_t esize;       /* bytes of one element */
    char *sbuf, *rbuf;  /* the call's (host or device) */
    char *host;         /* a host mirror of rbuf */
} slot_t;

static void slot_make(slot_t *s, int kind, int n)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->n = n;
    s->esize = kind == S_DOUBLE_INPLACE ? sizeof(double) : kind == S_LONG_MAX ? sizeof(long) : sizeof(int);
    s->stride = s->esize;
    s->type = kind == S_DOUBLE_INPLACE ? MPI_DOUBLE : kind == S_LONG_MAX ? MPI_LONG : MPI_INT;
    s->count = n;
    if (kind == S_VECTOR) {  /* one element of a vector type: n ints, each followed by a hole */
        MPI_Type_vector(n, 1, 2, MPI_INT, &s->type);
        MPI_Type_commit(&s->type);
        s->count = 1;
        s->stride = 2 * sizeof(int);
    } else if (kind == S_RESIZED) {  /* n elements of an int resized to two ints' extent */
        MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &s->type);
        MPI_Type_commit(&s->type);
        s->stride = 2 * sizeof(int);
    }
    s->bytes = (size_t)n * s->stride;
    s->sbuf = kind == S_DOUBLE_INPLACE ? NULL : buf_alloc(s->bytes);
    s->rbuf = buf_alloc(s->bytes);
    s->host = malloc(s->bytes);
}

static void slot_free(slot_t *s)
{
    if (s->kind == S_VECTOR || s->kind == S_RESIZED) MPI_Type_free(&s->type);
    if (s->sbuf) buf_free(s->sbuf);
    buf_free(s->rbuf);
    free(s->host);
}

static void put_elem(const slot_t *s, char *mem, long i, long v)
{
    if (s->kind == S_DOUBLE_INPLACE) ((double *)mem)[i] = (double)v;
    else if (s->kind == S_LONG_MAX) ((long *)mem)[i] = v;
    else ((int *)(mem + i * s->stride))[0] = (int)v;
}

static long get_elem(const slot_t *s, const char *mem, long i)
{
    if (s->kind == S_DOUBLE_INPLACE) return (long)((const double *)mem)[i];
    if (s->kind == S_LONG_MAX) return ((const long *)mem)[i];
    return ((const int *)(mem + i * s->stride))[0];
}

/* Inputs of round k in place; the receive buffer poisoned, holes marked. */
static void slot_fill(slot_t *s, int j, int k)
{
    char *in = malloc(s->bytes);
    for (size_t b = 0; b < s->bytes / sizeof(int); b++) ((int *)in)[b] = HOLE;
    for (long i = 0; i < s->n; i++) put_elem(s, in, i, value(world_rank, i, j, k));
    if (s->sbuf) {
        buf_put(s->sbuf, in, s->bytes);
        for (long i = 0; i < s->n; i++) put_elem(s, in, i, 12345);  /* poison where results go */
    }
    buf_put(s->rbuf, in, s->bytes);
    free(in);
}

static long slot_want(const slot_t *s, long i, int j, int k)
{
    long acc = s->kind == S_LONG_MAX ? -1000 : 0;
    for (int r = 0; r < world_size; r++) {
        long v = value(r, i, j, k);
        acc = s->kind == S_LONG_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return acc;
}

static void slot_check(slot_t *s, int j, int k, const char *how)
{
    buf_get(s->host, s->rbuf, s->bytes);
    for (long i = 0; i < s->n; i++) {
        long got = get_elem(s, s->host, i), want = slot_want(s, i, j, k);
        if (got != want) {
            FAIL("round %d, %s, slot %d (count %d): element %ld is %ld, not %ld", k, how, j, s->n, i, got, want);
            return;
        }
        if (s->stride > s->esize && ((int *)(s->host + i * s->stride))[1] != HOLE) {
            FAIL("round %d, %s, slot %d: the hole after element %ld changed", k, how, j, i);
            return;
        }
    }
}

/* The derived types' sum: predefined ops take predefined types only (Open
 * MPI refuses others). In both types the ints of an element, and the
 * elements of the resized one, are two ints apart. */
static MPI_Op strided_sum;
static void strided_sum_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
    MPI_Aint lb, extent;
    int size;
    MPI_Type_get_extent(*type, &lb, &extent);
    MPI_Type_size(*type, &size);
    for (int k = 0; k < *len; k++)
        for (int m = 0; m < size / (int)sizeof(int); m++) {
            size_t at = (size_t)k * (size_t)extent + (size_t)m * 2 * sizeof(int);
            *(int *)((char *)inout + at) += *(const int *)((const char *)in + at);
        }
}

static MPI_Op slot_op(const slot_t *s)
{
    return s->kind == S_LONG_MAX ? MPI_MAX : s->kind == S_VECTOR || s->kind == S_RESIZED ? strided_sum : MPI_SUM;
}

static int slot_post(slot_t *s, MPI_Comm comm, MPI_Request *req)
{
    pthread_mutex_lock(&count_lock);
    posted++;
    posted_own += s->kind != S_VECTOR && s->kind != S_RESIZED;
    pthread_mutex_unlock(&count_lock);
    return MPI_Iallreduce(s->sbuf ? s->sbuf : MPI_IN_PLACE, s->rbuf, s->count, s->type, slot_op(s), comm, req);
}

/* --expect har:PATH: har sets up on a communicator at a blocking call,
 * on the kind of buffers the case uses; with --setup-host, a non-blocking
 * call on device buffers first (the MPI serves it, staged: nothing set
 * the communicator up), then a blocking call on host buffers, which sets
 * it up for device buffers (as osu_iallreduce's checks between sizes
 * do). */
static void setup_comm(MPI_Comm comm)
{
    if (!set_up || setup_none) return;
    slot_t s;
    if (setup_host) {
        MPI_Request r;
        slot_make(&s, S_INT_SUM, 16);
        slot_fill(&s, 0, 0);
        MPI_Iallreduce(s.sbuf, s.rbuf, s.count, s.type, MPI_SUM, comm, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        slot_check(&s, 0, 0, "the non-blocking call before the set-up");
        slot_free(&s);
        int one = 1, size = 0, sum = 0;
        MPI_Comm_size(comm, &size);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
        if (sum != size) FAIL("the set-up call on host buffers: %d, not %d", sum, size);
        pthread_mutex_lock(&count_lock);
        posted++;  /* staged: among the calls `others` counts */
        pthread_mutex_unlock(&count_lock);
        return;
    }
    slot_make(&s, S_INT_SUM, 16);
    slot_fill(&s, 0, 0);
    MPI_Allreduce(s.sbuf, s.rbuf, s.count, s.type, MPI_SUM, comm);
    slot_check(&s, 0, 0, "the set-up call");
    slot_free(&s);
    pthread_mutex_lock(&count_lock);
    setups++;
    pthread_mutex_unlock(&count_lock);
}

/* ---- completing an array of requests, nine ways ------------------------- */

static const char *const methods[] = {"MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Testall", "MPI_Waitany",
                                      "MPI_Testany", "MPI_Waitsome", "MPI_Testsome", "MPI_Request_get_status"};
#define NMETHODS 9

/* MPI_STATUSES_IGNORE out of the compiler's sight: MPICH's header marks the
 * statuses as written, and GCC warns about its (MPI_Status *)1. */
__attribute__((noinline)) static MPI_Status *statuses(MPI_Status *st, int use)
{
    return use ? st : MPI_STATUSES_IGNORE;
}

static void take_out(MPI_Request *a, MPI_Request *kept, int i)
{
    kept[i] = a[i];
    a[i] = MPI_REQUEST_NULL;
}

/* Completes every request of reqs (in a random order where the method
 * lets the caller choose); `early` (get_status) is called once every
 * request reported complete, before any is freed. */
static void complete(int method, MPI_Request *reqs, int n, void (*early)(void *), void *arg)
{
    int order[64], idx[64], out, flag, done = 0, index;
    MPI_Status st[64];
    for (int i = 0; i < n; i++) order[i] = i;
    shuffle(order, n);
    MPI_Request shuffled[64], kept[64];
    for (int i = 0; i < n; i++) kept[i] = shuffled[i] = reqs[order[i]];
    switch (method) {
    case 0:
        for (int i = 0; i < n; i++) MPI_Wait(&reqs[order[i]], rnd(2) ? &st[0] : MPI_STATUS_IGNORE);
        break;
    case 1: {
        int finished[64] = {0};  /* a persistent request tests complete again once inactive */
        while (done < n)
            for (int i = 0; i < n; i++)
                if (!finished[i]) {
                    MPI_Test(&reqs[order[i]], &flag, MPI_STATUS_IGNORE);
                    finished[i] = flag;
                    done += flag;
                }
        break;
    }
    case 2:
        MPI_Waitall(n, shuffled, statuses(st, rnd(2)));
        break;
    case 3:
        for (flag = 0; !flag;) MPI_Testall(n, shuffled, &flag, statuses(st, rnd(2)));
        break;
    /* The "any" and "some" calls: a request that completed is taken out
     * of the array (what it left, kept: a persistent one stays), since
     * MPICH 4.0.2 reports an inactive persistent collective request as
     * completing again instead of ignoring it. */
    case 4:
        for (index = 0; index != MPI_UNDEFINED;) {
            MPI_Waitany(n, shuffled, &index, MPI_STATUS_IGNORE);
            if (index != MPI_UNDEFINED) take_out(shuffled, kept, index);
        }
        break;
    case 5:
        for (;;) {
            MPI_Testany(n, shuffled, &index, &flag, MPI_STATUS_IGNORE);
            if (flag && index == MPI_UNDEFINED) break;
            if (flag) take_out(shuffled, kept, index);
        }
        break;
    case 6:
        for (out = 0; out != MPI_UNDEFINED;) {
            MPI_Waitsome(n, shuffled, &out, idx, statuses(st, rnd(2)));
            for (int k = 0; out != MPI_UNDEFINED && k < out; k++) take_out(shuffled, kept, idx[k]);
        }
        break;
    case 7:
        for (out = 0; out != MPI_UNDEFINED;) {
            MPI_Testsome(n, shuffled, &out, idx, statuses(st, 0));
            for (int k = 0; out != MPI_UNDEFINED && k < out; k++) take_out(shuffled, kept, idx[k]);
        }
        break;
    case 8:
        /* Complete by the status alone: the results are there before the
         * requests are freed. */
        for (int left = n; left > 0;) {
            left = 0;
            for (int i = 0; i < n; i++) {
                MPI_Request_get_status(reqs[order[i]], &flag, MPI_STATUS_IGNORE);
                left += !flag;
            }
        }
        if (early) early(arg);
        MPI_Waitall(n, reqs, statuses(st, 0));
        break;
    }
    if (method >= 2 && method <= 3)
        for (int i = 0; i < n; i++) reqs[order[i]] = shuffled[i];
    if (method >= 4 && method <= 7)
        for (int i = 0; i < n; i++) reqs[order[i]] = kept[i];
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL && method != 8) {
            /* a persistent request stays: it must be inactive now */
            MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
            if (!flag) FAIL("%s left request %d incomplete", methods[method], i);
        }
}

/* ---- inflight ------------------------------------------------------------ */

typedef struct {
    slot_t slots[NSLOTS];
    int *ring_in, *ring_out, ring_n;
    int round;
    const char *how;
} round_t;

#define MARK 777 /* written after MPI_Request_get_status said complete: the wait after must keep it */

static void check_round(void *arg)
{
    round_t *r = arg;
    for (int j = 0; j < NSLOTS; j++) slot_check(&r->slots[j], j, r->round, r->how);
    if (r->how == methods[8]) {
        int mark = MARK;
        buf_put(r->slots[S_INT_SUM].rbuf, &mark, sizeof mark);
    }
    int left = (world_rank + world_size - 1) % world_size;
    for (int i = 0; i < r->ring_n; i++)
        if (r->ring_in[i] != value(left, i, 99, r->round)) {
            FAIL("round %d, %s: point-to-point element %d from rank %d wrong", r->round, r->how, i, left);
            break;
        }
}

static void inflight(MPI_Comm comm, int rounds)
{
    static const int counts[] = {1, 7, 1000, 65537};
    round_t r;
    enum { ORDER = NMETHODS * 4 };
    int order[ORDER], n = 0, norder = rounds < ORDER ? rounds : ORDER;
    for (int k = 0; k < norder; k++) order[k] = k % NMETHODS;  /* every method, in a random order */
    shuffle(order, norder);
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    setup_comm(comm);
    r.ring_n = 100;
    r.ring_in = malloc(r.ring_n * sizeof(int));
    r.ring_out = malloc(r.ring_n * sizeof(int));
    for (int k = 0; k < rounds; k++) {
        for (int j = 0; j < NSLOTS; j++) {
            slot_make(&r.slots[j], j, counts[(j + k) % 4]);
            slot_fill(&r.slots[j], j, k);
        }
        MPI_Request reqs[NSLOTS + 2];
        n = 0;
        /* point-to-point among the collectives: a receive posted first, a send last */
        MPI_Irecv(r.ring_in, r.ring_n, MPI_INT, (rank + size - 1) % size, k, comm, &reqs[n++]);
        for (int j = 0; j < NSLOTS; j++) slot_post(&r.slots[j], comm, &reqs[n++]);
        for (int i = 0; i < r.ring_n; i++) r.ring_out[i] = value(rank, i, 99, k);
        MPI_Isend(r.ring_out, r.ring_n, MPI_INT, (rank + 1) % size, k, comm, &reqs[n++]);
        int method = order[k % norder];
        r.round = k;
        r.how = methods[method];
        complete(method, reqs, n, check_round, &r);
        if (method != 8) check_round(&r);
        int mark = 0;
        buf_get(&mark, r.slots[S_INT_SUM].rbuf, sizeof mark);
        if (method == 8 && mark != MARK) FAIL("round %d: the wait after MPI_Request_get_status copied the result again", k);
        for (int j = 0; j < NSLOTS; j++) slot_free(&r.slots[j]);
    }
    free(r.ring_in);
    free(r.ring_out);
}

/* ---- deadlock -------------------------------------------------------------- */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: deadlock: still waiting after 30 s\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(3);
}

static void deadlock(void)
{
    setup_comm(MPI_COMM_WORLD);
    signal(SIGALRM, on_alarm);
    alarm(30);
    slot_t s;
    slot_make(&s, S_INT_SUM, 1000);
    slot_fill(&s, 0, 0);
    MPI_Request req;
    int token = 42, got = 0;
    if (world_rank == 0) {
        slot_post(&s, MPI_COMM_WORLD, &req);
        MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
    } else if (world_rank == 1) {
        MPI_Recv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        slot_post(&s, MPI_COMM_WORLD, &req);
        if (got != 42) FAIL("deadlock: received %d, not 42", got);
    } else {
        slot_post(&s, MPI_COMM_WORLD, &req);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    alarm(0);
    slot_check(&s, 0, 0, "deadlock case");
    slot_free(&s);
}

/* ---- unattended ------------------------------------------------------------ */

static void unattended(void)
{
    setup_comm(MPI_COMM_WORLD);
    slot_t s;
    slot_make(&s, S_INT_SUM, 1 << 18);
    slot_fill(&s, 0, 0);
    MPI_Request req;
    if (world_rank != 0) usleep(500000);  /* rank 0's post must return before its peers post */
    double posted_at = MPI_Wtime();
    slot_post(&s, MPI_COMM_WORLD, &req);
    double post_took = MPI_Wtime() - posted_at;
    if (world_rank == 0 && post_took > 0.25)
        FAIL("unattended: rank 0's MPI_Iallreduce took %.2f s: it waited for its peers' posts", post_took);
    if (world_rank == 0) sleep(4);  /* computing: no MPI call */
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    double waited = MPI_Wtime() - posted_at;
    if (world_rank != 0 && waited > 2.0)
        FAIL("unattended: rank %d's call took %.2f s while rank 0 made no MPI call: nothing moved rank 0's part",
             world_rank, waited);
    slot_check(&s, 0, 0, "unattended case");
    slot_free(&s);
}

/* ---- crossed ---------------------------------------------------------------- */

static void crossed(int rounds)
{
    MPI_Comm comm[2];
    for (int c = 0; c < 2; c++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm[c]);
        setup_comm(comm[c]);
    }
    signal(SIGALRM, on_alarm);
    for (int k = 0; k < rounds; k++) {
        alarm(30);
        slot_t s[2];
        MPI_Request req[2];
        int first = world_rank % 2, copied = 0;
        for (int c = 0; c < 2; c++) {
            slot_make(&s[c], S_INT_SUM, c ? 1000 : 7);
            slot_fill(&s[c], c, k);
        }
        slot_post(&s[first], comm[first], &req[0]);
        buf_get(&copied, s[!first].sbuf, sizeof copied);  /* the other call's first input: not yet posted */
        if (copied != value(world_rank, 0, !first, k)) FAIL("crossed: the copy read %d", copied);
        slot_post(&s[!first], comm[!first], &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        alarm(0);
        for (int c = 0; c < 2; c++) {
            slot_check(&s[c], c, k, "crossed case");
            slot_free(&s[c]);
        }
    }
    for (int c = 0; c < 2; c++) MPI_Comm_free(&comm[c]);
}

/* ---- persistent ------------------------------------------------------------ */

static int mpich_underneath(void)
{
    static int known = -1;
    if (known < 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(version, &len);
        known = strstr(version, "MPICH") != NULL;
    }
    return known;
}

#ifdef ALLREDUCE_INIT
/* A persistent request har serves, while it runs: starting or freeing it
 * is refused with MPI_ERR_REQUEST, and it goes on (MPI 4.1, 3.7.3 and
 * 3.9 make both erroneous; the MPIs' own answers differ). */
static void refused_while_active(MPI_Request *req)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request kept = *req;
    int cls[2] = {-1, -1}, rc[2] = {MPI_Start(req), MPI_Request_free(req)};
    for (int i = 0; i < 2; i++)
        if (rc[i] != MPI_SUCCESS) MPI_Error_class(rc[i], &cls[i]);
    if (cls[0] != MPI_ERR_REQUEST || cls[1] != MPI_ERR_REQUEST || *req != kept)
        FAIL("a running persistent request started again / freed: classes %d and %d, not MPI_ERR_REQUEST (%d)%s",
             cls[0], cls[1], MPI_ERR_REQUEST, *req != kept ? ", and its handle changed" : "");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void persistent(int rounds)
{
    setup_comm(MPI_COMM_WORLD);
    for (int life = 0; life < 2; life++) {  /* made, used, freed; then made again */
        slot_t p[2], q;
        MPI_Request reqs[4];
        for (int j = 0; j < 2; j++) {
            slot_make(&p[j], j == 0 ? S_INT_SUM : S_DOUBLE_INPLACE, j == 0 ? 1000 : 65537);
            ALLREDUCE_INIT(p[j].sbuf ? p[j].sbuf : MPI_IN_PLACE, p[j].rbuf, p[j].count, p[j].type, MPI_SUM,
                           MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[j]);
            posted_init++;
        }
        for (int k = 0; k < rounds; k++) {
            int round = life * 100 + k;
            for (int j = 0; j < 2; j++) slot_fill(&p[j], j, round);
            if (k % 2) {
                MPI_Startall(2, reqs);
            } else {
                MPI_Start(&reqs[1]);
                MPI_Start(&reqs[0]);
            }
            started_own += 2;
            if (set_up && k == 1) refused_while_active(&reqs[0]);
            /* a staged non-blocking all-reduce beside them, and a self message */
            slot_make(&q, S_LONG_MAX, 7);
            slot_fill(&q, 2, round);
            slot_post(&q, MPI_COMM_WORLD, &reqs[2]);
            int x = round, y = -1;
            MPI_Request self[2];
            MPI_Irecv(&y, 1, MPI_INT, world_rank, 5, MPI_COMM_WORLD, &self[0]);
            MPI_Isend(&x, 1, MPI_INT, world_rank, 5, MPI_COMM_WORLD, &reqs[3]);
            MPI_Wait(&self[0], MPI_STATUS_IGNORE);
            int method = (int)rnd(NMETHODS);
            if (method == 8) method = 2;  /* get_status needs requests that end: covered by inflight */
            /* MPICH's MPI_Testall (4.0.2; 5.0.2 through the standard ABI
             * fails with "Invalid MPI_Request") returns MPI_ERR_IN_STATUS,
             * every status MPI_SUCCESS, once a persistent collective is
             * among the requests: known at run time, since a build for the
             * standard ABI does not know which MPI it runs on. */
            if (method == 3 && mpich_underneath()) method = 2;
            complete(method, reqs, 4, NULL, NULL);
            for (int j = 0; j < 2; j++) slot_check(&p[j], j, round, methods[method]);
            slot_check(&q, 2, round, methods[method]);
            slot_free(&q);
            if (y != round) FAIL("persistent round %d: self message %d", round, y);
        }
        for (int j = 0; j < 2; j++) {
            MPI_Request_free(&reqs[j]);
            if (reqs[j] != MPI_REQUEST_NULL) FAIL("MPI_Request_free left a handle");
            slot_free(&p[j]);
        }
        check_stage_state("after the persistent requests were freed");
    }
}
#endif

/* ---- bad arguments ----------------------------------------------------------- */

/* Each bad call's error class, as the MPI gives it (har must hand these to
 * the MPI untouched, staged path included). */
static void say(const char *what, int rc, MPI_Request *req)
{
    int cls = -1;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    printf("requests: rank %d: %s: %s, class %d\n", world_rank, what, rc ? "error" : "success", cls);
    if (req && *req != MPI_REQUEST_NULL) MPI_Wait(req, MPI_STATUS_IGNORE);
}

static void badargs(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int *in = buf_alloc(64 * sizeof(int)), *out = buf_alloc(64 * sizeof(int));
    MPI_Request r = MPI_REQUEST_NULL;
    say("iallreduce datatype", MPI_Iallreduce(in, out, 4, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, &r), &r);
    say("iallreduce op", MPI_Iallreduce(in, out, 4, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, &r), &r);
    say("iallreduce comm", MPI_Iallreduce(in, out, 4, MPI_INT, MPI_SUM, MPI_COMM_NULL, &r), &r);
    say("bcast root", MPI_Bcast(in, 4, MPI_INT, world_size + 3, MPI_COMM_WORLD), NULL);
    say("ibcast datatype", MPI_Ibcast(in, 4, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD, &r), &r);
    say("gather root", MPI_Gather(in, 4, MPI_INT, out, 4, MPI_INT, -5, MPI_COMM_WORLD), NULL);
    say("wait on a null pointer", MPI_Wait(NULL, MPI_STATUS_IGNORE), NULL);
    buf_free(in);
    buf_free(out);
}

/* ---- threads --------------------------------------------------------------- */

typedef struct { MPI_Comm comm; int t, rounds; } thread_arg_t;

/* Blocking all-reduces of several sizes, each on buffers made and freed
 * for it: on device buffers a cudaFree synchronises the whole GPU, so it
 * waits for any call another thread has in flight, while that call's
 * peers may be making the same wait. */
static void blocking_calls(MPI_Comm comm, int t, int rounds)
{
    static const int counts[] = {3, 1000, 20000, 65537};
    for (int k = 0; k < rounds; k++) {
        slot_t s;
        slot_make(&s, S_INT_SUM, counts[(k + t) % 4]);
        slot_fill(&s, S_INT_SUM, k);
        MPI_Allreduce(s.sbuf, s.rbuf, s.count, s.type, MPI_SUM, comm);
        slot_check(&s, S_INT_SUM, k, "a blocking call");
        slot_free(&s);
    }
    pthread_mutex_lock(&count_lock);
    blocking_made += rounds;
    pthread_mutex_unlock(&count_lock);
}

static void *worker(void *p)
{
    thread_arg_t *a = p;
    rng_seed(1000u * (unsigned)a->t + (unsigned)world_rank);
    inflight(a->comm, a->rounds);
    blocking_calls(a->comm, a->t, 4 * a->rounds);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    const char *expect = NULL;
    int rounds = 18, provided;
    unsigned seed = 1;
    prog = "requests";
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--device")) on_device = 1;
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc) set_up = !strncmp(expect = argv[++i], "har:", 4);
        else if (!strcmp(argv[i], "--setup-host")) setup_host = 1;
        else if (!strcmp(argv[i], "--setup-none")) setup_none = 1;
        else if (!strcmp(argv[i], "--cuda-first")) cuda_first = 1;
        else if (!strcmp(argv[i], "--progressed") && i + 1 < argc) progressed_want = argv[++i];
        else if (!strcmp(argv[i], "--across")) across = 1;
        else if (!strcmp(argv[i], "--thread-multiple")) thread_multiple = 1;
        else if (!strcmp(argv[i], "--blocking-by") && i + 1 < argc) blocking_by = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "requests: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    thread_multiple |= !strcmp(what, "threads");
    if (cuda_first && !cuda_before_init()) {
        printf("requests: no GPU; skipped\n");
        return 77;
    }
    MPI_Init_thread(&argc, &argv, thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (thread_multiple && provided < MPI_THREAD_MULTIPLE) {
        if (world_rank == 0) printf("requests: the MPI does not provide MPI_THREAD_MULTIPLE; skipped\n");
        MPI_Finalize();
        return 77;
    }
    rng_seed(seed * 1000003u + (unsigned)world_rank);
    MPI_Op_create(strided_sum_fn, 1, &strided_sum);
    if (on_device && !device_setup()) {
        if (world_rank == 0) printf("requests: no GPU; skipped\n");
        MPI_Finalize();
        return 77;
    }
    if (!strcmp(what, "inflight")) {
        inflight(MPI_COMM_WORLD, rounds);
    } else if (!strcmp(what, "deadlock")) {
        if (world_size < 2) FAIL("deadlock needs 2 ranks");
        else deadlock();
    } else if (!strcmp(what, "crossed")) {
        crossed(rounds);
    } else if (!strcmp(what, "persistent")) {
#ifdef ALLREDUCE_INIT
        persistent(rounds / 2);
#else
        if (world_rank == 0) printf("requests: this MPI has no persistent all-reduce; skipped\n");
        MPI_Finalize();
        return 77;
#endif
    } else if (!strcmp(what, "badargs")) {
        badargs();
    } else if (!strcmp(what, "unattended")) {
        if (!thread_multiple) {
            if (world_rank == 0) printf("requests: unattended needs --thread-multiple; skipped\n");
            MPI_Finalize();
            return 77;
        }
        unattended();
    } else if (!strcmp(what, "threads")) {
        enum { T = 4 };
        thread_arg_t a[T];
        pthread_t th[T];
        for (int t = 0; t < T; t++) {
            a[t] = (thread_arg_t){MPI_COMM_NULL, t, rounds / 2};
            MPI_Comm_dup(MPI_COMM_WORLD, &a[t].comm);
        }
        for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, worker, &a[t]);
        for (int t = 0; t < T; t++) {
            pthread_join(th[t], NULL);
            MPI_Comm_free(&a[t].comm);
        }
    } else {
        fprintf(stderr, "usage: requests inflight|deadlock|crossed|persistent|threads|badargs|unattended [--device [--cuda-first]] [--expect staged|untouched|har:PATH[,PATH...] [--setup-host|--setup-none] [--across] [--progressed all|some]] [--blocking-by PATH]"
                        " [--seed N] [--rounds N] [--thread-multiple]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    check_stage_state("at the end");
    long long seen = counter("iallreduce"), staged = counter("iallreduce_staged");
    long long seen_init = counter("allreduce_init"), staged_init = counter("allreduce_init_staged");
    if (set_up) {
        long long by = 0;  /* har:PATH[,PATH...]: the calls of those paths, summed */
        char paths[128];
        snprintf(paths, sizeof paths, "%s", expect + 4);
        for (char *save, *path = strtok_r(paths, ",", &save); path; path = strtok_r(NULL, ",", &save))
            by += counter(path);
        long long others = on_device ? posted - posted_own : 0;  /* the derived types' and the warm-ups */
        if (seen != posted || staged != others || by != posted_own + started_own + setups + blocking_made)
            FAIL("expected %s: har counted %lld MPI_Iallreduce (this rank made %lld), staged %lld (not %lld), and %lld "
                 "calls by %s where %lld of predefined types, %lld persistent starts, %lld set-up calls and %lld "
                 "other blocking calls were made",
                 expect, seen, posted, staged, others, by, expect + 4, posted_own, started_own, setups, blocking_made);
        long long progressed = counter("progressed"), own = posted_own + started_own;
        int all = across || (progressed_want && !strcmp(progressed_want, "all"));
        if (all && progressed != own)
            FAIL("expected every started call on har's blocking path in a fiber: %lld progressed, where %lld "
                 "MPI_Iallreduce of predefined types and %lld persistent starts were made",
                 progressed, posted_own, started_own);
        if (progressed_want && !strcmp(progressed_want, "some") && (progressed < 1 || progressed >= own))
            FAIL("expected the first started calls on har's blocking path in a fiber and the later ones ahead: %lld "
                 "progressed of %lld MPI_Iallreduce of predefined types and %lld persistent starts",
                 progressed, posted_own, started_own);
    } else if (expect) {
        int want_staged = !strcmp(expect, "staged");
        if (seen != posted || seen_init != posted_init)
            FAIL("har counted %lld MPI_Iallreduce and %lld persistent inits, this rank made %lld and %lld", seen,
                 seen_init, posted, posted_init);
        if (staged != (want_staged ? posted : 0) || staged_init != (want_staged ? posted_init : 0))
            FAIL("expected %s: %lld of %lld all-reduces and %lld of %lld inits staged", expect, staged, posted,
                 staged_init, posted_init);
    }
    char by_paths[160] = "";
    if (blocking_by && !set_up) {
        long long by = 0;
        for (char *path = strtok(blocking_by, ","); path; path = strtok(NULL, ",")) {
            by += counter(path);
            snprintf(by_paths + strlen(by_paths), sizeof by_paths - strlen(by_paths), "%s %s=%lld",
                     by_paths[0] ? "," : "; blocking calls by", path, counter(path));
        }
        if (by != blocking_made) FAIL("har counted %lld calls by those paths (%s), where this rank made %lld blocking calls",
                                      by, by_paths, blocking_made);
    }
    MPI_Op_free(&strided_sum);
    printf("requests: rank %d: %s: %s (%lld MPI_Iallreduce, %lld inits; har counted %lld, staged %lld%s)\n",
           world_rank, what, failures ? "FAILED" : "ok", posted, posted_init, seen, staged, by_paths);
    MPI_Finalize();
    return failures != 0;
}
