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
 * The CPUs local to the PCI device at pci_address ("0000:3b:00.0", any case)
 * under sysfs_root ("/sys", or a test's tree), within *allowed, into *out.
 * True only when that narrows *allowed: false when the device, its list or
 * the overlap is unknown or empty, or the list covers every allowed CPU
 * (one NUMA node: nothing to do).
 */
bool gcd_affinity_near_device(const char *sysfs_root, const char *pci_address, const cpu_set_t *allowed,
                              cpu_set_t *out);

/* *set as a CPU list ("0-15,32-47") into buf. */
void gcd_affinity_format(const cpu_set_t *set, char *buf, size_t size);

#endif
