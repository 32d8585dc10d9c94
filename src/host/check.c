/* HAR_CHECK's checksums (check.h). */
#include <string.h>
#include "host/check.h"

static inline uint64_t mix(uint64_t z)  /* splitmix64's finaliser */
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t har_host_checksum(const void *p, size_t bytes, size_t at)
{
    const unsigned char *b = p;
    uint64_t sum = 0, word, index = at / 8;
    size_t whole = bytes / 8;
    for (size_t i = 0; i < whole; i++, index++) {
        memcpy(&word, b + 8 * i, 8);
        sum += mix(word ^ index * 0x9e3779b97f4a7c15ull);
    }
    if (bytes % 8) {
        word = 0;
        memcpy(&word, b + 8 * whole, bytes % 8);
        sum += mix(word ^ index * 0x9e3779b97f4a7c15ull);
    }
    return sum;
}
