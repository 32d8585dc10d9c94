/* har binds the application's libcuda when the application loaded it
 * after har first looked (cuda/driver.h), and threads that ask at the same
 * moment all see it bound: one that answered "no CUDA" while another was
 * binding made har hand device pointers to an MPI that cannot take them
 * (a staged MPI_Iallreduce from 4 threads crashed in the MPI's reduction).
 * The CUDA Toolkit's driver stub stands in for libcuda: it has every entry
 * point, and har only binds them here. A binding lasts for the process, so
 * each round is a fresh child process. 77 (skipped) without the stub. */
#include <config.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda/driver.h"
#include "unit.h"

enum { ROUNDS = 100, THREADS = 8 };

static int go;

static void *ask(void *seen)
{
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) continue;
    *(int *)seen = har_cuda_loaded();
    return NULL;
}

/* One round, in a child: how many threads saw no CUDA (0 is right); -1:
 * the round could not be set up. */
static int round_in_child(const char *stub)
{
    if (har_cuda_loaded()) return -1;  /* nothing loaded libcuda yet */
    if (!dlopen(stub, RTLD_NOW | RTLD_GLOBAL)) return -1;
    pthread_t th[THREADS];
    int seen[THREADS], missed = 0;
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, ask, &seen[t]) != 0) return -1;
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        missed += !seen[t];
    }
    return missed;
}

int main(void)
{
#if defined(HAR_HAVE_CUDA) && defined(HAR_TEST_CUDA_STUB)
    const char *stub = HAR_TEST_CUDA_STUB;
    if (access(stub, R_OK) != 0) {
        printf("test_cuda_bind: no driver stub at %s; skipped\n", stub);
        return 77;
    }
    int rounds_missed = 0, setup_failed = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pid_t pid = fork();
        if (pid == 0) _exit(round_in_child(stub) & 0xff);
        int status = 0;
        waitpid(pid, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
        if (code == 255) setup_failed++;
        else if (code) rounds_missed++;
    }
    CHECK(setup_failed == 0, "%d of %d rounds could not load the stub or start threads", setup_failed, ROUNDS);
    CHECK(rounds_missed == 0, "in %d of %d rounds a thread saw no CUDA while another bound it", rounds_missed,
          ROUNDS);
    printf("test_cuda_bind: %s: %lu checks, %lu failed\n", failures ? "FAIL" : "ok", checks, failures);
    return failures ? 1 : 0;
#else
    printf("test_cuda_bind: built without the CUDA headers; skipped\n");
    return 77;
#endif
}
