/* The launch thread: a thread of har's that runs, in the order they were
 * handed to it, the pieces of work a started call leaves behind (the
 * launch of its kernels), so that MPI_Iallreduce and MPI_Start return to
 * the application before them (DESIGN.md note 71).
 *
 * Handing off pays only while the thread is awake: it spins (yielding the
 * core) for a while after its last piece, then sleeps, and waking it takes
 * the scheduler tens of microseconds, longer than the launch it would
 * save. So har_launcher_run runs the piece in the caller's thread whenever
 * the thread is asleep (and wakes it for the next one), and whenever the
 * caller says the piece may not be handed off.
 *
 * Order: whatever runs in the caller's thread runs after every piece
 * handed off before it (har_launcher_run and har_launcher_drain wait for
 * them), so all pieces run in the order of the calls. One caller at a
 * time: the MPI's own thread levels serialise har's calls wherever a
 * started call goes to the kernels (never under MPI_THREAD_MULTIPLE). */
#ifndef HAR_LAUNCHER_H
#define HAR_LAUNCHER_H

#include <pthread.h>
#include "core/common.h"

typedef void (*har_launch_fn_t)(void *arg);

/* Runs fn(arg): handed to the thread where `may_hand` and the thread is
 * awake (made on first need where HAR_LAUNCH_THREAD allows), else here
 * after every piece handed off before. 1 if handed off. */
HAR_HIDDEN int har_launcher_run(har_launch_fn_t fn, void *arg, int may_hand);
/* Returns once every piece handed off has run. */
HAR_HIDDEN void har_launcher_drain(void);
/* Drains and ends the thread (MPI_Finalize). A later har_launcher_run
 * runs in the caller's thread. */
HAR_HIDDEN void har_launcher_stop(void);
/* Does HAR_LAUNCH_THREAD let har hand launches off in this process? auto:
 * where it may run on two cores at least (sched_getaffinity), since a
 * thread that spins beside the application's on one core delays both. */
HAR_HIDDEN int har_launcher_allowed(void);

/* A thread of har's: every signal blocked but the faults a thread raises
 * itself, so the application's handlers run on its own threads and a
 * crash of har's thread reaches its crash handlers. 0 or an errno. */
HAR_HIDDEN int har_thread_create(pthread_t *id, void *(*main)(void *), void *arg);

#endif
