/* Fibers (fiber.h) on ucontext, with stacks of their own kept for reuse. */
#define _GNU_SOURCE  /* MAP_STACK, MAP_NORESERVE */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include "core/fiber.h"
#include "core/log.h"

/* Room for the blocking path with CUDA and the MPI beneath it (a first
 * kernel launch loads its module); pages are touched only as used. */
#define STACK_BYTES (1u << 20)
/* Stacks kept for the next fibers: one per communicator with a started
 * call across nodes at a time is the common case. */
#define KEPT_STACKS 8

struct har_fiber {
    ucontext_t ctx, caller;
    void (*fn)(void *arg);
    void *arg;
    char *stack;                /* its lowest page is the guard */
    int done;
};

static __thread har_fiber_t *current;
static char *kept[KEPT_STACKS];
static int nkept;
static atomic_int waiting;      /* fibers not yet returned: the pause outside one runs them */
static void (*progress_fn)(void);
static __thread int progressing;

static char *stack_get(void)
{
    if (nkept > 0) return kept[--nkept];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *s = mmap(NULL, STACK_BYTES + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK |
                   MAP_NORESERVE, -1, 0);
    if (s == MAP_FAILED) return NULL;
    if (mprotect(s, page, PROT_NONE) != 0) {  /* an overflow faults instead of writing the heap */
        munmap(s, STACK_BYTES + page);
        return NULL;
    }
    return s;
}

static void stack_put(char *s)
{
    if (nkept < KEPT_STACKS) kept[nkept++] = s;
    else munmap(s, STACK_BYTES + (size_t)sysconf(_SC_PAGESIZE));
}

static void trampoline(void)
{
    har_fiber_t *f = current;
    f->fn(f->arg);
    f->done = 1;
}  /* returns to uc_link: the caller of the last resume */

har_fiber_t *har_fiber_new(void (*fn)(void *arg), void *arg)
{
    /* volatile: getcontext may return twice as far as GCC knows (this
     * context is only ever entered through makecontext's) */
    har_fiber_t *volatile f = calloc(1, sizeof *f);
    if (!f || !(f->stack = stack_get()) || getcontext(&f->ctx) != 0) {
        if (f && f->stack) stack_put(f->stack);
        free(f);
        har_log(HAR_LOG_ERROR, "no memory for a started call's stack");
        return NULL;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    f->fn = fn;
    f->arg = arg;
    f->ctx.uc_stack.ss_sp = f->stack + page;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = &f->caller;
    makecontext(&f->ctx, trampoline, 0);
    atomic_fetch_add(&waiting, 1);
    return f;
}

int har_fiber_resume(har_fiber_t *f)
{
    if (f->done) return 1;
    har_fiber_t *outer = current;
    current = f;
    swapcontext(&f->caller, &f->ctx);
    current = outer;
    if (f->done) atomic_fetch_sub(&waiting, 1);
    return f->done;
}

void har_fiber_free(har_fiber_t *f)
{
    if (!f) return;
    stack_put(f->stack);
    free(f);
}

int har_fiber_inside(void) { return current != NULL; }

void har_fiber_pause(const struct timespec *nap)
{
    har_fiber_t *f = current;
    if (f) {
        swapcontext(&f->ctx, &f->caller);
        return;
    }
    if (atomic_load_explicit(&waiting, memory_order_relaxed) > 0 && progress_fn && !progressing) {
        progressing = 1;
        progress_fn();
        progressing = 0;
    }
    if (nap) nanosleep(nap, NULL);
    else sched_yield();
}

void har_fiber_set_progress(void (*progress)(void)) { progress_fn = progress; }
