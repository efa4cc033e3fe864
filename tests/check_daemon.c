/*
 * check_daemon.c - end-to-end: a real gpucompd, the client library and the
 * gpucomp CLI, many clients at once, and hostile input on the wire.
 */
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "daemon_harness.h"
#include "gc_clock.h"
#include "gpucomp.h"

static test_daemon daemon_under_test;

static void setup(void)
{
    test_daemon_start(&daemon_under_test, NULL);
}

static void teardown(void)
{
    test_daemon_cleanup(&daemon_under_test);
}

static gpucomp_client *connect_or_fail(void)
{
    gpucomp_client *c = NULL;
    int rc = gpucomp_connect(daemon_under_test.socket_path, &c);
    ck_assert_msg(rc == GPUCOMP_OK, "connect: %s (%s)", gpucomp_strerror(rc), gpucomp_connect_error());
    return c;
}

/* Compress and decompress through c, asserting the round trip is exact. */
static void round_trip(gpucomp_client *c, gpucomp_codec codec, const uint8_t *data, size_t len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, codec);
    void *packed = NULL, *unpacked = NULL;
    size_t packed_len = 0, unpacked_len = 0;
    int rc = gpucomp_compress(c, &o, data, len, &packed, &packed_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress %zu bytes: %s", len, gpucomp_last_error(c));
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    rc = gpucomp_decompress(c, &o, packed, packed_len, &unpacked, &unpacked_len);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress %zu bytes: %s", packed_len, gpucomp_last_error(c));
    ck_assert_uint_eq(unpacked_len, len);
    ck_assert_msg(len == 0 || memcmp(unpacked, data, len) == 0, "round trip of %zu bytes differs", len);
    gpucomp_free(packed);
    gpucomp_free(unpacked);
}

START_TEST(test_ping_and_stats)
{
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    uint8_t data[1000];
    fill_test_data(data, sizeof data, 1, 1);
    round_trip(c, GPUCOMP_CODEC_RLE, data, sizeof data);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.requests_ok, 2);
    ck_assert_uint_eq(st.cpu_requests, 2);
    ck_assert_uint_eq(st.connections, 1);
    ck_assert_str_eq(st.backend, "cpu");
    ck_assert_uint_ge(st.worker_threads, 1);
    gpucomp_close(c);
}
END_TEST

static const size_t rle_sizes[] = { 0, 1, 1000, (1u << 20) + 3, 10u << 20, 100u << 20 };

START_TEST(test_rle_sizes)
{
    size_t len = rle_sizes[_i];
    uint8_t *data = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 1, len);
    gpucomp_client *c = connect_or_fail();
    round_trip(c, GPUCOMP_CODEC_RLE, data, len);
    gpucomp_close(c);
    free(data);
}
END_TEST

START_TEST(test_bzip2_round_trip)
{
    size_t len = 3u << 20;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 2, 7);
    gpucomp_client *c = connect_or_fail();
    round_trip(c, GPUCOMP_CODEC_BZIP2, data, len);
    round_trip(c, GPUCOMP_CODEC_BZIP2, data, 0);
    gpucomp_close(c);
    free(data);
}
END_TEST

static void *client_thread(void *arg)
{
    size_t index = (size_t)(uintptr_t)arg;
    gpucomp_client *c = connect_or_fail();
    for (int round = 0; round < 4; round++) {
        size_t len = ((index * 7919 + (size_t)round * 104729) % (3u << 20)) + 1;
        uint8_t *data = malloc(len);
        fill_test_data(data, len, (int)((index + (size_t)round) % 3), index * 100 + (size_t)round);
        round_trip(c, (index + (size_t)round) % 4 == 0 ? GPUCOMP_CODEC_BZIP2 : GPUCOMP_CODEC_RLE,
                   data, len);
        free(data);
    }
    gpucomp_close(c);
    return NULL;
}

START_TEST(test_concurrent_clients)
{
    enum { N = 8 };
    pthread_t t[N];
    for (size_t i = 0; i < N; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, client_thread, (void *)(uintptr_t)i), 0);
    for (size_t i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.requests_ok, N * 4 * 2);
    ck_assert_uint_eq(st.requests_failed, 0);
    gpucomp_close(c);
}
END_TEST

START_TEST(test_corrupt_input_is_an_error)
{
    gpucomp_client *c = connect_or_fail();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    uint8_t data[4096];
    fill_test_data(data, sizeof data, 1, 3);
    void *packed, *out = NULL;
    size_t packed_len, out_len;
    ck_assert_int_eq(gpucomp_compress(c, &o, data, sizeof data, &packed, &packed_len), GPUCOMP_OK);
    ((uint8_t *)packed)[packed_len - 5] ^= 0x40;
    int rc = gpucomp_decompress(c, &o, packed, packed_len, &out, &out_len);
    ck_assert_int_ne(rc, GPUCOMP_OK);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(gpucomp_last_error(c), "chunk") != NULL, "message: %s", gpucomp_last_error(c));
    rc = gpucomp_decompress(c, &o, packed, packed_len / 2, &out, &out_len);
    ck_assert_int_ne(rc, GPUCOMP_OK);
    o.codec = GPUCOMP_CODEC_BZIP2;
    rc = gpucomp_decompress(c, &o, data, sizeof data, &out, &out_len);
    ck_assert_int_eq(rc, GPUCOMP_E_CORRUPT);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK); /* the connection is still usable */
    gpucomp_free(packed);
    gpucomp_close(c);
}
END_TEST

START_TEST(test_output_limit)
{
    gpucomp_client *c = connect_or_fail();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    size_t len = 1u << 20;
    uint8_t *zeros = calloc(1, len);
    void *packed, *out = NULL;
    size_t packed_len, out_len;
    ck_assert_int_eq(gpucomp_compress(c, &o, zeros, len, &packed, &packed_len), GPUCOMP_OK);
    o.max_output = 1000;
    ck_assert_int_eq(gpucomp_decompress(c, &o, packed, packed_len, &out, &out_len), GPUCOMP_E_LIMIT);
    gpucomp_free(packed);
    free(zeros);
    gpucomp_close(c);
}
END_TEST

/* ---- raw protocol: what the library never sends ------------------------- */

static int raw_session(void)
{
    int fd = raw_connect(daemon_under_test.socket_path);
    ck_assert_int_ge(fd, 0);
    Gpucomp__Frame *w = raw_hello(fd, 1);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->body_case, GPUCOMP__FRAME__BODY_WELCOME);
    ck_assert_int_eq(w->welcome->status, GPUCOMP__STATUS__STATUS_OK);
    ck_assert_uint_eq(w->welcome->protocol_version, 1);
    gpucomp__frame__free_unpacked(w, NULL);
    return fd;
}

static Gpucomp__Response *expect_response(int fd, uint64_t id, Gpucomp__Status status)
{
    Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->body_case, GPUCOMP__FRAME__BODY_RESPONSE);
    ck_assert_uint_eq(f->response->id, id);
    ck_assert_msg(f->response->status == status, "status %d, expected %d: %s",
                  f->response->status, status, f->response->message);
    Gpucomp__Response *r = f->response;
    f->response = NULL;
    f->body_case = GPUCOMP__FRAME__BODY__NOT_SET;
    gpucomp__frame__free_unpacked(f, NULL);
    return r;
}

static void ping(int fd, uint64_t id)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.op = GPUCOMP__OP__OP_PING;
    req.last = 1;
    raw_send_request(fd, &req);
    gpucomp__response__free_unpacked(expect_response(fd, id, GPUCOMP__STATUS__STATUS_OK), NULL);
}

START_TEST(test_version_mismatch)
{
    int fd = raw_connect(daemon_under_test.socket_path);
    Gpucomp__Frame *w = raw_hello(fd, 99);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->welcome->status, GPUCOMP__STATUS__STATUS_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(w->welcome->message, "version"));
    gpucomp__frame__free_unpacked(w, NULL);
    ck_assert_ptr_null(raw_recv(fd, 1 << 20)); /* and the daemon closed */
    close(fd);
}
END_TEST

START_TEST(test_garbage_frame_keeps_connection)
{
    int fd = raw_session();
    uint8_t garbage[300];
    fill_test_data(garbage, sizeof garbage, 0, 99);
    garbage[0] = 0xff; /* an invalid protobuf tag */
    raw_send_body(fd, garbage, sizeof garbage);
    Gpucomp__Response *r = expect_response(fd, 0, GPUCOMP__STATUS__STATUS_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(r->message, "malformed"));
    gpucomp__response__free_unpacked(r, NULL);
    ping(fd, 5);
    close(fd);
}
END_TEST

START_TEST(test_oversize_frame_closes_only_that_connection)
{
    int bystander = raw_session();
    int fd = raw_session();
    uint8_t hdr[4] = { 0xff, 0xff, 0xff, 0x7f };
    ck_assert_int_eq(write(fd, hdr, 4), 4);
    Gpucomp__Response *r = expect_response(fd, 0, GPUCOMP__STATUS__STATUS_LIMIT);
    ck_assert_ptr_nonnull(strstr(r->message, "exceeds"));
    gpucomp__response__free_unpacked(r, NULL);
    ck_assert_ptr_null(raw_recv(fd, 1 << 20));
    close(fd);
    ping(bystander, 1);
    close(bystander);
}
END_TEST

START_TEST(test_bad_requests_get_answers)
{
    int fd = raw_session();
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 7;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = 42; /* unknown codec */
    req.last = 1;
    raw_send_request(fd, &req);
    gpucomp__response__free_unpacked(expect_response(fd, 7, GPUCOMP__STATUS__STATUS_UNSUPPORTED), NULL);

    /* Payload beyond total_size, in a request split over two frames. */
    uint8_t piece[100] = { 0 };
    req.id = 8;
    req.codec = GPUCOMP__CODEC__CODEC_RLE;
    req.total_size = 150;
    req.payload.data = piece;
    req.payload.len = 100;
    req.last = 0;
    raw_send_request(fd, &req);
    req.last = 1;
    raw_send_request(fd, &req);
    gpucomp__response__free_unpacked(expect_response(fd, 8, GPUCOMP__STATUS__STATUS_PROTOCOL), NULL);

    /* A request that ends early. */
    req.id = 9;
    req.total_size = 200;
    raw_send_request(fd, &req);
    gpucomp__response__free_unpacked(expect_response(fd, 9, GPUCOMP__STATUS__STATUS_PROTOCOL), NULL);

    /* Over the daemon's request limit: refused before any payload is kept. */
    req.id = 10;
    req.total_size = 1ull << 40;
    req.last = 0;
    raw_send_request(fd, &req);
    req.last = 1;
    raw_send_request(fd, &req); /* swallowed: one answer per id */
    gpucomp__response__free_unpacked(expect_response(fd, 10, GPUCOMP__STATUS__STATUS_LIMIT), NULL);
    ping(fd, 11);
    close(fd);
}
END_TEST

START_TEST(test_interleaved_requests_on_one_connection)
{
    int fd = raw_session();
    uint8_t a[2000], b[3000];
    fill_test_data(a, sizeof a, 1, 1);
    fill_test_data(b, sizeof b, 1, 2);
    Gpucomp__Request ra = GPUCOMP__REQUEST__INIT, rb = GPUCOMP__REQUEST__INIT;
    ra.id = 1, rb.id = 2;
    ra.op = rb.op = GPUCOMP__OP__OP_COMPRESS;
    ra.codec = rb.codec = GPUCOMP__CODEC__CODEC_RLE;
    ra.total_size = sizeof a, rb.total_size = sizeof b;
    ra.payload = (ProtobufCBinaryData){ 1000, a };
    rb.payload = (ProtobufCBinaryData){ 1000, b };
    raw_send_request(fd, &ra);
    raw_send_request(fd, &rb);
    ra.payload = (ProtobufCBinaryData){ 1000, a + 1000 };
    ra.last = 1;
    raw_send_request(fd, &ra);
    rb.payload = (ProtobufCBinaryData){ 2000, b + 1000 };
    rb.last = 1;
    raw_send_request(fd, &rb);
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        Gpucomp__Frame *f = raw_recv(fd, 1 << 20);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(f->response->status, GPUCOMP__STATUS__STATUS_OK);
        ck_assert(f->response->last);
        ck_assert_uint_eq(f->response->total_size, f->response->payload.len);
        seen |= 1 << f->response->id;
        gpucomp__frame__free_unpacked(f, NULL);
    }
    ck_assert_int_eq(seen, 6);
    close(fd);
}
END_TEST

START_TEST(test_vanished_client_does_not_hurt_others)
{
    for (int i = 0; i < 20; i++) {
        int fd = raw_session();
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        static uint8_t piece[64 << 10];
        req.id = 1;
        req.op = GPUCOMP__OP__OP_COMPRESS;
        req.codec = GPUCOMP__CODEC__CODEC_BZIP2;
        req.total_size = i % 2 ? sizeof piece : 10u << 20;
        req.payload = (ProtobufCBinaryData){ sizeof piece, piece };
        req.last = i % 2;
        raw_send_request(fd, &req);
        close(fd); /* gone mid-request or before its answer */
    }
    gpucomp_client *c = connect_or_fail();
    uint8_t data[5000];
    fill_test_data(data, sizeof data, 2, 5);
    round_trip(c, GPUCOMP_CODEC_BZIP2, data, sizeof data);
    gpucomp_close(c);
}
END_TEST

START_TEST(test_clean_shutdown)
{
    ck_assert_int_eq(test_daemon_stop(&daemon_under_test), 0);
    ck_assert_int_ne(access(daemon_under_test.socket_path, F_OK), 0); /* socket removed */
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(daemon_under_test.socket_path, &c), GPUCOMP_E_CONNECT);
}
END_TEST

START_TEST(test_refuses_live_socket)
{
    const char *bin = getenv("GPUCOMPD");
    int rc = run_shell("'%s' --socket '%s' --log-level err 2>/dev/null", bin, daemon_under_test.socket_path);
    ck_assert_int_ne(rc, 0);
    gpucomp_client *c = connect_or_fail(); /* the first daemon still serves */
    gpucomp_close(c);
}
END_TEST

/* ---- the gpucomp CLI ---------------------------------------------------- */

static const char *cli(void)
{
    const char *bin = getenv("GPUCOMP");
    ck_assert_msg(bin != NULL, "GPUCOMP (path of the CLI) is not set");
    return bin;
}

static char *make_file(const char *name, size_t len, int kind)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", daemon_under_test.dir, name);
    uint8_t *data = malloc(len ? len : 1);
    fill_test_data(data, len, kind, len);
    ck_assert_int_eq(write_file(path, data, len), 0);
    free(data);
    return path;
}

START_TEST(test_cli_rle_round_trip)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("a.dat", 5u << 20, 1);
    ck_assert_int_eq(run_shell("cp %s/a.dat %s/orig", d, d), 0);
    ck_assert_int_eq(run_shell("'%s' --socket %s -a rle %s/a.dat", cli(), s, d), 0);
    ck_assert_int_eq(run_shell("test -f %s/a.dat.rle && test ! -e %s/a.dat", d, d), 0);
    ck_assert_int_eq(run_shell("'%s' --socket %s -d %s/a.dat.rle", cli(), s, d), 0);
    ck_assert_int_eq(run_shell("cmp -s %s/a.dat %s/orig && test ! -e %s/a.dat.rle", d, d, d), 0);
}
END_TEST

/* The size parser takes 0; the CLI's width and chunk size must still refuse it. */
START_TEST(test_cli_refuses_zero_width_and_chunk)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("z.dat", 4096, 1);
    ck_assert_int_ne(run_shell("'%s' --socket %s -k -a rle -w 0 %s/z.dat 2>/dev/null", cli(), s, d), 0);
    ck_assert_int_ne(run_shell("'%s' --socket %s -k -a rle --chunk 0 %s/z.dat 2>/dev/null", cli(), s, d), 0);
    ck_assert_int_eq(run_shell("test ! -e %s/z.dat.rle", d), 0);
    ck_assert_int_eq(run_shell("'%s' --socket %s -k -a rle --chunk 64KiB %s/z.dat", cli(), s, d), 0);
}
END_TEST

START_TEST(test_cli_bzip2_interop)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("t.txt", 2u << 20, 2);
    /* ours -> bunzip2 */
    ck_assert_int_eq(run_shell("GPUCOMP_SOCKET=%s '%s' -k %s/t.txt", s, cli(), d), 0);
    ck_assert_int_eq(run_shell("bunzip2 -c %s/t.txt.bz2 | cmp -s - %s/t.txt", d, d), 0);
    /* bzip2 -> ours, stdin to stdout */
    ck_assert_int_eq(run_shell("bzip2 -c %s/t.txt | GPUCOMP_SOCKET=%s '%s' -d | cmp -s - %s/t.txt", d, s,
                               cli(), d), 0);
    /* refuses to overwrite without -f */
    ck_assert_int_ne(run_shell("GPUCOMP_SOCKET=%s '%s' -k %s/t.txt 2>/dev/null", s, cli(), d), 0);
    ck_assert_int_eq(run_shell("GPUCOMP_SOCKET=%s '%s' -kf %s/t.txt", s, cli(), d), 0);
}
END_TEST

START_TEST(test_cli_corrupt_stream)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("c.txt", 100000, 2);
    ck_assert_int_eq(run_shell("bzip2 -k %s/c.txt", d), 0);
    /* flip a byte in the middle of the compressed block */
    ck_assert_int_eq(run_shell("printf 'X' | dd of=%s/c.txt.bz2 bs=1 seek=200 conv=notrunc 2>/dev/null", d), 0);
    ck_assert_int_eq(run_shell("rm %s/c.txt", d), 0);
    int rc = run_shell("'%s' --socket %s -d %s/c.txt.bz2 2>%s/err", cli(), s, d, d);
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(run_shell("grep -q bzip2 %s/err", d), 0);
    ck_assert_int_eq(run_shell("test -f %s/c.txt.bz2 && test ! -e %s/c.txt", d, d), 0); /* nothing lost */
}
END_TEST

START_TEST(test_cli_no_daemon)
{
    const char *d = daemon_under_test.dir;
    make_file("n.txt", 10, 2);
    int rc = run_shell("'%s' --socket %s/nothing-here %s/n.txt 2>%s/err", cli(), d, d, d);
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(run_shell("grep -q 'cannot connect' %s/err", d), 0);
    ck_assert_int_eq(run_shell("test -f %s/n.txt", d), 0);
}
END_TEST


/* ---- who may connect, and descriptors ------------------------------------ */

static void access_teardown(void)
{
    test_daemon_cleanup(&daemon_under_test);
}

/* Lines of the daemon's captured log that contain needle. */
static int log_lines_with(const char *needle)
{
    FILE *f = fopen(daemon_under_test.log_path, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

/* A group neither our primary group nor one our user belongs to. */
static gid_t gid_not_ours(void)
{
    gid_t mine[256];
    int n = getgroups(256, mine);
    ck_assert_int_ge(n, 0);
    mine[n++] = getegid();
    struct passwd *pw = getpwuid(geteuid());
    gid_t listed[256];
    int n_listed = 256;
    if (!pw || getgrouplist(pw->pw_name, pw->pw_gid, listed, &n_listed) < 0)
        n_listed = 0;
    for (gid_t g = 65533; g > 1000; g--) {
        bool ours = false;
        for (int i = 0; i < n && !ours; i++)
            ours = mine[i] == g;
        for (int i = 0; i < n_listed && !ours; i++)
            ours = listed[i] == g;
        if (!ours)
            return g;
    }
    ck_abort_msg("no group we are not in");
    return 0;
}

static void start_with_access(const char *users, const char *groups)
{
    static char u[64], g[64];
    snprintf(u, sizeof u, "--allow-users=%s", users);
    snprintf(g, sizeof g, "--allow-groups=%s", groups);
    const char *args[] = { u, g, NULL };
    daemon_under_test.capture_log = 1;
    test_daemon_start(&daemon_under_test, args);
}

/* Hello, and the Welcome's status; *fd_out keeps the connection open if not NULL. */
static int hello_status(int *fd_out)
{
    int fd = raw_connect(daemon_under_test.socket_path);
    ck_assert_int_ge(fd, 0);
    Gpucomp__Frame *w = raw_hello(fd, 1);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->body_case, GPUCOMP__FRAME__BODY_WELCOME);
    int status = w->welcome->status;
    if (status != GPUCOMP__STATUS__STATUS_OK) {
        char uid[32];
        snprintf(uid, sizeof uid, "uid %u", (unsigned)geteuid());
        ck_assert_msg(strstr(w->welcome->message, uid), "Welcome message: %s", w->welcome->message);
    }
    gpucomp__frame__free_unpacked(w, NULL);
    if (fd_out)
        *fd_out = fd;
    else
        close(fd);
    return status;
}

/*
 * Refused: a uid that is not ours and a group we are not in. Root gets no
 * implicit pass (root is only in the default allow-users), so this holds when
 * the tests run as root too.
 */
START_TEST(test_access_refused)
{
    char users[32], groups[32];
    snprintf(users, sizeof users, "%u", geteuid() == 65534 ? 65533u : 65534u);
    snprintf(groups, sizeof groups, "%u", (unsigned)gid_not_ours());
    start_with_access(users, groups);
    int fd;
    ck_assert_int_eq(hello_status(&fd), GPUCOMP__STATUS__STATUS_PERMISSION);
    ck_assert_ptr_null(raw_recv(fd, 1 << 20)); /* and the daemon closed */
    close(fd);

    char expect[128];
    snprintf(expect, sizeof expect, "refused connection from uid %u (pid %ld)", (unsigned)geteuid(),
             (long)getpid());
    ck_assert_int_ge(log_lines_with(expect), 1); /* the harness's start-up probe may be this line */

    /* A client refused in a loop does not fill the log: one line a second, the rest counted. */
    uint64_t t0 = gc_now_ns();
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(hello_status(NULL), GPUCOMP__STATUS__STATUS_PERMISSION);
    int seconds = (int)((gc_now_ns() - t0) / 1000000000u) + 1;
    int lines = log_lines_with("refused connection");
    ck_assert_msg(lines >= 1 && lines <= 2 + seconds, "%d refusal lines for 301 refusals in %d s",
                  lines, seconds);
    sleep(1);
    ck_assert_int_eq(hello_status(NULL), GPUCOMP__STATUS__STATUS_PERMISSION);
    ck_assert_int_ge(log_lines_with("more refused since the last message"), 1);

    gpucomp_client *c = NULL; /* the library reports it as such */
    ck_assert_int_eq(gpucomp_connect(daemon_under_test.socket_path, &c), GPUCOMP_E_PERMISSION);
    ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_access_admits_listed_user)
{
    char users[32], groups[32];
    snprintf(users, sizeof users, "65534,%u", (unsigned)geteuid());
    snprintf(groups, sizeof groups, "%u", (unsigned)gid_not_ours());
    start_with_access(users, groups);
    int fd;
    ck_assert_int_eq(hello_status(&fd), GPUCOMP__STATUS__STATUS_OK);
    close(fd);
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
    ck_assert_int_eq(log_lines_with("refused"), 0);
}
END_TEST

START_TEST(test_access_admits_listed_group)
{
    char users[32], groups[32];
    snprintf(users, sizeof users, "%u", geteuid() == 65534 ? 65533u : 65534u);
    snprintf(groups, sizeof groups, "%u,%u", (unsigned)gid_not_ours(), (unsigned)getegid());
    start_with_access(users, groups);
    ck_assert_int_eq(hello_status(NULL), GPUCOMP__STATUS__STATUS_OK);
}
END_TEST

START_TEST(test_access_anyone)
{
    start_with_access("*", "");
    ck_assert_int_eq(hello_status(NULL), GPUCOMP__STATUS__STATUS_OK);
}
END_TEST

START_TEST(test_socket_mode)
{
    test_daemon_start(&daemon_under_test, NULL);
    struct stat st;
    ck_assert_int_eq(stat(daemon_under_test.socket_path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    ck_assert_msg((st.st_mode & 07777) == 0660, "socket mode %o", (unsigned)(st.st_mode & 07777));
    struct group *gr = getgrnam("gpucomp");
    ck_assert_uint_eq(st.st_gid, gr ? gr->gr_gid : getegid());
}
END_TEST

/* utime + stime of pid, in clock ticks. */
static unsigned long long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    ck_assert_ptr_nonnull(p);
    unsigned long long utime = 0, stime = 0;
    /* after the command: state (field 3) ... utime (14), stime (15) */
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                            &utime, &stime), 2);
    return utime + stime;
}

/*
 * At its descriptor limit (hard limit too, so raising the soft one does not
 * help), the daemon neither spins on accept nor logs every failed try, and
 * serves again once descriptors are free.
 */
START_TEST(test_descriptor_limit)
{
    enum { N = 100 };
    daemon_under_test.nofile_limit = 64;
    daemon_under_test.capture_log = 1;
    const char *args[] = { "--workers=2", "--codec-threads=1", NULL };
    test_daemon_start(&daemon_under_test, args);
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(daemon_under_test.socket_path); /* the backlog holds what is not accepted */
        ck_assert_int_ge(fds[i], 0);
    }
    usleep(300 * 1000);
    long hz = sysconf(_SC_CLK_TCK);
    unsigned long long before = cpu_ticks(daemon_under_test.pid);
    usleep(1000 * 1000);
    unsigned long long used = cpu_ticks(daemon_under_test.pid) - before;
    ck_assert_msg(used * 2 < (unsigned long long)hz, "daemon used %llu/%ld s of CPU in 1 s at the limit",
                  used, hz);
    ck_assert_int_ge(log_lines_with("not accepting"), 1); /* the limit was reached */
    int lines = log_lines_with("accept failed");
    ck_assert_msg(lines <= 5, "%d 'accept failed' lines in 1.3 s", lines);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
}
END_TEST

/* ---- sizes in settings (the one parser, libclient/size_parse.h) ---------- */

/* The daemon's sizes take the same units as the library's and the CLI's. */
START_TEST(test_settings_sizes)
{
    const char *args[] = { "--memory-budget=4GiB", "--max-request=64mb", "--register-limit=0",
                           "--max-frame=1m", "--gpu-min-bytes=3Mi", NULL };
    test_daemon_start(&daemon_under_test, args);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.memory_budget, 4ull << 30);
    ck_assert_uint_eq(st.register_limit, 0); /* 0 is a size; register-limit takes it (none) */
    ck_assert_uint_eq(gpucomp_max_request_size(c), 64u << 20);
    gpucomp_close(c);
}
END_TEST

/* What is not a size, or is not one this setting takes, is a usage error (exit 2). */
START_TEST(test_settings_sizes_refused)
{
    static const char *const bad[] = {
        "--memory-budget=0",          /* a size, but no budget at all: the setting refuses it */
        "--memory-budget=4GB2", "--memory-budget=1.5G", "--memory-budget=-1",
        "--memory-budget= 4G", "--memory-budget=4 G", "--memory-budget=+4G",
        "--memory-budget=4P",         /* K, M, G and T only */
        "--memory-budget=16777216T",  /* 2^64: refused, not wrapped to 0 */
        "--memory-budget=18446744073709551616",
        "--max-frame=2G",             /* over the setting's own limit */
        "--workers=4K",               /* a count, not a size */
        "--batch-wait-us=1k",         /* microseconds, not a size */
    };
    const char *bin = getenv("GPUCOMPD");
    ck_assert_ptr_nonnull(bin);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_shell("'%s' '%s' --socket /nonexistent/gpucompd.sock >/dev/null 2>&1", bin, bad[i]);
        ck_assert_msg(rc == 2, "%s: exit %d, not a usage error", bad[i], rc);
    }
}
END_TEST

static Suite *daemon_suite(void)
{
    Suite *s = suite_create("daemon");
    TCase *api = tcase_create("library");
    tcase_add_checked_fixture(api, setup, teardown);
    tcase_set_timeout(api, 300);
    tcase_add_test(api, test_ping_and_stats);
    tcase_add_loop_test(api, test_rle_sizes, 0, sizeof rle_sizes / sizeof rle_sizes[0]);
    tcase_add_test(api, test_bzip2_round_trip);
    tcase_add_test(api, test_concurrent_clients);
    tcase_add_test(api, test_corrupt_input_is_an_error);
    tcase_add_test(api, test_output_limit);
    suite_add_tcase(s, api);

    TCase *wire = tcase_create("protocol");
    tcase_add_checked_fixture(wire, setup, teardown);
    tcase_set_timeout(wire, 120);
    tcase_add_test(wire, test_version_mismatch);
    tcase_add_test(wire, test_garbage_frame_keeps_connection);
    tcase_add_test(wire, test_oversize_frame_closes_only_that_connection);
    tcase_add_test(wire, test_bad_requests_get_answers);
    tcase_add_test(wire, test_interleaved_requests_on_one_connection);
    tcase_add_test(wire, test_vanished_client_does_not_hurt_others);
    tcase_add_test(wire, test_clean_shutdown);
    tcase_add_test(wire, test_refuses_live_socket);
    suite_add_tcase(s, wire);

    TCase *cmd = tcase_create("cli");
    tcase_add_checked_fixture(cmd, setup, teardown);
    tcase_set_timeout(cmd, 120);
    tcase_add_test(cmd, test_cli_rle_round_trip);
    tcase_add_test(cmd, test_cli_refuses_zero_width_and_chunk);
    tcase_add_test(cmd, test_cli_bzip2_interop);
    tcase_add_test(cmd, test_cli_corrupt_stream);
    tcase_add_test(cmd, test_cli_no_daemon);
    suite_add_tcase(s, cmd);

    TCase *access = tcase_create("access");
    tcase_add_checked_fixture(access, NULL, access_teardown);
    tcase_set_timeout(access, 60);
    tcase_add_test(access, test_access_refused);
    tcase_add_test(access, test_access_admits_listed_user);
    tcase_add_test(access, test_access_admits_listed_group);
    tcase_add_test(access, test_access_anyone);
    tcase_add_test(access, test_socket_mode);
    tcase_add_test(access, test_descriptor_limit);
    suite_add_tcase(s, access);

    TCase *settings = tcase_create("settings");
    tcase_add_checked_fixture(settings, NULL, access_teardown);
    tcase_set_timeout(settings, 60);
    tcase_add_test(settings, test_settings_sizes);
    tcase_add_test(settings, test_settings_sizes_refused);
    suite_add_tcase(s, settings);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(daemon_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
