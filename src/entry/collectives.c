/* The collectives other than MPI_Allreduce, and MPI_Allreduce's
 * non-blocking and persistent forms (entry/collectives.h): counted, and staged
 * through host memory where a buffer is device memory the MPI cannot take.
 *
 * Host buffers go to the MPI untouched after one memory-kind query per
 * buffer (in a process without CUDA, one look at whether it loaded it). Which buffers matter on
 * which rank, MPI_IN_PLACE and the spans are the plans' (src/stage/), and
 * a call whose arguments a plan does not judge goes to the MPI untouched,
 * which reports them as it always does. */
#include <stdlib.h>
#include "entry/collectives.h"
#include "core/log.h"
#include "cuda/mpi_cuda.h"
#include "cuda/driver.h"
#include "entry/entry.h"
#include "entry/requests.h"

/* What the MPI must do with device memory for the call to reach it as is. */
enum { NEED_P2P, NEED_REDUCE };

/* Counts the call and says whether it is to be staged: a buffer is device
 * (or managed) memory and the MPI cannot take it in this call (a
 * non-blocking or persistent one: HAR_MPI_CUDA_NONBLOCKING). */
static int ask(har_coll_t coll, int need, int nonblocking, har_stage_ask_t *a, const void *p0, const void *p1,
               MPI_Comm comm)
{
    int dev;
    har_count_coll(coll, 0);
    a->kind[HAR_SEND] = a->kind[HAR_RECV] = HAR_MEM_HOST;
    /* Once per call whether the process has loaded CUDA at all (without
     * it nothing is device memory), then one driver query per buffer
     * (none for NULL and MPI_IN_PLACE). */
    if (har_cuda_loaded()) {
        a->kind[HAR_SEND] = har_cuda_mem_kind(p0, &dev);
        a->kind[HAR_RECV] = har_cuda_mem_kind(p1, &dev);
    }
    a->copy_in = 1;
    a->comm = comm;
    int device = a->kind[HAR_SEND] != HAR_MEM_HOST || a->kind[HAR_RECV] != HAR_MEM_HOST;
#ifdef HAR_TEST_HOOKS
    if (har_entry_ready() && har_test_stage()) return 1;  /* the configuration is read at set-up */
#endif
    if (!device || !har_entry_ready()) return 0;
    if (nonblocking) return !har_cuda_mpi_nonblocking();
    return !(need == NEED_REDUCE ? har_cuda_mpi_reduce() : har_cuda_mpi_p2p());
}

/* The shape of every function below: ask, plan, then the MPI's call,
 * untouched or on the staged buffers; a staged blocking call copies back
 * at once, a staged request when it completes. */
#define PLAN(coll, need, nb, p0, p1, plan)                                                                    \
    har_stage_t s;                                                                                           \
    har_stage_ask_t a;                                                                                       \
    void *slot = NULL;                                                                                       \
    int how = ask(coll, need, nb, &a, p0, p1, comm) ? (plan) : HAR_STAGE_UNTOUCHED;                           \
    if (how == HAR_STAGE_STAGED && req && !(how = reserve(&s, &slot))) how = HAR_STAGE_FAILED;               \
    if (how == HAR_STAGE_STAGED) har_count_coll(coll, 1);                                                    \
    if (how == HAR_STAGE_FAILED) return har_stage_error(&s)
#define S(i, p) har_stage_buffer(&s, i, p)
#define DONE(rc) (req ? har_request_post(slot, &s, rc, req) : har_stage_finish(&s, rc))

/* A staged request's place in the table, before the MPI is called:
 * HAR_STAGE_STAGED, or 0 (no memory: the copies go back). */
static int reserve(har_stage_t *s, void **slot)
{
    if ((*slot = har_request_reserve())) return HAR_STAGE_STAGED;
    har_log(HAR_LOG_ERROR, "no memory for a staged request");
    har_stage_release(s);
    s->err = MPI_ERR_NO_MEM;
    return 0;
}
/* The blocking form's counter, or the one after it (its non-blocking form). */
#define FORM(coll) ((har_coll_t)(HAR_COLL_##coll + (req != NULL)))

/* The MPI's own call of the binding the call came through: int_call
 * (whose counts the wrapper widened, so casting them back loses nothing)
 * or large_call, which exists only where the MPI has the _c bindings. */
#ifdef HAR_HAVE_MPI_C_COUNTS
#define BY_BINDING(int_call, large_call) (binding == HAR_BINDING_LARGE ? (large_call) : (int_call))
#else
#define BY_BINDING(int_call, large_call) ((void)binding, (int_call))
#endif
#define I(n) ((int)(n))
/* The MPI gets the host copies of a staged call's buffers. */
#define STAGED_BUFFERS()                                                                                      \
    if (how == HAR_STAGE_STAGED) {                                                                           \
        sbuf = S(HAR_SEND, sbuf);                                                                            \
        rbuf = S(HAR_RECV, rbuf);                                                                            \
    }

int har_iallreduce(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req, har_binding_t binding)
{
    int served;
    if (har_iallreduce_start(sbuf, rbuf, count, type, op, comm, req, &served)) {
        har_count_coll(HAR_COLL_IALLREDUCE, 0);
        return served;
    }
    PLAN(HAR_COLL_IALLREDUCE, NEED_REDUCE, 1, sbuf, rbuf, har_stage_prepare_allreduce(&s, &a, sbuf, rbuf, count, type));
    STAGED_BUFFERS();
    int rc = BY_BINDING(PMPI_Iallreduce(sbuf, rbuf, I(count), type, op, comm, req),
                        PMPI_Iallreduce_c(sbuf, rbuf, count, type, op, comm, req));
    return how == HAR_STAGE_STAGED ? har_request_post(slot, &s, rc, req) : rc;
}

#ifdef HAR_HAVE_ALLREDUCE_INIT
#ifdef HAR_ALLREDUCE_INIT_IS_MPIX
#define ALLREDUCE_INIT PMPIX_Allreduce_init
#else
#define ALLREDUCE_INIT PMPI_Allreduce_init
#endif
int har_allreduce_init(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request *req, har_binding_t binding)
{
    /* The host copies are made now and kept until the request is freed;
     * the input is copied in at each start the MPI serves. */
    har_stage_t s;
    har_stage_ask_t a;
    void *slot = NULL;
    int how = HAR_STAGE_UNTOUCHED;
    if (ask(HAR_COLL_ALLREDUCE_INIT, NEED_REDUCE, 1, &a, sbuf, rbuf, comm)) {
        a.copy_in = 0;
        how = har_stage_prepare_allreduce(&s, &a, sbuf, rbuf, count, type);
    }
    struct har_call *call = NULL;
    int no_mem = how != HAR_STAGE_FAILED &&
                 har_persistent_describe(sbuf, rbuf, count, type, op, comm, &call) != MPI_SUCCESS;
    if (!no_mem && (how == HAR_STAGE_STAGED || call) && !(slot = har_request_reserve())) no_mem = 1;
    if (!no_mem && call && !har_request_watch_comm(comm)) no_mem = 1;
    if (no_mem) {
        har_log(HAR_LOG_ERROR, "no memory for a persistent all-reduce's request");
        free(call);
        free(slot);
        if (how == HAR_STAGE_STAGED) har_stage_release(&s);
        PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM);
        return MPI_ERR_NO_MEM;
    }
    if (how == HAR_STAGE_FAILED) return har_stage_error(&s);
    if (how == HAR_STAGE_STAGED) har_count_coll(HAR_COLL_ALLREDUCE_INIT, 1);
    STAGED_BUFFERS();
    int rc = BY_BINDING(ALLREDUCE_INIT(sbuf, rbuf, I(count), type, op, comm, info, req),
                        PMPI_Allreduce_init_c(sbuf, rbuf, count, type, op, comm, info, req));
    return slot ? har_request_persistent(slot, how == HAR_STAGE_STAGED ? &s : NULL, call, comm, rc, req) : rc;
}
#endif

/* The blocks of a v form, in the binding's widths. */
#define BLOCKS(counts, displs) (&(har_blocks_t){(counts), (displs), binding})

/* The MPI's own collective, blocking or not as the call came (req), in the
 * binding it came through: the int form gets counts the wrapper widened
 * from ints, so they convert back unchanged. */
#define BY_FORM(blocking, nonblocking, ...)                                                                   \
    (req ? BY_BINDING(PMPI_##nonblocking(__VA_ARGS__, req), PMPI_##nonblocking##_c(__VA_ARGS__, req))        \
         : BY_BINDING(PMPI_##blocking(__VA_ARGS__), PMPI_##blocking##_c(__VA_ARGS__)))

/* From here on each function ends the same way: the MPI's call on the
 * staged buffers (or the user's), and a staged call's copies back. */
#define FINISH(rc) return how == HAR_STAGE_STAGED ? DONE(rc) : (rc)

int har_bcast(void *buf, har_count_t count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req,
              har_binding_t binding)
{
    PLAN(FORM(BCAST), NEED_P2P, req != NULL, buf, NULL, har_stage_prepare_bcast(&s, &a, buf, count, type, root));
    if (how == HAR_STAGE_STAGED) buf = S(HAR_SEND, buf);
    int rc = BY_FORM(Bcast, Ibcast, buf, count, type, root, comm);
    FINISH(rc);
}

int har_reduce(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(REDUCE), NEED_REDUCE, req != NULL, sbuf, rbuf,
         har_stage_prepare_reduce(&s, &a, sbuf, rbuf, count, type, root));
    STAGED_BUFFERS();
    int rc = BY_FORM(Reduce, Ireduce, sbuf, rbuf, count, type, op, root, comm);
    FINISH(rc);
}

int har_allgather(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(ALLGATHER), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_allgather(&s, &a, sbuf, scount, stype, rbuf, rcount, NULL, rtype));
    STAGED_BUFFERS();
    int rc = BY_FORM(Allgather, Iallgather, sbuf, scount, stype, rbuf, rcount, rtype, comm);
    FINISH(rc);
}

int har_allgatherv(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, const void *rcounts,
                   const void *displs, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(ALLGATHERV), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_allgather(&s, &a, sbuf, scount, stype, rbuf, 0, BLOCKS(rcounts, displs), rtype));
    STAGED_BUFFERS();
    int rc = BY_FORM(Allgatherv, Iallgatherv, sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
    FINISH(rc);
}

int har_reduce_scatter_block(const void *sbuf, void *rbuf, har_count_t rcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(REDUCE_SCATTER_BLOCK), NEED_REDUCE, req != NULL, sbuf, rbuf,
         har_stage_prepare_reduce_scatter(&s, &a, sbuf, rbuf, rcount, NULL, type));
    STAGED_BUFFERS();
    int rc = BY_FORM(Reduce_scatter_block, Ireduce_scatter_block, sbuf, rbuf, rcount, type, op, comm);
    FINISH(rc);
}

int har_reduce_scatter(const void *sbuf, void *rbuf, const void *rcounts, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(REDUCE_SCATTER), NEED_REDUCE, req != NULL, sbuf, rbuf,
         har_stage_prepare_reduce_scatter(&s, &a, sbuf, rbuf, 0, BLOCKS(rcounts, NULL), type));
    STAGED_BUFFERS();
    int rc = BY_FORM(Reduce_scatter, Ireduce_scatter, sbuf, rbuf, rcounts, type, op, comm);
    FINISH(rc);
}

int har_gather(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, har_count_t rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(GATHER), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_gather(&s, &a, sbuf, scount, stype, rbuf, rcount, NULL, rtype, root));
    STAGED_BUFFERS();
    int rc = BY_FORM(Gather, Igather, sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
    FINISH(rc);
}

int har_gatherv(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, const void *rcounts,
                const void *displs, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req,
                har_binding_t binding)
{
    PLAN(FORM(GATHERV), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_gather(&s, &a, sbuf, scount, stype, rbuf, 0, BLOCKS(rcounts, displs), rtype, root));
    STAGED_BUFFERS();
    int rc = BY_FORM(Gatherv, Igatherv, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
    FINISH(rc);
}

int har_scatter(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(SCATTER), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_scatter(&s, &a, sbuf, scount, NULL, stype, rbuf, rcount, rtype, root));
    STAGED_BUFFERS();
    int rc = BY_FORM(Scatter, Iscatter, sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
    FINISH(rc);
}

int har_scatterv(const void *sbuf, const void *scounts, const void *displs, MPI_Datatype stype, void *rbuf,
                 har_count_t rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req,
                 har_binding_t binding)
{
    PLAN(FORM(SCATTERV), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_scatter(&s, &a, sbuf, 0, BLOCKS(scounts, displs), stype, rbuf, rcount, rtype, root));
    STAGED_BUFFERS();
    int rc = BY_FORM(Scatterv, Iscatterv, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
    FINISH(rc);
}

int har_alltoall(const void *sbuf, har_count_t scount, MPI_Datatype stype, void *rbuf, har_count_t rcount,
                 MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req, har_binding_t binding)
{
    PLAN(FORM(ALLTOALL), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_alltoall(&s, &a, sbuf, scount, NULL, stype, rbuf, rcount, NULL, rtype));
    STAGED_BUFFERS();
    int rc = BY_FORM(Alltoall, Ialltoall, sbuf, scount, stype, rbuf, rcount, rtype, comm);
    FINISH(rc);
}

int har_alltoallv(const void *sbuf, const void *scounts, const void *sdispls, MPI_Datatype stype, void *rbuf,
                  const void *rcounts, const void *rdispls, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req,
                  har_binding_t binding)
{
    PLAN(FORM(ALLTOALLV), NEED_P2P, req != NULL, sbuf, rbuf,
         har_stage_prepare_alltoall(&s, &a, sbuf, 0, BLOCKS(scounts, sdispls), stype, rbuf, 0, BLOCKS(rcounts, rdispls),
                                    rtype));
    STAGED_BUFFERS();
    int rc = BY_FORM(Alltoallv, Ialltoallv, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
    FINISH(rc);
}
