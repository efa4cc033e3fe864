/*
 * check_stream.c - streams end to end (gpucomp.h, "Streams"): a real
 * gpucompd, the client library's stream API fed in random-sized pieces
 * with random-sized output buffers, and the gpucomp CLI streaming gigabytes
 * through a pipe in bounded memory.
 *
 * Sizes: the daemon cuts streams into 32 MiB parts, so the large cases sit
 * just past one part boundary. bzip2 compression on the CPU is slow on a CI
 * core, so only one large bzip2 case (level 1); rle is fast.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bz2_oversub.h"
#include "daemon_harness.h"
#include "gpucomp.h"
#include "stream_pump.h"
#include "wire.h"

#define MiB ((size_t)1 << 20)

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

static uint8_t *text(size_t len, uint64_t seed)
{
    uint8_t *p = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(p);
    fill_test_data(p, len, 2, seed);
    return p;
}

/* ---- round trips --------------------------------------------------------- */

typedef struct round_case {
    gpucomp_codec codec;
    int level;
    size_t len;
    size_t max_in, max_out;
} round_case;

static const round_case round_cases[] = {
    { GPUCOMP_CODEC_BZIP2, 9, 0, 16, 16 },
    { GPUCOMP_CODEC_BZIP2, 9, 1, 16, 1 },
    { GPUCOMP_CODEC_BZIP2, 9, 5000, 700, 1 },                   /* 1-byte output buffers throughout */
    { GPUCOMP_CODEC_BZIP2, 9, 900 * 1000 + 17, 200000, 70000 }, /* two blocks */
    { GPUCOMP_CODEC_BZIP2, 1, 0, 16, 16 },
    { GPUCOMP_CODEC_BZIP2, 1, 1, 16, 16 },
    { GPUCOMP_CODEC_BZIP2, 1, 40 * MiB + 123, 3 * MiB, 1 * MiB }, /* past the 32 MiB part boundary */
    { GPUCOMP_CODEC_RLE, 0, 0, 16, 16 },
    { GPUCOMP_CODEC_RLE, 0, 1, 16, 1 },
    { GPUCOMP_CODEC_RLE, 0, 32 * MiB, 5 * MiB, 2 * MiB },      /* exactly one part */
    { GPUCOMP_CODEC_RLE, 0, 33 * MiB + 5, 9 * MiB, 3 * MiB },  /* one part and a bit */
    { GPUCOMP_CODEC_RLE, 0, 70 * MiB + 1, 17 * MiB, 5 * MiB }, /* three parts; pieces over a frame */
};

/*
 * Compress through a stream, compare with the whole-buffer answer (bzip2:
 * byte for byte; rle: the same frames for a one-part input), and
 * decompress through a stream to the original.
 */
START_TEST(test_round_trip)
{
    const round_case *rc_ = &round_cases[_i];
    gpucomp_client *c = connect_or_fail();
    gpucomp_options o;
    gpucomp_options_init(&o, rc_->codec);
    if (rc_->level)
        o.level = rc_->level;
    uint8_t *data = text(rc_->len, 1000 + (uint64_t)_i);
    sink packed = { 0 }, unpacked = { 0 };
    int rc =
        stream_all(c, GPUCOMP_COMPRESS, &o, data, rc_->len, 7 + (uint64_t)_i, rc_->max_in, rc_->max_out, &packed);
    ck_assert_msg(rc == GPUCOMP_OK, "compress stream of %zu bytes: %s", rc_->len, gpucomp_last_error(c));
    void *whole = NULL;
    size_t whole_len = 0;
    rc = gpucomp_compress(c, &o, data, rc_->len, &whole, &whole_len);
    ck_assert_msg(rc == GPUCOMP_OK, "whole compress: %s", gpucomp_last_error(c));
    if (rc_->codec == GPUCOMP_CODEC_BZIP2 || rc_->len <= 32 * MiB) {
        ck_assert_uint_eq(packed.len, whole_len);
        ck_assert_msg(memcmp(packed.buf, whole, whole_len) == 0, "stream output differs from gpucomp_compress's");
    }
    gpucomp_free(whole);
    rc = stream_all(c, GPUCOMP_DECOMPRESS, &o, packed.buf, packed.len, 99 + (uint64_t)_i, rc_->max_in,
                    rc_->max_out, &unpacked);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress stream: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(unpacked.len, rc_->len);
    ck_assert_msg(rc_->len == 0 || memcmp(unpacked.buf, data, rc_->len) == 0, "round trip differs");
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK); /* the client serves blocking calls again */
    free(packed.buf);
    free(unpacked.buf);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* ---- decompression's ends ---------------------------------------------------- */

static void compress_whole(gpucomp_client *c, const gpucomp_options *o, const uint8_t *data, size_t len,
                           uint8_t **out, size_t *out_len)
{
    void *p = NULL;
    int rc = gpucomp_compress(c, o, data, len, &p, out_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
    *out = p;
}

/* A bzip2 stream followed by garbage: the prefix, OK, and where the garbage began. */
static void check_garbage(const uint8_t *garbage, size_t garbage_len, size_t max_in)
{
    gpucomp_client *c = connect_or_fail();
    size_t len = 300 * 1000;
    uint8_t *data = text(len, 5);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    uint8_t *packed;
    size_t packed_len;
    compress_whole(c, &o, data, len, &packed, &packed_len);
    uint8_t *in = malloc(packed_len + garbage_len);
    memcpy(in, packed, packed_len);
    memcpy(in + packed_len, garbage, garbage_len);

    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_DECOMPRESS, &o, &s), GPUCOMP_OK);
    sink k = { 0 };
    int rc = pump(s, in, packed_len + garbage_len, 3, max_in, 4096, &k);
    ck_assert_msg(rc == GPUCOMP_OK, "stream with trailing garbage: %s", gpucomp_last_error(c));
    uint64_t offset = 0;
    ck_assert_int_eq(gpucomp_stream_trailing_garbage(s, &offset), 1);
    ck_assert_uint_eq(offset, packed_len);
    ck_assert_uint_eq(k.len, len);
    ck_assert(memcmp(k.buf, data, len) == 0);
    gpucomp_stream_free(s);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);

    /* The same stream without garbage says so. */
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_DECOMPRESS, &o, &s), GPUCOMP_OK);
    k.len = 0;
    ck_assert_int_eq(pump(s, packed, packed_len, 4, max_in, 4096, &k), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_stream_trailing_garbage(s, &offset), 0);
    ck_assert_uint_eq(k.len, len);
    gpucomp_stream_free(s);
    free(k.buf);
    free(in);
    gpucomp_free(packed);
    free(data);
    gpucomp_close(c);
}

START_TEST(test_trailing_newline)
{
    check_garbage((const uint8_t *)"\n", 1, 50000);
}
END_TEST

START_TEST(test_trailing_zeros)
{
    static const uint8_t zeros[100000];
    check_garbage(zeros, sizeof zeros, 7000);
}
END_TEST

/* A damaged block: an error, and what came before it is a correct prefix. */
START_TEST(test_corrupt_after_prefix)
{
    gpucomp_client *c = connect_or_fail();
    size_t len = 500 * 1000; /* five level-1 blocks */
    uint8_t *data = text(len, 11);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = 1;
    uint8_t *packed;
    size_t packed_len;
    compress_whole(c, &o, data, len, &packed, &packed_len);
    packed[packed_len * 3 / 4] ^= 0x55; /* inside the fourth block or so */

    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_DECOMPRESS, &o, &s), GPUCOMP_OK);
    sink k = { 0 };
    int rc = pump(s, packed, packed_len, 5, 10000, 3000, &k);
    ck_assert_msg(rc == GPUCOMP_E_CORRUPT || rc == GPUCOMP_E_CRC, "corrupt stream gave %s (%s)",
                  gpucomp_strerror(rc), gpucomp_last_error(c));
    ck_assert_str_ne(gpucomp_last_error(c), "");
    ck_assert_uint_le(k.len, len);
    ck_assert_msg(k.len == 0 || memcmp(k.buf, data, k.len) == 0, "output before the error is not a prefix");
    /* The blocks before the damaged one came out, though they share a part
     * with it: a part sends each block's output as it is decoded. */
    ck_assert_msg(k.len >= 250 * 1000, "only %zu bytes before the error", k.len);
    /* Later calls repeat the error and move nothing. */
    uint8_t b[16];
    gpucomp_inbuf ib = { b, 0, 0 };
    gpucomp_outbuf ob = { b, sizeof b, 0 };
    ck_assert_int_eq(gpucomp_stream_run(s, &ib, &ob, GPUCOMP_END, NULL), rc);
    ck_assert_uint_eq(ob.pos, 0);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IN_USE);
    gpucomp_stream_free(s);
    ck_assert_msg(gpucomp_ping(c) == GPUCOMP_OK, "ping after a failed stream: %s", gpucomp_last_error(c));
    free(k.buf);
    gpucomp_free(packed);
    free(data);
    gpucomp_close(c);
}
END_TEST

/*
 * Data whose every block holds the block magic by chance (tests/check_bz2_parts.c
 * explains how): the block's map of the byte values it uses spells it.
 */
static uint8_t *planted_magic_data(size_t n, uint64_t seed)
{
    static const uint64_t magic = 0x314159265359ull;
    uint8_t allowed[256];
    size_t na = 0;
    for (unsigned v = 0; v < 256; v++)
        if (v < 16 || v >= 64 || ((magic >> (47 - (v - 16))) & 1))
            allowed[na++] = (uint8_t)v;
    uint8_t *b = malloc(n);
    uint64_t rng = seed | 1;
    for (size_t i = 0; i < n; i++)
        b[i] = allowed[next_rand(&rng) % na];
    return b;
}

/*
 * A decompress stream's first part takes 32 MiB and ends at the first magic
 * after them (codec_bzip2.c): here a chance one, planted 137 bits into the
 * first block of a stream that begins just before 32 MiB, behind empty
 * streams and one small one (empty streams after it, so that the input is
 * more than one part's most). The part cut there must be decoded again from
 * where the first part stopped, and the output be the whole decode's.
 */
START_TEST(test_decompress_chance_magic_at_a_cut)
{
    gpucomp_client *c = connect_or_fail();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = 1;
    size_t plen = 300 * 1000, tlen = 0, packed_len, tiny_len = 0;
    uint8_t *planted = planted_magic_data(plen, 3), *packed, *tiny = NULL, tdata[64];
    compress_whole(c, &o, planted, plen, &packed, &packed_len);
    /* filler of L bytes, L*8 + 32 < 2^28 <= L*8 + 32 + 137: empty streams (14 bytes) and a small stream */
    size_t fill = 32 * MiB - 10;
    while (!tiny || (fill - tiny_len) % 14) {
        gpucomp_free(tiny);
        tdata[tlen] = (uint8_t)('a' + tlen % 26);
        tlen++;
        compress_whole(c, &o, tdata, tlen, &tiny, &tiny_len);
        ck_assert_uint_lt(tlen, sizeof tdata);
    }
    static const uint8_t empty[14] = { 'B', 'Z', 'h', '1', 0x17, 0x72, 0x45, 0x38, 0x50, 0x90, 0, 0, 0, 0 };
    size_t after = 33 * MiB / 14 * 14, total = fill + packed_len + after; /* past the last part's 64 MiB */
    uint8_t *in = malloc(total);
    memcpy(in, tiny, tiny_len);
    for (size_t at = tiny_len; at < fill; at += 14)
        memcpy(in + at, empty, 14);
    memcpy(in + fill, packed, packed_len);
    for (size_t at = fill + packed_len; at < total; at += 14)
        memcpy(in + at, empty, 14);
    sink k = { 0 };
    int rc = stream_all(c, GPUCOMP_DECOMPRESS, &o, in, total, 17, 4 * MiB, 2 * MiB, &k);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress stream: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(k.len, tlen + plen);
    ck_assert(memcmp(k.buf, tdata, tlen) == 0);
    ck_assert_msg(memcmp(k.buf + tlen, planted, plen) == 0, "the stream's output differs from the input's");
    free(k.buf);
    free(in);
    gpucomp_free(tiny);
    gpucomp_free(packed);
    free(planted);
    gpucomp_close(c);
}
END_TEST

/* max_output bounds the stream's whole output. */
START_TEST(test_max_output)
{
    gpucomp_client *c = connect_or_fail();
    size_t len = 3 * MiB;
    uint8_t *data = text(len, 12);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    uint8_t *packed;
    size_t packed_len;
    compress_whole(c, &o, data, len, &packed, &packed_len);
    o.max_output = MiB;
    sink k = { 0 };
    int rc = stream_all(c, GPUCOMP_DECOMPRESS, &o, packed, packed_len, 6, 100000, 100000, &k);
    ck_assert_msg(rc == GPUCOMP_E_LIMIT, "over max_output gave %s", gpucomp_strerror(rc));
    ck_assert_uint_le(k.len, MiB);
    /* The daemon enforces the limit before sending too much: its LIMIT leaves the connection usable. */
    ck_assert_msg(gpucomp_ping(c) == GPUCOMP_OK, "ping after LIMIT: %s", gpucomp_last_error(c));
    free(k.buf);
    gpucomp_free(packed);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* ---- the client around a stream ----------------------------------------------- */

/* Freeing an unfinished stream cancels it; the connection is usable at once. */
START_TEST(test_free_mid_stream)
{
    gpucomp_client *c = connect_or_fail();
    size_t len = 20 * MiB;
    uint8_t *data = text(len, 13);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    for (int round = 0; round < 3; round++) {
        gpucomp_stream *s;
        ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
        if (round > 0) { /* round 0: freed right after opening */
            uint8_t obuf[4096];
            gpucomp_inbuf ib = { data, round == 1 ? 1000 : len, 0 };
            gpucomp_outbuf ob = { obuf, sizeof obuf, 0 };
            ck_assert_int_eq(gpucomp_stream_run(s, &ib, &ob, GPUCOMP_CONTINUE, NULL), GPUCOMP_OK);
        }
        gpucomp_stream_free(s);
        ck_assert_msg(gpucomp_ping(c) == GPUCOMP_OK, "ping after freeing a stream (round %d): %s", round,
                      gpucomp_last_error(c));
    }
    /* And a whole stream still works on the same client. */
    sink k = { 0 };
    ck_assert_int_eq(stream_all(c, GPUCOMP_COMPRESS, &o, data, MiB, 8, 100000, 100000, &k), GPUCOMP_OK);
    ck_assert_uint_gt(k.len, 0);
    free(k.buf);
    free(data);
    gpucomp_close(c);
}
END_TEST

static void no_callback(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    (void)arg, (void)id, (void)status, (void)msg, (void)out, (void)out_len;
    ck_abort_msg("a submission refused at once must not complete later");
}

/*
 * While a stream is open its client serves only it: other calls fail with
 * IN_USE (the client's own state: retrying cannot help until the stream is
 * freed), not with the daemon's BUSY ("retry later").
 */
START_TEST(test_in_use_while_open)
{
    gpucomp_client *c = connect_or_fail();
    gpucomp_stream *s, *s2 = NULL;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, NULL, &s), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IN_USE);
    ck_assert_msg(strstr(gpucomp_last_error(c), "open stream") && strstr(gpucomp_last_error(c), "another client"),
                  "message: %s", gpucomp_last_error(c));
    ck_assert_str_ne(gpucomp_strerror(GPUCOMP_E_IN_USE), gpucomp_strerror(GPUCOMP_E_BUSY));
    void *out = NULL;
    size_t out_len = 0;
    ck_assert_int_eq(gpucomp_compress(c, NULL, "abc", 3, &out, &out_len), GPUCOMP_E_IN_USE);
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, NULL, &s2), GPUCOMP_E_IN_USE);
    ck_assert_ptr_null(s2);
    ck_assert_int_eq(gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, "abc", 3, no_callback, NULL, NULL),
                     GPUCOMP_E_IN_USE);
    gpucomp_stream_free(s);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
}
END_TEST

/* FLUSH: all input given so far is taken by the daemon, and (rle) its output is whole frames. */
START_TEST(test_flush)
{
    gpucomp_client *c = connect_or_fail();
    size_t len = 2 * MiB;
    uint8_t *data = text(len, 14);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
    sink k = { 0 };
    uint8_t *obuf = malloc(MiB);
    size_t half = len / 2, pending = 1;
    gpucomp_inbuf ib = { data, half, 0 };
    int loops = 0;
    do {
        gpucomp_outbuf ob = { obuf, MiB, 0 };
        ck_assert_int_eq(gpucomp_stream_run(s, &ib, &ob, GPUCOMP_FLUSH, &pending), GPUCOMP_OK);
        sink_add(&k, obuf, ob.pos);
        ck_assert_int_lt(++loops, 100000);
    } while (pending);
    ck_assert_uint_eq(ib.pos, half);
    ck_assert_uint_eq(gpucomp_stream_bytes_in(s), half);
    /* The rest, and the end: the whole output decodes to the input (two runs of frames). */
    gpucomp_inbuf ib2 = { data + half, len - half, 0 };
    do {
        gpucomp_outbuf ob = { obuf, MiB, 0 };
        ck_assert_int_eq(gpucomp_stream_run(s, &ib2, &ob, GPUCOMP_END, &pending), GPUCOMP_OK);
        sink_add(&k, obuf, ob.pos);
    } while (pending);
    gpucomp_stream_free(s);
    sink back = { 0 };
    ck_assert_int_eq(stream_all(c, GPUCOMP_DECOMPRESS, &o, k.buf, k.len, 15, MiB, MiB, &back), GPUCOMP_OK);
    ck_assert_uint_eq(back.len, len);
    ck_assert(memcmp(back.buf, data, len) == 0);
    free(back.buf);
    free(obuf);
    free(k.buf);
    free(data);
    gpucomp_close(c);
}
END_TEST

/*
 * An input that ends on a part boundary, its end told only after the daemon
 * cut and compressed the last part (a pipe whose writer closes late): the
 * output is byte for byte what a stream told its end with its last byte
 * gives (rle: one frame per part, not one more empty frame; bzip2: the same
 * stream end). The same input must give the same bytes whenever its end
 * arrives.
 */
START_TEST(test_end_after_last_part)
{
    gpucomp_client *c = connect_or_fail();
    size_t len = 32 * MiB; /* exactly one part */
    uint8_t *data = text(len, 16);
    gpucomp_options o;
    gpucomp_options_init(&o, _i ? GPUCOMP_CODEC_BZIP2 : GPUCOMP_CODEC_RLE);
    o.level = _i ? 1 : o.level;
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
    sink k = { 0 };
    uint8_t *obuf = malloc(MiB);
    ck_assert_ptr_nonnull(obuf);
    gpucomp_inbuf ib = { data, len, 0 };
    size_t pending = 0;
    time_t deadline = time(NULL) + 120; /* liveness only: the part's output must come without the end */
    while (ib.pos < ib.size || k.len == 0) {
        gpucomp_outbuf ob = { obuf, MiB, 0 };
        ck_assert_int_eq(gpucomp_stream_run(s, &ib, &ob, GPUCOMP_CONTINUE, &pending), GPUCOMP_OK);
        sink_add(&k, obuf, ob.pos);
        ck_assert_msg(time(NULL) < deadline, "no output for a whole part before the end");
        if (ob.pos == 0)
            usleep(1000);
    }
    gpucomp_inbuf none = { NULL, 0, 0 };
    do {
        gpucomp_outbuf ob = { obuf, MiB, 0 };
        ck_assert_int_eq(gpucomp_stream_run(s, &none, &ob, GPUCOMP_END, &pending), GPUCOMP_OK);
        sink_add(&k, obuf, ob.pos);
    } while (pending);
    gpucomp_stream_free(s);
    sink told = { 0 };
    ck_assert_int_eq(stream_all(c, GPUCOMP_COMPRESS, &o, data, len, 17, 5 * MiB, MiB, &told), GPUCOMP_OK);
    ck_assert_uint_eq(k.len, told.len);
    ck_assert_msg(memcmp(k.buf, told.buf, told.len) == 0, "the same input gave other bytes");
    free(told.buf);
    free(obuf);
    free(k.buf);
    free(data);
    gpucomp_close(c);
}
END_TEST

/*
 * Input put where gpucomp_stream_input_space says (the ring, wrapping more
 * than once), in pieces of random size, and otherwise from the caller's own
 * buffer when there is no room: the same bytes as a stream fed from a buffer.
 * Input inside the ring anywhere else is refused.
 */
START_TEST(test_input_space)
{
    gpucomp_client *c = connect_or_fail();
    size_t len = 150 * MiB + 3;
    uint8_t *data = text(len, 20);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
    sink k = { 0 };
    uint8_t *obuf = malloc(MiB);
    ck_assert_ptr_nonnull(obuf);
    uint64_t rng = 21;
    size_t off = 0, pending = 1, in_space = 0;
    while (off < len || pending) {
        size_t room = 0, n = len - off;
        uint8_t *space = gpucomp_stream_input_space(s, &room);
        const uint8_t *src = data + off;
        if (space && n) {
            gpucomp_inbuf bad = { space + 1, 1, 0 };
            gpucomp_outbuf none = { obuf, 0, 0 };
            ck_assert_int_eq(gpucomp_stream_run(s, &bad, &none, GPUCOMP_CONTINUE, NULL), GPUCOMP_E_INVALID);
            n = rand_size(&rng, room < n ? room : n);
            memcpy(space, src, n);
            src = space;
            in_space += n;
        } else {
            n = n < MiB ? n : MiB;
        }
        gpucomp_inbuf ib = { src, n, 0 };
        gpucomp_end_op op = off + n == len ? GPUCOMP_END : GPUCOMP_CONTINUE;
        do {
            gpucomp_outbuf ob = { obuf, MiB, 0 };
            ck_assert_msg(gpucomp_stream_run(s, &ib, &ob, op, &pending) == GPUCOMP_OK, "run: %s",
                          gpucomp_last_error(c));
            sink_add(&k, obuf, ob.pos);
        } while (ib.pos < ib.size || (op == GPUCOMP_END && pending));
        off += n;
    }
    ck_assert_ptr_null(gpucomp_stream_input_space(s, NULL)); /* ended */
    gpucomp_stream_free(s);
    ck_assert_uint_gt(in_space, len / 2);
    sink whole = { 0 };
    ck_assert_int_eq(stream_all(c, GPUCOMP_COMPRESS, &o, data, len, 22, 7 * MiB, MiB, &whole), GPUCOMP_OK);
    ck_assert_uint_eq(k.len, whole.len);
    ck_assert_msg(memcmp(k.buf, whole.buf, whole.len) == 0, "input from the ring gave other bytes");
    free(whole.buf);
    free(obuf);
    free(k.buf);
    free(data);
    gpucomp_close(c);
}
END_TEST

/* A timeout while the daemon has nothing to say: E_IO, the connection closed. */
START_TEST(test_timeout)
{
    gpucomp_client *c = connect_or_fail();
    gpucomp_set_timeout(c, 300);
    gpucomp_set_reconnect(c, 0); /* so that the closed connection shows */
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
    uint8_t in[100] = { 0 }, obuf[100];
    /* The end of a stream whose final frame the daemon cannot send: it is stopped (SIGSTOP). */
    kill(daemon_under_test.pid, SIGSTOP);
    gpucomp_inbuf ib = { in, sizeof in, 0 };
    gpucomp_outbuf ob = { obuf, sizeof obuf, 0 };
    size_t pending;
    int rc = gpucomp_stream_run(s, &ib, &ob, GPUCOMP_END, &pending);
    kill(daemon_under_test.pid, SIGCONT);
    ck_assert_msg(rc == GPUCOMP_E_IO, "stopped daemon gave %s", gpucomp_strerror(rc));
    ck_assert_msg(strstr(gpucomp_last_error(c), "timed out") != NULL, "message: %s", gpucomp_last_error(c));
    gpucomp_stream_free(s);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    gpucomp_close(c);
    /* With reconnection (the default), the next blocking call opens a new connection. */
    c = connect_or_fail();
    gpucomp_set_timeout(c, 300);
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
    kill(daemon_under_test.pid, SIGSTOP);
    ib.pos = 0;
    rc = gpucomp_stream_run(s, &ib, &ob, GPUCOMP_END, &pending);
    kill(daemon_under_test.pid, SIGCONT);
    ck_assert_int_eq(rc, GPUCOMP_E_IO);
    gpucomp_stream_free(s);
    ck_assert_msg(gpucomp_ping(c) == GPUCOMP_OK, "ping after reconnecting: %s", gpucomp_last_error(c));
    gpucomp_close(c);
}
END_TEST

/* ---- a fake daemon: what the client accepts ----------------------------------- */

typedef enum fake_kind {
    FAKE_NO_STREAMS,     /* an older gpucompd: stream_window 0 */
    FAKE_NO_RINGS,       /* streams without rings: input must come as payload, no descriptor with it */
    FAKE_CONSUMED_AHEAD, /* says it consumed more than was sent */
    FAKE_WRONG_TOTAL,    /* ends the stream with a total_size that is not what it sent */
    FAKE_OTHER_ID,       /* answers an id that is not in flight */
    FAKE_KINDS
} fake_kind;

static bool fake_read(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (uint8_t *)buf + got, len - got);
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}

static Gpucomp__Frame *fake_recv(int fd)
{
    uint8_t h[GC_WIRE_HEADER_SIZE];
    if (!fake_read(fd, h, sizeof h))
        return NULL;
    uint32_t len = gc_wire_body_len(h);
    uint8_t *body = malloc(len ? len : 1);
    Gpucomp__Frame *f = NULL;
    gc_error err;
    if (body && fake_read(fd, body, len))
        f = gc_wire_unpack(body, len, &err);
    free(body);
    return f;
}

/* A frame, and how many descriptors came with it (closed: only their number matters). */
static Gpucomp__Frame *fake_recv_fds(int fd, int *nfds)
{
    uint8_t h[GC_WIRE_HEADER_SIZE];
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = { h, 1 };
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf
    };
    *nfds = 0;
    if (recvmsg(fd, &m, 0) != 1)
        return NULL;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        int n = c->cmsg_type == SCM_RIGHTS ? (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) : 0;
        for (int i = 0; i < n; i++)
            close(((int *)(void *)CMSG_DATA(c))[i]);
        *nfds += n;
    }
    if (!fake_read(fd, h + 1, sizeof h - 1))
        return NULL;
    uint32_t len = gc_wire_body_len(h);
    uint8_t *body = malloc(len ? len : 1);
    Gpucomp__Frame *f = NULL;
    gc_error err;
    if (body && fake_read(fd, body, len))
        f = gc_wire_unpack(body, len, &err);
    free(body);
    return f;
}

static void fake_send(int fd, Gpucomp__Frame *f)
{
    size_t n = gc_wire_packed_size(f);
    uint8_t *buf = malloc(n);
    gc_wire_pack(f, buf);
    if (write(fd, buf, n) != (ssize_t)n)
        _exit(3);
    free(buf);
}

static void fake_send_response(int fd, Gpucomp__Response *r)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_RESPONSE;
    f.response = r;
    fake_send(fd, &f);
}

/*
 * A daemon with streams but no rings: the stream's frames must carry their
 * input as payload (no ring, no ring offsets, no descriptor); it answers
 * with the input as output. Exits 4 on a ring, 5 on a frame it did not expect.
 */
static void fake_serve_frames(int fd)
{
    int nfds;
    Gpucomp__Frame *f = fake_recv_fds(fd, &nfds);
    if (!f || f->body_case != GPUCOMP__FRAME__BODY_REQUEST || !f->request->stream)
        _exit(5);
    if (f->request->ring || nfds)
        _exit(4);
    uint64_t id = f->request->id;
    uint8_t *got = NULL;
    size_t len = 0;
    bool last = f->request->last;
    while (!last) {
        gc_wire_free(f);
        f = fake_recv_fds(fd, &nfds);
        if (!f || f->body_case != GPUCOMP__FRAME__BODY_REQUEST || f->request->id != id)
            _exit(5);
        const Gpucomp__Request *q = f->request;
        if (q->ring || q->ring_offset || q->ring_length || nfds)
            _exit(4);
        got = realloc(got, len + q->payload.len + 1);
        memcpy(got + len, q->payload.data, q->payload.len);
        len += q->payload.len;
        last = q->last;
    }
    gc_wire_free(f);
    Gpucomp__Response r = GPUCOMP__RESPONSE__INIT;
    r.id = id;
    r.stream = true;
    r.consumed = len;
    r.payload.data = got;
    r.payload.len = len;
    r.last = true;
    r.total_size = len;
    r.backend = GPUCOMP__BACKEND__BACKEND_CPU;
    fake_send_response(fd, &r);
    free(got);
}

/* The child's side: one connection, the handshake, then the misbehaviour of kind. */
static void fake_serve(int lfd, fake_kind kind)
{
    int fd = accept(lfd, NULL, NULL);
    Gpucomp__Frame *hello = fd >= 0 ? fake_recv(fd) : NULL;
    if (!hello)
        _exit(2);
    Gpucomp__Welcome w = GPUCOMP__WELCOME__INIT;
    w.protocol_version = GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
    w.max_frame_size = GC_WIRE_DEFAULT_MAX_FRAME;
    w.server_version = (char *)"0.1.0-fake";
    w.stream_window = kind == FAKE_NO_STREAMS ? 0 : 1u << 20;
    w.max_streams = kind == FAKE_NO_STREAMS ? 0 : 4;
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_WELCOME;
    f.welcome = &w;
    fake_send(fd, &f);
    if (kind == FAKE_NO_RINGS)
        fake_serve_frames(fd);
    Gpucomp__Frame *open = kind == FAKE_NO_STREAMS || kind == FAKE_NO_RINGS ? NULL : fake_recv(fd);
    if (open && open->body_case == GPUCOMP__FRAME__BODY_REQUEST) {
        Gpucomp__Response r = GPUCOMP__RESPONSE__INIT;
        r.id = open->request->id + (kind == FAKE_OTHER_ID ? 7 : 0);
        r.stream = true;
        r.consumed = kind == FAKE_CONSUMED_AHEAD ? 1u << 30 : 0;
        r.payload.data = (uint8_t *)"abc";
        r.payload.len = 3;
        r.last = kind == FAKE_WRONG_TOTAL;
        r.total_size = 5;
        fake_send_response(fd, &r);
    }
    char drop[4096];
    while (read(fd, drop, sizeof drop) > 0) /* until the client hangs up */
        ;
    _exit(0);
}

/* A listening fake at a fresh path, served by a child; returns its pid. */
static pid_t fake_start(fake_kind kind, char *path, size_t path_size)
{
    char dir[] = "/tmp/gpucomp-fake-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, path_size, "%s/sock", dir);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        fake_serve(lfd, kind);
    close(lfd);
    return pid;
}

static void fake_stop(pid_t pid, const char *path)
{
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the fake daemon failed (%d)", st);
    unlink(path);
    char dir[108];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    rmdir(dir);
}

/* An older daemon: UNSUPPORTED, saying why, and nothing sent. */
START_TEST(test_fake_no_streams)
{
    char path[108];
    pid_t pid = fake_start(FAKE_NO_STREAMS, path, sizeof path);
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(path, &c), GPUCOMP_OK);
    gpucomp_stream *s = (gpucomp_stream *)1;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, NULL, &s), GPUCOMP_E_UNSUPPORTED);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(gpucomp_last_error(c), "no streams") != NULL, "message: %s", gpucomp_last_error(c));
    gpucomp_close(c);
    fake_stop(pid, path);
}
END_TEST

/*
 * A daemon with streams that does not announce rings: the library sends the
 * input in frames (the fake exits non-zero on a ring or a descriptor).
 */
START_TEST(test_fake_no_rings)
{
    char path[108];
    pid_t pid = fake_start(FAKE_NO_RINGS, path, sizeof path);
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(path, &c), GPUCOMP_OK);
    uint8_t *data = text(300000, 18);
    sink k = { 0 };
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
    size_t room = 1;
    ck_assert_ptr_null(gpucomp_stream_input_space(s, &room)); /* no ring: nothing to put input in */
    ck_assert_uint_eq(room, 0);
    int rc = pump(s, data, 300000, 19, 100000, 70000, &k);
    gpucomp_stream_free(s);
    ck_assert_msg(rc == GPUCOMP_OK, "stream: %s (%s)", gpucomp_strerror(rc), gpucomp_last_error(c));
    ck_assert_uint_eq(k.len, 300000);
    ck_assert_msg(memcmp(k.buf, data, k.len) == 0, "the fake's echo differs from the input");
    gpucomp_close(c);
    fake_stop(pid, path);
    free(k.buf);
    free(data);
}
END_TEST

/* A daemon that breaks the stream rules: PROTOCOL, and the connection is closed. */
START_TEST(test_fake_misbehaves)
{
    fake_kind kind = (fake_kind)_i;
    char path[108];
    pid_t pid = fake_start(kind, path, sizeof path);
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(path, &c), GPUCOMP_OK);
    gpucomp_set_reconnect(c, 0);
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, NULL, &s), GPUCOMP_OK);
    uint8_t in[10] = { 0 }, out[64];
    gpucomp_inbuf ib = { in, sizeof in, 0 };
    gpucomp_outbuf ob = { out, sizeof out, 0 };
    size_t pending;
    int rc = gpucomp_stream_run(s, &ib, &ob, GPUCOMP_END, &pending);
    if (kind == FAKE_WRONG_TOTAL && rc == GPUCOMP_OK) /* the 3 bytes may come before the lie */
        rc = gpucomp_stream_run(s, &ib, &ob, GPUCOMP_END, &pending);
    ck_assert_msg(rc == GPUCOMP_E_PROTOCOL, "fake %d: %s (%s)", kind, gpucomp_strerror(rc), gpucomp_last_error(c));
    ck_assert_uint_le(ob.pos, 3);
    gpucomp_stream_free(s);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    gpucomp_close(c);
    fake_stop(pid, path);
}
END_TEST

/* ---- the CLI: gigabytes through a pipe in bounded memory ----------------------------- */

/*
 * gpucomp holds 1 MiB of input and 1 MiB of output, and the library one
 * frame being written and one received (each at most max_frame, 16 MiB)
 * and the stream's ring (twice the window, 128 MiB, mapped):
 * ~164 MiB plus the program. gpucompd holds per stream
 * the parts its ring lets it cut ahead, up to its depth, whose inputs and outputs (each up to
 * 32 MiB in and 32 MiB out) and its connection's unread answers stop new parts at 512 MiB
 * (stream.c STREAM_HELD_MOST; a part's output is sent by reference and stays whole until its
 * last frame is written): two streams here, plus the allocator's slack (docs/DECISIONS.md,
 * "Streams": output by reference; the measured peaks are in DECISIONS, "The user's path at the
 * engine's speed").
 */
#define CLI_RSS_LIMIT_KB (192 * 1024)
#if defined(__SANITIZE_ADDRESS__)
/* The daemon (started before the test can shrink its quarantine) also holds ASan's 256 MiB
 * quarantine and shadow memory; still bounded, and far under the 4 GiB that flows through. */
#define DAEMON_RSS_LIMIT_KB (1536 * 1024)
#else
#define DAEMON_RSS_LIMIT_KB (1024 * 1024)
#endif

static const char pattern[] = "gpucomp streams: the same line again and again, 0123456789\n";

static void write_pattern(int fd, uint64_t total)
{
    static uint8_t buf[1 << 20];
    size_t plen = sizeof pattern - 1;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)pattern[i % plen];
    uint64_t off = 0;
    while (off < total) {
        size_t start = (size_t)(off % plen);
        size_t n = sizeof buf - plen; /* leave room to start mid-pattern */
        n = n < total - off ? n : (size_t)(total - off);
        ssize_t w = write(fd, buf + start, n);
        if (w <= 0)
            _exit(1);
        off += (uint64_t)w;
    }
    _exit(0);
}

static pid_t spawn(const char *const *argv, int in_fd, int out_fd)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(in_fd, 0);
        dup2(out_fd, 1);
        for (int fd = 3; fd < 64; fd++)
            close(fd);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static long daemon_hwm_kb(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)daemon_under_test.pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* Wait for pid; its exit status, and its peak RSS in kB. */
static int reap(pid_t pid, long *maxrss_kb)
{
    int st;
    struct rusage ru;
    ck_assert_int_eq(wait4(pid, &st, 0, &ru), pid);
    *maxrss_kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * generator | gpucomp -c -a rle | gpucomp -dc -a rle | this process, which
 * checks every byte against the pattern: GPUCOMP_STREAM_TEST_BYTES (default
 * 4 GiB: 5 GiB took 61 s on 2 cores, over the minute this test may take) of
 * input, and each process's peak RSS under its bound.
 */
START_TEST(test_cli_pipe_bounded_memory)
{
#if defined(__SANITIZE_ADDRESS__)
    /* ASan keeps freed memory in a quarantine (256 MiB by default) that would count as
     * the processes' RSS: keep it small for the children, so the bounds still mean something. */
    char asan[512];
    const char *old_asan = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%squarantine_size_mb=4", old_asan ? old_asan : "",
             old_asan && *old_asan ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
#endif
    const char *bin = getenv("GPUCOMP");
    ck_assert_msg(bin != NULL, "GPUCOMP (path of the CLI) is not set");
    const char *env = getenv("GPUCOMP_STREAM_TEST_BYTES");
    uint64_t total = env ? strtoull(env, NULL, 0) : (uint64_t)4 << 30;
    setenv("GPUCOMP_SOCKET", daemon_under_test.socket_path, 1);
    int p1[2], p2[2], p3[2];
    ck_assert(pipe(p1) == 0 && pipe(p2) == 0 && pipe(p3) == 0);
    pid_t gen = fork();
    ck_assert_int_ge(gen, 0);
    if (gen == 0) {
        close(p1[0]);
        write_pattern(p1[1], total);
    }
    const char *cargv[] = { bin, "-c", "-a", "rle", "--no-fallback", NULL };
    const char *dargv[] = { bin, "-dc", "-a", "rle", "--no-fallback", NULL };
    pid_t comp = spawn(cargv, p1[0], p2[1]);
    pid_t decomp = spawn(dargv, p2[0], p3[1]);
    close(p1[0]);
    close(p1[1]);
    close(p2[0]);
    close(p2[1]);
    close(p3[1]);

    static uint8_t buf[1 << 20];
    size_t plen = sizeof pattern - 1;
    uint64_t got = 0;
    bool same = true;
    ssize_t n;
    while ((n = read(p3[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n && same; i++)
            same = buf[i] == (uint8_t)pattern[(got + (uint64_t)i) % plen];
        got += (uint64_t)n;
    }
    close(p3[0]);
    long gen_kb, comp_kb, decomp_kb;
    ck_assert_int_eq(reap(gen, &gen_kb), 0);
    int comp_st = reap(comp, &comp_kb), decomp_st = reap(decomp, &decomp_kb);
    long daemon_kb = daemon_hwm_kb();
    fprintf(stderr, "cli pipe: %llu bytes; peak RSS kB: gpucomp -c %ld, gpucomp -dc %ld, gpucompd %ld\n",
            (unsigned long long)got, comp_kb, decomp_kb, daemon_kb);
    ck_assert_int_eq(comp_st, 0);
    ck_assert_int_eq(decomp_st, 0);
    ck_assert_msg(same, "output differs from the input");
    ck_assert_uint_eq(got, total);
    ck_assert_int_lt(comp_kb, CLI_RSS_LIMIT_KB);
    ck_assert_int_lt(decomp_kb, CLI_RSS_LIMIT_KB);
    ck_assert_int_gt(daemon_kb, 0);
    ck_assert_int_lt(daemon_kb, DAEMON_RSS_LIMIT_KB);
}
END_TEST

/*
 * An rle file of one frame larger than the stream window (a whole-buffer
 * request writes one frame, as gpucomp --local did before it streamed):
 * gpucomp -d through the daemon decompresses it in one request instead,
 * from a file and from standard input redirected from a file; from a pipe
 * it fails, saying why; gpucomp --local decompresses it from a pipe too.
 */
START_TEST(test_cli_large_frame_falls_back)
{
    const char *bin = getenv("GPUCOMP");
    ck_assert_msg(bin != NULL, "GPUCOMP (path of the CLI) is not set");
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    ck_assert_int_eq(run_shell("cd %s && { yes 'one line, many times' 2>/dev/null; } | head -c 70000000 > f", d),
                     0);
    char path[256];
    snprintf(path, sizeof path, "%s/f", d);
    size_t len, packed_len;
    uint8_t *plain = read_file(path, &len);
    void *packed = NULL;
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    gpucomp_client *c = connect_or_fail();
    ck_assert(plain && gpucomp_compress(c, &o, plain, len, &packed, &packed_len) == GPUCOMP_OK);
    snprintf(path, sizeof path, "%s/f.rle", d);
    ck_assert_int_eq(write_file(path, packed, packed_len), 0);
    gpucomp_free(packed);
    free(plain);
    gpucomp_close(c);
    ck_assert_int_eq(run_shell("cd %s && cat f.rle | '%s' --local -dc | cmp -s - f", d, bin), 0);
    ck_assert_int_eq(run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' --no-fallback -dc f.rle | cmp -s - f", d, s, bin),
                     0);
    ck_assert_int_eq(
        run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' --no-fallback -dc < f.rle | cmp -s - f", d, s, bin), 0);
    ck_assert_int_ne(run_shell("cd %s && { cat f.rle 2>/dev/null; } | "
                               "GPUCOMP_SOCKET=%s '%s' --no-fallback -dc > out 2>err",
                               d, s, bin),
                     0);
    ck_assert_int_eq(run_shell("grep -q 'window' %s/err", d), 0);
    /* And what the daemon writes for the same file decompresses to it, in several frames. */
    ck_assert_int_eq(run_shell("cd %s && rm f.rle && GPUCOMP_SOCKET=%s '%s' --no-fallback -k -a rle f && "
                               "mv f f.orig && GPUCOMP_SOCKET=%s '%s' --no-fallback -d f.rle && cmp -s f f.orig",
                               d, s, bin, s, bin),
                     0);
}
END_TEST

/*
 * A stream bzip2 1.0.8 decodes though its Huffman tables are oversubscribed
 * (tests/bz2_oversub.h): the daemon's stream and whole-request paths, and
 * the CLI from a file and from a pipe, give what bzip2 gives.
 */
START_TEST(test_oversubscribed_every_path)
{
    uint8_t bz[BZ2_OVERSUB_CAP];
    size_t len = bz2_oversub_stream(bz, sizeof bz);
    ck_assert_uint_gt(len, 0);
    const char *plain = bz2_oversub_plain;
    size_t n = strlen(plain);
    gpucomp_client *c = connect_or_fail();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    for (size_t max_in = 1; max_in <= len; max_in *= 7) {
        sink k = { 0 };
        int rc = stream_all(c, GPUCOMP_DECOMPRESS, &o, bz, len, 5 + max_in, max_in, 64, &k);
        ck_assert_msg(rc == GPUCOMP_OK, "stream (pieces <= %zu): %s", max_in, gpucomp_last_error(c));
        ck_assert_uint_eq(k.len, n);
        ck_assert(memcmp(k.buf, plain, n) == 0);
        free(k.buf);
    }
    void *out = NULL;
    size_t out_len = 0;
    int rc = gpucomp_decompress(c, &o, bz, len, &out, &out_len);
    ck_assert_msg(rc == GPUCOMP_OK, "whole request: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(out_len, n);
    ck_assert(memcmp(out, plain, n) == 0);
    gpucomp_free(out);
    gpucomp_close(c);

    const char *bin = getenv("GPUCOMP");
    ck_assert_msg(bin != NULL, "GPUCOMP (path of the CLI) is not set");
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    char path[512];
    snprintf(path, sizeof path, "%s/ov.bz2", d);
    FILE *f = fopen(path, "wb");
    ck_assert(f && fwrite(bz, 1, len, f) == len && fclose(f) == 0);
    snprintf(path, sizeof path, "%s/ov", d);
    f = fopen(path, "wb");
    ck_assert(f && fwrite(plain, 1, n, f) == n && fclose(f) == 0);
    ck_assert_int_eq(
        run_shell("cd %s && GPUCOMP_SOCKET=%s '%s' --no-fallback -dc ov.bz2 | cmp -s - ov", d, s, bin), 0);
    ck_assert_int_eq(
        run_shell("cd %s && cat ov.bz2 | GPUCOMP_SOCKET=%s '%s' --no-fallback -dc | cmp -s - ov", d, s, bin), 0);
    ck_assert_int_eq(run_shell("cd %s && '%s' --local -dc ov.bz2 | cmp -s - ov", d, bin), 0);
}
END_TEST

static Suite *stream_suite(void)
{
    Suite *s = suite_create("stream");
    TCase *api = tcase_create("api");
    tcase_add_checked_fixture(api, setup, teardown);
    tcase_set_timeout(api, 120);
    tcase_add_loop_test(api, test_round_trip, 0, sizeof round_cases / sizeof round_cases[0]);
    tcase_add_test(api, test_trailing_newline);
    tcase_add_test(api, test_trailing_zeros);
    tcase_add_test(api, test_corrupt_after_prefix);
    tcase_add_test(api, test_decompress_chance_magic_at_a_cut);
    tcase_add_test(api, test_max_output);
    tcase_add_test(api, test_free_mid_stream);
    tcase_add_test(api, test_in_use_while_open);
    tcase_add_test(api, test_flush);
    tcase_add_loop_test(api, test_end_after_last_part, 0, 2);
    tcase_add_test(api, test_input_space);
    tcase_add_test(api, test_timeout);
    tcase_add_test(api, test_oversubscribed_every_path);
    suite_add_tcase(s, api);
    TCase *fake = tcase_create("fake");
    tcase_set_timeout(fake, 30);
    tcase_add_test(fake, test_fake_no_streams);
    tcase_add_test(fake, test_fake_no_rings);
    tcase_add_loop_test(fake, test_fake_misbehaves, FAKE_CONSUMED_AHEAD, FAKE_KINDS);
    suite_add_tcase(s, fake);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, setup, teardown);
    tcase_set_timeout(cli, 300);
    tcase_add_test(cli, test_cli_large_frame_falls_back);
    tcase_add_test(cli, test_cli_pipe_bounded_memory);
    suite_add_tcase(s, cli);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    SRunner *r = srunner_create(stream_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
