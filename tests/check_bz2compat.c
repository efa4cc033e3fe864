/*
 * check_bz2compat.c - libgpucomp-bz2 against Debian's libbz2, call by call:
 * both libraries are dlopen'ed (RTLD_LOCAL, so each one's calls to its own
 * BZ2_* names stay inside it) and given the same arguments. Return codes,
 * decoded bytes and compressed bytes must be equal (the shim writes bzip2
 * 1.0.8's bytes, docs/BZIP2.md); what one compresses, the other decodes.
 */
#include <bzlib.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "bzlib_pair.h"
#include "daemon_harness.h"
#include "gpucomp.h"

static bzlib ref, shim;

static void setup(void)
{
    bzlib_load(&ref, "libbz2.so.1.0");
    bzlib_load(&shim, SHIM_PATH);
    ck_assert_ptr_ne(ref.b2b_compress, shim.b2b_compress);
}

/* The shim stays loaded: its CPU engine keeps pool threads, which an unload
 * would pull the code from under (libgpucomp-bz2(7) says so). */
static void teardown(void)
{
    dlclose(ref.handle);
}

/* Compress with b into a malloc'd buffer (*len its size). */
static char *compress_with(const bzlib *b, const uint8_t *src, size_t n, int level, unsigned *len)
{
    unsigned cap = (unsigned)(n + n / 100 + 600);
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    *len = cap;
    ck_assert_int_eq(b->b2b_compress(out, len, (char *)(n ? src : (const uint8_t *)""), (unsigned)n, level, 0, 0),
                     BZ_OK);
    return out;
}

/* Decompress z with both libraries into cap bytes: same code, same bytes. */
static int decompress_both(const char *z, unsigned zlen, unsigned cap, unsigned *out_len)
{
    char *a = malloc(cap ? cap : 1), *b = malloc(cap ? cap : 1);
    ck_assert(a && b);
    unsigned la = cap, lb = cap;
    int ra = ref.b2b_decompress(a, &la, (char *)z, zlen, 0, 0);
    int rb = shim.b2b_decompress(b, &lb, (char *)z, zlen, 0, 0);
    ck_assert_msg(ra == rb, "libbz2 %d, shim %d (input %u bytes, room %u)", ra, rb, zlen, cap);
    ck_assert_uint_eq(la, lb);
    if (ra == BZ_OK)
        ck_assert(memcmp(a, b, la) == 0);
    free(a);
    free(b);
    if (out_len)
        *out_len = la;
    return ra;
}

/* Each compresses, both decode both; the decoded bytes are the input. */
static void cross_round_trip(const uint8_t *data, size_t n, int level)
{
    unsigned zr, zs, len;
    char *by_ref = compress_with(&ref, data, n, level, &zr);
    char *by_shim = compress_with(&shim, data, n, level, &zs);
    char *out = malloc(n + 1);
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(zr == zs && memcmp(by_ref, by_shim, zr) == 0, "compressed: libbz2 %u bytes, shim %u", zr, zs);
    const char *z[2] = { by_ref, by_shim };
    unsigned zl[2] = { zr, zs };
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(decompress_both(z[k], zl[k], (unsigned)n + 1, &len), BZ_OK);
        len = (unsigned)n + 1;
        ck_assert_int_eq(shim.b2b_decompress(out, &len, (char *)z[k], zl[k], 0, 0), BZ_OK);
        ck_assert_uint_eq(len, n);
        ck_assert(n == 0 || memcmp(out, data, n) == 0);
    }
    free(out);
    free(by_ref);
    free(by_shim);
}

static uint8_t *test_data(size_t n, int kind)
{
    uint8_t *d = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(d);
    fill_test_data(d, n, kind, 35);
    return d;
}

START_TEST(test_version)
{
    ck_assert_int_eq(strncmp(shim.version(), "1.0.8, ", 7), 0);
    ck_assert_int_eq(strncmp(ref.version(), "1.0.8, ", 7), 0);
}
END_TEST

START_TEST(test_buffer_round_trips)
{
    static const size_t sizes[] = { 0, 1, 1u << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int kind = 0; kind < 3; kind++) {
            uint8_t *d = test_data(sizes[i], kind);
            cross_round_trip(d, sizes[i], kind == 1 ? 1 : 9);
            free(d);
        }
}
END_TEST

START_TEST(test_buffer_30mib)
{
    size_t n = (size_t)30 << 20;
    uint8_t *d = test_data(n, 2);
    cross_round_trip(d, n, 9);
    free(d);
}
END_TEST

START_TEST(test_buffer_param_errors)
{
    char src[4] = "abc", dst[64];
    unsigned len = sizeof dst;
    const bzlib *libs[2] = { &ref, &shim };
    for (int k = 0; k < 2; k++) {
        const bzlib *b = libs[k];
        ck_assert_int_eq(b->b2b_compress(NULL, &len, src, 3, 9, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, NULL, src, 3, 9, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, &len, NULL, 3, 9, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, &len, src, 3, 0, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, &len, src, 3, 10, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, &len, src, 3, 9, -1, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, &len, src, 3, 9, 5, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, &len, src, 3, 9, 0, -1), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_compress(dst, &len, src, 3, 9, 0, 251), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_decompress(NULL, &len, src, 3, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_decompress(dst, NULL, src, 3, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_decompress(dst, &len, NULL, 3, 0, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_decompress(dst, &len, src, 3, 2, 0), BZ_PARAM_ERROR);
        ck_assert_int_eq(b->b2b_decompress(dst, &len, src, 3, 0, 5), BZ_PARAM_ERROR);
        ck_assert_uint_eq(len, sizeof dst); /* untouched */
        /* accepted and ignored: small, verbosity, workFactor */
        ck_assert_int_eq(b->b2b_compress(dst, &len, src, 3, 1, 4, 250), BZ_OK);
        unsigned out = 3;
        ck_assert_int_eq(b->b2b_decompress(src, &out, dst, len, 1, 4), BZ_OK);
        ck_assert_uint_eq(out, 3);
        len = sizeof dst;
    }
}
END_TEST

START_TEST(test_buffer_compress_outbuff_full)
{
    uint8_t *d = test_data(4096, 2);
    unsigned zlen;
    char *z = compress_with(&shim, d, 4096, 9, &zlen);
    char *out = malloc(zlen);
    unsigned len = zlen - 1;
    ck_assert_int_eq(shim.b2b_compress(out, &len, (char *)d, 4096, 9, 0, 0), BZ_OUTBUFF_FULL);
    ck_assert_uint_eq(len, zlen - 1); /* untouched, as libbz2 leaves it */
    len = 0;
    ck_assert_int_eq(ref.b2b_compress(out, &len, (char *)d, 4096, 9, 0, 0), BZ_OUTBUFF_FULL);
    ck_assert_int_eq(shim.b2b_compress(out, &len, (char *)d, 4096, 9, 0, 0), BZ_OUTBUFF_FULL);
    len = zlen;
    ck_assert_int_eq(shim.b2b_compress(out, &len, (char *)d, 4096, 9, 0, 0), BZ_OK);
    ck_assert_uint_eq(len, zlen);
    free(out);
    free(z);
    free(d);
}
END_TEST

/* Every room from 0 to the output's size and past it. */
START_TEST(test_buffer_decompress_every_room)
{
    uint8_t *d = test_data(3000, 2);
    unsigned zlen;
    char *z = compress_with(&ref, d, 3000, 9, &zlen);
    for (unsigned cap = 0; cap <= 3002; cap++)
        ck_assert_int_eq(decompress_both(z, zlen, cap, NULL), cap < 3000 ? BZ_OUTBUFF_FULL : BZ_OK);
    free(z);
    free(d);
}
END_TEST

/* Several blocks (level 1): rooms that end exactly at a block's end, then a
 * stream cut or broken right after it. */
START_TEST(test_buffer_decompress_block_edges)
{
    size_t n = 350000;
    uint8_t *d = test_data(n, 0);
    unsigned zlen;
    char *z = compress_with(&ref, d, n, 1, &zlen);
    static const unsigned rooms[] = { 0, 1, 99981, 99982, 99983, 199963, 199964, 349999, 350000, 350001 };
    for (size_t i = 0; i < sizeof rooms / sizeof *rooms; i++)
        for (unsigned cut = zlen - 12; cut <= zlen; cut++)
            decompress_both(z, cut, rooms[i], NULL);
    for (size_t i = 0; i < sizeof rooms / sizeof *rooms; i++)
        for (unsigned cut = 0; cut < zlen; cut += 7919)
            decompress_both(z, cut, rooms[i], NULL);
    free(z);
    free(d);
}
END_TEST

START_TEST(test_buffer_decompress_headers)
{
    static const char *const inputs[] = { "",
                                          "B",
                                          "BZ",
                                          "BZh",
                                          "BZh9",
                                          "BZh91",
                                          "X",
                                          "BX",
                                          "BZX",
                                          "BZh0",
                                          "BZha",
                                          "bZh9",
                                          "BZh9\x31\x41\x59",
                                          "BZh9\x17\x72\x45\x38\x50\x90",
                                          "BZh9\x31\x41\x58",
                                          "BZh9\x17\x72\x45\x38\x50\x91" };
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++)
        for (unsigned cap = 0; cap < 3; cap++)
            decompress_both(inputs[i], (unsigned)strlen(inputs[i]), cap, NULL);
    /* an empty stream whose combined CRC is 0, then one that is wrong */
    static const char empty[] = "BZh9\x17\x72\x45\x38\x50\x90\0\0\0\0";
    ck_assert_int_eq(decompress_both(empty, sizeof empty - 1, 0, NULL), BZ_OK);
    static const char bad_crc[] = "BZh9\x17\x72\x45\x38\x50\x90\0\0\0\1";
    ck_assert_int_eq(decompress_both(bad_crc, sizeof bad_crc - 1, 0, NULL), BZ_DATA_ERROR);
}
END_TEST

/* Every prefix and every single-bit flip of small streams. */
START_TEST(test_buffer_decompress_damaged)
{
    static const size_t sizes[] = { 1, 600 };
    for (size_t s = 0; s < 2; s++) {
        uint8_t *d = test_data(sizes[s], 2);
        unsigned zlen;
        char *z = compress_with(&ref, d, sizes[s], 9, &zlen);
        for (unsigned cut = 0; cut <= zlen; cut++)
            decompress_both(z, cut, (unsigned)sizes[s] + 10, NULL);
        char *bad = malloc(zlen);
        for (unsigned bit = 0; bit < zlen * 8; bit++) {
            memcpy(bad, z, zlen);
            bad[bit / 8] ^= (char)(0x80 >> (bit % 8));
            decompress_both(bad, zlen, (unsigned)sizes[s] + 10, NULL);
        }
        free(bad);
        free(z);
        free(d);
    }
}
END_TEST

/* Only the first stream is decoded; what follows it is ignored. */
START_TEST(test_buffer_decompress_first_stream_only)
{
    unsigned za, zb, len;
    char *a = compress_with(&ref, (const uint8_t *)"first", 5, 9, &za);
    char *b = compress_with(&ref, (const uint8_t *)"second", 6, 9, &zb);
    char *both = malloc(za + zb + 8);
    memcpy(both, a, za);
    memcpy(both + za, b, zb);
    ck_assert_int_eq(decompress_both(both, za + zb, 100, &len), BZ_OK);
    ck_assert_uint_eq(len, 5);
    memcpy(both + za, "garbage!", 8);
    ck_assert_int_eq(decompress_both(both, za + 8, 100, &len), BZ_OK);
    ck_assert_uint_eq(len, 5);
    free(both);
    free(a);
    free(b);
}
END_TEST

/* ---- the stream calls ---- */

/* What a stream decode gave: its bytes, its last return code, the input it left unused. */
typedef struct decoded {
    uint8_t *out;
    size_t len;
    int rc;
    size_t left;
} decoded;

/*
 * Decode z with b's stream calls, offering at most in_step input bytes and
 * out_step bytes of room per call, until a return code other than BZ_OK or
 * no progress with all input offered.
 */
static decoded stream_decode(const bzlib *b, const uint8_t *z, size_t zlen, size_t in_step, size_t out_step)
{
    bz_stream st;
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(b->d_init(&st, 0, 0), BZ_OK);
    decoded d = { malloc(1), 0, BZ_OK, 0 };
    size_t cap = 1, fed = 0, window = 0; /* fed: bytes consumed before the window */
    for (;;) {
        if (st.avail_in == 0 && fed + window < zlen) {
            fed += window;
            window = zlen - fed < in_step ? zlen - fed : in_step;
            st.next_in = (char *)z + fed;
            st.avail_in = (unsigned)window;
        }
        if (cap - d.len < out_step) {
            cap = (d.len + out_step) * 2;
            d.out = realloc(d.out, cap);
            ck_assert_ptr_nonnull(d.out);
        }
        st.next_out = (char *)d.out + d.len;
        st.avail_out = (unsigned)out_step;
        unsigned in_before = st.avail_in;
        d.rc = b->d_step(&st);
        size_t made = out_step - st.avail_out;
        d.len += made;
        if (d.rc != BZ_OK)
            break;
        if (made == 0 && in_before == st.avail_in && fed + window >= zlen)
            break; /* all offered, nothing more comes: truncated input */
    }
    d.left = zlen - (fed + window - st.avail_in);
    b->d_end(&st);
    return d;
}

/* Both libraries' stream decodes of z agree: code, bytes and the input left
 * after the stream (after an error, only where all input came at once: the
 * shim may have taken up to a block more than libbz2 before it, never less). */
static void stream_decode_both(const uint8_t *z, size_t zlen, size_t in_step, size_t out_step)
{
    decoded a = stream_decode(&ref, z, zlen, in_step, out_step);
    decoded b = stream_decode(&shim, z, zlen, in_step, out_step);
    ck_assert_msg(a.rc == b.rc, "libbz2 %d, shim %d (steps in %zu, out %zu)", a.rc, b.rc, in_step, out_step);
    ck_assert_msg(a.len == b.len, "output: libbz2 %zu bytes, shim %zu (steps in %zu, out %zu, input %zu)", a.len,
                  b.len, in_step, out_step, zlen);
    ck_assert(a.len == 0 || memcmp(a.out, b.out, a.len) == 0);
    bool exact = a.rc != BZ_DATA_ERROR || in_step >= zlen;
    ck_assert_msg(exact ? a.left == b.left : b.left <= a.left,
                  "input left after the stream: libbz2 %zu, shim %zu (steps in %zu, out %zu)", a.left, b.left,
                  in_step, out_step);
    free(a.out);
    free(b.out);
}

START_TEST(test_stream_decompress_steps)
{
    const size_t n = 300 * 1000;
    uint8_t *d = test_data(n, 2);
    unsigned zlen;
    char *z = compress_with(&ref, d, n, 1, &zlen);
    const size_t steps[][2] = { { 1, 1 << 20 }, { 7, 13 }, { 4096, 1 }, { 1 << 20, 65536 }, { 333, 100000 } };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
        stream_decode_both((const uint8_t *)z, zlen, steps[i][0], steps[i][1]);
    /* truncated: both wait for more (BZ_OK, all offered), with the same bytes out */
    stream_decode_both((const uint8_t *)z, zlen / 2, 4096, 65536);
    stream_decode_both((const uint8_t *)z, zlen * 3 / 4, 1, 777);
    free(z);
    free(d);
}
END_TEST

/* Bytes after the end of a stream stay unused, as libbz2 leaves them, whatever the steps. */
START_TEST(test_stream_decompress_unused_after_end)
{
    unsigned zlen;
    char *z = compress_with(&ref, (const uint8_t *)"first stream", 12, 9, &zlen);
    uint8_t *both = malloc(zlen + 100);
    ck_assert_ptr_nonnull(both);
    memcpy(both, z, zlen);
    memset(both + zlen, 'x', 100);
    const size_t steps[] = { 1, 3, 64, (size_t)zlen + 100 };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
        stream_decode_both(both, zlen + 100, steps[i], 7);
    free(both);
    free(z);
}
END_TEST

/* Of a block whose stored CRC is wrong, libbz2 hands out every byte and
 * reports BZ_DATA_ERROR in the call that hands out the last one; the shim
 * must too, whatever the room and input steps, with the same input left. */
START_TEST(test_stream_decompress_bad_block_crc)
{
    const size_t n = 300 * 1000;
    uint8_t *d = test_data(n, 2);
    unsigned zlen;
    uint8_t *z = (uint8_t *)compress_with(&ref, d, n, 1, &zlen), *bad = malloc(zlen);
    ck_assert_ptr_nonnull(bad);
    size_t before = 0; /* the bytes of the blocks before block k */
    unsigned k;
    for (k = 0; bzlib_block_bit(z, zlen, k) != UINT64_MAX; k++) {
        memcpy(bad, z, zlen);
        uint64_t crc_bit = bzlib_block_bit(z, zlen, k) + 48 + 31; /* the stored CRC's last bit */
        bad[crc_bit / 8] ^= (uint8_t)(0x80 >> (crc_bit % 8));
        decoded a = stream_decode(&ref, bad, zlen, zlen, 1 << 20);
        /* libbz2 gave the bad block's bytes: all of blocks 0..k, all correct */
        ck_assert_int_eq(a.rc, BZ_DATA_ERROR);
        ck_assert_uint_gt(a.len, before);
        ck_assert(memcmp(a.out, d, a.len) == 0);
        before = a.len;
        const size_t steps[][2] = { { zlen, 1 << 20 },   { zlen, 1 },       { 1, 1 },
                                    { 7, 13 },           { 4096, a.len },   { 4096, a.len - 1 },
                                    { 4096, a.len + 1 }, { 1 << 20, 65536 } };
        for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
            stream_decode_both(bad, zlen, steps[i][0], steps[i][1]);
        free(a.out);
    }
    ck_assert_uint_ge(k, 3);
    ck_assert_uint_eq(before, n); /* the last block's bytes too */
    free(bad);
    free(z);
    free(d);
}
END_TEST

/* b's stream compression of d, fed in odd steps with a flush halfway and drained into odd rooms. */
static char *stream_compress_in_steps(const bzlib *b, const uint8_t *d, size_t n, size_t *out_len)
{
    bz_stream st;
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(b->c_init(&st, 1, 0, 0), BZ_OK);
    size_t cap = n + n / 100 + 600, len = 0, fed = 0;
    char *z = malloc(cap);
    ck_assert_ptr_nonnull(z);
    int action = BZ_RUN, rc;
    do {
        if (st.avail_in == 0 && fed < n && action == BZ_RUN) {
            size_t k = n - fed < 4099 ? n - fed : 4099;
            st.next_in = (char *)d + fed;
            st.avail_in = (unsigned)k;
            fed += k;
            if (fed >= n / 2 && fed - k < n / 2)
                action = BZ_FLUSH;
        }
        if (fed == n && st.avail_in == 0 && action == BZ_RUN)
            action = BZ_FINISH;
        st.next_out = z + len;
        st.avail_out = cap - len < 777 ? (unsigned)(cap - len) : 777;
        unsigned room = st.avail_out;
        rc = b->c_step(&st, action);
        len += room - st.avail_out;
        if (rc == BZ_FLUSH_OK || rc == BZ_FINISH_OK)
            continue;
        ck_assert_msg(rc == BZ_RUN_OK || rc == BZ_STREAM_END, "BZ2_bzCompress: %d", rc);
        if (action == BZ_FLUSH)
            action = BZ_RUN; /* the flush is done */
    } while (rc != BZ_STREAM_END);
    ck_assert_int_eq(b->c_step(&st, BZ_FINISH), BZ_SEQUENCE_ERROR);
    ck_assert_uint_eq(st.total_in_lo32, n);
    ck_assert_uint_eq(st.total_out_lo32, len);
    ck_assert_int_eq(b->c_end(&st), BZ_OK);
    *out_len = len;
    return z;
}

/* The shim's stream compression with a flush is libbz2's byte for byte (the flush ends a block
 * there in both), and libbz2 decodes it to the input. */
START_TEST(test_stream_compress_decoded_by_libbz2)
{
    const size_t n = 700 * 1000;
    uint8_t *d = test_data(n, 2);
    size_t len, ref_len;
    char *z = stream_compress_in_steps(&shim, d, n, &len);
    char *by_ref = stream_compress_in_steps(&ref, d, n, &ref_len);
    ck_assert_msg(len == ref_len && memcmp(z, by_ref, len) == 0, "libbz2 %zu bytes, shim %zu", ref_len, len);
    char *back = malloc(n + 1);
    unsigned back_len = (unsigned)n + 1;
    ck_assert_int_eq(ref.b2b_decompress(back, &back_len, z, (unsigned)len, 0, 0), BZ_OK);
    ck_assert_uint_eq(back_len, n);
    ck_assert(memcmp(back, d, n) == 0);
    free(back);
    free(by_ref);
    free(z);
    free(d);
}
END_TEST

/* Past the shim's stream buffer, fed in 1 MiB steps: the parts are cut at
 * block starts, so the stream is libbz2's byte for byte. */
START_TEST(test_stream_compress_parts_are_bzip2s)
{
    const size_t n = ((size_t)64 << 20) + 12345;
    uint8_t *d = test_data(n, 2);
    unsigned zr;
    char *by_ref = compress_with(&ref, d, n, 1, &zr);
    size_t cap = (size_t)zr + (1u << 20), len = 0;
    char *z = malloc(cap);
    ck_assert_ptr_nonnull(z);
    bz_stream st;
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(shim.c_init(&st, 1, 0, 0), BZ_OK);
    int rc;
    size_t fed = 0;
    do {
        if (st.avail_in == 0 && fed < n) {
            size_t k = n - fed < (1u << 20) ? n - fed : (1u << 20);
            st.next_in = (char *)d + fed;
            st.avail_in = (unsigned)k;
            fed += k;
        }
        st.next_out = z + len;
        st.avail_out = (unsigned)(cap - len);
        rc = shim.c_step(&st, fed == n ? BZ_FINISH : BZ_RUN);
        len = cap - st.avail_out;
        ck_assert_msg(rc == BZ_RUN_OK || rc == BZ_FINISH_OK || rc == BZ_STREAM_END, "BZ2_bzCompress: %d", rc);
    } while (rc != BZ_STREAM_END);
    ck_assert_int_eq(shim.c_end(&st), BZ_OK);
    ck_assert_msg(len == zr && memcmp(z, by_ref, zr) == 0, "libbz2 %u bytes, shim stream %zu", zr, len);
    free(z);
    free(by_ref);
    free(d);
}
END_TEST

static test_daemon dut;

static void daemon_teardown(void)
{
    test_daemon_cleanup(&dut);
    memset(&dut, 0, sizeof dut);
    unsetenv("GPUCOMP_SOCKET");
}

static uint64_t daemon_requests(void)
{
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    gpucomp_close(c);
    return st.requests_ok;
}

/* Large work reaches the daemon; small work stays in this process; without a
 * daemon both still work. */
START_TEST(test_buffer_compress_through_daemon)
{
    uint8_t *d = test_data(1u << 20, 2);
    setenv("GPUCOMP_SOCKET", "/nonexistent/check-bz2compat.sock", 1);
    cross_round_trip(d, 1u << 20, 9);
    test_daemon_start(&dut, NULL);
    setenv("GPUCOMP_SOCKET", dut.socket_path, 1);
    uint64_t before = daemon_requests();
    unsigned zlen;
    free(compress_with(&shim, d, 1000, 9, &zlen));
    ck_assert_uint_eq(daemon_requests(), before);
    cross_round_trip(d, 1u << 20, 9);
    ck_assert_uint_eq(daemon_requests(), before + 1);
    free(d);
}
END_TEST

/* libbz2's stream compression of d at level 1, flushed after its first `at` bytes. */
static char *ref_with_flush(const uint8_t *d, size_t n, size_t at, size_t *out_len)
{
    bz_stream st;
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(ref.c_init(&st, 1, 0, 0), BZ_OK);
    size_t cap = n + n / 50 + (1u << 20), len = 0;
    char *z = malloc(cap);
    ck_assert_ptr_nonnull(z);
    int steps[2] = { BZ_FLUSH, BZ_FINISH }, done[2] = { BZ_RUN_OK, BZ_STREAM_END };
    size_t from[2] = { 0, at }, to[2] = { at, n };
    for (int k = 0; k < 2; k++) {
        st.next_in = (char *)d + from[k];
        st.avail_in = (unsigned)(to[k] - from[k]);
        int rc;
        do {
            st.next_out = z + len;
            st.avail_out = (unsigned)(cap - len);
            rc = ref.c_step(&st, steps[k]);
            len = cap - st.avail_out;
        } while (rc != done[k] && (rc == BZ_FLUSH_OK || rc == BZ_FINISH_OK));
        ck_assert_int_eq(rc, done[k]);
    }
    ck_assert_int_eq(ref.c_end(&st), BZ_OK);
    *out_len = len;
    return z;
}

/* Run in (op) through s until it is all taken and, unless CONTINUE, all its output is out. */
static void run_stream(gpucomp_stream *s, const uint8_t *in, size_t n, gpucomp_end_op op, uint8_t *z, size_t cap,
                       size_t *len)
{
    gpucomp_inbuf ib = { in, n, 0 };
    size_t pending = 0;
    do {
        gpucomp_outbuf ob = { z + *len, cap - *len, 0 };
        ck_assert_int_eq(gpucomp_stream_run(s, &ib, &ob, op, &pending), GPUCOMP_OK);
        *len += ob.pos;
        ck_assert_uint_lt(*len, cap);
    } while (ib.pos < n || (op != GPUCOMP_CONTINUE && pending));
}

/*
 * The library's stream through the daemon (a ring stream, whose parts read
 * a span each and settle at a block start), flushed after `at` bytes: with
 * the flush on the frame of the last byte, or alone in a frame after the
 * bytes (mark_alone) when the part reading them may already be cut.
 */
static uint8_t *daemon_with_flush(const uint8_t *d, size_t n, size_t at, bool mark_alone, size_t *out_len)
{
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = 1;
    gpucomp_stream *s;
    ck_assert_int_eq(gpucomp_stream_open(c, GPUCOMP_COMPRESS, &o, &s), GPUCOMP_OK);
    size_t cap = n + n / 50 + (1u << 20), len = 0;
    uint8_t *z = malloc(cap);
    ck_assert_ptr_nonnull(z);
    if (mark_alone) {
        run_stream(s, d, at, GPUCOMP_CONTINUE, z, cap, &len);
        run_stream(s, d + at, 0, GPUCOMP_FLUSH, z, cap, &len);
    } else {
        run_stream(s, d, at, GPUCOMP_FLUSH, z, cap, &len);
    }
    run_stream(s, d + at, n - at, GPUCOMP_END, z, cap, &len);
    gpucomp_stream_free(s);
    gpucomp_close(c);
    *out_len = len;
    return z;
}

/* A flush through the daemon's stream is libbz2's BZ_FLUSH byte for byte, wherever the mark comes. */
START_TEST(test_stream_flush_through_daemon)
{
    const size_t span = (size_t)32 << 20, n = span + ((size_t)4 << 20);
    uint8_t *d = test_data(n, 2);
    test_daemon_start(&dut, NULL);
    struct {
        size_t at;
        bool mark_alone;
    } cases[] = { { span, true }, { span, false }, { ((size_t)10 << 20) + 7, false } };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len, ref_len;
        char *by_ref = ref_with_flush(d, n, cases[i].at, &ref_len);
        uint8_t *z = daemon_with_flush(d, n, cases[i].at, cases[i].mark_alone, &len);
        ck_assert_msg(len == ref_len && memcmp(z, by_ref, len) == 0, "case %u: libbz2 %zu bytes, daemon %zu", i,
                      ref_len, len);
        free(z);
        free(by_ref);
    }
    free(d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bz2compat");
    TCase *t = tcase_create("buffer");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_version);
    tcase_add_test(t, test_buffer_round_trips);
    tcase_add_test(t, test_buffer_30mib);
    tcase_add_test(t, test_buffer_param_errors);
    tcase_add_test(t, test_buffer_compress_outbuff_full);
    tcase_add_test(t, test_buffer_decompress_every_room);
    tcase_add_test(t, test_buffer_decompress_block_edges);
    tcase_add_test(t, test_buffer_decompress_headers);
    tcase_add_test(t, test_buffer_decompress_damaged);
    tcase_add_test(t, test_buffer_decompress_first_stream_only);
    tcase_add_test(t, test_stream_decompress_steps);
    tcase_add_test(t, test_stream_decompress_unused_after_end);
    tcase_add_test(t, test_stream_decompress_bad_block_crc);
    tcase_add_test(t, test_stream_compress_decoded_by_libbz2);
    tcase_add_test(t, test_stream_compress_parts_are_bzip2s);
    suite_add_tcase(s, t);
    TCase *td = tcase_create("daemon");
    tcase_add_checked_fixture(td, setup, teardown);
    tcase_add_checked_fixture(td, NULL, daemon_teardown);
    tcase_set_timeout(td, 300);
    tcase_add_test(td, test_buffer_compress_through_daemon);
    tcase_add_test(td, test_stream_flush_through_daemon);
    suite_add_tcase(s, td);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
