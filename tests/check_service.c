/*
 * check_service.c - gpucompd under a service manager: readiness,
 * STATUS= and watchdog pings seen on a NOTIFY_SOCKET this test listens on,
 * SIGHUP reloading the --config file, and both signals under load: SIGTERM
 * lets every accepted request finish and refuses new connections, SIGHUP
 * drops no connection.
 */
#include <bzlib.h>
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "libclient/gpucomp.h"

/* A datagram socket at path, as systemd's NOTIFY_SOCKET. */
static int notify_listen(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    ck_assert_uint_lt(strlen(path), sizeof a.sun_path);
    strcpy(a.sun_path, path);
    unlink(path);
    ck_assert_msg(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", path, strerror(errno));
    return fd;
}

typedef struct notify_counts {
    int ready, status, watchdog;
    char last_status[512];
} notify_counts;

/* Read notifications for seconds, counting READY=1, STATUS= and WATCHDOG=1. */
static void notify_read(int fd, double seconds, notify_counts *n)
{
    double end = test_now_s() + seconds;
    for (double left; (left = end - test_now_s()) > 0;) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        char buf[1024];
        ssize_t got = recv(fd, buf, sizeof buf - 1, 0);
        if (got <= 0)
            continue;
        buf[got] = '\0';
        for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (strcmp(line, "READY=1") == 0)
                n->ready++;
            else if (strcmp(line, "WATCHDOG=1") == 0)
                n->watchdog++;
            else if (strncmp(line, "STATUS=", 7) == 0) {
                n->status++;
                snprintf(n->last_status, sizeof n->last_status, "%s", line + 7);
            }
        }
    }
}

START_TEST(watchdog_pings_at_half_the_interval)
{
    char dir[] = "/tmp/gpucomp-notify-XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/notify", dir);
    int fd = notify_listen(path);
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("WATCHDOG_USEC", "400000", 1); /* pings every 200 ms */
    test_daemon d = { 0 };
    test_daemon_start(&d, NULL);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");

    notify_counts n = { 0 };
    notify_read(fd, 2.0, &n);
    ck_assert_int_eq(n.ready, 1);
    ck_assert_int_ge(n.status, 1);
    ck_assert_msg(strstr(n.last_status, "backend") && strstr(n.last_status, "connection") &&
                      strstr(n.last_status, "in flight") && strstr(n.last_status, "memory in use"),
                  "STATUS=%s", n.last_status);
    /* 2 s at one ping per 200 ms: 10, give or take scheduling. */
    ck_assert_msg(n.watchdog >= 7 && n.watchdog <= 12, "%d WATCHDOG=1 in 2 s, expected about 10", n.watchdog);

    /* A loop that does not run sends nothing: stopped, no pings; resumed, pings again. */
    kill(d.pid, SIGSTOP);
    notify_counts stopped = { 0 };
    notify_read(fd, 0.3, &stopped); /* what was already queued */
    stopped.watchdog = 0;
    notify_read(fd, 1.0, &stopped);
    ck_assert_int_eq(stopped.watchdog, 0);
    kill(d.pid, SIGCONT);
    notify_counts resumed = { 0 };
    notify_read(fd, 1.0, &resumed);
    ck_assert_int_ge(resumed.watchdog, 3);

    ck_assert_int_eq(test_daemon_stop(&d), 0);
    test_daemon_cleanup(&d);
    close(fd);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(no_watchdog_without_watchdog_usec)
{
    char dir[] = "/tmp/gpucomp-notify-XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/notify", dir);
    int fd = notify_listen(path);
    setenv("NOTIFY_SOCKET", path, 1);
    unsetenv("WATCHDOG_USEC");
    test_daemon d = { 0 };
    test_daemon_start(&d, NULL);
    unsetenv("NOTIFY_SOCKET");
    notify_counts n = { 0 };
    notify_read(fd, 1.0, &n);
    ck_assert_int_eq(n.ready, 1);
    ck_assert_int_eq(n.watchdog, 0);
    ck_assert_int_eq(test_daemon_stop(&d), 0);
    test_daemon_cleanup(&d);
    close(fd);
    unlink(path);
    rmdir(dir);
}
END_TEST

static void write_text(const char *path, const char *text)
{
    ck_assert_int_eq(write_file(path, text, strlen(text)), 0);
}

static int log_has(const test_daemon *d, const char *needle)
{
    size_t len;
    uint8_t *log = read_file(d->log_path, &len);
    if (!log)
        return 0;
    char *text = realloc(log, len + 1);
    text[len] = '\0';
    int found = strstr(text, needle) != NULL;
    free(text);
    return found;
}

/* Seconds until the daemon closes an idle, greeted connection (capped at limit). */
static double idle_close_after(const test_daemon *d, double limit)
{
    int fd = raw_connect(d->socket_path);
    ck_assert_int_ge(fd, 0);
    Gpucomp__Frame *w = raw_hello(fd, 1);
    ck_assert_ptr_nonnull(w);
    gpucomp__frame__free_unpacked(w, NULL);
    double start = test_now_s();
    struct pollfd p = { fd, POLLIN, 0 };
    char c;
    while (test_now_s() - start < limit) {
        if (poll(&p, 1, 100) > 0 && recv(fd, &c, 1, MSG_DONTWAIT) == 0)
            break;
    }
    double took = test_now_s() - start;
    close(fd);
    return took;
}

static void hup_and_wait(const test_daemon *d, const char *log_line)
{
    kill(d->pid, SIGHUP);
    for (int i = 0; i < 100 && !log_has(d, log_line); i++)
        usleep(20000);
    ck_assert_msg(log_has(d, log_line), "no '%s' in the daemon's log after SIGHUP", log_line);
}

START_TEST(sighup_reloads_the_config_file)
{
    test_daemon d = { .capture_log = 1 };
    char conf[160];
    char conf_arg[200];
    char dir[] = "/tmp/gpucomp-conf-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(conf, sizeof conf, "%s/gpucompd.conf", dir);
    write_text(conf, "idle-timeout = 600\nworkers = 2\n");
    snprintf(conf_arg, sizeof conf_arg, "--config=%s", conf);
    const char *const args[] = { conf_arg, "--log-level", "info", NULL };
    test_daemon_start(&d, args);
    ck_assert_double_ge(idle_close_after(&d, 1.5), 1.4); /* 600 s: stays open */

    /* A live setting changes, a restart-only one is only logged; the open connection stays. */
    int kept = raw_connect(d.socket_path);
    ck_assert_int_ge(kept, 0);
    write_text(conf, "idle-timeout = 1\nworkers = 3\n");
    hup_and_wait(&d, "settings reloaded");
    ck_assert(log_has(&d, "SIGHUP: idle-timeout changed"));
    ck_assert(log_has(&d, "SIGHUP: workers changed: takes effect after a restart"));
    ck_assert_double_lt(idle_close_after(&d, 5.0), 3.0); /* idle sweep once a second */

    /* A file that does not parse keeps every current setting. */
    write_text(conf, "idle-timeout = banana\n");
    hup_and_wait(&d, "keeping the current ones");
    ck_assert(log_has(&d, "invalid value 'banana' for idle-timeout"));
    ck_assert_double_lt(idle_close_after(&d, 5.0), 3.0);

    /* Back to a long timeout: a valid file after a bad one is taken. */
    write_text(conf, "idle-timeout = 600\nworkers = 2\n");
    kill(d.pid, SIGHUP);
    usleep(300000);
    ck_assert_double_ge(idle_close_after(&d, 2.5), 2.4);
    ck_assert_int_eq(kill(d.pid, 0), 0);

    close(kept);
    ck_assert_int_eq(test_daemon_stop(&d), 0);
    test_daemon_cleanup(&d);
    unlink(conf);
    rmdir(dir);
}
END_TEST

/* ---- signals under load ---------------------------------------------------- */

#define LOAD_CLIENTS 4
#define LOAD_BYTES (3u << 20) /* text-like: about 0.2 s of bzip2 -9 on one thread */

typedef struct load_client {
    const char *socket_path;
    const uint8_t *data;
    size_t len;
    gpucomp_client *c; /* connected by the test before the thread starts */
    int rc;            /* of the compress */
    int second_rc;     /* of a second request on the same connection (SIGHUP test) */
    int verified;      /* the answer decompresses (libbz2) to the input */
    int do_second;
} load_client;

static int bz2_matches(const void *packed, size_t packed_len, const uint8_t *want, size_t want_len)
{
    unsigned out_len = (unsigned)want_len + 1;
    char *out = malloc(out_len);
    if (!out)
        return 0;
    int ok = BZ2_bzBuffToBuffDecompress(out, &out_len, (char *)packed, (unsigned)packed_len, 0, 0) == BZ_OK &&
             out_len == want_len && memcmp(out, want, want_len) == 0;
    free(out);
    return ok;
}

static void *load_thread(void *arg)
{
    load_client *l = arg;
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    void *out = NULL;
    size_t out_len = 0;
    l->rc = gpucomp_compress(l->c, &o, l->data, l->len, &out, &out_len);
    if (l->rc == GPUCOMP_OK)
        l->verified = bz2_matches(out, out_len, l->data, l->len);
    gpucomp_free(out);
    if (l->do_second && l->rc == GPUCOMP_OK) {
        out = NULL;
        l->second_rc = gpucomp_compress(l->c, &o, l->data, 100000, &out, &out_len);
        gpucomp_free(out);
    }
    return NULL;
}

/* Requests the daemon has taken in (finished or at the workers), from its counters. */
static uint64_t accepted_requests(const char *socket_path, uint64_t base)
{
    gpucomp_client *c = NULL;
    if (gpucomp_connect(socket_path, &c) != GPUCOMP_OK)
        return 0;
    gpucomp_stats st;
    uint64_t n = 0;
    if (gpucomp_stats_get(c, &st) == GPUCOMP_OK)
        n = st.requests_ok + st.requests_failed + st.queue_depth - base;
    gpucomp_close(c);
    return n;
}

/* Start LOAD_CLIENTS compress requests on one-worker daemon d; return when all are taken in. */
static void start_load(const test_daemon *d, load_client *l, pthread_t *t, uint8_t *data, int do_second)
{
    uint64_t base = accepted_requests(d->socket_path, 0); /* nothing at the workers yet */
    for (int i = 0; i < LOAD_CLIENTS; i++) {
        l[i] = (load_client){ .socket_path = d->socket_path,
                              .data = data,
                              .len = LOAD_BYTES,
                              .rc = -1,
                              .second_rc = -1,
                              .do_second = do_second };
        ck_assert_int_eq(gpucomp_connect(d->socket_path, &l[i].c), GPUCOMP_OK);
    }
    for (int i = 0; i < LOAD_CLIENTS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, load_thread, &l[i]), 0);
    uint64_t seen = 0;
    for (int i = 0; i < 500 && (seen = accepted_requests(d->socket_path, base)) < LOAD_CLIENTS; i++)
        usleep(10000);
    ck_assert_msg(seen >= LOAD_CLIENTS, "only %llu of %d requests reached the daemon", (unsigned long long)seen,
                  LOAD_CLIENTS);
}

static void wait_for_log(const test_daemon *d, const char *line, double seconds)
{
    double end = test_now_s() + seconds;
    while (!log_has(d, line) && test_now_s() < end)
        usleep(5000);
    ck_assert_msg(log_has(d, line), "no '%s' in the daemon's log", line);
}

START_TEST(sigterm_finishes_accepted_requests_and_refuses_new_ones)
{
    uint8_t *data = malloc(LOAD_BYTES);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, LOAD_BYTES, 2, 17);
    test_daemon d = { .capture_log = 1 };
    /* One worker, one codec thread: the requests queue up behind each other. */
    const char *const args[] = { "--workers=1", "--codec-threads=1", "--gpu=off", "--log-level", "info", NULL };
    test_daemon_start(&d, args);
    load_client l[LOAD_CLIENTS];
    pthread_t t[LOAD_CLIENTS];
    start_load(&d, l, t, data, 0);

    double sent = test_now_s();
    kill(d.pid, SIGTERM);
    wait_for_log(&d, "finishing in-flight requests", 2.0);
    /* A new client during the drain is refused, and at once: no waiting for the exit. */
    double t0 = test_now_s();
    gpucomp_client *late = NULL;
    int late_rc = gpucomp_connect(d.socket_path, &late);
    double late_s = test_now_s() - t0;
    ck_assert_msg(late_rc != GPUCOMP_OK, "a connection made after SIGTERM was served");
    ck_assert_ptr_null(late);
    ck_assert_msg(late_s < 0.5, "refusing the new connection took %.2f s", late_s);

    for (int i = 0; i < LOAD_CLIENTS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(l[i].rc == GPUCOMP_OK, "client %d: %s (%s)", i, gpucomp_strerror(l[i].rc),
                      gpucomp_last_error(l[i].c));
        ck_assert_msg(l[i].verified, "client %d: the answer is not its input, compressed", i);
        gpucomp_close(l[i].c);
    }
    /* Exits once drained: well inside its 10 s grace, and with status 0. */
    int status = -1;
    double end = test_now_s() + 15;
    while (test_now_s() < end && waitpid(d.pid, &status, WNOHANG) != d.pid)
        usleep(10000);
    double took = test_now_s() - sent;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "gpucompd did not exit cleanly after SIGTERM");
    d.pid = 0;
    ck_assert_msg(took < 10.0, "gpucompd took %.1f s to exit after SIGTERM", took);
    test_daemon_cleanup(&d);
    free(data);
}
END_TEST

START_TEST(sighup_under_load_drops_no_connection)
{
    uint8_t *data = malloc(LOAD_BYTES);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, LOAD_BYTES, 2, 18);
    test_daemon d = { .capture_log = 1 };
    char conf[160], conf_arg[200], dir[] = "/tmp/gpucomp-conf-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(conf, sizeof conf, "%s/gpucompd.conf", dir);
    write_text(conf, "max-request = 64M\n");
    snprintf(conf_arg, sizeof conf_arg, "--config=%s", conf);
    const char *const args[] = { conf_arg, "--workers=1", "--codec-threads=1", "--gpu=off", "--log-level",
                                 "info",   NULL };
    test_daemon_start(&d, args);
    gpucomp_client *idle = NULL; /* connected, nothing in flight */
    ck_assert_int_eq(gpucomp_connect(d.socket_path, &idle), GPUCOMP_OK);
    ck_assert_uint_eq(gpucomp_max_request_size(idle), 64u << 20);

    load_client l[LOAD_CLIENTS];
    pthread_t t[LOAD_CLIENTS];
    start_load(&d, l, t, data, 1);
    write_text(conf, "max-request = 1M\n");
    kill(d.pid, SIGHUP);
    wait_for_log(&d, "settings reloaded", 2.0);
    ck_assert(log_has(&d, "SIGHUP: max-request changed"));

    /* Every request in flight finishes, and each connection serves another one. */
    for (int i = 0; i < LOAD_CLIENTS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(l[i].rc == GPUCOMP_OK, "client %d: %s (%s)", i, gpucomp_strerror(l[i].rc),
                      gpucomp_last_error(l[i].c));
        ck_assert_msg(l[i].verified, "client %d: the answer is not its input, compressed", i);
        ck_assert_msg(l[i].second_rc == GPUCOMP_OK, "client %d after SIGHUP: %s", i,
                      gpucomp_strerror(l[i].second_rc));
        gpucomp_close(l[i].c);
    }
    ck_assert_int_eq(gpucomp_ping(idle), GPUCOMP_OK);
    /* The new limit holds: a new connection is told 1 MiB, and 3 MiB is refused. */
    gpucomp_client *fresh = NULL;
    ck_assert_int_eq(gpucomp_connect(d.socket_path, &fresh), GPUCOMP_OK);
    ck_assert_uint_eq(gpucomp_max_request_size(fresh), 1u << 20);
    void *out = NULL;
    size_t out_len = 0;
    ck_assert_int_eq(gpucomp_compress(fresh, NULL, data, LOAD_BYTES, &out, &out_len), GPUCOMP_E_LIMIT);
    gpucomp_close(fresh);
    gpucomp_close(idle);
    ck_assert_int_eq(test_daemon_stop(&d), 0);
    test_daemon_cleanup(&d);
    unlink(conf);
    rmdir(dir);
    free(data);
}
END_TEST

static Suite *service_suite(void)
{
    Suite *s = suite_create("service");
    TCase *t = tcase_create("notify");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, watchdog_pings_at_half_the_interval);
    tcase_add_test(t, no_watchdog_without_watchdog_usec);
    tcase_add_test(t, sighup_reloads_the_config_file);
    suite_add_tcase(s, t);
    TCase *load = tcase_create("signals under load");
    tcase_set_timeout(load, 120);
    tcase_add_test(load, sigterm_finishes_accepted_requests_and_refuses_new_ones);
    tcase_add_test(load, sighup_under_load_drops_no_connection);
    suite_add_tcase(s, load);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(service_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
