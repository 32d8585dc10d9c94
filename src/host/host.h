/* What the call driver asks of the host-segment engine beyond engine.h. */
#ifndef HAR_HOST_H
#define HAR_HOST_H

#include "engine.h"

/* At the arrival: this rank's input of the call's first chunk into its
 * slot (and its HAR_CHECK checksums), so that a host call makes one
 * synchronisation. The chunk is the plan's for host memory. */
HAR_HIDDEN har_status_t har_host_preload(har_node_t *node, const har_call_t *call, size_t chunk_bytes);

#endif
