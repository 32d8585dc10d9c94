/* The element types and ops har reduces, as codes that mean the same in
 * every process (MPI handles do not) and in CUDA code: the host reduction,
 * the plan, the kernels and NCCL's mapping share them; and where a buffer
 * lives. Plain C, no MPI. */
#ifndef HAR_TYPES_H
#define HAR_TYPES_H

/* The types the device kernels (and NCCL) reduce; HAR_DT_NONE for others. */
typedef enum { HAR_DT_NONE = -1, HAR_DT_F32, HAR_DT_F64, HAR_DT_I32, HAR_DT_U32, HAR_DT_I64, HAR_DT_U64 } har_dtype_t;
typedef enum {
    HAR_OP_NONE = -1, HAR_OP_SUM, HAR_OP_PROD, HAR_OP_MIN, HAR_OP_MAX,
    HAR_OP_BAND, HAR_OP_BOR, HAR_OP_BXOR, HAR_OP_LAND, HAR_OP_LOR, HAR_OP_LXOR
} har_opcode_t;
#define HAR_OP_BIT(op) (1u << HAR_OP_##op)
/* The ops NCCL reduces (on every type but HAR_DT_NONE). */
#define HAR_NCCL_OPS (HAR_OP_BIT(SUM) | HAR_OP_BIT(PROD) | HAR_OP_BIT(MIN) | HAR_OP_BIT(MAX))

/* Where a buffer lives (cuda/driver.h finds it out). */
typedef enum { HAR_MEM_HOST = 0, HAR_MEM_DEVICE = 1, HAR_MEM_MANAGED = 2 } har_mem_kind_t;

#endif
