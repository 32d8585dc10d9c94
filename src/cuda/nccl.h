/* NCCL, loaded at run time (never linked): the few declarations har needs,
 * with the values of NCCL's stable C ABI, so that har builds where no NCCL
 * header is installed and runs where no NCCL library is. libhar loads it
 * once per process (har_cuda_nccl: its NCCL engine on one node, and the
 * transport between nodes); the tools load their own copy. */
#ifndef HAR_CUDA_NCCL_H
#define HAR_CUDA_NCCL_H

#include <stddef.h>
#include "core/common.h"
#include "cuda/stream.h"

typedef struct ncclComm *har_ncclComm_t;
typedef struct { char internal[128]; } har_ncclUniqueId;
typedef int har_ncclResult_t;  /* 0: ncclSuccess; 7: ncclInProgress */
enum { HAR_NCCL_SUCCESS = 0, HAR_NCCL_IN_PROGRESS = 7 };
/* ncclDataType_t and ncclRedOp_t values. */
enum { HAR_NCCL_INT32 = 2, HAR_NCCL_UINT32 = 3, HAR_NCCL_INT64 = 4, HAR_NCCL_UINT64 = 5,
       HAR_NCCL_FLOAT32 = 7, HAR_NCCL_FLOAT64 = 8 };
enum { HAR_NCCL_SUM = 0, HAR_NCCL_PROD = 1, HAR_NCCL_MAX = 2, HAR_NCCL_MIN = 3 };

typedef struct {
    int version;  /* e.g. 22809 for 2.28.9; 0: not loaded */
    har_ncclResult_t (*get_version)(int *);
    har_ncclResult_t (*get_unique_id)(har_ncclUniqueId *);
    har_ncclResult_t (*comm_init_rank)(har_ncclComm_t *, int nranks, har_ncclUniqueId, int rank);
    har_ncclResult_t (*all_reduce)(const void *, void *, size_t, int dtype, int op, har_ncclComm_t, void *stream);
    har_ncclResult_t (*comm_abort)(har_ncclComm_t);
    har_ncclResult_t (*comm_get_async_error)(har_ncclComm_t, har_ncclResult_t *);
    const char *(*get_error_string)(har_ncclResult_t);
} har_nccl_api_t;

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Opens `library` (a file name the loader searches for, or a path) and binds
 * the calls above. Whether it could: 0 with a reason in `why` if not (a
 * library that is missing is no failure of har's, only an engine fewer). */
static inline int har_cuda_nccl_load(har_nccl_api_t *api, const char *library, char *why, size_t why_len)
{
    memset(api, 0, sizeof *api);
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, why_len, "%s", dlerror());
        return 0;
    }
    *(void **)&api->get_version = dlsym(lib, "ncclGetVersion");
    *(void **)&api->get_unique_id = dlsym(lib, "ncclGetUniqueId");
    *(void **)&api->comm_init_rank = dlsym(lib, "ncclCommInitRank");
    *(void **)&api->all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&api->comm_abort = dlsym(lib, "ncclCommAbort");
    *(void **)&api->comm_get_async_error = dlsym(lib, "ncclCommGetAsyncError");
    *(void **)&api->get_error_string = dlsym(lib, "ncclGetErrorString");
    int version = 0;
    if (!api->get_version || !api->get_unique_id || !api->comm_init_rank || !api->all_reduce ||
        !api->comm_abort || !api->comm_get_async_error || !api->get_error_string ||
        api->get_version(&version) != HAR_NCCL_SUCCESS) {
        snprintf(why, why_len, "%.200s lacks the calls har needs", library);
        dlclose(lib);
        memset(api, 0, sizeof *api);
        return 0;
    }
    /* Kept open for the life of the process: NCCL's threads use it. */
    api->version = version;
    return 1;
}

/* A NCCL communicator with the NCCL that made it, as the NCCL engine and
 * the transport between nodes hold it: `comm` is NULL once aborted (it
 * serves no more); `what` names its all-reduce in har's error text. */
typedef struct {
    const har_nccl_api_t *api;
    har_ncclComm_t comm;
    const char *what;
} har_nccl_comm_t;
/* The watch of har's bounded wait (cuda/stream.h) on work queued on `c`:
 * NCCL's asynchronous errors end the wait, and on any failure the
 * communicator is aborted, which ends NCCL's kernels (har's abort flag
 * does not reach them). */
HAR_HIDDEN har_cuda_watch_t har_cuda_nccl_watch(har_nccl_comm_t *c);
/* Aborts `c`'s communicator, if it has one: with work in flight after a
 * failure, or as the teardown where none is (abort is local, where destroy
 * may wait for peers that are gone or free in another order). */
HAR_HIDDEN void har_cuda_nccl_abort(har_nccl_comm_t *c);

/* libhar's NCCL (HAR_NCCL), loaded on first use; NULL where it cannot be,
 * with the reason in *why. */
HAR_HIDDEN const har_nccl_api_t *har_cuda_nccl(const char **why);
/* NCCL's ncclDataType_t and ncclRedOp_t for har's type and op codes
 * (core/types.h); -1 where NCCL has none. */
HAR_HIDDEN int har_cuda_nccl_type(int dev_type);
HAR_HIDDEN int har_cuda_nccl_op(int dev_op);

#endif
