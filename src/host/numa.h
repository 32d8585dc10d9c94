/* Host memory near a GPU: where the buffers a GPU copies to and from
 * belong (its PCI device's NUMA node), and pages placed there. */
#ifndef HAR_NUMA_H
#define HAR_NUMA_H

#include <stddef.h>
#include "core/common.h"

/* The NUMA node of the PCI device at `bus` ("0000:19:00.0"), as the
 * kernel says under `sys` ("/sys", or a recorded tree in tests); -1 if it
 * does not say. Host buffers a GPU copies to and from belong there. */
HAR_HIDDEN int har_host_pci_numa_node(const char *sys, const char *bus);
/* Its CPUs, as a list ("0-15,32-47"); "" if the kernel does not say. */
HAR_HIDDEN void har_host_pci_cpus(const char *sys, const char *bus, char *out, size_t len);
/* `bytes` of page-aligned host memory whose pages the kernel prefers to
 * place on NUMA node `numa` (-1: anywhere); NULL if none. Free with
 * har_host_numa_free. */
HAR_HIDDEN void *har_host_numa_alloc(size_t bytes, int numa);
HAR_HIDDEN void har_host_numa_free(void *p, size_t bytes);

#endif
