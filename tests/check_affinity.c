/*
 * check_affinity.c - the CPUs near a PCI device (daemon/sched/affinity.c): the
 * kernel's CPU-list syntax, and the lookup in a sysfs tree made here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "affinity.h"

static cpu_set_t cpus(const char *list)
{
    cpu_set_t set;
    ck_assert_msg(gcd_affinity_parse_cpulist(list, &set), "\"%s\" refused", list);
    return set;
}

START_TEST(test_cpulists)
{
    cpu_set_t s = cpus("0-3,8,10-11\n");
    ck_assert_int_eq(CPU_COUNT(&s), 7);
    ck_assert(CPU_ISSET(0, &s) && CPU_ISSET(3, &s) && CPU_ISSET(8, &s) && CPU_ISSET(11, &s));
    ck_assert(!CPU_ISSET(4, &s) && !CPU_ISSET(9, &s) && !CPU_ISSET(12, &s));
    s = cpus("5");
    ck_assert_int_eq(CPU_COUNT(&s), 1);
    s = cpus("\n"); /* a device with no CPUs near it (some virtual machines) */
    ck_assert_int_eq(CPU_COUNT(&s), 0);
    char buf[64];
    s = cpus("0-3,8,10-11");
    gcd_affinity_format(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, "0-3,8,10-11");
}
END_TEST

START_TEST(test_cpulists_refused)
{
    static const char *const bad[] = { "a",     "1-",      "-1",   "3-1", "1,,2", "1 2",
                                       "1-2-3", "0-99999", "1\n2", "1,",  "0x1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cpu_set_t s;
        ck_assert_msg(!gcd_affinity_parse_cpulist(bad[i], &s), "\"%s\" accepted", bad[i]);
    }
}
END_TEST

static char root[64];

/* root/bus/pci/devices/ADDRESS/local_cpulist holding list. */
static void fake_device(const char *address, const char *list)
{
    char path[256];
    snprintf(path, sizeof path, "mkdir -p %s/bus/pci/devices/%s", root, address);
    ck_assert_int_eq(system(path), 0);
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/local_cpulist", root, address);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(list, f);
    fclose(f);
}

static void setup(void)
{
    strcpy(root, "/tmp/check_affinity.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    fake_device("0000:3b:00.0", "0-1\n");
    fake_device("0000:86:00.0", "2-3\n");
    fake_device("0000:af:00.0", "garbage\n");
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_near_device)
{
    cpu_set_t allowed = cpus("0-3"), near;
    /* CUDA names the device in upper case, NVML with an 8-digit domain, sysfs neither */
    static const char *const spellings[] = { "0000:3b:00.0", "0000:3B:00.0", "00000000:3B:00.0" };
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(gcd_affinity_device_cpus(root, spellings[i], &allowed, &near), 2);
        ck_assert(CPU_ISSET(0, &near) && CPU_ISSET(1, &near));
    }
    ck_assert(gcd_affinity_narrows(2, &allowed));
    ck_assert_int_eq(gcd_affinity_device_cpus(root, "0000:86:00.0", &allowed, &near), 2);
    ck_assert(CPU_ISSET(2, &near) && CPU_ISSET(3, &near) && !CPU_ISSET(0, &near));
    /* only the CPUs the daemon may use: 3 of the second device's */
    allowed = cpus("0,3");
    ck_assert_int_eq(gcd_affinity_device_cpus(root, "0000:86:00.0", &allowed, &near), 1);
    ck_assert(CPU_ISSET(3, &near));
    ck_assert(gcd_affinity_narrows(1, &allowed));
}
END_TEST

/* Nothing to narrow, nothing known, or nothing left: the lanes keep the daemon's CPUs. */
START_TEST(test_near_device_declined)
{
    cpu_set_t allowed = cpus("0-1"), near;
    ck_assert_int_eq(gcd_affinity_device_cpus(root, "0000:3b:00.0", &allowed, &near), 2); /* one node */
    ck_assert(!gcd_affinity_narrows(2, &allowed));
    ck_assert_int_eq(gcd_affinity_device_cpus(root, "0000:86:00.0", &allowed, &near), 0); /* none allowed */
    ck_assert(!gcd_affinity_narrows(0, &allowed));
    allowed = cpus("0-3");
    static const char *const unknown[] = {
        "0000:01:00.0", /* no such device */
        "0000:af:00.0", /* its list is not a CPU list */
        "",
        "0000:3b:00",
        "0000:3b:00.0.1",
        "0000:3b:00.0x",
        "100000:3b:00.0",
        "0000:3b:20.0",
        "../../../../etc",
        "0000:3b:00.0/..", /* not an address */
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        ck_assert_msg(gcd_affinity_device_cpus(root, unknown[i], &allowed, &near) == -1, "\"%s\" found",
                      unknown[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("affinity");
    TCase *tc = tcase_create("cpus");
    tcase_add_test(tc, test_cpulists);
    tcase_add_test(tc, test_cpulists_refused);
    suite_add_tcase(s, tc);
    TCase *dev = tcase_create("sysfs");
    tcase_add_checked_fixture(dev, setup, teardown);
    tcase_add_test(dev, test_near_device);
    tcase_add_test(dev, test_near_device_declined);
    suite_add_tcase(s, dev);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
