/* libhar's NCCL: loaded once per process, on first use (cuda/nccl.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "core/config.h"
#include "core/log.h"
#include "core/types.h"
#include "cuda/nccl.h"

static struct {
    pthread_once_t once;
    har_nccl_api_t api;
    int loaded;
    char why[256];
} lib = {PTHREAD_ONCE_INIT};

static void load(void)
{
    const char *name = HAR_CFG(nccl).s;
    if (!name[0] || strcmp(name, "0") == 0) snprintf(lib.why, sizeof lib.why, "HAR_NCCL=0");
    else lib.loaded = har_cuda_nccl_load(&lib.api, name, lib.why, sizeof lib.why);
}

const har_nccl_api_t *har_cuda_nccl(const char **why)
{
    pthread_once(&lib.once, load);
    if (why) *why = lib.why;
    return lib.loaded ? &lib.api : NULL;
}

int har_cuda_nccl_type(int dev_type)
{
    switch (dev_type) {
    case HAR_DT_F32: return HAR_NCCL_FLOAT32;
    case HAR_DT_F64: return HAR_NCCL_FLOAT64;
    case HAR_DT_I32: return HAR_NCCL_INT32;
    case HAR_DT_U32: return HAR_NCCL_UINT32;
    case HAR_DT_I64: return HAR_NCCL_INT64;
    case HAR_DT_U64: return HAR_NCCL_UINT64;
    default: return -1;
    }
}

int har_cuda_nccl_op(int dev_op)
{
    switch (dev_op) {
    case HAR_OP_SUM: return HAR_NCCL_SUM;
    case HAR_OP_PROD: return HAR_NCCL_PROD;
    case HAR_OP_MIN: return HAR_NCCL_MIN;
    case HAR_OP_MAX: return HAR_NCCL_MAX;
    default: return -1;
    }
}

static har_status_t async_error(void *ctx)
{
    har_nccl_comm_t *c = ctx;
    har_ncclResult_t async = HAR_NCCL_SUCCESS;
    if (!c->comm || c->api->comm_get_async_error(c->comm, &async) != HAR_NCCL_SUCCESS ||
        async == HAR_NCCL_SUCCESS || async == HAR_NCCL_IN_PROGRESS)
        return HAR_OK;
    har_note("%s failed: %s", c->what, c->api->get_error_string(async));
    return HAR_ERR_CUDA;
}

static void abort_comm(void *ctx) { har_cuda_nccl_abort(ctx); }

har_cuda_watch_t har_cuda_nccl_watch(har_nccl_comm_t *c)
{
    har_cuda_watch_t watch = {async_error, abort_comm, c};
    return watch;
}

void har_cuda_nccl_abort(har_nccl_comm_t *c)
{
    if (c->comm) c->api->comm_abort(c->comm);
    c->comm = NULL;
}
