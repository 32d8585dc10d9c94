/* The cudaStream_t in an MPIX_Stream's info (har_info_hex_decode), as
 * MPICH writes it with MPIX_Info_set_hex: two hexadecimal digits a byte,
 * first byte first, and "[N]" for a run of N zero bytes where the MPICH
 * shortens them (5.0.2 writes the legacy default stream, eight zero bytes,
 * as "[8]", and 0x1234abcd as "CDAB3412[4]"). No MPI run. */
#include <stdint.h>
#include <string.h>
#include "entry/streams.h"
#include "unit.h"

int main(void)
{
    uint64_t v = 77;
    CHECK(har_info_hex_decode("[8]", &v, 8) == 0 && v == 0, "[8]: %llx", (unsigned long long)v);
    CHECK(har_info_hex_decode("CDAB3412[4]", &v, 8) == 0 && v == 0x1234abcdull, "CDAB3412[4]: %llx",
          (unsigned long long)v);
    CHECK(har_info_hex_decode("cdab341200000000", &v, 8) == 0 && v == 0x1234abcdull, "plain hex, lower case: %llx",
          (unsigned long long)v);
    CHECK(har_info_hex_decode("02[7]", &v, 8) == 0 && v == 2, "cudaStreamPerThread (2): %llx", (unsigned long long)v);
    CHECK(har_info_hex_decode("[2]01[5]", &v, 8) == 0 && v == 0x10000ull, "a zero run first: %llx",
          (unsigned long long)v);
    /* Not a value of that size: refused, whatever it left in v. */
    const char *bad[] = {"", "[7]", "[9]", "CDAB3412", "CDAB3412[4]00", "XYZ", "0", "[8", "[]", "[x]", "CDAB341[4]",
                         "[18446744073709551615]", "not hex"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(har_info_hex_decode(bad[i], &v, 8) == -1, "\"%s\" taken for 8 bytes", bad[i]);
    printf("test_info_hex: %s: %lu checks, %lu failed\n", failures ? "FAIL" : "ok", checks, failures);
    return failures != 0;
}
