/* The one place that decides who serves an MPI_Allreduce: har's hierarchy or
 * the MPI underneath. The decision uses only what every rank of the
 * communicator shares (count, datatype, op, communicator state), never the
 * buffers' memory kind, so all ranks always take the same branch. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "hier.h"

static unsigned long long counters[HAR_PATH_COUNT];
static int initialized, finalized, world_rank;
static int error_codes[HAR_ERR_COUNT];
static int required_path = -1;
static __thread int inside_har;  /* re-entry guard: MPI calling MPI_Allreduce from inside har */
static int corrupt_rank = -1;
static long long corrupt_index;
static int algo_override = -1;  /* har_set_algo's; -1: HAR_ALGO decides */

static const char *const path_names[] = {
#define HAR_PATH_NAME(id, name, doc) name,
    HAR_PATH_LIST(HAR_PATH_NAME)
#undef HAR_PATH_NAME
};
static const char *const error_messages[] = {
#define HAR_ERROR_MSG(id, msg) msg,
    HAR_ERROR_LIST(HAR_ERROR_MSG)
#undef HAR_ERROR_MSG
};

const char *har_version(void) { return PACKAGE_VERSION; }

const char *har_path_name(har_path_t path)
{
    return (unsigned)path < HAR_PATH_COUNT ? path_names[path] : NULL;
}

int har_path_from_name(const char *name)
{
    for (int p = 0; p < HAR_PATH_COUNT; p++)
        if (strcmp(name, path_names[p]) == 0) return p;
    return -1;
}

void har_count(unsigned paths)
{
    for (int p = 0; p < HAR_PATH_COUNT; p++)
        if (paths & (1u << p)) __atomic_fetch_add(&counters[p], 1, __ATOMIC_RELAXED);
}

void har_counters(unsigned long long counts[HAR_PATH_COUNT])
{
    for (int p = 0; p < HAR_PATH_COUNT; p++) counts[p] = __atomic_load_n(&counters[p], __ATOMIC_RELAXED);
}

void har_counters_reset(void)
{
    for (int p = 0; p < HAR_PATH_COUNT; p++) __atomic_store_n(&counters[p], 0, __ATOMIC_RELAXED);
}

int har_error_code(har_error_t err)
{
    return (unsigned)err < HAR_ERR_COUNT && error_codes[err] ? error_codes[err] : MPI_ERR_OTHER;
}

int har_error_raise(MPI_Comm comm, har_error_t err)
{
    int code = har_error_code(err);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

const char *har_mpi_flavour(void)
{
#if defined(OPEN_MPI)
    return "Open MPI";
#elif defined(MPICH)
    return "MPICH";
#else
    return "unknown MPI";
#endif
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_once_fn(void) { har_init(); }

int har_init(void)
{
    if (initialized) return MPI_SUCCESS;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    har_log_set_rank(world_rank);
    har_config_load();
    if (world_rank == 0) har_config_warn_unknown();
    if (har_cfg.require_path.s[0]) {
        required_path = har_path_from_name(har_cfg.require_path.s);
        if (required_path < 0)
            har_log(HAR_LOG_WARN, "HAR_REQUIRE_PATH=%s names no path (har-info lists them)",
                    har_cfg.require_path.s);
    }
    if (har_algo_from_name(har_cfg.algo.s) < 0)
        har_log(HAR_LOG_WARN, "HAR_ALGO=%s is none of auto, one_shot, two_shot, host_segment, nccl, mpi; "
                "using auto", har_cfg.algo.s);
    for (int e = 0; e < HAR_ERR_COUNT; e++) {
        int cls;
        if (PMPI_Add_error_class(&cls) != MPI_SUCCESS) break;
        error_codes[e] = cls;  /* a class is also a valid code */
        PMPI_Add_error_string(cls, (char *)error_messages[e]);
    }
    if (har_cfg.test_corrupt.s[0] &&
        sscanf(har_cfg.test_corrupt.s, "%d:%lld", &corrupt_rank, &corrupt_index) != 2)
        corrupt_rank = -1;
    har_mem_init();
    har_hier_init();
    HAR_LOG(HAR_LOG_DEBUG, "har %s on %s, MPI device memory: p2p %d reduce %d", PACKAGE_VERSION,
            har_mpi_flavour(), har_mpi_cuda_p2p(), har_mpi_cuda_reduce());
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
    return MPI_SUCCESS;
}

static void print_counters(void)
{
    char line[1024];
    size_t n = 0;
    for (int p = 0; p < HAR_PATH_COUNT; p++)
        n += (size_t)snprintf(line + n, sizeof line - n, " %s=%llu", path_names[p], counters[p]);
    har_log(HAR_LOG_INFO, "calls per path:%s", line);
}

void har_finalize(void)
{
    if (!initialized || finalized) return;
    finalized = 1;
    har_hier_finalize();
    if (har_cfg.verbose.i >= 1) print_counters();
    har_mem_finalize();
}

/* The MPI's own all-reduce. Device buffers go through host memory when the
 * MPI cannot reduce them itself, so the call works instead of crashing. */
int har_forward(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, unsigned *paths)
{
    *paths |= HAR_BIT(FORWARDED);
    int dev = har_mem_kind(rbuf) != HAR_MEM_HOST ||
              (sbuf != MPI_IN_PLACE && har_mem_kind(sbuf) != HAR_MEM_HOST);
    if (!dev || har_mpi_cuda_reduce() || count <= 0)
        return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);

    *paths |= HAR_BIT(STAGED);
    MPI_Aint lb, extent;
    int rc = PMPI_Type_get_true_extent(type, &lb, &extent);
    if (rc != MPI_SUCCESS) return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
    size_t bytes = (size_t)extent * (size_t)count;  /* contiguous span the MPI touches */
    char *host = har_stage_get(bytes);
    if (!host) {
        har_log(HAR_LOG_ERROR, "no host memory to stage %zu bytes", bytes);
        return PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM), MPI_ERR_NO_MEM;
    }
    const void *in = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    if (har_mem_copy(host, (const char *)in + lb, bytes) != 0) {
        har_stage_put(host);
        return har_error_raise(comm, HAR_ERR_CUDA);
    }
    rc = PMPI_Allreduce(MPI_IN_PLACE, host - lb, count, type, op, comm);
    if (rc == MPI_SUCCESS && har_mem_copy((char *)rbuf + lb, host, bytes) != 0)
        rc = har_error_raise(comm, HAR_ERR_CUDA);
    har_stage_put(host);
    return rc;
}

int har_set_algo(const char *name)
{
    int a = name ? har_algo_from_name(name) : -1;
    if (a < 0) return MPI_ERR_ARG;
    __atomic_store_n(&algo_override, a == HAR_ALGO_AUTO ? -1 : a, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}

int har_forced_algo(const har_algo_cfg_t *cfg)
{
    int a = __atomic_load_n(&algo_override, __ATOMIC_RELAXED);
    return a >= 0 ? a : cfg->algo;
}

/* Can har reduce this call at all? Anything odd (bad arguments included)
 * goes to the MPI, which reports it as it always would. */
static int served(const void *sbuf, const void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, har_reduce_t *red)
{
    *red = har_reduce_lookup(type, op);
    return red->fn && count > 0 && har_cfg.enable.i && comm != MPI_COMM_NULL && sbuf != rbuf;
}

/* HAR_TEST_CORRUPT: damage one element of one rank's result, so that tests
 * can prove their checks catch a wrong answer. Flips bit 6 of the element's
 * most significant byte: a large change for every type. */
static void corrupt_for_test(void *rbuf, int count, MPI_Datatype type, MPI_Comm comm)
{
    int rank, size;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Type_size(type, &size);
    if (rank != corrupt_rank || corrupt_index >= count || size <= 0) return;
    unsigned char byte;
    char *at = (char *)rbuf + corrupt_index * size + size - 1;
    har_mem_copy(&byte, at, 1);
    byte ^= 0x40;
    har_mem_copy(at, &byte, 1);
}

int har_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    if (inside_har || finalized) return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) {
        /* MPI was initialised behind our back (a binding har does not wrap). */
        int up = 0;
        PMPI_Initialized(&up);
        if (!up) return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);  /* the MPI reports it */
        pthread_once(&init_once, init_once_fn);
    }
    inside_har = 1;
    unsigned paths = HAR_BIT(SEEN);
    har_reduce_t red;
    int rc;
    if (!served(sbuf, rbuf, count, type, op, comm, &red) ||
        (rc = har_hier_allreduce(sbuf, rbuf, count, type, red, op, comm, &paths)) == HAR_DECLINED)
        rc = har_forward(sbuf, rbuf, count, type, op, comm, &paths);
    har_count(paths);
    if (corrupt_rank >= 0 && rc == MPI_SUCCESS) corrupt_for_test(rbuf, count, type, comm);
    if (har_cfg.verbose.i >= 3) {
        char line[256];
        size_t n = 0;
        for (int p = 1; p < HAR_PATH_COUNT; p++)
            if (paths & (1u << p)) n += (size_t)snprintf(line + n, sizeof line - n, " %s", path_names[p]);
        har_log(HAR_LOG_TRACE, "MPI_Allreduce count %d:%s", count, line);
    }
    if (rc == MPI_SUCCESS && required_path >= 0 && !(paths & (1u << required_path))) {
        har_log(HAR_LOG_ERROR, "MPI_Allreduce of count %d was not served by %s (HAR_REQUIRE_PATH)",
                count, path_names[required_path]);
        rc = har_error_raise(comm, HAR_ERR_WRONG_PATH);
    }
    inside_har = 0;
    return rc;
}
