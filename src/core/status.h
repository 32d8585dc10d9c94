/* One internal status type: har.h's error list. Internal functions that can
 * fail return HAR_OK or one of its conditions; the first function that
 * knows the cause logs it, callers only pass the status on, and the entry
 * point turns it into an MPI error code through the communicator's error
 * handler. Functions that cannot fail return nothing. */
#ifndef HAR_STATUS_H
#define HAR_STATUS_H

#include "core/common.h"

typedef har_error_t har_status_t;
#define HAR_OK HAR_SUCCESS

/* Registers har's own error classes (MPI_Init). */
HAR_HIDDEN void har_status_init(void);
/* What the rank at fault did, for messages ("died"). */
HAR_HIDDEN const char *har_status_what(har_status_t st);

#endif
