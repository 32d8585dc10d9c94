/* MPI_Allreduce on device buffers through har: float and int sums, odd
 * counts, MPI_IN_PLACE, checked against a host reference, with the path
 * asserted (--expect PATH). Exit 77 (skipped) without a GPU, unless
 * HAR_TEST_REQUIRE_GPU=1 makes that a failure. */
#include <cuda_runtime.h>
#include <math.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "har.h"

#define CHECK_CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

int main(int argc, char **argv)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        const char *req = getenv("HAR_TEST_REQUIRE_GPU");
        fprintf(stderr, "device_allreduce: no GPU visible%s\n", req && atoi(req) ? " (required)" : "; skipped");
        return req && atoi(req) ? 1 : 77;
    }
    MPI_Init(&argc, &argv);
    int rank, size, local;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    CHECK_CUDA(cudaSetDevice(local % ndev));
    int expect = argc > 2 && !strcmp(argv[1], "--expect") ? har_path_from_name(argv[2]) : -1;
    const int counts[] = {1, 7, 63, 1000, 65537, 1000003};
    int fail = 0;
    for (int k = 0; k < 6; k++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int n = counts[k];
            size_t fb = (size_t)n * sizeof(float), ib = (size_t)n * sizeof(int);
            float *hf = malloc(fb), *of = malloc(fb);
            int *hi = malloc(ib), *oi = malloc(ib);
            for (int i = 0; i < n; i++) {
                hf[i] = (float)((i * 31 + rank * 7) % 1000) / 7.0f;
                hi[i] = (i * 13 + rank) % 100000 - 50000;
            }
            float *df, *dfo;
            int *di, *dio;
            CHECK_CUDA(cudaMalloc((void **)&df, fb));
            CHECK_CUDA(cudaMalloc((void **)&dfo, fb));
            CHECK_CUDA(cudaMalloc((void **)&di, ib));
            CHECK_CUDA(cudaMalloc((void **)&dio, ib));
            CHECK_CUDA(cudaMemcpy(inplace ? dfo : df, hf, fb, cudaMemcpyHostToDevice));
            CHECK_CUDA(cudaMemcpy(inplace ? dio : di, hi, ib, cudaMemcpyHostToDevice));
            unsigned long long before[HAR_PATH_COUNT], after[HAR_PATH_COUNT];
            har_counters(before);
            MPI_Allreduce(inplace ? MPI_IN_PLACE : df, dfo, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(inplace ? MPI_IN_PLACE : di, dio, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            har_counters(after);
            CHECK_CUDA(cudaMemcpy(of, dfo, fb, cudaMemcpyDeviceToHost));
            CHECK_CUDA(cudaMemcpy(oi, dio, ib, cudaMemcpyDeviceToHost));
            int bad = 0;
            for (int i = 0; i < n; i++) {
                double ref = 0, mag = 0;
                long iref = 0;
                for (int r = 0; r < size; r++) {
                    double x = (float)((i * 31 + r * 7) % 1000) / 7.0f;
                    ref += x; mag += fabs(x);
                    iref += (i * 13 + r) % 100000 - 50000;
                }
                bad += fabs(of[i] - ref) > 2.0 * size * FLT_EPSILON * mag || oi[i] != (int)iref;
            }
            int path_ok = expect < 0 || after[expect] >= before[expect] + 2;
            if (bad || !path_ok) {
                fprintf(stderr, "device_allreduce: rank %d count %d%s: %d wrong, path %s %s\n", rank, n,
                        inplace ? " in-place" : "", bad, expect >= 0 ? har_path_name(expect) : "-",
                        path_ok ? "ok" : "NOT TAKEN");
                fail = 1;
            }
            cudaFree(df); cudaFree(dfo); cudaFree(di); cudaFree(dio);
            free(hf); free(of); free(hi); free(oi);
        }
    int any;
    MPI_Reduce(&fail, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("device_allreduce: %d ranks, %d GPUs visible to rank 0, %s\n", size, ndev, any ? "FAILED" : "all results right");
    MPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return any;
}
