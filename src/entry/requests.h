/* The table of staged requests: the non-blocking and persistent
 * collectives whose device buffers the MPI works on as host copies; har's
 * own non-blocking calls; and every persistent all-reduce whose starts
 * har may serve, for its life. The completion calls (MPI_Wait and the
 * rest, MPI_Start, MPI_Request_free) find their requests in it, copy
 * results back to the device when an operation completes, and give the
 * copies back.
 *
 * Nearly every completion call of a program is of requests that are not
 * in it (point-to-point, host collectives); while the table is empty each
 * call below is one load and one branch before the MPI's own, and while a
 * persistent all-reduce lives, a lock and a look through the table. A
 * request is looked up before the MPI's call, while its handle is still
 * its own (the MPI may hand the same value to a new request as soon as it
 * completes one, in another thread). Safe under MPI_THREAD_MULTIPLE. */
#ifndef HAR_REQUESTS_H
#define HAR_REQUESTS_H

#include "entry/entry.h"
#include "stage/stage.h"

/* Entries in the table (read without the lock: only whether it is 0). */
extern HAR_HIDDEN int har_staged_live;

static inline int har_requests_none(void) { return __builtin_expect(!__atomic_load_n(&har_staged_live, __ATOMIC_ACQUIRE), 1); }

/* A place in the table for a request, taken before the MPI is called (a
 * request posted without one could never be finished); NULL when memory
 * ran out. */
HAR_HIDDEN void *har_request_reserve(void);
/* After the MPI's non-blocking call on the staged buffers returned rc: the
 * request takes its place in the table with the staging in s; on failure
 * the place and the copies go back. Returns rc. */
HAR_HIDDEN int har_request_post(void *slot, har_stage_t *s, int rc, MPI_Request *req);
/* After the MPI's persistent all-reduce _init returned rc: the request
 * takes its place in the table, with its staging (s; NULL: none) and,
 * where har may serve its starts, its call (from har_persistent_describe;
 * the table owns it). On failure what was given goes back. Returns rc. */
struct har_call;
/* Before a persistent request har may serve is made on comm: 1 once comm
 * tells the table when it is freed (its requests' later starts are then
 * the MPI's); 0 if the MPI refused the attribute. */
HAR_HIDDEN int har_request_watch_comm(MPI_Comm comm);
HAR_HIDDEN int har_request_persistent(void *slot, har_stage_t *s, struct har_call *call, MPI_Comm comm, int rc,
                                      MPI_Request *req);

/* A request for har's own non-blocking call: `pending` as har_comm_start
 * started it, or NULL where the call was served before returning. The
 * MPI's code (MPI_ERR_NO_MEM or the like if the request could not be
 * made: the call then ends first). */
struct har_comm_pending;
HAR_HIDDEN int har_request_native(struct har_comm_pending *pending, MPI_Comm comm, MPI_Request *req);
/* How a started call that is counted when it ends (comm/call.h's
 * har_comm_pending_paths) is counted: `paths` its plan's, rc its code;
 * returns the code its request carries (HAR_REQUIRE_PATH may fail it).
 * The entry's, given at initialisation: the table does not call up into
 * the entry. */
typedef int (*har_served_t)(unsigned paths, const char *what, size_t count, MPI_Comm comm, int rc);
HAR_HIDDEN void har_requests_count_with(har_served_t served);

HAR_HIDDEN int har_staged_wait(MPI_Request *req, MPI_Status *status);
HAR_HIDDEN int har_staged_test(MPI_Request *req, int *flag, MPI_Status *status);
HAR_HIDDEN int har_staged_waitall(int n, MPI_Request reqs[], MPI_Status statuses[]);
HAR_HIDDEN int har_staged_testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]);
HAR_HIDDEN int har_staged_waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status);
HAR_HIDDEN int har_staged_testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status);
HAR_HIDDEN int har_staged_waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]);
HAR_HIDDEN int har_staged_testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]);
HAR_HIDDEN int har_staged_request_get_status(MPI_Request req, int *flag, MPI_Status *status);
HAR_HIDDEN int har_staged_request_free(MPI_Request *req);
/* own_start: whether har serves a start (entry/entry.h's har_persistent_start,
 * which the entry points pass: the table does not call up into the
 * entry). */
typedef har_start_t (*har_start_own_t)(const struct har_call *call, MPI_Comm comm, struct har_comm_pending **pending,
                                       int *rc);
HAR_HIDDEN int har_staged_start(MPI_Request *req, har_start_own_t own_start);
HAR_HIDDEN int har_staged_startall(int n, MPI_Request reqs[], har_start_own_t own_start);

/* What the entry points call. */
static inline int har_wait(MPI_Request *r, MPI_Status *st)
{
    return har_requests_none() ? PMPI_Wait(r, st) : har_staged_wait(r, st);
}
static inline int har_test(MPI_Request *r, int *flag, MPI_Status *st)
{
    return har_requests_none() ? PMPI_Test(r, flag, st) : har_staged_test(r, flag, st);
}
static inline int har_waitall(int n, MPI_Request r[], MPI_Status st[])
{
    return har_requests_none() ? PMPI_Waitall(n, r, st) : har_staged_waitall(n, r, st);
}
static inline int har_testall(int n, MPI_Request r[], int *flag, MPI_Status st[])
{
    return har_requests_none() ? PMPI_Testall(n, r, flag, st) : har_staged_testall(n, r, flag, st);
}
static inline int har_waitany(int n, MPI_Request r[], int *index, MPI_Status *st)
{
    return har_requests_none() ? PMPI_Waitany(n, r, index, st) : har_staged_waitany(n, r, index, st);
}
static inline int har_testany(int n, MPI_Request r[], int *index, int *flag, MPI_Status *st)
{
    return har_requests_none() ? PMPI_Testany(n, r, index, flag, st) : har_staged_testany(n, r, index, flag, st);
}
static inline int har_waitsome(int n, MPI_Request r[], int *out, int idx[], MPI_Status st[])
{
    return har_requests_none() ? PMPI_Waitsome(n, r, out, idx, st) : har_staged_waitsome(n, r, out, idx, st);
}
static inline int har_testsome(int n, MPI_Request r[], int *out, int idx[], MPI_Status st[])
{
    return har_requests_none() ? PMPI_Testsome(n, r, out, idx, st) : har_staged_testsome(n, r, out, idx, st);
}
static inline int har_request_get_status(MPI_Request r, int *flag, MPI_Status *st)
{
    return har_requests_none() ? PMPI_Request_get_status(r, flag, st) : har_staged_request_get_status(r, flag, st);
}
static inline int har_request_free(MPI_Request *r)
{
    return har_requests_none() ? PMPI_Request_free(r) : har_staged_request_free(r);
}
static inline int har_start(MPI_Request *r)
{
    return har_requests_none() ? PMPI_Start(r) : har_staged_start(r, har_persistent_start);
}
static inline int har_startall(int n, MPI_Request r[])
{
    return har_requests_none() ? PMPI_Startall(n, r) : har_staged_startall(n, r, har_persistent_start);
}

#endif
