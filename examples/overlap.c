/*
 * overlap.c - data-parallel training whose gradient buckets are all-reduced
 * with MPI_Iallreduce while the backward pass goes on, beside the same
 * training with a blocking MPI_Allreduce per bucket.
 *
 * Every rank holds a copy of a deep MLP (tanh layers of width 256) and its
 * own shard of a synthetic regression task. The backward pass runs from the
 * last layer to the first; as soon as a layer's gradient (its weights and
 * bias, one bucket) is computed it is all-reduced:
 *   - blocking:     MPI_Allreduce on the bucket, then the next layer;
 *   - non-blocking: MPI_Iallreduce on the bucket, then the next layer's
 *                   backward while the call runs; MPI_Waitall before the
 *                   update, as data-parallel frameworks do.
 * Both modes train from the same start for the same steps; each prints its
 * median step time, and the ratio.
 *
 * Checks (rank 0 prints "CHECK ok" or "CHECK FAILED" for each, per mode):
 *   - the first step's all-reduced gradient of the first layer equals the
 *     sum of every rank's gradient gathered with MPI_Gather (float sums in
 *     any order: within 1e-5 of the sum of magnitudes);
 *   - every rank ends with bitwise-identical parameters;
 *   - the loss over the shards has fallen.
 * Every rank returns 1 if any check fails.
 *
 * Build: mpicc -O2 -o overlap overlap.c -lm
 * With -DOVERLAP_CUDA (link with -lcudart) the buckets live in device
 * memory, where a CUDA-aware MPI, or har in front of any MPI, reduces them.
 * The copies into and out of the buckets go on a stream of their own that
 * does not synchronise with the legacy default stream: work queued there
 * after a non-blocking all-reduce may wait for it (it does under har), and
 * the next bucket's copy must not.
 *
 * Run:   mpirun -np 4 ./overlap [--steps N] [--mode both|blocking|nonblocking]
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#ifdef OVERLAP_CUDA
#include <cuda_runtime.h>
#define CUDA_CHECK(call)                                                                       \
    do {                                                                                       \
        cudaError_t err_ = (call);                                                             \
        if (err_ != cudaSuccess) {                                                             \
            fprintf(stderr, "overlap: %s: %s\n", #call, cudaGetErrorString(err_));             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)
#endif

#define N_IN 64         /* inputs */
#define WIDTH 256       /* units per hidden layer */
#define LAYERS 6        /* hidden layers; the output layer adds one more bucket */
#define BATCH 32        /* samples per rank per step */
#define SAMPLES 512     /* samples per rank's shard */
#define RATE 0.1f
#define DEFAULT_STEPS 30

typedef struct {
    int in, out;        /* weights out x in, then out biases: one bucket */
    float *param;       /* (out * in + out) */
    float *grad;        /* host gradient of the same shape */
    float *bucket;      /* where it is all-reduced: device memory with OVERLAP_CUDA */
} layer_t;

static layer_t layers[LAYERS + 1];       /* the last: the output layer (1 unit, linear) */
static float shard_x[SAMPLES][N_IN], shard_y[SAMPLES];
static float act[LAYERS + 2][BATCH][WIDTH];   /* activations; act[0] holds the inputs */
static float delta[BATCH][WIDTH], delta_prev[BATCH][WIDTH];
static int rank, nranks;
#ifdef OVERLAP_CUDA
static cudaStream_t copies;
#endif

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31, x *= 0x7fb5d329728ea185ull, x ^= x >> 27, x *= 0x81dadef4bc2dd44dull, x ^= x >> 33;
    return x;
}
static float uniform(uint64_t *s) { return (float)((mix(++*s) >> 40) * (1.0 / (1ull << 24))) * 2.0f - 1.0f; }

static size_t bucket_len(const layer_t *l) { return (size_t)l->out * l->in + (size_t)l->out; }

/* Copies a layer's gradient into its bucket (in) or back (!in). */
static void bucket_copy(layer_t *l, int in)
{
    void *dst = in ? (void *)l->bucket : (void *)l->grad;
    const void *src = in ? (const void *)l->grad : (const void *)l->bucket;
    size_t bytes = bucket_len(l) * sizeof(float);
#ifdef OVERLAP_CUDA
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, in ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, copies));
    CUDA_CHECK(cudaStreamSynchronize(copies));
#else
    memcpy(dst, src, bytes);
#endif
}

/* The same start on every rank and in both modes; a shard of its own per
 * rank, labelled by a fixed random "teacher" function. */
static void init_model(void)
{
    uint64_t s = 42;
    for (int k = 0; k <= LAYERS; k++) {
        layer_t *l = &layers[k];
        float scale = 1.0f / sqrtf((float)l->in);
        for (size_t i = 0; i < bucket_len(l); i++) l->param[i] = i < (size_t)l->out * l->in ? scale * uniform(&s) : 0.0f;
    }
}

static void make_shard(void)
{
    uint64_t s = 1000 + (uint64_t)rank;
    for (int n = 0; n < SAMPLES; n++) {
        float y = 0;
        for (int i = 0; i < N_IN; i++) {
            shard_x[n][i] = uniform(&s);
            y += sinf(1.7f * shard_x[n][i] * (float)(i % 7 + 1)) / N_IN;
        }
        shard_y[n] = y * 4.0f;
    }
}

/* Forward over a batch starting at sample `first`; the batch's loss. */
static double forward(int first)
{
    double loss = 0;
    for (int b = 0; b < BATCH; b++) memcpy(act[0][b], shard_x[(first + b) % SAMPLES], sizeof shard_x[0]);
    for (int k = 0; k <= LAYERS; k++) {
        const layer_t *l = &layers[k];
        for (int b = 0; b < BATCH; b++)
            for (int o = 0; o < l->out; o++) {
                const float *w = l->param + (size_t)o * l->in;
                float z = l->param[(size_t)l->out * l->in + o];
                for (int i = 0; i < l->in; i++) z += w[i] * act[k][b][i];
                act[k + 1][b][o] = k < LAYERS ? tanhf(z) : z;
            }
    }
    for (int b = 0; b < BATCH; b++) {
        double e = act[LAYERS + 1][b][0] - shard_y[(first + b) % SAMPLES];
        loss += e * e / BATCH;
    }
    return loss;
}

/* Layer k's backward: its gradient from delta (dLoss/dz of its outputs),
 * and delta_prev for the layer below. */
static void backward_layer(int k)
{
    layer_t *l = &layers[k];
    float *gw = l->grad, *gb = l->grad + (size_t)l->out * l->in;
    memset(l->grad, 0, bucket_len(l) * sizeof(float));
    for (int b = 0; b < BATCH; b++)
        for (int o = 0; o < l->out; o++) {
            float d = delta[b][o];
            gb[o] += d;
            for (int i = 0; i < l->in; i++) gw[(size_t)o * l->in + i] += d * act[k][b][i];
        }
    if (k == 0) return;
    for (int b = 0; b < BATCH; b++)
        for (int i = 0; i < l->in; i++) {
            float s = 0;
            for (int o = 0; o < l->out; o++) s += l->param[(size_t)o * l->in + i] * delta[b][o];
            delta_prev[b][i] = s * (1.0f - act[k][b][i] * act[k][b][i]);  /* through the tanh below */
        }
    memcpy(delta, delta_prev, sizeof delta);
}

/* One step: forward, backward with each bucket all-reduced as soon as it
 * is ready, update. `first_grad` (the first step): a copy of the first
 * layer's local gradient, for the check. The step's loss. */
static double step(int s, int nonblocking, MPI_Comm comm, float *first_grad)
{
    MPI_Request reqs[LAYERS + 1];
    double loss = forward(s * BATCH);
    for (int b = 0; b < BATCH; b++)
        delta[b][0] = 2.0f * (act[LAYERS + 1][b][0] - shard_y[(s * BATCH + b) % SAMPLES]) / BATCH;
    for (int k = LAYERS; k >= 0; k--) {
        backward_layer(k);
        if (k == 0 && first_grad) memcpy(first_grad, layers[0].grad, bucket_len(&layers[0]) * sizeof(float));
        bucket_copy(&layers[k], 1);
        int n = (int)bucket_len(&layers[k]);
        if (nonblocking) MPI_Iallreduce(MPI_IN_PLACE, layers[k].bucket, n, MPI_FLOAT, MPI_SUM, comm, &reqs[k]);
        else MPI_Allreduce(MPI_IN_PLACE, layers[k].bucket, n, MPI_FLOAT, MPI_SUM, comm);
    }
    if (nonblocking) MPI_Waitall(LAYERS + 1, reqs, MPI_STATUSES_IGNORE);
    for (int k = 0; k <= LAYERS; k++) {
        layer_t *l = &layers[k];
        bucket_copy(l, 0);
        for (size_t i = 0; i < bucket_len(l); i++) l->param[i] -= RATE * l->grad[i] / (float)nranks;
    }
    return loss;
}

/* The loss over every rank's whole shard. */
static double shard_loss(void)
{
    double sum = 0;
    for (int first = 0; first < SAMPLES; first += BATCH) sum += forward(first) * BATCH;
    sum /= SAMPLES;
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / nranks;
}

static int check(const char *what, int ok, const char *mode)
{
    int all = ok;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) printf("overlap: %s: CHECK %s: %s\n", mode, all ? "ok" : "FAILED", what);
    return all;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Trains `steps` steps in one mode from the start; its median step time
 * (the slowest rank's) in *ms; whether its checks passed. */
static int train(int steps, int nonblocking, MPI_Comm comm, double *ms)
{
    const char *mode = nonblocking ? "non-blocking" : "blocking";
    size_t n0 = bucket_len(&layers[0]);
    float *first = malloc(n0 * sizeof(float)), *gathered = rank == 0 ? malloc((size_t)nranks * n0 * sizeof(float)) : NULL;
    double *times = malloc((size_t)steps * sizeof(double));
    init_model();
    double before = shard_loss();
    int ok = 1;
    for (int s = 0; s < steps; s++) {
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        step(s, nonblocking, comm, s == 0 ? first : NULL);
        times[s] = MPI_Wtime() - t0;
        if (s == 0) {
            /* the all-reduced sum stays in layers[0].grad (the update
             * reads it divided, without changing it): against a sum of
             * the gathered local gradients */
            MPI_Gather(first, (int)n0, MPI_FLOAT, gathered, (int)n0, MPI_FLOAT, 0, MPI_COMM_WORLD);
            int good = 1;
            for (size_t i = 0; rank == 0 && i < n0; i++) {
                double sum = 0, mag = 0;
                for (int r = 0; r < nranks; r++) {
                    sum += gathered[(size_t)r * n0 + i];
                    mag += fabs(gathered[(size_t)r * n0 + i]);
                }
                if (fabs(layers[0].grad[i] - sum) > 1e-5 * mag + 1e-30) good = 0;
            }
            ok &= check("the first layer's all-reduced gradient is the sum of every rank's", good, mode);
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, times, steps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(times, (size_t)steps, sizeof(double), cmp_double);
    *ms = times[steps / 2] * 1e3;
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k <= LAYERS; k++)
        for (size_t i = 0; i < bucket_len(&layers[k]); i++) {
            uint32_t bits;
            memcpy(&bits, &layers[k].param[i], sizeof bits);
            h = (h ^ bits) * 1099511628211ull;
        }
    uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    ok &= check("every rank's parameters are bitwise identical", lo == hi, mode);
    double after = shard_loss();
    char what[96];
    snprintf(what, sizeof what, "the loss fell from %.4f to %.4f", before, after);
    ok &= check(what, after < before, mode);
    free(first);
    free(gathered);
    free(times);
    return ok;
}

int main(int argc, char **argv)
{
    int steps = DEFAULT_STEPS, modes = 3;  /* bit 0: blocking, bit 1: non-blocking */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc && (steps = atoi(argv[++i])) >= 1) continue;
        if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
            const char *m = argv[++i];
            modes = !strcmp(m, "blocking") ? 1 : !strcmp(m, "nonblocking") ? 2 : !strcmp(m, "both") ? 3 : 0;
            if (modes) continue;
        }
        if (rank == 0) fprintf(stderr, "usage: overlap [--steps N] [--mode both|blocking|nonblocking]\n");
        MPI_Finalize();
        return 2;
    }
#ifdef OVERLAP_CUDA
    MPI_Comm node;
    int local, ndev;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    CUDA_CHECK(cudaSetDevice(local % ndev));
    CUDA_CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
#endif
    for (int k = 0; k <= LAYERS; k++) {
        layer_t *l = &layers[k];
        l->in = k == 0 ? N_IN : WIDTH;
        l->out = k == LAYERS ? 1 : WIDTH;
        l->param = malloc(bucket_len(l) * sizeof(float));
        l->grad = malloc(bucket_len(l) * sizeof(float));
#ifdef OVERLAP_CUDA
        CUDA_CHECK(cudaMalloc((void **)&l->bucket, bucket_len(l) * sizeof(float)));
#else
        l->bucket = malloc(bucket_len(l) * sizeof(float));
#endif
    }
    make_shard();
    /* The gradients' own communicator, as frameworks keep one; the
     * blocking mode's first call sets har up on it for device buffers. */
    MPI_Comm grads;
    MPI_Comm_dup(MPI_COMM_WORLD, &grads);
    double ms[2] = {0, 0};
    int ok = 1;
    for (int nb = 0; nb < 2; nb++)
        if (modes & (1 << nb)) ok &= train(steps, nb, grads, &ms[nb]);
    if (rank == 0) {
        printf("overlap: %d ranks, %d steps, %d buckets of up to %zu KiB (%s)\n", nranks, steps, LAYERS + 1,
               bucket_len(&layers[1]) * sizeof(float) / 1024,
#ifdef OVERLAP_CUDA
               "device memory"
#else
               "host memory"
#endif
        );
        if (modes & 1) printf("overlap: blocking MPI_Allreduce per bucket: median step %.3f ms\n", ms[0]);
        if (modes & 2) printf("overlap: MPI_Iallreduce per bucket during the backward pass: median step %.3f ms\n", ms[1]);
        if (modes == 3) printf("overlap: non-blocking / blocking step time: %.3f\n", ms[1] / ms[0]);
    }
    MPI_Comm_free(&grads);
    for (int k = 0; k <= LAYERS; k++) {
        free(layers[k].param);
        free(layers[k].grad);
#ifdef OVERLAP_CUDA
        cudaFree(layers[k].bucket);
#else
        free(layers[k].bucket);
#endif
    }
#ifdef OVERLAP_CUDA
    cudaStreamDestroy(copies);
#endif
    MPI_Finalize();
    return ok ? 0 : 1;
}
