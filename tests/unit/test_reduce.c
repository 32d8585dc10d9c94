/* Unit test of the typed reductions (src/host/reduce.c) against a reference
 * written here independently.
 *
 * har_host_reduce_lookup must serve exactly the (type, op) pairs the MPI standard
 * allows among the types har handles, and decline everything else (the call
 * then goes to the MPI, which knows the rest). Every function it returns is
 * run on odd lengths, extreme values and guarded buffers. Integers wrap like
 * unsigned arithmetic of their width; a float operation on two operands is
 * exactly rounded, so both are compared bit for bit.
 *
 * Uses MPI handle constants only: no MPI call, no MPI_Init.
 * Usage: test_reduce [SEED]. Exit 0 on success, 1 on failure. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "host/reduce.h"

typedef enum { K_SIGNED, K_UNSIGNED, K_FLOAT, K_DOUBLE, K_BOOL, K_BYTE, K_OTHER } kind_t;
typedef struct { MPI_Datatype type; const char *name; size_t size; kind_t kind; } type_case_t;

typedef enum { SUM, PROD, MIN, MAX, LAND, LOR, LXOR, BAND, BOR, BXOR, MAXLOC, MINLOC } op_id_t;
typedef struct { MPI_Op op; const char *name; op_id_t id; } op_case_t;

/* The MPI standard's groups: arithmetic on C integers and floating point,
 * logical on C integers and C_BOOL, bitwise on C integers and BYTE. MAXLOC
 * and MINLOC need pair types, and K_OTHER types are ones har leaves to MPI. */
static int allowed(kind_t k, op_id_t op)
{
    int integer = k == K_SIGNED || k == K_UNSIGNED;
    switch (op) {
    case SUM: case PROD: case MIN: case MAX: return integer || k == K_FLOAT || k == K_DOUBLE;
    case LAND: case LOR: case LXOR: return integer || k == K_BOOL;
    case BAND: case BOR: case BXOR: return integer || k == K_BYTE;
    default: return 0;
    }
}

#include "unit.h"

/* ---- integers: every width handled as a 64-bit pattern ------------------ */

/* Element i, sign- or zero-extended to 64 bits. */
static uint64_t load_int(const void *buf, size_t i, size_t size, int is_signed)
{
    const unsigned char *p = (const unsigned char *)buf + i * size;
    uint8_t v8; uint16_t v16; uint32_t v32; uint64_t v64;
    switch (size) {
    case 1: memcpy(&v8, p, 1); return is_signed ? (uint64_t)(int64_t)(int8_t)v8 : v8;
    case 2: memcpy(&v16, p, 2); return is_signed ? (uint64_t)(int64_t)(int16_t)v16 : v16;
    case 4: memcpy(&v32, p, 4); return is_signed ? (uint64_t)(int64_t)(int32_t)v32 : v32;
    default: memcpy(&v64, p, 8); return v64;
    }
}

/* Stores the low `size` bytes of v: the wrap-around of the element's width. */
static void store_int(void *buf, size_t i, size_t size, uint64_t v)
{
    unsigned char *p = (unsigned char *)buf + i * size;
    uint8_t v8 = (uint8_t)v; uint16_t v16 = (uint16_t)v; uint32_t v32 = (uint32_t)v;
    switch (size) {
    case 1: memcpy(p, &v8, 1); break;
    case 2: memcpy(p, &v16, 2); break;
    case 4: memcpy(p, &v32, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

/* Low bits of a 64-bit sum or product are those of any narrower width, for
 * signed and unsigned alike (two's complement). */
static uint64_t ref_int(op_id_t op, uint64_t a, uint64_t b, int is_signed)
{
    int less = is_signed ? (int64_t)a < (int64_t)b : a < b;
    switch (op) {
    case SUM: return a + b;
    case PROD: return a * b;
    case MIN: return less ? a : b;
    case MAX: return less ? b : a;
    case LAND: return a != 0 && b != 0;
    case LOR: return a != 0 || b != 0;
    case LXOR: return (a != 0) != (b != 0);
    case BAND: return a & b;
    case BOR: return a | b;
    case BXOR: return a ^ b;
    default: return 0;
    }
}

/* ---- floating point: the same single operation, in the same type --------- */

#define REF_REAL(name, T)                                                    \
    static T name(op_id_t op, T a, T b)                                      \
    {                                                                        \
        switch (op) {                                                        \
        case SUM: return a + b;                                              \
        case PROD: return a * b;                                             \
        case MIN: return a < b ? a : b;                                      \
        default: return a < b ? b : a;                                       \
        }                                                                    \
    }
REF_REAL(ref_float, float)
REF_REAL(ref_double, double)

/* Sums and products bit for bit (NaN from inf - inf matches any NaN); a
 * minimum or maximum of equal values (0 and -0) may be either. */
#define SAME_REAL(name, T)                                                   \
    static int name(op_id_t op, T got, T want)                               \
    {                                                                        \
        if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);     \
        if (op == MIN || op == MAX) return got == want;                      \
        return memcmp(&got, &want, sizeof got) == 0;                         \
    }
SAME_REAL(same_float, float)
SAME_REAL(same_double, double)

/* ---- inputs -------------------------------------------------------------- */

/* Values at the edges of each width: limits, -1, and the ones whose sums and
 * products overflow. Pairs of them fill the start of every long input. */
#define NEDGE 13
static void int_edges(size_t size, uint64_t out[NEDGE])
{
    unsigned bits = (unsigned)size * 8;
    uint64_t top = 1ull << (bits - 1), half = 1ull << (bits / 2);
    uint64_t v[NEDGE] = {0, 1, 2, 3, ~0ull, ~0ull - 1, top, top - 1, top + 1, half, half - 1, half + 1, 0x5a};
    memcpy(out, v, sizeof v);
}
static const float float_edges[NEDGE] = {0.0f, -0.0f, 1.0f, -1.0f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                                         FLT_TRUE_MIN, INFINITY, -INFINITY, 1.0f + FLT_EPSILON, 0.1f};
static const double double_edges[NEDGE] = {0.0, -0.0, 1.0, -1.0, DBL_MAX, -DBL_MAX, DBL_MIN, -DBL_MIN,
                                           DBL_TRUE_MIN, INFINITY, -INFINITY, 1.0 + DBL_EPSILON, 0.1};

/* Random floating-point bits, with no NaN (MIN and MAX of NaN are not defined). */
static float random_float(void)
{
    for (;;) {
        uint32_t u = (uint32_t)rng();
        float f;
        if (rng() & 1) u = (u & 0x807fffffu) | (uint32_t)(120 + rng() % 16) << 23;  /* nearby exponents: rounding */
        memcpy(&f, &u, sizeof f);
        if (!isnan(f)) return f;
    }
}
static double random_double(void)
{
    for (;;) {
        uint64_t u = rng();
        double d;
        if (rng() & 1) u = (u & 0x800fffffffffffffull) | (uint64_t)(1015 + rng() % 16) << 52;
        memcpy(&d, &u, sizeof d);
        if (!isnan(d)) return d;
    }
}

/* Element i of one operand: `side` 0 is inout, 1 is in. The first NEDGE^2
 * elements pair every edge value with every other; the rest are random,
 * with edges mixed in. */
static void fill(const type_case_t *t, void *buf, size_t n, int side)
{
    uint64_t edges[NEDGE];
    int_edges(t->size, edges);
    for (size_t i = 0; i < n; i++) {
        size_t e = i < NEDGE * NEDGE ? (side ? i % NEDGE : i / NEDGE) : rng() % (4 * NEDGE);
        int edge = e < NEDGE;
        switch (t->kind) {
        case K_FLOAT: {
            float f = edge ? float_edges[e] : random_float();
            memcpy((char *)buf + i * 4, &f, 4);
            break;
        }
        case K_DOUBLE: {
            double d = edge ? double_edges[e] : random_double();
            memcpy((char *)buf + i * 8, &d, 8);
            break;
        }
        case K_BOOL: {
            bool b = edge ? e & 1 : rng() & 1;  /* only 0 and 1 are bool values */
            memcpy((char *)buf + i * sizeof b, &b, sizeof b);
            break;
        }
        default:
            store_int(buf, i, t->size, edge ? edges[e] : rng());
            break;
        }
    }
}

/* ---- one function on one length ------------------------------------------- */

#define GUARD 16  /* elements before and after the n the function may touch */

static void check_run(const type_case_t *t, const op_case_t *o, har_reduce_fn fn, size_t n)
{
    size_t sz = t->size, total = (n + 2 * GUARD) * sz;
    unsigned char *a = malloc(total), *b = malloc(total), *a0 = malloc(total), *b0 = malloc(total);
    if (!a || !b || !a0 || !b0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t k = 0; k < total; k++) a[k] = b[k] = (unsigned char)rng();
    fill(t, a + GUARD * sz, n, 0);
    fill(t, b + GUARD * sz, n, 1);
    memcpy(a0, a, total);
    memcpy(b0, b, total);

    fn(a + GUARD * sz, b + GUARD * sz, n);

    const unsigned char *in0 = a0 + GUARD * sz, *in1 = b0 + GUARD * sz, *got = a + GUARD * sz;
    unsigned long before = failures;
    for (size_t i = 0; i < n && failures == before; i++) {
        int ok;
        if (t->kind == K_FLOAT) {
            float x, y, r;
            memcpy(&x, in0 + i * 4, 4); memcpy(&y, in1 + i * 4, 4); memcpy(&r, got + i * 4, 4);
            ok = same_float(o->id, r, ref_float(o->id, x, y));
        } else if (t->kind == K_DOUBLE) {
            double x, y, r;
            memcpy(&x, in0 + i * 8, 8); memcpy(&y, in1 + i * 8, 8); memcpy(&r, got + i * 8, 8);
            ok = same_double(o->id, r, ref_double(o->id, x, y));
        } else {
            int is_signed = t->kind == K_SIGNED;
            unsigned char want[8];
            store_int(want, 0, sz, ref_int(o->id, load_int(in0, i, sz, is_signed), load_int(in1, i, sz, is_signed),
                                            is_signed));
            ok = memcmp(got + i * sz, want, sz) == 0;
        }
        uint64_t x = 0, y = 0, r = 0;  /* raw bits, for the message */
        memcpy(&x, in0 + i * sz, sz); memcpy(&y, in1 + i * sz, sz); memcpy(&r, got + i * sz, sz);
        CHECK(ok, "%s %s n=%zu element %zu: 0x%" PRIx64 " op 0x%" PRIx64 " gave 0x%" PRIx64,
              t->name, o->name, n, i, x, y, r);
    }
    CHECK(memcmp(a, a0, GUARD * sz) == 0 && memcmp(a + (GUARD + n) * sz, a0 + (GUARD + n) * sz, GUARD * sz) == 0,
          "%s %s n=%zu: wrote outside the n elements of inout", t->name, o->name, n);
    CHECK(memcmp(b, b0, total) == 0, "%s %s n=%zu: changed the input operand", t->name, o->name, n);
    free(a); free(b); free(a0); free(b0);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    rng_state = seed ? seed : 1;

    /* Built at run time: some MPIs' handles are addresses, not constants. */
    const type_case_t types[] = {
        {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", sizeof(signed char), K_SIGNED},
        {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", sizeof(unsigned char), K_UNSIGNED},
        {MPI_SHORT, "MPI_SHORT", sizeof(short), K_SIGNED},
        {MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", sizeof(unsigned short), K_UNSIGNED},
        {MPI_INT, "MPI_INT", sizeof(int), K_SIGNED},
        {MPI_UNSIGNED, "MPI_UNSIGNED", sizeof(unsigned), K_UNSIGNED},
        {MPI_LONG, "MPI_LONG", sizeof(long), K_SIGNED},
        {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", sizeof(unsigned long), K_UNSIGNED},
        {MPI_LONG_LONG, "MPI_LONG_LONG", sizeof(long long), K_SIGNED},
        {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", sizeof(unsigned long long), K_UNSIGNED},
        {MPI_INT8_T, "MPI_INT8_T", 1, K_SIGNED},
        {MPI_UINT8_T, "MPI_UINT8_T", 1, K_UNSIGNED},
        {MPI_INT16_T, "MPI_INT16_T", 2, K_SIGNED},
        {MPI_UINT16_T, "MPI_UINT16_T", 2, K_UNSIGNED},
        {MPI_INT32_T, "MPI_INT32_T", 4, K_SIGNED},
        {MPI_UINT32_T, "MPI_UINT32_T", 4, K_UNSIGNED},
        {MPI_INT64_T, "MPI_INT64_T", 8, K_SIGNED},
        {MPI_UINT64_T, "MPI_UINT64_T", 8, K_UNSIGNED},
        {MPI_FLOAT, "MPI_FLOAT", sizeof(float), K_FLOAT},
        {MPI_DOUBLE, "MPI_DOUBLE", sizeof(double), K_DOUBLE},
        {MPI_C_BOOL, "MPI_C_BOOL", sizeof(bool), K_BOOL},
        {MPI_BYTE, "MPI_BYTE", 1, K_BYTE},
        /* Reducible by the MPI standard but not by har, or not reducible at all. */
        {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", 0, K_OTHER},
        {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 0, K_OTHER},
        {MPI_DOUBLE_INT, "MPI_DOUBLE_INT", 0, K_OTHER},
        {MPI_CHAR, "MPI_CHAR", 0, K_OTHER},
    };
    const op_case_t ops[] = {
        {MPI_SUM, "MPI_SUM", SUM}, {MPI_PROD, "MPI_PROD", PROD}, {MPI_MIN, "MPI_MIN", MIN},
        {MPI_MAX, "MPI_MAX", MAX}, {MPI_LAND, "MPI_LAND", LAND}, {MPI_LOR, "MPI_LOR", LOR},
        {MPI_LXOR, "MPI_LXOR", LXOR}, {MPI_BAND, "MPI_BAND", BAND}, {MPI_BOR, "MPI_BOR", BOR},
        {MPI_BXOR, "MPI_BXOR", BXOR}, {MPI_MAXLOC, "MPI_MAXLOC", MAXLOC}, {MPI_MINLOC, "MPI_MINLOC", MINLOC},
    };
    static const size_t lengths[] = {0, 1, 3, 17, 1001};
    unsigned served = 0;

    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            const type_case_t *t = &types[ti];
            const op_case_t *o = &ops[oi];
            har_reduce_t r = har_host_reduce_lookup(t->type, o->op);
            int want = allowed(t->kind, o->id);
            CHECK(!!r.fn == want, "%s %s: lookup %s a function", t->name, o->name,
                  r.fn ? "returned" : "did not return");
            if (!r.fn || !want) continue;
            served++;
            CHECK(r.elem_size == t->size, "%s %s: elem_size %zu, want %zu", t->name, o->name, r.elem_size, t->size);
            if (r.elem_size != t->size) continue;
            for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
                for (int round = 0; round < 3; round++) check_run(t, o, r.fn, lengths[li]);
        }

    printf("test_reduce: %s: %u (type, op) pairs served, %lu checks, %lu failed (seed %" PRIu64 ")\n",
           failures ? "FAIL" : "ok", served, checks, failures, seed);
    return failures ? 1 : 0;
}
