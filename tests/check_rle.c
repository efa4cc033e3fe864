/*
 * check_rle.c - unit tests for the rle codec CPU backend and CRC32C.
 *
 * The golden frame below is written out from docs/FORMAT.md by hand (CRCs
 * from an independent bitwise CRC32C), so any change to the bytes the
 * encoder produces fails here before it can diverge from the CUDA backend.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "gc_clock.h"
#include "rle.h"

/* ---- helpers -------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    /* xorshift64*: deterministic, so failures reproduce */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fill_random(uint8_t *buf, size_t n, uint64_t seed)
{
    rng_state = seed | 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(rng_next() >> 56);
}

/* Runs of random elements of width w with lengths uniform in [1, 2*mean-1]. */
static void fill_runs(uint8_t *buf, size_t n, unsigned w, unsigned mean, uint64_t seed)
{
    rng_state = seed | 1;
    size_t i = 0;
    while (i < n) {
        uint64_t elem = rng_next() & 0x0303030303030303ull; /* few values: neighbours repeat */
        size_t len = 1 + rng_next() % (2 * mean - 1);
        for (size_t k = 0; k < len && i < n; k++)
            for (unsigned b = 0; b < w && i < n; b++)
                buf[i++] = (uint8_t)(elem >> (8 * b));
    }
}

static uint8_t *xmalloc(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static rle_options opts(unsigned width, uint32_t chunk_size, unsigned threads)
{
    rle_options o = { width, chunk_size, threads };
    return o;
}

/* Compress; returns the malloc'd frame and its length. */
static uint8_t *compress_or_fail(const uint8_t *src, size_t n, rle_options o, size_t *frame_len)
{
    size_t bound = rle_compress_bound(n, &o);
    ck_assert_uint_gt(bound, 0);
    uint8_t *frame = xmalloc(bound);
    gc_error err;
    int rc = rle_compress(src, n, &o, frame, bound, frame_len, &err);
    ck_assert_msg(rc == GC_OK, "compress failed: %s", err.msg);
    ck_assert_uint_le(*frame_len, bound);
    return frame;
}

static void check_decodes_to(const uint8_t *frame, size_t frame_len, const uint8_t *src, size_t n,
                             unsigned threads)
{
    uint8_t *out = xmalloc(n);
    size_t out_len = SIZE_MAX;
    gc_error err;
    int rc = rle_decompress(frame, frame_len, threads, out, n, &out_len, &err);
    ck_assert_msg(rc == GC_OK, "decompress failed: %s", err.msg);
    ck_assert_uint_eq(out_len, n);
    ck_assert(n == 0 || memcmp(out, src, n) == 0);
    free(out);
}

/* Round trip with one and several threads; returns the frame length. */
static size_t roundtrip(const uint8_t *src, size_t n, rle_options o)
{
    size_t frame_len;
    uint8_t *frame = compress_or_fail(src, n, o, &frame_len);
    check_decodes_to(frame, frame_len, src, n, 1);
    check_decodes_to(frame, frame_len, src, n, 4);
    free(frame);
    return frame_len;
}

static size_t header_size(uint32_t chunk_count)
{
    return RLE_HEADER_FIXED + 4 * (size_t)chunk_count + 4;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute header_crc after a test edits the header or index on purpose. */
static void reseal_header(uint8_t *frame)
{
    size_t hs = header_size(get32(frame + 20));
    put32(frame + hs - 4, crc32c(frame, hs - 4));
}

static int decode_status(const uint8_t *frame, size_t frame_len, size_t cap, gc_error *err)
{
    uint8_t *out = xmalloc(cap);
    size_t out_len;
    int rc = rle_decompress(frame, frame_len, 1, out, cap, &out_len, err);
    free(out);
    return rc;
}

/* ---- golden frame (docs/FORMAT.md, worked by hand) ------------------------ */

/* width 2, chunk_size 64: chunk 0 = 30 x "ab" + 2 x "cd" (rle), chunk 1 =
 * "wxyz" (2 runs * 3 bytes >= 4: stored), tail "!". */
static const uint8_t golden_input[69] = "abababababababababababababababababababababababababababababab"
                                        "cdcd"
                                        "wxyz"
                                        "!";

static const uint8_t golden_frame[78] = {
    'G',
    'C',
    'R',
    'L',  /* magic */
    0x01, /* version */
    0x02, /* width */
    0x01, /* tail_len */
    0x00, /* reserved */
    0x40,
    0x00,
    0x00,
    0x00, /* chunk_size 64 */
    0x45,
    0x00,
    0x00,
    0x00,
    0x00,
    0x00,
    0x00,
    0x00, /* original_size 69 */
    0x02,
    0x00,
    0x00,
    0x00, /* chunk_count 2 */
    '!',
    0,
    0,
    0,
    0,
    0,
    0,
    0, /* tail, zero-padded */
    0x12,
    0x00,
    0x00,
    0x00, /* index: chunk 0 is 18 bytes */
    0x10,
    0x00,
    0x00,
    0x00, /* index: chunk 1 is 16 bytes */
    0x43,
    0xe7,
    0x36,
    0x98, /* header_crc 0x9836e743 */
    /* chunk 0: rle */
    0x01,
    0x01,
    0x00,
    0x00, /* mode rle, len_width 1, reserved */
    0x02,
    0x00,
    0x00,
    0x00, /* run_count 2 */
    0x6b,
    0xd2,
    0xaa,
    0x68, /* crc 0x68aad26b */
    'a',
    'b',
    'c',
    'd', /* symbols */
    29,
    1, /* run lengths - 1: 30, 2 */
    /* chunk 1: stored */
    0x00,
    0x00,
    0x00,
    0x00, /* mode stored, len_width 0, reserved */
    0x00,
    0x00,
    0x00,
    0x00, /* run_count 0 */
    0xa3,
    0xc2,
    0xc7,
    0x81, /* crc 0x81c7c2a3 */
    'w',
    'x',
    'y',
    'z',
};

/* ---- CRC32C --------------------------------------------------------------- */

START_TEST(test_crc32c_vectors)
{
    uint8_t buf[32];
    ck_assert_uint_eq(crc32c("123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(crc32c(NULL, 0), 0);
    /* RFC 3720, appendix B.4 */
    memset(buf, 0, sizeof buf);
    ck_assert_uint_eq(crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, sizeof buf);
    ck_assert_uint_eq(crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    ck_assert_uint_eq(crc32c(buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    ck_assert_uint_eq(crc32c(buf, 32), 0x113FDB5Cu);
    ck_assert_uint_eq(crc32c_update_portable(0, "123456789", 9), 0xE3069283u);
}
END_TEST

START_TEST(test_crc32c_incremental)
{
    size_t n = 100000;
    uint8_t *buf = xmalloc(n);
    fill_random(buf, n, 1);
    uint32_t whole = crc32c(buf, n);
    static const size_t cuts[] = { 0, 1, 7, 8, 9, 255, 4096, 24575, 24576, 24577, 99999, 100000 };
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        uint32_t crc = crc32c_update(0, buf, cuts[c]);
        ck_assert_uint_eq(crc32c_update(crc, buf + cuts[c], n - cuts[c]), whole);
    }
    uint32_t bytewise = 0;
    for (size_t i = 0; i < 1000; i++)
        bytewise = crc32c_update(bytewise, buf + i, 1);
    ck_assert_uint_eq(bytewise, crc32c(buf, 1000));
    free(buf);
}
END_TEST

/* The accelerated path (three interleaved streams above 3*8192 and 3*256
 * bytes) must agree with the tables at every length and alignment. */
START_TEST(test_crc32c_portable_agrees)
{
    size_t n = 60000;
    uint8_t *buf = xmalloc(n + 8);
    fill_random(buf, n + 8, 2);
    for (size_t len = 0; len < 1000; len++)
        ck_assert_uint_eq(crc32c(buf + len % 8, len), crc32c_update_portable(0, buf + len % 8, len));
    static const size_t lens[] = { 767, 768, 769, 24575, 24576, 24577, 25345, 49152, 60000 };
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
        for (size_t off = 0; off < 8; off++)
            ck_assert_uint_eq(crc32c_update(0x12345678u, buf + off, lens[k]),
                              crc32c_update_portable(0x12345678u, buf + off, lens[k]));
    free(buf);
}
END_TEST

/* ---- frames: shapes and sizes --------------------------------------------- */

START_TEST(test_golden_frame)
{
    size_t frame_len;
    uint8_t *frame = compress_or_fail(golden_input, sizeof golden_input, opts(2, 64, 1), &frame_len);
    ck_assert_uint_eq(frame_len, sizeof golden_frame);
    ck_assert_mem_eq(frame, golden_frame, sizeof golden_frame);
    free(frame);
    check_decodes_to(golden_frame, sizeof golden_frame, golden_input, sizeof golden_input, 1);
}
END_TEST

START_TEST(test_frame_parse_fields)
{
    rle_frame_info info;
    gc_error err;
    ck_assert_int_eq(rle_frame_parse(golden_frame, sizeof golden_frame, &info, &err), GC_OK);
    ck_assert_uint_eq(info.width, 2);
    ck_assert_uint_eq(info.tail_len, 1);
    ck_assert_uint_eq(info.chunk_size, 64);
    ck_assert_uint_eq(info.original_size, 69);
    ck_assert_uint_eq(info.chunk_count, 2);
    ck_assert_uint_eq(info.header_size, 44);
    ck_assert_mem_eq(info.tail, golden_frame + 24, 8); /* copies, not pointers into the frame */
    uint32_t index[2];
    ck_assert_int_eq(rle_frame_index_copy(golden_frame, sizeof golden_frame, &info, index, &err), GC_OK);
    ck_assert_uint_eq(index[0], get32(golden_frame + 32));
    ck_assert_uint_eq(index[1], get32(golden_frame + 36));
    /* a copy that no longer matches the header CRC (the frame changed) is refused */
    uint8_t f[sizeof golden_frame];
    memcpy(f, golden_frame, sizeof f);
    put32(f + 32, 17);
    put32(f + 36, 17);
    ck_assert_int_eq(rle_frame_index_copy(f, sizeof f, &info, index, &err), GC_E_CRC);
    reseal_header(f); /* and with a matching CRC, the copy's entries are checked */
    ck_assert_int_eq(rle_frame_index_copy(f, sizeof f, &info, index, &err), GC_OK);
    put32(f + 32, 11);
    put32(f + 36, 23);
    reseal_header(f);
    ck_assert_int_eq(rle_frame_index_copy(f, sizeof f, &info, index, &err), GC_E_CORRUPT);
    put32(f + 32, 40);
    reseal_header(f);
    ck_assert_int_eq(rle_frame_index_copy(f, sizeof f, &info, index, &err), GC_E_TRUNCATED);
}
END_TEST

START_TEST(test_empty)
{
    size_t frame_len;
    uint8_t *frame = compress_or_fail(NULL, 0, opts(0, 0, 0), &frame_len);
    static const uint8_t expect[36] = {
        'G',  'C',  'R',  'L',  1, 1, 0, 0, 0x00, 0x00, 0x10, 0x00, /* chunk_size 1 MiB */
        0,    0,    0,    0,    0, 0, 0, 0,                         /* original_size */
        0,    0,    0,    0,                                        /* chunk_count */
        0,    0,    0,    0,    0, 0, 0, 0,                         /* tail */
        0x7f, 0x35, 0x41, 0xd0,                                     /* header_crc 0xd041357f */
    };
    ck_assert_uint_eq(frame_len, sizeof expect);
    ck_assert_mem_eq(frame, expect, sizeof expect);
    size_t out_len = 1;
    gc_error err;
    ck_assert_int_eq(rle_decompress(frame, frame_len, 1, NULL, 0, &out_len, &err), GC_OK);
    ck_assert_uint_eq(out_len, 0);
    free(frame);
}
END_TEST

START_TEST(test_one_byte)
{
    const uint8_t b = 0xA5;
    /* width 1: one stored chunk of one byte */
    ck_assert_uint_eq(roundtrip(&b, 1, opts(1, 64, 1)), header_size(1) + 12 + 1);
    /* width 2: no whole element, the byte is all tail and there are no chunks */
    ck_assert_uint_eq(roundtrip(&b, 1, opts(2, 64, 1)), header_size(0));
}
END_TEST

START_TEST(test_all_equal)
{
    size_t n = 1u << 20;
    uint8_t *buf = xmalloc(n);
    memset(buf, 0x5A, n);
    /* one chunk, one run of 2^20: len_width 4, record 12 + 1 + 4 */
    ck_assert_uint_eq(roundtrip(buf, n, opts(1, 0, 1)), header_size(1) + 12 + 5);
    /* 16 chunks of 64 KiB: a run of 65536 still fits len_width 2 */
    ck_assert_uint_eq(roundtrip(buf, n, opts(1, 1u << 16, 4)), header_size(16) + 16 * (12 + 3));
    /* runs never cross chunks: 3 chunks of 64 -> 3 runs of 64, len_width 1 */
    ck_assert_uint_eq(roundtrip(buf, 192, opts(1, 64, 1)), header_size(3) + 3 * (12 + 2));
    free(buf);
}
END_TEST

START_TEST(test_alternating)
{
    uint8_t buf[4096];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i & 1);
    /* as bytes every run has length 1: stored */
    ck_assert_uint_eq(roundtrip(buf, sizeof buf, opts(1, 4096, 1)), header_size(1) + 12 + 4096);
    /* as 16-bit elements it is one run of 2048 (len_width 2) */
    ck_assert_uint_eq(roundtrip(buf, sizeof buf, opts(2, 4096, 1)), header_size(1) + 12 + 2 + 2);
}
END_TEST

START_TEST(test_random_is_stored)
{
    size_t n = 3 * 4096 + 5;
    uint8_t *buf = xmalloc(n);
    fill_random(buf, n, 3);
    /* one chunk, no tail: exactly the rule 3 bound 32 + 4c + 4 + 12c + original_size */
    rle_options one = opts(1, 4096, 1);
    ck_assert_uint_eq(roundtrip(buf, 4096, one), 32 + 4 + 4 + 12 + 4096);
    ck_assert_uint_eq(rle_compress_bound(4096, &one), 32 + 4 + 4 + 12 + 4096);
    for (unsigned w = 1; w <= 8; w *= 2) {
        rle_options o = opts(w, 4096, 1);
        uint32_t chunks = (uint32_t)((n - n % w + 4095) / 4096);
        size_t frame_len = roundtrip(buf, n, o);
        /* every chunk stored; the tail lives in the header, not a record */
        ck_assert_uint_eq(frame_len + n % w, 32 + 4 * chunks + 4 + 12 * chunks + n);
        ck_assert_uint_eq(rle_compress_bound(n, &o), 32 + 4 * chunks + 4 + 12 * chunks + n);
    }
    free(buf);
}
END_TEST

/* Compress one chunk of n bytes (width 1) and return its record's mode. */
static unsigned single_chunk_mode(const uint8_t *buf, size_t n, size_t want_record)
{
    size_t frame_len;
    uint8_t *frame = compress_or_fail(buf, n, opts(1, (uint32_t)n, 1), &frame_len);
    ck_assert_uint_eq(frame_len, header_size(1) + want_record);
    check_decodes_to(frame, frame_len, buf, n, 1);
    unsigned mode = frame[header_size(1)];
    free(frame);
    return mode;
}

START_TEST(test_stored_threshold)
{
    /* 64 bytes: 32 runs of 2 cost exactly 64 bytes -> stored */
    uint8_t buf[64];
    for (size_t i = 0; i < 64; i++)
        buf[i] = (uint8_t)(i / 2);
    ck_assert_uint_eq(single_chunk_mode(buf, 64, 12 + 64), 0);
    /* merge the last two runs: 31 runs cost 62 < 64 -> rle, len_width 1 */
    buf[62] = buf[63] = buf[61];
    ck_assert_uint_eq(single_chunk_mode(buf, 64, 12 + 62), 1);

    /* len_width 2: a run of 257 and 127 single bytes cost 128 * 3 = 384 bytes,
     * as much as the chunk (the rle record would be as long: check the mode) */
    uint8_t wide[384];
    memset(wide, 'x', 257);
    for (size_t i = 257; i < 384; i++)
        wide[i] = (uint8_t)i;
    ck_assert_uint_eq(single_chunk_mode(wide, 384, 12 + 384), 0);
    /* one run fewer: 127 * 3 = 381 < 384 -> rle */
    wide[383] = wide[382];
    ck_assert_uint_eq(single_chunk_mode(wide, 384, 12 + 381), 1);
}
END_TEST

/* Record layout of a chunk that is one run of run_len bytes then 3 singles. */
static void check_len_width(size_t run_len, unsigned want_lw)
{
    size_t n = run_len + 3;
    uint8_t *buf = xmalloc(n);
    memset(buf, 'a', run_len);
    memcpy(buf + run_len, "bcd", 3);
    size_t frame_len;
    uint8_t *frame = compress_or_fail(buf, n, opts(1, RLE_MAX_CHUNK_SIZE, 1), &frame_len);
    const uint8_t *rec = frame + header_size(1);
    ck_assert_uint_eq(rec[0], 1);
    ck_assert_uint_eq(rec[1], want_lw);
    ck_assert_uint_eq(get32(rec + 4), 4);
    ck_assert_uint_eq(frame_len, header_size(1) + 12 + 4 * (1 + want_lw));
    const uint8_t *lens = rec + 12 + 4;
    uint64_t first = 0;
    for (unsigned b = 0; b < want_lw; b++)
        first |= (uint64_t)lens[b] << (8 * b);
    ck_assert_uint_eq(first, run_len - 1);
    check_decodes_to(frame, frame_len, buf, n, 1);
    free(frame);
    free(buf);
}

START_TEST(test_long_runs)
{
    check_len_width(256, 1);
    check_len_width(257, 2);
    check_len_width(65536, 2);
    check_len_width(65537, 4);
    check_len_width(3u << 20, 4);
}
END_TEST

START_TEST(test_every_width_with_tail)
{
    uint8_t *buf = xmalloc(5000);
    for (unsigned w = 1; w <= 8; w *= 2) {
        fill_runs(buf, 5000, w, 6, w);
        for (size_t n = 4096 - 9; n <= 4096 + 9; n++) {
            size_t frame_len;
            uint8_t *frame = compress_or_fail(buf, n, opts(w, 256, 1), &frame_len);
            ck_assert_uint_eq(frame[5], w);
            ck_assert_uint_eq(frame[6], n % w);
            ck_assert_mem_eq(frame + 24, buf + n - n % w, n % w);
            for (size_t k = n % w; k < 8; k++)
                ck_assert_uint_eq(frame[24 + k], 0);
            ck_assert_uint_lt(frame_len, n); /* runs of mean 6 compress */
            check_decodes_to(frame, frame_len, buf, n, 1);
            free(frame);
        }
    }
    free(buf);
}
END_TEST

START_TEST(test_wide_elements_compare_whole)
{
    /* as bytes: runs of 7 zeros and a one (rle); as 4-byte elements every
     * element differs from the next (stored) */
    uint32_t elems[64];
    for (uint32_t i = 0; i < 64; i++)
        elems[i] = (i & 1) << 24;
    size_t frame_len = roundtrip((const uint8_t *)elems, sizeof elems, opts(1, 256, 1));
    ck_assert_uint_lt(frame_len, header_size(1) + 12 + sizeof elems);
    frame_len = roundtrip((const uint8_t *)elems, sizeof elems, opts(4, 256, 1));
    ck_assert_uint_eq(frame_len, header_size(1) + 12 + sizeof elems);
    /* 8-byte elements that differ only in their most significant byte: 4 runs */
    uint64_t big[64];
    for (size_t i = 0; i < 64; i++)
        big[i] = 0x00FFFFFFFFFFFFFFull | (uint64_t)(i / 16) << 56;
    frame_len = roundtrip((const uint8_t *)big, sizeof big, opts(8, 512, 1));
    ck_assert_uint_eq(frame_len, header_size(1) + 12 + 4 * (8 + 1));
}
END_TEST

START_TEST(test_chunk_boundaries)
{
    static const uint32_t sizes[] = { 64, 4096 };
    uint8_t *buf = xmalloc(5 * 4096 + 1);
    fill_runs(buf, 5 * 4096 + 1, 1, 5, 4);
    for (size_t s = 0; s < 2; s++) {
        uint32_t cs = sizes[s];
        size_t lens[] = { cs - 1, cs, cs + 1, 2 * cs, 3 * cs + 7, 5 * cs };
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            size_t frame_len;
            uint8_t *frame = compress_or_fail(buf, lens[k], opts(1, cs, 1), &frame_len);
            uint32_t chunks = (uint32_t)((lens[k] + cs - 1) / cs);
            ck_assert_uint_eq(get32(frame + 20), chunks);
            size_t total = header_size(chunks);
            for (uint32_t i = 0; i < chunks; i++)
                total += get32(frame + 32 + 4 * i);
            ck_assert_uint_eq(total, frame_len);
            check_decodes_to(frame, frame_len, buf, lens[k], 1);
            check_decodes_to(frame, frame_len, buf, lens[k], 3);
            free(frame);
        }
    }
    free(buf);
}
END_TEST

START_TEST(test_threads_identical)
{
    size_t n = (4u << 20) + 3;
    uint8_t *buf = xmalloc(n);
    fill_runs(buf, n / 2, 1, 8, 5);
    fill_random(buf + n / 2, n - n / 2, 6); /* a mix of rle and stored chunks */
    static const uint32_t sizes[] = { 64, 4096, 1u << 20 };
    for (size_t s = 0; s < 3; s++) {
        size_t len1, len4, len0;
        uint8_t *f1 = compress_or_fail(buf, n, opts(1, sizes[s], 1), &len1);
        uint8_t *f4 = compress_or_fail(buf, n, opts(1, sizes[s], 4), &len4);
        uint8_t *f0 = compress_or_fail(buf, n, opts(1, sizes[s], 0), &len0);
        ck_assert_uint_eq(len1, len4);
        ck_assert_uint_eq(len1, len0);
        ck_assert_mem_eq(f1, f4, len1);
        ck_assert_mem_eq(f1, f0, len1);
        check_decodes_to(f1, len1, buf, n, 4);
        check_decodes_to(f1, len1, buf, n, 0);
        free(f1);
        free(f4);
        free(f0);
    }
    free(buf);
}
END_TEST

/* Many random shapes: every width, chunk size, run length and length. */
START_TEST(test_random_shapes)
{
    uint8_t *buf = xmalloc(70000);
    static const unsigned means[] = { 1, 2, 3, 8, 100, 300, 70000 };
    for (unsigned iter = 0; iter < 300; iter++) {
        rng_state = 1000 + iter;
        unsigned w = 1u << (rng_next() % 4);
        uint32_t cs = (uint32_t)(64 + w * (rng_next() % 4000)); /* a multiple of w */
        size_t n = rng_next() % 70000;
        unsigned mean = means[rng_next() % 7];
        fill_runs(buf, n, w, mean, iter);
        rle_options o = opts(w, cs, iter % 3);
        size_t frame_len = roundtrip(buf, n, o);
        ck_assert_uint_le(frame_len, rle_compress_bound(n, &o));
    }
    free(buf);
}
END_TEST

/* ---- corrupt input -------------------------------------------------------- */

/* Every single-bit flip and every byte inversion must be rejected (or,
 * impossibly for this format, still decode to the input). */
static void check_flips(const uint8_t *frame, size_t frame_len, const uint8_t *src, size_t n)
{
    uint8_t *bad = xmalloc(frame_len);
    uint8_t *out = xmalloc(n);
    for (size_t pos = 0; pos < frame_len; pos++) {
        for (unsigned m = 0; m < 9; m++) {
            memcpy(bad, frame, frame_len);
            bad[pos] ^= m < 8 ? (uint8_t)(1u << m) : 0xFF;
            size_t out_len = 0;
            gc_error err;
            int rc = rle_decompress(bad, frame_len, 1, out, n, &out_len, &err);
            if (rc == GC_OK) {
                ck_assert_uint_eq(out_len, n);
                ck_assert_mem_eq(out, src, n);
            } else {
                ck_assert_int_eq(err.code, rc);
                ck_assert_msg(strncmp(err.msg, "rle: ", 5) == 0, "message: %s", err.msg);
            }
            ck_assert_msg(rc != GC_OK, "flip at byte %zu mask %u accepted", pos, m);
        }
    }
    free(out);
    free(bad);
}

START_TEST(test_corrupt_flips)
{
    check_flips(golden_frame, sizeof golden_frame, golden_input, sizeof golden_input);
    /* a frame with len_width 2 and 4 records */
    uint8_t buf[600];
    memset(buf, 'q', 300);
    memset(buf + 300, 'r', 300);
    size_t frame_len;
    uint8_t *frame = compress_or_fail(buf, sizeof buf, opts(4, 256, 1), &frame_len);
    check_flips(frame, frame_len, buf, sizeof buf);
    free(frame);
}
END_TEST

START_TEST(test_truncated)
{
    gc_error err;
    for (size_t len = 0; len < sizeof golden_frame; len++) {
        int rc = decode_status(golden_frame, len, sizeof golden_input, &err);
        ck_assert_msg(rc == GC_E_TRUNCATED, "prefix %zu: rc %d (%s)", len, rc, err.msg);
    }
    uint8_t longer[sizeof golden_frame + 1];
    memcpy(longer, golden_frame, sizeof golden_frame);
    longer[sizeof golden_frame] = 0;
    ck_assert_int_eq(decode_status(longer, sizeof longer, sizeof golden_input, &err), GC_E_CORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "trailing"));
}
END_TEST

/* Apply edit to a copy of the golden frame; expect code and a message part. */
static void expect_error(void (*edit)(uint8_t *), int code, const char *msg_part)
{
    uint8_t frame[sizeof golden_frame];
    memcpy(frame, golden_frame, sizeof frame);
    edit(frame);
    gc_error err;
    int rc = decode_status(frame, sizeof frame, sizeof golden_input, &err);
    ck_assert_msg(rc == code, "rc %d, want %d (%s)", rc, code, err.msg);
    ck_assert_msg(strstr(err.msg, msg_part) != NULL, "message '%s' lacks '%s'", err.msg, msg_part);
}

static void edit_magic(uint8_t *f)
{
    f[0] = 'X';
}
static void edit_version(uint8_t *f)
{
    f[4] = 2;
    reseal_header(f);
}
static void edit_width(uint8_t *f)
{
    f[5] = 3;
    reseal_header(f);
}
static void edit_tail_len(uint8_t *f)
{
    f[6] = 0;
    reseal_header(f);
}
static void edit_reserved(uint8_t *f)
{
    f[7] = 1;
    reseal_header(f);
}
static void edit_chunk_size(uint8_t *f)
{
    put32(f + 8, 32);
    reseal_header(f);
}
static void edit_chunk_count(uint8_t *f)
{
    put32(f + 20, 3);
}
static void edit_header_crc(uint8_t *f)
{
    f[40] ^= 1;
}
static void edit_index_small(uint8_t *f)
{
    put32(f + 32, 11);
    put32(f + 36, 23);
    reseal_header(f);
}
static void edit_index_shift(uint8_t *f)
{
    put32(f + 32, 17);
    put32(f + 36, 17);
    reseal_header(f);
}
static void edit_mode(uint8_t *f)
{
    f[44] = 2;
}
static void edit_record_reserved(uint8_t *f)
{
    f[47] = 1;
}
static void edit_len_width(uint8_t *f)
{
    f[45] = 3;
}
static void edit_run_count_huge(uint8_t *f)
{
    put32(f + 48, 0xFFFFFFFFu);
}
static void edit_run_sum(uint8_t *f)
{
    f[60] = 28;
}
static void edit_stored_runs(uint8_t *f)
{
    put32(f + 66, 1);
}
static void edit_payload(uint8_t *f)
{
    f[77] ^= 0x20;
}

START_TEST(test_error_codes_and_messages)
{
    expect_error(edit_magic, GC_E_CORRUPT, "magic");
    expect_error(edit_version, GC_E_UNSUPPORTED, "version 2");
    expect_error(edit_width, GC_E_CORRUPT, "width 3");
    expect_error(edit_tail_len, GC_E_CORRUPT, "tail_len 0");
    expect_error(edit_reserved, GC_E_CORRUPT, "reserved");
    expect_error(edit_chunk_size, GC_E_CORRUPT, "chunk_size 32");
    expect_error(edit_chunk_count, GC_E_CORRUPT, "chunk_count 3");
    expect_error(edit_header_crc, GC_E_CRC, "header CRC32C mismatch");
    expect_error(edit_index_small, GC_E_CORRUPT, "chunk 0: index entry 11");
    expect_error(edit_index_shift, GC_E_CORRUPT, "chunk 0: record is 17 bytes");
    expect_error(edit_mode, GC_E_CORRUPT, "chunk 0: unknown mode 2");
    expect_error(edit_record_reserved, GC_E_CORRUPT, "chunk 0: reserved");
    expect_error(edit_len_width, GC_E_CORRUPT, "chunk 0: len_width 3");
    expect_error(edit_run_count_huge, GC_E_CORRUPT, "chunk 0: record is 18 bytes, run_count");
    expect_error(edit_run_sum, GC_E_CORRUPT, "chunk 0: run lengths sum to 31 elements");
    expect_error(edit_stored_runs, GC_E_CORRUPT, "chunk 1: stored record");
    expect_error(edit_payload, GC_E_CRC, "chunk 1: CRC32C mismatch (stored 0x81c7c2a3");
}
END_TEST

/* A valid frame claiming 2^32-1 chunks must fail on length, not read them. */
START_TEST(test_hostile_chunk_count)
{
    uint8_t frame[64] = { 'G', 'C', 'R', 'L', 1, 1, 0, 0 };
    put32(frame + 8, 64);
    uint64_t orig = 0xFFFFFFFFull * 64;
    for (int i = 0; i < 8; i++)
        frame[12 + i] = (uint8_t)(orig >> (8 * i));
    put32(frame + 20, 0xFFFFFFFFu);
    gc_error err;
    rle_frame_info info;
    ck_assert_int_eq(rle_frame_parse(frame, sizeof frame, &info, &err), GC_E_TRUNCATED);
    /* original_size needing more than 2^32-1 chunks cannot match any chunk_count */
    orig = 0x100000000ull * 64;
    for (int i = 0; i < 8; i++)
        frame[12 + i] = (uint8_t)(orig >> (8 * i));
    ck_assert_int_eq(rle_frame_parse(frame, sizeof frame, &info, &err), GC_E_CORRUPT);
}
END_TEST

START_TEST(test_dst_too_small)
{
    gc_error err;
    ck_assert_int_eq(decode_status(golden_frame, sizeof golden_frame, sizeof golden_input - 1, &err), GC_E_LIMIT);
    ck_assert_ptr_nonnull(strstr(err.msg, "69 bytes"));
    rle_options o = opts(2, 64, 1);
    size_t bound = rle_compress_bound(sizeof golden_input, &o), len;
    uint8_t *dst = xmalloc(bound);
    ck_assert_int_eq(rle_compress(golden_input, sizeof golden_input, &o, dst, bound - 1, &len, &err), GC_E_LIMIT);
    free(dst);
}
END_TEST

START_TEST(test_invalid_options)
{
    static const rle_options bad[] = {
        { 3, 0, 0 }, { 16, 0, 0 }, { 1, 63, 0 }, { 1, RLE_MAX_CHUNK_SIZE + 1, 0 }, { 8, 100, 0 }, { 4, 66, 0 },
    };
    uint8_t dst[256], src[4] = { 0 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gc_error err;
        rle_options out;
        size_t len;
        ck_assert_int_eq(rle_options_resolve(&bad[i], &out, &err), GC_E_INVALID);
        ck_assert_int_eq(err.code, GC_E_INVALID);
        ck_assert_int_eq(rle_compress(src, 4, &bad[i], dst, sizeof dst, &len, &err), GC_E_INVALID);
        ck_assert_uint_eq(rle_compress_bound(4, &bad[i]), 0);
    }
    rle_options def = { 0, 0, 0 }, out;
    ck_assert_int_eq(rle_options_resolve(&def, &out, NULL), GC_OK);
    ck_assert_uint_eq(out.width, 1);
    ck_assert_uint_eq(out.chunk_size, RLE_DEFAULT_CHUNK_SIZE);
    rle_options edge = { 8, RLE_MAX_CHUNK_SIZE, 2 };
    ck_assert_int_eq(rle_options_resolve(&edge, &out, NULL), GC_OK);
}
END_TEST

/* ---- chunk-level API ------------------------------------------------------ */

START_TEST(test_chunk_api)
{
    uint8_t chunk[1000], back[1000];
    fill_runs(chunk, sizeof chunk, 2, 10, 7);
    ck_assert_uint_eq(rle_chunk_bound(sizeof chunk), 12 + sizeof chunk);
    uint8_t *rec = xmalloc(rle_chunk_bound(sizeof chunk));
    size_t rec_len = rle_encode_chunk(chunk, sizeof chunk, 2, rec);
    ck_assert_uint_lt(rec_len, sizeof chunk);
    ck_assert_uint_eq(get32(rec + 8), crc32c(chunk, sizeof chunk));
    gc_error err;
    ck_assert_int_eq(rle_decode_chunk(rec, rec_len, 2, back, sizeof back, &err), GC_OK);
    ck_assert_mem_eq(back, chunk, sizeof chunk);
    ck_assert_int_eq(rle_decode_chunk(rec, 11, 2, back, sizeof back, &err), GC_E_TRUNCATED);
    ck_assert_int_eq(rle_decode_chunk(rec, rec_len, 2, back, sizeof back - 2, &err), GC_E_CORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "rle: chunk record: run lengths"));
    ck_assert_int_eq(rle_decode_chunk(rec, rec_len, 2, back, sizeof back - 1, &err), GC_E_INVALID);
    free(rec);
}
END_TEST

/* ---- memory that changes while the codec runs ---------------------------- */

/*
 * The daemon runs the codec on client memfds mapped MAP_SHARED: the client can
 * keep writing its input (and its output) while we decode or encode. Each test
 * runs the codec while a second thread flips bytes of the buffer and asserts
 * that every call returns GC_OK or an error and touches nothing outside its
 * buffers: the input ends at an inaccessible region (reads past it fault), the
 * output is followed by a guard pattern (checked after every call) and then
 * an inaccessible region (writes far past it fault). ASan sees the rest.
 */
#define GUARD_BYTES 4096u
#define GUARD_FILL 0xA5
#define NOACCESS_BYTES (4u << 20)
#define HOSTILE_ITERS 20000
#define HOSTILE_SECONDS 0.4

typedef struct guarded {
    uint8_t *map, *p;
    size_t map_len, len, guard_len; /* guard: [p + len, p + len + guard_len) */
} guarded;

static size_t page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

/* len bytes that end where NOACCESS_BYTES of PROT_NONE begin (input). */
static uint8_t *guarded_input(guarded *g, size_t len)
{
    size_t body = page_round(len ? len : 1);
    g->map_len = body + NOACCESS_BYTES;
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(g->map, MAP_FAILED);
    ck_assert_int_eq(mprotect(g->map + body, NOACCESS_BYTES, PROT_NONE), 0);
    g->p = g->map + body - len;
    g->len = len;
    g->guard_len = 0;
    return g->p;
}

/* len bytes, then at least GUARD_BYTES of GUARD_FILL, then PROT_NONE (output). */
static uint8_t *guarded_output(guarded *g, size_t len)
{
    size_t body = page_round(len + GUARD_BYTES);
    g->map_len = body + NOACCESS_BYTES;
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(g->map, MAP_FAILED);
    ck_assert_int_eq(mprotect(g->map + body, NOACCESS_BYTES, PROT_NONE), 0);
    g->p = g->map;
    g->len = len;
    g->guard_len = body - len;
    memset(g->p + len, GUARD_FILL, g->guard_len);
    return g->p;
}

static void guard_check(const guarded *g, const char *what)
{
    for (size_t i = 0; i < g->guard_len; i++)
        if (g->p[g->len + i] != GUARD_FILL)
            ck_abort_msg("%s: byte %zu past the output buffer was written", what, i);
}

static void guarded_free(guarded *g)
{
    munmap(g->map, g->map_len);
}

/* Where the flipper writes: chosen positions and/or any byte of the buffer. */
typedef struct flip_target {
    uint8_t *buf;
    const uint8_t *pristine; /* restore each byte after a moment (NULL: leave it) */
    size_t len;
    const size_t *pos;
    size_t npos;
} flip_target;

typedef struct flipper {
    flip_target t[2];
    unsigned nt;
    atomic_int stop;
    pthread_t th;
} flipper;

static void *flip_loop(void *arg)
{
    flipper *f = arg;
    uint64_t x = 0x2545F4914F6CDD1Dull;
    while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const flip_target *t = &f->t[(x >> 60) % f->nt];
        size_t at = (t->npos && (x & 3) != 0) ? t->pos[(x >> 8) % t->npos] : (x >> 8) % t->len;
        /* high bits set (lengths and sizes grow a lot), or 0xFF */
        uint8_t v = (x >> 2) & 1 ? 0xFF : (uint8_t)((x >> 40) | 0x80);
        __atomic_store_n(&t->buf[at], v, __ATOMIC_RELAXED);
        if (t->pristine) { /* a window with the bad byte, then the good one again */
            for (unsigned spin = (unsigned)(x >> 32) % 512; spin; spin--)
                __asm__ __volatile__("" ::: "memory");
            __atomic_store_n(&t->buf[at], t->pristine[at], __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static void flipper_start(flipper *f)
{
    atomic_init(&f->stop, 0);
    ck_assert_int_eq(pthread_create(&f->th, NULL, flip_loop, f), 0);
}

static void flipper_stop(flipper *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->th, NULL);
}

static double seconds_now(void)
{
    return (double)gc_now_ns() / 1e9;
}

static void check_status(int rc, const char *what)
{
    if (rc < GC_OK || rc > GC_E_DEVICE)
        ck_abort_msg("%s: status %d is neither GC_OK nor an error", what, rc);
}

/* Positions of every index byte and every run-length byte of a frame. */
static size_t *length_positions(const uint8_t *frame, size_t *npos)
{
    uint32_t cc = get32(frame + 20);
    unsigned w = frame[5];
    size_t hs = header_size(cc), n = 0, cap = 4 * (size_t)cc;
    size_t *pos = NULL;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (size_t i = 0; i < 4 * (size_t)cc; i++, n++)
            if (pos)
                pos[n] = RLE_HEADER_FIXED + i;
        size_t off = hs;
        for (uint32_t c = 0; c < cc; c++) {
            const uint8_t *rec = frame + off;
            if (rec[0] == 1) {
                size_t runs = get32(rec + 4), lw = rec[1];
                size_t lens = off + RLE_CHUNK_HEADER + runs * w;
                for (size_t k = 0; k < runs * lw; k++, n++)
                    if (pos)
                        pos[n] = lens + k;
            }
            off += get32(frame + RLE_HEADER_FIXED + 4 * (size_t)c);
        }
        if (!pos) {
            cap = n;
            pos = (size_t *)(void *)xmalloc(cap ? cap * sizeof *pos : 1);
        }
    }
    *npos = n;
    return pos;
}

/* Decode frames of run data while their lengths, index and other bytes change. */
static void hostile_decode(unsigned w, unsigned mean, uint32_t chunk_size, unsigned threads)
{
    size_t n = 8 * (size_t)chunk_size + (w > 1 ? w - 1 : 0); /* a tail when w > 1 */
    uint8_t *src = xmalloc(n);
    fill_runs(src, n, w, mean, 0x5eed + w + mean);
    size_t frame_len;
    uint8_t *frame = compress_or_fail(src, n, opts(w, chunk_size, 1), &frame_len);
    size_t npos;
    size_t *pos = length_positions(frame, &npos);
    guarded gin, gout;
    uint8_t *in = guarded_input(&gin, frame_len);
    uint8_t *out = guarded_output(&gout, n);
    memcpy(in, frame, frame_len);
    flipper f = { .t = { { in, frame, frame_len, pos, npos } }, .nt = 1 };
    flipper_start(&f);
    double t0 = seconds_now();
    unsigned ok = 0, failed = 0;
    for (int it = 0; it < HOSTILE_ITERS && seconds_now() - t0 < HOSTILE_SECONDS; it++) {
        gc_error err;
        size_t out_len = 0;
        int rc = rle_decompress(in, frame_len, threads, out, n, &out_len, &err);
        check_status(rc, "rle_decompress");
        guard_check(&gout, "rle_decompress");
        if (rc == GC_OK) {
            ck_assert_uint_le(out_len, n);
            ok++;
        } else {
            failed++;
        }
    }
    flipper_stop(&f);
    ck_assert_uint_gt(ok + failed, 0);
    /* the frame is intact again (every flip was undone): it still decodes */
    memcpy(in, frame, frame_len);
    check_decodes_to(in, frame_len, src, n, threads);
    guarded_free(&gin);
    guarded_free(&gout);
    free(pos);
    free(frame);
    free(src);
}

START_TEST(test_decode_input_changes)
{
    static const unsigned thread_counts[] = { 1, 2, 4 };
    for (size_t t = 0; t < 3; t++) {
        hostile_decode(1, 300, 4096, thread_counts[t]);        /* 2-byte lengths */
        hostile_decode(4, 40, 4096, thread_counts[t]);         /* 1-byte lengths */
        hostile_decode(1, 100000, 1u << 18, thread_counts[t]); /* 4-byte lengths */
    }
}
END_TEST

/* Encode run data while it changes, and while the output's index is overwritten. */
static void hostile_encode(unsigned w, unsigned mean, uint32_t chunk_size, unsigned threads)
{
    size_t n = 8 * (size_t)chunk_size + (w > 1 ? w - 1 : 0);
    uint8_t *src = xmalloc(n);
    fill_runs(src, n, w, mean, 0xfeed + w + mean);
    rle_options o = opts(w, chunk_size, threads);
    size_t bound = rle_compress_bound(n, &o);
    guarded gin, gout;
    uint8_t *in = guarded_input(&gin, n);
    uint8_t *out = guarded_output(&gout, bound);
    memcpy(in, src, n);
    size_t index_pos[64];
    size_t nidx = 0;
    for (size_t i = 0; i < 4 * 9 && nidx < 64; i++)
        index_pos[nidx++] = RLE_HEADER_FIXED + i;
    flipper f = { .t = { { in, src, n, NULL, 0 }, { out, NULL, bound, index_pos, nidx } }, .nt = 2 };
    flipper_start(&f);
    double t0 = seconds_now();
    for (int it = 0; it < HOSTILE_ITERS && seconds_now() - t0 < HOSTILE_SECONDS; it++) {
        gc_error err;
        size_t len = 0;
        int rc = rle_compress(in, n, &o, out, bound, &len, &err);
        check_status(rc, "rle_compress");
        guard_check(&gout, "rle_compress");
        if (rc == GC_OK)
            ck_assert_uint_le(len, bound);
    }
    flipper_stop(&f);
    memcpy(in, src, n);
    size_t len;
    gc_error err;
    ck_assert_int_eq(rle_compress(in, n, &o, out, bound, &len, &err), GC_OK);
    check_decodes_to(out, len, src, n, threads);
    guarded_free(&gin);
    guarded_free(&gout);
    free(src);
}

START_TEST(test_encode_input_changes)
{
    static const unsigned thread_counts[] = { 1, 2, 4 };
    for (size_t t = 0; t < 3; t++) {
        hostile_encode(1, 60, 4096, thread_counts[t]);
        hostile_encode(4, 8, 4096, thread_counts[t]);
        hostile_encode(1, 100000, 1u << 18, thread_counts[t]); /* 4-byte lengths */
    }
}
END_TEST

/* Records whose lengths sum to more than the chunk stop at the chunk's end. */
START_TEST(test_run_lengths_bounded)
{
    uint8_t chunk[256], rec[12 + 256 + 12];
    memset(chunk, 7, sizeof chunk);
    size_t rec_len = rle_encode_chunk(chunk, sizeof chunk, 1, rec);
    ck_assert_uint_eq(rec_len, 12 + 1 + 1); /* one run of 256: length - 1 = 255 */
    guarded g;
    uint8_t *out = guarded_output(&g, 100);
    gc_error err;
    ck_assert_int_eq(rle_decode_chunk(rec, rec_len, 1, out, 100, &err), GC_E_CORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "run lengths sum to 256 elements, chunk holds 100"));
    guard_check(&g, "rle_decode_chunk");
    guarded_free(&g);
}
END_TEST

/* Decoding or encoding in place (one buffer for input and output) may give
 * garbage or an error, never a fault. */
START_TEST(test_same_buffer)
{
    static const unsigned thread_counts[] = { 1, 2, 4 };
    for (size_t t = 0; t < 3; t++) {
        for (unsigned w = 1; w <= 8; w *= 2) {
            size_t n = 8 * 4096 + w - 1;
            uint8_t *src = xmalloc(n);
            fill_runs(src, n, w, 30, 77 + w);
            size_t frame_len;
            uint8_t *frame = compress_or_fail(src, n, opts(w, 4096, 1), &frame_len);
            rle_options o = opts(w, 4096, thread_counts[t]);
            size_t bound = rle_compress_bound(n, &o);
            size_t cap = bound > n ? bound : n;
            guarded g;
            uint8_t *buf = guarded_output(&g, cap);
            gc_error err;
            size_t len = 0;
            memcpy(buf, frame, frame_len);
            check_status(rle_decompress(buf, frame_len, thread_counts[t], buf, cap, &len, &err),
                         "decode in place");
            guard_check(&g, "decode in place");
            memcpy(buf, src, n);
            check_status(rle_compress(buf, n, &o, buf, cap, &len, &err), "encode in place");
            guard_check(&g, "encode in place");
            /* the output starting inside the input */
            memcpy(buf + cap - frame_len, frame, frame_len);
            check_status(rle_decompress(buf + cap - frame_len, frame_len, thread_counts[t], buf, cap, &len, &err),
                         "decode overlapping");
            guard_check(&g, "decode overlapping");
            guarded_free(&g);
            free(frame);
            free(src);
        }
    }
}
END_TEST

/* ---- concatenated frames (docs/FORMAT.md, "Concatenated frames") -------- */

typedef struct piece {
    size_t len;
    rle_options o;
    unsigned mean; /* fill_runs' mean run length; 0: random bytes */
} piece;

/* A stream of one frame per piece (pieces[i] filled from seed i + 1), back to
 * back, as a stream compressed in parts is. *data gets the pieces' bytes
 * concatenated (what the stream decodes to), ends[i] where frame i ends. */
static uint8_t *concat_frames(const piece *pieces, size_t n, uint8_t **data, size_t *data_len, size_t *stream_len,
                              size_t *ends)
{
    size_t total = 0, cap = 0;
    for (size_t i = 0; i < n; i++) {
        total += pieces[i].len;
        cap += rle_compress_bound(pieces[i].len, &pieces[i].o);
    }
    uint8_t *in = xmalloc(total), *stream = xmalloc(cap);
    size_t at = 0, out = 0;
    for (size_t i = 0; i < n; i++) {
        const piece *p = &pieces[i];
        if (p->mean)
            fill_runs(in + at, p->len, p->o.width ? p->o.width : 1, p->mean, i + 1);
        else
            fill_random(in + at, p->len, i + 1);
        size_t frame_len;
        uint8_t *frame = compress_or_fail(in + at, p->len, p->o, &frame_len);
        memcpy(stream + out, frame, frame_len);
        free(frame);
        at += p->len;
        out += frame_len;
        if (ends)
            ends[i] = out;
    }
    *data = in;
    *data_len = total;
    *stream_len = out;
    return stream;
}

/* The stream decodes (1 and 4 threads) to data, sizes itself, and needs all of it. */
static void check_stream_decodes(const uint8_t *stream, size_t stream_len, const uint8_t *data, size_t data_len,
                                 size_t frames)
{
    gc_error err;
    uint64_t size = 1;
    size_t nframes = 0;
    ck_assert_msg(rle_stream_decoded_size(stream, stream_len, &size, &nframes, &err) == GC_OK, "sizing: %s",
                  err.msg);
    ck_assert_uint_eq(size, data_len);
    ck_assert_uint_eq(nframes, frames);
    check_decodes_to(stream, stream_len, data, data_len, 1);
    check_decodes_to(stream, stream_len, data, data_len, 4);
    if (data_len) {
        int rc = decode_status(stream, stream_len, data_len - 1, &err);
        ck_assert_msg(rc == GC_E_LIMIT, "one byte short: rc %d (%s)", rc, err.msg);
        ck_assert_msg(frames == 1 || strstr(err.msg, "frames decode to") != NULL, "%s", err.msg);
    }
}

START_TEST(test_concat_two_and_three_frames)
{
    const piece pieces[] = {
        { 1000, { 1, 64, 1 }, 5 },    /* 16 chunks, rle records */
        { 10003, { 4, 4096, 4 }, 3 }, /* width 4, a 3-byte tail */
        { 70001, { 8, 0, 0 }, 0 },    /* default chunks, random: stored, 1-byte tail */
    };
    for (size_t n = 2; n <= 3; n++) {
        uint8_t *data;
        size_t data_len, stream_len, ends[3];
        uint8_t *stream = concat_frames(pieces, n, &data, &data_len, &stream_len, ends);
        check_stream_decodes(stream, stream_len, data, data_len, n);
        /* the first frame alone is still a frame, and is what the prefix parse finds */
        rle_frame_info info;
        size_t frame_len = 0;
        gc_error err;
        ck_assert_int_eq(rle_frame_parse_prefix(stream, stream_len, &info, &frame_len, &err), GC_OK);
        ck_assert_uint_eq(frame_len, ends[0]);
        ck_assert_uint_eq(info.original_size, pieces[0].len);
        check_decodes_to(stream, ends[0], data, pieces[0].len, 1);
        /* rle_frame_parse keeps its one-frame contract */
        ck_assert_int_eq(rle_frame_parse(stream, stream_len, &info, &err), GC_E_CORRUPT);
        ck_assert_ptr_nonnull(strstr(err.msg, "trailing"));
        free(stream);
        free(data);
    }
    /* the same pieces in the other order, and a piece split at a chunk boundary as a stream
     * compressed in parts is: same output as the whole */
    const piece split[] = { { 4096, { 2, 1024, 1 }, 4 }, { 5000, { 2, 1024, 1 }, 4 }, { 1000, { 1, 64, 1 }, 5 } };
    uint8_t *data;
    size_t data_len, stream_len;
    uint8_t *stream = concat_frames(split, 3, &data, &data_len, &stream_len, NULL);
    check_stream_decodes(stream, stream_len, data, data_len, 3);
    free(stream);
    free(data);
}
END_TEST

START_TEST(test_concat_empty_frames)
{
    const piece pieces[] = { { 0, { 1, 64, 1 }, 1 }, { 777, { 1, 64, 1 }, 4 }, { 0, { 2, 128, 1 }, 1 } };
    uint8_t *data;
    size_t data_len, stream_len, ends[3];
    uint8_t *stream = concat_frames(pieces, 3, &data, &data_len, &stream_len, ends);
    ck_assert_uint_eq(ends[0], 36);
    check_stream_decodes(stream, stream_len, data, data_len, 3);                     /* empty, frame, empty */
    check_stream_decodes(stream, ends[1], data, data_len, 2);                        /* empty, frame */
    check_stream_decodes(stream + ends[0], stream_len - ends[0], data, data_len, 2); /* frame, empty */
    /* two empty frames: nothing, and no output buffer needed */
    uint8_t two[72];
    memcpy(two, stream, 36);
    memcpy(two + 36, stream + ends[1], 36);
    gc_error err;
    size_t out_len = 1;
    ck_assert_int_eq(rle_decompress(two, sizeof two, 1, NULL, 0, &out_len, &err), GC_OK);
    ck_assert_uint_eq(out_len, 0);
    free(stream);
    free(data);
}
END_TEST

/* first then tail; decoding gives code and message parts, sizing gives size_code
 * (it reads headers and indexes only: a chunk's CRC or the capacity pass it). */
static void expect_stream_error(const uint8_t *first, size_t first_len, const uint8_t *tail, size_t tail_len,
                                size_t cap, int code, int size_code, const char *part1, const char *part2)
{
    uint8_t *s = xmalloc(first_len + tail_len);
    memcpy(s, first, first_len);
    memcpy(s + first_len, tail, tail_len);
    gc_error err;
    int rc = decode_status(s, first_len + tail_len, cap, &err);
    ck_assert_msg(rc == code, "rc %d, want %d (%s)", rc, code, err.msg);
    ck_assert_msg(strstr(err.msg, part1) != NULL, "message '%s' lacks '%s'", err.msg, part1);
    ck_assert_msg(!part2 || strstr(err.msg, part2) != NULL, "message '%s' lacks '%s'", err.msg, part2);
    uint64_t size;
    rc = rle_stream_decoded_size(s, first_len + tail_len, &size, NULL, &err);
    ck_assert_msg(rc == size_code, "sizing: rc %d, want %d (%s)", rc, size_code, err.msg);
    free(s);
}

START_TEST(test_concat_errors)
{
    const size_t cap = 2 * sizeof golden_input + 4096;
    const uint8_t *g = golden_frame;
    const size_t gl = sizeof golden_frame;
    /* garbage after a frame: trailing bytes, named after the frame they would be */
    expect_stream_error(g, gl, (const uint8_t *)"junk!", 5, cap, GC_E_CORRUPT, GC_E_CORRUPT,
                        "rle: frame 2: ", "5 trailing bytes after frame 1");
    uint8_t zeros[100] = { 0 };
    expect_stream_error(g, gl, zeros, sizeof zeros, cap, GC_E_CORRUPT, GC_E_CORRUPT, "rle: frame 2: ", "trailing");
    expect_stream_error(g, gl, zeros, 1, cap, GC_E_CORRUPT, GC_E_CORRUPT, "rle: frame 2: ", "1 trailing byte ");
    /* a truncated second frame, at every length */
    for (size_t len = 1; len < gl; len++) {
        uint8_t *s = xmalloc(gl + len);
        memcpy(s, g, gl);
        memcpy(s + gl, g, len);
        gc_error err;
        int rc = decode_status(s, gl + len, cap, &err);
        ck_assert_msg(rc == GC_E_TRUNCATED, "second frame cut at %zu: rc %d (%s)", len, rc, err.msg);
        ck_assert_msg(strncmp(err.msg, "rle: frame 2: ", 14) == 0, "%s", err.msg);
        free(s);
    }
    /* a second frame with a bad header CRC, with a bad chunk CRC */
    uint8_t bad[sizeof golden_frame];
    memcpy(bad, g, gl);
    bad[40] ^= 1;
    expect_stream_error(g, gl, bad, gl, cap, GC_E_CRC, GC_E_CRC, "rle: frame 2: header CRC32C mismatch", NULL);
    memcpy(bad, g, gl);
    bad[77] ^= 0x20;
    expect_stream_error(g, gl, bad, gl, cap, GC_E_CRC, GC_OK, "rle: frame 2: chunk 1: CRC32C mismatch", NULL);
    /* ... and the third frame's errors name it */
    uint8_t two[2 * sizeof golden_frame];
    memcpy(two, g, gl);
    memcpy(two + gl, g, gl);
    expect_stream_error(two, sizeof two, bad, gl, cap, GC_E_CRC, GC_OK, "rle: frame 3: chunk 1: CRC32C", NULL);
    expect_stream_error(two, sizeof two, g, 20, cap, GC_E_TRUNCATED, GC_E_TRUNCATED, "rle: frame 3: 20 bytes",
                        NULL);
    /* the first frame's errors read as they always have, whatever follows */
    memcpy(bad, g, gl);
    bad[40] ^= 1;
    expect_stream_error(bad, gl, g, gl, cap, GC_E_CRC, GC_E_CRC, "rle: frame: header CRC32C mismatch", NULL);
    memcpy(bad, g, gl);
    bad[77] ^= 0x20;
    expect_stream_error(bad, gl, g, gl, cap, GC_E_CRC, GC_OK, "rle: chunk 1: CRC32C mismatch", NULL);
    /* the output must hold both frames: one frame's worth is too small */
    expect_stream_error(g, gl, g, gl, sizeof golden_input, GC_E_LIMIT, GC_OK, "2 frames decode to 138 bytes",
                        NULL);
    /* and an empty input is no frame at all */
    gc_error err;
    ck_assert_int_eq(decode_status(g, 0, cap, &err), GC_E_TRUNCATED);
}
END_TEST

static Suite *rle_suite(void)
{
    Suite *s = suite_create("rle");
    TCase *crc = tcase_create("crc32c");
    tcase_add_test(crc, test_crc32c_vectors);
    tcase_add_test(crc, test_crc32c_incremental);
    tcase_add_test(crc, test_crc32c_portable_agrees);
    suite_add_tcase(s, crc);

    TCase *frames = tcase_create("frames");
    tcase_set_timeout(frames, 120); /* sanitizer builds are slow */
    tcase_add_test(frames, test_golden_frame);
    tcase_add_test(frames, test_frame_parse_fields);
    tcase_add_test(frames, test_empty);
    tcase_add_test(frames, test_one_byte);
    tcase_add_test(frames, test_all_equal);
    tcase_add_test(frames, test_alternating);
    tcase_add_test(frames, test_random_is_stored);
    tcase_add_test(frames, test_stored_threshold);
    tcase_add_test(frames, test_long_runs);
    tcase_add_test(frames, test_every_width_with_tail);
    tcase_add_test(frames, test_wide_elements_compare_whole);
    tcase_add_test(frames, test_chunk_boundaries);
    tcase_add_test(frames, test_threads_identical);
    tcase_add_test(frames, test_random_shapes);
    tcase_add_test(frames, test_chunk_api);
    suite_add_tcase(s, frames);

    TCase *bad = tcase_create("bad input");
    tcase_set_timeout(bad, 120);
    tcase_add_test(bad, test_corrupt_flips);
    tcase_add_test(bad, test_truncated);
    tcase_add_test(bad, test_error_codes_and_messages);
    tcase_add_test(bad, test_hostile_chunk_count);
    tcase_add_test(bad, test_dst_too_small);
    tcase_add_test(bad, test_invalid_options);
    suite_add_tcase(s, bad);

    TCase *concat = tcase_create("concatenated frames");
    tcase_set_timeout(concat, 120);
    tcase_add_test(concat, test_concat_two_and_three_frames);
    tcase_add_test(concat, test_concat_empty_frames);
    tcase_add_test(concat, test_concat_errors);
    suite_add_tcase(s, concat);

    TCase *hostile = tcase_create("changing input");
    tcase_set_timeout(hostile, 300); /* each case runs for a bounded time; sanitizers are slow */
    tcase_add_test(hostile, test_run_lengths_bounded);
    tcase_add_test(hostile, test_same_buffer);
    tcase_add_test(hostile, test_decode_input_changes);
    tcase_add_test(hostile, test_encode_input_changes);
    suite_add_tcase(s, hostile);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(rle_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
