/* Typed element-wise reductions on host memory: inout = inout op in.
 *
 * Every loop is a plain restrict-qualified loop that the compiler vectorises
 * at -O3. Integer sum and product wrap in unsigned arithmetic (signed overflow
 * is undefined in C), as MPI implementations do in practice. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "host/reduce.h"
#include "core/types.h"

#define LOOP(name, T, expr)                                                   \
    static void name(void *restrict inout_, const void *restrict in_, size_t n) \
    {                                                                         \
        T *restrict a = inout_;                                               \
        const T *restrict b = in_;                                            \
        for (size_t i = 0; i < n; i++) a[i] = (expr);                         \
    }

/* U: the unsigned type of the same width, for wrapping sum and product. */
#define ARITH(tag, T, U)                                                      \
    LOOP(sum_##tag, T, (T)((U)a[i] + (U)b[i]))                                \
    LOOP(prod_##tag, T, (T)((U)a[i] * (U)b[i]))                               \
    LOOP(min_##tag, T, b[i] < a[i] ? b[i] : a[i])                             \
    LOOP(max_##tag, T, b[i] > a[i] ? b[i] : a[i])
#define LOGICAL(tag, T)                                                       \
    LOOP(land_##tag, T, (T)((a[i] != 0) && (b[i] != 0)))                      \
    LOOP(lor_##tag, T, (T)((a[i] != 0) || (b[i] != 0)))                       \
    LOOP(lxor_##tag, T, (T)((a[i] != 0) != (b[i] != 0)))
#define BITWISE(tag, T)                                                       \
    LOOP(band_##tag, T, a[i] & b[i])                                          \
    LOOP(bor_##tag, T, a[i] | b[i])                                           \
    LOOP(bxor_##tag, T, a[i] ^ b[i])

#define INTEGER(tag, T, U) ARITH(tag, T, U) LOGICAL(tag, T) BITWISE(tag, T)
INTEGER(i8, int8_t, uint8_t)
INTEGER(u8, uint8_t, uint8_t)
INTEGER(i16, int16_t, uint16_t)
INTEGER(u16, uint16_t, uint16_t)
INTEGER(i32, int32_t, uint32_t)
INTEGER(u32, uint32_t, uint32_t)
INTEGER(i64, int64_t, uint64_t)
INTEGER(u64, uint64_t, uint64_t)
LOOP(sum_f32, float, a[i] + b[i])
LOOP(prod_f32, float, a[i] * b[i])
LOOP(min_f32, float, b[i] < a[i] ? b[i] : a[i])
LOOP(max_f32, float, b[i] > a[i] ? b[i] : a[i])
LOOP(sum_f64, double, a[i] + b[i])
LOOP(prod_f64, double, a[i] * b[i])
LOOP(min_f64, double, b[i] < a[i] ? b[i] : a[i])
LOOP(max_f64, double, b[i] > a[i] ? b[i] : a[i])
LOGICAL(bool, bool)

typedef enum { K_NONE, K_INT, K_FLOAT, K_BOOL, K_BYTE } kind_t;

/* The C type behind each served MPI datatype: its width, signedness, and
 * which operation groups the MPI standard allows on it. */
typedef struct { kind_t kind; size_t size; int is_signed; } type_info_t;

static type_info_t type_info(MPI_Datatype t)
{
#define INT_T(mpi, c, sgn) if (t == mpi) return (type_info_t){K_INT, sizeof(c), sgn};
    INT_T(MPI_SIGNED_CHAR, signed char, 1) INT_T(MPI_UNSIGNED_CHAR, unsigned char, 0)
    INT_T(MPI_SHORT, short, 1) INT_T(MPI_UNSIGNED_SHORT, unsigned short, 0)
    INT_T(MPI_INT, int, 1) INT_T(MPI_UNSIGNED, unsigned, 0)
    INT_T(MPI_LONG, long, 1) INT_T(MPI_UNSIGNED_LONG, unsigned long, 0)
    INT_T(MPI_LONG_LONG, long long, 1) INT_T(MPI_UNSIGNED_LONG_LONG, unsigned long long, 0)
    INT_T(MPI_INT8_T, int8_t, 1) INT_T(MPI_UINT8_T, uint8_t, 0)
    INT_T(MPI_INT16_T, int16_t, 1) INT_T(MPI_UINT16_T, uint16_t, 0)
    INT_T(MPI_INT32_T, int32_t, 1) INT_T(MPI_UINT32_T, uint32_t, 0)
    INT_T(MPI_INT64_T, int64_t, 1) INT_T(MPI_UINT64_T, uint64_t, 0)
#undef INT_T
    if (t == MPI_FLOAT) return (type_info_t){K_FLOAT, sizeof(float), 1};
    if (t == MPI_DOUBLE) return (type_info_t){K_FLOAT, sizeof(double), 1};
    if (t == MPI_C_BOOL) return (type_info_t){K_BOOL, sizeof(bool), 0};
    if (t == MPI_BYTE) return (type_info_t){K_BYTE, 1, 0};
    return (type_info_t){K_NONE, 0, 0};
}

#define PICK_INT(op)                                                           \
    (info.size == 1 ? (info.is_signed ? op##_i8 : op##_u8)                     \
     : info.size == 2 ? (info.is_signed ? op##_i16 : op##_u16)                 \
     : info.size == 4 ? (info.is_signed ? op##_i32 : op##_u32)                 \
                      : (info.is_signed ? op##_i64 : op##_u64))

/* The kernels' element type: 32- and 64-bit integers and floats. */
static int dev_type(type_info_t info)
{
    if (info.kind == K_FLOAT) return info.size == 4 ? HAR_DT_F32 : HAR_DT_F64;
    if (info.kind != K_INT || info.size < 4) return HAR_DT_NONE;
    return info.size == 4 ? (info.is_signed ? HAR_DT_I32 : HAR_DT_U32) : (info.is_signed ? HAR_DT_I64 : HAR_DT_U64);
}

static int dev_op(MPI_Op op)
{
    if (op == MPI_SUM) return HAR_OP_SUM;
    if (op == MPI_PROD) return HAR_OP_PROD;
    if (op == MPI_MIN) return HAR_OP_MIN;
    if (op == MPI_MAX) return HAR_OP_MAX;
    if (op == MPI_BAND) return HAR_OP_BAND;
    if (op == MPI_BOR) return HAR_OP_BOR;
    if (op == MPI_BXOR) return HAR_OP_BXOR;
    if (op == MPI_LAND) return HAR_OP_LAND;
    if (op == MPI_LOR) return HAR_OP_LOR;
    if (op == MPI_LXOR) return HAR_OP_LXOR;
    return HAR_OP_NONE;
}

har_reduce_t har_reduce_lookup(MPI_Datatype type, MPI_Op op)
{
    type_info_t info = type_info(type);
    har_reduce_t r = {NULL, info.size, HAR_DT_NONE, HAR_OP_NONE, 0};
    int is_int = info.kind == K_INT, is_f32 = info.kind == K_FLOAT && info.size == 4,
        is_f64 = info.kind == K_FLOAT && info.size == 8;
    if (is_int || is_f32 || is_f64) {
        if (op == MPI_SUM) r.fn = is_int ? PICK_INT(sum) : is_f32 ? sum_f32 : sum_f64;
        else if (op == MPI_PROD) r.fn = is_int ? PICK_INT(prod) : is_f32 ? prod_f32 : prod_f64;
        else if (op == MPI_MIN) r.fn = is_int ? PICK_INT(min) : is_f32 ? min_f32 : min_f64;
        else if (op == MPI_MAX) r.fn = is_int ? PICK_INT(max) : is_f32 ? max_f32 : max_f64;
    }
    if (is_int || info.kind == K_BOOL) {
        int b = info.kind == K_BOOL;
        if (op == MPI_LAND) r.fn = b ? land_bool : PICK_INT(land);
        else if (op == MPI_LOR) r.fn = b ? lor_bool : PICK_INT(lor);
        else if (op == MPI_LXOR) r.fn = b ? lxor_bool : PICK_INT(lxor);
    }
    if (is_int || info.kind == K_BYTE) {
        /* MPI_BYTE: one unsigned byte per element */
        if (info.kind == K_BYTE) info.is_signed = 0;
        if (op == MPI_BAND) r.fn = PICK_INT(band);
        else if (op == MPI_BOR) r.fn = PICK_INT(bor);
        else if (op == MPI_BXOR) r.fn = PICK_INT(bxor);
    }
    if (r.fn) {
        r.dev_type = dev_type(info);
        r.dev_op = dev_op(op);
        r.type_code = (uint16_t)(info.kind << 8 | info.size << 1 | info.is_signed);
    }
    return r;
}

const char *har_reduce_text(uint64_t count, uint16_t type_code, int op, uint64_t call, char *buf, size_t len)
{
    static const char *const kinds[] = {"?", "int", "float", "bool", "byte"};
    static const char *const ops[] = {"sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "lxor"};
    int kind = type_code >> 8, size = (type_code & 0xff) >> 1, sgn = type_code & 1;
    char type[16];
    if (kind == K_INT) snprintf(type, sizeof type, "%sint%d", sgn ? "" : "u", 8 * size);
    else snprintf(type, sizeof type, "%s%d", kind < 5 ? kinds[kind] : "?", 8 * size);
    snprintf(buf, len, "count %llu %s %s (call %llu)", (unsigned long long)count, type, op >= 0 && op < 10 ? ops[op] : "?",
             (unsigned long long)call);
    return buf;
}
