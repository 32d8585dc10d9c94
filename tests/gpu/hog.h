/* tests/gpu/hog.cu: holds a fraction of the GPU's multiprocessors for some
 * seconds on a stream of its own, without waiting; the blocks launched, or
 * -1 on a CUDA error. */
#ifdef __cplusplus
extern "C"
#endif
int hog_start(double fraction, double seconds);
