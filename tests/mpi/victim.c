/* A rank dies at a chosen moment (the test build's HAR_TEST_KILL) while all
 * ranks make all-reduces on a communicator with MPI_ERRORS_RETURN. Every
 * survivor must get an error (not hang), print it, and end; later calls on
 * the communicator fail too.
 *   victim [CALLS]   (default 8: sizes one-shot and two-shot, in turn)
 * VICTIM_NONBLOCKING=1: every call after the first (blocking: it sets the
 * communicator up) is an MPI_Iallreduce completed by MPI_Wait.
 * VICTIM_THREADS=1: MPI_THREAD_MULTIPLE (across nodes har's own thread
 * then moves those calls). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>

/* Open MPI's TCP transport leaves SIGPIPE at its default: a write to the
 * socket of a rank that died can end this one. Say so before it does. */
static char pipe_line[64];
static void on_sigpipe(int sig)
{
    ssize_t unused = write(STDOUT_FILENO, pipe_line, strlen(pipe_line));
    (void)unused;
    signal(sig, SIG_DFL);
    raise(sig);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, getenv("VICTIM_THREADS") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    int rank, size, calls = argc > 1 ? atoi(argv[1]) : 8;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (getenv("VICTIM_THREADS") && provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "victim: rank %d: VICTIM_THREADS, but the MPI does not provide MPI_THREAD_MULTIPLE\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(pipe_line, sizeof pipe_line, "victim: rank %d: ended by SIGPIPE\n", rank);
    signal(SIGPIPE, on_sigpipe);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* A generalized request's error goes to MPI_COMM_WORLD's handler
     * under Open MPI */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int nonblocking = getenv("VICTIM_NONBLOCKING") != NULL;
    static float v[300000];
    double t0 = now();
    int failed_at = -1, code = MPI_SUCCESS;
    for (int c = 0; c < calls; c++) {
        int n = c % 2 ? 300000 : 100;
        for (int i = 0; i < n; i++) v[i] = 1.0f;
        int rc;
        if (nonblocking && c > 0) {
            MPI_Request req;
            rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, comm, &req);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, comm);
        }
        if (rc != MPI_SUCCESS && failed_at < 0) {
            failed_at = c;
            code = rc;
        } else if (rc == MPI_SUCCESS && v[n - 1] != (float)size) {
            printf("victim: rank %d: call %d: WRONG result %g\n", rank, c, v[n - 1]);
        }
    }
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (code != MPI_SUCCESS) MPI_Error_string(code, msg, &len);
    printf("victim: rank %d: %s at call %d after %.2f s: %s\n", rank, failed_at >= 0 ? "failed" : "no failure",
           failed_at, now() - t0, msg);
    fflush(stdout);
    MPI_Comm_free(&comm);
    if (getenv("VICTIM_SLEEP")) usleep((useconds_t)atoi(getenv("VICTIM_SLEEP")));
    MPI_Finalize();
    printf("victim: rank %d: finalized\n", rank);
    return 0;
}
