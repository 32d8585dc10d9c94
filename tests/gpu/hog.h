/* tests/gpu/hog.cu: holds a fraction of the GPU's multiprocessors for some
 * seconds on a stream of its own, without waiting; the blocks launched, or
 * -1 on a CUDA error. */
#ifdef __cplusplus
extern "C"
#endif
int hog_start(double fraction, double seconds);
/* Queues on the legacy default stream a kernel that waits `seconds`, then
 * copies `bytes` from src to dst (device memory), without waiting for it:
 * an application's input still being written when it calls MPI. 0, or -1
 * on a CUDA error. */
#ifdef __cplusplus
extern "C"
#endif
int late_copy_start(void *dst, const void *src, unsigned long bytes, double seconds);
