/* The collectives other than MPI_Allreduce, blocking and non-blocking,
 * through whatever library provides them (the MPI alone, har preloaded or
 * relinked, har's test build): MPI_Bcast, MPI_Reduce, MPI_Allgather(v),
 * MPI_Reduce_scatter(_block), MPI_Gather(v), MPI_Scatter(v),
 * MPI_Alltoall(v), each with and without MPI_IN_PLACE where the call has
 * it, at two roots, two sizes, v forms with uneven counts and gaps between
 * blocks, and a broadcast of a derived type with holes. Every receive
 * buffer is compared whole with what it must hold afterwards, gaps, holes
 * and the receive buffers of non-roots included; the non-blocking forms
 * are all in flight at once and completed in a random order.
 *
 * collectives [--device|--cuda-host] [--large] [--expect staged|untouched] [--seed N]
 * --cuda-host: host buffers in a process that has a GPU context (har then
 * asks the driver about every buffer).
 * --large: every call through its MPI-4 large-count binding (MPI_Bcast_c,
 * ..., with MPI_Count counts and MPI_Aint displacements); where the MPI has
 * none (MPI 3) the program says so and exits 77.
 * --expect: har's counters say each call of this rank reached its wrapper,
 * and every one, or none, was staged. */
#include "stagetest.h"

#define POISON (-1)
#define MAXR 64

static int value(int r, long i) { return (int)((r * 7919L + i * 13) % 10007); }

typedef struct {
    const char *name;            /* the counter of the form used */
    int *hs, *hr, *want;         /* host: input, initial receive buffer, expected receive buffer */
    size_t ns, nr;               /* ints in each */
    char *sbuf, *rbuf;           /* the call's buffers (host or device) */
    int root, in_place, n;
    int counts[MAXR], displs[MAXR], rcounts[MAXR], rdispls[MAXR];
    /* the same in the large-count bindings' widths (a request's arrays
     * must stay until it completes) */
    MPI_Count lcounts[MAXR], lrcounts[MAXR];
    MPI_Aint ldispls[MAXR], lrdispls[MAXR];
    MPI_Datatype type;           /* of the data (MPI_INT or a derived type) */
    int check_prefix;            /* only the first ints of rbuf are defined afterwards */
} job_t;

static long long calls[64];
static int ncalls_names;
static const char *names[64];

static void count_call(const char *name)
{
    int i = 0;
    while (i < ncalls_names && strcmp(names[i], name)) i++;
    if (i == ncalls_names) names[ncalls_names++] = strdup(name);
    calls[i]++;
}

static int *ints(size_t n, int v)
{
    int *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

/* v-form blocks: rank r's block has c(r) ints and starts 2 ints after the
 * previous one ends (a gap the call must leave alone). */
static int vcount(int r, int n) { return n / 2 + r % 3 + 1; }
static int vlayout(int *counts, int *displs, int n)
{
    int off = 0;
    for (int r = 0; r < world_size; r++) {
        counts[r] = vcount(r, n);
        displs[r] = off;
        off += counts[r] + 2;
    }
    return off;
}

static void job_buffers(job_t *j)
{
    for (int r = 0; r < world_size; r++) {
        j->lcounts[r] = j->counts[r];
        j->lrcounts[r] = j->rcounts[r];
        j->ldispls[r] = j->displs[r];
        j->lrdispls[r] = j->rdispls[r];
    }
    j->sbuf = j->hs ? buf_alloc(j->ns * sizeof(int)) : NULL;
    j->rbuf = buf_alloc(j->nr * sizeof(int));
    if (j->hs) buf_put(j->sbuf, j->hs, j->ns * sizeof(int));
    buf_put(j->rbuf, j->hr, j->nr * sizeof(int));
}

/* Sets up collective `c` (its variant: in place, root, size) in j. */
enum { BCAST, BCAST_VECTOR, REDUCE, ALLGATHER, ALLGATHERV, RSB, RS, GATHER, GATHERV, SCATTER, SCATTERV, ALLTOALL,
       ALLTOALLV, NCOLL };
static const char *const coll_names[NCOLL] = {"bcast", "bcast", "reduce", "allgather", "allgatherv",
                                             "reduce_scatter_block", "reduce_scatter", "gather", "gatherv",
                                             "scatter", "scatterv", "alltoall", "alltoallv"};
/* which have an MPI_IN_PLACE form, and which a root */
static const int has_in_place[NCOLL] = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1};
static const int has_root[NCOLL] = {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0};

static void setup(job_t *j, int c, int in_place, int root, int n)
{
    int p = world_size, me = world_rank, total = 0;
    memset(j, 0, sizeof *j);
    j->in_place = in_place;
    j->root = root;
    j->n = n;
    j->type = MPI_INT;
    switch (c) {
    case BCAST:
        j->nr = n;
        j->hr = ints(n, POISON);
        j->want = ints(n, 0);
        for (int i = 0; i < n; i++) j->want[i] = value(root, i);
        if (me == root) memcpy(j->hr, j->want, n * sizeof(int));
        break;
    case BCAST_VECTOR:  /* n ints, each followed by a hole: the receivers' holes stay as they were */
        MPI_Type_vector(n, 1, 2, MPI_INT, &j->type);
        MPI_Type_commit(&j->type);
        j->nr = 2 * (size_t)n;
        j->hr = ints(j->nr, me == root ? -5 : POISON);
        j->want = ints(j->nr, me == root ? -5 : POISON);
        for (int i = 0; i < n; i++) j->want[2 * i] = value(root, i);
        if (me == root) memcpy(j->hr, j->want, j->nr * sizeof(int));
        break;
    case REDUCE:
        j->ns = n;
        j->hs = ints(n, 0);
        for (int i = 0; i < n; i++) j->hs[i] = value(me, i);
        j->nr = n;
        j->hr = ints(n, POISON);
        j->want = ints(n, POISON);  /* a non-root's receive buffer is not touched */
        if (me == root)
            for (int i = 0; i < n; i++) {
                j->want[i] = 0;
                for (int r = 0; r < p; r++) j->want[i] += value(r, i);
            }
        if (in_place && me == root) {
            memcpy(j->hr, j->hs, n * sizeof(int));
            free(j->hs);
            j->hs = NULL;
        }
        break;
    case ALLGATHER:
    case GATHER:
        j->ns = n;
        j->hs = ints(n, 0);
        for (int i = 0; i < n; i++) j->hs[i] = value(me, i);
        j->nr = (size_t)n * p;
        j->hr = ints(j->nr, POISON);
        j->want = ints(j->nr, POISON);
        if (c == ALLGATHER || me == root)
            for (int r = 0; r < p; r++)
                for (int i = 0; i < n; i++) j->want[r * n + i] = value(r, i);
        if (in_place && (c == ALLGATHER || me == root)) {
            memcpy(j->hr + (size_t)me * n, j->hs, n * sizeof(int));
            free(j->hs);
            j->hs = NULL;
        }
        break;
    case ALLGATHERV:
    case GATHERV:
        total = vlayout(j->counts, j->displs, n);
        j->ns = j->counts[me];
        j->hs = ints(j->ns, 0);
        for (int i = 0; i < j->counts[me]; i++) j->hs[i] = value(me, i);
        j->nr = total;
        j->hr = ints(j->nr, POISON);
        j->want = ints(j->nr, POISON);
        if (c == ALLGATHERV || me == root)
            for (int r = 0; r < p; r++)
                for (int i = 0; i < j->counts[r]; i++) j->want[j->displs[r] + i] = value(r, i);
        if (in_place && (c == ALLGATHERV || me == root)) {
            memcpy(j->hr + j->displs[me], j->hs, j->ns * sizeof(int));
            free(j->hs);
            j->hs = NULL;
        }
        break;
    case RSB:
    case RS: {
        int off = 0, mine = n;
        for (int r = 0; r < p; r++) {
            j->counts[r] = c == RS ? vcount(r, n) : n;
            if (r < me) off += j->counts[r];
            total += j->counts[r];
        }
        mine = j->counts[me];
        j->ns = total;
        j->hs = ints(total, 0);
        for (int i = 0; i < total; i++) j->hs[i] = value(me, i);
        j->nr = in_place ? (size_t)total : (size_t)mine;
        j->hr = ints(j->nr, POISON);
        j->want = ints(j->nr, POISON);
        for (int i = 0; i < mine; i++) {
            j->want[i] = 0;
            for (int r = 0; r < p; r++) j->want[i] += value(r, off + i);
        }
        if (in_place) {
            memcpy(j->hr, j->hs, total * sizeof(int));
            free(j->hs);
            j->hs = NULL;
            j->check_prefix = mine;  /* past its block the buffer is the MPI's */
        }
        break;
    }
    case SCATTER:
        j->ns = me == root ? (size_t)n * p : 0;
        j->hs = me == root ? ints(j->ns, 0) : NULL;
        for (size_t i = 0; i < j->ns; i++) j->hs[i] = value(root, (long)i);
        j->nr = n;
        j->hr = ints(n, POISON);
        j->want = ints(n, 0);
        for (int i = 0; i < n; i++) j->want[i] = value(root, (long)me * n + i);
        if (in_place && me == root) memcpy(j->hr, j->want, n * sizeof(int));  /* not given to the call */
        break;
    case SCATTERV:
        total = vlayout(j->counts, j->displs, n);
        j->ns = me == root ? (size_t)total : 0;
        j->hs = me == root ? ints(j->ns, 0) : NULL;
        for (size_t i = 0; i < j->ns; i++) j->hs[i] = value(root, (long)i);
        j->nr = j->counts[me];
        j->hr = ints(j->nr, POISON);
        j->want = ints(j->nr, 0);
        for (int i = 0; i < j->counts[me]; i++) j->want[i] = value(root, j->displs[me] + i);
        break;
    case ALLTOALL:
        /* me sends value(me, r*n + i) to r */
        j->ns = (size_t)n * p;
        j->hs = ints(j->ns, 0);
        for (size_t i = 0; i < j->ns; i++) j->hs[i] = value(me, (long)i);
        j->nr = j->ns;
        j->hr = ints(j->nr, POISON);
        j->want = ints(j->nr, 0);
        for (int r = 0; r < p; r++)
            for (int i = 0; i < n; i++) j->want[r * n + i] = value(r, (long)me * n + i);
        if (in_place) {
            memcpy(j->hr, j->hs, j->ns * sizeof(int));
            free(j->hs);
            j->hs = NULL;
        }
        break;
    case ALLTOALLV: {
        /* me sends c(me, r) = c(r, me) ints to r, blocks with gaps on both sides */
        int soff = 0, roff = 0;
        for (int r = 0; r < p; r++) {
            int cnt = (me + r) % 3 + n / 2 + 1;
            j->counts[r] = j->rcounts[r] = cnt;
            j->displs[r] = soff;
            j->rdispls[r] = roff + 1;
            soff += cnt + 2;
            roff += cnt + 3;
        }
        j->ns = soff;
        j->hs = ints(j->ns, POISON);
        for (int r = 0; r < p; r++)
            for (int i = 0; i < j->counts[r]; i++) j->hs[j->displs[r] + i] = value(me, r * 1000L + i);
        j->nr = roff;
        j->hr = ints(j->nr, POISON);
        j->want = ints(j->nr, POISON);
        for (int r = 0; r < p; r++)
            for (int i = 0; i < j->rcounts[r]; i++) j->want[j->rdispls[r] + i] = value(r, me * 1000L + i);
        if (in_place) {
            for (int r = 0; r < p; r++)
                for (int i = 0; i < j->rcounts[r]; i++) j->hr[j->rdispls[r] + i] = value(me, r * 1000L + i);
            free(j->hs);
            j->hs = NULL;
        }
        break;
    }
    }
    job_buffers(j);
}

static int large;  /* --large */
#if MPI_VERSION >= 4
static int call_large(job_t *j, int c, const void *s, void *r, MPI_Request *req);
#endif

/* The call of collective c on j's buffers; req NULL: the blocking form. */
static int call(job_t *j, int c, MPI_Request *req)
{
    const void *s = j->in_place && (c != SCATTER) ? MPI_IN_PLACE : j->sbuf;
    void *r = j->rbuf;
    int n = j->n, root = j->root;
    MPI_Comm w = MPI_COMM_WORLD;
    if ((c == REDUCE || c == GATHER || c == GATHERV) && j->in_place && world_rank != root) s = j->sbuf;
    if (c == SCATTER && j->in_place && world_rank == root) r = MPI_IN_PLACE;
    char name[64];
    snprintf(name, sizeof name, "%s%s", req ? "i" : "", coll_names[c]);
    count_call(name);
#if MPI_VERSION >= 4
    if (large) return call_large(j, c, s, r, req);
#endif
    switch (c) {
    case BCAST: case BCAST_VECTOR:
        return req ? MPI_Ibcast(r, c == BCAST ? n : 1, j->type, root, w, req) : MPI_Bcast(r, c == BCAST ? n : 1, j->type, root, w);
    case REDUCE:
        return req ? MPI_Ireduce(s, r, n, MPI_INT, MPI_SUM, root, w, req) : MPI_Reduce(s, r, n, MPI_INT, MPI_SUM, root, w);
    case ALLGATHER:
        return req ? MPI_Iallgather(s, n, MPI_INT, r, n, MPI_INT, w, req) : MPI_Allgather(s, n, MPI_INT, r, n, MPI_INT, w);
    case ALLGATHERV:
        return req ? MPI_Iallgatherv(s, j->counts[world_rank], MPI_INT, r, j->counts, j->displs, MPI_INT, w, req)
                   : MPI_Allgatherv(s, j->counts[world_rank], MPI_INT, r, j->counts, j->displs, MPI_INT, w);
    case RSB:
        return req ? MPI_Ireduce_scatter_block(s, r, n, MPI_INT, MPI_SUM, w, req)
                   : MPI_Reduce_scatter_block(s, r, n, MPI_INT, MPI_SUM, w);
    case RS:
        return req ? MPI_Ireduce_scatter(s, r, j->counts, MPI_INT, MPI_SUM, w, req)
                   : MPI_Reduce_scatter(s, r, j->counts, MPI_INT, MPI_SUM, w);
    case GATHER:
        return req ? MPI_Igather(s, n, MPI_INT, r, n, MPI_INT, root, w, req) : MPI_Gather(s, n, MPI_INT, r, n, MPI_INT, root, w);
    case GATHERV:
        return req ? MPI_Igatherv(s, j->counts[world_rank], MPI_INT, r, j->counts, j->displs, MPI_INT, root, w, req)
                   : MPI_Gatherv(s, j->counts[world_rank], MPI_INT, r, j->counts, j->displs, MPI_INT, root, w);
    case SCATTER:
        return req ? MPI_Iscatter(j->sbuf, n, MPI_INT, r, n, MPI_INT, root, w, req)
                   : MPI_Scatter(j->sbuf, n, MPI_INT, r, n, MPI_INT, root, w);
    case SCATTERV:
        return req ? MPI_Iscatterv(j->sbuf, j->counts, j->displs, MPI_INT, r, j->counts[world_rank], MPI_INT, root, w, req)
                   : MPI_Scatterv(j->sbuf, j->counts, j->displs, MPI_INT, r, j->counts[world_rank], MPI_INT, root, w);
    case ALLTOALL:
        return req ? MPI_Ialltoall(s, n, MPI_INT, r, n, MPI_INT, w, req) : MPI_Alltoall(s, n, MPI_INT, r, n, MPI_INT, w);
    case ALLTOALLV:
        return req ? MPI_Ialltoallv(s, j->counts, j->displs, MPI_INT, r, j->rcounts, j->rdispls, MPI_INT, w, req)
                   : MPI_Alltoallv(s, j->counts, j->displs, MPI_INT, r, j->rcounts, j->rdispls, MPI_INT, w);
    }
    return MPI_ERR_OTHER;
}

#if MPI_VERSION >= 4
/* The same calls through the large-count bindings. */
static int call_large(job_t *j, int c, const void *s, void *r, MPI_Request *req)
{
    MPI_Count n = j->n, mine = j->counts[world_rank];
    int root = j->root;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (c) {
    case BCAST: case BCAST_VECTOR:
        return req ? MPI_Ibcast_c(r, c == BCAST ? n : 1, j->type, root, w, req) : MPI_Bcast_c(r, c == BCAST ? n : 1, j->type, root, w);
    case REDUCE:
        return req ? MPI_Ireduce_c(s, r, n, MPI_INT, MPI_SUM, root, w, req) : MPI_Reduce_c(s, r, n, MPI_INT, MPI_SUM, root, w);
    case ALLGATHER:
        return req ? MPI_Iallgather_c(s, n, MPI_INT, r, n, MPI_INT, w, req) : MPI_Allgather_c(s, n, MPI_INT, r, n, MPI_INT, w);
    case ALLGATHERV:
        return req ? MPI_Iallgatherv_c(s, mine, MPI_INT, r, j->lcounts, j->ldispls, MPI_INT, w, req)
                   : MPI_Allgatherv_c(s, mine, MPI_INT, r, j->lcounts, j->ldispls, MPI_INT, w);
    case RSB:
        return req ? MPI_Ireduce_scatter_block_c(s, r, n, MPI_INT, MPI_SUM, w, req)
                   : MPI_Reduce_scatter_block_c(s, r, n, MPI_INT, MPI_SUM, w);
    case RS:
        return req ? MPI_Ireduce_scatter_c(s, r, j->lcounts, MPI_INT, MPI_SUM, w, req)
                   : MPI_Reduce_scatter_c(s, r, j->lcounts, MPI_INT, MPI_SUM, w);
    case GATHER:
        return req ? MPI_Igather_c(s, n, MPI_INT, r, n, MPI_INT, root, w, req) : MPI_Gather_c(s, n, MPI_INT, r, n, MPI_INT, root, w);
    case GATHERV:
        return req ? MPI_Igatherv_c(s, mine, MPI_INT, r, j->lcounts, j->ldispls, MPI_INT, root, w, req)
                   : MPI_Gatherv_c(s, mine, MPI_INT, r, j->lcounts, j->ldispls, MPI_INT, root, w);
    case SCATTER:
        return req ? MPI_Iscatter_c(j->sbuf, n, MPI_INT, r, n, MPI_INT, root, w, req)
                   : MPI_Scatter_c(j->sbuf, n, MPI_INT, r, n, MPI_INT, root, w);
    case SCATTERV:
        return req ? MPI_Iscatterv_c(j->sbuf, j->lcounts, j->ldispls, MPI_INT, r, mine, MPI_INT, root, w, req)
                   : MPI_Scatterv_c(j->sbuf, j->lcounts, j->ldispls, MPI_INT, r, mine, MPI_INT, root, w);
    case ALLTOALL:
        return req ? MPI_Ialltoall_c(s, n, MPI_INT, r, n, MPI_INT, w, req) : MPI_Alltoall_c(s, n, MPI_INT, r, n, MPI_INT, w);
    case ALLTOALLV:
        return req ? MPI_Ialltoallv_c(s, j->lcounts, j->ldispls, MPI_INT, r, j->lrcounts, j->lrdispls, MPI_INT, w, req)
                   : MPI_Alltoallv_c(s, j->lcounts, j->ldispls, MPI_INT, r, j->lrcounts, j->lrdispls, MPI_INT, w);
    }
    return MPI_ERR_OTHER;
}
#endif

static void check(job_t *j, int c, const char *form)
{
    int *got = malloc(j->nr * sizeof(int));
    buf_get(got, j->rbuf, j->nr * sizeof(int));
    size_t upto = j->check_prefix ? (size_t)j->check_prefix : j->nr;
    for (size_t i = 0; i < upto; i++)
        if (got[i] != j->want[i]) {
            FAIL("%s%s (n %d, root %d%s): element %zu of %zu is %d, not %d", form, coll_names[c], j->n, j->root,
                 j->in_place ? ", in place" : "", i, j->nr, got[i], j->want[i]);
            break;
        }
    free(got);
}

static void job_free(job_t *j)
{
    if (j->type != MPI_INT) MPI_Type_free(&j->type);
    if (j->sbuf) buf_free(j->sbuf);
    buf_free(j->rbuf);
    free(j->hs);
    free(j->hr);
    free(j->want);
}

int main(int argc, char **argv)
{
    const char *expect = NULL;
    unsigned seed = 1;
    int cuda_host = 0;
    prog = "collectives";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device")) on_device = 1;
        else if (!strcmp(argv[i], "--cuda-host")) cuda_host = 1;
        else if (!strcmp(argv[i], "--large")) large = 1;
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc) expect = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = (unsigned)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: collectives [--device|--cuda-host] [--large] [--expect staged|untouched] [--seed N]\n");
            return 2;
        }
    }
#if MPI_VERSION < 4
    if (large) {
        printf("collectives: this MPI (MPI %d) has no large-count bindings\n", MPI_VERSION);
        return 77;
    }
#endif
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size > MAXR) MPI_Abort(MPI_COMM_WORLD, 2);
    rng_seed(seed * 1000003u + (unsigned)world_rank);
    if ((on_device || cuda_host) && !device_setup()) {
        if (world_rank == 0) printf("collectives: no GPU; skipped\n");
        MPI_Finalize();
        return 77;
    }
    static const int sizes[] = {3, 1000};
    enum { MAXJOBS = NCOLL * 2 * 2 * 2 };
    static job_t jobs[MAXJOBS];
    int kind[MAXJOBS], njobs = 0;
    /* every collective, variant and size: blocking, one after the other */
    for (int nb = 0; nb < 2; nb++) {
        njobs = 0;
        for (int c = 0; c < NCOLL; c++)
            for (int ip = 0; ip <= has_in_place[c]; ip++)
                for (int ro = 0; ro <= has_root[c]; ro++)
                    for (int z = 0; z < 2; z++) {
#ifdef MPICH
                        /* MPICH 4.0.2's MPI_Reduce with MPI_IN_PLACE at a
                         * root other than 0 crashes from some hundreds of
                         * ints on (a ten-line program shows it, without har). */
                        if (c == REDUCE && ip && ro && world_size > 1) continue;
#endif
                        job_t *j = &jobs[njobs];
                        kind[njobs++] = c;
                        setup(j, c, ip, ro ? world_size - 1 : 0, sizes[z]);
                        if (!nb) {
                            if (call(j, c, NULL) != MPI_SUCCESS) FAIL("%s failed", coll_names[c]);
                            check(j, c, "");
                            job_free(j);
                        }
                    }
        if (!nb) continue;
        /* non-blocking: all in flight, posted in the same order on every
         * rank, completed in an order of this rank's own */
        MPI_Request reqs[MAXJOBS];
        for (int k = 0; k < njobs; k++)
            if (call(&jobs[k], kind[k], &reqs[k]) != MPI_SUCCESS) FAIL("i%s failed", coll_names[kind[k]]);
        int order[MAXJOBS], index;
        for (int k = 0; k < njobs; k++) order[k] = k;
        shuffle(order, njobs);
        int half = njobs / 2;
        for (int k = 0; k < half; k++) MPI_Wait(&reqs[order[k]], MPI_STATUS_IGNORE);  /* half by MPI_Wait */
        for (index = 0; index != MPI_UNDEFINED;) MPI_Waitany(njobs, reqs, &index, MPI_STATUS_IGNORE);
        for (int k = 0; k < njobs; k++) {
            check(&jobs[k], kind[k], "i");
            job_free(&jobs[k]);
        }
    }
    check_stage_state("at the end");
    /* the counters: every call reached har's wrapper; staged or not */
    int staged_all = expect && !strcmp(expect, "staged");
    char line[4096];
    size_t len = 0;
    for (int i = 0; i < ncalls_names; i++) {
        char sname[80];
        snprintf(sname, sizeof sname, "%s_staged", names[i]);
        long long seen = counter(names[i]), staged = counter(sname);
        len += (size_t)snprintf(line + len, sizeof line - len, " %s=%lld/%lld", names[i], seen, staged);
        if (expect && (seen != calls[i] || staged != (staged_all ? calls[i] : 0)))
            FAIL("expected %s: %s: %lld calls made, har counted %lld, %lld staged", expect, names[i], calls[i], seen,
                 staged);
    }
    printf("collectives: rank %d: %s (calls/staged:%s)\n", world_rank, failures ? "FAILED" : "ok", line);
    MPI_Finalize();
    return failures != 0;
}
