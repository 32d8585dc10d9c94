/* The table of staged requests and of har's own, and the completion calls
 * that finish them (requests.h). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include "comm/call.h"
#include "core/log.h"
#include "stage/requests.h"

/* ACTIVE: the MPI works on the host copies (har's own: har's call runs).
 * DONE: the results are back on the device (MPI_Request_get_status saw it
 * complete; har's own: its call ended and the generalized request is
 * complete) but the application has not completed the request yet.
 * INACTIVE: a persistent request between a completion and the next
 * start. */
enum { ACTIVE, DONE, INACTIVE };

typedef struct entry {
    MPI_Request req;
    har_stage_t stage;
    har_pending_t *own;  /* har serves it: req is a generalized request completed when `own` ends */
    int *own_rc;         /* then its code, which the request's status carries: the MPI's to free */
    MPI_Comm comm;
    int persistent, state;
    int busy;  /* a completion call holds it: a lookup skips it (its handle may be a new request's) */
    struct entry *next;
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *head;
int har_staged_live;

void *har_request_reserve(void) { return calloc(1, sizeof(entry_t)); }

static void insert(entry_t *e)
{
    pthread_mutex_lock(&lock);
    e->next = head;
    head = e;
    __atomic_store_n(&har_staged_live, har_staged_live + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
}

/* har's own requests are generalized requests: the MPI knows their
 * handles, so they mix with its own in every completion call, in C and
 * Fortran, and MPI_Request_get_status, f2c/c2f and statuses are the MPI's.
 * A collective's status says nothing but its error; it cannot be
 * cancelled (MPI_Test_cancelled says false), and the table frees what it
 * holds. */
static int own_query(void *extra, MPI_Status *status)
{
    const int *rc = extra;  /* the request's own: the MPI may ask after har's entry is gone */
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = *rc;
    return *rc;
}
static int own_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}
static int own_cancel(void *extra, int complete) { (void)extra; (void)complete; return MPI_SUCCESS; }

/* Has e's call ended? If so, its request is completed for the MPI. */
static int own_ended(entry_t *e)
{
    if (!e->own || e->state != ACTIVE) return 1;
    har_status_t st;
    if (!har_pending_test(e->own, &st)) return 0;
    *e->own_rc = har_error_code(st);
    e->state = DONE;
    PMPI_Grequest_complete(e->req);
    return 1;
}

int har_request_native(har_pending_t *pending, MPI_Comm comm, MPI_Request *req)
{
    int *rc_of = calloc(1, sizeof *rc_of);
    entry_t *e = pending ? calloc(1, sizeof *e) : NULL;
    int rc = rc_of ? PMPI_Grequest_start(own_query, own_free, own_cancel, rc_of, req) : MPI_ERR_NO_MEM;
    if (rc != MPI_SUCCESS) free(rc_of);
    if (rc != MPI_SUCCESS || !e) {
        /* Served already, or no request could be made (then the call,
         * which runs on the peers too, ends here first). */
        har_status_t st = HAR_OK;
        while (pending && !har_pending_test(pending, &st)) sched_yield();
        if (pending) har_pending_free(pending);
        free(e);
        if (rc == MPI_SUCCESS && st != HAR_OK) {
            *rc_of = har_error_code(st);
            PMPI_Comm_call_errhandler(comm, *rc_of);
        }
        if (rc == MPI_SUCCESS) PMPI_Grequest_complete(*req);
        else *req = MPI_REQUEST_NULL;
        return rc == MPI_SUCCESS ? *rc_of : rc;
    }
    e->req = *req;
    e->own = pending;
    e->own_rc = rc_of;
    e->comm = comm;
    e->state = ACTIVE;
    insert(e);
    return MPI_SUCCESS;
}

int har_request_post(void *slot, har_stage_t *s, int rc, MPI_Request *req, int persistent)
{
    entry_t *e = slot;
    if (rc != MPI_SUCCESS) {
        free(e);
        har_stage_release(s);
        return rc;
    }
    e->req = *req;
    e->stage = *s;
    e->persistent = persistent;
    e->state = persistent ? INACTIVE : ACTIVE;
    insert(e);
    return rc;
}

/* The entries of reqs[0..n-1], claimed (NULL where a request is not
 * staged); how many were found. */
static int claim(int n, const MPI_Request reqs[], entry_t *found[])
{
    int k = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n; i++) {
        found[i] = NULL;
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        for (entry_t *e = head; e; e = e->next)
            if (!e->busy && e->req == reqs[i]) {
                e->busy = 1;
                found[i] = e;
                k++;
                break;
            }
    }
    pthread_mutex_unlock(&lock);
    return k;
}

static void unclaim(entry_t *e)
{
    if (!e) return;
    pthread_mutex_lock(&lock);
    e->busy = 0;
    pthread_mutex_unlock(&lock);
}

static void drop(entry_t *e)
{
    pthread_mutex_lock(&lock);
    for (entry_t **p = &head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    __atomic_store_n(&har_staged_live, har_staged_live - 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    free(e);
}

/* The MPI completed e's operation (ok: without error): its results go
 * back to the device, and the request leaves the table, or, persistent,
 * waits for its next start. MPI_SUCCESS or the failed copy's code (through
 * the communicator's handler). */
static int finish(entry_t *e, int ok)
{
    int rc = MPI_SUCCESS;
    if (e->own) {  /* its error came with the MPI's completion */
        har_pending_free(e->own);
        drop(e);
        return rc;
    }
    if (ok && e->state == ACTIVE && har_stage_out(&e->stage) != HAR_OK) rc = har_stage_error(&e->stage);
    if (e->persistent) {
        e->state = INACTIVE;
        unclaim(e);
    } else {
        har_stage_release(&e->stage);
        drop(e);
    }
    return rc;
}

/* After a completion call that failed as a whole: a request the MPI freed
 * (its handle is null now) completed with an error; the others are as
 * they were. */
static void settle_failed(entry_t *e, MPI_Request now)
{
    if (!e) return;
    if (now == MPI_REQUEST_NULL) finish(e, 0);
    else unclaim(e);
}

/* Room for the entries of an array of requests, and for statuses where the
 * caller gave none but har must read their errors: on the stack for short
 * arrays. 0 when there is nothing to look up (or no memory for a long
 * array: the MPI then completes the requests without har, as if none were
 * staged). */
#define SHORT 16
typedef struct {
    entry_t *stack[SHORT], **e;
    MPI_Status st_stack[SHORT], *own, *st;
} room_t;

static int room(room_t *r, int n, int statuses, MPI_Status *given)
{
    r->e = NULL;
    r->own = NULL;
    r->st = given;
    if (n <= 0) return 0;
    r->e = n <= SHORT ? r->stack : malloc((size_t)n * sizeof *r->e);
    if (statuses && given == MPI_STATUSES_IGNORE)
        r->st = r->own = n <= SHORT ? r->st_stack : malloc((size_t)n * sizeof *r->own);
    return r->e && (!statuses || r->st);
}

static void unroom(room_t *r)
{
    if (r->e != r->stack) free(r->e);
    if (r->own != r->st_stack) free(r->own);
}

/* Room (statuses: for them too) and the claimed entries of reqs; 0: none
 * of them is staged. */
static int claim_all(room_t *r, int n, const MPI_Request reqs[], int statuses, MPI_Status *given)
{
    if (room(r, n, statuses, given) && claim(n, reqs, r->e)) return 1;
    unroom(r);
    return 0;
}

/* A copy that failed on completion is the call's error. */
static int keep_first(int rc, int copy_rc) { return rc == MPI_SUCCESS ? copy_rc : rc; }

/* Tests har's own calls among the claimed entries e[0..n-1]; 1 when none
 * of them is still running. */
static int own_progress(int n, entry_t *e[])
{
    int ended = 1;
    for (int i = 0; i < n; i++)
        if (e[i] && !own_ended(e[i])) ended = 0;
    return ended;
}

/* A wait among whose requests har's own calls still run cannot block in
 * the MPI, which would never see them complete: it tests them and the
 * MPI's requests in turn (so that the MPI's keep moving: a peer may need
 * them to reach har's call), with the test of the same form (MPI_Waitall:
 * a probe). */

int har_staged_wait(MPI_Request *req, MPI_Status *status)
{
    entry_t *e;
    if (!claim(1, req, &e)) return PMPI_Wait(req, status);
    for (int flag; !own_ended(e);) PMPI_Test(req, &flag, MPI_STATUS_IGNORE);  /* incomplete: it only moves the MPI */
    int rc = PMPI_Wait(req, status);
    if (rc == MPI_SUCCESS) return finish(e, 1);
    settle_failed(e, *req);
    return rc;
}

int har_staged_test(MPI_Request *req, int *flag, MPI_Status *status)
{
    entry_t *e;
    if (!claim(1, req, &e)) return PMPI_Test(req, flag, status);
    own_ended(e);
    *flag = 0;
    int rc = PMPI_Test(req, flag, status);
    if (rc == MPI_SUCCESS && *flag) return finish(e, 1);
    if (rc == MPI_SUCCESS) unclaim(e);
    else settle_failed(e, *req);
    return rc;
}

/* After Waitall or Testall returned rc, with every request complete (all)
 * or none, or with each one's error in its status. */
static int settle_all(int n, MPI_Request reqs[], entry_t *e[], MPI_Status st[], int rc, int all)
{
    int copy_rc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        if (!e[i]) continue;
        if (rc == MPI_ERR_IN_STATUS) {
            int err = st[i].MPI_ERROR;
            if (err == MPI_ERR_PENDING) unclaim(e[i]);
            else copy_rc = keep_first(copy_rc, finish(e[i], err == MPI_SUCCESS));
        } else if (rc != MPI_SUCCESS) {
            settle_failed(e[i], reqs[i]);
        } else if (all) {
            copy_rc = keep_first(copy_rc, finish(e[i], 1));
        } else {
            unclaim(e[i]);
        }
    }
    return keep_first(rc, copy_rc);
}

int har_staged_waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    room_t r;
    if (!claim_all(&r, n, reqs, 1, statuses)) return PMPI_Waitall(n, reqs, statuses);
    /* Not MPI_Testall, which MPICH 4 fails with a persistent collective
     * among the requests: a probe moves the MPI's progress as well. */
    for (int flag; !own_progress(n, r.e);) PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    int rc = settle_all(n, reqs, r.e, r.st, PMPI_Waitall(n, reqs, r.st), 1);
    unroom(&r);
    return rc;
}

int har_staged_testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    room_t r;
    if (!claim_all(&r, n, reqs, 1, statuses)) return PMPI_Testall(n, reqs, flag, statuses);
    own_progress(n, r.e);
    *flag = 0;
    int rc = PMPI_Testall(n, reqs, flag, r.st);
    rc = settle_all(n, reqs, r.e, r.st, rc, *flag);
    unroom(&r);
    return rc;
}

/* After Waitany or Testany: request `index` completed (ok: without error)
 * if `completed`; the others are as they were. */
static int settle_any(int n, entry_t *e[], int index, int completed, int ok)
{
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        if (!e[i]) continue;
        if (completed && i == index) rc = finish(e[i], ok);
        else unclaim(e[i]);
    }
    return rc;
}

int har_staged_waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    room_t r;
    if (!claim_all(&r, n, reqs, 0, NULL)) return PMPI_Waitany(n, reqs, index, status);
    *index = MPI_UNDEFINED;
    int rc = MPI_SUCCESS, flag = 0;
    while (!own_progress(n, r.e) && (rc = PMPI_Testany(n, reqs, index, &flag, status)) == MPI_SUCCESS && !flag) {}
    if (rc == MPI_SUCCESS && !flag) rc = PMPI_Waitany(n, reqs, index, status);
    int completed = *index >= 0 && *index < n;  /* with an error, index names the request that failed */
    rc = keep_first(rc, settle_any(n, r.e, *index, completed, rc == MPI_SUCCESS));
    unroom(&r);
    return rc;
}

int har_staged_testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    room_t r;
    if (!claim_all(&r, n, reqs, 0, NULL)) return PMPI_Testany(n, reqs, index, flag, status);
    own_progress(n, r.e);
    *index = MPI_UNDEFINED;
    *flag = 0;
    int rc = PMPI_Testany(n, reqs, index, flag, status);
    int completed = (rc != MPI_SUCCESS || *flag) && *index >= 0 && *index < n;
    rc = keep_first(rc, settle_any(n, r.e, *index, completed, rc == MPI_SUCCESS));
    unroom(&r);
    return rc;
}

/* After Waitsome or Testsome: the requests named in indices completed
 * (under MPI_ERR_IN_STATUS with each one's error in its status); the
 * others are as they were, unless the call failed as a whole. */
static int settle_some(int n, MPI_Request reqs[], entry_t *e[], int rc, int outcount, const int indices[],
                       const MPI_Status st[])
{
    int copy_rc = MPI_SUCCESS, listed = rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS;
    for (int k = 0; listed && outcount != MPI_UNDEFINED && k < outcount; k++) {
        int i = indices[k];
        if (i < 0 || i >= n || !e[i]) continue;
        copy_rc = keep_first(copy_rc, finish(e[i], rc == MPI_SUCCESS || st[k].MPI_ERROR == MPI_SUCCESS));
        e[i] = NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!e[i]) continue;
        if (listed) unclaim(e[i]);
        else settle_failed(e[i], reqs[i]);
    }
    return keep_first(rc, copy_rc);
}

int har_staged_waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    room_t r;
    if (!claim_all(&r, n, reqs, 1, statuses)) return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
    *outcount = MPI_UNDEFINED;
    int rc = MPI_SUCCESS, some = 0;
    while (!own_progress(n, r.e) && (rc = PMPI_Testsome(n, reqs, outcount, indices, r.st)) == MPI_SUCCESS &&
           !(some = *outcount != 0)) {}
    if (rc == MPI_SUCCESS && !some) rc = PMPI_Waitsome(n, reqs, outcount, indices, r.st);
    rc = settle_some(n, reqs, r.e, rc, *outcount, indices, r.st);
    unroom(&r);
    return rc;
}

int har_staged_testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    room_t r;
    if (!claim_all(&r, n, reqs, 1, statuses)) return PMPI_Testsome(n, reqs, outcount, indices, statuses);
    own_progress(n, r.e);
    *outcount = MPI_UNDEFINED;
    int rc = PMPI_Testsome(n, reqs, outcount, indices, r.st);
    rc = settle_some(n, reqs, r.e, rc, *outcount, indices, r.st);
    unroom(&r);
    return rc;
}

int har_staged_request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    entry_t *e;
    if (!claim(1, &req, &e)) return PMPI_Request_get_status(req, flag, status);
    own_ended(e);
    int rc = PMPI_Request_get_status(req, flag, status);
    /* Complete: the results belong in the application's buffer now, though
     * the request lives on until a wait or test (which copies nothing
     * again: the application may have written the buffer since). */
    if (rc == MPI_SUCCESS && *flag && e->state == ACTIVE) {
        if (har_stage_out(&e->stage) != HAR_OK) rc = har_stage_error(&e->stage);
        e->state = DONE;
    }
    unclaim(e);
    return rc;
}

int har_staged_request_free(MPI_Request *req)
{
    entry_t *e;
    if (!claim(1, req, &e)) return PMPI_Request_free(req);
    if (e->own && !own_ended(e)) {
        /* Erroneous for a collective's request (MPI 4.1, 3.7.3): har's
         * call goes on and the request stays. */
        unclaim(e);
        int rc = MPI_ERR_REQUEST;
        PMPI_Comm_call_errhandler(e->comm, rc);
        return rc;
    }
    int active = e->state == ACTIVE;
    int rc = PMPI_Request_free(req);
    if (rc != MPI_SUCCESS) {
        unclaim(e);
        return rc;
    }
    /* Freeing a collective's request before it completes is erroneous; if
     * the MPI accepted it, it may still write the host copies: they stay. */
    if (e->own) har_pending_free(e->own);
    else if (active) HAR_WARN_ONCE("a staged collective's request was freed before it completed: its host copies are not reused");
    else har_stage_release(&e->stage);
    drop(e);
    return rc;
}

/* A persistent request about to start: its inputs go to the host copies. */
static int prepare_start(entry_t *e)
{
    if (!e || !e->persistent || e->state != INACTIVE) return MPI_SUCCESS;  /* the MPI judges a start of anything else */
    return har_stage_in(&e->stage) == HAR_OK ? MPI_SUCCESS : har_stage_error(&e->stage);
}

static void started(entry_t *e, MPI_Request now, int rc)
{
    if (!e) return;
    pthread_mutex_lock(&lock);
    if (rc == MPI_SUCCESS && e->persistent && e->state == INACTIVE) {
        e->req = now;  /* an MPI may hand back another handle for a started request */
        e->state = ACTIVE;
    }
    e->busy = 0;
    pthread_mutex_unlock(&lock);
}

int har_staged_start(MPI_Request *req)
{
    entry_t *e;
    if (!claim(1, req, &e)) return PMPI_Start(req);
    int rc = prepare_start(e);
    if (rc != MPI_SUCCESS) {
        unclaim(e);
        return rc;
    }
    rc = PMPI_Start(req);
    started(e, *req, rc);
    return rc;
}

int har_staged_startall(int n, MPI_Request reqs[])
{
    room_t r;
    if (!claim_all(&r, n, reqs, 0, NULL)) return PMPI_Startall(n, reqs);
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) rc = prepare_start(r.e[i]);
    if (rc == MPI_SUCCESS) rc = PMPI_Startall(n, reqs);
    for (int i = 0; i < n; i++) started(r.e[i], reqs[i], rc);
    unroom(&r);
    return rc;
}

#ifdef HAR_TEST_HOOKS
/* The test build's view: staged requests in the table, buffers the pool holds. */
void har_test_stage_state(int *requests, int *kept, size_t *kept_bytes) __attribute__((visibility("default")));
void har_test_stage_state(int *requests, int *kept, size_t *kept_bytes)
{
    *requests = __atomic_load_n(&har_staged_live, __ATOMIC_ACQUIRE);
    *kept = har_stage_kept(kept_bytes);
}
#endif
