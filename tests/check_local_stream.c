/*
 * check_local_stream.c - streams with no daemon (gpucomp.h, gpucomp_open and
 * gpucomp_open_local): the stream and file calls run in process, in parts cut
 * as the daemon cuts them. Each case runs through a real gpucompd (CPU
 * engine) too and the bytes, statuses and garbage offsets must match; a
 * decompression of 1 GiB must stay far below that in memory; and the gpucomp
 * CLI's --local path must give the daemon path's files, for files and pipes.
 *
 * Sizes: parts are 32 MiB, so the large cases span two or three of them;
 * bzip2 compression on the CPU is slow on a CI core, so the bzip2 case is
 * level 1 and just past one part boundary; rle is fast.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "gpucomp.h"
#include "stream_pump.h"

#define MiB ((size_t)1 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static test_daemon dut;

static void setup(void)
{
    test_daemon_start(&dut, NULL);
}

static void teardown(void)
{
    test_daemon_cleanup(&dut);
}

static gpucomp_client *daemon_client(void)
{
    gpucomp_client *c = NULL;
    int rc = gpucomp_connect(dut.socket_path, &c);
    ck_assert_msg(rc == GPUCOMP_OK, "connect: %s", gpucomp_connect_error());
    return c;
}

static const char *no_daemon = "/nonexistent/check-local-stream.sock";

/* A client from gpucomp_open that found no daemon: everything runs in process. */
static gpucomp_client *local_client(void)
{
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_open(no_daemon, &c), GPUCOMP_OK);
    ck_assert_ptr_nonnull(c);
    return c;
}

static uint8_t *data_of(size_t len, int kind, uint64_t seed)
{
    uint8_t *p = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(p);
    fill_test_data(p, len, kind, seed);
    return p;
}

static void same(const sink *a, const sink *b, const char *what)
{
    ck_assert_msg(a->len == b->len, "%s: %zu bytes locally, %zu through the daemon", what, a->len, b->len);
    ck_assert_msg(a->len == 0 || memcmp(a->buf, b->buf, a->len) == 0, "%s: the bytes differ", what);
}

/* ---- the daemon's bytes -------------------------------------------------------- */

typedef struct same_case {
    gpucomp_codec codec;
    int level;
    size_t len;
    int kind; /* fill_test_data's */
    size_t max_in, max_out;
} same_case;

static const same_case same_cases[] = {
    { GPUCOMP_CODEC_BZIP2, 9, 0, 2, 16, 16 },
    { GPUCOMP_CODEC_BZIP2, 9, 1, 2, 16, 1 },
    { GPUCOMP_CODEC_BZIP2, 9, 900 * 1000 + 17, 1, 200000, 70000 },   /* two blocks */
    { GPUCOMP_CODEC_BZIP2, 1, 40 * MiB + 123, 2, 3 * MiB, 1 * MiB }, /* two parts */
    { GPUCOMP_CODEC_RLE, 0, 0, 1, 16, 16 },
    { GPUCOMP_CODEC_RLE, 0, 1, 1, 16, 1 },
    { GPUCOMP_CODEC_RLE, 0, 32 * MiB, 1, 5 * MiB, 2 * MiB },      /* exactly one part */
    { GPUCOMP_CODEC_RLE, 0, 70 * MiB + 1, 1, 17 * MiB, 5 * MiB }, /* three parts */
};

/*
 * Compress locally and through the daemon's stream: the same bytes (bzip2:
 * also the whole-buffer request's); decompress both ways: the input back.
 */
START_TEST(test_same_bytes)
{
    const same_case *sc = &same_cases[_i];
    gpucomp_client *d = daemon_client(), *l = local_client();
    gpucomp_options o;
    gpucomp_options_init(&o, sc->codec);
    o.level = sc->level ? sc->level : o.level;
    uint8_t *data = data_of(sc->len, sc->kind, 77 + (uint64_t)_i);
    sink local = { 0 }, remote = { 0 }, back = { 0 }, back_remote = { 0 };
    int rc = stream_all(l, GPUCOMP_COMPRESS, &o, data, sc->len, 3 + (uint64_t)_i, sc->max_in, sc->max_out, &local);
    ck_assert_msg(rc == GPUCOMP_OK, "local compress: %s", gpucomp_last_error(l));
    ck_assert_int_eq(gpucomp_last_backend(l), GPUCOMP_BACKEND_LOCAL);
    rc = stream_all(d, GPUCOMP_COMPRESS, &o, data, sc->len, 5 + (uint64_t)_i, sc->max_in, sc->max_out, &remote);
    ck_assert_msg(rc == GPUCOMP_OK, "daemon compress: %s", gpucomp_last_error(d));
    same(&local, &remote, "compress");
    if (sc->codec == GPUCOMP_CODEC_BZIP2) {
        void *whole = NULL;
        size_t whole_len = 0;
        ck_assert_int_eq(gpucomp_compress(l, &o, data, sc->len, &whole, &whole_len), GPUCOMP_OK);
        sink w = { whole, whole_len, whole_len };
        same(&local, &w, "compress against the whole-buffer request");
        gpucomp_free(whole);
    }
    rc = stream_all(l, GPUCOMP_DECOMPRESS, &o, local.buf, local.len, 9, sc->max_in, sc->max_out, &back);
    ck_assert_msg(rc == GPUCOMP_OK, "local decompress: %s", gpucomp_last_error(l));
    rc = stream_all(d, GPUCOMP_DECOMPRESS, &o, local.buf, local.len, 11, sc->max_in, sc->max_out, &back_remote);
    ck_assert_msg(rc == GPUCOMP_OK, "daemon decompress: %s", gpucomp_last_error(d));
    same(&back, &back_remote, "decompress");
    ck_assert_uint_eq(back.len, sc->len);
    ck_assert(sc->len == 0 || memcmp(back.buf, data, sc->len) == 0);
    free(local.buf);
    free(remote.buf);
    free(back.buf);
    free(back_remote.buf);
    free(data);
    gpucomp_close(l);
    gpucomp_close(d);
}
END_TEST

/* The outcome of one decompress stream: status, output, garbage. */
typedef struct outcome {
    int rc;
    sink out;
    int garbage;
    uint64_t garbage_at;
} outcome;

static outcome decompress_on(gpucomp_client *c, const gpucomp_options *o, const uint8_t *in, size_t len,
                             size_t max_in)
{
    outcome r = { 0 };
    gpucomp_stream *s = NULL;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_DECOMPRESS, o, &s), GPUCOMP_OK);
    r.rc = pump(s, in, len, 21, max_in, 3 * MiB, &r.out);
    r.garbage = gpucomp_stream_trailing_garbage(s, &r.garbage_at);
    gpucomp_stream_free(s);
    return r;
}

/* The same input locally and through the daemon: the same outcome; the local one is returned. */
static outcome decompress_both(const gpucomp_options *o, const uint8_t *in, size_t len, size_t max_in)
{
    gpucomp_client *d = daemon_client(), *l = local_client();
    outcome a = decompress_on(l, o, in, len, max_in), b = decompress_on(d, o, in, len, max_in);
    ck_assert_msg(a.rc == b.rc, "local: %s; daemon: %s", gpucomp_strerror(a.rc), gpucomp_strerror(b.rc));
    ck_assert_int_eq(a.garbage, b.garbage);
    ck_assert_uint_eq(a.garbage_at, b.garbage_at);
    if (a.rc == GPUCOMP_OK)
        same(&a.out, &b.out, "decompress");
    free(b.out.buf);
    gpucomp_close(l);
    gpucomp_close(d);
    return a;
}

static void compress_whole(const gpucomp_options *o, const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
    void *p = NULL;
    gpucomp_client *l = local_client();
    ck_assert_int_eq(gpucomp_compress(l, o, in, len, &p, out_len), GPUCOMP_OK);
    gpucomp_close(l);
    *out = p;
}

/* Streams back to back (pbzip2's files, cat a.bz2 b.bz2), then garbage: every stream, and where it began. */
START_TEST(test_multistream_and_garbage)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = 1;
    size_t lens[3] = { 250 * 1000, 0, 40 * 1000 }, total = 0, plain = 0;
    uint8_t *in = NULL, *want = malloc(lens[0] + lens[1] + lens[2] + 1);
    for (int i = 0; i < 3; i++) {
        uint8_t *data = data_of(lens[i], 2, 40 + (uint64_t)i), *packed;
        size_t packed_len;
        compress_whole(&o, data, lens[i], &packed, &packed_len);
        in = realloc(in, total + packed_len + 16);
        memcpy(in + total, packed, packed_len);
        total += packed_len;
        memcpy(want + plain, data, lens[i]);
        plain += lens[i];
        gpucomp_free(packed);
        free(data);
    }
    memcpy(in + total, "junk at the end\n", 16);
    outcome r = decompress_both(&o, in, total + 16, 100000);
    ck_assert_msg(r.rc == GPUCOMP_OK, "%s", gpucomp_strerror(r.rc));
    ck_assert_int_eq(r.garbage, 1);
    ck_assert_uint_eq(r.garbage_at, total);
    ck_assert_uint_eq(r.out.len, plain);
    ck_assert(memcmp(r.out.buf, want, plain) == 0);
    free(r.out.buf);
    r = decompress_both(&o, in, total, 7000); /* and without the garbage */
    ck_assert_int_eq(r.rc, GPUCOMP_OK);
    ck_assert_int_eq(r.garbage, 0);
    ck_assert_uint_eq(r.out.len, plain);
    free(r.out.buf);
    free(in);
    free(want);
}
END_TEST

/*
 * A damaged stream after 40 MiB of good output (one block of zeros, more
 * than one part's output): an error, and what came before it is exactly the
 * input's prefix.
 */
START_TEST(test_corrupt_after_prefix)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    size_t zlen = 40 * MiB, tlen = 300 * 1000;
    uint8_t *zeros = calloc(zlen, 1), *text = data_of(tlen, 2, 8), *za, *tb;
    size_t za_len, tb_len;
    compress_whole(&o, zeros, zlen, &za, &za_len);
    compress_whole(&o, text, tlen, &tb, &tb_len);
    tb[tb_len / 2] ^= 0x10;
    uint8_t *in = malloc(za_len + tb_len);
    memcpy(in, za, za_len);
    memcpy(in + za_len, tb, tb_len);
    outcome r = decompress_both(&o, in, za_len + tb_len, MiB);
    ck_assert_msg(r.rc == GPUCOMP_E_CRC || r.rc == GPUCOMP_E_CORRUPT, "damage gave %s", gpucomp_strerror(r.rc));
    ck_assert_uint_ge(r.out.len, zlen);
    ck_assert_uint_lt(r.out.len, zlen + tlen);
    ck_assert(memcmp(r.out.buf, zeros, zlen) == 0);
    ck_assert(memcmp(r.out.buf + zlen, text, r.out.len - zlen) == 0);
    free(r.out.buf);
    free(in);
    gpucomp_free(za);
    gpucomp_free(tb);
    free(zeros);
    free(text);
}
END_TEST

/* Empty input, and bytes that are no stream of the codec: the daemon's status. */
START_TEST(test_empty_and_not_a_stream)
{
    for (int codec = GPUCOMP_CODEC_RLE; codec <= GPUCOMP_CODEC_BZIP2; codec++) {
        gpucomp_options o;
        gpucomp_options_init(&o, (gpucomp_codec)codec);
        outcome r = decompress_both(&o, (const uint8_t *)"", 0, 16);
        ck_assert_int_ne(r.rc, GPUCOMP_OK);
        ck_assert_uint_eq(r.out.len, 0);
        free(r.out.buf);
        r = decompress_both(&o, (const uint8_t *)"this is not compressed at all", 29, 16);
        ck_assert_int_ne(r.rc, GPUCOMP_OK);
        ck_assert_uint_eq(r.out.len, 0);
        free(r.out.buf);
    }
}
END_TEST

/* max_output bounds the whole output: LIMIT, and no more than that came out. */
START_TEST(test_max_output)
{
    for (int codec = GPUCOMP_CODEC_RLE; codec <= GPUCOMP_CODEC_BZIP2; codec++) {
        gpucomp_options o;
        gpucomp_options_init(&o, (gpucomp_codec)codec);
        size_t len = 3 * MiB;
        uint8_t *data = data_of(len, 1, 12), *packed;
        size_t packed_len;
        compress_whole(&o, data, len, &packed, &packed_len);
        o.max_output = MiB;
        outcome r = decompress_both(&o, packed, packed_len, 100000);
        ck_assert_msg(r.rc == GPUCOMP_E_LIMIT, "over max_output gave %s", gpucomp_strerror(r.rc));
        ck_assert_uint_le(r.out.len, MiB);
        o.max_output = len; /* exactly enough */
        free(r.out.buf);
        r = decompress_both(&o, packed, packed_len, 100000);
        ck_assert_int_eq(r.rc, GPUCOMP_OK);
        ck_assert_uint_eq(r.out.len, len);
        free(r.out.buf);
        gpucomp_free(packed);
        free(data);
    }
}
END_TEST

/* One rle frame far larger than a part (an old whole-buffer --local file): it is the user's file, it decodes. */
START_TEST(test_large_rle_frame)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    size_t len = 70 * MiB;
    uint8_t *data = data_of(len, 1, 3), *packed;
    size_t packed_len;
    compress_whole(&o, data, len, &packed, &packed_len);
    gpucomp_client *l = local_client();
    sink k = { 0 };
    ck_assert_int_eq(stream_all(l, GPUCOMP_DECOMPRESS, &o, packed, packed_len, 4, 3 * MiB, MiB, &k), GPUCOMP_OK);
    ck_assert_uint_eq(k.len, len);
    ck_assert(memcmp(k.buf, data, len) == 0);
    free(k.buf);
    gpucomp_free(packed);
    free(data);
    gpucomp_close(l);
}
END_TEST

/* ---- bounded memory ------------------------------------------------------------ */

static long max_rss_kb(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/*
 * The most a local bzip2 decompress may add to the peak resident size: its
 * window and output buffer, and the blocks the engine decodes ahead, about
 * one per core, more when the walk falls behind on a loaded host (a block of
 * zeros decodes to ~46 MB).
 */
static long memory_bound_kb(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return (128 << 10) + (cores + 4) * 48 * 1024;
}

/*
 * At least 1 GiB of zeros (four times the bound) from copies of one small
 * .bz2 stream (each 64 MiB of zeros), decompressed by a local stream whose
 * output is taken 1 MiB at a time: every byte is checked, and the process's
 * peak resident size grows by less than the bound (a whole-buffer run holds
 * all of the output). ASan's allocator keeps freed memory in quarantine:
 * there the output is smaller and the growth is not asserted.
 */
START_TEST(test_bounded_memory)
{
    const size_t zlen = 64 * MiB, most = 4 * (size_t)memory_bound_kb() * 1024;
    const size_t copies = UNDER_ASAN ? 4 : most > 16 * zlen ? (most + zlen - 1) / zlen : 16;
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    uint8_t *zeros = calloc(zlen, 1), *z, *in, *obuf = malloc(MiB);
    size_t z_len;
    compress_whole(&o, zeros, zlen, &z, &z_len);
    free(zeros);
    in = malloc(copies * z_len);
    for (size_t i = 0; i < copies; i++)
        memcpy(in + i * z_len, z, z_len);
    gpucomp_free(z);
    gpucomp_client *l = local_client();
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(l, GPUCOMP_DECOMPRESS, &o, &s), GPUCOMP_OK);
    long before = max_rss_kb();
    gpucomp_inbuf ib = { in, copies * z_len, 0 };
    uint64_t total = 0;
    size_t pending = 1;
    bool all_zero = true;
    while (pending) {
        gpucomp_outbuf ob = { obuf, MiB, 0 };
        int rc = gpucomp_stream_run(s, &ib, &ob, GPUCOMP_END, &pending);
        if (rc != GPUCOMP_OK) /* ck_assert on every round would cost more than the decode */
            ck_abort_msg("%s", gpucomp_last_error(l));
        all_zero = all_zero && (ob.pos == 0 || (obuf[0] == 0 && memcmp(obuf, obuf + 1, ob.pos - 1) == 0));
        total += ob.pos;
    }
    ck_assert_msg(all_zero, "the output is not all zeros");
    long grew_kb = max_rss_kb() - before;
    ck_assert_uint_eq(total, copies * zlen);
    ck_assert_int_eq(gpucomp_stream_backend(s), GPUCOMP_BACKEND_LOCAL);
    if (!UNDER_ASAN)
        ck_assert_msg(grew_kb < memory_bound_kb(), "decompressing %zu MiB grew the peak resident size by %ld KiB",
                      copies * zlen / MiB, grew_kb);
    gpucomp_stream_free(s);
    gpucomp_close(l);
    free(obuf);
    free(in);
}
END_TEST

/* ---- file calls and the fallback ---------------------------------------------------- */

static char *path_in(const char *name)
{
    static char buf[4][256];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 256, "%s/%s", dut.dir, name);
    return p;
}

/* gpucomp_compress_file and _decompress_file with no daemon: the daemon's file, and the input back. */
START_TEST(test_file_calls)
{
    size_t len = 3 * MiB + 5;
    uint8_t *data = data_of(len, 2, 19);
    ck_assert_int_eq(write_file(path_in("in"), data, len), 0);
    gpucomp_client *d = daemon_client(), *l = NULL;
    ck_assert_int_eq(gpucomp_open(no_daemon, &l), GPUCOMP_OK);
    for (int codec = GPUCOMP_CODEC_RLE; codec <= GPUCOMP_CODEC_BZIP2; codec++) {
        gpucomp_options o;
        gpucomp_options_init(&o, (gpucomp_codec)codec);
        gpucomp_client *who[2] = { l, d };
        const char *names[2] = { "local.z", "daemon.z" };
        for (int w = 0; w < 2; w++) {
            int in = open(path_in("in"), O_RDONLY),
                out = open(path_in(names[w]), O_RDWR | O_CREAT | O_TRUNC, 0600);
            gpucomp_file_result res;
            ck_assert_msg(gpucomp_compress_file(who[w], &o, in, out, &res) == GPUCOMP_OK, "%s",
                          gpucomp_last_error(who[w]));
            ck_assert_uint_eq(res.bytes_in, len);
            if (w == 0)
                ck_assert_int_eq(res.backend, GPUCOMP_BACKEND_LOCAL);
            close(in);
            close(out);
        }
        size_t a_len, b_len, back_len;
        uint8_t *a = read_file(path_in("local.z"), &a_len), *b = read_file(path_in("daemon.z"), &b_len);
        ck_assert(a && b && a_len == b_len && memcmp(a, b, a_len) == 0);
        int in = open(path_in("local.z"), O_RDONLY), out = open(path_in("back"), O_RDWR | O_CREAT | O_TRUNC, 0600);
        ck_assert_msg(gpucomp_decompress_file(l, &o, in, out, NULL) == GPUCOMP_OK, "%s", gpucomp_last_error(l));
        close(in);
        close(out);
        uint8_t *back = read_file(path_in("back"), &back_len);
        ck_assert(back && back_len == len && memcmp(back, data, len) == 0);
        free(a);
        free(b);
        free(back);
    }
    gpucomp_close(l);
    gpucomp_close(d);
    free(data);
}
END_TEST

/* A client whose daemon went away falls back to a local stream when it opens one. */
START_TEST(test_stream_falls_back)
{
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_open(dut.socket_path, &c), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    test_daemon_stop(&dut);
    size_t len = 200 * 1000;
    uint8_t *data = data_of(len, 2, 4);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    sink k = { 0 };
    int rc = stream_all(c, GPUCOMP_COMPRESS, &o, data, len, 2, 50000, 50000, &k);
    ck_assert_msg(rc == GPUCOMP_OK, "%s", gpucomp_last_error(c));
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_LOCAL);
    uint8_t *whole;
    size_t whole_len;
    compress_whole(&o, data, len, &whole, &whole_len);
    sink w = { whole, whole_len, whole_len };
    same(&k, &w, "fallback stream against the whole-buffer request");
    gpucomp_free(whole);
    free(k.buf);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* gpucomp_open_local: a client with no daemon even where one runs. */
START_TEST(test_open_local)
{
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_open_local(&c), GPUCOMP_OK);
    ck_assert_int_ne(gpucomp_ping(c), GPUCOMP_OK);
    size_t len = 100000;
    uint8_t *data = data_of(len, 2, 6);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    sink k = { 0 }, back = { 0 };
    ck_assert_int_eq(stream_all(c, GPUCOMP_COMPRESS, &o, data, len, 1, 4096, 4096, &k), GPUCOMP_OK);
    ck_assert_int_eq(stream_all(c, GPUCOMP_DECOMPRESS, &o, k.buf, k.len, 1, 4096, 4096, &back), GPUCOMP_OK);
    ck_assert(back.len == len && memcmp(back.buf, data, len) == 0);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_LOCAL);
    free(k.buf);
    free(back.buf);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* ---- the CLI ----------------------------------------------------------------------- */

/*
 * gpucomp --local (files, pipes, -t) gives the daemon path's files, and
 * round-trips, for both codecs: rle's file is past one part (a frame per
 * part), bzip2's small (bzip2 on the CPU is slow).
 */
START_TEST(test_cli_local_matches_daemon)
{
    const char *bin = getenv("GPUCOMP"), *dir = dut.dir, *sock = dut.socket_path;
    ck_assert_ptr_nonnull(bin);
    const char *codecs[2] = { "bzip2", "rle" }, *sfx[2] = { "bz2", "rle" };
    const size_t lens[2] = { 5 * MiB + 3, 40 * MiB + 3 };
    for (int i = 0; i < 2; i++) {
        const char *a = codecs[i], *x = sfx[i];
        uint8_t *data = data_of(lens[i], 1 + i, 31);
        ck_assert_int_eq(write_file(path_in("f"), data, lens[i]), 0);
        free(data);
        ck_assert_int_eq(run_shell("cd %s && '%s' --local -a %s -k -f f && mv f.%s l.%s", dir, bin, a, x, x), 0);
        ck_assert_int_eq(
            run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' --no-fallback -a %s -c f > d.%s", dir, sock, bin, a, x), 0);
        ck_assert_int_eq(run_shell("cd %s && cmp -s l.%s d.%s", dir, x, x), 0);
        ck_assert_int_eq(run_shell("cd %s && cat f | '%s' --local -a %s -c | cmp -s - d.%s", dir, bin, a, x), 0);
        ck_assert_int_eq(run_shell("cd %s && '%s' --local -dc l.%s | cmp -s - f", dir, bin, x), 0);
        ck_assert_int_eq(run_shell("cd %s && cat l.%s | '%s' --local -d | cmp -s - f", dir, x, bin), 0);
        ck_assert_int_eq(run_shell("cd %s && '%s' --local -t l.%s", dir, bin, x), 0);
        ck_assert_int_eq(
            run_shell("cd %s && rm -f k && cp l.%s k.%s && '%s' --local -d k.%s && cmp -s k f && test ! -e k.%s",
                      dir, x, x, bin, x, x),
            0);
    }
    /* a damaged file: exit status 2, and no output file left behind */
    ck_assert_int_eq(run_shell("cd %s && head -c 100000 l.bz2 > t.bz2 && '%s' --local -q -d t.bz2", dir, bin), 2);
    ck_assert_int_eq(run_shell("cd %s && test ! -e t && test -e t.bz2", dir), 0);
}
END_TEST

static Suite *local_stream_suite(void)
{
    Suite *s = suite_create("local_stream");
    TCase *api = tcase_create("api");
    tcase_add_checked_fixture(api, setup, teardown);
    tcase_set_timeout(api, 300);
    tcase_add_loop_test(api, test_same_bytes, 0, sizeof same_cases / sizeof same_cases[0]);
    tcase_add_test(api, test_multistream_and_garbage);
    tcase_add_test(api, test_corrupt_after_prefix);
    tcase_add_test(api, test_empty_and_not_a_stream);
    tcase_add_test(api, test_max_output);
    tcase_add_test(api, test_large_rle_frame);
    tcase_add_test(api, test_bounded_memory);
    tcase_add_test(api, test_file_calls);
    tcase_add_test(api, test_stream_falls_back);
    tcase_add_test(api, test_open_local);
    tcase_add_test(api, test_cli_local_matches_daemon);
    suite_add_tcase(s, api);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    SRunner *r = srunner_create(local_stream_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
