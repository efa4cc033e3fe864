/*
 * check_fd_file.c - the checks on a file stream's descriptors
 * (daemon/request/fd_file.c, docs/SECURITY.md "Client files"), one per
 * kind of descriptor a hostile client could pass. check_file_stream.c
 * sends the same descriptors through a real daemon.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <check.h>

#include "fd_file.h"

static char dir[64];
static char path[96];

static void setup(void)
{
    strcpy(dir, "/tmp/check_fd_file.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/f", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "hello", 5), 5);
    close(fd);
}

static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

/* The input check's verdict on fd (closed here), with its message in msg. */
static int input_verdict(int fd, char msg[256])
{
    gc_error err = { 0 };
    uint64_t size = 0;
    ck_assert_int_ge(fd, 0);
    int rc = gcd_fd_file_check_input(fd, &size, &err);
    snprintf(msg, 256, "%s", err.msg);
    close(fd);
    return rc;
}

static int output_verdict(int fd, char msg[256])
{
    gc_error err = { 0 };
    int in = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    int rc = gcd_fd_file_check_output(fd, in, &err);
    snprintf(msg, 256, "%s", err.msg);
    close(fd);
    close(in);
    return rc;
}

START_TEST(regular_input_accepted)
{
    gc_error err = { 0 };
    uint64_t size = 0;
    int fd = open(path, O_RDONLY);
    ck_assert_int_eq(gcd_fd_file_check_input(fd, &size, &err), GC_OK);
    ck_assert_uint_eq(size, 5);
    close(fd);
}
END_TEST

START_TEST(devices_refused)
{
    char msg[256];
    ck_assert_int_eq(input_verdict(open("/dev/zero", O_RDONLY), msg), GC_E_INVALID);
    ck_assert_ptr_nonnull(strstr(msg, "not a regular file"));
    ck_assert_int_eq(input_verdict(open("/dev/urandom", O_RDONLY), msg), GC_E_INVALID);
    ck_assert_int_eq(input_verdict(open("/dev/null", O_RDONLY), msg), GC_E_INVALID);
}
END_TEST

START_TEST(directory_pipe_socket_refused)
{
    char msg[256];
    ck_assert_int_eq(input_verdict(open(dir, O_RDONLY | O_DIRECTORY), msg), GC_E_INVALID);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    close(p[1]);
    ck_assert_int_eq(input_verdict(p[0], msg), GC_E_INVALID);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    ck_assert_int_eq(input_verdict(sv[0], msg), GC_E_INVALID);
}
END_TEST

START_TEST(o_path_refused)
{
    char msg[256];
    ck_assert_int_eq(input_verdict(open(path, O_PATH), msg), GC_E_INVALID);
    ck_assert_ptr_nonnull(strstr(msg, "O_PATH"));
    ck_assert_int_eq(output_verdict(open(path, O_PATH), msg), GC_E_INVALID);
}
END_TEST

START_TEST(write_only_input_refused)
{
    char msg[256];
    ck_assert_int_eq(input_verdict(open(path, O_WRONLY), msg), GC_E_INVALID);
    ck_assert_ptr_nonnull(strstr(msg, "not open for reading"));
}
END_TEST

START_TEST(outputs_checked)
{
    char msg[256], other[128];
    snprintf(other, sizeof other, "%s/out", dir);
    int fd = open(other, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_eq(output_verdict(fd, msg), GC_OK);
    ck_assert_int_eq(output_verdict(open(other, O_RDONLY), msg), GC_E_INVALID);
    ck_assert_ptr_nonnull(strstr(msg, "not open for writing"));
    ck_assert_int_eq(output_verdict(open(other, O_WRONLY | O_APPEND), msg), GC_E_INVALID);
    ck_assert_ptr_nonnull(strstr(msg, "O_APPEND"));
    ck_assert_int_eq(output_verdict(open(path, O_RDWR), msg), GC_E_INVALID); /* the input's own file */
    ck_assert_ptr_nonnull(strstr(msg, "same file"));
    ck_assert_int_eq(output_verdict(open("/dev/null", O_WRONLY), msg), GC_E_INVALID);
    unlink(other);
}
END_TEST

/* No FUSE mount can be made without root here: the f_type verdict, as fstatfs would give it. */
START_TEST(fuse_refused)
{
    gc_error err = { 0 };
    ck_assert_int_eq(gcd_fd_file_check_fs(GCD_FUSE_SUPER_MAGIC, "input", &err), GC_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "FUSE"));
    ck_assert_int_eq(gcd_fd_file_check_fs(0xEF53 /* ext4 */, "input", &err), GC_OK);
    ck_assert_int_eq(gcd_fd_file_check_fs(0x01021994 /* tmpfs */, "output", &err), GC_OK);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fd_file");
    TCase *tc = tcase_create("checks");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, regular_input_accepted);
    tcase_add_test(tc, devices_refused);
    tcase_add_test(tc, directory_pipe_socket_refused);
    tcase_add_test(tc, o_path_refused);
    tcase_add_test(tc, write_only_input_refused);
    tcase_add_test(tc, outputs_checked);
    tcase_add_test(tc, fuse_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
