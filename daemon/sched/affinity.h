/*
 * affinity.h - the CPUs near a PCI device, so that a GPU's lane threads and
 * its staging buffers sit on the GPU's own NUMA node.
 *
 * On a host with several sockets each GPU hangs off one of them; a lane
 * thread on the far socket copies every byte across the socket link and
 * its page-locked staging memory lands on the wrong node. The kernel says
 * which CPUs are local to a PCI device (sysfs local_cpulist); the lane uses
 * those of them the daemon may run on (its cgroup or systemd CPUAffinity=).
 */
#ifndef GCD_AFFINITY_H
#define GCD_AFFINITY_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Parse a kernel CPU list ("0-15,32-47\n") into *out. False for text that is
 * not one, or names a CPU beyond CPU_SETSIZE.
 */
bool gcd_affinity_parse_cpulist(const char *text, cpu_set_t *out);

/*
 * The CPUs local to the PCI device at pci_address ("0000:3b:00.0"; any case,
 * and the 8-digit domain NVML prints) under sysfs_root ("/sys", or a test's
 * tree), within *allowed, into *out. Returns how many there are, or -1 when
 * the address or its CPU list is unknown. The lanes move only when that is
 * some but not all of *allowed (all of them: one NUMA node, nothing to do).
 */
int gcd_affinity_device_cpus(const char *sysfs_root, const char *pci_address, const cpu_set_t *allowed,
                             cpu_set_t *out);

/* Whether near CPUs (gcd_affinity_device_cpus's count) are worth moving the lanes to. */
static inline bool gcd_affinity_narrows(int near, const cpu_set_t *allowed)
{
    return near > 0 && near < CPU_COUNT(allowed);
}

/* *set as a CPU list ("0-15,32-47") into buf. */
void gcd_affinity_format(const cpu_set_t *set, char *buf, size_t size);

#endif
