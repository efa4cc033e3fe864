/* affinity.c - the CPUs near a PCI device (see affinity.h). */
#include "affinity.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One decimal CPU number at *p, advancing *p; false if none or out of range. */
static bool parse_cpu(const char **p, unsigned long *cpu)
{
    if (!isdigit((unsigned char)**p))
        return false;
    char *end;
    errno = 0;
    *cpu = strtoul(*p, &end, 10);
    *p = end;
    return errno == 0 && *cpu < CPU_SETSIZE;
}

bool gcd_affinity_parse_cpulist(const char *text, cpu_set_t *out)
{
    CPU_ZERO(out);
    const char *p = text;
    bool more = *p && *p != '\n'; /* an empty list is a device with no CPUs near it */
    while (more) {
        unsigned long lo, hi;
        if (!parse_cpu(&p, &lo))
            return false;
        hi = lo;
        if (*p == '-') {
            p++;
            if (!parse_cpu(&p, &hi) || hi < lo)
                return false;
        }
        for (unsigned long c = lo; c <= hi; c++)
            CPU_SET(c, out);
        more = *p == ',';
        p += more;
    }
    return *p == '\0' || (p[0] == '\n' && p[1] == '\0');
}

/* sysfs_root/bus/pci/devices/ADDRESS/local_cpulist into buf; false if unreadable. */
static bool read_local_cpulist(const char *sysfs_root, const char *pci_address, char *buf, size_t size)
{
    unsigned domain, bus, device, function;
    char end, path[512];
    for (const char *p = pci_address; *p; p++)
        if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
            return false; /* "domain:bus:device.function", nothing that walks the tree */
    if (sscanf(pci_address, "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &end) != 4 || domain > 0xffff ||
        bus > 0xff || device > 0x1f || function > 7)
        return false;
    /* sysfs's spelling: a 4-digit domain, lower case */
    snprintf(path, sizeof path, "%s/bus/pci/devices/%04x:%02x:%02x.%x/local_cpulist", sysfs_root, domain, bus,
             device, function);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

int gcd_affinity_device_cpus(const char *sysfs_root, const char *pci_address, const cpu_set_t *allowed,
                             cpu_set_t *out)
{
    char list[4096];
    cpu_set_t local;
    if (!read_local_cpulist(sysfs_root, pci_address, list, sizeof list) ||
        !gcd_affinity_parse_cpulist(list, &local))
        return -1;
    CPU_AND(out, &local, allowed);
    return CPU_COUNT(out);
}

void gcd_affinity_format(const cpu_set_t *set, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && used < size; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int hi = c;
        while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set))
            hi++;
        int n = hi > c ? snprintf(buf + used, size - used, "%s%d-%d", used ? "," : "", c, hi)
                       : snprintf(buf + used, size - used, "%s%d", used ? "," : "", c);
        if (n < 0)
            break;
        used += (size_t)n;
        c = hi;
    }
}
