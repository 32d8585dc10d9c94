/* One internal status type. Internal functions return HAR_OK or one of
 * har.h's error conditions; the first function that knows the cause logs
 * it, callers only pass the status on, and the entry point turns it into
 * an MPI error code through the communicator's error handler. */
#ifndef HAR_STATUS_H
#define HAR_STATUS_H

#include "core/common.h"

typedef enum {
    HAR_OK = 0,
#define HAR_STATUS_ENUM(id, msg) HAR_ST_##id,
    HAR_ERROR_LIST(HAR_STATUS_ENUM)
#undef HAR_STATUS_ENUM
    HAR_ST_TRUNCATE,    /* ranks' counts or datatypes differ: MPI_ERR_TRUNCATE, as the MPIs give */
    HAR_ST_OP,          /* ranks' ops differ: MPI_ERR_OP */
} har_status_t;

/* The MPI error code of a status (MPI_SUCCESS for HAR_OK). */
HAR_HIDDEN int har_status_code(har_status_t st);

#endif
