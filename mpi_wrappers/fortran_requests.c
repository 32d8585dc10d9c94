/* The Fortran entry points of MPI_IALLREDUCE, of the persistent
 * all-reduce (MPIX_ALLREDUCE_INIT in Open MPI 4.1, MPI_ALLREDUCE_INIT from
 * 5.0), and of the calls that complete, start and free requests, in the
 * spellings fortran.h gives. Open MPI's own Fortran bindings of all of them,
 * and MPICH's mpi_f08 completion calls, call PMPI_* directly, so without
 * these a Fortran program's MPI_WAIT would never pass through har and a
 * staged request's results would never reach the device. Each converts the
 * Fortran handles (MPI_*_f2c, MPI_*_c2f) and sentinels, then calls the same
 * internal as the C entry point. In every spelling the arguments are the
 * same: an f08 handle is a derived type holding the integer handle,
 * TYPE(MPI_Status) has the layout of MPI_STATUS_SIZE integers in Open MPI
 * and of the C status in MPICH, and an absent OPTIONAL ierror is a null
 * pointer. An index comes back counted from 1, as the standard says
 * (MPICH 4.0.2's own mpi_f08 MPI_Waitany and MPI_Testany count from 0). */
#include "entry/collectives.h" /* mpi.h: OPEN_MPI, MPICH */
#if defined(OPEN_MPI) || defined(MPICH)
#include <stdlib.h>
#include "entry/requests.h"
#include "fortran.h"

/* A status back to Fortran, unless the caller passed MPI_STATUS_IGNORE. */
static void status_out(const MPI_Status *c, MPI_Fint *f)
{
    if (!har_fortran_status_ignored(f)) PMPI_Status_c2f(c, f);
}

/* An array of C handles for an array of Fortran requests (on the stack
 * when short), and statuses beside it. */
#define SHORT 16
typedef struct {
    MPI_Request stack[SHORT], *req;
    MPI_Status st_stack[SHORT], *st;
} reqs_t;

static int reqs_in(reqs_t *r, int n, const MPI_Fint *f)
{
    r->req = r->stack;
    r->st = r->st_stack;
    if (n > SHORT) {
        r->req = malloc((size_t)n * sizeof *r->req);
        r->st = malloc((size_t)n * sizeof *r->st);
    }
    if (!r->req || !r->st) return 0;
    for (int i = 0; i < n; i++) r->req[i] = PMPI_Request_f2c(f[i]);
    return 1;
}

static void reqs_out(reqs_t *r, int n, MPI_Fint *f)
{
    for (int i = 0; i < n; i++) f[i] = PMPI_Request_c2f(r->req[i]);
    if (r->req != r->stack) free(r->req);
    if (r->st != r->st_stack) free(r->st);
}

/* What Open MPI's own bindings do without memory for the arrays. */
static int no_memory(MPI_Fint *ierr)
{
    int rc = PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    har_fortran_set_ierror(ierr, MPI_ERR_NO_MEM);
    return rc;
}

/* statuses[k] for k < n back to Fortran (each MPI_STATUS_SIZE integers). */
static void statuses_out(const MPI_Status *c, MPI_Fint *f, int n)
{
    if (har_fortran_statuses_ignored(f)) return;
    for (int k = 0; k < n; k++) PMPI_Status_c2f(&c[k], f + k * (int)(sizeof(MPI_Status) / sizeof(int)));
}

#ifdef OPEN_MPI /* MPICH's buffer-taking calls reach har's C functions */
static void f_iallreduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op,
                         MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req;
    int rc = har_iallreduce(F_SEND(sendbuf), F_BUF(recvbuf), F_INT(count), F_TYPE(datatype), F_OP(op), F_COMM(comm),
                            &req, HAR_BINDING_INT);
    har_fortran_set_ierror(ierr, rc);
    if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(req);
}
HAR_FORTRAN_SPELLINGS(f_iallreduce, MPI_IALLREDUCE, mpi_iallreduce)

#ifdef HAR_HAVE_ALLREDUCE_INIT
/* MPI_ALLREDUCE_INIT(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, INFO,
 * REQUEST, IERROR), or MPIX_ALLREDUCE_INIT: Open MPI 4.1's pcollreq
 * extension (mpif-ext.h, mpi_ext, mpi_f08_ext). */
static void f_allreduce_init(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op,
                             MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req;
    int rc = har_allreduce_init(F_SEND(sendbuf), F_BUF(recvbuf), F_INT(count), F_TYPE(datatype), F_OP(op),
                                F_COMM(comm), PMPI_Info_f2c(*info), &req, HAR_BINDING_INT);
    har_fortran_set_ierror(ierr, rc);
    if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(req);
}
#ifdef HAR_ALLREDUCE_INIT_IS_MPIX
HAR_FORTRAN_SPELLINGS(f_allreduce_init, MPIX_ALLREDUCE_INIT, mpix_allreduce_init)
#else
HAR_FORTRAN_SPELLINGS(f_allreduce_init, MPI_ALLREDUCE_INIT, mpi_allreduce_init)
#endif
#endif
#endif

static void f_wait(MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*request);
    MPI_Status st;
    int rc = har_wait(&req, &st);
    har_fortran_set_ierror(ierr, rc);
    if (rc != MPI_SUCCESS) return;
    *request = PMPI_Request_c2f(req);
    status_out(&st, status);
}
HAR_FORTRAN_SPELLINGS(f_wait, MPI_WAIT, mpi_wait)

static void f_test(MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*request);
    MPI_Status st;
    int done = 0, rc = har_test(&req, &done, &st);
    har_fortran_set_ierror(ierr, rc);
    *flag = done != 0;
    if (rc != MPI_SUCCESS || !done) return;
    *request = PMPI_Request_c2f(req);
    status_out(&st, status);
}
HAR_FORTRAN_SPELLINGS(f_test, MPI_TEST, mpi_test)

static void f_waitall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses, MPI_Fint *ierr)
{
    reqs_t r;
    int n = (int)*count;
    if (!reqs_in(&r, n, requests)) return (void)no_memory(ierr);
    int rc = har_waitall(n, r.req, r.st);
    har_fortran_set_ierror(ierr, rc);
    reqs_out(&r, rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS ? n : 0, requests);
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) statuses_out(r.st, statuses, n);
}
HAR_FORTRAN_SPELLINGS(f_waitall, MPI_WAITALL, mpi_waitall)

static void f_testall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, MPI_Fint *statuses, MPI_Fint *ierr)
{
    reqs_t r;
    int n = (int)*count, done = 0;
    if (!reqs_in(&r, n, requests)) return (void)no_memory(ierr);
    int rc = har_testall(n, r.req, &done, r.st);
    har_fortran_set_ierror(ierr, rc);
    *flag = done != 0;
    reqs_out(&r, rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS ? n : 0, requests);
    if ((rc == MPI_SUCCESS && done) || rc == MPI_ERR_IN_STATUS) statuses_out(r.st, statuses, n);
}
HAR_FORTRAN_SPELLINGS(f_testall, MPI_TESTALL, mpi_testall)

/* Fortran counts from 1: a completed request's index is one more. */
static void f_waitany(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status, MPI_Fint *ierr)
{
    reqs_t r;
    int n = (int)*count, i = MPI_UNDEFINED;
    if (!reqs_in(&r, n, requests)) return (void)no_memory(ierr);
    int rc = har_waitany(n, r.req, &i, r.st);
    har_fortran_set_ierror(ierr, rc);
    reqs_out(&r, rc == MPI_SUCCESS ? n : 0, requests);
    if (rc != MPI_SUCCESS) return;
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    status_out(&r.st[0], status);
}
HAR_FORTRAN_SPELLINGS(f_waitany, MPI_WAITANY, mpi_waitany)

static void f_testany(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag, MPI_Fint *status,
                      MPI_Fint *ierr)
{
    reqs_t r;
    int n = (int)*count, i = MPI_UNDEFINED, done = 0;
    if (!reqs_in(&r, n, requests)) return (void)no_memory(ierr);
    int rc = har_testany(n, r.req, &i, &done, r.st);
    har_fortran_set_ierror(ierr, rc);
    *flag = done != 0;
    reqs_out(&r, rc == MPI_SUCCESS ? n : 0, requests);
    if (rc != MPI_SUCCESS) return;
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    status_out(&r.st[0], status);
}
HAR_FORTRAN_SPELLINGS(f_testany, MPI_TESTANY, mpi_testany)

static void some(int wait, MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
                 MPI_Fint *statuses, MPI_Fint *ierr)
{
    reqs_t r;
    int n = (int)*incount, out = MPI_UNDEFINED;
    if (!reqs_in(&r, n, requests)) return (void)no_memory(ierr);
    int idx_stack[SHORT], *idx = n <= SHORT ? idx_stack : malloc((size_t)n * sizeof *idx);
    if (!idx) {
        reqs_out(&r, 0, requests);
        return (void)no_memory(ierr);
    }
    int rc = wait ? har_waitsome(n, r.req, &out, idx, r.st) : har_testsome(n, r.req, &out, idx, r.st);
    har_fortran_set_ierror(ierr, rc);
    int ok = rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS;
    reqs_out(&r, ok ? n : 0, requests);
    if (ok) {
        *outcount = out;
        for (int k = 0; out != MPI_UNDEFINED && k < out; k++) indices[k] = idx[k] + 1;
        statuses_out(r.st, statuses, out == MPI_UNDEFINED ? 0 : out);
    }
    if (n > SHORT) free(idx);
}

static void f_waitsome(MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_Fint *statuses, MPI_Fint *ierr)
{
    some(1, incount, requests, outcount, indices, statuses, ierr);
}
HAR_FORTRAN_SPELLINGS(f_waitsome, MPI_WAITSOME, mpi_waitsome)

static void f_testsome(MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_Fint *statuses, MPI_Fint *ierr)
{
    some(0, incount, requests, outcount, indices, statuses, ierr);
}
HAR_FORTRAN_SPELLINGS(f_testsome, MPI_TESTSOME, mpi_testsome)

static void f_request_get_status(MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Status st;
    int done = 0, rc = har_request_get_status(PMPI_Request_f2c(*request), &done, &st);
    har_fortran_set_ierror(ierr, rc);
    *flag = done != 0;
    if (rc == MPI_SUCCESS && done) status_out(&st, status);
}
HAR_FORTRAN_SPELLINGS(f_request_get_status, MPI_REQUEST_GET_STATUS, mpi_request_get_status)

static void f_request_free(MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*request);
    int rc = har_request_free(&req);
    har_fortran_set_ierror(ierr, rc);
    if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(MPI_REQUEST_NULL);
}
HAR_FORTRAN_SPELLINGS(f_request_free, MPI_REQUEST_FREE, mpi_request_free)

static void f_start(MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*request);
    int rc = har_start(&req);
    har_fortran_set_ierror(ierr, rc);
    if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(req);  /* a start may hand back another handle */
}
HAR_FORTRAN_SPELLINGS(f_start, MPI_START, mpi_start)

static void f_startall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *ierr)
{
    reqs_t r;
    int n = (int)*count;
    if (!reqs_in(&r, n, requests)) return (void)no_memory(ierr);
    int rc = har_startall(n, r.req);
    har_fortran_set_ierror(ierr, rc);
    reqs_out(&r, n, requests);
}
HAR_FORTRAN_SPELLINGS(f_startall, MPI_STARTALL, mpi_startall)

#endif
