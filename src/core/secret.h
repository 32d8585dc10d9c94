/* Secrets that only the processes of one job know: random keys agreed over
 * the job's own communicators, and a keyed hash that proves a process
 * knows a key without sending the key (the death watch's handshake across
 * nodes, where a stranger may be the one listening). */
#ifndef HAR_SECRET_H
#define HAR_SECRET_H

#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

#define HAR_SECRET_BYTES 16

typedef struct {
    uint8_t b[HAR_SECRET_BYTES];
} har_secret_t;

/* Fills `out` with `len` bytes from the kernel's random source: 0, or -1
 * (errno) when it cannot (then nothing that needs a secret is offered). */
HAR_HIDDEN int har_random(void *out, size_t len);
/* SipHash-2-4 of msg under `key`: a 64-bit tag that only a holder of the
 * key can make, and that tells nothing of the key. */
HAR_HIDDEN uint64_t har_secret_tag(const har_secret_t *key, const void *msg, size_t len);
/* Compares in a time that does not depend on where they differ: 1 if equal. */
HAR_HIDDEN int har_secret_equal(const void *a, const void *b, size_t len);

#endif
