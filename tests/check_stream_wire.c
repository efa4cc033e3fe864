/*
 * check_stream_wire.c - the daemon's side of streams (docs/PROTOCOL.md,
 * "Streams" and "Cancelling"), driven frame by frame: outputs against the
 * whole-buffer codecs, the window, cancellation, the per-connection limit,
 * a stream that waits for input, a client that vanishes mid-stream, and
 * ring streams (their output, their lying clients, their charge).
 * The library's stream API has its own suite (check_stream.c).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "bzip2.h"
#include "daemon_harness.h"
#include "fdpass.h"
#include "gc_status.h"
#include "rle.h"
#include "wire.h"

static test_daemon dut;

static void start(const char *const *args)
{
    dut.capture_log = getenv("STREAM_WIRE_LOG") != NULL;
    test_daemon_start(&dut, args);
}

static void teardown(void)
{
    /* a daemon that died under a test is a failure even where the test's
     * own checks passed (a client sees only a closed socket) */
    ck_assert_msg(test_daemon_stop(&dut) == 0, "the daemon did not exit cleanly on SIGTERM");
    if (dut.capture_log)
        fprintf(stderr, "daemon log: %s\n", dut.log_path);
    if (getenv("STREAM_WIRE_LOG"))
        return;
    test_daemon_cleanup(&dut);
}

static int hello(uint64_t *window)
{
    int fd = raw_connect(dut.socket_path);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = { 30, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    ck_assert_msg(w && w->body_case == GPUCOMP__FRAME__BODY_WELCOME, "no Welcome from the daemon");
    ck_assert_int_eq(w->welcome->status, GC_OK);
    ck_assert_uint_gt(w->welcome->stream_window, 0);
    ck_assert_uint_gt(w->welcome->max_streams, 0);
    if (window)
        *window = w->welcome->stream_window;
    gc_wire_free(w);
    return fd;
}

/* A stream's answer as it arrived. */
typedef struct answer {
    uint8_t *out;
    size_t len, cap;
    uint64_t consumed;
    Gpucomp__Status status;
    char msg[256];
    uint64_t total_size;
    bool garbage;
    uint64_t garbage_offset;
    Gpucomp__Backend backend;
    bool done;
    bool zeros_only; /* count the output and check it is all zeros, do not keep it */
    uint64_t counted;
} answer;

/* run_stream's answers count zeros instead of keeping the output. */
static bool g_zeros_only;

/* Take one Response frame of stream id into a; false if the connection ended. */
static bool read_answer(int fd, uint64_t id, answer *a)
{
    Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
    if (!f)
        return false;
    ck_assert_int_eq(f->body_case, GPUCOMP__FRAME__BODY_RESPONSE);
    const Gpucomp__Response *r = f->response;
    ck_assert_msg(r->id == id, "answer for id %llu, expected %llu (status %d: %s)", (unsigned long long)r->id,
                  (unsigned long long)id, r->status, r->message ? r->message : "");
    ck_assert_msg(r->stream, "a stream's answer without stream = true");
    ck_assert_uint_ge(r->consumed, a->consumed); /* never decreases */
    a->consumed = r->consumed;
    if (r->payload.len && a->zeros_only) {
        for (size_t i = 0; i < r->payload.len; i++)
            if (r->payload.data[i])
                ck_abort_msg("a nonzero byte at output offset %llu", (unsigned long long)(a->counted + i));
        a->counted += r->payload.len;
    } else if (r->payload.len) {
        if (a->cap - a->len < r->payload.len) {
            a->cap = (a->len + r->payload.len) * 2;
            a->out = realloc(a->out, a->cap);
            ck_assert_ptr_nonnull(a->out);
        }
        memcpy(a->out + a->len, r->payload.data, r->payload.len);
        a->len += r->payload.len;
    }
    if (r->last) {
        a->done = true;
        a->status = r->status;
        snprintf(a->msg, sizeof a->msg, "%s", r->message ? r->message : "");
        a->total_size = r->total_size;
        a->garbage = r->trailing_garbage;
        a->garbage_offset = r->garbage_offset;
        a->backend = r->backend;
    }
    gc_wire_free(f);
    return true;
}

static void send_frame(int fd, const Gpucomp__Request *req)
{
    raw_send_request(fd, req);
}

/*
 * Send one frame of stream id, taking its answers as they come: the daemon
 * stops reading a connection whose answers go unread (docs/PROTOCOL.md), so
 * a client that only sent would wedge against it once the output of the
 * input it already sent passes that limit.
 */
static void send_reading(int fd, const Gpucomp__Request *req, uint64_t id, answer *a)
{
    size_t len, at = 0;
    uint8_t *buf = raw_pack_request(req, &len);
    while (at < len) {
        struct pollfd p = { .fd = fd, .events = (short)(a->done ? POLLOUT : POLLIN | POLLOUT) };
        ck_assert_int_eq(poll(&p, 1, 30000), 1);
        if (p.revents & POLLIN)
            ck_assert_msg(read_answer(fd, id, a), "the daemon closed the connection mid-stream (%s)",
                          strerror(errno));
        if (p.revents & POLLOUT) {
            ssize_t n = send(fd, buf + at, len - at, MSG_NOSIGNAL | MSG_DONTWAIT);
            ck_assert_msg(n > 0 || errno == EAGAIN || errno == EINTR, "send failed: %s", strerror(errno));
            at += n > 0 ? (size_t)n : 0;
        }
        ck_assert_msg(!(p.revents & (POLLERR | POLLHUP)) || at == len, "the connection broke mid-frame");
    }
    free(buf);
}

/*
 * Run one stream: input in pieces of `piece` bytes, never beyond the
 * window, reading answers as they come and whenever the window is full.
 */
static void run_stream(int fd, uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, uint32_t level,
                       const uint8_t *src, size_t len, size_t piece, uint64_t window, answer *a)
{
    memset(a, 0, sizeof *a);
    a->zeros_only = g_zeros_only;
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    o.level = level;
    size_t sent = 0;
    bool first = true;
    while (!a->done) {
        bool more = sent < len || first;
        if (more && sent - a->consumed + piece <= window) {
            Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
            req.id = id;
            if (first) {
                req.op = op;
                req.codec = codec;
                req.options = &o;
                req.stream = 1;
            }
            size_t n = len - sent < piece ? len - sent : piece;
            req.payload.data = (uint8_t *)src + sent;
            req.payload.len = n;
            sent += n;
            req.last = sent == len;
            send_reading(fd, &req, id, a);
            first = false;
            continue;
        }
        ck_assert_msg(read_answer(fd, id, a),
                      "the daemon closed the connection mid-stream (%s; %zu of %zu bytes sent, "
                      "%zu out)",
                      strerror(errno), sent, len, a->len);
    }
}

static uint8_t *text_like(size_t len, uint64_t seed)
{
    uint8_t *p = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(p);
    fill_test_data(p, len, 2, seed);
    return p;
}

/* The whole-buffer rle frames of consecutive part-sized pieces. */
static uint8_t *rle_frames(const uint8_t *src, size_t len, size_t part, size_t *out_len)
{
    rle_options opt = { .threads = 1 };
    size_t cap = rle_compress_bound(len, &opt) + (len / part + 2) * 64, at = 0;
    uint8_t *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    size_t pos = 0;
    do {
        size_t n = len - pos < part ? len - pos : part, got = 0;
        gc_error err = { 0 };
        ck_assert_int_eq(rle_compress(src + pos, n, &opt, out + at, cap - at, &got, &err), GC_OK);
        at += got;
        pos += n;
    } while (pos < len);
    *out_len = at;
    return out;
}

START_TEST(test_rle_stream_equals_frames_of_parts)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    size_t len = (size_t)70 << 20, part = (size_t)32 << 20;
    uint8_t *src = malloc(len);
    ck_assert_ptr_nonnull(src);
    fill_test_data(src, len, 1, 7); /* short runs */
    answer a;
    run_stream(fd, 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, 0, src, len, 1u << 20, window, &a);
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", a.status, a.msg);
    ck_assert_uint_eq(a.total_size, a.len);
    ck_assert_uint_eq(a.consumed, len);
    size_t want_len;
    uint8_t *want = rle_frames(src, len, part, &want_len);
    ck_assert_uint_eq(a.len, want_len);
    ck_assert_int_eq(memcmp(a.out, want, want_len), 0);
    answer d;
    run_stream(fd, 2, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, 0, a.out, a.len, 300000, window, &d);
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
    ck_assert_uint_eq(d.len, len);
    ck_assert_int_eq(memcmp(d.out, src, len), 0);
    free(a.out);
    free(d.out);
    free(want);
    free(src);
    close(fd);
}
END_TEST

/* On the CPU engine (_i 0) and on an emulated device that takes every part (_i 1). */
START_TEST(test_bzip2_stream_equals_whole_buffer)
{
    static const char *const device[] = { "--gpu=emulate", "--gpu-min-bytes-bzip2=1",
                                          "--gpu-min-bytes-bzip2-decompress=1", NULL };
    start(_i ? device : NULL);
    uint64_t window;
    int fd = hello(&window);
    size_t len = (size_t)40 << 20; /* two segments: the splice across parts is exercised */
    uint8_t *src = malloc(len);
    ck_assert_ptr_nonnull(src);
    fill_test_data(src, len, 1, 9);
    answer a, d;
    run_stream(fd, 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, 1, src, len, 3000001, window, &a);
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", a.status, a.msg);
    bz2_options o = { .level = 1, .threads = 0 };
    uint8_t *whole;
    size_t whole_len;
    gc_error err = { 0 };
    ck_assert_int_eq(bz2_compress(src, len, &o, &whole, &whole_len, &err), GC_OK);
    ck_assert_uint_eq(a.len, whole_len);
    ck_assert_int_eq(memcmp(a.out, whole, whole_len), 0);
    /* Decompress in odd pieces, with a newline of trailing garbage after it. */
    uint8_t *in = malloc(a.len + 1);
    ck_assert_ptr_nonnull(in);
    memcpy(in, a.out, a.len);
    in[a.len] = '\n';
    run_stream(fd, 2, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, 0, in, a.len + 1, 777777, window,
               &d);
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
    ck_assert_uint_eq(d.len, len);
    ck_assert_int_eq(memcmp(d.out, src, len), 0);
    ck_assert_msg(d.garbage, "trailing garbage not reported");
    ck_assert_uint_eq(d.garbage_offset, a.len);
    Gpucomp__Backend want = _i ? GPUCOMP__BACKEND__BACKEND_GPU : GPUCOMP__BACKEND__BACKEND_CPU;
    ck_assert_int_eq(a.backend, want);
    ck_assert_int_eq(d.backend, want);
    free(d.out);
    /* A damaged stream fails after a correct prefix of the output. */
    in[a.len / 2] ^= 0x10;
    run_stream(fd, 3, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, 0, in, a.len, 1u << 20, window, &d);
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_CORRUPT || d.status == GPUCOMP__STATUS__STATUS_CRC,
                  "status %d: %s", d.status, d.msg);
    ck_assert_uint_lt(d.len, len);
    ck_assert(d.len == 0 || memcmp(d.out, src, d.len) == 0);
    free(d.out);
    free(in);
    free(whole);
    free(a.out);
    free(src);
    close(fd);
}
END_TEST

/* A level-9 bzip2 stream of len zero bytes (the CPU engine's; free()). */
static uint8_t *compressed_zeros(size_t len, size_t *bz_len)
{
    uint8_t *zeros = calloc(len, 1);
    ck_assert_ptr_nonnull(zeros);
    bz2_options o = { .level = 9, .threads = 0 };
    uint8_t *bz;
    gc_error err = { 0 };
    ck_assert_int_eq(bz2_compress(zeros, len, &o, &bz, bz_len, &err), GC_OK);
    free(zeros);
    return bz;
}

/*
 * A stream that expands ~45000 times (zeros) decodes in parts whose output
 * is bounded, not in one part as large as the whole output.
 */
START_TEST(test_bzip2_zeros_decode_in_bounded_parts)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    size_t len = (size_t)600 << 20, bz_len;
    uint8_t *bz = compressed_zeros(len, &bz_len);
    answer d;
    g_zeros_only = true;
    run_stream(fd, 1, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, 0, bz, bz_len, 4096, window, &d);
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
    ck_assert_uint_eq(d.counted, len);
    ck_assert_uint_eq(d.total_size, len);
    free(bz);
    close(fd);
}
END_TEST

/* A flush mark makes the daemon answer everything so far; the stream stays valid. */
START_TEST(test_flush_returns_output_so_far)
{
    start(NULL);
    int fd = hello(NULL);
    uint8_t *src = text_like(300000, 11);
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 12;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_BZIP2;
    req.options = &o;
    req.stream = 1;
    req.payload.data = src;
    req.payload.len = 100000;
    req.flush = 1;
    send_frame(fd, &req);
    answer a = { 0 };
    while (a.consumed < 100000 || a.len == 0)
        ck_assert(read_answer(fd, 12, &a)); /* output arrives before the input ends */
    ck_assert(!a.done);
    Gpucomp__Request rest = GPUCOMP__REQUEST__INIT;
    rest.id = 12;
    rest.payload.data = src + 100000;
    rest.payload.len = 200000;
    rest.last = 1;
    send_frame(fd, &rest);
    while (!a.done)
        ck_assert(read_answer(fd, 12, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", a.status, a.msg);
    uint8_t *back;
    size_t back_len;
    gc_error err = { 0 };
    ck_assert_int_eq(bz2_decompress(a.out, a.len, 0, 1, &back, &back_len, &err), GC_OK);
    ck_assert_uint_eq(back_len, 300000);
    ck_assert_int_eq(memcmp(back, src, back_len), 0);
    free(back);
    free(a.out);
    /* A flush inside an rle frame cannot cut it: the mark is dropped, the frame decodes whole. */
    size_t frame_len;
    uint8_t *frame = rle_frames(src, 300000, 1u << 20, &frame_len);
    Gpucomp__Request d1 = GPUCOMP__REQUEST__INIT;
    d1.id = 13;
    d1.op = GPUCOMP__OP__OP_DECOMPRESS;
    d1.codec = GPUCOMP__CODEC__CODEC_RLE;
    d1.options = &o;
    d1.stream = 1;
    d1.payload.data = frame;
    d1.payload.len = frame_len / 2;
    d1.flush = 1;
    send_frame(fd, &d1);
    Gpucomp__Request d2 = GPUCOMP__REQUEST__INIT;
    d2.id = 13;
    d2.payload.data = frame + frame_len / 2;
    d2.payload.len = frame_len - frame_len / 2;
    d2.last = 1;
    send_frame(fd, &d2);
    answer d = { 0 };
    while (!d.done)
        ck_assert(read_answer(fd, 13, &d));
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
    ck_assert_uint_eq(d.len, 300000);
    ck_assert_int_eq(memcmp(d.out, src, d.len), 0);
    free(d.out);
    free(frame);
    free(src);
    close(fd);
}
END_TEST

START_TEST(test_empty_and_tiny_streams)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    static const Gpucomp__Codec codecs[] = { GPUCOMP__CODEC__CODEC_RLE, GPUCOMP__CODEC__CODEC_BZIP2 };
    for (unsigned c = 0; c < 2; c++)
        for (size_t len = 0; len < 3; len++) {
            uint8_t src[2] = { 'a', 'b' };
            answer a, d;
            uint64_t id = 10 + c * 10 + len * 2;
            run_stream(fd, id, GPUCOMP__OP__OP_COMPRESS, codecs[c], 0, src, len, 1, window, &a);
            ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", a.status, a.msg);
            uint8_t *whole;
            size_t whole_len;
            gc_error err = { 0 };
            if (codecs[c] == GPUCOMP__CODEC__CODEC_RLE) {
                whole = rle_frames(src, len, 1u << 20, &whole_len);
            } else {
                bz2_options o = { .level = 9, .threads = 1 };
                ck_assert_int_eq(bz2_compress(src, len, &o, &whole, &whole_len, &err), GC_OK);
            }
            ck_assert_uint_eq(a.len, whole_len);
            ck_assert_int_eq(memcmp(a.out, whole, whole_len), 0);
            run_stream(fd, id + 1, GPUCOMP__OP__OP_DECOMPRESS, codecs[c], 0, a.out, a.len, 3, window, &d);
            ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
            ck_assert_uint_eq(d.len, len);
            ck_assert(len == 0 || memcmp(d.out, src, len) == 0);
            free(whole);
            free(a.out);
            free(d.out);
        }
    /* No input at all is not a stream of either codec. */
    for (unsigned c = 0; c < 2; c++) {
        answer d;
        run_stream(fd, 50 + c, GPUCOMP__OP__OP_DECOMPRESS, codecs[c], 0, NULL, 0, 1, window, &d);
        ck_assert_msg(d.status != GPUCOMP__STATUS__STATUS_OK, "an empty input decoded");
        free(d.out);
    }
    close(fd);
}
END_TEST

/* A frame too large to stream fails its stream, not the connection or the daemon. */
START_TEST(test_unstreamable_frame_fails_the_stream)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    size_t piece = 1u << 20;
    uint8_t *junk = text_like(piece, 3);
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 5;
    req.op = GPUCOMP__OP__OP_DECOMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_RLE;
    req.options = &o;
    req.stream = 1;
    memcpy(junk, "GCRL", 4);
    memset(junk + 4, 0, 28); /* a frame header whose index never arrives: nothing is taken */
    junk[20] = 0xff;
    junk[21] = 0xff;
    junk[22] = 0x3f; /* 4M chunks: an index of 16 MiB, inside the window */
    req.payload.data = junk;
    req.payload.len = piece;
    send_frame(fd, &req);
    memset(&req, 0, sizeof req);
    gpucomp__request__init(&req);
    req.id = 5;
    req.payload.data = junk;
    req.payload.len = piece;
    /* The index is 16 MiB; the records it declares cannot fit in the window: LIMIT. */
    answer a = { 0 };
    for (uint64_t sent = piece; sent <= window + piece && !a.done; sent += piece) {
        send_frame(fd, &req);
        struct pollfd p = { fd, POLLIN, 0 };
        while (!a.done && poll(&p, 1, 0) == 1)
            ck_assert(read_answer(fd, 5, &a));
    }
    while (!a.done)
        ck_assert(read_answer(fd, 5, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_LIMIT, "status %d: %s", a.status, a.msg);
    /* Later frames of the failed stream are dropped; the connection still serves. */
    req.last = 1;
    send_frame(fd, &req);
    Gpucomp__Request ping = GPUCOMP__REQUEST__INIT;
    ping.id = 6;
    ping.op = GPUCOMP__OP__OP_PING;
    ping.last = 1;
    send_frame(fd, &ping);
    Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->response->id, 6);
    gc_wire_free(f);
    free(junk);
    close(fd);
}
END_TEST

/* A stream sending more than the window without waiting for credit is refused. */
START_TEST(test_window_is_enforced)
{
    static const char *const args[] = { "--workers=1", "--codec-threads=1", NULL };
    start(args);
    uint64_t window;
    int fd = hello(&window);
    size_t piece = 4u << 20;
    uint8_t *src = text_like(piece, 4);
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    o.level = 1;
    answer a = { 0 };
    /* Credit moves only as parts are taken (four at the engines at most): a client that never
     * waits for it passes the window soon after. */
    uint64_t sent = 0;
    for (uint64_t id_piece = 0; sent <= ((uint64_t)512 << 20) && !a.done; id_piece++) {
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = 7;
        if (id_piece == 0) {
            req.op = GPUCOMP__OP__OP_COMPRESS;
            req.codec = GPUCOMP__CODEC__CODEC_BZIP2;
            req.options = &o;
            req.stream = 1;
        }
        req.payload.data = src;
        req.payload.len = piece;
        send_frame(fd, &req);
        sent += piece;
        struct pollfd p = { fd, POLLIN, 0 };
        while (!a.done && poll(&p, 1, 0) == 1)
            ck_assert(read_answer(fd, 7, &a));
    }
    while (!a.done)
        ck_assert(read_answer(fd, 7, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_PROTOCOL, "status %d: %s", a.status, a.msg);
    ck_assert_msg(strstr(a.msg, "window") != NULL, "message: %s", a.msg);
    free(a.out);
    free(src);
    close(fd);
}
END_TEST

/* One of the daemon's STATS: stream_loop_copied (loop_copied) or memory_in_use. */
static uint64_t stats_value(bool loop_copied)
{
    int fd = hello(NULL);
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 1;
    req.op = GPUCOMP__OP__OP_STATS;
    req.last = 1;
    send_frame(fd, &req);
    Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(f->response->stats);
    uint64_t v = loop_copied ? f->response->stats->stream_loop_copied : f->response->stats->memory_in_use;
    gc_wire_free(f);
    close(fd);
    return v;
}

static uint64_t memory_in_use(void)
{
    return stats_value(false);
}

static void wait_memory_free(void)
{
    uint64_t used = 0;
    for (int i = 0; i < 200; i++) {
        used = memory_in_use();
        if (used == 0)
            return;
        struct timespec ts = { 0, 50 * 1000000 };
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("the daemon still holds %llu bytes", (unsigned long long)used);
}

/* OP_CANCEL ends a stream with CANCELLED and gives its memory back. */
START_TEST(test_cancel_stream_and_request)
{
    static const char *const args[] = { "--workers=1", "--codec-threads=1", NULL };
    start(args);
    uint64_t window;
    int fd = hello(&window);
    size_t len = 40u << 20;
    uint8_t *src = text_like(len, 5);
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 8;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_BZIP2;
    req.options = &o;
    req.stream = 1;
    req.payload.data = src;
    req.payload.len = 8u << 20;
    send_frame(fd, &req);
    for (unsigned i = 1; i < 4; i++) { /* 32 MiB: one part is at the engine */
        Gpucomp__Request more = GPUCOMP__REQUEST__INIT;
        more.id = 8;
        more.payload.data = src + ((size_t)i << 23);
        more.payload.len = 8u << 20;
        send_frame(fd, &more);
    }
    Gpucomp__Request cancel = GPUCOMP__REQUEST__INIT;
    cancel.id = 8;
    cancel.op = GPUCOMP__OP__OP_CANCEL;
    cancel.last = 1;
    send_frame(fd, &cancel);
    answer a = { 0 };
    while (!a.done)
        ck_assert(read_answer(fd, 8, &a));
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_CANCELLED, "status %d: %s", a.status, a.msg);
    free(a.out);
    /* A whole-buffer request in flight: CANCELLED too. */
    Gpucomp__Request big = GPUCOMP__REQUEST__INIT;
    big.id = 9;
    big.op = GPUCOMP__OP__OP_COMPRESS;
    big.codec = GPUCOMP__CODEC__CODEC_BZIP2;
    big.options = &o;
    big.total_size = len;
    for (size_t at = 0; at < len; at += 8u << 20) {
        big.payload.data = src + at;
        big.payload.len = 8u << 20;
        big.last = at + (8u << 20) == len;
        send_frame(fd, &big);
        big.op = 0;
        big.codec = 0;
        big.options = NULL;
        big.total_size = 0;
    }
    struct timespec ts = { 0, 200 * 1000000 };
    nanosleep(&ts, NULL);
    cancel.id = 9;
    send_frame(fd, &cancel);
    Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->response->id, 9);
    ck_assert_msg(f->response->status == GPUCOMP__STATUS__STATUS_CANCELLED, "status %d: %s", f->response->status,
                  f->response->message);
    gc_wire_free(f);
    wait_memory_free();
    free(src);
    close(fd);
}
END_TEST

START_TEST(test_streams_per_connection_are_bounded)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    unsigned n = 0;
    for (;; n++) {
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = 100 + n;
        req.op = GPUCOMP__OP__OP_COMPRESS;
        req.codec = GPUCOMP__CODEC__CODEC_RLE;
        req.options = &o;
        req.stream = 1;
        send_frame(fd, &req);
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 200) == 1)
            break;
        ck_assert_uint_lt(n, 64);
    }
    answer a = { 0 };
    ck_assert(read_answer(fd, 100 + n, &a));
    ck_assert_msg(a.done && a.status == GPUCOMP__STATUS__STATUS_LIMIT, "status %d: %s", a.status, a.msg);
    ck_assert_uint_ge(n, 1);
    close(fd);
    wait_memory_free();
}
END_TEST

/* A stream that waits for input past request-timeout closes its connection. */
START_TEST(test_stream_without_input_times_out)
{
    static const char *const args[] = { "--request-timeout=1", NULL };
    start(args);
    int fd = hello(NULL);
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 3;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_RLE;
    req.options = &o;
    req.stream = 1;
    uint8_t b[100] = { 0 };
    req.payload.data = b;
    req.payload.len = sizeof b;
    send_frame(fd, &req);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    Gpucomp__Frame *f;
    bool saw_timeout = false;
    while ((f = raw_recv(fd, 64u << 20)) != NULL) {
        if (f->response->id == 0 && f->response->status == GPUCOMP__STATUS__STATUS_LIMIT)
            saw_timeout = strstr(f->response->message, "stream") != NULL;
        gc_wire_free(f);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(saw_timeout, "no timeout error before the close");
    ck_assert_msg(s > 0.9 && s < 20.0, "closed after %.1f s", s);
    close(fd);
}
END_TEST

/* A client that vanishes mid-stream leaves nothing held. */
START_TEST(test_vanished_stream_client_frees_everything)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    size_t len = 48u << 20;
    uint8_t *src = text_like(len, 6);
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    o.level = 1;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 4;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_BZIP2;
    req.options = &o;
    req.stream = 1;
    for (size_t at = 0; at < len; at += 8u << 20) {
        req.payload.data = src + at;
        req.payload.len = 8u << 20;
        send_frame(fd, &req);
        req.stream = 0;
    }
    close(fd);
    wait_memory_free();
    free(src);
}
END_TEST

/*
 * A reader that goes silent: its stream's output is held by reference until
 * written (stream.c gcd_stream_put_output), so the daemon must stop decoding
 * at its output bound, keep serving others, and free the held parts when the
 * client vanishes without reading a byte.
 */
START_TEST(test_silent_reader_then_vanished)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    size_t len = (size_t)1536 << 20, bz_len;
    uint8_t *bz = compressed_zeros(len, &bz_len);
    ck_assert_uint_lt(bz_len, window); /* the whole input goes without reading a credit */
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 3;
    req.op = GPUCOMP__OP__OP_DECOMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_BZIP2;
    req.options = &o;
    req.stream = 1;
    req.last = 1;
    req.payload.data = bz;
    req.payload.len = bz_len;
    send_frame(fd, &req);
    /* wait for the held output to stop growing, then bound it */
    uint64_t used = 0, last = UINT64_MAX;
    for (int i = 0; i < 100 && used != last; i++) {
        last = used;
        struct timespec ts = { 0, 300 * 1000000 };
        nanosleep(&ts, NULL);
        used = memory_in_use(); /* a second client is served meanwhile */
    }
    fprintf(stderr, "silent reader of a %zu-byte stream: the daemon holds %llu bytes\n", len,
            (unsigned long long)used);
    ck_assert_uint_gt(used, 0);
    /* stream.c: no new part once 512 MiB of answers wait, a part stops from 256 MiB of
     * output (codec_bzip2.c), and the window's input: 832 MiB; 767 MiB measured */
    ck_assert_msg(used <= (uint64_t)832 << 20, "a silent reader made the daemon hold %llu bytes of %zu",
                  (unsigned long long)used, len);
    close(fd);
    wait_memory_free();
    free(bz);
}
END_TEST

/*
 * A hostile decompress stream: every frame a whole bzip2 stream of zeros
 * with a flush mark, so every frame is a part of tiny input and ~96 MiB of
 * output, and a reader that never reads. Streams keep many parts out
 * (stream.c stream_depth); what one of them holds stays bounded by
 * STREAM_HELD_MOST (512 MiB), not by its depth times a part's output.
 */
START_TEST(test_deep_stream_holds_at_most_its_cap)
{
    static const char *const args[] = { "--memory-budget=3G", "--workers=4", NULL };
    start(args);
    uint64_t window;
    int fd = hello(&window);
    size_t len = (size_t)96 << 20, bz_len;
    uint8_t *bz = compressed_zeros(len, &bz_len);
    unsigned frames = 24;
    ck_assert_uint_lt((uint64_t)bz_len * frames, window); /* all of it goes without reading a credit */
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    for (unsigned i = 0; i < frames; i++) {
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = 5;
        if (i == 0) {
            req.op = GPUCOMP__OP__OP_DECOMPRESS;
            req.codec = GPUCOMP__CODEC__CODEC_BZIP2;
            req.options = &o;
            req.stream = 1;
        }
        req.flush = 1;
        req.payload.data = bz;
        req.payload.len = bz_len;
        send_frame(fd, &req);
    }
    uint64_t used = 0, last = UINT64_MAX, most = 0;
    for (int i = 0; i < 200 && (used != last || used <= len); i++) { /* a part's output held, then steady */
        last = used;
        struct timespec ts = { 0, 300 * 1000000 };
        nanosleep(&ts, NULL);
        used = memory_in_use();
        most = used > most ? used : most;
    }
    fprintf(stderr, "silent reader of %u flushed parts: the daemon held at most %llu bytes\n", frames,
            (unsigned long long)most);
    ck_assert_uint_gt(most, len);
    /* the cap, overshot by at most one part's output and the block its stop may run into, and the
     * window's input */
    ck_assert_msg(most <= ((uint64_t)512 << 20) + len + BZ2_MAX_BLOCK_OUTPUT + window,
                  "one stream made the daemon hold %llu bytes", (unsigned long long)most);
    close(fd);
    wait_memory_free();
    free(bz);
}
END_TEST

/*
 * A socket stream's input crosses the loop once: each frame's payload is
 * copied into the buffer that becomes its part's input (stream.c hand_over);
 * only the bytes after a cut move again. Its parts' outputs go by reference.
 * Several parts each way, byte for byte.
 */
START_TEST(test_socket_stream_copies_input_once)
{
    start(NULL);
    uint64_t window;
    int fd = hello(&window);
    size_t len = (size_t)100 << 20;
    uint8_t *src = malloc(len);
    ck_assert_ptr_nonnull(src);
    fill_test_data(src, len, 1, 3);
    answer a, d;
    uint64_t before = stats_value(true);
    run_stream(fd, 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, 0, src, len, 1u << 20, window, &a);
    uint64_t compress_copied = stats_value(true) - before;
    ck_assert_msg(a.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", a.status, a.msg);
    before = stats_value(true);
    run_stream(fd, 2, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, 0, a.out, a.len, 300000, window, &d);
    uint64_t decompress_copied = stats_value(true) - before;
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
    ck_assert_uint_eq(d.len, len);
    ck_assert_int_eq(memcmp(d.out, src, len), 0);
    fprintf(stderr, "the loop copied %llu bytes compressing %zu, %llu decompressing %zu\n",
            (unsigned long long)compress_copied, len, (unsigned long long)decompress_copied, a.len);
    /* each input byte once, and what followed a cut (less than a frame each) */
    ck_assert_uint_ge(compress_copied, len);
    ck_assert_uint_le(compress_copied, len + len / 16);
    ck_assert_uint_ge(decompress_copied, a.len);
    /* a decompress stream's first part runs alone (stream.c holds_enough): the input that
     * arrives meanwhile moves once more when that part is cut */
    ck_assert_uint_le(decompress_copied, a.len + a.len / 2);
    free(a.out);
    free(d.out);
    free(src);
    close(fd);
}
END_TEST

/* ---- ring streams (docs/PROTOCOL.md, "Ring streams") ------------------------- */

typedef struct ring {
    int fd;
    uint8_t *mem;
    size_t size;
} ring;

static ring ring_make(size_t size)
{
    ring g = { gc_memfd_create("check-ring"), NULL, size };
    ck_assert_int_ge(g.fd, 0);
    ck_assert_int_eq(ftruncate(g.fd, (off_t)size), 0);
    g.mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, g.fd, 0);
    ck_assert(g.mem != MAP_FAILED);
    return g;
}

static void ring_free(ring *g)
{
    munmap(g->mem, g->size);
    close(g->fd);
}

/* The opening frame of ring stream id, passing ring_fd (-1: none). */
static void open_ring(int fd, uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, uint32_t level, int ring_fd)
{
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    o.level = level;
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.op = op;
    req.codec = codec;
    req.options = &o;
    req.stream = 1;
    req.ring = 1;
    raw_send_request_fds(fd, &req, &ring_fd, ring_fd >= 0 ? 1 : 0);
}

/* A ring frame: length bytes at offset (already in the ring), last as said. */
static void ring_frame(int fd, uint64_t id, uint64_t offset, uint64_t length, bool last)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.ring_offset = offset;
    req.ring_length = length;
    req.last = last;
    send_frame(fd, &req);
}

/*
 * run_stream through a ring: each piece is written into the ring at its
 * place, as far as the credit allows, and named by a frame.
 */
static void run_ring_stream(int fd, uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, uint32_t level,
                            const uint8_t *src, size_t len, size_t piece, ring *g, answer *a)
{
    memset(a, 0, sizeof *a);
    open_ring(fd, id, op, codec, level, g->fd);
    size_t sent = 0;
    bool ended = false;
    while (!a->done) {
        size_t at = sent % g->size, n = len - sent < piece ? len - sent : piece;
        n = n < g->size - at ? n : g->size - at;
        if (!ended && sent - a->consumed + n <= g->size) {
            memcpy(g->mem + at, src + sent, n);
            sent += n;
            ended = sent == len;
            ring_frame(fd, id, at, n, ended);
            continue;
        }
        ck_assert_msg(read_answer(fd, id, a), "the daemon closed the connection mid-stream (%zu of %zu sent)",
                      sent, len);
    }
}

static int hello_rings(uint64_t *window)
{
    int fd = raw_connect(dut.socket_path);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = { 30, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    ck_assert_msg(w && w->body_case == GPUCOMP__FRAME__BODY_WELCOME, "no Welcome from the daemon");
    ck_assert_msg(w->welcome->stream_rings, "the daemon does not announce ring streams");
    *window = w->welcome->stream_window;
    gc_wire_free(w);
    return fd;
}

/*
 * Through a ring, both codecs both ways, in odd pieces over many parts:
 * compressed output byte for byte the frames' stream of the same input,
 * decompressed output the input, and no input byte copied on the loop.
 */
START_TEST(test_ring_stream_round_trips)
{
    start(NULL);
    uint64_t window;
    int fd = hello_rings(&window);
    bool bz = _i == 1;
    Gpucomp__Codec codec = bz ? GPUCOMP__CODEC__CODEC_BZIP2 : GPUCOMP__CODEC__CODEC_RLE;
    size_t len = bz ? (size_t)40 << 20 : (size_t)100 << 20;
    uint8_t *src = malloc(len);
    ck_assert_ptr_nonnull(src);
    fill_test_data(src, len, bz ? 2 : 1, 11);
    ring g = ring_make(window);
    answer framed, c, d;
    run_stream(fd, 1, GPUCOMP__OP__OP_COMPRESS, codec, 1, src, len, 1u << 20, window, &framed);
    ck_assert_msg(framed.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", framed.status, framed.msg);
    uint64_t before = stats_value(true);
    run_ring_stream(fd, 2, GPUCOMP__OP__OP_COMPRESS, codec, 1, src, len, 999983, &g, &c);
    ck_assert_msg(c.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", c.status, c.msg);
    ck_assert_uint_eq(c.len, framed.len);
    ck_assert_int_eq(memcmp(c.out, framed.out, c.len), 0);
    run_ring_stream(fd, 3, GPUCOMP__OP__OP_DECOMPRESS, codec, 0, c.out, c.len, 300007, &g, &d);
    uint64_t copied = stats_value(true) - before;
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
    ck_assert_uint_eq(d.len, len);
    ck_assert_int_eq(memcmp(d.out, src, len), 0);
    fprintf(stderr, "ring streams: the loop copied %llu bytes (%zu in, %zu compressed)\n",
            (unsigned long long)copied, len, c.len);
    ck_assert_uint_le(copied, 4096); /* markers only (bzip2's end of stream) */
    ring_free(&g);
    free(framed.out);
    free(c.out);
    free(d.out);
    free(src);
    close(fd);
}
END_TEST

/* The final frame of stream id, which must be INVALID (or want) saying what. */
static void expect_cut_off(int fd, uint64_t id, Gpucomp__Status want, const char *what)
{
    answer a = { 0 };
    while (!a.done)
        ck_assert_msg(read_answer(fd, id, &a), "the daemon closed the connection (%s)", what);
    ck_assert_msg(a.status == want, "%s: status %d: %s", what, a.status, a.msg);
    ck_assert_msg(strstr(a.msg, what) != NULL, "expected \"%s\" in: %s", what, a.msg);
    free(a.out);
}

/* Two frames in one write: the daemon reads both before anything of the first can be taken. */
static void two_ring_frames(int fd, uint64_t id, uint64_t len1, uint64_t off2, uint64_t len2)
{
    uint8_t buf[128];
    size_t at = 0;
    for (int k = 0; k < 2; k++) {
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = id;
        req.ring_offset = k ? off2 : 0;
        req.ring_length = k ? len2 : len1;
        Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
        f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
        f.request = &req;
        ck_assert_uint_le(gc_wire_packed_size(&f), sizeof buf - at);
        at += gc_wire_pack(&f, buf + at);
    }
    ck_assert_int_eq(send(fd, buf, at, MSG_NOSIGNAL), (ssize_t)at);
}

/*
 * A client that lies about its ring is cut off with INVALID: the stream
 * ends, nothing is read past the ring, and the daemon serves the next
 * client as before.
 */
START_TEST(test_ring_liars_are_cut_off)
{
    start(NULL);
    uint64_t window;
    int fd = hello_rings(&window);
    ring g = ring_make(window);
    const Gpucomp__Op op = GPUCOMP__OP__OP_DECOMPRESS;
    const Gpucomp__Codec bz = GPUCOMP__CODEC__CODEC_BZIP2;
    uint64_t id = 1;
    /* past the ring's end */
    open_ring(fd, id, op, bz, 0, g.fd);
    ring_frame(fd, id, 0, g.size + 1, false);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "goes past the ring");
    ring_frame(fd, id++, 0, 0, true);
    /* not where the input goes on: ahead, then backwards */
    open_ring(fd, id, op, bz, 0, g.fd);
    ring_frame(fd, id, 4096, 1, false);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "the next byte of the stream goes at 0");
    ring_frame(fd, id++, 0, 0, true);
    open_ring(fd, id, op, bz, 0, g.fd);
    two_ring_frames(fd, id, 1u << 20, 0, 1u << 20);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "the next byte of the stream goes at 1048576");
    ring_frame(fd, id++, 0, 0, true);
    /* over bytes the daemon has not taken: beyond the credit */
    open_ring(fd, id, op, bz, 0, g.fd);
    two_ring_frames(fd, id, g.size, 0, 1);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "overwrites input not yet taken");
    ring_frame(fd, id++, 0, 0, true);
    /* payload on a ring stream */
    open_ring(fd, id, op, bz, 0, g.fd);
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.payload.data = (uint8_t *)"BZh9";
    req.payload.len = 4;
    send_frame(fd, &req);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "not as payload");
    ring_frame(fd, id++, 0, 0, true);
    /* rings the daemon refuses: too small, not a sealable memfd, none at all */
    ring small = ring_make(1u << 20);
    open_ring(fd, id, op, bz, 0, small.fd);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "must hold");
    ring_frame(fd, id++, 0, 0, true);
    ring_free(&small);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    open_ring(fd, id, op, bz, 0, p[0]);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "memfd");
    ring_frame(fd, id++, 0, 0, true);
    close(p[0]);
    close(p[1]);
    int unsealable = memfd_create("check-unsealable", MFD_CLOEXEC);
    ck_assert_int_ge(unsealable, 0);
    ck_assert_int_eq(ftruncate(unsealable, (off_t)window), 0);
    open_ring(fd, id, op, bz, 0, unsealable);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_INVALID, "cannot be sealed");
    ring_frame(fd, id++, 0, 0, true);
    close(unsealable);
    open_ring(fd, id, op, bz, 0, -1);
    expect_cut_off(fd, id, GPUCOMP__STATUS__STATUS_PROTOCOL, "without its ring");
    ring_frame(fd, id++, 0, 0, true);
    /* and everyone is still served, on this connection and another */
    size_t len = (size_t)3 << 20;
    uint8_t *src = text_like(len, 5);
    answer c, d;
    run_ring_stream(fd, id++, GPUCOMP__OP__OP_COMPRESS, bz, 1, src, len, 65537, &g, &c);
    ck_assert_msg(c.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", c.status, c.msg);
    int fd2 = hello_rings(&window);
    run_ring_stream(fd2, 1, op, bz, 0, c.out, c.len, 4099, &g, &d);
    ck_assert_msg(d.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", d.status, d.msg);
    ck_assert_uint_eq(d.len, len);
    ck_assert_int_eq(memcmp(d.out, src, len), 0);
    free(c.out);
    free(d.out);
    free(src);
    ring_free(&g);
    close(fd2);
    close(fd);
    wait_memory_free();
}
END_TEST

/* A client that keeps rewriting its whole ring, runs and flipped bytes, until told to stop. */
typedef struct scribbler {
    ring *g;
    atomic_bool stop;
} scribbler;

static void *scribble(void *arg)
{
    scribbler *w = arg;
    for (uint8_t k = 1; !atomic_load(&w->stop); k++)
        for (size_t at = 0; at + 4096 <= w->g->size && !atomic_load(&w->stop); at += 65536) {
            if (k & 1)
                memset(w->g->mem + at, k, 4096); /* runs, across the scan's tiles */
            else
                w->g->mem[at + k] ^= k;
        }
    return NULL;
}

/*
 * A client whose ring bytes change while the daemon reads them, over a
 * bzip2 compress whose parts settle (their cut found in their own bytes):
 * each part works on its read's copy, so the stream ends with an answer
 * (whatever bytes it compressed), nothing is held, and the next client is
 * served as before.
 */
START_TEST(test_ring_bytes_changing_under_compress)
{
    start(NULL);
    uint64_t window;
    int fd = hello_rings(&window);
    ring g = ring_make(2 * window);
    size_t len = (size_t)40 << 20;
    uint8_t *src = text_like(len, 9);
    scribbler w = { &g, false };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, scribble, &w), 0);
    answer a;
    run_ring_stream(fd, 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, 1, src, len, 1u << 20, &g, &a);
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    ck_assert(a.done);
    free(a.out);
    answer c;
    run_ring_stream(fd, 2, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, 1, src, 3u << 20, 65537, &g, &c);
    ck_assert_msg(c.status == GPUCOMP__STATUS__STATUS_OK, "status %d: %s", c.status, c.msg);
    free(c.out);
    free(src);
    ring_free(&g);
    close(fd);
    wait_memory_free();
}
END_TEST

/*
 * A ring stream's input not yet taken is charged to the budget, as a socket
 * stream's buffer is, and only that: not the whole ring, which is the
 * client's memory, so that a user's many small streams do not each cost a
 * window (64 clients streaming a few MiB each used to be refused LIMIT).
 */
START_TEST(test_ring_input_is_charged)
{
    start(NULL);
    uint64_t window;
    int fd = hello_rings(&window);
    ring g = ring_make(window + 4096);
    size_t staged = (size_t)8 << 20; /* less than a part: the daemon holds it until the end */
    uint8_t *src = text_like(staged, 6);
    memcpy(g.mem, src, staged);
    open_ring(fd, 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, 0, g.fd);
    ring_frame(fd, 1, 0, staged, false);
    uint64_t held = 0;
    for (int i = 0; i < 100 && held < staged; i++) { /* the frames may still be on their way */
        held = memory_in_use();
        if (held < staged)
            test_sleep_ms(20);
    }
    ck_assert_uint_ge(held, staged);
    ck_assert_uint_lt(held, g.size);
    ring_frame(fd, 1, staged, 0, true);
    answer a = { 0 };
    while (!a.done)
        ck_assert(read_answer(fd, 1, &a));
    ck_assert_int_eq(a.status, GPUCOMP__STATUS__STATUS_OK);
    ck_assert_uint_gt(a.len, 0);
    free(a.out);
    free(src);
    wait_memory_free();
    ring_free(&g);
    close(fd);
}
END_TEST

static Suite *stream_suite(void)
{
    Suite *s = suite_create("stream_wire");
    TCase *tc = tcase_create("streams");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_rle_stream_equals_frames_of_parts);
    tcase_add_loop_test(tc, test_bzip2_stream_equals_whole_buffer, 0, 2);
    tcase_add_test(tc, test_bzip2_zeros_decode_in_bounded_parts);
    tcase_add_test(tc, test_flush_returns_output_so_far);
    tcase_add_test(tc, test_empty_and_tiny_streams);
    tcase_add_test(tc, test_unstreamable_frame_fails_the_stream);
    tcase_add_test(tc, test_window_is_enforced);
    tcase_add_test(tc, test_cancel_stream_and_request);
    tcase_add_test(tc, test_streams_per_connection_are_bounded);
    tcase_add_test(tc, test_stream_without_input_times_out);
    tcase_add_test(tc, test_vanished_stream_client_frees_everything);
    tcase_add_test(tc, test_silent_reader_then_vanished);
    tcase_add_test(tc, test_deep_stream_holds_at_most_its_cap);
    tcase_add_test(tc, test_socket_stream_copies_input_once);
    tcase_add_loop_test(tc, test_ring_stream_round_trips, 0, 2);
    tcase_add_test(tc, test_ring_liars_are_cut_off);
    tcase_add_test(tc, test_ring_bytes_changing_under_compress);
    tcase_add_test(tc, test_ring_input_is_charged);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(stream_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
