/* The node agrees that it has CUDA in the middle of a run: with
 * HAR_TEST_CUDA_AT=RANK:CALL (test build) one rank acts as if it found a
 * CUDA context at call CALL, and from call CALL+1 every call on every local
 * rank starts with an arrival step. Each call's node synchronisation steps
 * show which calls had one: a size handed to the MPI makes none before and
 * one after, a one-shot call one throughout (the arrival carries its input),
 * a two-shot call two throughout. A rank that switched at another call than
 * its peers would hang or mix data; every result is checked exactly.
 *   arrival CALL    (the CALL of HAR_TEST_CUDA_AT; -1: never) */
#include <stdio.h>
#include <stdlib.h>
#include "har.h"

unsigned long long har_test_steps(void);  /* the test build of libhar */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    long from = argc > 1 ? atol(argv[1]) : -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    static int v[5000];
    static const char *const choice[3] = {"mpi", "host_segment+one_shot", "host_segment+two_shot"};
    for (int i = 0; i < 60; i++) {
        int kind = (i * 7) % 3, n = kind == 2 ? 5000 : 100;  /* a mix, the same on every rank */
        int after = from >= 0 && i > from;
        unsigned long long want = kind == 0 ? (unsigned long long)after : (unsigned long long)kind;
        for (int k = 0; k < n; k++) v[k] = k + rank * i;
        har_set_algo(choice[kind]);
        unsigned long long steps = har_test_steps();
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, comm);
        steps = har_test_steps() - steps;
        har_set_algo("auto");
        int wrong = 0;
        for (int k = 0; k < n; k++) wrong += v[k] != k * size + i * size * (size - 1) / 2;
        if (steps != want || wrong) {
            printf("arrival: rank %d call %d (%s): %llu steps, want %llu; %d wrong elements\n", rank, i, choice[kind],
                   steps, want, wrong);
            bad++;
        }
    }
    int any = 0;
    MPI_Reduce(&bad, &any, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("arrival: %d ranks, switch after call %ld: %d bad calls\n", size, from, any);
    MPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return any != 0;
}
