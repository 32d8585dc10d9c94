/* The node segment, made by local rank 0 and mapped by every local rank,
 * leaving nothing behind whatever the moment of death (share.c). */
#ifndef HAR_SHARE_H
#define HAR_SHARE_H

#include "node/node.h"

/* Collective on the node. HAR_OK with node->seg mapped on every local rank
 * and *ok = 1; HAR_OK with *ok = 0 on every local rank and nothing mapped
 * when it could not be made or shared (logged); or why the node's ranks
 * could not agree (a peer died, HAR_TIMEOUT: recorded). */
HAR_HIDDEN har_status_t har_node_share(har_node_t *node, size_t slot_bytes, int *ok);

#endif
