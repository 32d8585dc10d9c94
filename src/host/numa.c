/* Host memory near a GPU: the PCI device's NUMA node and CPUs as sysfs
 * says them, and pages placed on a node (numa.h). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/log.h"
#include "host/numa.h"

/* A line of a sysfs file of the PCI device, or "". */
static void pci_attr(const char *sys, const char *bus, const char *attr, char *out, size_t len)
{
    char path[512];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/%s", sys, bus, attr);
    FILE *f = fopen(path, "r");
    if (f && fgets(out, (int)len, f)) out[strcspn(out, "\n")] = '\0';
    else out[0] = '\0';
    if (f) fclose(f);
}

/* The driver's bus ids have 8 hex digits of domain ("00000000:19:00.0"),
 * sysfs's 4. */
static const char *sysfs_bus(const char *bus, char *out, size_t len)
{
    const char *colon = strchr(bus, ':');
    if (colon && colon - bus > 4) {
        snprintf(out, len, "%.4s%s", colon - 4, colon);
        for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
        return out;
    }
    snprintf(out, len, "%s", bus);
    for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
    return out;
}

int har_host_pci_numa_node(const char *sys, const char *bus)
{
    char name[64], text[32];
    pci_attr(sys, sysfs_bus(bus, name, sizeof name), "numa_node", text, sizeof text);
    return text[0] ? atoi(text) : -1;
}

void har_host_pci_cpus(const char *sys, const char *bus, char *out, size_t len)
{
    char name[64];
    pci_attr(sys, sysfs_bus(bus, name, sizeof name), "local_cpulist", out, len);
}

void *har_host_numa_alloc(size_t bytes, int numa)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (numa >= 0 && numa < 64) {
        /* Preferred, not bound: a full node still gives memory elsewhere.
         * Before any page is touched, so that every page follows it. */
        unsigned long mask = 1ul << numa;
        if (syscall(SYS_mbind, p, bytes, 1 /* MPOL_PREFERRED */, &mask, 64, 0) != 0)
            HAR_LOG(HAR_LOG_DEBUG, "mbind to NUMA node %d: %s", numa, strerror(errno));
    }
    return p;
}

void har_host_numa_free(void *p, size_t bytes)
{
    if (p) munmap(p, bytes);
}
