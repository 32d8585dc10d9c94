/* Worker threads that split one large reduction by element range.
 *
 * Each element is still reduced in the same order (destination first, then
 * the sources in order), so results do not depend on the thread count and
 * ranks need not agree on it. Only messages large enough to repay waking
 * the workers use them; a caller that finds the pool busy (another thread's
 * communicator) reduces alone rather than wait. */
#include <pthread.h>
#include "core/config.h"
#include "engines/host_pool.h"
#include "plan/plan.h"

#define MAX_THREADS 8
#define MIN_BYTES_PER_THREAD (256 << 10)

typedef struct {
    har_reduce_fn fn;
    size_t elem, n;
    char *dst;
    char *const *src;
    int nsrc, parts;
} job_t;

static struct {
    pthread_mutex_t lock, busy;
    pthread_cond_t go, done;
    unsigned gen;       /* bumped for every job */
    int workers, pending;
    job_t job;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 0, 0, 0, {0}};

static void run_part(const job_t *j, int part)
{
    size_t off, len;
    har_plan_shard(j->n, j->elem, j->parts, part, &off, &len);
    for (int k = 0; k < j->nsrc; k++) j->fn(j->dst + off * j->elem, j->src[k] + off * j->elem, len);
}

static void *worker(void *arg)
{
    int part = (int)(long)arg;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool.lock);
        while (pool.gen == seen) pthread_cond_wait(&pool.go, &pool.lock);
        seen = pool.gen;
        job_t job = pool.job;
        pthread_mutex_unlock(&pool.lock);
        if (part < job.parts) run_part(&job, part);
        pthread_mutex_lock(&pool.lock);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.lock);
    }
    return NULL;
}

/* Threads for this rank: HAR_REDUCE_THREADS, or its share of the cores
 * the process may run on (a rank bound to one core gets one), at most 4. */
static int thread_count(int cores)
{
    if (HAR_CFG(reduce_threads).i > 0) return HAR_CFG(reduce_threads).i < MAX_THREADS ? (int)HAR_CFG(reduce_threads).i : MAX_THREADS;
    return cores < 1 ? 1 : cores > 4 ? 4 : cores;
}

/* Starts workers 1..want-1 once; returns how many parts can run at once. */
static int ensure_workers(int want)
{
    while (pool.workers < want - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, worker, (void *)(long)(pool.workers + 1));
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        pool.workers++;
    }
    return pool.workers + 1 < want ? pool.workers + 1 : want;
}

void har_engine_reduce_many(har_reduce_fn fn, size_t elem, char *dst, char *const *src, int nsrc, size_t n, int cores)
{
    size_t by_size = n * elem / MIN_BYTES_PER_THREAD;
    int threads = by_size > 1 ? thread_count(cores) : 1;
    if (threads > 1 && by_size < (size_t)threads) threads = (int)by_size;
    job_t job = {fn, elem, n, dst, src, nsrc, 1};
    if (threads <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        run_part(&job, 0);
        return;
    }
    pthread_mutex_lock(&pool.lock);
    job.parts = ensure_workers(threads);
    pool.job = job;
    pool.pending = pool.workers;  /* every worker acknowledges each job, used or not */
    pool.gen++;
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.lock);
    run_part(&job, 0);
    pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
}
