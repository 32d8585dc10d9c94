/* Random keys and SipHash-2-4 (secret.h), written from the algorithm's
 * description by Aumasson and Bernstein (2012): four 64-bit words of state
 * keyed by the two key halves, two rounds per 8-byte word of the message,
 * the length in the last word's top byte, four rounds to finish. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include "core/secret.h"

int har_random(void *out, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = getrandom((char *)out + got, len - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    return 0;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void rounds(uint64_t v[4], int n)
{
    while (n--) {
        v[0] += v[1]; v[1] = ROTL(v[1], 13); v[1] ^= v[0]; v[0] = ROTL(v[0], 32);
        v[2] += v[3]; v[3] = ROTL(v[3], 16); v[3] ^= v[2];
        v[0] += v[3]; v[3] = ROTL(v[3], 21); v[3] ^= v[0];
        v[2] += v[1]; v[1] = ROTL(v[1], 17); v[1] ^= v[2]; v[2] = ROTL(v[2], 32);
    }
}

uint64_t har_secret_tag(const har_secret_t *key, const void *msg, size_t len)
{
    const uint8_t *m = msg;
    uint64_t k0 = le64(key->b), k1 = le64(key->b + 8);
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
                     k1 ^ 0x7465646279746573ull};
    size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t w = le64(m + i);
        v[3] ^= w;
        rounds(v, 2);
        v[0] ^= w;
    }
    uint8_t last[8] = {0};
    memcpy(last, m + whole, len - whole);
    last[7] = (uint8_t)len;
    uint64_t w = le64(last);
    v[3] ^= w;
    rounds(v, 2);
    v[0] ^= w;
    v[2] ^= 0xff;
    rounds(v, 4);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

int har_secret_equal(const void *a, const void *b, size_t len)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < len; i++) diff |= x[i] ^ y[i];
    return diff == 0;
}
