/* Ranks that call MPI_Allreduce with different arguments: rank 0 makes the
 * usual call, the other ranks (or only the last, with --last) a different
 * one. Every rank must get the class the MPI gives for it (MPI_ERR_TRUNCATE
 * for another count or datatype, MPI_ERR_OP for another op) through the
 * error handler, no wrong data, and no hang; the communicator fails for good
 * after it, and another communicator still works.
 *   mismatch count|type|op [--last | --from R] [--count N] [--started] [--enqueue]
 * --from R: the ranks from R on make the different call (with pretend
 * nodes, whole nodes: only the step between nodes can find it).
 * --started: the differing call is an MPI_Iallreduce, and every rank makes
 * a blocking call on the same communicator (another buffer) before
 * waiting for it: the started call must still end, with its class.
 * --enqueue (mismatch_gpu only): the differing call is queued by
 * har_allreduce_enqueue on a stream of the application's, which must
 * drain; the next call on the communicator (50 ms later: the watch thread
 * looks every 100 us) fails with the class.
 * Built with HAR_TEST_CUDA (mismatch_gpu), the buffers are device memory
 * and a first device call, alike on every rank, sets the kernels up, so
 * that the differing call is the device path's to find. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#ifdef HAR_TEST_CUDA
#include <cuda_runtime.h>
#include "har.h"
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, n = 10, last = 0, from = 1, started = 0, enqueue = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *what = argc > 1 ? argv[1] : "count";
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "--last")) last = 1;
        else if (!strcmp(argv[a], "--from") && a + 1 < argc) from = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--count") && a + 1 < argc) n = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--started")) started = 1;
        else if (!strcmp(argv[a], "--enqueue")) enqueue = 1;
    }
#ifndef HAR_TEST_CUDA
    if (enqueue) {
        fprintf(stderr, "mismatch: --enqueue takes device buffers: run mismatch_gpu\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#endif
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    static double host_buf[2 * 100000];
    double *buf = host_buf;
    int one = 1;
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, comm);  /* sets up har's state */
#ifdef HAR_TEST_CUDA
    if (cudaMalloc((void **)&buf, sizeof host_buf) != cudaSuccess || cudaMemset(buf, 0, sizeof host_buf) != cudaSuccess) {
        fprintf(stderr, "mismatch: no device memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < 2; i++)  /* the node learns of CUDA, then sets the device engines up, alike */
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT, MPI_SUM, comm);
#endif
    int odd = last ? rank == size - 1 : rank >= from;
    int count = n;
    MPI_Datatype type = MPI_INT;
    MPI_Op op = MPI_SUM;
    if (odd && !strcmp(what, "count")) count = 2 * n;
    if (odd && !strcmp(what, "type")) type = MPI_DOUBLE;
    if (odd && !strcmp(what, "op")) op = MPI_MAX;
    int want = !strcmp(what, "op") ? MPI_ERR_OP : MPI_ERR_TRUNCATE;
    int rc, cls = -1;
    if (started) {
        /* A started call's failure comes through the handler the MPI gives
         * generalized requests (MPI_COMM_WORLD's under Open MPI,
         * MPI_COMM_SELF's in MPI 4): docs/CALLS.md. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        MPI_Request req;
        rc = MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, op, comm, &req);
        if (rc == MPI_SUCCESS) {
            MPI_Allreduce(MPI_IN_PLACE, buf + 100000, n, MPI_INT, MPI_SUM, comm);  /* its result is not looked at */
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
#ifdef HAR_TEST_CUDA
    } else if (enqueue) {
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        rc = har_allreduce_enqueue(MPI_IN_PLACE, buf, count, type, op, comm, stream);
        cudaError_t drained = cudaStreamSynchronize(stream);
        printf("mismatch: rank %d: queued: %s, its stream: %s\n", rank, rc == MPI_SUCCESS ? "yes" : "REFUSED",
               cudaGetErrorName(drained));
        cudaStreamDestroy(stream);
        /* The failure comes with the next call once har's watch thread
         * has seen the kernels' record: it looks every 100 us. */
        usleep(50000);
        if (rc == MPI_SUCCESS)
            rc = MPI_Allreduce(MPI_IN_PLACE, buf + 100000, n, MPI_INT, MPI_SUM, comm);
#endif
    } else {
        rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, type, op, comm);
    }
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    /* The communicator stays failed; another one works. */
    int later = MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, comm);
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    int v = 1, fine = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, other) == MPI_SUCCESS && v == size;
    int ok = cls == want && later != MPI_SUCCESS && fine;
    printf("mismatch: rank %d: %s: class %d (want %d), later call %s, other communicator %s: %s\n", rank, what, cls,
           want, later != MPI_SUCCESS ? "failed" : "SUCCEEDED", fine ? "fine" : "BROKEN", ok ? "as expected" : "WRONG");
    MPI_Comm_free(&other);
    MPI_Comm_free(&comm);
#ifdef HAR_TEST_CUDA
    cudaFree(buf);
#endif
    MPI_Finalize();
    return ok ? 0 : 1;
}
