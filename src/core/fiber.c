/* Fibers (fiber.h), with stacks of their own kept for reuse.
 *
 * On x86-64 a fiber switch saves the registers the calling convention
 * keeps (and the floating-point control words) on the stack it leaves and
 * takes up the other stack: a few nanoseconds. glibc's swapcontext also
 * saves and restores the signal mask, a system call each way (0.46 us a
 * resume and pause on the 2-core test machine): it serves the other
 * architectures, and x86-64 processes that run with a shadow stack (CET),
 * which a switch by hand would break and glibc's keeps. A fiber changes
 * no signal mask, so nothing is lost. */
#define _GNU_SOURCE  /* MAP_STACK, MAP_NORESERVE */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include "core/fiber.h"
#include "core/log.h"

#if defined(__x86_64__) && !defined(HAR_FIBER_UCONTEXT)
#define SWITCH_ASM 1
#endif

/* Room for the blocking path with CUDA and the MPI beneath it (a first
 * kernel launch loads its module); pages are touched only as used. */
#define STACK_BYTES (1u << 20)
/* Stacks kept for the next fibers: one per communicator with a started
 * call across nodes at a time is the common case. */
#define KEPT_STACKS 8

struct har_fiber {
    void *sp, *caller_sp;       /* by hand: where each side's registers were saved */
    ucontext_t ctx, caller;     /* else glibc's */
    void (*fn)(void *arg);
    void *arg;
    char *stack;                /* its lowest page is the guard */
    int done;
    int waits_long;             /* its last pause was a long wait's (one given a nap) */
};

static __thread har_fiber_t *current;
static char *kept[KEPT_STACKS];
static int nkept;
static void (*progress_fn)(void);
static int by_hand;             /* the switch by hand serves this process (set at the first fiber) */

#ifdef SWITCH_ASM
/* fiber_switch(&from, to): saves rbp, rbx, r12-r15, MXCSR and the x87
 * control word on the current stack, stores its pointer in *from, and
 * continues on the stack `to`, saved the same way (or made by
 * har_fiber_new), returning where that one called fiber_switch. */
void har_fiber_switch_asm(void **from, void *to) __attribute__((visibility("hidden")));
__asm__(".pushsection .text\n"  /* and back to whatever section the compiler was in */
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
        ".size har_fiber_switch_asm, .-har_fiber_switch_asm\n"
        ".popsection\n");
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

/* Where a fiber begins; by hand it never returns (the switch back leaves
 * it), under ucontext it returns to uc_link, the caller of the last
 * resume. */
static void fiber_main(void)
{
    har_fiber_t *f = current;
    f->fn(f->arg);
    f->done = 1;
#ifdef SWITCH_ASM
    if (by_hand) {
        har_fiber_switch_asm(&f->sp, f->caller_sp);
        abort();  /* a fiber that ended is never resumed */
    }
#endif
}

#ifdef SWITCH_ASM
/* Does this process run with a shadow stack? Its pointer reads 0
 * without one (the instruction is a no-op where CET is off or absent). */
static int shadow_stack(void)
{
    unsigned long long ssp = 0;
    __asm__ volatile("rdsspq %0" : "+r"(ssp));
    return ssp != 0;
}

/* A new fiber's stack, as if it had called the switch: the creator's
 * control words, zeros for the kept registers, and fiber_main to return
 * into with the stack as after a call from an aligned frame. */
static void *first_frame(char *top)
{
    uint64_t *sp = (uint64_t *)(void *)top - 10;  /* top: 16-byte aligned */
    uint32_t mxcsr;
    uint16_t x87;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(x87));
    sp[0] = 0;
    sp[1] = (uint64_t)x87 << 32 | mxcsr;        /* 8(%rsp): MXCSR, 12(%rsp): x87 control word */
    for (int r = 2; r < 8; r++) sp[r] = 0;      /* r15, r14, r13, r12, rbx, rbp */
    sp[8] = (uint64_t)(uintptr_t)fiber_main;    /* the return address */
    sp[9] = 0;                                  /* fiber_main's own, never used */
    return sp;
}

static void decide(void) { by_hand = !shadow_stack(); }
#endif

har_fiber_t *har_fiber_new(void (*fn)(void *arg), void *arg)
{
#ifdef SWITCH_ASM
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, decide);
#endif
    /* volatile: getcontext may return twice as far as GCC knows (this
     * context is only ever entered through makecontext's) */
    har_fiber_t *volatile f = calloc(1, sizeof *f);
    if (!f || !(f->stack = stack_get())) {
        free(f);
        har_log(HAR_LOG_ERROR, "no memory for a started call's stack");
        return NULL;
    }
    char *base = f->stack + (size_t)sysconf(_SC_PAGESIZE);
    f->fn = fn;
    f->arg = arg;
#ifdef SWITCH_ASM
    if (by_hand) f->sp = first_frame(base + STACK_BYTES);
#endif
    if (!by_hand) {
        if (getcontext(&f->ctx) != 0) {
            stack_put(f->stack);
            free(f);
            return NULL;
        }
        f->ctx.uc_stack.ss_sp = base;
        f->ctx.uc_stack.ss_size = STACK_BYTES;
        f->ctx.uc_link = &f->caller;
        makecontext(&f->ctx, fiber_main, 0);
    }
    return f;
}

/* Switches from `from`'s side to `to`'s: the resumer into the fiber, or back. */
static void switch_to(har_fiber_t *f, int into)
{
#ifdef SWITCH_ASM
    if (by_hand) {
        if (into) har_fiber_switch_asm(&f->caller_sp, f->sp);
        else har_fiber_switch_asm(&f->sp, f->caller_sp);
        return;
    }
#endif
    if (into) swapcontext(&f->caller, &f->ctx);
    else swapcontext(&f->ctx, &f->caller);
}

int har_fiber_resume(har_fiber_t *f)
{
    if (f->done) return 1;
    har_fiber_t *outer = current;
    current = f;
    switch_to(f, 1);
    current = outer;
    return f->done;
}

void har_fiber_free(har_fiber_t *f)
{
    if (!f) return;
    stack_put(f->stack);
    free(f);
}

int har_fiber_inside(void) { return current != NULL; }

int har_fiber_waits_long(const har_fiber_t *f) { return f->waits_long; }

void har_fiber_pause(const struct timespec *nap)
{
    har_fiber_t *f = current;
    if (f) {
        /* A long wait leaves the core to the peers first, as outside a
         * fiber (oversubscribed ranks wait for a slice of the scheduler
         * otherwise); not a sleep: the caller may be a test. */
        if (nap) sched_yield();
        f->waits_long = nap != NULL;
        switch_to(f, 0);
        return;
    }
    if (progress_fn) progress_fn();  /* it returns at once where no fiber waits, or a pass is under way */
    if (nap) nanosleep(nap, NULL);
    else sched_yield();
}

void har_fiber_set_progress(void (*progress)(void)) { progress_fn = progress; }
