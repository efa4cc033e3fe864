/*
 * check_access.c - who may use gpucompd, from the connecting process's side
 * (docs/SECURITY.md, "Who may connect"): the daemon judges the groups the
 * process has (not /etc/group's list for its uid), and the library and
 * gpucomp tell a refusal from "no daemon": a refused user is told why and
 * how to get in, and gpucomp does not quietly compress on this CPU instead.
 *
 * Most cases need root: they run children that drop to another uid, with
 * groups set by setgroups. Without root they say so and pass.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "gpucomp.h"

#define NOBODY 65534
#define CHILD_WAIT_S 60

static test_daemon dut;

static void teardown(void)
{
    test_daemon_cleanup(&dut);
    memset(&dut, 0, sizeof dut);
}

static bool skip_unless_root(void)
{
    if (geteuid() == 0)
        return false;
    fprintf(stderr, "  not root: cannot run a child as another user here, test not run\n");
    return true;
}

static const char *cli(void)
{
    const char *bin = getenv("GPUCOMP");
    ck_assert_msg(bin != NULL, "GPUCOMP (path of the CLI) is not set");
    return bin;
}

/* A gid that is not nobody's, neither its primary group nor one /etc/group lists it in. */
static gid_t gid_not_nobodys(void)
{
    gid_t listed[256];
    int n = 256;
    struct passwd *pw = getpwuid(NOBODY);
    if (!pw || getgrouplist(pw->pw_name, pw->pw_gid, listed, &n) < 0)
        n = 0;
    for (gid_t g = 4242; g < 60000; g++) {
        bool listed_here = g == NOBODY;
        for (int i = 0; i < n && !listed_here; i++)
            listed_here = listed[i] == g;
        if (!listed_here)
            return g;
    }
    ck_abort_msg("no group that nobody is not in");
    return 0;
}

/* A gid this process does not have, primary or supplementary. */
static gid_t gid_not_ours(void)
{
    static gid_t mine[NGROUPS_MAX];
    int n = getgroups(NGROUPS_MAX, mine);
    ck_assert_int_ge(n, 0);
    for (gid_t g = 4242; g < 60000; g++) {
        bool ours = g == getegid();
        for (int i = 0; i < n && !ours; i++)
            ours = mine[i] == g;
        if (!ours)
            return g;
    }
    ck_abort_msg("no group that we are not in");
    return 0;
}

/* Start gpucompd with args; the socket is reachable by every user, so the daemon's own check decides. */
static void start_open(const char *const *args)
{
    dut.capture_log = 1;
    test_daemon_start(&dut, args);
    ck_assert_int_eq(chmod(dut.dir, 0755), 0);
    ck_assert_int_eq(chmod(dut.socket_path, 0666), 0);
    ck_assert_int_eq(run_shell("mkdir -m 0777 %s/work", dut.dir), 0);
}

typedef struct as_user {
    uid_t uid;
    gid_t gid;
    const gid_t *groups; /* the supplementary groups the child gets (setgroups) */
    size_t n_groups;
} as_user;

/* In a child: drop to who; false if the kernel would not. */
static bool become(const as_user *who)
{
    if (setgroups(who->n_groups, who->groups) != 0 || setgid(who->gid) != 0 || setuid(who->uid) != 0)
        return false;
    (void)prctl(PR_SET_DUMPABLE, 1); /* sanitizer builds inspect themselves through ptrace */
    return true;
}

/* Wait for child, killing it after CHILD_WAIT_S; its exit status, or -1 if it did not exit. */
static int wait_child(pid_t child)
{
    int status = 0;
    for (int i = 0; i < CHILD_WAIT_S * 100; i++) {
        pid_t got = waitpid(child, &status, WNOHANG);
        if (got == child)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    ck_abort_msg("a child running as another user did not finish in %d s", CHILD_WAIT_S);
    return -1;
}

/*
 * As who: gpucomp_connect, then a ping. Returns the status of the first
 * call that failed (GPUCOMP_OK if both worked); msg gets its message.
 */
static int connect_as(const as_user *who, char *msg, size_t msg_size)
{
    int pipe_fds[2];
    ck_assert_int_eq(pipe(pipe_fds), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        close(pipe_fds[0]);
        if (!become(who))
            _exit(100);
        gpucomp_client *c = NULL;
        int rc = gpucomp_connect(dut.socket_path, &c);
        const char *m = rc == GPUCOMP_OK ? "" : gpucomp_connect_error();
        if (rc == GPUCOMP_OK && (rc = gpucomp_ping(c)) != GPUCOMP_OK)
            m = gpucomp_last_error(c);
        if (write(pipe_fds[1], m, strlen(m)) < 0)
            _exit(101);
        _exit(rc); /* _exit: no exit handlers of the test framework in this child */
    }
    close(pipe_fds[1]);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < msg_size && (n = read(pipe_fds[0], msg + got, msg_size - 1 - got)) > 0)
        got += (size_t)n;
    msg[got] = '\0';
    close(pipe_fds[0]);
    int rc = wait_child(child);
    ck_assert_msg(rc != 100, "the child could not become uid %u", (unsigned)who->uid);
    return rc;
}

/* As who, run a shell command line (in the work directory); its exit status. */
static int shell_as(const as_user *who, const char *cmd)
{
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        char work[128];
        snprintf(work, sizeof work, "%s/work", dut.dir);
        if (!become(who) || chdir(work) != 0)
            _exit(100);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int rc = wait_child(child);
    ck_assert_msg(rc != 100 && rc != 127, "the child could not run as uid %u: %d", (unsigned)who->uid, rc);
    return rc;
}

static void start_with_lists(const char *users, gid_t group)
{
    static char u[64], g[64];
    snprintf(u, sizeof u, "--allow-users=%s", users);
    snprintf(g, sizeof g, "--allow-groups=%u", (unsigned)group);
    const char *args[] = { u, g, NULL };
    start_open(args);
}

/* ---- the daemon judges the process's own groups --------------------------- */

/*
 * nobody, given the allowed group by setgroups (as sg, setpriv or systemd's
 * SupplementaryGroups= do) though /etc/group does not list it there, is
 * served; without that group, it is refused.
 */
START_TEST(test_supplementary_group_of_the_process_counts)
{
    if (skip_unless_root())
        return;
    gid_t allowed = gid_not_nobodys();
    start_with_lists("0", allowed);
    char msg[256];
    as_user with = { NOBODY, NOBODY, &allowed, 1 };
    int rc = connect_as(&with, msg, sizeof msg);
    ck_assert_msg(rc == GPUCOMP_OK, "nobody with supplementary group %u: status %d: %s", (unsigned)allowed, rc,
                  msg);

    as_user without = { NOBODY, NOBODY, NULL, 0 };
    rc = connect_as(&without, msg, sizeof msg);
    ck_assert_msg(rc == GPUCOMP_E_PERMISSION, "nobody without group %u: status %d: %s", (unsigned)allowed, rc,
                  msg);
    ck_assert_msg(strstr(msg, "uid 65534 may not use this daemon"), "message: %s", msg);

    as_user primary = { NOBODY, allowed, NULL, 0 };
    rc = connect_as(&primary, msg, sizeof msg);
    ck_assert_msg(rc == GPUCOMP_OK, "nobody with primary group %u: status %d: %s", (unsigned)allowed, rc, msg);
}
END_TEST

/* A process in many groups (more than a first guess at the buffer holds), the allowed one last. */
START_TEST(test_many_supplementary_groups)
{
    if (skip_unless_root())
        return;
    gid_t allowed = gid_not_nobodys();
    start_with_lists("0", allowed);
    enum { N = 700 };
    gid_t groups[N];
    size_t n = 0;
    for (gid_t g = 20000; n < N - 1; g++)
        if (g != allowed)
            groups[n++] = g;
    char msg[256];
    as_user without = { NOBODY, NOBODY, groups, n };
    int rc = connect_as(&without, msg, sizeof msg);
    ck_assert_msg(rc == GPUCOMP_E_PERMISSION, "%zu groups, not the allowed one: status %d: %s", n, rc, msg);
    groups[n++] = allowed;
    as_user with = { NOBODY, NOBODY, groups, n };
    rc = connect_as(&with, msg, sizeof msg);
    ck_assert_msg(rc == GPUCOMP_OK, "%zu groups, the allowed one last: status %d: %s", n, rc, msg);
}
END_TEST

/*
 * The refusal says which uid and why, truthfully: with allow-users leaving
 * root out, root is refused for not being listed (not for "not root").
 */
START_TEST(test_refusal_message_names_uid_and_lists)
{
    char users[32];
    snprintf(users, sizeof users, "%u", geteuid() == NOBODY ? NOBODY - 1u : (unsigned)NOBODY);
    start_with_lists(users, gid_not_ours());
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_E_PERMISSION);
    ck_assert_ptr_null(c);
    const char *msg = gpucomp_connect_error();
    char expect[64];
    snprintf(expect, sizeof expect, "uid %u may not use this daemon: not in allow-users", (unsigned)geteuid());
    ck_assert_msg(strstr(msg, expect), "message: %s", msg);
    ck_assert_msg(strstr(msg, "allow-groups"), "message: %s", msg);
    ck_assert_msg(!strstr(msg, "not root"), "message: %s", msg);
    /* and the log says the same */
    snprintf(expect, sizeof expect, "refused connection from uid %u", (unsigned)geteuid());
    ck_assert_int_eq(run_shell("grep -q '%s' %s", expect, dut.log_path), 0);
    ck_assert_int_eq(run_shell("grep 'refused connection' %s | grep -q 'not root'", dut.log_path), 1);
}
END_TEST

/*
 * A daemon that refuses this user never makes a program of gpucomp_open's
 * fail: its requests run in process (GPUCOMP_BACKEND_LOCAL), and why there is
 * no daemon is told.
 */
START_TEST(test_open_refused_runs_in_process)
{
    char users[32];
    snprintf(users, sizeof users, "%u", geteuid() == NOBODY ? NOBODY - 1u : (unsigned)NOBODY);
    start_with_lists(users, gid_not_ours());
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_open(dut.socket_path, &c), GPUCOMP_OK);
    ck_assert_ptr_nonnull(c);
    ck_assert_msg(strstr(gpucomp_last_error(c), "may not use this daemon"), "why: %s", gpucomp_last_error(c));
    static const char text[] = "refused, and served all the same";
    void *packed = NULL, *back = NULL;
    size_t packed_len = 0, back_len = 0;
    ck_assert_int_eq(gpucomp_compress(c, NULL, text, sizeof text, &packed, &packed_len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_LOCAL);
    ck_assert_int_eq(gpucomp_decompress(c, NULL, packed, packed_len, &back, &back_len), GPUCOMP_OK);
    ck_assert(back_len == sizeof text && memcmp(back, text, sizeof text) == 0);
    char into[64];
    size_t n = 0;
    ck_assert_int_eq(gpucomp_decompress_into(c, NULL, packed, packed_len, into, sizeof into, &n), GPUCOMP_OK);
    ck_assert(n == sizeof text && memcmp(into, text, sizeof text) == 0);
    gpucomp_free(packed);
    gpucomp_free(back);
    gpucomp_close(c);
}
END_TEST

/* ---- a refusal is not "no daemon" ----------------------------------------- */

/* The refusal line gpucomp prints for nobody at the test daemon's socket (group advice). */
static void expected_group_line(char *buf, size_t size)
{
    struct stat st;
    ck_assert_int_eq(stat(dut.socket_path, &st), 0);
    struct group *gr = getgrgid(st.st_gid);
    ck_assert_ptr_nonnull(gr);
    snprintf(buf, size,
             "gpucomp: permission denied by gpucompd at %s: add your user to group '%s' "
             "(usermod -aG %s nobody, then log in again), or use --local",
             dut.socket_path, gr->gr_name, gr->gr_name);
}

/* A file of nobody's in the work directory. */
static void nobodys_file(const char *name)
{
    ck_assert_int_eq(run_shell("cd %s/work && seq 1 20000 > %s && chown %d %s", dut.dir, name, NOBODY, name), 0);
}

/* stderr of the last command (work/err) is exactly line. */
static void assert_err_is(const char *line)
{
    char path[128];
    snprintf(path, sizeof path, "%s/work/err", dut.dir);
    size_t len = 0;
    uint8_t *got = read_file(path, &len);
    ck_assert_ptr_nonnull(got);
    char want[512];
    snprintf(want, sizeof want, "%s\n", line);
    ck_assert_msg(len == strlen(want) && memcmp(got, want, len) == 0, "stderr:\n%.*s\nwanted:\n%s", (int)len,
                  (const char *)got, want);
    free(got);
}

/*
 * gpucomp as a user the daemon refuses (its PERMISSION answer): the refusal
 * and its remedy, exit status 1, the file untouched and nothing written; the
 * same for --stats; --local still works.
 */
START_TEST(test_cli_refused_by_the_daemon)
{
    if (skip_unless_root())
        return;
    start_with_lists("0", gid_not_nobodys());
    nobodys_file("f.txt");
    char line[512], cmd[1024];
    expected_group_line(line, sizeof line);
    as_user nobody = { NOBODY, NOBODY, NULL, 0 };

    snprintf(cmd, sizeof cmd, "'%s' --socket %s f.txt 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 1);
    assert_err_is(line);
    ck_assert_int_eq(run_shell("cd %s/work && test -f f.txt && test ! -e f.txt.bz2", dut.dir), 0);

    snprintf(cmd, sizeof cmd, "'%s' -q --socket %s -c f.txt >out 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 1);
    assert_err_is(line);
    ck_assert_int_eq(run_shell("cd %s/work && test -f out && test ! -s out", dut.dir), 0);

    snprintf(cmd, sizeof cmd, "'%s' --socket %s --stats >out 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 1);
    assert_err_is(line);
    ck_assert_int_eq(run_shell("cd %s/work && test ! -s out", dut.dir), 0);

    snprintf(cmd, sizeof cmd, "'%s' --local --socket %s -k f.txt 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 0);
    ck_assert_int_eq(run_shell("cd %s/work && test ! -s err && bunzip2 -c f.txt.bz2 | cmp -s - f.txt", dut.dir),
                     0);
}
END_TEST

/*
 * The socket file itself shuts nobody out (EACCES on connect): the library
 * says PERMISSION, not CONNECT, and gpucomp refuses as above instead of
 * taking it for "no daemon" and compressing on this CPU.
 */
START_TEST(test_cli_refused_by_the_socket_file)
{
    if (skip_unless_root())
        return;
    start_open(NULL);
    nobodys_file("f.txt");
    as_user nobody = { NOBODY, NOBODY, NULL, 0 };
    char msg[256], line[512], cmd[1024];

    ck_assert_int_eq(chmod(dut.socket_path, 0660), 0); /* the group's, and nobody is not in it */
    int rc = connect_as(&nobody, msg, sizeof msg);
    ck_assert_msg(rc == GPUCOMP_E_PERMISSION, "status %d: %s", rc, msg);
    ck_assert_msg(strstr(msg, "permission denied by gpucompd at") && strstr(msg, dut.socket_path), "message: %s",
                  msg);
    expected_group_line(line, sizeof line);
    snprintf(cmd, sizeof cmd, "'%s' --socket %s f.txt 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 1);
    assert_err_is(line);
    ck_assert_int_eq(run_shell("cd %s/work && test -f f.txt && test ! -e f.txt.bz2", dut.dir), 0);

    ck_assert_int_eq(chmod(dut.socket_path, 0600), 0); /* root's alone: no group to join */
    snprintf(line, sizeof line,
             "gpucomp: permission denied by gpucompd at %s: the socket (mode 0600) admits "
             "only its owner, uid 0; ask its administrator, or use --local",
             dut.socket_path);
    snprintf(cmd, sizeof cmd, "'%s' --socket %s -c f.txt >out 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 1);
    assert_err_is(line);
    ck_assert_int_eq(run_shell("cd %s/work && test ! -s out && test ! -e f.txt.bz2", dut.dir), 0);
    snprintf(cmd, sizeof cmd, "'%s' --socket %s --stats 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 1);
    assert_err_is(line);
    /* --ping says the same */
    snprintf(cmd, sizeof cmd, "'%s' --socket %s --ping 2>err", cli(), dut.socket_path);
    ck_assert_int_eq(shell_as(&nobody, cmd), 1);
    assert_err_is(line);
}
END_TEST

static Suite *access_suite(void)
{
    Suite *s = suite_create("access");
    TCase *groups = tcase_create("groups");
    tcase_add_checked_fixture(groups, NULL, teardown);
    tcase_add_test(groups, test_supplementary_group_of_the_process_counts);
    tcase_add_test(groups, test_many_supplementary_groups);
    tcase_add_test(groups, test_refusal_message_names_uid_and_lists);
    tcase_add_test(groups, test_open_refused_runs_in_process);
    suite_add_tcase(s, groups);
    TCase *cmd = tcase_create("refused");
    tcase_add_checked_fixture(cmd, NULL, teardown);
    tcase_add_test(cmd, test_cli_refused_by_the_daemon);
    tcase_add_test(cmd, test_cli_refused_by_the_socket_file);
    suite_add_tcase(s, cmd);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(access_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
