// Times har's IPC kernels for two "ranks" inside one process on one GPU:
// both ranks' kernels run at once on two streams of one context, their
// slots and flag areas in the same GPU memory, so the barriers and the
// reads of the peer's slot run as on two GPUs, with local memory's latency
// in place of NVLink's. For comparing two versions of ipc_kernels.cu side by
// side where no second GPU is lent; not part of the suite.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -Isrc -o kp tests/gpu/kernel_pair.cu src/engines/ipc_kernels.cu
//   ./kp            prints: bytes one_shot|two_shot us per call (200 calls back
//                   to back, median of 7 such runs)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "engines/ipc_kernels.h"

#define CHECK(x)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

int main()
{
    const size_t max_bytes = 16 << 20, slot_bytes = 32 << 20;
    char *seg[2], *in[2], *out[2];
    cudaStream_t s[2];
    int *abort_flag;
    CHECK(cudaMalloc(&abort_flag, sizeof(int)));
    CHECK(cudaMemset(abort_flag, 0, sizeof(int)));
    for (int r = 0; r < 2; r++) {
        CHECK(cudaMalloc(&seg[r], HAR_DEV_FLAG_BYTES + 2 * slot_bytes));
        CHECK(cudaMemset(seg[r], 0, HAR_DEV_FLAG_BYTES));
        CHECK(cudaMalloc(&in[r], max_bytes));
        CHECK(cudaMalloc(&out[r], max_bytes));
        std::vector<float> h(max_bytes / 4, (float)(r + 1));
        CHECK(cudaMemcpy(in[r], h.data(), max_bytes, cudaMemcpyHostToDevice));
        CHECK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
    }
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    const int CALLS = 200;
    uint64_t epoch = 0;
    unsigned seq = 0;
    cudaEvent_t done1;
    CHECK(cudaEventCreate(&done1));
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 2) {
        int one_shot = bytes <= (256 << 10);
        std::vector<float> times;
        for (int rep = 0; rep < 7; rep++) {
            // Calls back to back, as har queues a call's chunks: the slot
            // parity alternates, and the barriers keep the ranks in step.
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaEventRecord(t0, s[0]));
            CHECK(cudaStreamWaitEvent(s[1], t0, 0));
            for (int it = 0; it < CALLS; it++) {
                har_engine_dev_args_t a[2];
                unsigned parity = seq++ & 1;
                for (int r = 0; r < 2; r++) {
                    memset(&a[r], 0, sizeof a[r]);
                    a[r].nranks = 2;
                    a[r].me = r;
                    a[r].elem = 4;
                    a[r].n = bytes / 4;
                    a[r].dtype = HAR_DT_F32;
                    a[r].op = HAR_OP_SUM;
                    a[r].one_shot = one_shot;
                    a[r].phase = HAR_DEV_WHOLE;
                    a[r].aligned = 1;
                    a[r].in = in[r];
                    a[r].out = out[r];
                    a[r].epoch = epoch;
                    a[r].abort = abort_flag;
                    for (int p = 0; p < 2; p++) {
                        a[r].flags[p] = seg[p];
                        a[r].slot[p] = seg[p] + HAR_DEV_FLAG_BYTES + parity * slot_bytes;
                    }
                }
                epoch += 2;
                int blocks = har_engine_dev_blocks(bytes, HAR_DEV_MAX_BLOCKS);
                CHECK((cudaError_t)har_engine_dev_launch(&a[0], blocks, s[0]));
                CHECK((cudaError_t)har_engine_dev_launch(&a[1], blocks, s[1]));
            }
            CHECK(cudaEventRecord(done1, s[1]));
            CHECK(cudaStreamWaitEvent(s[0], done1, 0));
            CHECK(cudaEventRecord(t1, s[0]));
            CHECK(cudaEventSynchronize(t1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, t0, t1));
            times.push_back(ms * 1000 / CALLS);
        }
        // The result: every element 1 + 2 = 3, on both ranks.
        for (int r = 0; r < 2; r++) {
            float first, last;
            CHECK(cudaMemcpy(&first, out[r], 4, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(&last, out[r] + bytes - 4, 4, cudaMemcpyDeviceToHost));
            if (first != 3.0f || last != 3.0f) {
                fprintf(stderr, "wrong result at %zu bytes on rank %d: %g %g\n", bytes, r, first, last);
                return 1;
            }
        }
        std::sort(times.begin(), times.end());
        printf("%zu %s %.2f\n", bytes, one_shot ? "one_shot" : "two_shot", times[times.size() / 2]);
    }
    return 0;
}
