/*
 * check_async.c - libgpucomp-client's asynchronous requests, cancellation,
 * time limits and reconnection (gpucomp.h) against a real gpucompd.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "gpucomp.h"
#include "wire.h"

#include <sys/socket.h>
#include <sys/un.h>

static test_daemon dut;

static void start_again(void);

static void teardown(void)
{
    if (dut.pid > 0)
        kill(dut.pid, SIGCONT); /* a test that failed while the daemon was stopped */
    test_daemon_cleanup(&dut);
}

static gpucomp_client *connect_or_fail(void)
{
    gpucomp_client *c = NULL;
    int rc = gpucomp_connect(dut.socket_path, &c);
    ck_assert_msg(rc == GPUCOMP_OK, "connect: %s", gpucomp_connect_error());
    return c;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Poll c until nothing is outstanding (at most limit_ms), asserting that no poll fails. */
static void drain(gpucomp_client *c, int limit_ms)
{
    int64_t end = now_ms() + limit_ms;
    while (gpucomp_async_pending(c) > 0) {
        int rc = gpucomp_async_poll(c, 100);
        ck_assert_msg(rc >= 0, "gpucomp_async_poll: %d (%s)", rc, gpucomp_last_error(c));
        ck_assert_msg(now_ms() < end, "%u requests still outstanding after %d ms", gpucomp_async_pending(c),
                      limit_ms);
    }
}

/* ---- many threads, compress then decompress in the callbacks ------------- */

#define THREADS 8
#define PER_THREAD 50

typedef struct job {
    gpucomp_client *c;
    uint8_t *data;
    size_t len;
    gpucomp_codec codec;
    int state; /* 0 submitted, 1 compressed (decompress submitted), 2 verified, -1 failed */
    char why[160];
} job;

static struct {
    pthread_t poller;
    atomic_int in_callback, overlapped, wrong_thread, finished;
} mt;

static void job_fail(job *j, const char *fmt, const char *detail)
{
    j->state = -1;
    snprintf(j->why, sizeof j->why, fmt, detail);
    atomic_fetch_add(&mt.finished, 1);
}

static void enter_callback(void)
{
    if (atomic_fetch_add(&mt.in_callback, 1) != 0)
        atomic_fetch_add(&mt.overlapped, 1);
    if (!pthread_equal(pthread_self(), mt.poller))
        atomic_fetch_add(&mt.wrong_thread, 1);
}

static void decompressed(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    job *j = arg;
    enter_callback();
    (void)id;
    if (status != GPUCOMP_OK)
        job_fail(j, "decompress failed: %s", msg);
    else if (out_len != j->len || (out_len && memcmp(out, j->data, out_len) != 0))
        job_fail(j, "%s", "the round trip differs");
    else {
        j->state = 2;
        atomic_fetch_add(&mt.finished, 1);
    }
    atomic_fetch_sub(&mt.in_callback, 1);
}

static void compressed(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    job *j = arg;
    enter_callback();
    (void)id;
    if (status != GPUCOMP_OK) {
        job_fail(j, "compress failed: %s", msg);
    } else {
        /* A callback may submit; out is copied before gpucomp_submit returns. */
        gpucomp_options o;
        gpucomp_options_init(&o, j->codec);
        j->state = 1;
        int rc = gpucomp_submit(j->c, GPUCOMP_DECOMPRESS, &o, out, out_len, decompressed, j, NULL);
        if (rc != GPUCOMP_OK)
            job_fail(j, "decompress submit failed: %s", gpucomp_strerror(rc));
    }
    atomic_fetch_sub(&mt.in_callback, 1);
}

typedef struct submitter {
    gpucomp_client *c;
    job *jobs;
    int index;
    int failures;
} submitter;

static void *submit_thread(void *arg)
{
    submitter *s = arg;
    static const size_t sizes[] = { 0, 1, 700, 5000, 16u << 10, 40000, 100000, 300000 };
    for (int i = 0; i < PER_THREAD; i++) {
        job *j = &s->jobs[i];
        j->c = s->c;
        j->len = sizes[(i + s->index) % (sizeof sizes / sizeof *sizes)];
        j->data = malloc(j->len ? j->len : 1);
        fill_test_data(j->data, j->len, (i + s->index) % 3, (uint64_t)(s->index * 1000 + i));
        j->codec = (i + s->index) % 2 ? GPUCOMP_CODEC_BZIP2 : GPUCOMP_CODEC_RLE;
        gpucomp_options o;
        gpucomp_options_init(&o, j->codec);
        uint64_t id = 0;
        int rc = gpucomp_submit(s->c, GPUCOMP_COMPRESS, &o, j->data, j->len, compressed, j, &id);
        if (rc != GPUCOMP_OK || id == 0) {
            s->failures++;
            job_fail(j, "submit failed: %s", gpucomp_strerror(rc));
        }
    }
    return NULL;
}

START_TEST(test_many_threads_round_trips)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    memset(&mt, 0, sizeof mt);
    mt.poller = pthread_self();
    submitter subs[THREADS];
    job *jobs = calloc(THREADS * PER_THREAD, sizeof *jobs);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        subs[t] = (submitter){ .c = c, .jobs = jobs + t * PER_THREAD, .index = t };
        ck_assert_int_eq(pthread_create(&th[t], NULL, submit_thread, &subs[t]), 0);
    }
    /* Poll while the threads submit: gpucomp_submit waits when the daemon stops reading. */
    int64_t end = now_ms() + 90000;
    while (atomic_load(&mt.finished) < THREADS * PER_THREAD) {
        int rc = gpucomp_async_poll(c, 50);
        ck_assert_msg(rc >= 0, "gpucomp_async_poll: %d (%s)", rc, gpucomp_last_error(c));
        ck_assert_msg(now_ms() < end, "only %d of %d jobs finished", atomic_load(&mt.finished),
                      THREADS * PER_THREAD);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        ck_assert_int_eq(subs[t].failures, 0);
    }
    for (int i = 0; i < THREADS * PER_THREAD; i++) {
        ck_assert_msg(jobs[i].state == 2, "job %d (%zu bytes, codec %d): %s", i, jobs[i].len, (int)jobs[i].codec,
                      jobs[i].why);
        free(jobs[i].data);
    }
    free(jobs);
    ck_assert_uint_eq(gpucomp_async_pending(c), 0);
    ck_assert_int_eq(atomic_load(&mt.overlapped), 0);
    ck_assert_int_eq(atomic_load(&mt.wrong_thread), 0);
    /* Nothing outstanding: poll returns at once with nothing run. */
    ck_assert_int_eq(gpucomp_async_poll(c, -1), 0);
    /* Nothing outstanding any more: blocking calls work again. */
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
}
END_TEST

/* ---- gpucomp_async_fd in the caller's own poll() loop --------------------- */

typedef struct simple {
    int calls;
    int status;
    size_t len;
    uint8_t first;
    uint64_t id;
} simple;

static void note(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    simple *s = arg;
    (void)msg;
    s->calls++;
    s->status = status;
    s->len = out_len;
    s->id = id;
    s->first = out_len ? *(const uint8_t *)out : 0;
}

/* A callback that polls its own client, and what that poll answered. */
typedef struct repoll {
    gpucomp_client *c;
    int calls;
    int rc;
} repoll;

static void poll_again(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    repoll *r = arg;
    (void)id, (void)status, (void)msg, (void)out, (void)out_len;
    r->calls++;
    r->rc = gpucomp_async_poll(r->c, 0);
}

/* gpucomp_async_poll from one of the client's own callbacks: IN_USE, not BUSY. */
START_TEST(test_poll_from_callback_is_in_use)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    repoll r = { .c = c };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, "abc", 3, poll_again, &r, NULL), GPUCOMP_OK);
    drain(c, 30000);
    ck_assert_int_eq(r.calls, 1);
    ck_assert_int_eq(r.rc, -GPUCOMP_E_IN_USE);
    gpucomp_close(c);
}
END_TEST

START_TEST(test_async_fd_with_poll)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    /* Before any submission, the descriptor is already the connection's. */
    ck_assert_int_ge(gpucomp_async_fd(c), 0);
    enum { N = 12 };
    simple res[N];
    uint64_t ids[N];
    memset(res, 0, sizeof res);
    uint8_t *data = malloc(64u << 10);
    fill_test_data(data, 64u << 10, 1, 7);
    for (int i = 0; i < N; i++) {
        size_t len = i % 2 ? 64u << 10 : 1000; /* half over the memfd threshold */
        ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, data, len, note, &res[i], &ids[i]), GPUCOMP_OK);
        for (int k = 0; k < i; k++)
            ck_assert(ids[k] != ids[i]);
    }
    ck_assert_uint_eq(gpucomp_async_pending(c), N);
    int ran = 0, loops = 0;
    while (gpucomp_async_pending(c) > 0) {
        struct pollfd p = { .fd = gpucomp_async_fd(c), .events = POLLIN };
        ck_assert_int_ge(p.fd, 0);
        int n = poll(&p, 1, 10000);
        ck_assert_msg(n == 1, "the async descriptor did not become readable with %u outstanding",
                      gpucomp_async_pending(c));
        int rc = gpucomp_async_poll(c, 0);
        ck_assert_int_ge(rc, 0);
        ran += rc;
        ck_assert_int_lt(++loops, 10000);
    }
    ck_assert_int_eq(ran, N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(res[i].calls, 1);
        ck_assert_int_eq(res[i].status, GPUCOMP_OK);
        ck_assert_uint_eq(res[i].id, ids[i]);
        ck_assert_uint_gt(res[i].len, 10);
        ck_assert_int_eq(res[i].first, 'B'); /* "BZh9" */
    }
    /* The async results are bzip2 streams the blocking API decompresses. */
    free(data);
    gpucomp_close(c);
}
END_TEST

/* ---- blocking calls while async requests are outstanding ------------------ */

/*
 * The client's own asynchronous requests make its blocking calls fail with
 * IN_USE (retrying cannot help until they are done), not with the daemon's
 * BUSY ("retry later").
 */
START_TEST(test_blocking_call_is_in_use_during_async)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    size_t len = 1u << 20;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 2, 3);
    simple res = { 0 };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, data, len, note, &res, NULL), GPUCOMP_OK);
    /* Nobody polled: the request is outstanding whatever the daemon did. */
    ck_assert_uint_eq(gpucomp_async_pending(c), 1);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IN_USE);
    ck_assert_msg(strstr(gpucomp_last_error(c), "asynchronous requests") &&
                      strstr(gpucomp_last_error(c), "another client"),
                  "message: %s", gpucomp_last_error(c));
    void *out = NULL;
    size_t out_len = 0;
    ck_assert_int_eq(gpucomp_compress(c, NULL, data, 10, &out, &out_len), GPUCOMP_E_IN_USE);
    ck_assert_ptr_null(out);
    gpucomp_stream *s = NULL;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, NULL, &s), GPUCOMP_E_IN_USE);
    ck_assert_ptr_null(s);
    drain(c, 30000);
    ck_assert_int_eq(res.calls, 1);
    ck_assert_int_eq(res.status, GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    /* Bad arguments fail at once, with no callback. */
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, data, len, NULL, NULL, NULL), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_submit(c, (gpucomp_direction)7, NULL, data, len, note, &res, NULL),
                     GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_cancel(c, 12345), GPUCOMP_E_INVALID);
    ck_assert_uint_eq(gpucomp_async_pending(c), 0);
    /* A corrupt input completes with the daemon's error, the connection stays usable. */
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    simple bad = { 0 };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_DECOMPRESS, &o, "BZh9 not really", 15, note, &bad, NULL),
                     GPUCOMP_OK);
    drain(c, 30000);
    ck_assert_int_eq(bad.calls, 1);
    ck_assert(bad.status != GPUCOMP_OK && bad.status != GPUCOMP_E_IO);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* ---- gpucomp_close with requests outstanding: no callbacks ---------------- */

START_TEST(test_close_with_outstanding)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    size_t len = 256u << 10;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 0, 5);
    simple res = { 0 };
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, data, i % 2 ? len : 100, note, &res, NULL),
                         GPUCOMP_OK);
    ck_assert_uint_eq(gpucomp_async_pending(c), 8);
    gpucomp_close(c);
    ck_assert_int_eq(res.calls, 0);
    /* The daemon is unharmed. */
    c = connect_or_fail();
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
    free(data);
}
END_TEST

/* ---- a daemon that breaks the protocol ------------------------------------- */

/*
 * A fake gpucompd on its own thread: handshake, read two requests, then send
 * `answer` (a Response with an id nothing asked for, or a connection-level
 * error), and hold the connection until the client closes it.
 */
typedef struct fake {
    char dir[64], path[108];
    int listen_fd;
    pthread_t thread;
    Gpucomp__Response answer;
    int requests_seen;
} fake;

static void fake_send(int fd, const Gpucomp__Frame *f)
{
    size_t size = gc_wire_packed_size(f);
    uint8_t *buf = malloc(size);
    gc_wire_pack(f, buf);
    size_t off = 0;
    while (off < size) {
        ssize_t n = send(fd, buf + off, size - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    free(buf);
}

static void *fake_main(void *arg)
{
    fake *fk = arg;
    int fd = accept(fk->listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    Gpucomp__Frame *hello = raw_recv(fd, 1 << 20);
    gc_wire_free(hello);
    Gpucomp__Welcome w = GPUCOMP__WELCOME__INIT;
    w.protocol_version = GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
    w.max_frame_size = 1 << 20;
    w.server_version = (char *)"fake";
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_WELCOME;
    f.welcome = &w;
    fake_send(fd, &f);
    for (int i = 0; i < 2; i++) {
        Gpucomp__Frame *req = raw_recv(fd, 1 << 20);
        if (req && req->body_case == GPUCOMP__FRAME__BODY_REQUEST)
            fk->requests_seen++;
        gc_wire_free(req);
    }
    Gpucomp__Frame r = GPUCOMP__FRAME__INIT;
    r.body_case = GPUCOMP__FRAME__BODY_RESPONSE;
    r.response = &fk->answer;
    fake_send(fd, &r);
    char sink[256];
    while (recv(fd, sink, sizeof sink, 0) > 0)
        ;
    close(fd);
    return NULL;
}

static void fake_start(fake *fk)
{
    snprintf(fk->dir, sizeof fk->dir, "/tmp/check_async.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fk->dir));
    snprintf(fk->path, sizeof fk->path, "%s/sock", fk->dir);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strcpy(sa.sun_path, fk->path);
    fk->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fk->listen_fd, 0);
    ck_assert_int_eq(bind(fk->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fk->listen_fd, 4), 0);
    ck_assert_int_eq(pthread_create(&fk->thread, NULL, fake_main, fk), 0);
}

static void fake_finish(fake *fk)
{
    pthread_join(fk->thread, NULL);
    close(fk->listen_fd);
    unlink(fk->path);
    rmdir(fk->dir);
}

typedef struct failed_call {
    int calls;
    int status;
    char msg[200];
} failed_call;

static void record_failure(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    failed_call *fc = arg;
    (void)id;
    (void)out;
    (void)out_len;
    fc->calls++;
    fc->status = status;
    snprintf(fc->msg, sizeof fc->msg, "%s", msg);
}

/* Two requests outstanding, then the fake's answer: both complete with want_status, the connection closes. */
static void expect_connection_failure(fake *fk, int want_status, const char *want_msg)
{
    fake_start(fk);
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(fk->path, &c), GPUCOMP_OK);
    failed_call a = { 0 }, b = { 0 };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, "abc", 3, record_failure, &a, NULL), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, "def", 3, record_failure, &b, NULL), GPUCOMP_OK);
    int rc, loops = 0;
    while ((rc = gpucomp_async_poll(c, 5000)) == 0)
        ck_assert_int_lt(++loops, 4);
    ck_assert_int_eq(rc, -GPUCOMP_E_IO);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(a.status, want_status);
    ck_assert_int_eq(b.status, want_status);
    ck_assert_msg(strstr(a.msg, want_msg) != NULL, "message: %s", a.msg);
    ck_assert_uint_eq(gpucomp_async_pending(c), 0);
    ck_assert_int_eq(gpucomp_async_fd(c), -1);
    ck_assert_int_eq(gpucomp_async_poll(c, 0), -GPUCOMP_E_IO);
    gpucomp_close(c);
    fake_finish(fk);
    ck_assert_int_eq(fk->requests_seen, 2);
}

START_TEST(test_answer_to_unknown_id)
{
    fake fk = { .answer = GPUCOMP__RESPONSE__INIT };
    fk.answer.id = 999;
    fk.answer.last = true;
    expect_connection_failure(&fk, GPUCOMP_E_IO, "request id 999, which is not outstanding");
}
END_TEST

START_TEST(test_connection_level_error)
{
    fake fk = { .answer = GPUCOMP__RESPONSE__INIT };
    fk.answer.id = 0;
    fk.answer.status = GPUCOMP__STATUS__STATUS_LIMIT;
    fk.answer.message = (char *)"idle for too long";
    fk.answer.last = true;
    expect_connection_failure(&fk, GPUCOMP_E_LIMIT, "idle for too long");
}
END_TEST

/* ---- cancellation ----------------------------------------------------------- */

START_TEST(test_cancel_large_bzip2)
{
    const char *args[] = { "--workers", "1", "--codec-threads", "1", NULL };
    test_daemon_start(&dut, args);
    gpucomp_client *c = connect_or_fail();
    size_t len = 64u << 20;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 0, 11);
    simple res = { 0 };
    uint64_t id = 0;
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    int64_t t0 = now_ms();
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, &o, data, len, note, &res, &id), GPUCOMP_OK);
    ck_assert_uint_ne(id, 0);
    usleep(100 * 1000);
    ck_assert_int_eq(gpucomp_cancel(c, id), GPUCOMP_OK);
    drain(c, 60000);
    int64_t took = now_ms() - t0;
    ck_assert_int_eq(res.calls, 1);
    ck_assert_uint_eq(res.id, id);
    ck_assert_msg(res.status == GPUCOMP_E_CANCELLED || res.status == GPUCOMP_OK,
                  "cancelled request completed with %d (%s)", res.status, gpucomp_strerror(res.status));
    fprintf(stderr, "cancel: status %s after %lld ms\n", gpucomp_strerror(res.status), (long long)took);
    /* Once completed it is no longer outstanding. */
    ck_assert_int_eq(gpucomp_cancel(c, id), GPUCOMP_E_INVALID);
    /* The connection goes on serving. */
    simple after = { 0 };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, &o, data, 1000, note, &after, NULL), GPUCOMP_OK);
    drain(c, 60000);
    ck_assert_int_eq(after.status, GPUCOMP_OK);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* ---- reconnection ----------------------------------------------------------- */

/* Start a new daemon on the harness daemon's socket path (the old one is gone). */
static void start_again(void)
{
    const char *bin = getenv("GPUCOMPD");
    ck_assert_ptr_nonnull(bin);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl(bin, bin, "--socket", dut.socket_path, "--log-level", "warning", (char *)NULL);
        _exit(127);
    }
    dut.pid = pid;
    for (int i = 0; i < 1000; i++) {
        int fd = raw_connect(dut.socket_path);
        if (fd >= 0) {
            close(fd);
            return;
        }
        int status;
        ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "gpucompd exited during startup");
        usleep(10 * 1000);
    }
    ck_abort_msg("the restarted gpucompd did not listen on %s", dut.socket_path);
}

/* Stop the harness daemon and start a new one on the same socket path. */
static void restart_daemon(void)
{
    ck_assert_int_eq(test_daemon_stop(&dut), 0);
    start_again();
}

static void round_trip_ok(gpucomp_client *c)
{
    const char text[] = "reconnected, reconnected, reconnected";
    void *packed = NULL, *plain = NULL;
    size_t packed_len = 0, plain_len = 0;
    int rc = gpucomp_compress(c, NULL, text, sizeof text, &packed, &packed_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
    rc = gpucomp_decompress(c, NULL, packed, packed_len, &plain, &plain_len);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(plain_len, sizeof text);
    ck_assert_int_eq(memcmp(plain, text, sizeof text), 0);
    gpucomp_free(packed);
    gpucomp_free(plain);
}

START_TEST(test_reconnect_after_restart)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);

    restart_daemon();
    /* The old connection is dead; the call reconnects and resends. */
    ck_assert_msg(gpucomp_ping(c) == GPUCOMP_OK, "ping after restart: %s", gpucomp_last_error(c));
    round_trip_ok(c);

    restart_daemon();
    round_trip_ok(c); /* the first call after a restart is a compress */
    /* Large inputs (memfd transport) too. */
    restart_daemon();
    size_t len = 1u << 20;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 1, 9);
    void *out = NULL;
    size_t out_len = 0;
    ck_assert_msg(gpucomp_compress(c, NULL, data, len, &out, &out_len) == GPUCOMP_OK, "%s", gpucomp_last_error(c));
    gpucomp_free(out);
    free(data);

    /* Reconnection off: the broken connection is an error. */
    restart_daemon();
    gpucomp_set_reconnect(c, 0);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO); /* and stays one */
    /* On again: the closed connection is opened by the next call. */
    gpucomp_set_reconnect(c, 1);
    ck_assert_msg(gpucomp_ping(c) == GPUCOMP_OK, "ping after turning reconnect on: %s", gpucomp_last_error(c));

    /* No daemon at all: IO, saying that reconnecting failed. */
    ck_assert_int_eq(test_daemon_stop(&dut), 0);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    ck_assert_msg(strstr(gpucomp_last_error(c), "reconnecting failed") != NULL, "%s", gpucomp_last_error(c));
    gpucomp_close(c);
}
END_TEST

/* Asynchronous requests are not resent: a restart fails them with IO. */
START_TEST(test_async_not_resent)
{
    const char *args[] = { "--workers", "1", "--codec-threads", "1", NULL };
    test_daemon_start(&dut, args);
    gpucomp_client *c = connect_or_fail();
    size_t len = 16u << 20;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 0, 13);
    simple res = { 0 };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, data, len, note, &res, NULL), GPUCOMP_OK);
    kill(dut.pid, SIGKILL);
    /* The poll that finds the connection gone completes everything with IO and says so. */
    int rc;
    int64_t end = now_ms() + 30000;
    while ((rc = gpucomp_async_poll(c, 100)) == 0)
        ck_assert_int_lt(now_ms(), end);
    ck_assert_int_eq(rc, -GPUCOMP_E_IO);
    ck_assert_uint_eq(gpucomp_async_pending(c), 0);
    ck_assert_int_eq(res.calls, 1);
    ck_assert_int_eq(res.status, GPUCOMP_E_IO);
    ck_assert_int_eq(gpucomp_async_fd(c), -1);
    ck_assert_int_eq(gpucomp_async_poll(c, 0), -GPUCOMP_E_IO);
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, data, 10, note, &res, NULL), GPUCOMP_E_IO);
    ck_assert_int_eq(res.calls, 1);
    /* A blocking call reconnects; asynchronous requests then use the new connection. */
    test_daemon_stop(&dut); /* reaps the killed daemon */
    start_again();
    ck_assert_msg(gpucomp_ping(c) == GPUCOMP_OK, "ping: %s", gpucomp_last_error(c));
    simple again = { 0 };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, data, 100000, note, &again, NULL), GPUCOMP_OK);
    drain(c, 30000);
    ck_assert_int_eq(again.calls, 1);
    ck_assert_int_eq(again.status, GPUCOMP_OK);
    ck_assert_int_ge(gpucomp_async_fd(c), 0);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* One async round trip on c that must succeed. */
static void async_round_trip_ok(gpucomp_client *c)
{
    simple res = { 0 };
    const char text[] = "async after a restart, async after a restart";
    int rc = gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, text, sizeof text, note, &res, NULL);
    ck_assert_msg(rc == GPUCOMP_OK, "submit: %s", gpucomp_last_error(c));
    drain(c, 30000);
    ck_assert_int_eq(res.calls, 1);
    ck_assert_int_eq(res.status, GPUCOMP_OK);
    ck_assert_int_eq(res.first, 'B');
}

/*
 * An event loop on gpucomp_async_fd: poll() it for up to ms, running
 * gpucomp_async_poll whenever it is readable. Returns the loop's turns;
 * *io counts the polls that said -GPUCOMP_E_IO (no other error allowed).
 */
static int event_loop(gpucomp_client *c, int ms, int *io)
{
    int turns = 0;
    int64_t end = now_ms() + ms;
    for (int64_t left; (left = end - now_ms()) > 0; turns++) {
        struct pollfd p = { .fd = gpucomp_async_fd(c), .events = POLLIN };
        if (poll(&p, 1, (int)left) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        int rc = gpucomp_async_poll(c, 0);
        ck_assert_msg(rc == 0 || rc == -GPUCOMP_E_IO, "gpucomp_async_poll: %d", rc);
        *io += rc == -GPUCOMP_E_IO;
        ck_assert_int_lt(turns, 100000); /* a spinning loop: fail before the test's time is up */
    }
    return turns;
}

/*
 * The daemon restarts while nothing is outstanding: the descriptor turns
 * readable, the poll says IO once and closes the connection, an event loop
 * does not spin, and the next submission reconnects by itself.
 */
START_TEST(test_async_restart_while_idle)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    async_round_trip_ok(c);

    restart_daemon();
    int io = 0, turns = event_loop(c, 2000, &io);
    ck_assert_int_eq(io, 1);
    ck_assert_int_eq(gpucomp_async_fd(c), -1);
    ck_assert_msg(turns < 50, "the event loop turned %d times in 2 s", turns);
    io = 0;
    turns = event_loop(c, 200, &io); /* nothing more to report, nothing readable */
    ck_assert_int_eq(io, 0);
    ck_assert_msg(turns <= 2, "the event loop turned %d times in 200 ms", turns);
    async_round_trip_ok(c);
    ck_assert_int_ge(gpucomp_async_fd(c), 0);

    /* A submission that finds the connection hung up before any poll did reconnects too. */
    restart_daemon();
    usleep(100 * 1000);
    async_round_trip_ok(c);

    /* Reconnection off: reported once, and the client stays closed. */
    gpucomp_set_reconnect(c, 0);
    restart_daemon();
    io = 0;
    event_loop(c, 2000, &io);
    ck_assert_int_eq(io, 1);
    simple res = { 0 };
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, "x", 1, note, &res, NULL), GPUCOMP_E_IO);
    ck_assert_int_eq(res.calls, 0);
    gpucomp_close(c);
}
END_TEST

/* ---- time limits ------------------------------------------------------------ */

START_TEST(test_timeout_against_stopped_daemon)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *c = connect_or_fail();
    const unsigned limit = 300;
    gpucomp_set_timeout(c, limit);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    ck_assert_int_eq(kill(dut.pid, SIGSTOP), 0);
    int64_t t0 = now_ms();
    int rc = gpucomp_ping(c);
    int64_t took = now_ms() - t0;
    ck_assert_int_eq(kill(dut.pid, SIGCONT), 0);
    ck_assert_int_eq(rc, GPUCOMP_E_IO);
    ck_assert_msg(strstr(gpucomp_last_error(c), "sent nothing for 300 ms") != NULL, "%s", gpucomp_last_error(c));
    ck_assert_msg(took >= limit - 10 && took < 10 * limit, "the timeout took %lld ms", (long long)took);

    /* A large inline request against a stopped daemon: the write side is bounded too. */
    size_t len = 8u << 20;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 0, 17);
    setenv("GPUCOMP_MEMFD_THRESHOLD", "1G", 1); /* this client sends 8 MiB through the socket */
    gpucomp_client *inline_c = connect_or_fail();
    unsetenv("GPUCOMP_MEMFD_THRESHOLD");
    gpucomp_set_timeout(inline_c, limit);
    ck_assert_int_eq(kill(dut.pid, SIGSTOP), 0);
    void *out = NULL;
    size_t out_len = 0;
    t0 = now_ms();
    rc = gpucomp_compress(inline_c, NULL, data, len, &out, &out_len);
    took = now_ms() - t0;
    ck_assert_int_eq(kill(dut.pid, SIGCONT), 0);
    ck_assert_int_eq(rc, GPUCOMP_E_IO);
    ck_assert_msg(strstr(gpucomp_last_error(inline_c), "for 300 ms") != NULL, "%s", gpucomp_last_error(inline_c));
    ck_assert_msg(took >= limit - 10 && took < 10 * limit, "the timeout took %lld ms", (long long)took);
    ck_assert_ptr_null(out);
    gpucomp_close(inline_c);

    /* Without a limit the same client just waits (reconnecting first). */
    gpucomp_set_timeout(c, 0);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    free(data);
    gpucomp_close(c);
}
END_TEST

static Suite *async_suite(void)
{
    Suite *s = suite_create("async");
    TCase *tc = tcase_create("async");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_many_threads_round_trips);
    tcase_add_test(tc, test_async_fd_with_poll);
    tcase_add_test(tc, test_blocking_call_is_in_use_during_async);
    tcase_add_test(tc, test_poll_from_callback_is_in_use);
    tcase_add_test(tc, test_close_with_outstanding);
    tcase_add_test(tc, test_async_not_resent);
    tcase_add_test(tc, test_answer_to_unknown_id);
    tcase_add_test(tc, test_connection_level_error);
    suite_add_tcase(s, tc);

    TCase *cancel = tcase_create("cancel");
    tcase_add_checked_fixture(cancel, NULL, teardown);
    tcase_set_timeout(cancel, 120);
    tcase_add_test(cancel, test_cancel_large_bzip2);
    suite_add_tcase(s, cancel);

    TCase *conn = tcase_create("reconnect");
    tcase_add_checked_fixture(conn, NULL, teardown);
    tcase_set_timeout(conn, 60);
    tcase_add_test(conn, test_reconnect_after_restart);
    tcase_add_test(conn, test_async_restart_while_idle);
    tcase_add_test(conn, test_timeout_against_stopped_daemon);
    suite_add_tcase(s, conn);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(async_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
