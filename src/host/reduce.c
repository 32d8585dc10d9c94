/* Typed element-wise reductions on host memory: inout = inout op in.
 *
 * Every loop is a plain restrict-qualified loop that the compiler vectorises
 * at -O3. Integer sum and product wrap in unsigned arithmetic (signed overflow
 * is undefined in C), as MPI implementations do in practice. */
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
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

/* The MPI standard's groups of types, as far as they decide which ops a
 * type takes: C integers take every op har has; Fortran integers
 * (MPI_INTEGER, MPI_INTEGER1..8) arithmetic and bitwise ops, not logical
 * ones; Fortran LOGICAL logical ops only, though it is stored as an
 * integer. */
typedef enum { G_C, G_FORTRAN_INTEGER, G_FORTRAN_LOGICAL } group_t;

/* The C type behind each served MPI datatype: its width, signedness, and
 * which operation groups the MPI standard allows on it. */
typedef struct { kind_t kind; size_t size; int is_signed; group_t group; } type_info_t;

/* ---- Fortran types ----------------------------------------------------------
 * Served where they are exactly a C type har reduces, as the MPI itself
 * says: their sizes come from the MPI (MPI_Type_size: a default INTEGER,
 * REAL or LOGICAL is as wide as the compiler the MPI was built with makes
 * it), and MPI_LOGICAL only where the MPI's own logical ops give what har's
 * integer loops give: false is 0, any other value true, and the result 1
 * for true. That is Open MPI's rule (C's && on the integer) and MPICH's
 * (not .FALSE. is true, the result its .TRUE., which is 1 for gfortran);
 * a compiler whose .TRUE. is -1 makes MPICH's result differ, and then the
 * MPI serves MPI_LOGICAL. Learnt once, on the first call that names a type
 * that is not C's, by asking the MPI (MPI_Reduce_local: no communication),
 * so every rank learns the same. Before MPI_Init (the unit tests) no
 * Fortran type is served. */
#define FORTRAN_TYPES 10
static struct { MPI_Datatype type; type_info_t info; } fortran[FORTRAN_TYPES];
static int nfortran;
static pthread_once_t fortran_once = PTHREAD_ONCE_INIT;

static void put_int(void *buf, size_t i, size_t size, int64_t v)
{
    if (size == 1) ((int8_t *)buf)[i] = (int8_t)v;
    else if (size == 2) ((int16_t *)buf)[i] = (int16_t)v;
    else if (size == 4) ((int32_t *)buf)[i] = (int32_t)v;
    else ((int64_t *)buf)[i] = v;
}

static har_reduce_fn logical_fn(type_info_t info, MPI_Op op);

/* Does the MPI's `op` on MPI_LOGICAL of this width give, on 0, 1 and other
 * true patterns, exactly what har's loop gives? */
static int logical_matches(size_t size, MPI_Op op)
{
    enum { N = 4 };
    static const int64_t v[N] = {0, 1, 2, -1};
    int64_t a[N * N], b[N * N], mine[N * N], theirs[N * N];  /* room for N*N elements of any width */
    for (int i = 0; i < N * N; i++) {
        put_int(a, (size_t)i, size, v[i / N]);
        put_int(b, (size_t)i, size, v[i % N]);
    }
    memcpy(mine, b, sizeof b);
    memcpy(theirs, b, sizeof b);
    logical_fn((type_info_t){K_INT, size, 1, G_FORTRAN_LOGICAL}, op)(mine, a, N * N);
    return PMPI_Reduce_local(a, theirs, N * N, MPI_LOGICAL, op) == MPI_SUCCESS &&
           memcmp(mine, theirs, (size_t)N * N * size) == 0;
}

static void learn_fortran(void)
{
    const struct { MPI_Datatype type; kind_t kind; group_t group; size_t size; } names[FORTRAN_TYPES] = {
        /* size 0: as wide as the MPI says */
        {MPI_INTEGER, K_INT, G_FORTRAN_INTEGER, 0},      {MPI_INTEGER1, K_INT, G_FORTRAN_INTEGER, 1},
        {MPI_INTEGER2, K_INT, G_FORTRAN_INTEGER, 2},     {MPI_INTEGER4, K_INT, G_FORTRAN_INTEGER, 4},
        {MPI_INTEGER8, K_INT, G_FORTRAN_INTEGER, 8},     {MPI_REAL, K_FLOAT, G_C, 0},
        {MPI_DOUBLE_PRECISION, K_FLOAT, G_C, 0},         {MPI_REAL4, K_FLOAT, G_C, 4},
        {MPI_REAL8, K_FLOAT, G_C, 8},                    {MPI_LOGICAL, K_INT, G_FORTRAN_LOGICAL, 0},
    };
    for (int k = 0; k < FORTRAN_TYPES; k++) {
        int size = 0;
        /* An MPI built without Fortran names these MPI_DATATYPE_NULL (MPICH
         * does so for an INTEGER*n its compiler lacks): never served, never
         * asked about (a null type's error could abort). */
        if (names[k].type == MPI_DATATYPE_NULL || PMPI_Type_size(names[k].type, &size) != MPI_SUCCESS) continue;
        int fits = names[k].kind == K_FLOAT ? size == 4 || size == 8 : size == 1 || size == 2 || size == 4 || size == 8;
        if (!fits || (names[k].size && (size_t)size != names[k].size)) continue;
        type_info_t info = {names[k].kind, (size_t)size, 1, names[k].group};
        if (names[k].group == G_FORTRAN_LOGICAL &&
            !(logical_matches(info.size, MPI_LAND) && logical_matches(info.size, MPI_LOR) &&
              logical_matches(info.size, MPI_LXOR)))
            continue;
        fortran[nfortran].type = names[k].type;
        fortran[nfortran++].info = info;
    }
}

static type_info_t fortran_info(MPI_Datatype t)
{
    int up = 0;
    if (t == MPI_DATATYPE_NULL || PMPI_Initialized(&up) != MPI_SUCCESS || !up) return (type_info_t){K_NONE, 0, 0, G_C};
    pthread_once(&fortran_once, learn_fortran);
    for (int k = 0; k < nfortran; k++)
        if (fortran[k].type == t) return fortran[k].info;
    return (type_info_t){K_NONE, 0, 0, G_C};
}

static type_info_t type_info(MPI_Datatype t)
{
#define INT_T(mpi, c, sgn) if (t == mpi) return (type_info_t){K_INT, sizeof(c), sgn, G_C};
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
    if (t == MPI_FLOAT) return (type_info_t){K_FLOAT, sizeof(float), 1, G_C};
    if (t == MPI_DOUBLE) return (type_info_t){K_FLOAT, sizeof(double), 1, G_C};
    if (t == MPI_C_BOOL) return (type_info_t){K_BOOL, sizeof(bool), 0, G_C};
    if (t == MPI_BYTE) return (type_info_t){K_BYTE, 1, 0, G_C};
    return fortran_info(t);
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

/* MPI_LAND, MPI_LOR, MPI_LXOR on an integer (C's, or Fortran's LOGICAL) or C_BOOL. */
static har_reduce_fn logical_fn(type_info_t info, MPI_Op op)
{
    int b = info.kind == K_BOOL;
    if (op == MPI_LAND) return b ? land_bool : PICK_INT(land);
    if (op == MPI_LOR) return b ? lor_bool : PICK_INT(lor);
    if (op == MPI_LXOR) return b ? lxor_bool : PICK_INT(lxor);
    return NULL;
}

har_reduce_t har_host_reduce_lookup(MPI_Datatype type, MPI_Op op)
{
    type_info_t info = type_info(type);
    har_reduce_t r = {NULL, info.size, HAR_DT_NONE, HAR_OP_NONE, 0};
    int is_int = info.kind == K_INT && info.group != G_FORTRAN_LOGICAL, is_f32 = info.kind == K_FLOAT && info.size == 4,
        is_f64 = info.kind == K_FLOAT && info.size == 8;
    if (is_int || is_f32 || is_f64) {
        if (op == MPI_SUM) r.fn = is_int ? PICK_INT(sum) : is_f32 ? sum_f32 : sum_f64;
        else if (op == MPI_PROD) r.fn = is_int ? PICK_INT(prod) : is_f32 ? prod_f32 : prod_f64;
        else if (op == MPI_MIN) r.fn = is_int ? PICK_INT(min) : is_f32 ? min_f32 : min_f64;
        else if (op == MPI_MAX) r.fn = is_int ? PICK_INT(max) : is_f32 ? max_f32 : max_f64;
    }
    if ((is_int && info.group == G_C) || info.kind == K_BOOL || info.group == G_FORTRAN_LOGICAL) {
        har_reduce_fn fn = logical_fn(info, op);
        if (fn) r.fn = fn;
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
        /* What the elements are in memory: MPI_INTEGER and MPI_INT32_T are
         * the same to ranks comparing their calls, as they are to the MPIs. */
        r.type_code = (uint16_t)(info.kind << 8 | info.size << 1 | info.is_signed);
    }
    return r;
}

const char *har_host_reduce_text(uint64_t count, uint16_t type_code, int op, uint64_t call, char *buf, size_t len)
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
