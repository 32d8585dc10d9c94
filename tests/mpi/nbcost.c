/* What har costs a host-buffer MPI_Iallreduce + MPI_Wait: 8 bytes, in
 * alternating blocks through MPI_Iallreduce/MPI_Wait (har's, when it is
 * preloaded or linked) and PMPI_Iallreduce/PMPI_Wait (the MPI's alone) in
 * the same run; prints the median time per call of each and their ratio.
 * Not a test: a probe of that cost. nbcost [BLOCKS [CALLS_PER_BLOCK]] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int blocks = argc > 1 ? atoi(argv[1]) : 401, calls = argc > 2 ? atoi(argv[2]) : 200, rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double *t[2] = {malloc(blocks * sizeof(double)), malloc(blocks * sizeof(double))};
    double in = rank, out;
    MPI_Request req;
    for (int b = -2; b < blocks; b++)  /* two warm-up blocks */
        for (int k = 0; k < 2; k++) {
            int way = (b + k) % 2;  /* alternate which goes first */
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < calls; i++) {
                if (way) {
                    MPI_Iallreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                } else {
                    PMPI_Iallreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
                    PMPI_Wait(&req, MPI_STATUS_IGNORE);
                }
            }
            double dt = (MPI_Wtime() - t0) / calls, worst;
            PMPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (b >= 0) t[way][b] = worst;
        }
    qsort(t[0], blocks, sizeof(double), cmp);
    qsort(t[1], blocks, sizeof(double), cmp);
    /* medians, and the 10th percentiles (the machine may be shared) */
    int m = blocks / 2, p = blocks / 10;
    if (rank == 0)
        printf("nbcost: 8-byte MPI_Iallreduce+MPI_Wait, %d blocks of %d calls: median MPI alone %.3f us, "
               "through MPI_ names %.3f us, ratio %.3f; 10th percentile %.3f us, %.3f us, ratio %.3f\n",
               blocks, calls, t[0][m] * 1e6, t[1][m] * 1e6, t[1][m] / t[0][m], t[0][p] * 1e6, t[1][p] * 1e6,
               t[1][p] / t[0][p]);
    MPI_Finalize();
    return 0;
}
