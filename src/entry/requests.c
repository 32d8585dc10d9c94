/* The table of staged requests and of har's own, and the completion calls
 * that finish them (requests.h). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include "comm/call.h"
#include "core/log.h"
#include "entry/requests.h"

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
    har_comm_pending_t
        *own; /* har serves it: req (persistent: stand_in) is a generalized request completed when `own` ends */
    int *own_rc;         /* then its code, which the request's status carries: the MPI's to free */
    MPI_Comm comm;
    int persistent, state;
    /* A persistent all-reduce whose starts har may serve: its call,
     * described at its making (NULL: every start is the MPI's). */
    har_call_t *call;
    /* har serves the current start: the MPI holds req inactive, and a
     * generalized request made for this start stands in for it in every
     * completion call, completed when `own` ends. */
    int har_start;
    MPI_Request stand_in;
    int busy;  /* a completion call holds it: a lookup skips it (its handle may be a new request's) */
    struct entry *next;
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *head;
int har_staged_live;
static har_served_t served;

void har_requests_count_with(har_served_t fn) { served = fn; }

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

/* Waits for har's call to end: its status. */
static har_status_t end_now(har_comm_pending_t *pending)
{
    har_status_t st;
    while (!har_comm_pending_test(pending, &st)) sched_yield();
    har_comm_pending_free(pending);
    return st;
}

/* The generalized request for har's call `pending`, or for one that ended
 * before returning (NULL) with status `ended`: *rc_of holds its code.
 * Where none can be made the call ends first (it runs on the peers too).
 * The MPI's code. */
static int own_request(har_comm_pending_t *pending, har_status_t ended, MPI_Comm comm, MPI_Request *req, int **rc_of)
{
    *rc_of = calloc(1, sizeof **rc_of);
    int rc = *rc_of ? PMPI_Grequest_start(own_query, own_free, own_cancel, *rc_of, req) : MPI_ERR_NO_MEM;
    if (rc != MPI_SUCCESS) {
        free(*rc_of);
        *rc_of = NULL;
        if (pending) end_now(pending);
        *req = MPI_REQUEST_NULL;
        return rc;
    }
    if (pending) return MPI_SUCCESS;
    **rc_of = har_error_code(ended);
    PMPI_Grequest_complete(*req);
    if (ended != HAR_OK) PMPI_Comm_call_errhandler(comm, **rc_of);
    return **rc_of;
}

/* Does the application's handle stay as it is whatever the MPI's
 * completion call does with the request it sees in its place? */
static int kept(const entry_t *e) { return e && e->persistent && (e->har_start || e->state == INACTIVE); }

/* What the MPI's completion calls see in the place of e's request `app`:
 * the stand-in of har's start of a persistent request, a null request for
 * an inactive persistent one (as the standard treats it: MPICH 4 reports
 * an inactive persistent collective request incomplete, or completing
 * again), or the request itself. */
static MPI_Request mpi_view(const entry_t *e, MPI_Request app)
{
    if (!kept(e)) return app;
    return e->har_start ? e->stand_in : MPI_REQUEST_NULL;
}

/* Has e's call ended? If so, its request is completed for the MPI. */
static int own_ended(entry_t *e)
{
    if (!e->own || e->state != ACTIVE) return 1;
    har_status_t st;
    if (!har_comm_pending_test(e->own, &st)) return 0;
    size_t count;
    unsigned paths = har_comm_pending_paths(e->own, &count);
    *e->own_rc = har_error_code(st);
    if (paths && served)
        *e->own_rc = served(paths, e->persistent ? "MPI_Start" : "MPI_Iallreduce", count, e->comm, *e->own_rc);
    e->state = DONE;
    PMPI_Grequest_complete(e->har_start ? e->stand_in : e->req);
    return 1;
}

int har_request_native(har_comm_pending_t *pending, MPI_Comm comm, MPI_Request *req)
{
    entry_t *e = pending ? calloc(1, sizeof *e) : NULL;
    har_status_t ended = HAR_OK;
    if (pending && !e) {  /* no room in the table: the call ends here */
        ended = end_now(pending);
        pending = NULL;
    }
    int *rc_of;
    int rc = own_request(pending, ended, comm, req, &rc_of);
    if (rc != MPI_SUCCESS || !pending) {
        free(e);
        return rc;
    }
    e->req = *req;
    e->own = pending;
    e->own_rc = rc_of;
    e->comm = comm;
    e->state = ACTIVE;
    insert(e);
    return MPI_SUCCESS;
}

int har_request_post(void *slot, har_stage_t *s, int rc, MPI_Request *req)
{
    entry_t *e = slot;
    if (rc != MPI_SUCCESS) {
        free(e);
        har_stage_release(s);
        return rc;
    }
    e->req = *req;
    e->stage = *s;
    e->state = ACTIVE;
    insert(e);
    return rc;
}

/* A communicator with persistent requests har may serve carries this
 * attribute: when it is freed, their later starts are the MPI's (har's
 * state for it is gone, and its handle may name another one). */
static int comm_keyval = MPI_KEYVAL_INVALID;
static pthread_once_t keyval_once = PTHREAD_ONCE_INIT;

static int comm_freed(MPI_Comm comm, int kv, void *attr, void *extra)
{
    (void)kv; (void)attr; (void)extra;
    pthread_mutex_lock(&lock);
    for (entry_t *e = head; e; e = e->next)
        if (e->call && e->comm == comm) {
            free(e->call);
            e->call = NULL;
        }
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}
static void make_keyval(void) { PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_freed, &comm_keyval, NULL); }

int har_request_watch_comm(MPI_Comm comm)
{
    pthread_once(&keyval_once, make_keyval);
    void *v;
    int found = 0;
    if (comm_keyval == MPI_KEYVAL_INVALID || PMPI_Comm_get_attr(comm, comm_keyval, &v, &found) != MPI_SUCCESS)
        return 0;
    return found || PMPI_Comm_set_attr(comm, comm_keyval, NULL) == MPI_SUCCESS;
}

int har_request_persistent(void *slot, har_stage_t *s, har_call_t *call, MPI_Comm comm, int rc, MPI_Request *req)
{
    entry_t *e = slot;
    if (rc != MPI_SUCCESS) {
        free(e);
        free(call);
        if (s) har_stage_release(s);
        return rc;
    }
    e->req = *req;
    if (s) e->stage = *s;
    e->call = call;
    e->comm = comm;
    e->persistent = 1;
    e->state = INACTIVE;
    insert(e);
    return rc;
}

/* The entries of reqs[0..n-1], claimed (NULL where a request is not in
 * the table); how many were found. */
static int claim(int n, const MPI_Request reqs[], entry_t *found[])
{
    int k = 0;
    har_comm_progress();  /* every completion call moves the started calls across nodes on (or yields to har's thread that does) */
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
    if (e->own || e->har_start) {  /* har's call: its error came with the MPI's completion */
        har_comm_pending_free(e->own);
        if (!e->har_start) {
            drop(e);
            return rc;
        }
        e->own = NULL;
        e->har_start = 0;
        e->state = INACTIVE;
        unclaim(e);
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

/* Room for the entries of an array of requests, for the array the MPI
 * sees (each stand-in in its request's place), and for statuses where the
 * caller gave none but har must read their errors: on the stack for short
 * arrays. 0 when there is nothing to look up or no memory for a long
 * array. */
#define SHORT 16
typedef struct {
    entry_t *stack[SHORT], **e;
    MPI_Status st_stack[SHORT], *own, *st;
    MPI_Request view_stack[SHORT], *view;
} room_t;

static int room(room_t *r, int n, int statuses, MPI_Status *given)
{
    r->e = NULL;
    r->own = NULL;
    r->st = given;
    r->view = NULL;
    if (n <= 0) return 0;
    r->e = n <= SHORT ? r->stack : malloc((size_t)n * sizeof *r->e);
    r->view = n <= SHORT ? r->view_stack : malloc((size_t)n * sizeof *r->view);
    if (statuses && given == MPI_STATUSES_IGNORE)
        r->st = r->own = n <= SHORT ? r->st_stack : malloc((size_t)n * sizeof *r->own);
    return r->e && r->view && (!statuses || r->st);
}

static void unroom(room_t *r)
{
    if (r->e != r->stack) free(r->e);
    if (r->view != r->view_stack) free(r->view);
    if (r->own != r->st_stack) free(r->own);
}

/* Room (statuses: for them too), the claimed entries of reqs and the
 * array the MPI is to see: 1; 0: none of them is in the table; -1: no
 * memory for a long array (the MPI cannot complete har's requests alone:
 * the call fails with MPI_ERR_NO_MEM). */
static int claim_all(room_t *r, int n, const MPI_Request reqs[], int statuses, MPI_Status *given)
{
    if (!room(r, n, statuses, given)) {
        unroom(r);
        if (n <= 0) return 0;
        har_log(HAR_LOG_ERROR, "no memory to complete %d requests", n);
        PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
        return -1;
    }
    if (!claim(n, reqs, r->e)) {
        unroom(r);
        return 0;
    }
    for (int i = 0; i < n; i++) r->view[i] = mpi_view(r->e[i], reqs[i]);
    return 1;
}

/* After the MPI's call on the view: the application's handles as the MPI
 * left them, a persistent request's staying as it is. */
static void unview(const room_t *r, int n, MPI_Request reqs[])
{
    for (int i = 0; i < n; i++)
        if (!kept(r->e[i])) reqs[i] = r->view[i];
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

/* Nor can any wait block in the MPI while a started call across nodes
 * runs (har's or not among its requests) with no thread of har's to
 * move it: that call moves only when har moves it, and a peer may wait
 * for it before it completes what this wait waits for. Until the live
 * requests are all complete, or no such call runs any more, they are
 * looked at (MPI_Request_get_status: it completes nothing, and moves the
 * MPI) between passes of those calls; the MPI's wait then returns at
 * once, or blocks with nothing of har's left to move. (Waitany and Waitsome test instead: an inactive
 * persistent request counts as complete for MPI_Request_get_status, not
 * for them.) */
static void move_across(int n, const MPI_Request reqs[])
{
    while (har_comm_across_to_move()) {
        har_comm_progress();
        int live = 0, complete = 0;
        for (int i = 0; i < n; i++) {
            int flag = 0;
            if (reqs[i] == MPI_REQUEST_NULL) continue;
            live++;
            PMPI_Request_get_status(reqs[i], &flag, MPI_STATUS_IGNORE);
            complete += flag != 0;
        }
        if (complete == live) return;
    }
}

/* MPI_Testany between passes while started calls across nodes run: its
 * code; *flag says whether it completed one (or found none active). */
static int testany_across(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    int rc = MPI_SUCCESS;
    *flag = 0;
    while (har_comm_across_to_move() && (rc = PMPI_Testany(n, reqs, index, flag, status)) == MPI_SUCCESS && !*flag)
        har_comm_progress();
    return rc;
}

/* The same for MPI_Testsome: *some once it completed some (or found none
 * active). */
static int testsome_across(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[], int *some)
{
    int rc = MPI_SUCCESS;
    *some = 0;
    while (har_comm_across_to_move() &&
           (rc = PMPI_Testsome(n, reqs, outcount, indices, statuses)) == MPI_SUCCESS && !(*some = *outcount != 0))
        har_comm_progress();
    return rc;
}

int har_staged_wait(MPI_Request *req, MPI_Status *status)
{
    entry_t *e;
    if (!claim(1, req, &e)) {
        move_across(1, req);
        return PMPI_Wait(req, status);
    }
    MPI_Request r = mpi_view(e, *req);
    for (int flag; !own_ended(e);) PMPI_Test(&r, &flag, MPI_STATUS_IGNORE);  /* incomplete: it only moves the MPI */
    move_across(1, &r);
    int rc = PMPI_Wait(&r, status);
    if (!kept(e)) *req = r;
    if (rc == MPI_SUCCESS) return finish(e, 1);
    settle_failed(e, r);
    return rc;
}

int har_staged_test(MPI_Request *req, int *flag, MPI_Status *status)
{
    entry_t *e;
    if (!claim(1, req, &e)) return PMPI_Test(req, flag, status);
    MPI_Request r = mpi_view(e, *req);
    own_ended(e);
    *flag = 0;
    int rc = PMPI_Test(&r, flag, status);
    if (!kept(e)) *req = r;
    if (rc == MPI_SUCCESS && *flag) return finish(e, 1);
    if (rc == MPI_SUCCESS) unclaim(e);
    else settle_failed(e, r);
    return rc;
}

/* After Waitall or Testall returned rc, with every request complete (all)
 * or none, or with each one's error in its status. */
static int settle_all(int n, const MPI_Request view[], entry_t *e[], MPI_Status st[], int rc, int all)
{
    int copy_rc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        if (!e[i]) continue;
        if (rc == MPI_ERR_IN_STATUS) {
            int err = st[i].MPI_ERROR;
            if (err == MPI_ERR_PENDING) unclaim(e[i]);
            else copy_rc = keep_first(copy_rc, finish(e[i], err == MPI_SUCCESS));
        } else if (rc != MPI_SUCCESS) {
            settle_failed(e[i], view[i]);
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
    int found = claim_all(&r, n, reqs, 1, statuses);
    if (found == 0) move_across(n, reqs);
    if (found <= 0) return found < 0 ? MPI_ERR_NO_MEM : PMPI_Waitall(n, reqs, statuses);
    /* Not MPI_Testall, which MPICH 4 fails with a persistent collective
     * among the requests: a probe moves the MPI's progress as well. */
    for (int flag; !own_progress(n, r.e);) PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    move_across(n, r.view);
    int rc = PMPI_Waitall(n, r.view, r.st);
    unview(&r, n, reqs);
    rc = settle_all(n, r.view, r.e, r.st, rc, 1);
    unroom(&r);
    return rc;
}

int har_staged_testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    room_t r;
    int found = claim_all(&r, n, reqs, 1, statuses);
    if (found <= 0) return found < 0 ? MPI_ERR_NO_MEM : PMPI_Testall(n, reqs, flag, statuses);
    own_progress(n, r.e);
    *flag = 0;
    int rc = PMPI_Testall(n, r.view, flag, r.st);
    unview(&r, n, reqs);
    rc = settle_all(n, r.view, r.e, r.st, rc, *flag);
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
    int found = claim_all(&r, n, reqs, 0, NULL), rc = MPI_SUCCESS, flag = 0;
    if (found == 0 && ((rc = testany_across(n, reqs, index, &flag, status)) != MPI_SUCCESS || flag)) return rc;
    if (found <= 0) return found < 0 ? MPI_ERR_NO_MEM : PMPI_Waitany(n, reqs, index, status);
    *index = MPI_UNDEFINED;
    while (!own_progress(n, r.e) && (rc = PMPI_Testany(n, r.view, index, &flag, status)) == MPI_SUCCESS && !flag) {}
    if (rc == MPI_SUCCESS && !flag) rc = testany_across(n, r.view, index, &flag, status);
    if (rc == MPI_SUCCESS && !flag) rc = PMPI_Waitany(n, r.view, index, status);
    unview(&r, n, reqs);
    int completed = *index >= 0 && *index < n;  /* with an error, index names the request that failed */
    rc = keep_first(rc, settle_any(n, r.e, *index, completed, rc == MPI_SUCCESS));
    unroom(&r);
    return rc;
}

int har_staged_testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    room_t r;
    int found = claim_all(&r, n, reqs, 0, NULL);
    if (found <= 0) return found < 0 ? MPI_ERR_NO_MEM : PMPI_Testany(n, reqs, index, flag, status);
    own_progress(n, r.e);
    *index = MPI_UNDEFINED;
    *flag = 0;
    int rc = PMPI_Testany(n, r.view, index, flag, status);
    unview(&r, n, reqs);
    int completed = (rc != MPI_SUCCESS || *flag) && *index >= 0 && *index < n;
    rc = keep_first(rc, settle_any(n, r.e, *index, completed, rc == MPI_SUCCESS));
    unroom(&r);
    return rc;
}

/* After Waitsome or Testsome: the requests named in indices completed
 * (under MPI_ERR_IN_STATUS with each one's error in its status); the
 * others are as they were, unless the call failed as a whole. */
static int settle_some(int n, const MPI_Request view[], entry_t *e[], int rc, int outcount, const int indices[],
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
        else settle_failed(e[i], view[i]);
    }
    return keep_first(rc, copy_rc);
}

int har_staged_waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    room_t r;
    int found = claim_all(&r, n, reqs, 1, statuses), rc = MPI_SUCCESS, some = 0;
    if (found == 0 && ((rc = testsome_across(n, reqs, outcount, indices, statuses, &some)) != MPI_SUCCESS || some))
        return rc;
    if (found <= 0) return found < 0 ? MPI_ERR_NO_MEM : PMPI_Waitsome(n, reqs, outcount, indices, statuses);
    *outcount = MPI_UNDEFINED;
    while (!own_progress(n, r.e) && (rc = PMPI_Testsome(n, r.view, outcount, indices, r.st)) == MPI_SUCCESS &&
           !(some = *outcount != 0)) {}
    if (rc == MPI_SUCCESS && !some) rc = testsome_across(n, r.view, outcount, indices, r.st, &some);
    if (rc == MPI_SUCCESS && !some) rc = PMPI_Waitsome(n, r.view, outcount, indices, r.st);
    unview(&r, n, reqs);
    rc = settle_some(n, r.view, r.e, rc, *outcount, indices, r.st);
    unroom(&r);
    return rc;
}

int har_staged_testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    room_t r;
    int found = claim_all(&r, n, reqs, 1, statuses);
    if (found <= 0) return found < 0 ? MPI_ERR_NO_MEM : PMPI_Testsome(n, reqs, outcount, indices, statuses);
    own_progress(n, r.e);
    *outcount = MPI_UNDEFINED;
    int rc = PMPI_Testsome(n, r.view, outcount, indices, r.st);
    unview(&r, n, reqs);
    rc = settle_some(n, r.view, r.e, rc, *outcount, indices, r.st);
    unroom(&r);
    return rc;
}

int har_staged_request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    entry_t *e;
    if (!claim(1, &req, &e)) return PMPI_Request_get_status(req, flag, status);
    own_ended(e);
    int rc = PMPI_Request_get_status(mpi_view(e, req), flag, status);
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

/* MPI 4.1 (3.7.3, 3.9): freeing a collective's request before it
 * completes, and starting a persistent request that is active, are
 * erroneous: the MPI's class for a request it cannot take. */
static int refuse(entry_t *e)
{
    MPI_Comm comm = e->comm;
    unclaim(e);
    PMPI_Comm_call_errhandler(comm, MPI_ERR_REQUEST);
    return MPI_ERR_REQUEST;
}

int har_staged_request_free(MPI_Request *req)
{
    entry_t *e;
    if (!claim(1, req, &e)) return PMPI_Request_free(req);
    /* har's call goes on and the request stays; a persistent one is
     * active until a completion call completes it */
    if (e->har_start || (e->own && !own_ended(e))) return refuse(e);
    int active = e->state == ACTIVE;
    int rc = PMPI_Request_free(req);
    if (rc != MPI_SUCCESS) {
        unclaim(e);
        return rc;
    }
    /* Freeing a collective's request before it completes is erroneous; if
     * the MPI accepted it, it may still write the host copies: they stay. */
    if (e->own) har_comm_pending_free(e->own);
    else if (active) HAR_WARN_ONCE("a staged collective's request was freed before it completed: its host copies are not reused");
    else har_stage_release(&e->stage);
    free(e->call);
    drop(e);
    return rc;
}

/* A start of a persistent request in the table: 1 when it is har's (as
 * every rank decides) or refused (the request is active), the start's
 * code in *rc; 0: the MPI's. */
static int start_own(entry_t *e, har_start_own_t own_start, int *rc)
{
    if (!e || !e->persistent) return 0;
    if (e->state != INACTIVE) {  /* the MPIs differ here: Open MPI 4.1 starts it again */
        *rc = refuse(e);
        return 1;
    }
    if (!e->call) return 0;
    har_comm_pending_t *pending;
    switch (own_start(e->call, e->comm, &pending, rc)) {
    case HAR_START_MPI:
        return 0;
    case HAR_START_FAILED:  /* the request stays inactive */
        unclaim(e);
        return 1;
    case HAR_START_OWN:
        break;
    }
    int made = own_request(pending, HAR_OK, e->comm, &e->stand_in, &e->own_rc);
    if (made == MPI_SUCCESS) {
        e->own = pending;
        e->har_start = 1;
        e->state = pending ? ACTIVE : DONE;
    }
    if (*rc == MPI_SUCCESS) *rc = made;
    unclaim(e);
    return 1;
}

/* A persistent request about to start on the MPI: its inputs go to the
 * host copies. */
static int prepare_start(entry_t *e)
{
    if (!e || !e->persistent) return MPI_SUCCESS;  /* the MPI judges a start of anything else */
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

/* One start on the MPI, of a request in the table (e) or not. */
static int start_mpi(entry_t *e, MPI_Request *req)
{
    int rc = prepare_start(e);
    if (rc == MPI_SUCCESS) rc = PMPI_Start(req);
    started(e, *req, rc);
    return rc;
}

int har_staged_start(MPI_Request *req, har_start_own_t own_start)
{
    entry_t *e;
    if (!claim(1, req, &e)) return PMPI_Start(req);
    int rc;
    return start_own(e, own_start, &rc) ? rc : start_mpi(e, req);
}

int har_staged_startall(int n, MPI_Request reqs[], har_start_own_t own_start)
{
    room_t r;
    int found = claim_all(&r, n, reqs, 0, NULL);
    if (found <= 0) return found < 0 ? MPI_ERR_NO_MEM : PMPI_Startall(n, reqs);
    /* One by one in the array's order (MPI_Startall starts them in some
     * order): har's starts and the MPI's, which every rank decides alike.
     * After a failure the rest stay inactive. */
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        int one = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) unclaim(r.e[i]);
        else if (!start_own(r.e[i], own_start, &one)) one = start_mpi(r.e[i], &reqs[i]);
        rc = keep_first(rc, one);
    }
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
