/* Fibers: har's blocking steps run as a started call, without a thread.
 *
 * A started call across nodes (MPI_Iallreduce, MPI_Start) needs the host
 * at every step: the node's arrival, the ring's messages between nodes,
 * the copies beside the kernels. Written as a state machine, every step
 * of the blocking path would exist twice. Instead the started call runs
 * the blocking path itself on a stack of its own (a fiber, ucontext),
 * and every wait of that path that finds its peers not there yet gives
 * the thread back (har_fiber_pause) instead of spinning: the post
 * returns at the first such wait, and each completion call resumes the
 * fiber for one pass, up to its next wait. No thread is made, so the MPI
 * is called only from the application's threads, at the thread level it
 * asked for: under MPI_THREAD_SERIALIZED whichever thread calls. Under
 * MPI_THREAD_MULTIPLE one thread of har's makes every pass instead
 * (comm/call.c), the only one that resumes the fibers it made.
 *
 * Outside a fiber the same pause lets the fibers run once (the progress
 * function set below) before it yields the core: a blocking call of har's
 * moves the started calls on meanwhile, as the MPI's progress rule asks
 * (a peer may wait on one of them to reach the blocking call). */
#ifndef HAR_FIBER_H
#define HAR_FIBER_H

#include <time.h>
#include "core/common.h"

typedef struct har_fiber har_fiber_t;

/* A fiber that will run fn(arg) at its first resume; NULL when no memory
 * or stack can be had. */
HAR_HIDDEN har_fiber_t *har_fiber_new(void (*fn)(void *arg), void *arg);
/* Runs f until it pauses or returns: 1 once fn has returned (f may then
 * be freed), 0 while it waits. Not from inside a fiber. */
HAR_HIDDEN int har_fiber_resume(har_fiber_t *f);
/* Frees a fiber whose fn returned (its stack is kept for the next). */
HAR_HIDDEN void har_fiber_free(har_fiber_t *f);
/* Is the caller running in a fiber? */
HAR_HIDDEN int har_fiber_inside(void);
/* Did f's last pause come from a long wait (one that gave a nap)? A
 * thread that only resumes fibers may then sleep instead. */
HAR_HIDDEN int har_fiber_waits_long(const har_fiber_t *f);
/* How many passes a wait in a fiber makes before it looks for dead peers
 * and time-outs (slower than a test) and before it yields the core to its
 * peers at each pass, as a wait outside one does after its spins. */
#define HAR_FIBER_PASSES 16

/* A wait's turn to let others run: in a fiber, back to whoever resumed
 * it (after a yield of the core where `nap` is given: a long wait);
 * outside, the fibers run once (if any wait), then the core goes to the
 * peers: `nap` slept where given, else a yield. */
HAR_HIDDEN void har_fiber_pause(const struct timespec *nap);
/* What runs the waiting fibers once (comm/call.c's har_comm_progress,
 * which returns at once where none waits or a pass is under way): the
 * pause outside a fiber calls it. */
HAR_HIDDEN void har_fiber_set_progress(void (*progress)(void));

#endif
