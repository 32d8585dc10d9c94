/* An MPI program that knows nothing of har: built with plain mpicc, run with
 * and without har (LD_PRELOAD, relinked), it must print the same lines.
 * Values are small integers, also in the float and double cases, so every
 * sum is exact and its bits cannot depend on the order of reduction. It
 * also says whether libcuda got into the process: a program that never
 * touches CUDA must get no CUDA library (nor a context) from har. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int libcuda_mapped(void)
{
    char line[512];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f)) found |= strstr(line, "libcuda.so") != NULL;
    if (f) fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    const int counts[] = {1, 7, 1000, 65537, 300001};
    uint64_t check = 0;
    for (int c = 0; c < 5; c++) {
        int n = counts[c];
        int *iv = malloc(n * sizeof *iv);
        float *fv = malloc(n * sizeof *fv);
        double *dv = malloc(n * sizeof *dv);
        for (int i = 0; i < n; i++) {
            iv[i] = (i * 7 + rank * 13) % 101 - 50;
            fv[i] = (float)((i + rank) % 17);
            dv[i] = (double)((i * 3 + rank) % 29);
        }
        MPI_Allreduce(MPI_IN_PLACE, iv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, fv, n, MPI_FLOAT, MPI_MAX, dup);
        MPI_Allreduce(MPI_IN_PLACE, dv, n, MPI_DOUBLE, MPI_SUM, dup);
        for (int i = 0; i < n; i++)
            check = check * 1000003u + (uint64_t)(int64_t)iv[i] + (uint64_t)fv[i] * 7u + (uint64_t)dv[i] * 13u;
        free(iv); free(fv); free(dv);
    }
    if (rank == 0) printf("plain_app: %d ranks, checksum %016llx\n", size, (unsigned long long)check);
    printf("plain_app: rank %d: libcuda in the process: %s\n", rank, libcuda_mapped() ? "yes" : "no");
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}
