/* Fibers (fiber.h), with stacks of their own kept for reuse.
 *
 * On x86-64 a fiber switch saves the registers the calling convention
 * keeps (and the floating-point control words) on the stack it leaves and
 * takes up the other stack: a few nanoseconds. glibc's swapcontext also
 * saves and restores the signal mask, a system call each way (0.46 us a
 * resume and pause on the 2-core test machine): it serves the other
 * architectures. A fiber changes no signal mask, so nothing is lost. */
#define _GNU_SOURCE  /* MAP_STACK, MAP_NORESERVE */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/fiber.h"
#include "core/log.h"

#if defined(__x86_64__) && !defined(HAR_FIBER_UCONTEXT)
#define SWITCH_ASM 1
#else
#include <ucontext.h>
#endif

/* Room for the blocking path with CUDA and the MPI beneath it (a first
 * kernel launch loads its module); pages are touched only as used. */
#define STACK_BYTES (1u << 20)
/* Stacks kept for the next fibers: one per communicator with a started
 * call across nodes at a time is the common case. */
#define KEPT_STACKS 8

struct har_fiber {
#ifdef SWITCH_ASM
    void *sp, *caller_sp;       /* where each side's registers were saved */
#else
    ucontext_t ctx, caller;
#endif
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

#ifdef SWITCH_ASM
/* fiber_switch(&from, to): saves rbp, rbx, r12-r15, MXCSR and the x87
 * control word on the current stack, stores its pointer in *from, and
 * continues on the stack `to`, saved the same way (or made by
 * har_fiber_new), returning where that one called fiber_switch. */
void har_fiber_switch_asm(void **from, void *to) __attribute__((visibility("hidden")));
__asm__(".text\n"
        ".globl har_fiber_switch_asm\n"
        ".hidden har_fiber_switch_asm\n"
        ".type har_fiber_switch_asm, @function\n"
        "har_fiber_switch_asm:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $16, %rsp\n"
        "    stmxcsr 8(%rsp)\n"
        "    fnstcw 12(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr 8(%rsp)\n"
        "    fldcw 12(%rsp)\n"
        "    addq $16, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size har_fiber_switch_asm, .-har_fiber_switch_asm\n");
#endif

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

/* Where a fiber begins; it never returns (the switch back leaves it). */
static void fiber_main(void)
{
    har_fiber_t *f = current;
    f->fn(f->arg);
    f->done = 1;
#ifdef SWITCH_ASM
    har_fiber_switch_asm(&f->sp, f->caller_sp);
    abort();  /* a fiber that ended is never resumed */
#endif
}  /* ucontext: returns to uc_link, the caller of the last resume */

har_fiber_t *har_fiber_new(void (*fn)(void *arg), void *arg)
{
    har_fiber_t *f = calloc(1, sizeof *f);
    if (!f || !(f->stack = stack_get())) {
        free(f);
        har_log(HAR_LOG_ERROR, "no memory for a started call's stack");
        return NULL;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    f->fn = fn;
    f->arg = arg;
#ifdef SWITCH_ASM
    /* The first switch pops what the switch pushes, then returns into
     * fiber_main with the stack as after a call from an aligned frame. */
    uint64_t *top = (uint64_t *)(void *)(f->stack + page + STACK_BYTES);  /* 16-byte aligned */
    uint64_t *sp = top - 10;
    sp[0] = 0;
    sp[1] = (uint64_t)0x037f << 32 | 0x1f80;   /* 8(%rsp): MXCSR, 12(%rsp): x87 control word, their defaults */
    for (int r = 2; r < 8; r++) sp[r] = 0;      /* r15, r14, r13, r12, rbx, rbp */
    sp[8] = (uint64_t)(uintptr_t)fiber_main;    /* the return address */
    sp[9] = 0;                                  /* fiber_main's own, never used */
    f->sp = sp;
#else
    /* volatile: getcontext may return twice as far as GCC knows (this
     * context is only ever entered through makecontext's) */
    har_fiber_t *volatile g = f;
    if (getcontext(&g->ctx) != 0) {
        stack_put(g->stack);
        free(g);
        return NULL;
    }
    f = g;
    f->ctx.uc_stack.ss_sp = f->stack + page;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = &f->caller;
    makecontext(&f->ctx, fiber_main, 0);
#endif
    atomic_fetch_add(&waiting, 1);
    return f;
}

int har_fiber_resume(har_fiber_t *f)
{
    if (f->done) return 1;
    har_fiber_t *outer = current;
    current = f;
#ifdef SWITCH_ASM
    har_fiber_switch_asm(&f->caller_sp, f->sp);
#else
    swapcontext(&f->caller, &f->ctx);
#endif
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
        /* A long wait leaves the core to the peers first, as outside a
         * fiber (oversubscribed ranks wait for a slice of the scheduler
         * otherwise); not a sleep: the caller may be a test. */
        if (nap) sched_yield();
#ifdef SWITCH_ASM
        har_fiber_switch_asm(&f->sp, f->caller_sp);
#else
        swapcontext(&f->ctx, &f->caller);
#endif
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
