/* Host memory near a GPU (cuda/driver.h): the NUMA node and CPUs of a PCI
 * device read from a recorded sysfs tree (tests/unit/sys: a two-socket
 * machine's GPU on node 1, and a device the kernel gives no node), bus ids
 * as the driver spells them, and memory allocated with the node preferred,
 * as the kernel then reports its policy.
 * The tree is found under $top_srcdir (the suite sets it) or ".". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "cuda/driver.h"
#include "host/numa.h"
#include "unit.h"

int main(void)
{
    char sys[512], cpus[64];
    const char *top = getenv("top_srcdir");
    snprintf(sys, sizeof sys, "%s/tests/unit/sys", top ? top : ".");
    CHECK(har_host_pci_numa_node(sys, "00000000:19:00.0") == 1, "the driver's spelling of 0000:19:00.0: node %d",
          har_host_pci_numa_node(sys, "00000000:19:00.0"));
    CHECK(har_host_pci_numa_node(sys, "0000:19:00.0") == 1, "sysfs's spelling");
    CHECK(har_host_pci_numa_node(sys, "00000000:3B:00.0") == -1, "a device with no node (upper-case hex)");
    CHECK(har_host_pci_numa_node(sys, "0000:5e:00.0") == -1, "a device that is not there");
    har_host_pci_cpus(sys, "00000000:19:00.0", cpus, sizeof cpus);
    CHECK(strcmp(cpus, "32-63,96-127") == 0, "its CPUs: '%s'", cpus);
    har_host_pci_cpus(sys, "00000000:3b:00.0", cpus, sizeof cpus);
    CHECK(cpus[0] == '\0', "no CPUs said: '%s'", cpus);
    /* Node 0 exists on every Linux machine: the policy the kernel keeps for
     * the range is the one asked for. */
    size_t bytes = 1 << 20;
    char *p = har_host_numa_alloc(bytes, 0);
    int mode = -1;
    unsigned long mask = 0;
    CHECK(p != NULL, "har_host_numa_alloc");
    if (p && syscall(SYS_get_mempolicy, &mode, &mask, 64, p, 2 /* MPOL_F_ADDR */) == 0)
        CHECK(mode == 1 /* MPOL_PREFERRED */ && mask == 1, "policy of the range: mode %d mask %#lx", mode, mask);
    else
        CHECK(0, "get_mempolicy failed");
    memset(p, 1, bytes);
    har_host_numa_free(p, bytes);
    char *q = har_host_numa_alloc(bytes, -1);
    CHECK(q != NULL, "har_host_numa_alloc anywhere");
    har_host_numa_free(q, bytes);
    printf("test_numa: %s: %lu checks, %lu failed\n", failures ? "FAIL" : "ok", checks, failures);
    return failures ? 1 : 0;
}
