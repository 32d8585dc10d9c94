/* Every wait that involves peers, so that each is bounded the same way (a
 * dead local peer, HAR_TIMEOUT, a launcher that is gone, a failure
 * reported by another rank or node), and every failure, said once naming
 * the rank at fault by its rank in the communicator and in MPI_COMM_WORLD
 * and its host, and passed on to the other nodes (failure.c). Included by
 * node/node.h, after the node context. */
#ifndef HAR_FAILURE_H
#define HAR_FAILURE_H

typedef struct har_node har_node_t;

/* At MPI_Init: notes the launcher (the parent process), to tell later
 * whether it is gone. */
HAR_HIDDEN void har_node_init(void);

/* Waits for every local rank to finish the step this rank just finished. */
HAR_HIDDEN har_status_t har_node_wait_all(har_node_t *node, const char *step);
/* Waits for one local rank. */
HAR_HIDDEN har_status_t har_node_wait_one(har_node_t *node, int peer, const char *step);
/* While something else works (the GPU): the checks of a wait, once. */
HAR_HIDDEN har_status_t har_node_poll(har_node_t *node, double started, const char *step);
/* The same while an MPI exchange of the call in progress is waited for
 * other than by har_node_wait_partner: a local peer that left in order
 * after making the call is not taken for gone. */
HAR_HIDDEN har_status_t har_node_poll_exchange(har_node_t *node, double started, const char *step);
/* The same on one node, with no MPI call (a failure a local rank recorded,
 * dead or departed peers, the time-out): for a thread of har's own, which
 * may not call the MPI, nor read node->call, which the application's
 * thread writes: a failure found is recorded as call `call`'s. */
HAR_HIDDEN har_status_t har_node_poll_here(har_node_t *node, uint64_t call, double started, const char *step);
/* Waits for MPI requests (set-up exchanges, the ring, the inter-node step)
 * with the same bounds, but for a local peer that left in order after
 * making the call in progress (node->call): the MPI delivers what it sent
 * before it left. On failure the requests are left pending: the
 * communicator is failed for good, and nothing reuses their buffers. Where
 * the data come from one rank across nodes (`partner`, its place in
 * node->across, or -1), that rank is the one named if HAR_TIMEOUT ends the
 * wait. */
HAR_HIDDEN har_status_t har_node_wait_partner(har_node_t *node, int n, MPI_Request *reqs, int partner,
                                              const char *step);
/* The wait for one exchange just posted by a non-blocking collective
 * (`posted`: the posting call's return code); a post the MPI refused is
 * recorded as HAR_ERR_INTERNAL at `step`. */
HAR_HIDDEN har_status_t har_node_exchange(har_node_t *node, int posted, MPI_Request *req, const char *step);
/* A failure found by this rank: recorded for the local peers (the first
 * record wins) unless one is already. `culprit`: local rank at fault, or -1
 * for this rank itself. */
HAR_HIDDEN void har_node_fail(har_node_t *node, har_status_t st, int culprit, const char *step);
/* The same, recorded as the failure of call `call` rather than of the call
 * in progress (a started call ending, a difference found by a later call):
 * har_comm_fail tells by the number which call a failure is about. */
HAR_HIDDEN void har_node_fail_call(har_node_t *node, uint64_t call, har_status_t st, int culprit, const char *step);
/* Ranks whose calls differ (count, datatype, op, or which call they are
 * in) at this rank's call `no`, found by local rank `r0` with record `a0`
 * against local rank `r1` with `a1`: says so with both calls, fails the
 * node (as call no's failure) blaming local rank `culprit`, and returns
 * the class the MPI gives (HAR_ERR_TRUNCATE or HAR_ERR_OP). */
HAR_HIDDEN har_status_t har_node_calls_differ(har_node_t *node, uint64_t no, int r0, const har_arrival_t *a0, int r1,
                                              const har_arrival_t *a1, int culprit, const char *step);
/* While this rank's call `no`, gone ahead of the arrival, waits on the GPU:
 * the first local rank that has posted its record for the call (comm/call.c)
 * and whose call differs, reported as above at `step`; HAR_OK if none. A
 * rank that went ahead into other kernels than this rank's (another size)
 * never meets them there: only its record tells. */
HAR_HIDDEN har_status_t har_node_records_differ(har_node_t *node, uint64_t no, const char *step);
/* The same for a rank named by its ranks in the communicator and in
 * MPI_COMM_WORLD (-1: unknown) and its host ("?": unknown), such as a rank
 * on another node. */
HAR_HIDDEN void har_node_blame(har_node_t *node, har_status_t st, int rank, int world_rank, const char *host,
                               const char *step);
/* Has a failure been recorded (here or by a local peer)? */
HAR_HIDDEN int har_node_failed(const har_node_t *node);
/* The recorded failure, or NULL. */
HAR_HIDDEN const har_failure_t *har_node_record(const har_node_t *node);
/* Lets go of the segment in order (MPI_Comm_free, MPI_Finalize) after
 * `calls` calls: a peer that still waits for this rank in a later call
 * says it left, with the last failure this process reported on another
 * communicator, if any. */
HAR_HIDDEN void har_node_leave(har_node_t *node, uint64_t calls);
/* The same across nodes: says "bye" to the death watch's neighbours, with
 * the `calls` this rank made on the communicator and that failure. */
HAR_HIDDEN void har_node_say_bye(har_node_t *node, uint64_t calls);
/* Lets go of the segment (a set-up that failed or was declined) as
 * har_node_leave does, as having made the call in progress, keeping its
 * failure record, if any, for the report. */
HAR_HIDDEN void har_node_drop_segment(har_node_t *node);
/* Says, once, why the communicator failed (from the node's record), and
 * tells the other nodes. */
HAR_HIDDEN void har_node_report(har_node_t *node);
/* Posts the receive of failure notices (set-up, several nodes). */
HAR_HIDDEN void har_node_listen(har_node_t *node);
/* Once the segment is mapped: its waits hear notices too. */
HAR_HIDDEN void har_node_attached(har_node_t *node);
/* Agreement over the node communicator: 1 on every local rank if `ok` is 1
 * on all. Otherwise the lowest local rank where it failed says why in one
 * warning (`quiet`: at debug level), "<what>: <why>; <consequence>". */
HAR_HIDDEN int har_node_agree(har_node_t *node, int ok, int quiet, const char *what, const char *why,
                              const char *consequence);

#endif
