/*
 * check_file_stream.c - file streams (docs/PROTOCOL.md, "File streams"):
 * the daemon reads a regular file the client passed, and writes a regular
 * output file, on its I/O threads. Outputs against whole-buffer requests
 * for both codecs and directions, output to a file and in frames; hostile
 * descriptors sent raw (the library would not send them); a file that
 * shrinks while it is read; a daemon killed while gpucomp compresses a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "daemon_harness.h"
#include "fdpass.h"
#include "gc_status.h"
#include "gpucomp.h"
#include "wire.h"

#define MiB ((size_t)1 << 20)

static test_daemon dut;

static void start(void)
{
    const char *args[] = { "--gpu=emulate", "--workers=2", NULL };
    test_daemon_start(&dut, args);
}

static void teardown(void)
{
    /* a daemon that died under a test is a failure even where the test's
     * own checks passed (a client sees only a closed socket) */
    ck_assert_msg(dut.pid == 0 || test_daemon_stop(&dut) == 0, "the daemon did not exit cleanly on SIGTERM");
    test_daemon_cleanup(&dut);
}

static gpucomp_client *client(void)
{
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    return c;
}

/* A file in the daemon's directory holding data; its path in path. */
static void make_file(const char *name, const void *data, size_t len, char path[160])
{
    snprintf(path, 160, "%s/%s", dut.dir, name);
    ck_assert_int_eq(write_file(path, data, len), 0);
}

/* The whole-buffer answer (the reference). */
static uint8_t *whole(gpucomp_client *c, const gpucomp_options *o, bool decompress, const uint8_t *in, size_t len,
                      size_t *out_len)
{
    void *out = NULL;
    int rc = decompress ? gpucomp_decompress(c, o, in, len, &out, out_len)
                        : gpucomp_compress(c, o, in, len, &out, out_len);
    ck_assert_msg(rc == GPUCOMP_OK, "whole request: %s", gpucomp_last_error(c));
    return out;
}

/*
 * The socket stream's answer: what a file stream must write byte for byte
 * (rle compress streams one frame per part, so only a one-part input
 * matches the whole-buffer request; bzip2's always does).
 */
static uint8_t *streamed(gpucomp_client *c, const gpucomp_options *o, const uint8_t *in, size_t len,
                         size_t *out_len)
{
    gpucomp_stream *st = NULL;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, o, &st), GPUCOMP_OK);
    size_t cap = len + len / 8 + 4096, pending = 0;
    uint8_t *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    gpucomp_inbuf ib = { in, len, 0 };
    gpucomp_outbuf ob = { out, cap, 0 };
    do
        ck_assert_int_eq(gpucomp_stream_run(st, &ib, &ob, GPUCOMP_END, &pending), GPUCOMP_OK);
    while (pending && ob.pos < ob.size);
    ck_assert_uint_eq(pending, 0);
    *out_len = ob.pos;
    gpucomp_stream_free(st);
    return out;
}

/* The file call's output, to a regular file (to_file) or through a pipe (frames), compared with want. */
static void check_file_call(gpucomp_client *c, const gpucomp_options *o, bool decompress, const char *in_path,
                            const uint8_t *want, size_t want_len, bool to_file)
{
    char out_path[160];
    snprintf(out_path, sizeof out_path, "%s/out", dut.dir);
    int in = open(in_path, O_RDONLY);
    ck_assert_int_ge(in, 0);
    int out;
    if (to_file) {
        out = open(out_path, O_CREAT | O_TRUNC | O_RDWR, 0600);
        ck_assert_int_ge(write(out, "stale bytes beyond the output", 29), 0); /* truncated away */
        lseek(out, 0, SEEK_SET);
    } else {
        out = open(out_path, O_CREAT | O_TRUNC | O_RDWR | O_APPEND,
                   0600); /* O_APPEND: frames, written by the library */
    }
    ck_assert_int_ge(out, 0);
    gpucomp_file_result res;
    int rc =
        decompress ? gpucomp_decompress_file(c, o, in, out, &res) : gpucomp_compress_file(c, o, in, out, &res);
    ck_assert_msg(rc == GPUCOMP_OK, "file call: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(res.bytes_out, want_len);
    struct stat in_st;
    ck_assert_int_eq(fstat(in, &in_st), 0);
    ck_assert_uint_eq(res.bytes_in, (uint64_t)in_st.st_size);
    ck_assert_int_eq(res.trailing_garbage, 0);
    close(in);
    close(out);
    size_t got_len = 0;
    uint8_t *got = read_file(out_path, &got_len);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(got_len, want_len);
    ck_assert_msg(want_len == 0 || memcmp(got, want, want_len) == 0, "file call output differs (to_file %d)",
                  to_file);
    free(got);
    unlink(out_path);
}

/* One input through both codecs and directions, file and frames, against whole requests. */
static void round_trip(gpucomp_codec codec, size_t len, int kind)
{
    gpucomp_client *c = client();
    gpucomp_options o;
    gpucomp_options_init(&o, codec);
    uint8_t *data = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, kind, len);
    char in_path[160], z_path[160];
    make_file("in", data, len, in_path);
    size_t z_len = 0, w_len = 0, d_len = 0;
    uint8_t *z = streamed(c, &o, data, len, &z_len);
    uint8_t *w = whole(c, &o, false, data, len, &w_len);
    if (codec == GPUCOMP_CODEC_BZIP2 || len <= 32 * MiB)
        ck_assert_msg(w_len == z_len && memcmp(w, z, z_len) == 0, "the stream differs from the whole request");
    check_file_call(c, &o, false, in_path, z, z_len, true);
    check_file_call(c, &o, false, in_path, z, z_len, false);
    make_file("in.z", z, z_len, z_path);
    check_file_call(c, &o, true, z_path, data, len, true);
    check_file_call(c, &o, true, z_path, data, len, false);
    uint8_t *d = whole(c, &o, true, z, z_len, &d_len); /* and the whole request reads the stream's output */
    ck_assert_uint_eq(d_len, len);
    ck_assert(len == 0 || memcmp(d, data, len) == 0);
    gpucomp_free(d);
    gpucomp_free(w);
    free(z);
    free(data);
    unlink(in_path);
    unlink(z_path);
    gpucomp_close(c);
}

START_TEST(rle_sizes)
{
    start();
    size_t sizes[] = { 0, 1, 4097, 32 * MiB, 32 * MiB + 1, 3 * 32 * MiB + 5 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        round_trip(GPUCOMP_CODEC_RLE, sizes[i], 1);
}
END_TEST

START_TEST(bzip2_sizes)
{
    start();
    size_t sizes[] = { 0, 1, 900 * 1024 + 3, 32 * MiB + 7 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        round_trip(GPUCOMP_CODEC_BZIP2, sizes[i], 1);
}
END_TEST

/*
 * A bzip2 file over two decompress parts (its parts are cut where a block
 * magic is found, so the cut reads the file): many streams of one
 * incompressible MiB each, as pbzip2 writes, decoded by a file stream to a
 * file and in frames.
 */
START_TEST(bzip2_decompress_many_parts)
{
    start();
    gpucomp_client *c = client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    const size_t one = MiB, copies = 72;
    uint8_t *data = malloc(one * copies);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, one, 0, one); /* random: the stream is a little over a MiB */
    for (size_t k = 1; k < copies; k++)
        memcpy(data + k * one, data, one);
    size_t z1_len = 0;
    uint8_t *z1 = whole(c, &o, false, data, one, &z1_len);
    uint8_t *z = malloc(z1_len * copies);
    ck_assert_ptr_nonnull(z);
    for (size_t k = 0; k < copies; k++)
        memcpy(z + k * z1_len, z1, z1_len);
    ck_assert_uint_gt(z1_len * copies, 64 * MiB);
    char z_path[160];
    make_file("many.bz2", z, z1_len * copies, z_path);
    check_file_call(c, &o, true, z_path, data, one * copies, true);
    check_file_call(c, &o, true, z_path, data, one * copies, false);
    unlink(z_path);
    gpucomp_free(z1);
    free(z);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* ---- raw frames with hostile descriptors ---- */

static int hello(void)
{
    int fd = raw_connect(dut.socket_path);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = { 60, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    ck_assert_msg(w && w->body_case == GPUCOMP__FRAME__BODY_WELCOME, "no Welcome");
    ck_assert_msg(w->welcome->file_streams, "the daemon does not announce file streams");
    gc_wire_free(w);
    return fd;
}

/* A file stream's first frame with descriptors in (and out, if >= 0). */
static void send_open(int sock, uint64_t id, Gpucomp__Codec codec, int in, int out)
{
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = id;
    r.op = GPUCOMP__OP__OP_COMPRESS;
    r.codec = codec;
    r.stream = true;
    r.input_fd = true;
    r.output_fd = out >= 0;
    r.last = true;
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = &r;
    size_t size = gc_wire_packed_size(&f);
    uint8_t *buf = malloc(size);
    ck_assert_ptr_nonnull(buf);
    gc_wire_pack(&f, buf);
    int fds[2] = { in, out };
    gc_error err = { 0 };
    ck_assert_int_eq(gc_fdpass_send(sock, buf, size, fds, out >= 0 ? 2 : 1, &err), GC_OK);
    free(buf);
}

/* Read the stream's frames to its final one: its status; its message in msg; after_first runs at its first output. */
static int final_status(int sock, uint64_t id, char msg[256], void (*after_first)(void), uint64_t *out_total)
{
    bool first = true;
    for (;;) {
        Gpucomp__Frame *f = raw_recv(sock, 64 * MiB);
        ck_assert_msg(f != NULL, "the daemon closed the connection or sent nothing");
        ck_assert_int_eq(f->body_case, GPUCOMP__FRAME__BODY_RESPONSE);
        Gpucomp__Response *r = f->response;
        ck_assert_uint_eq(r->id, id);
        if (first && r->payload.len && after_first) {
            first = false;
            after_first();
        }
        if (r->last) {
            int st = (int)r->status;
            snprintf(msg, 256, "%s", r->message ? r->message : "");
            if (out_total)
                *out_total = r->total_size;
            gc_wire_free(f);
            return st;
        }
        gc_wire_free(f);
    }
}

/* The daemon answers in with INVALID (and keeps serving the connection: a PING after it works). */
static void expect_invalid(int in, int out, const char *says)
{
    int sock = hello();
    ck_assert_int_ge(in, 0);
    send_open(sock, 7, GPUCOMP__CODEC__CODEC_RLE, in, out);
    close(in);
    if (out >= 0)
        close(out);
    char msg[256];
    ck_assert_int_eq(final_status(sock, 7, msg, NULL, NULL), GC_E_INVALID);
    ck_assert_msg(strstr(msg, says), "message \"%s\" does not say \"%s\"", msg, says);
    Gpucomp__Request ping = GPUCOMP__REQUEST__INIT;
    ping.id = 8;
    ping.op = GPUCOMP__OP__OP_PING;
    ping.last = true;
    raw_send_request(sock, &ping);
    ck_assert_int_eq(final_status(sock, 8, msg, NULL, NULL), GC_OK);
    close(sock);
}

START_TEST(hostile_descriptors)
{
    start();
    char path[160], out_path[160];
    make_file("plain", "some bytes", 10, path);
    make_file("target", "", 0, out_path);
    expect_invalid(open("/dev/zero", O_RDONLY), -1, "not a regular file");
    expect_invalid(open("/dev/urandom", O_RDONLY), -1, "not a regular file");
    expect_invalid(open(dut.dir, O_RDONLY | O_DIRECTORY), -1, "not a regular file");
    expect_invalid(open(path, O_PATH), -1, "O_PATH");
    expect_invalid(open(path, O_WRONLY), -1, "not open for reading");
    expect_invalid(open(path, O_RDONLY), open(out_path, O_RDONLY), "not open for writing");
    expect_invalid(open(path, O_RDONLY), open(out_path, O_WRONLY | O_APPEND), "O_APPEND");
    expect_invalid(open(path, O_RDONLY), open(path, O_RDWR), "same file");
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    expect_invalid(p[0], -1, "not a regular file");
    close(p[1]);
    /* The target was never written. */
    struct stat st;
    ck_assert_int_eq(stat(out_path, &st), 0);
    ck_assert_int_eq(st.st_size, 0);
}
END_TEST

static char g_shrink_path[160];

static void shrink(void)
{
    ck_assert_int_eq(truncate(g_shrink_path, 0), 0);
}

/*
 * A sparse 4 GiB input truncated to nothing once its first output came:
 * the daemon's later reads come up short. An IO error for the stream,
 * never a fault, a hang, or a short output that passes for the whole.
 */
START_TEST(input_shrinks_while_read)
{
    start();
    make_file("sparse", "", 0, g_shrink_path);
    ck_assert_int_eq(truncate(g_shrink_path, (off_t)4 << 30), 0);
    int sock = hello();
    int in = open(g_shrink_path, O_RDONLY);
    send_open(sock, 3, GPUCOMP__CODEC__CODEC_RLE, in, -1);
    close(in);
    char msg[256];
    ck_assert_int_eq(final_status(sock, 3, msg, shrink, NULL), GC_E_IO);
    ck_assert_msg(strstr(msg, "shrank"), "message: %s", msg);
    close(sock);
    /* The daemon still serves. */
    gpucomp_client *c = client();
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
    unlink(g_shrink_path);
}
END_TEST

/*
 * gpucomp FILE while the daemon is killed with SIGKILL: gpucomp fails and
 * leaves no FILE.bz2 (the temporary output is removed), or, should it
 * finish some other way, leaves a complete one; the input is kept either way.
 */
/* The daemon's count of stream bytes its loop thread copied (STATS). */
static uint64_t loop_copied(void)
{
    int sock = hello();
    Gpucomp__Request q = GPUCOMP__REQUEST__INIT;
    q.id = 1;
    q.op = GPUCOMP__OP__OP_STATS;
    q.last = true;
    raw_send_request(sock, &q);
    Gpucomp__Frame *f = raw_recv(sock, 4 * MiB);
    ck_assert_msg(f && f->body_case == GPUCOMP__FRAME__BODY_RESPONSE && f->response->stats, "no STATS answer");
    uint64_t n = f->response->stats->stream_loop_copied;
    gc_wire_free(f);
    close(sock);
    return n;
}

/*
 * A bzip2 compress of several parts, byte for byte the whole request, to a
 * file and in frames: the parts' bits are spliced and written by the I/O
 * threads, so the loop copies no more than the end-of-stream marker (at
 * most 11 bytes), where it used to copy every output byte.
 */
START_TEST(bzip2_parts_placed_off_the_loop)
{
    start();
    size_t len = 2 * 32 * MiB + 12345, w_len = 0;
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 2, 7);
    char in_path[160];
    make_file("in", data, len, in_path);
    gpucomp_client *c = client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = 1;
    uint8_t *w = whole(c, &o, false, data, len, &w_len);
    uint64_t before = loop_copied();
    check_file_call(c, &o, false, in_path, w, w_len, true);
    uint64_t to_file = loop_copied() - before;
    check_file_call(c, &o, false, in_path, w, w_len, false);
    uint64_t in_frames = loop_copied() - before - to_file;
    ck_assert_msg(to_file <= 11, "the loop copied %llu bytes of a file-to-file stream",
                  (unsigned long long)to_file);
    ck_assert_msg(in_frames <= 11, "the loop copied %llu bytes of a file stream answered in frames",
                  (unsigned long long)in_frames);
    gpucomp_free(w);
    free(data);
    unlink(in_path);
    gpucomp_close(c);
}
END_TEST

/*
 * rle decompress of a file of many frames: the cut reads only each frame's
 * header and index, and every frame is read straight into its part, so the
 * loop copies nothing (it used to copy the whole file from its buffer).
 */
START_TEST(rle_frames_read_into_parts)
{
    start();
    size_t len = 3 * 32 * MiB + 5, z_len = 0;
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 1, 11);
    gpucomp_client *c = client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    uint8_t *z = streamed(c, &o, data, len, &z_len); /* one frame per part */
    char z_path[160];
    make_file("in.rle", z, z_len, z_path);
    uint64_t before = loop_copied();
    check_file_call(c, &o, true, z_path, data, len, true);
    uint64_t copied = loop_copied() - before;
    ck_assert_msg(copied == 0, "the loop copied %llu bytes of a file-to-file stream", (unsigned long long)copied);
    free(z);
    free(data);
    unlink(z_path);
    gpucomp_close(c);
}
END_TEST

/*
 * A bzip2 file whose compressed size passes two decompress parts (random
 * bytes do not compress): the cut looks for a magic in bytes the I/O
 * threads read for it (a cut given no bytes took the daemon down).
 */
/* len random bytes compressed at level (more than at_least bytes), then decoded by file calls. */
static void decompress_random_file(size_t len, int level, size_t at_least)
{
    start();
    size_t z_len = 0;
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 0, 5);
    gpucomp_client *c = client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = level;
    uint8_t *z = whole(c, &o, false, data, len, &z_len);
    ck_assert_uint_gt(z_len, at_least);
    char z_path[160];
    make_file("in.bz2", z, z_len, z_path);
    check_file_call(c, &o, true, z_path, data, len, true);
    check_file_call(c, &o, true, z_path, data, len, false);
    gpucomp_free(z);
    free(data);
    unlink(z_path);
    gpucomp_close(c);
}

START_TEST(bzip2_decompress_large_file)
{
    decompress_random_file(72 * MiB, 1, 64 * MiB);
}
END_TEST

/*
 * Data that hardly compresses, at -9: its blocks are large, so the cut
 * makes parts of more than 32 MiB to keep about as many blocks in each
 * (the window it looks in moves with the part's size).
 */
START_TEST(bzip2_decompress_parts_by_blocks)
{
    decompress_random_file(80 * MiB, 9, 72 * MiB);
}
END_TEST

/*
 * A valid stream and then more bytes with no magic in them than a
 * decompress cut looks through at first, or at all: the cut looks on past
 * its first window, then cuts blind; either way the stream's output is the
 * valid stream's, and the rest is reported as trailing garbage.
 */
START_TEST(bzip2_decompress_file_without_magic)
{
    start();
    gpucomp_client *c = client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    size_t len = MiB, z_len = 0, tails[] = { 20 * MiB, 72 * MiB };
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 0, len);
    uint8_t *z = whole(c, &o, false, data, len, &z_len);
    for (unsigned i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        uint8_t *file = calloc(1, z_len + tails[i]); /* zeros hold no magic */
        ck_assert_ptr_nonnull(file);
        memcpy(file, z, z_len);
        char in_path[160], out_path[160];
        make_file("garbage.bz2", file, z_len + tails[i], in_path);
        free(file);
        snprintf(out_path, sizeof out_path, "%s/out", dut.dir);
        int in = open(in_path, O_RDONLY), out = open(out_path, O_CREAT | O_TRUNC | O_RDWR, 0600);
        ck_assert_int_ge(in, 0);
        ck_assert_int_ge(out, 0);
        gpucomp_file_result res;
        ck_assert_msg(gpucomp_decompress_file(c, &o, in, out, &res) == GPUCOMP_OK, "%s", gpucomp_last_error(c));
        ck_assert_int_eq(res.trailing_garbage, 1);
        ck_assert_uint_eq(res.bytes_out, len);
        close(in);
        close(out);
        size_t got_len = 0;
        uint8_t *got = read_file(out_path, &got_len);
        ck_assert_ptr_nonnull(got);
        ck_assert_uint_eq(got_len, len);
        ck_assert(memcmp(got, data, len) == 0);
        free(got);
        unlink(in_path);
        unlink(out_path);
    }
    gpucomp_free(z);
    free(data);
    gpucomp_close(c);
}
END_TEST

START_TEST(daemon_killed_mid_file)
{
    start();
    size_t len = 96 * MiB;
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 2, 42);
    char path[160];
    make_file("big", data, len, path);
    free(data);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("GPUCOMP_SOCKET", dut.socket_path, 1);
        execl(getenv("GPUCOMP"), "gpucomp", "-q", path, (char *)NULL);
        _exit(127);
    }
    test_sleep_ms(1500);
    kill(dut.pid, SIGKILL);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    waitpid(dut.pid, NULL, 0);
    dut.pid = 0;
    char out[200];
    snprintf(out, sizeof out, "%s.bz2", path);
    struct stat st;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) { /* finished (or fell back to the CPU): the output must be whole */
        ck_assert_int_eq(run_shell("bzip2 -t '%s'", out), 0);
    } else {
        ck_assert_msg(stat(out, &st) != 0, "gpucomp failed but left %s", out);
        ck_assert_msg(stat(path, &st) == 0 && (size_t)st.st_size == len, "the input is gone or changed");
    }
    run_shell("rm -f '%s' '%s'", path, out);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("file_stream");
    TCase *tc = tcase_create("file_stream");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, rle_sizes);
    tcase_add_test(tc, bzip2_sizes);
    tcase_add_test(tc, bzip2_decompress_many_parts);
    tcase_add_test(tc, bzip2_parts_placed_off_the_loop);
    tcase_add_test(tc, rle_frames_read_into_parts);
    tcase_add_test(tc, bzip2_decompress_large_file);
    tcase_add_test(tc, bzip2_decompress_file_without_magic);
    tcase_add_test(tc, bzip2_decompress_parts_by_blocks);
    tcase_add_test(tc, hostile_descriptors);
    tcase_add_test(tc, input_shrinks_while_read);
    tcase_add_test(tc, daemon_killed_mid_file);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
