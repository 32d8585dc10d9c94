/* One call on a communicator har serves: the node's agreement at arrival,
 * the plan, the engines set up when the plan first needs them, and the
 * engine's run. */
#ifndef HAR_CALL_H
#define HAR_CALL_H

#include "comm/state.h"

/* The plan of the call, made alike on every local rank. May synchronise the
 * node (the arrival) and set engines up (collective on the node). On a
 * failure the communicator is failed for good (see har_comm_fail). */
HAR_HIDDEN har_status_t har_comm_plan(har_comm_t *c, har_call_t *call, unsigned forced, har_plan_t *plan);
/* Carries a plan out on its engine (not the MPI: entry/entry.c forwards). */
HAR_HIDDEN har_status_t har_comm_run(har_comm_t *c, const har_call_t *call, har_plan_t *plan);
/* The call har_comm_plan began has ended (run, forwarded or failed). */
HAR_HIDDEN void har_comm_done(void);
/* A call failed with `st` after peers were involved (a death, a time-out,
 * differing arguments across nodes, a CUDA error): the failure is recorded
 * for the local peers if nobody did yet, said once naming the rank at
 * fault, and passed on to the other nodes; every later call here fails,
 * since ranks cannot tell which calls their peers completed and handing
 * later calls to the MPI could pair different calls and mix their data.
 * Returns the status this call reports (the MPI's class for differing
 * arguments also on ranks that stopped because another rank found them). */
HAR_HIDDEN har_status_t har_comm_fail(har_comm_t *c, har_status_t st);
/* A non-blocking call (MPI_Iallreduce) har serves itself, started and
 * owned by its request (entry/requests.c) until it ends and is freed. */
typedef struct har_comm_pending har_comm_pending_t;
/* Plans a non-blocking call. On one node har serves it where its plan
 * goes ahead on an engine that can start calls, on a communicator already
 * set up for its device buffers; across nodes wherever a blocking call set
 * the communicator up (under MPI_THREAD_MULTIPLE only with
 * HAR_PROGRESS_THREAD), running the blocking path in a fiber that the
 * completion calls, or har's thread, move on: decisions every rank makes
 * alike from what they share. Then *pending is the call started here
 * (across nodes its plan is made later, and plan->engine stays the
 * MPI's), or NULL where this rank's buffers are not on the kernels' GPU
 * and it served the call before returning (plan->engine says which);
 * else plan->engine is the MPI and the MPI's non-blocking call serves it.
 * A failure fails the communicator for good, as in a blocking call. */
HAR_HIDDEN har_status_t har_comm_start(har_comm_t *c, har_call_t *call, unsigned forced, har_plan_t *plan,
                                       har_comm_pending_t **pending);
/* Plans a stream-ordered call (har_allreduce_enqueue) and, where har's
 * kernels serve it, queues it on `stream` (a cudaStream_t; `captured`: into
 * the CUDA graph the stream is capturing) and returns:
 * one node, a communicator set up for device buffers, a plan that goes
 * ahead on push kernels, HAR_CHECK off (it compares results on the host).
 * Every rank decides alike from what they share. Else plan->engine is the
 * MPI: the caller waits for the stream and makes a blocking call. This
 * rank's buffers may be anywhere (the engine copies them through its GPU
 * in stream order). A failure fails the communicator for good. */
HAR_HIDDEN har_status_t har_comm_enqueue(har_comm_t *c, har_call_t *call, unsigned forced, void *stream,
                                         int captured, har_plan_t *plan);
/* Without waiting: 1 once the call has ended (its status in *st, the MPI's
 * class of a differing call included), 0 while it runs. */
HAR_HIDDEN int har_comm_pending_test(har_comm_pending_t *p, har_status_t *st);
/* Is p counted when it ends, not at its post? (A started call across
 * nodes plans at its arrival, after the post.) */
HAR_HIDDEN int har_comm_pending_counted_late(const har_comm_pending_t *p);
/* The paths of an ended call that are counted only now, and its count; 0
 * where the post counted them. */
HAR_HIDDEN unsigned har_comm_pending_paths(const har_comm_pending_t *p, size_t *count);
/* Gives an ended call back. */
HAR_HIDDEN void har_comm_pending_free(har_comm_pending_t *p);
/* Moves every started call across nodes on, once each, up to its next
 * wait for a peer: what each completion call does (and a blocking call's
 * waits, through core/fiber.h). Nothing from inside one, nor where har's
 * own thread moves them (under MPI_THREAD_MULTIPLE). */
HAR_HIDDEN void har_comm_progress(void);
/* Must the application's calls move started calls across nodes: do some
 * run, with no thread of har's to move them? (Two loads.) */
HAR_HIDDEN int har_comm_across_to_move(void);
/* Ends the thread that moves started calls, if one was made (MPI_Finalize,
 * once every call has ended; or the MPI's own finalize, bypassing har's
 * wrapper, before it ends the MPI). */
HAR_HIDDEN void har_comm_progress_stop(void);
/* Ends every call started on c (the state is about to go): waits without
 * driving the MPI. `in_free`: called from the MPI's attribute callback of
 * a free (MPI_Comm_free ended them before, unless the application's free
 * bypassed har's). */
HAR_HIDDEN void har_comm_end_open(har_comm_t *c, int in_free);
/* MPI_Comm_free of `comm`, before the MPI's: ends the calls started on it
 * across nodes, outside the MPI. */
HAR_HIDDEN void har_comm_end_before_free(MPI_Comm comm);

/* A non-blocking call on device buffers went to the MPI because no
 * blocking device call had set comm up (or no state exists yet): comm's
 * next blocking call, on one node, with a current CUDA context on every
 * local rank, sets it up for device buffers at its arrival. */
HAR_HIDDEN void har_comm_want_device(MPI_Comm comm);

/* Does this rank (`rank` of the communicator) have CUDA at call `no`:
 * device buffers, or a current context? (Cheap while the application has
 * not loaded libcuda.) */
HAR_HIDDEN int har_comm_wants_cuda(int rank, const har_call_t *call, uint64_t no);

#endif
