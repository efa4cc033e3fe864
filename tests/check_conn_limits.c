/*
 * check_conn_limits.c - what one connection can make the daemon hold, and
 * for how long (docs/SECURITY.md, "No wait without an end" and
 * "Connections and time"): a connection waiting for memory still sees its
 * client leave and has a deadline, a request never waits for memory its own
 * connection holds, refused streams count under the per-connection cap, and
 * max_streams streams can really be open at once. Each test failed before
 * its fix. Clients here are raw: they send what the library never would.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "daemon_harness.h"
#include "gc_clock.h"
#include "gc_status.h"
#include "gpucomp.h"
#include "wire.h"

static test_daemon dut;

static void teardown(void)
{
    test_daemon_cleanup(&dut);
}

/* A raw connection past the handshake (receive timeout: a stalled daemon fails the test);
 * the Welcome's max_streams in *max_streams if asked. */
static int hello_max(uint32_t *max_streams)
{
    int fd = raw_connect(dut.socket_path);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    ck_assert_msg(w && w->body_case == GPUCOMP__FRAME__BODY_WELCOME, "no Welcome from the daemon");
    ck_assert_int_eq(w->welcome->status, GC_OK);
    if (max_streams)
        *max_streams = w->welcome->max_streams;
    gc_wire_free(w);
    return fd;
}

static int hello(void)
{
    return hello_max(NULL);
}

/* The final Response to id (skipping others and stream pieces); NULL if the connection ended. */
static Gpucomp__Frame *final_answer(int fd, uint64_t id)
{
    for (;;) {
        Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
        if (!f)
            return NULL;
        if (f->body_case == GPUCOMP__FRAME__BODY_RESPONSE && f->response->id == id &&
            (f->response->last || !f->response->stream))
            return f;
        gc_wire_free(f);
    }
}

/* The first frame of a socket request declaring total bytes, with one byte of it. */
static void first_frame(int fd, uint64_t id, uint64_t total)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    static uint8_t one;
    req.id = id;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_RLE;
    req.total_size = total;
    req.payload.data = &one;
    req.payload.len = 1;
    raw_send_request(fd, &req);
}

static uint64_t memory_in_use(void)
{
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    gpucomp_close(c);
    return st.memory_in_use;
}

/* Wait up to limit_s for the daemon to hold less than 1 MiB; the seconds it took, or -1. */
static double wait_memory_free(double limit_s)
{
    double t0 = test_now_s();
    while (test_now_s() - t0 < limit_s) {
        if (memory_in_use() < (1u << 20))
            return test_now_s() - t0;
        test_sleep_ms(50);
    }
    return -1;
}

/*
 * A whole rle compression of len bytes over the socket on a new connection,
 * in frames of 4 MiB; the seconds until its answer. Fails the test unless
 * it is answered OK within the socket's receive timeout.
 */
static double serve_socket_request(size_t len)
{
    int fd = hello();
    uint8_t *data = calloc(len, 1);
    ck_assert_ptr_nonnull(data);
    double t0 = test_now_s();
    for (size_t off = 0; off < len;) {
        size_t n = len - off < (4u << 20) ? len - off : (4u << 20);
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = 7;
        req.op = GPUCOMP__OP__OP_COMPRESS;
        req.codec = GPUCOMP__CODEC__CODEC_RLE;
        req.total_size = len;
        req.payload.data = data + off;
        req.payload.len = n;
        off += n;
        req.last = off == len;
        raw_send_request(fd, &req);
    }
    Gpucomp__Frame *f = final_answer(fd, 7);
    double took = test_now_s() - t0;
    ck_assert_msg(f != NULL, "a %zu-byte request got no answer in %.1f s", len, took);
    ck_assert_msg((int)f->response->status == GC_OK, "%zu-byte request: %s", len, f->response->message);
    gc_wire_free(f);
    close(fd);
    free(data);
    return took;
}

/* ---- no wait without an end ------------------------------------------------ */

START_TEST(test_interleaved_requests_do_not_deadlock)
{
    /* Share 32 MiB: the first 20 MiB request is admitted, the second would wait for it, and
     * the 14 MiB one at the end fits only once the first is gone. */
    const char *args[] = { "--memory-budget=64M", "--user-memory-share=50", "--request-timeout=2", NULL };
    test_daemon_start(&dut, args);
    int fd = hello();
    first_frame(fd, 1, 20u << 20);
    first_frame(fd, 2, 20u << 20);
    test_sleep_ms(200);
    ck_assert_uint_ge(memory_in_use(), 20u << 20);
    close(fd);
    double freed = wait_memory_free(3);
    ck_assert_msg(freed >= 0, "%llu bytes still held 3 s after the client closed (request-timeout 2 s)",
                  (unsigned long long)memory_in_use());
    fprintf(stderr, "  charge freed %.2f s after the client closed\n", freed);
    fprintf(stderr, "  then a 14 MiB request of the same user: %.2f s\n", serve_socket_request(14u << 20));

    /* The same, but the client stays and says nothing. The second request cannot wait
     * for memory its own connection holds: it is refused at once; the first one's
     * request-timeout ends the connection. */
    fd = hello();
    first_frame(fd, 1, 20u << 20);
    first_frame(fd, 2, 20u << 20);
    double t0 = test_now_s();
    Gpucomp__Frame *f = final_answer(fd, 2);
    ck_assert_msg(f != NULL, "the second request got no answer: it waits for its own connection's memory");
    ck_assert_int_eq((int)f->response->status, GC_E_LIMIT);
    fprintf(stderr, "  second request, after %.2f s: %s\n", test_now_s() - t0, f->response->message);
    gc_wire_free(f);
    uint8_t buf[512];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) /* the LIMIT answers, then the close */
        ;
    ck_assert_msg(n == 0, "the silent connection was not closed (read: %s)", strerror(errno));
    fprintf(stderr, "  the silent client's connection closed after %.2f s\n", test_now_s() - t0);
    close(fd);
    ck_assert_msg(wait_memory_free(1) >= 0, "memory still held after the connection was closed");
    serve_socket_request(14u << 20);
}
END_TEST

/* A user that interleaves two requests of 30 MiB on one connection and then says nothing. */
static void interleave_as(uid_t uid, int ready)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || setgid(65534) != 0 || setuid(uid) != 0)
        _exit(3);
    int fd = raw_connect(dut.socket_path);
    if (fd < 0)
        _exit(4);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    if (!w || w->body_case != GPUCOMP__FRAME__BODY_WELCOME || (int)w->welcome->status != GC_OK)
        _exit(5);
    first_frame(fd, 1, 30u << 20);
    first_frame(fd, 2, 30u << 20);
    if (write(ready, "x", 1) != 1)
        _exit(6);
    for (;;)
        pause();
}

START_TEST(test_two_users_cannot_lock_out_a_third)
{
    if (geteuid() != 0) {
        fprintf(stderr, "  not root: cannot connect as other users here, test not run\n");
        return;
    }
    /* Two users' first requests take 60 of 64 MiB; the third user's 14 MiB must wait for them. */
    const char *args[] = { "--memory-budget=64M", "--user-memory-share=50", "--allow-users=*",
                           "--request-timeout=2", NULL };
    test_daemon_start(&dut, args);
    ck_assert_int_eq(chmod(dut.dir, 0755), 0);
    ck_assert_int_eq(chmod(dut.socket_path, 0666), 0);
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    pid_t users[2];
    for (int i = 0; i < 2; i++) {
        users[i] = fork();
        ck_assert_int_ge(users[i], 0);
        if (users[i] == 0)
            interleave_as((uid_t)(65534 - i), pipefd[1]);
    }
    char c;
    for (int i = 0; i < 2; i++)
        ck_assert_msg(read(pipefd[0], &c, 1) == 1, "a user's client failed to start");
    ck_assert_uint_ge(memory_in_use(), 60u << 20);
    /* Later than the sweep's granularity: their timeouts come before the third user's wait's. */
    test_sleep_ms(1500);
    double took = serve_socket_request(14u << 20);
    fprintf(stderr, "  the third user's 14 MiB request served in %.2f s (request-timeout 2 s)\n", took);
    ck_assert_msg(took < 6, "served only after %.1f s", took);
    for (int i = 0; i < 2; i++) {
        int status;
        kill(users[i], SIGKILL);
        waitpid(users[i], &status, 0);
    }
    close(pipefd[0]);
    close(pipefd[1]);
}
END_TEST

static int daemon_fds(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)dut.pid);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

START_TEST(test_abandoned_first_frames_release_descriptors)
{
    /* Each declares 30 MiB of the user's 32: one is admitted, the others wait for memory. */
    const char *args[] = { "--memory-budget=64M", "--user-memory-share=50", "--request-timeout=2", NULL };
    test_daemon_start(&dut, args);
    close(hello());
    test_sleep_ms(200);
    int baseline = daemon_fds();
    enum { CLIENTS = 300 };
    static int fds[CLIENTS];
    /* The first holds the memory and stays, silent (with a second request interleaved, as
     * the deadlock above): the others' descriptors must not depend on it. */
    fds[0] = hello();
    first_frame(fds[0], 1, 30u << 20);
    first_frame(fds[0], 2, 30u << 20);
    for (int i = 1; i < CLIENTS; i++) {
        fds[i] = hello();
        first_frame(fds[i], 1, 30u << 20);
    }
    test_sleep_ms(300);
    int held = daemon_fds();
    for (int i = 1; i < CLIENTS; i++)
        close(fds[i]);
    double t0 = test_now_s();
    int now = held;
    while (test_now_s() - t0 < 1.5 && (now = daemon_fds()) > baseline + 1)
        test_sleep_ms(20);
    fprintf(stderr, "  the %d that left: descriptors down to %d after %.2f s\n", CLIENTS - 1, now,
            test_now_s() - t0);
    ck_assert_msg(now <= baseline + 1,
                  "%d descriptors held 1.5 s after the clients left (baseline %d, and the one "
                  "that stays)",
                  now, baseline);
    while (test_now_s() - t0 < 3 && (now = daemon_fds()) > baseline)
        test_sleep_ms(50);
    fprintf(stderr, "  daemon descriptors: %d before, %d with %d clients, %d %.2f s after they left\n", baseline,
            held, CLIENTS, now, test_now_s() - t0);
    close(fds[0]);
    ck_assert_msg(now <= baseline,
                  "%d descriptors held 3 s after the clients left (baseline %d, "
                  "request-timeout 2 s)",
                  now, baseline);
    ck_assert_msg(wait_memory_free(1) >= 0, "memory still held after the clients left");
    serve_socket_request(1u << 20);
}
END_TEST

START_TEST(test_unread_answers_have_a_deadline)
{
    const char *args[] = { "--request-timeout=1", NULL };
    test_daemon_start(&dut, args);
    int fd = hello();
    size_t len = 8u << 20;
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 0, 11); /* random: the answer is as large as the input */
    for (size_t off = 0; off < len;) {
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = 1;
        req.op = GPUCOMP__OP__OP_COMPRESS;
        req.codec = GPUCOMP__CODEC__CODEC_RLE;
        req.total_size = len;
        req.payload.data = data + off;
        req.payload.len = 4u << 20;
        off += req.payload.len;
        req.last = off == len;
        raw_send_request(fd, &req);
    }
    free(data);
    /* Nobody reads the answer: most of it stays queued in the daemon, charged. */
    double freed = wait_memory_free(4);
    ck_assert_msg(freed >= 0, "%llu bytes of unread answers still held 4 s later (request-timeout 1 s)",
                  (unsigned long long)memory_in_use());
    fprintf(stderr, "  unread answers given back after %.2f s\n", freed);
    uint8_t buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) /* what the kernel had taken, then the end */
        ;
    ck_assert_msg(n == 0, "the connection of a client that does not read is still open");
    close(fd);
}
END_TEST

/* ---- bounded everything per connection --------------------------------------- */

static uint64_t daemon_rss_kib(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)dut.pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtoull(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

/* Send a Request frame; false once the daemon has closed the connection. */
static bool try_send(int fd, const Gpucomp__Request *req)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = (Gpucomp__Request *)req;
    uint8_t buf[256];
    size_t len = gc_wire_packed_size(&f);
    ck_assert_uint_le(len, sizeof buf);
    gc_wire_pack(&f, buf);
    for (size_t off = 0; off < len;) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    return true;
}

START_TEST(test_refused_stream_opens_are_bounded)
{
    /* Under AddressSanitizer freed memory sits in a quarantine that would count as the daemon's. */
    const char *was = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=1", was ? was : "", was && *was ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    test_daemon_start(&dut, NULL);
    int fd = hello();
    test_sleep_ms(200);
    uint64_t before = daemon_rss_kib();
    enum { OPENS = 20000 };
    int sent = 0;
    for (; sent < OPENS; sent++) { /* an unknown codec, and more frames announced */
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = (uint64_t)sent + 1;
        req.stream = 1;
        req.op = GPUCOMP__OP__OP_COMPRESS;
        req.codec = (Gpucomp__Codec)99;
        if (!try_send(fd, &req))
            break;
    }
    unsigned refused = 0, limit = 0;
    bool closed = false;
    for (;;) {
        errno = 0;
        Gpucomp__Frame *f = raw_recv(fd, 1u << 20);
        if (!f) {
            closed = errno != EAGAIN && errno != EWOULDBLOCK;
            break;
        }
        if (f->body_case == GPUCOMP__FRAME__BODY_RESPONSE) {
            refused += (int)f->response->status == GC_E_UNSUPPORTED;
            limit += (int)f->response->status == GC_E_LIMIT;
        }
        gc_wire_free(f);
    }
    uint64_t after = daemon_rss_kib();
    fprintf(stderr, "  %d stream opens sent: %u refused, %u LIMIT, connection %s; daemon RSS %llu -> %llu KiB\n",
            sent, refused, limit, closed ? "closed" : "open", (unsigned long long)before,
            (unsigned long long)after);
    ck_assert_msg(closed, "the connection is still open after %u refused streams", refused);
    ck_assert_msg(limit == 1 && refused <= 64, "%u refused and %u LIMIT answers: no cap at 64", refused, limit);
    ck_assert_msg(after < before + 4096, "the daemon grew by %llu KiB", (unsigned long long)(after - before));
    close(fd);
}
END_TEST

START_TEST(test_refused_stream_has_a_deadline)
{
    const char *args[] = { "--request-timeout=1", "--idle-timeout=1", NULL };
    test_daemon_start(&dut, args);
    int fd = hello();
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 1;
    req.stream = 1;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = (Gpucomp__Codec)99;
    raw_send_request(fd, &req); /* refused, more frames announced, none sent */
    double t0 = test_now_s();
    uint8_t buf[512];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) /* the refusal, the timeout's error, the end */
        ;
    ck_assert_msg(n == 0, "a refused stream's connection outlived both timeouts (read: %s)", strerror(errno));
    fprintf(stderr, "  a refused stream's silent client closed after %.2f s (timeouts 1 s)\n", test_now_s() - t0);
    close(fd);
}
END_TEST

/*
 * The incomplete-request deadline runs while a request is in assembly: a
 * request refused at its only frame leaves none, so a connection that goes
 * on working after it is not closed as holding an "incomplete request".
 */
START_TEST(test_refused_request_leaves_no_deadline)
{
    const char *args[] = { "--request-timeout=1", NULL };
    test_daemon_start(&dut, args);
    int fd = hello();
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 1;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = (Gpucomp__Codec)99;
    req.last = 1;
    raw_send_request(fd, &req); /* refused at its first and last frame */
    Gpucomp__Frame *f = final_answer(fd, 1);
    ck_assert_msg(f && f->response->status != GPUCOMP__STATUS__STATUS_OK, "no refusal of an unknown codec");
    gc_wire_free(f);
    test_sleep_ms(2500); /* past the request-timeout, with nothing in assembly */
    Gpucomp__Request ping = GPUCOMP__REQUEST__INIT;
    ping.id = 2;
    ping.op = GPUCOMP__OP__OP_PING;
    ping.last = 1;
    raw_send_request(fd, &ping);
    f = raw_recv(fd, 1u << 20);
    ck_assert_msg(f && f->body_case == GPUCOMP__FRAME__BODY_RESPONSE, "the connection ended");
    ck_assert_msg(f->response->id == 2 && f->response->status == GPUCOMP__STATUS__STATUS_OK,
                  "answer to id %llu, status %d (%s) instead of the PING's", (unsigned long long)f->response->id,
                  (int)f->response->status, f->response->message ? f->response->message : "");
    gc_wire_free(f);
    close(fd);
}
END_TEST

/* ---- max_streams means what it says ------------------------------------------- */

static void open_stream(int fd, uint64_t id, Gpucomp__Op op)
{
    static const uint8_t junk[64] = "not rle: this is no frame of the rle codec, only bytes";
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.stream = 1;
    req.op = op;
    req.codec = GPUCOMP__CODEC__CODEC_RLE;
    req.payload.data = (uint8_t *)junk;
    req.payload.len = sizeof junk;
    raw_send_request(fd, &req);
}

static void end_stream(int fd, uint64_t id)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.stream = 1;
    req.last = 1;
    raw_send_request(fd, &req);
}

/* Final answers of streams, by id, as they come in any order: status + 1, 0 while none. */
enum { MAX_IDS = 64 };
static int finals[MAX_IDS];
static char final_msgs[MAX_IDS][160];

/* The final status of stream id, reading (and keeping) others' until it comes. */
static gc_status stream_final(int fd, uint64_t id)
{
    ck_assert_uint_lt(id, MAX_IDS);
    while (!finals[id]) {
        Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
        ck_assert_msg(f != NULL, "no final answer for stream %llu", (unsigned long long)id);
        Gpucomp__Response *r = f->body_case == GPUCOMP__FRAME__BODY_RESPONSE ? f->response : NULL;
        ck_assert_msg(r && r->id > 0 && r->id < MAX_IDS, "an answer to no stream of this test");
        if (r->last) {
            ck_assert_msg(!finals[r->id], "two final answers for stream %llu", (unsigned long long)r->id);
            finals[r->id] = (int)r->status + 1;
            snprintf(final_msgs[r->id], sizeof final_msgs[r->id], "%s", r->message ? r->message : "");
        }
        gc_wire_free(f);
    }
    return (gc_status)(finals[id] - 1);
}

START_TEST(test_max_streams_can_be_open)
{
    test_daemon_start(&dut, NULL);
    uint32_t max = 0;
    int fd = hello_max(&max);
    ck_assert_uint_eq(max, 4);
    uint64_t open[4], next_id = 1;
    for (uint32_t i = 0; i < max; i++) {
        open[i] = next_id++;
        open_stream(fd, open[i], open[i] % 4 == 0 ? GPUCOMP__OP__OP_DECOMPRESS : GPUCOMP__OP__OP_COMPRESS);
    }
    /* Rounds: one stream ends and, right after its final answer, a new one opens. Every
     * fourth is a decompression of bytes that are no rle frame: it fails while its
     * client still holds it open, and its failure is its final answer too. */
    for (int round = 0; round < 40; round++) {
        unsigned k = (unsigned)round % max;
        uint64_t id = open[k];
        bool failing = id % 4 == 0;
        if (!failing)
            end_stream(fd, id);
        gc_status st = stream_final(fd, id);
        ck_assert_msg(st == (failing ? GC_E_CORRUPT : GC_OK), "round %d, stream %llu: status %d: %s", round,
                      (unsigned long long)id, (int)st, final_msgs[id]);
        open[k] = next_id++;
        open_stream(fd, open[k], open[k] % 4 == 0 ? GPUCOMP__OP__OP_DECOMPRESS : GPUCOMP__OP__OP_COMPRESS);
        if (failing)
            end_stream(fd, id); /* its client lets go of it only now */
    }
    for (uint32_t i = 0; i < max; i++) {
        if (open[i] % 4)
            end_stream(fd, open[i]);
        gc_status st = stream_final(fd, open[i]);
        ck_assert_msg(st == (open[i] % 4 ? GC_OK : GC_E_CORRUPT), "stream %llu: status %d: %s",
                      (unsigned long long)open[i], (int)st, final_msgs[open[i]]);
    }
    close(fd);
}
END_TEST

static Suite *conn_limits_suite(void)
{
    Suite *s = suite_create("conn_limits");
    TCase *t = tcase_create("connections");
    tcase_add_checked_fixture(t, NULL, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_interleaved_requests_do_not_deadlock);
    tcase_add_test(t, test_two_users_cannot_lock_out_a_third);
    tcase_add_test(t, test_abandoned_first_frames_release_descriptors);
    tcase_add_test(t, test_unread_answers_have_a_deadline);
    tcase_add_test(t, test_refused_stream_opens_are_bounded);
    tcase_add_test(t, test_refused_stream_has_a_deadline);
    tcase_add_test(t, test_max_streams_can_be_open);
    tcase_add_test(t, test_refused_request_leaves_no_deadline);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(conn_limits_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
