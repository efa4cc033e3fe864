/*
 * check_daemon.c - end-to-end: a real gpucompd, the client library and the
 * gpucomp CLI, many clients at once, and hostile input on the wire.
 */
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
        round_trip(c, (index + (size_t)round) % 4 == 0 ? GPUCOMP_CODEC_BZIP2 : GPUCOMP_CODEC_RLE, data, len);
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
    ck_assert_msg(f->response->status == status, "status %d, expected %d: %s", f->response->status, status,
                  f->response->message);
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
    ck_assert_int_eq(
        run_shell("bzip2 -c %s/t.txt | GPUCOMP_SOCKET=%s '%s' -d | cmp -s - %s/t.txt", d, s, cli(), d), 0);
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
    ck_assert_int_eq(rc, 2); /* bzip2's status for corrupt input */
    ck_assert_int_eq(run_shell("grep -q bzip2 %s/err", d), 0);
    ck_assert_int_eq(run_shell("test -f %s/c.txt.bz2 && test ! -e %s/c.txt", d, d), 0); /* nothing lost */
}
END_TEST

/*
 * No daemon answering: gpucomp says so on one line (unless -q) and
 * compresses in this process, as bzip2 would without any daemon; with
 * --no-fallback the old rule holds (exit 1, input untouched).
 */
START_TEST(test_cli_no_daemon)
{
    const char *d = daemon_under_test.dir;
    make_file("n.txt", 300000, 2);
    ck_assert_int_eq(run_shell("cp %s/n.txt %s/orig", d, d), 0);
    int rc = run_shell("'%s' --socket %s/nothing-here %s/n.txt 2>%s/err", cli(), d, d, d);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(run_shell("test \"$(cat %s/err)\" = 'gpucomp: no daemon at %s/nothing-here; "
                               "compressing on this CPU'",
                               d, d),
                     0);
    ck_assert_int_eq(run_shell("test ! -e %s/n.txt && bunzip2 -c %s/n.txt.bz2 | cmp -s - %s/orig", d, d, d), 0);
    /* and back, quietly: nothing on stderr with -q */
    ck_assert_int_eq(run_shell("'%s' -q -d --socket %s/nothing-here %s/n.txt.bz2 2>%s/err", cli(), d, d, d), 0);
    ck_assert_int_eq(run_shell("test ! -s %s/err && cmp -s %s/n.txt %s/orig", d, d, d), 0);
    /* --no-fallback: no daemon is an error, the input stays */
    rc = run_shell("'%s' --no-fallback --socket %s/nothing-here %s/n.txt 2>%s/err", cli(), d, d, d);
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(run_shell("grep -q 'cannot connect' %s/err", d), 0);
    ck_assert_int_eq(run_shell("test -f %s/n.txt && test ! -e %s/n.txt.bz2", d, d), 0);
    /* --stats and --ping are about the daemon: no fallback there */
    ck_assert_int_eq(run_shell("'%s' --stats --socket %s/nothing-here >/dev/null 2>&1", cli(), d), 1);
}
END_TEST

/* --local: the daemon's bytes, for bzip2 and rle, and bunzip2 reads them. */
START_TEST(test_cli_local_matches_daemon)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("l.txt", 3u << 20, 2);
    make_file("l.dat", 3u << 20, 1);
    ck_assert_int_eq(run_shell("'%s' --socket %s -c %s/l.txt > %s/daemon.bz2", cli(), s, d, d), 0);
    ck_assert_int_eq(run_shell("'%s' --local -c %s/l.txt > %s/local.bz2 2>%s/err", cli(), d, d, d), 0);
    ck_assert_int_eq(run_shell("test ! -s %s/err && cmp -s %s/daemon.bz2 %s/local.bz2", d, d, d), 0);
    ck_assert_int_eq(run_shell("bunzip2 -c %s/local.bz2 | cmp -s - %s/l.txt", d, d), 0);
    ck_assert_int_eq(run_shell("'%s' --local -3 -c %s/l.txt > %s/l3.bz2 && '%s' --socket %s -3 -c %s/l.txt "
                               "| cmp -s - %s/l3.bz2",
                               cli(), d, d, cli(), s, d, d),
                     0);
    ck_assert_int_eq(
        run_shell("'%s' --socket %s -a rle -w 4 --chunk-size 64K -c %s/l.dat > %s/daemon.rle", cli(), s, d, d), 0);
    ck_assert_int_eq(
        run_shell("'%s' --local -a rle -w 4 --chunk-size 64K -c %s/l.dat > %s/local.rle", cli(), d, d), 0);
    ck_assert_int_eq(run_shell("cmp -s %s/daemon.rle %s/local.rle", d, d), 0);
    ck_assert_int_eq(run_shell("'%s' --local -d -c %s/daemon.rle | cmp -s - %s/l.dat", cli(), d, d), 0);
    ck_assert_int_eq(run_shell("bzip2 -c %s/l.txt | '%s' --local -d | cmp -s - %s/l.txt", d, cli(), d), 0);
    /* corrupt input: bzip2's status 2 locally too */
    ck_assert_int_eq(run_shell("cp %s/local.bz2 %s/bad.bz2 && printf X | dd of=%s/bad.bz2 bs=1 seek=200 "
                               "conv=notrunc 2>/dev/null",
                               d, d, d),
                     0);
    ck_assert_int_eq(run_shell("'%s' --local -t %s/bad.bz2 2>/dev/null", cli(), d), 2);
}
END_TEST

/* --stats --json: one valid JSON object with every field of gpucomp_stats. */
START_TEST(test_cli_stats_json)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("j.txt", 100000, 2);
    ck_assert_int_eq(run_shell("'%s' --socket %s -k %s/j.txt", cli(), s, d), 0);
    ck_assert_int_eq(run_shell("'%s' --socket %s --stats --json > %s/stats.json", cli(), s, d), 0);
    ck_assert_msg(
        run_shell("python3 -c 'import json,sys\n"
                  "o = json.load(sys.stdin)\n"
                  "want = \"uptime_ms connections requests_ok requests_failed bytes_in bytes_out "
                  "worker_threads queue_depth memory_in_use memory_budget cpu_requests gpu_requests "
                  "backend gpus gpu_by_load n_lanes lanes registered_bytes register_limit n_routing routing\"\n"
                  "missing = [k for k in want.split() if k not in o]\n"
                  "assert not missing, missing\n"
                  "assert o[\"requests_ok\"] >= 1 and o[\"bytes_in\"] >= 100000, o\n"
                  "assert isinstance(o[\"lanes\"], list) and len(o[\"lanes\"]) == o[\"n_lanes\"]\n"
                  "assert isinstance(o[\"routing\"], list) and len(o[\"routing\"]) == o[\"n_routing\"] >= 1\n"
                  "assert all(isinstance(r, str) for r in o[\"routing\"])\n"
                  "' < %s/stats.json",
                  d) == 0,
        "--stats --json is not the whole gpucomp_stats as JSON");
    /* --json alone is a usage error */
    ck_assert_int_eq(run_shell("'%s' --socket %s --json 2>/dev/null", cli(), s), 1);
}
END_TEST

/*
 * Ctrl-C in the middle of a long request: the daemon (one worker, one codec
 * thread, so that the abandoned work would block everyone) drops the bzip2
 * work of the vanished client at its next block, and a following small
 * request completes within a second; gpucomp leaves no output behind, as
 * bzip2 removes its partial output.
 */
START_TEST(test_cli_ctrl_c_frees_the_daemon)
{
    static const char *const args[] = { "--workers=1", "--codec-threads=1", NULL };
    test_daemon_cleanup(&daemon_under_test);
    memset(&daemon_under_test, 0, sizeof daemon_under_test);
    test_daemon_start(&daemon_under_test, args);
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    char big[256];
    snprintf(big, sizeof big, "%s", make_file("big.txt", 64u << 20, 2));
    make_file("small.txt", 10000, 2);

    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        execl(cli(), cli(), "--no-fallback", "--socket", s, "-k", big, (char *)NULL);
        _exit(127);
    }
    /* Ctrl-C once the daemon is working on it (not after a fixed 0.3 s: on a loaded
     * machine the 64 MiB may not have reached the daemon by then). */
    int working = 0;
    for (int i = 0; i < 1000 && !working; i++) {
        gpucomp_client *probe = NULL;
        gpucomp_stats st;
        if (gpucomp_connect(s, &probe) == GPUCOMP_OK && gpucomp_stats_get(probe, &st) == GPUCOMP_OK) {
            working = st.queue_depth > 0 || st.memory_in_use > 0;
            for (uint32_t k = 0; k < st.gpu_devices; k++)
                working |= st.devices[k].queue_depth > 0;
        }
        gpucomp_close(probe);
        if (!working) {
            struct timespec poll_pause = { 0, 10 * 1000 * 1000 };
            nanosleep(&poll_pause, NULL);
        }
    }
    ck_assert_msg(working, "the 64 MiB request never reached the daemon");
    struct timespec pause = { 0, 100 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    /* It did not finish 64 MiB of bzip2 on one thread that soon: Ctrl-C ended it. */
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "gpucomp was not ended by SIGINT (status %d)",
                  status);

    uint64_t t0 = gc_now_ns();
    ck_assert_int_eq(run_shell("'%s' --no-fallback --socket %s -c %s/small.txt > %s/small.bz2", cli(), s, d, d),
                     0);
    double seconds = (double)(gc_now_ns() - t0) / 1e9;
    ck_assert_msg(seconds < 1.0, "a small request after Ctrl-C took %.2f s: the daemon kept working", seconds);
    ck_assert_int_eq(run_shell("bunzip2 -c %s/small.bz2 | cmp -s - %s/small.txt", d, d), 0);
    /* the big request did reach the daemon, and ended there as failed (cancelled), not done */
    ck_assert_int_eq(run_shell("'%s' --socket %s --stats --json | python3 -c 'import json,sys\n"
                               "o = json.load(sys.stdin)\n"
                               "assert o[\"requests_failed\"] == 1 and o[\"requests_ok\"] == 1, o'",
                               cli(), s),
                     0);
    /* nothing left behind: no big.txt.bz2, no temporary file; the input is whole */
    ck_assert_int_eq(run_shell("cd %s && test \"$(ls -A | grep big)\" = big.txt", d), 0);
    ck_assert_int_eq(run_shell("test $(stat -c %%s %s) -eq %u", big, 64u << 20), 0);
}
END_TEST

/*
 * The progress line: on a terminal (a pty from script(1)) a job longer than
 * a second shows it, redrawn with \r; with stderr not a terminal, or with -q,
 * nothing at all. One codec thread in the daemon makes 40 MiB take seconds.
 */
START_TEST(test_cli_progress_only_on_a_terminal)
{
    /* One worker, one thread: a stream's two parts would otherwise run at once and could
     * finish inside the second the first line waits for. */
    static const char *const args[] = { "--workers=1", "--codec-threads=1", NULL };
    test_daemon_cleanup(&daemon_under_test);
    memset(&daemon_under_test, 0, sizeof daemon_under_test);
    test_daemon_start(&daemon_under_test, args);
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    /* The job must outlast the second before the first line: a fast machine gets a bigger
     * file (doubled until it does), a slow one keeps the first. */
    size_t size = 20u << 20;
    double seconds = 0;
    for (int attempt = 0; attempt < 4 && seconds <= 1.5; attempt++) {
        size *= 2;
        make_file("p.txt", size, 2);
        uint64_t t0 = gc_now_ns();
        ck_assert_int_eq(run_shell("'%s' --socket %s -c %s/p.txt 2>%s/err >/dev/null", cli(), s, d, d), 0);
        ck_assert_int_eq(run_shell("test ! -s %s/err", d), 0);
        seconds = (double)(gc_now_ns() - t0) / 1e9;
    }
    ck_assert_msg(seconds > 1.0, "%zu MiB took %.2f s: too quick to show that no line is drawn", size >> 20,
                  seconds);

    if (run_shell("command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1 </dev/null") != 0) {
        /* no script(1), or no pseudo-terminals here (no /dev/pts): the TTY half is not checked */
        fprintf(stderr, "  no pseudo-terminal available: the progress line's terminal half not checked\n");
        return;
    }
    ck_assert_int_eq(run_shell("cd %s && script -qec \"'%s' --socket %s -kf p.txt\" tty.log >/dev/null </dev/null",
                               d, cli(), s),
                     0);
    /* Any progress line: reading, or compressing with whatever amount was handed over when it was drawn. */
    if (run_shell("grep -q \"$(printf '\\r')  p.txt: \\(read\\|compressing\\) \" %s/tty.log", d) != 0) {
        run_shell("echo 'tty.log:' >&2; od -c %s/tty.log | head -20 >&2", d);
        ck_abort_msg("no progress line on a terminal");
    }
    ck_assert_int_eq(run_shell("bunzip2 -c %s/p.txt.bz2 | cmp -s - %s/p.txt", d, d), 0);
    /* -q: nothing, even on a terminal */
    ck_assert_int_eq(
        run_shell("cd %s && script -qec \"'%s' -q --socket %s -kf p.txt\" q.log >/dev/null </dev/null", d, cli(),
                  s),
        0);
    ck_assert_int_eq(run_shell("grep -q 'so far' %s/q.log", d), 1);
}
END_TEST

/* ---- gpucomp next to bzip2 ------------------------------------------------ */

/*
 * One situation, set up twice (DIR/bz and DIR/gc by the same shell lines),
 * then bzip2 and gpucomp run there with the same arguments: both must exit
 * with `expect`, leave the same files (.bz2 files compared by what they
 * decompress to, since our compressor need not write bzip2's bytes), the same
 * standard output when they succeed, and the same warnings that scripts and
 * people read.
 */
typedef struct vs_bzip2 {
    const char *what;
    const char *setup; /* shell, run in the empty directory */
    const char *env;   /* "VAR=value " before both commands, or "" */
    const char *args;
    int expect; /* bzip2's exit status, measured: 0 ok, 1 environment, 2 corrupt input */
} vs_bzip2;

#define SEQ "seq 1 20000 > f && bzip2 -k f"
#define SEQ_BZ "seq 1 20000 | bzip2 > f.bz2"
#define CORRUPT SEQ " && rm f && printf X | dd of=f.bz2 bs=1 seek=200 conv=notrunc 2>/dev/null"

static const vs_bzip2 vs_cases[] = {
    { "missing file -d", "true", "", "-d nofile.bz2", 1 },
    { "missing file", "true", "", "nofile", 1 },
    { "directory", "mkdir dir", "", "dir", 1 },
    { "directory -d", "mkdir dir.bz2", "", "-d dir.bz2", 1 },
    { "symbolic link", "seq 1 100 > f && ln -s f lnk", "", "lnk", 1 },
    { "hard link", "seq 1 100 > f && ln f g", "", "f", 1 },
    { "already .bz2", SEQ, "", "f.bz2", 1 },
    { "output exists", SEQ, "", "-d f.bz2", 1 },
    { "unknown suffix -d: FILE.out", "seq 1 20000 | bzip2 > x.txt", "", "-d x.txt", 0 },
    { "unknown suffix -d, not bzip2", "seq 1 100 > x.txt", "", "-d x.txt", 2 },
    { "corrupt", CORRUPT, "", "-d f.bz2", 2 },
    { "corrupt -t", CORRUPT, "", "-t f.bz2", 2 },
    { "missing, then corrupt: the highest", CORRUPT, "", "-d nofile.bz2 f.bz2", 2 },
    { "truncated", SEQ_BZ " && head -c 2000 f.bz2 > t.bz2 && rm f.bz2", "", "-d t.bz2", 2 },
    { "truncated -t", SEQ_BZ " && head -c 2000 f.bz2 > t.bz2", "", "-t t.bz2", 2 },
    { "not bzip2", "seq 1 100 > f.bz2", "", "-d f.bz2", 2 },
    { "empty .bz2 -d", ": > e.bz2", "", "-d e.bz2", 2 },
    { "empty .bz2 -tv", ": > e.bz2", "", "-tv e.bz2", 2 },
    { "trailing NUL padding", SEQ_BZ " && head -c 10240 /dev/zero >> f.bz2", "", "-d f.bz2", 0 },
    { "trailing newline", SEQ_BZ " && echo >> f.bz2", "", "-d f.bz2", 0 },
    { "trailing junk", SEQ_BZ " && printf 'junk junk' >> f.bz2", "", "-d f.bz2", 0 },
    { "two streams, junk", SEQ_BZ " && seq 5 9000 | bzip2 >> f.bz2 && printf xyz >> f.bz2", "", "-d f.bz2", 0 },
    { "trailing junk -t", SEQ_BZ " && printf 'junk' >> f.bz2", "", "-t f.bz2", 0 },
    { "trailing junk -tv", SEQ_BZ " && printf 'junk' >> f.bz2", "", "-tv f.bz2", 0 },
    { "trailing junk -q", SEQ_BZ " && printf 'junk' >> f.bz2", "", "-dq f.bz2", 0 },
    { "trailing junk, pipe", SEQ_BZ " && printf 'junk' >> f.bz2", "", "-dc < f.bz2", 0 },
    { "trailing B: truncated", SEQ_BZ " && printf B >> f.bz2", "", "-dc f.bz2", 2 },
    { "trailing BZh9 and junk: corrupt", SEQ_BZ " && printf BZh9xyzxyzxyz >> f.bz2", "", "-dc f.bz2", 2 },
    { "-s", SEQ_BZ, "", "-s -d f.bz2", 0 },
    { "--small", SEQ_BZ, "", "--small -dk f.bz2", 0 },
    { "-V", "true", "", "-V", 0 },
    { "-L", "true", "", "-L", 0 },
    { "--version", "true", "", "--version", 0 },
    { "$BZIP2", "seq 1 20000 > f", "BZIP2='-k -q' ", "f", 0 },
    { "$BZIP", SEQ_BZ, "BZIP=-d ", "f.bz2", 0 },
    { "$BZIP2 then $BZIP", SEQ_BZ, "BZIP2=-d BZIP=' -k ' ", "f.bz2", 0 },
};

/* Phrases both must print, or both not (bzip2's warnings that people and scripts look for). */
static const char *const vs_phrases[] = { "trailing garbage after EOF ignored", "Can't guess original name" };

START_TEST(test_cli_like_bzip2)
{
    const vs_bzip2 *c = &vs_cases[_i];
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    ck_assert_int_eq(run_shell("mkdir %s/bz %s/gc", d, d), 0);
    ck_assert_msg(run_shell("cd %s/bz && { %s; } && cd %s/gc && { %s; }", d, c->setup, d, c->setup) == 0,
                  "%s: setup failed", c->what);
    int bz = run_shell("cd %s/bz && %s bzip2 %s >../bz.out 2>../bz.err", d, c->env, c->args);
    int gc =
        run_shell("cd %s/gc && %s GPUCOMP_SOCKET=%s '%s' %s >../gc.out 2>../gc.err", d, c->env, s, cli(), c->args);
    ck_assert_msg(bz == c->expect, "%s: bzip2 %s exits %d here, the table says %d", c->what, c->args, bz,
                  c->expect);
    ck_assert_msg(gc == bz, "%s: gpucomp %s exits %d, bzip2 %d", c->what, c->args, gc, bz);
    /* The same names (no temporary file left behind), the same contents. */
    ck_assert_msg(run_shell("cd %s && [ \"$(ls -A bz)\" = \"$(ls -A gc)\" ]", d) == 0, "%s: files differ",
                  c->what);
    int same = run_shell("cd %s && for f in $(ls -A bz); do [ -d bz/$f ] && continue; case $f in "
                         "*.bz2) bzip2 -dc bz/$f >t1 2>/dev/null; bzip2 -dc gc/$f >t2 2>/dev/null; "
                         "cmp -s t1 t2 || exit 1;; *) cmp -s bz/$f gc/$f || exit 1;; esac; done",
                         d);
    ck_assert_msg(same == 0, "%s: a file's contents differ", c->what);
    if (c->expect == 0 && strstr(c->args, "-dc"))
        ck_assert_msg(run_shell("cmp -s %s/bz.out %s/gc.out", d, d) == 0, "%s: standard output differs", c->what);
    for (size_t i = 0; i < sizeof vs_phrases / sizeof vs_phrases[0]; i++) {
        int in_bz = run_shell("grep -q \"%s\" %s/bz.err", vs_phrases[i], d) == 0;
        int in_gc = run_shell("grep -q \"%s\" %s/gc.err", vs_phrases[i], d) == 0;
        ck_assert_msg(in_bz == in_gc, "%s: '%s' %s by bzip2, %s by gpucomp", c->what, vs_phrases[i],
                      in_bz ? "printed" : "not printed", in_gc ? "printed" : "not printed");
    }
}
END_TEST

/* -v: bzip2's line, then the backend; what bzip2 says after -d and -t, likewise. */
START_TEST(test_cli_verbose_like_bzip2)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    ck_assert_int_eq(run_shell("cd %s && seq 1 20000 > f && : > e && printf x > t && cp f g", d), 0);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' -vk f e t 2>err", d, s, cli()), 0);
    /* "  f:        X.XXX:1,  Y.YYY bits/byte, ZZ.ZZ% saved, N in, M out. (cpu)" */
    ck_assert_msg(
        run_shell("cd %s && grep -Eq '^  f: {7} ?[0-9]\\.[0-9]{3}:1,  [0-9]\\.[0-9]{3} "
                  "bits/byte, [0-9]{2}\\.[0-9]{2}%% saved, 108894 in, [0-9]+ out\\. \\((cpu|gpu)\\)$' err",
                  d) == 0,
        "compress line not in bzip2's format");
    /* The numbers are those of the files. */
    ck_assert_int_eq(run_shell("cd %s && n=$(stat -c %%s f.bz2) && grep -q \"108894 in, $n out\" err", d), 0);
    /* An empty file and a tiny one, as bzip2 says them, and never "0 MB/s". */
    ck_assert_int_eq(run_shell("cd %s && rm -f e.bz2 t.bz2 && bzip2 -vk e t 2>bzerr && sed 's/$/ (cpu)/' bzerr "
                               "| grep 'no data' > want && grep 'no data' err > got && cmp -s want got",
                               d),
                     0);
    ck_assert_int_eq(run_shell("cd %s && grep -Eq '^  t:  .*1 in, [0-9]+ out\\. \\(cpu\\)$' err", d), 0);
    ck_assert_int_ne(run_shell("grep -q 'MB/s' %s/err", d), 0);
    /* -d and -t: bzip2's "done" and "ok" lines, with the backend. */
    ck_assert_int_eq(run_shell("cd %s && rm f && bzip2 -k g && GPUCOMP_SOCKET=%s '%s' -dv f.bz2 2>got && "
                               "rm -f g && bzip2 -dv g.bz2 2>want && sed -i 's/g.bz2/f.bz2/; s/$/ (cpu)/' want && "
                               "cmp -s want got",
                               d, s, cli()),
                     0);
    ck_assert_int_eq(run_shell("cd %s && bzip2 -k g && GPUCOMP_SOCKET=%s '%s' -tv g.bz2 2>got && "
                               "bzip2 -tv g.bz2 2>want && sed -i 's/$/ (cpu)/' want && cmp -s want got",
                               d, s, cli()),
                     0);
}
END_TEST

/* -d and -t of an empty .bz2 say the same thing (and exit 2, as bzip2 does). */
START_TEST(test_cli_empty_bz2_messages)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    ck_assert_int_eq(run_shell("cd %s && : > e.bz2", d), 0);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' -d e.bz2 2>a", d, s, cli()), 2);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' -tv e.bz2 2>b", d, s, cli()), 2);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' -dc e.bz2 2>c", d, s, cli()), 2);
    ck_assert_int_eq(run_shell("cd %s && cmp -s a b && cmp -s a c && grep -q 'e.bz2: ' a", d), 0);
}
END_TEST

/*
 * -v's "% saved" for output a hair longer than the input (rle of data with
 * no runs: 52 bytes on 1 MiB, a 0.005% loss) is "0.00", never "-0.00"; a
 * real loss keeps its sign and value.
 */
START_TEST(test_cli_verbose_no_negative_zero)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("r.dat", 1u << 20, 0);
    ck_assert_int_eq(run_shell("cd %s && printf abc > three", d), 0);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' -vk -a rle r.dat 2>err", d, s, cli()), 0);
    ck_assert_int_eq(
        run_shell("cd %s && n=$(stat -c %%s r.dat.rle) && test $n -gt 1048576 && "
                  "grep -Eq '^  r\\.dat: +1\\.000:1,  8\\.000 bits/byte,  0\\.00%% saved, 1048576 in, '$n' "
                  "out\\. \\((cpu|gpu)\\)$' err",
                  d),
        0);
    ck_assert_int_ne(run_shell("grep -q -- '-0\\.00%%' %s/err", d), 0);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' -vk three 2>err", d, s, cli()), 0);
    ck_assert_int_eq(run_shell("cd %s && n=$(stat -c %%s three.bz2) && "
                               "want=$(awk -v n=$n 'BEGIN { printf \"%%5.2f\", 100 * (1 - n / 3) }') && "
                               "grep -q -- \"bits/byte, $want%% saved, 3 in, $n out\" err && "
                               "case $want in -[1-9]*) ;; *) false;; esac",
                               d),
                     0);
}
END_TEST

/* bzip2 1.0.8's accepted no-op flags: accepted, ignored, the same output. */
START_TEST(test_cli_bzip2_noop_flags)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    make_file("n.txt", 200000, 2);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' -c n.txt > plain.bz2", d, s, cli()), 0);
    const char *flags[] = { "--exponential", "--repetitive-best",   "--repetitive-fast", "-s", "--small",
                            "--best",        "-q --repetitive-best" };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        ck_assert_msg(
            run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' %s -c n.txt > flag.bz2 2>err", d, s, cli(), flags[i]) == 0,
            "gpucomp %s failed", flags[i]);
        ck_assert_msg(run_shell("cd %s && cmp -s plain.bz2 flag.bz2 && bunzip2 -c flag.bz2 | cmp -s - n.txt", d) ==
                          0,
                      "gpucomp %s changed the output", flags[i]);
        bool says = strcmp(flags[i], "--repetitive-best") == 0 || strcmp(flags[i], "--repetitive-fast") == 0;
        if (says)
            ck_assert_msg(run_shell("cd %s && grep -qx 'gpucomp: %s is redundant (ignored, as by bzip2 0.9.5 and "
                                    "later)' err && test $(wc -l < err) = 1",
                                    d, flags[i]) == 0,
                          "gpucomp %s: not the one line that says it is redundant", flags[i]);
        else
            ck_assert_msg(run_shell("cd %s && test ! -s err", d) == 0, "gpucomp %s: something on stderr",
                          flags[i]);
    }
    /* and in $BZIP2, where scripts written for bzip2 put them; decompression too */
    ck_assert_int_eq(run_shell("cd %s && BZIP2='--exponential --repetitive-fast' GPUCOMP_SOCKET=%s '%s' -dc -q "
                               "plain.bz2 | cmp -s - n.txt",
                               d, s, cli()),
                     0);
}
END_TEST

/* The library with NULL options writes what the CLI writes by default: bzip2. */
START_TEST(test_null_options_are_bzip2)
{
    gpucomp_client *c = connect_or_fail();
    const char text[] = "the one default codec, in the library and the command";
    void *out = NULL, *back = NULL;
    size_t out_len = 0, back_len = 0;
    ck_assert_int_eq(gpucomp_compress(c, NULL, text, sizeof text, &out, &out_len), GPUCOMP_OK);
    ck_assert_uint_ge(out_len, 4);
    ck_assert_int_eq(memcmp(out, "BZh9", 4), 0);
    ck_assert_int_eq(gpucomp_decompress(c, NULL, out, out_len, &back, &back_len), GPUCOMP_OK);
    ck_assert_uint_eq(back_len, sizeof text);
    ck_assert_int_eq(memcmp(back, text, sizeof text), 0);
    gpucomp_free(out);
    gpucomp_free(back);
    gpucomp_close(c);
}
END_TEST

/* ---- documents that must match the build ------------------------------- */

/*
 * The build's make variable name, evaluated by make itself (the build
 * directory is two levels above $GPUCOMPD, daemon/gpucompd). A shell
 * variable assignment: "name='value'".
 */
#define MAKE_VARS                                                                                            \
    "b=$(dirname \"$(dirname \"$GPUCOMPD\")\") && "                                                          \
    "eval \"$(printf 'v:\\n\\t@echo \"cc=\\047$(CC)\\047 cflags=\\047$(CFLAGS) $(AM_CFLAGS)\\047 "           \
    "src=\\047$(abs_top_srcdir)\\047\"\\n' | MAKEFLAGS= MFLAGS= MAKELEVEL= make -s --no-print-directory -C " \
    "\"$b\" -f Makefile -f - v)\""

/* The README's example is a whole program: it compiles with -Werror, links, and works (or fails cleanly). */
START_TEST(test_readme_example_compiles_and_runs)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    ck_assert_msg(run_shell(MAKE_VARS " && awk '/readme-example end/ {p=0} p && !/^```/ {print} "
                                      "/readme-example begin/ {p=1}' \"$src/README.md\" > %s/example.c && "
                                      "grep -q 'int main' %s/example.c",
                            d, d) == 0,
                  "no example between the README's markers");
    ck_assert_msg(
        run_shell(MAKE_VARS
                  " && $cc $cflags -I\"$src/libclient\" %s/example.c -o %s/example "
                  "-L\"$b/libclient/.libs\" -lgpucomp-client -Wl,-rpath,\"$b/libclient/.libs\" 2>%s/cc.err",
                  d, d, d) == 0,
        "the README example does not compile as pasted (see cc.err)");
    ck_assert_int_eq(run_shell("GPUCOMP_SOCKET=%s %s/example | grep -q 'bytes of bzip2'", s, d), 0);
    /* No daemon: a message and exit 1, not a crash on an uninitialised pointer. */
    ck_assert_int_eq(run_shell("GPUCOMP_SOCKET=%s/nothing-here %s/example 2>%s/err", d, d, d), 1);
    ck_assert_int_eq(run_shell("grep -q '^connect: ' %s/err", d), 0);
}
END_TEST

/* gpucompd --help lists every --gpu value gpucompd(8) documents, and the shipped config's defaults are the daemon's. */
START_TEST(test_help_and_config_match_docs)
{
    const char *d = daemon_under_test.dir;
    const char *bin = getenv("GPUCOMPD");
    ck_assert_ptr_nonnull(bin);
    ck_assert_int_eq(run_shell("'%s' --help > %s/help", bin, d), 0);
    ck_assert_msg(
        run_shell(MAKE_VARS
                  " && sed -n 's/^\\.BR \\\\-\\\\-gpu= //p' \"$src/docs/man/gpucompd.8.in\" "
                  "| sed 's/\\\\//g; s/ | /|/g' > %s/gpu_values && test -s %s/gpu_values && "
                  "awk -v want=\"--gpu=$(cat %s/gpu_values)\" '$1 == want {f = 1} END {exit !f}' %s/help",
                  d, d, d, d) == 0,
        "gpucompd --help and gpucompd(8) list different --gpu values");
    /* Help columns: every help text that shares a line with its option starts in the same column. */
    ck_assert_int_eq(run_shell("grep -E '^  (-.,|  ) --[a-z-]+(=[^ ]+)? +[a-zA-Z]' %s/help | "
                               "awk '{ match($0, /^ +(-., )?--[^ ]+ +/); print RLENGTH }' | sort -u | wc -l "
                               "| grep -qx 1",
                               d),
                     0);
    /* The shipped config's commented defaults are the daemon's (gpu-min-bytes, max-frame, ...). */
    /* (Lines "# key = VALUE" with no comment after them claim VALUE is the default; help lines wrap.) */
    ck_assert_int_eq(run_shell("awk '/^      --/ && p {print p} /^      --/ {p = $0; next} {p = p $0} "
                               "END {print p}' %s/help > %s/help1",
                               d, d),
                     0);
    ck_assert_msg(run_shell(MAKE_VARS
                            " && sed -n 's/^# \\([a-z-]*\\) = \\([0-9][0-9]*[KMGT]\\?\\) *$/\\1 \\2/p' "
                            "\"$src/systemd/gpucompd.conf\" > %s/claims && grep -q '^gpu-min-bytes ' %s/claims && "
                            "while read k v; do grep -qE -- \"--$k=.*default $v\\)\" %s/help1 || "
                            "{ echo \"$k = $v\" >&2; exit 1; }; done < %s/claims",
                            d, d, d, d) == 0,
                  "systemd/gpucompd.conf states a default the daemon does not have");
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
    ck_assert_msg(lines >= 1 && lines <= 2 + seconds, "%d refusal lines for 301 refusals in %d s", lines, seconds);
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
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime), 2);
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
    ck_assert_msg(used * 2 < (unsigned long long)hz, "daemon used %llu/%ld s of CPU in 1 s at the limit", used,
                  hz);
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

/* ---- sizes in settings (the one parser, common/size_parse.h) ---------- */

/* The daemon's sizes take the same units as the library's and the CLI's. */
START_TEST(test_settings_sizes)
{
    const char *args[] = { "--memory-budget=4GiB", "--max-request=64mb",  "--register-limit=0",
                           "--max-frame=1m",       "--gpu-min-bytes=3Mi", NULL };
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

/* The default worker count is the CPUs the daemon may run on (taskset, systemd's
 * CPUAffinity=, a cgroup's cpuset), not every CPU of the host. */
START_TEST(test_workers_follow_cpu_affinity)
{
    cpu_set_t mine, one;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    int first = 0;
    while (!CPU_ISSET(first, &mine))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    test_daemon_cleanup(&daemon_under_test);
    memset(&daemon_under_test, 0, sizeof daemon_under_test);
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0); /* the daemon inherits it */
    test_daemon_start(&daemon_under_test, NULL);
    ck_assert_int_eq(sched_setaffinity(0, sizeof mine, &mine), 0);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.worker_threads, 1);
    gpucomp_close(c);
}
END_TEST

/* What is not a size, or is not one this setting takes, is a usage error (exit 2). */
START_TEST(test_settings_sizes_refused)
{
    static const char *const bad[] = {
        "--memory-budget=0", /* a size, but no budget at all: the setting refuses it */
        "--memory-budget=4GB2",
        "--memory-budget=1.5G",
        "--memory-budget=-1",
        "--memory-budget= 4G",
        "--memory-budget=4 G",
        "--memory-budget=+4G",
        "--memory-budget=4P",        /* K, M, G and T only */
        "--memory-budget=16777216T", /* 2^64: refused, not wrapped to 0 */
        "--memory-budget=18446744073709551616",
        "--max-frame=2G",     /* over the setting's own limit */
        "--workers=4K",       /* a count, not a size */
        "--batch-wait-us=1k", /* microseconds, not a size */
        "--fail-device=",
        "--fail-device=:2",
        "--fail-device=1:",
        "--fail-device=1:0", /* N[:K], K >= 1 */
        "--fail-device=a",
        "--fail-device=1:2:3",
        "--fail-device=-1",
        "--fail-device=0.",
        "--fail-device=.1",
        "--fail-device=0.1.2",
        "--fail-device=0.x:2",
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
    tcase_add_test(api, test_workers_follow_cpu_affinity);
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
    tcase_add_test(cmd, test_cli_local_matches_daemon);
    tcase_add_test(cmd, test_cli_stats_json);
    tcase_add_test(cmd, test_cli_ctrl_c_frees_the_daemon);
    tcase_add_test(cmd, test_cli_progress_only_on_a_terminal);
    tcase_add_loop_test(cmd, test_cli_like_bzip2, 0, sizeof vs_cases / sizeof vs_cases[0]);
    tcase_add_test(cmd, test_cli_verbose_like_bzip2);
    tcase_add_test(cmd, test_cli_empty_bz2_messages);
    tcase_add_test(cmd, test_cli_verbose_no_negative_zero);
    tcase_add_test(cmd, test_cli_bzip2_noop_flags);
    tcase_add_test(cmd, test_null_options_are_bzip2);
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

    TCase *docs = tcase_create("docs");
    tcase_add_checked_fixture(docs, setup, teardown);
    tcase_set_timeout(docs, 120);
    tcase_add_test(docs, test_readme_example_compiles_and_runs);
    tcase_add_test(docs, test_help_and_config_match_docs);
    suite_add_tcase(s, docs);
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
