/* Shared by the unit tests: a counting check and a seedable generator. */
#ifndef HAR_TEST_UNIT_H
#define HAR_TEST_UNIT_H

#include <stdint.h>
#include <stdio.h>

static unsigned long checks, failures;

/* Reports a failed condition; stops printing after a few, keeps counting. */
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        checks++;                                                            \
        if (!(cond)) {                                                       \
            if (failures++ < 20) {                                           \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);         \
                fprintf(stderr, __VA_ARGS__);                                \
                fputc('\n', stderr);                                         \
            }                                                                \
        }                                                                    \
    } while (0)

static uint64_t rng_state;

static __attribute__((unused)) uint64_t rng(void)  /* xorshift64*: reproducible from the printed seed */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

#endif
