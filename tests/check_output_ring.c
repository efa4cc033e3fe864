/*
 * check_output_ring.c - streams whose output the daemon writes into the
 * client's output ring (docs/PROTOCOL.md, "Output rings"), driven frame by
 * frame: the output byte for byte what frames carry, for both codecs both
 * ways; a small ring wrapping many times, its frames never past the credit;
 * and hostile clients (docs/SECURITY.md, "Output rings"): rings of the wrong
 * kind or size, credit that lies, credit never returned, a ring rewritten
 * or sealed under the daemon. The library's side is in check_stream.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <check.h>

#include "daemon_harness.h"
#include "fdpass.h"
#include "gc_status.h"
#include "wire.h"

static test_daemon dut;

static void teardown(void)
{
    ck_assert_msg(test_daemon_stop(&dut) == 0, "the daemon did not exit cleanly on SIGTERM");
    test_daemon_cleanup(&dut);
}

static void start_default(void)
{
    test_daemon_start(&dut, NULL);
}

/* A connection whose Welcome announces output rings; *window its stream window. */
static int hello(uint64_t *window)
{
    int fd = raw_connect(dut.socket_path);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = { 60, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    ck_assert_msg(w && w->body_case == GPUCOMP__FRAME__BODY_WELCOME, "no Welcome from the daemon");
    ck_assert_msg(w->welcome->stream_output_rings, "the daemon does not announce output rings");
    if (window)
        *window = w->welcome->stream_window;
    gc_wire_free(w);
    return fd;
}

/* An output ring: a sealable memfd of size bytes, mapped read-only as a client maps it. */
typedef struct oring {
    int fd;
    const uint8_t *map;
    size_t size;
} oring;

static oring oring_make(size_t size)
{
    oring g = { gc_memfd_create("check-output-ring"), NULL, size };
    ck_assert_int_ge(g.fd, 0);
    ck_assert_int_eq(ftruncate(g.fd, (off_t)size), 0);
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, g.fd, 0);
    ck_assert(p != MAP_FAILED);
    g.map = p;
    return g;
}

static void oring_free(oring *g)
{
    munmap((void *)(uintptr_t)g->map, g->size);
    close(g->fd);
}

/* How a test client treats its stream's credit. */
typedef enum { CREDIT_AT_ONCE, CREDIT_NEVER } credit_policy;

/* A stream's answer: its output (from frames or the ring) and its end. */
typedef struct answer {
    uint8_t *out;
    size_t len;
    uint64_t received; /* output named so far */
    uint64_t frames;   /* frames naming ring bytes */
    uint64_t credited; /* output_consumed last sent */
    Gpucomp__Status status;
    char msg[256];
    bool done;
} answer;

static void open_stream(int fd, uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, int oring_fd)
{
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    o.level = 1;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.op = op;
    req.codec = codec;
    req.options = &o;
    req.stream = 1;
    req.output_ring = oring_fd >= 0;
    raw_send_request_fds(fd, &req, &oring_fd, oring_fd >= 0 ? 1 : 0);
}

static void send_input(int fd, uint64_t id, const uint8_t *src, size_t len)
{
    size_t piece = 512 << 10;
    for (size_t at = 0;; at += piece) {
        size_t n = len - at < piece ? len - at : piece;
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = id;
        req.payload.data = (uint8_t *)(uintptr_t)(src + at);
        req.payload.len = n;
        req.last = at + n == len;
        raw_send_request(fd, &req);
        if (req.last)
            return;
    }
}

static void send_credit(int fd, uint64_t id, uint64_t consumed)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.output_consumed = consumed;
    raw_send_request(fd, &req);
}

static void send_cancel(int fd, uint64_t id)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.op = GPUCOMP__OP__OP_CANCEL;
    req.last = 1;
    raw_send_request(fd, &req);
}

static void keep(answer *a, const uint8_t *p, size_t n)
{
    a->out = realloc(a->out, a->len + n + 1);
    ck_assert_ptr_nonnull(a->out);
    memcpy(a->out + a->len, p, n);
    a->len += n;
}

/*
 * Read stream id's frames to its end: payload kept as it comes; ring bytes
 * checked to begin where the last ended and to stay within the credit
 * returned, then kept and (CREDIT_AT_ONCE) credited back. False if the
 * connection ended first.
 */
static bool read_to_end(int fd, uint64_t id, const oring *g, credit_policy credit, answer *a)
{
    uint64_t credited = a->credited;
    while (!a->done) {
        Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
        if (!f)
            return false;
        ck_assert_int_eq(f->body_case, GPUCOMP__FRAME__BODY_RESPONSE);
        const Gpucomp__Response *r = f->response;
        if (r->id == 0) { /* the daemon closing the connection */
            snprintf(a->msg, sizeof a->msg, "%s", r->message ? r->message : "");
            gc_wire_free(f);
            return false;
        }
        ck_assert_uint_eq(r->id, id);
        if (r->ring_length) {
            ck_assert_msg(g != NULL, "ring bytes named for a stream without an output ring");
            ck_assert_uint_eq(r->payload.len, 0);
            ck_assert_uint_eq(r->ring_offset, a->received % g->size);
            ck_assert_uint_le(r->ring_offset + r->ring_length, g->size);
            ck_assert_msg(a->received + r->ring_length <= credited + g->size,
                          "the daemon wrote past the credit: %llu + %llu over %llu + %zu",
                          (unsigned long long)a->received, (unsigned long long)r->ring_length,
                          (unsigned long long)credited, g->size);
            keep(a, g->map + r->ring_offset, r->ring_length);
            a->frames++;
        }
        if (r->payload.len)
            keep(a, r->payload.data, r->payload.len);
        a->received += r->payload.len + r->ring_length;
        if (r->ring_length && credit == CREDIT_AT_ONCE) {
            credited = a->received;
            send_credit(fd, id, credited);
        }
        if (r->last) {
            a->done = true;
            a->status = r->status;
            snprintf(a->msg, sizeof a->msg, "%s", r->message ? r->message : "");
            if (r->status == GPUCOMP__STATUS__STATUS_OK)
                ck_assert_uint_eq(r->total_size, a->received);
        }
        gc_wire_free(f);
    }
    return true;
}

/* One whole stream of src: through g's ring (NULL: in frames); the id ended with a cancel as a client ends it. */
static answer run_stream(int fd, uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, const uint8_t *src, size_t len,
                         const oring *g)
{
    answer a = { 0 };
    open_stream(fd, id, op, codec, g ? g->fd : -1);
    send_input(fd, id, src, len);
    ck_assert_msg(read_to_end(fd, id, g, CREDIT_AT_ONCE, &a), "the daemon closed the connection");
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_OK, "stream %llu: %d %s", (unsigned long long)id, a.status,
                  a.msg);
    if (g)
        send_cancel(fd, id);
    return a;
}

/*
 * Through an output ring, both codecs both ways: the same bytes as the
 * output frames carry, and what decompresses is the input.
 */
START_TEST(test_ring_output_equals_frames)
{
    Gpucomp__Codec codec = _i ? GPUCOMP__CODEC__CODEC_BZIP2 : GPUCOMP__CODEC__CODEC_RLE;
    start_default();
    int fd = hello(NULL);
    size_t len = (size_t)6 << 20;
    uint8_t *src = malloc(len);
    ck_assert_ptr_nonnull(src);
    fill_test_data(src, len, 2, 17);
    oring g = oring_make((size_t)1 << 20);
    answer cf = run_stream(fd, 1, GPUCOMP__OP__OP_COMPRESS, codec, src, len, NULL);
    answer cr = run_stream(fd, 2, GPUCOMP__OP__OP_COMPRESS, codec, src, len, &g);
    ck_assert_uint_gt(cr.frames, 0);
    ck_assert_uint_eq(cr.len, cf.len);
    ck_assert_msg(memcmp(cr.out, cf.out, cf.len) == 0, "compressed output through the ring differs");
    answer df = run_stream(fd, 3, GPUCOMP__OP__OP_DECOMPRESS, codec, cf.out, cf.len, NULL);
    answer dr = run_stream(fd, 4, GPUCOMP__OP__OP_DECOMPRESS, codec, cf.out, cf.len, &g);
    ck_assert_uint_eq(dr.len, len);
    ck_assert_uint_eq(df.len, len);
    ck_assert_msg(memcmp(dr.out, src, len) == 0, "decompressed output through the ring differs from the input");
    ck_assert_msg(memcmp(df.out, src, len) == 0, "decompressed output in frames differs from the input");
    free(cf.out);
    free(cr.out);
    free(df.out);
    free(dr.out);
    oring_free(&g);
    free(src);
    close(fd);
}
END_TEST

/* The rle compression of len zero bytes, made by the daemon (frames). */
static answer rle_zeros(int fd, uint64_t id, size_t len)
{
    uint8_t *zeros = calloc(1, len);
    ck_assert_ptr_nonnull(zeros);
    answer c = run_stream(fd, id, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, zeros, len, NULL);
    free(zeros);
    return c;
}

/* The smallest ring the daemon takes, wrapped many times by one part's output: every byte right, never past the credit. */
START_TEST(test_small_ring_wraps)
{
    start_default();
    int fd = hello(NULL);
    size_t len = (size_t)24 << 20;
    answer c = rle_zeros(fd, 1, len);
    oring g = oring_make((size_t)1 << 20);
    answer d = run_stream(fd, 2, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, c.out, c.len, &g);
    ck_assert_uint_eq(d.len, len);
    ck_assert_uint_ge(d.frames, 24);
    for (size_t i = 0; i < len; i++)
        if (d.out[i])
            ck_abort_msg("a nonzero byte at output offset %zu", i);
    free(c.out);
    free(d.out);
    oring_free(&g);
    close(fd);
}
END_TEST

/* Open stream id with output_ring and descriptors fds, expect its end with status and a message containing what. */
static void expect_refused(int fd, uint64_t id, bool input_ring, const int *fds, unsigned n, bool output_fd,
                           Gpucomp__Status status, const char *what)
{
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.op = GPUCOMP__OP__OP_DECOMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_RLE;
    req.options = &o;
    req.stream = 1;
    req.ring = input_ring;
    req.output_ring = 1;
    req.output_fd = output_fd;
    req.last = 1;
    raw_send_request_fds(fd, &req, fds, n);
    answer a = { 0 };
    ck_assert(read_to_end(fd, id, NULL, CREDIT_NEVER, &a));
    ck_assert_msg(a.status == status && strstr(a.msg, what), "stream %llu: status %d (%s), expected %d and \"%s\"",
                  (unsigned long long)id, a.status, a.msg, status, what);
    send_cancel(fd, id);
}

/* Output rings the daemon refuses: of the wrong kind, size or access; descriptors that do not add up. */
START_TEST(test_wrong_output_rings_are_refused)
{
    start_default();
    uint64_t window;
    int fd = hello(&window);
    uint64_t id = 1;
    Gpucomp__Status inval = GPUCOMP__STATUS__STATUS_INVALID, proto = GPUCOMP__STATUS__STATUS_PROTOCOL;
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    expect_refused(fd, id++, false, &p[0], 1, false, inval, "memfd");
    oring tiny = oring_make(4096);
    expect_refused(fd, id++, false, &tiny.fd, 1, false, inval, "must hold");
    int big = gc_memfd_create("check-big-ring");
    ck_assert_int_eq(ftruncate(big, (off_t)(2 * window + 1)), 0);
    expect_refused(fd, id++, false, &big, 1, false, inval, "must hold");
    oring g = oring_make((size_t)1 << 20);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", g.fd);
    int rdonly = open(path, O_RDONLY);
    ck_assert_int_ge(rdonly, 0);
    expect_refused(fd, id++, false, &rdonly, 1, false, inval, "open for writing");
    int unsealable = memfd_create("check-unsealable", 0);
    ck_assert_int_ge(unsealable, 0);
    ck_assert_int_eq(ftruncate(unsealable, 1 << 20), 0);
    expect_refused(fd, id++, false, &unsealable, 1, false, inval, "sealed");
    /* an input ring, then a pipe where the output ring should be */
    oring in = oring_make(window);
    int two[2] = { in.fd, p[1] };
    expect_refused(fd, id++, true, two, 2, false, inval, "output ring must be a memfd");
    /* named and not passed; and with an output file besides */
    expect_refused(fd, id++, false, NULL, 0, false, proto, "without its output ring");
    int three[2] = { g.fd, g.fd };
    expect_refused(fd, id++, false, three, 2, true, proto, "not both");
    /* the daemon still serves this connection */
    size_t len = 1 << 20;
    answer c = rle_zeros(fd, id++, len);
    ck_assert_uint_gt(c.len, 0);
    free(c.out);
    close(p[0]);
    close(p[1]);
    close(big);
    close(rdonly);
    close(unsealable);
    oring_free(&tiny);
    oring_free(&g);
    oring_free(&in);
    close(fd);
}
END_TEST

/* Decompress stream id of c through g, reading its frames until ring bytes have been named. */
static uint64_t start_until_output(int fd, uint64_t id, const answer *c, const oring *g)
{
    open_stream(fd, id, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, g->fd);
    send_input(fd, id, c->out, c->len);
    for (;;) {
        Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
        ck_assert_ptr_nonnull(f);
        const Gpucomp__Response *r = f->response;
        ck_assert_msg(!r->last, "the stream ended before its ring filled: %s", r->message ? r->message : "");
        uint64_t n = r->ring_length;
        gc_wire_free(f);
        if (n)
            return n;
    }
}

/* Credit that goes backwards, or past what the daemon said it wrote, ends the stream with INVALID. */
START_TEST(test_lying_credit_is_cut_off)
{
    start_default();
    int fd = hello(NULL);
    answer c = rle_zeros(fd, 1, (size_t)8 << 20);
    oring g = oring_make((size_t)1 << 20);
    answer a = { 0 };
    /* past what was named */
    uint64_t told = start_until_output(fd, 2, &c, &g);
    send_credit(fd, 2, told + (1u << 20));
    ck_assert(read_to_end(fd, 2, &g, CREDIT_NEVER, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_INVALID && strstr(a.msg, "output_consumed"), "%d %s",
                  a.status, a.msg);
    send_cancel(fd, 2);
    /* backwards */
    told = start_until_output(fd, 3, &c, &g);
    send_credit(fd, 3, told);
    send_credit(fd, 3, told - 1);
    a = (answer){ .received = told, .credited = told };
    ck_assert(read_to_end(fd, 3, &g, CREDIT_NEVER, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_INVALID && strstr(a.msg, "output_consumed"), "%d %s",
                  a.status, a.msg);
    send_cancel(fd, 3);
    /* on a stream without an output ring */
    open_stream(fd, 4, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, -1);
    send_credit(fd, 4, 1);
    a = (answer){ 0 };
    ck_assert(read_to_end(fd, 4, NULL, CREDIT_NEVER, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_INVALID, "%d %s", a.status, a.msg);
    send_cancel(fd, 4);
    free(a.out);
    free(c.out);
    oring_free(&g);
    close(fd);
}
END_TEST

static uint64_t memory_in_use(void)
{
    int fd = hello(NULL);
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 1;
    req.op = GPUCOMP__OP__OP_STATS;
    req.last = 1;
    raw_send_request(fd, &req);
    Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(f->response->stats);
    uint64_t v = f->response->stats->memory_in_use;
    gc_wire_free(f);
    close(fd);
    return v;
}

/*
 * A client that never returns credit: its stream holds output the ring has
 * no room for (charged to its budget), waits request-timeout, and its
 * connection is closed with everything freed; the daemon serves on.
 */
START_TEST(test_credit_never_returned_times_out)
{
    static const char *const args[] = { "--request-timeout=1", NULL };
    test_daemon_start(&dut, args);
    int fd = hello(NULL);
    answer c = rle_zeros(fd, 1, (size_t)32 << 20);
    oring g = oring_make((size_t)1 << 20);
    start_until_output(fd, 2, &c, &g);
    ck_assert_uint_gt(memory_in_use(), 0); /* the output the ring has no room for is charged */
    double t0 = test_now_s();
    answer a = { 0 };
    bool ended = read_to_end(fd, 2, &g, CREDIT_NEVER, &a);
    ck_assert_msg(!ended, "the connection stayed open (status %d %s)", a.status, a.msg);
    ck_assert_msg(test_now_s() - t0 < 30, "the stalled stream held its connection for %.1f s", test_now_s() - t0);
    uint64_t used = 1;
    for (int i = 0; i < 200 && used; i++) {
        used = memory_in_use();
        if (used)
            test_sleep_ms(50);
    }
    ck_assert_uint_eq(used, 0);
    free(a.out);
    free(c.out);
    oring_free(&g);
    close(fd);
}
END_TEST

/*
 * The ring is the client's: it cannot shrink it under the daemon (sealed),
 * and a client that seals it against writes only fails its own stream
 * (IO), the daemon unharmed.
 */
START_TEST(test_ring_sealed_and_write_sealed)
{
    start_default();
    int fd = hello(NULL);
    answer c = rle_zeros(fd, 1, (size_t)8 << 20);
    int rfd = gc_memfd_create("check-write-sealed");
    ck_assert_int_ge(rfd, 0);
    ck_assert_int_eq(ftruncate(rfd, 1 << 20), 0);
    open_stream(fd, 2, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, rfd);
    /* once the daemon has it, the ring can neither shrink nor grow */
    answer a = { 0 };
    int seals = -1;
    for (int i = 0; i < 200 && !(seals > 0 && (seals & F_SEAL_SHRINK)); i++) {
        seals = fcntl(rfd, F_GET_SEALS);
        if (!(seals & F_SEAL_SHRINK))
            test_sleep_ms(10);
    }
    ck_assert_msg(seals & F_SEAL_SHRINK && seals & F_SEAL_GROW, "the daemon did not seal the ring (%d)", seals);
    ck_assert_int_ne(ftruncate(rfd, 4096), 0);
    ck_assert_int_eq(fcntl(rfd, F_ADD_SEALS, F_SEAL_WRITE), 0);
    send_input(fd, 2, c.out, c.len);
    oring g = { rfd, NULL, 1 << 20 };
    ck_assert(read_to_end(fd, 2, &g, CREDIT_NEVER, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_IO && strstr(a.msg, "output ring"), "%d %s", a.status,
                  a.msg);
    send_cancel(fd, 2);
    answer again = rle_zeros(fd, 3, 1 << 20);
    ck_assert_uint_gt(again.len, 0);
    free(again.out);
    free(a.out);
    free(c.out);
    close(rfd);
    close(fd);
}
END_TEST

static Suite *oring_suite(void)
{
    Suite *s = suite_create("output_ring");
    TCase *tc = tcase_create("output rings");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_ring_output_equals_frames, 0, 2);
    tcase_add_test(tc, test_small_ring_wraps);
    tcase_add_test(tc, test_wrong_output_rings_are_refused);
    tcase_add_test(tc, test_lying_credit_is_cut_off);
    tcase_add_test(tc, test_credit_never_returned_times_out);
    tcase_add_test(tc, test_ring_sealed_and_write_sealed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(oring_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
