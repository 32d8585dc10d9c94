/* tests/gpu/enqueue_kernels.cu: an application's kernels around
 * har_allreduce_enqueue. Each returns 0 or a cudaError_t. */
#ifdef __cplusplus
extern "C" {
#endif
enum { ENQ_INT, ENQ_LONG, ENQ_FLOAT, ENQ_DOUBLE };
enum { ENQ_SUM, ENQ_MAX, ENQ_MIN };
/* Writes rank `rank`'s input of call `tag` (n elements of `type`) on `stream`. */
int enq_fill(void *buf, int n, int type, int rank, int tag, void *stream);
/* Counts into *bad (device memory) the elements of `out` that differ from
 * the reduction by `op` of every rank's input of call `tag`. */
int enq_verify(const void *out, int n, int type, int op, int nranks, int tag, unsigned long long *bad, void *stream);
/* The same reference and input on the host (for buffers in host memory). */
long long enq_expected(long long i, int type, int op, int nranks, int tag);
long long enq_input(long long i, int rank, int tag);
/* A kernel of one thread that waits `seconds`: the GPU busy with the
 * application's work. */
int enq_spin(double seconds, void *stream);
#ifdef __cplusplus
}
#endif
