/*
 * check_bzip2.c - tests of the bzip2 CPU codec (codecs/bzip2/cpu/bz2_*.c).
 *
 * libbz2 is the oracle (linked by the tests only); pbzip2 and lbzip2 are
 * run as commands to get streams from other encoders. Sizes are kept
 * small so the suite stays fast under sanitizers.
 */
#include <bzlib.h>
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bz2_bwt_sort.h"
#include "bz2_oversub.h"
#include "bz2_stages.h"
#include "bzip2.h"
#include "gc_clock.h"
#include "test_rng.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    return (uint32_t)(test_xorshift(&rng_state) >> 16);
}

/* Text-like data: words from a small vocabulary, some numbers. */
static uint8_t *make_text(size_t n)
{
    static const char *words[] = { "the ",    "compress", "block ",      "sorting ", "of ",      "data\n",
                                   "Burrows", "Wheeler ", "transform, ", "and ",     "Huffman ", "codes. " };
    uint8_t *b = malloc(n ? n : 1);
    size_t i = 0;
    while (i < n) {
        const char *w = words[rnd() % 12];
        for (; *w && i < n; w++)
            b[i++] = (uint8_t)*w;
        if (rnd() % 7 == 0 && i < n)
            b[i++] = (uint8_t)('0' + rnd() % 10);
    }
    return b;
}

static uint8_t *make_random(size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)rnd();
    return b;
}

static uint8_t *ours_compress(const uint8_t *src, size_t n, int level, unsigned threads, size_t *out_len)
{
    bz2_options o = { .level = level, .threads = threads };
    uint8_t *out = NULL;
    gc_error err;
    int rc = bz2_compress(src, n, &o, &out, out_len, &err);
    ck_assert_msg(rc == GC_OK, "compress failed: %s", err.msg);
    ck_assert(*out_len <= bz2_compress_bound(n, level));
    return out;
}

/* libbz2 decoding of all concatenated streams; returns BZ_OK or error. */
static int libbz2_decompress(const uint8_t *src, size_t n, uint8_t **out, size_t *out_len)
{
    size_t cap = n * 8 + 1024, len = 0;
    uint8_t *buf = malloc(cap);
    size_t used = 0;
    int ret = BZ_OK;
    while (used < n) {
        bz_stream s;
        memset(&s, 0, sizeof s);
        if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK)
            return BZ_MEM_ERROR;
        s.next_in = (char *)(uintptr_t)(src + used);
        s.avail_in = (unsigned)(n - used);
        do {
            if (cap - len < 65536)
                buf = realloc(buf, cap *= 2);
            s.next_out = (char *)buf + len;
            s.avail_out = (unsigned)(cap - len);
            ret = BZ2_bzDecompress(&s);
            len = cap - s.avail_out;
        } while (ret == BZ_OK && (s.avail_in > 0 || s.avail_out == 0));
        used = n - s.avail_in;
        BZ2_bzDecompressEnd(&s);
        if (ret != BZ_STREAM_END) {
            free(buf);
            return ret == BZ_OK ? BZ_UNEXPECTED_EOF : ret;
        }
        ret = BZ_OK;
    }
    *out = buf;
    *out_len = len;
    return BZ_OK;
}

static uint8_t *libbz2_compress(const uint8_t *src, size_t n, int level, size_t *out_len)
{
    unsigned cap = (unsigned)(n + n / 100 + 700);
    char *buf = malloc(cap);
    int rc = BZ2_bzBuffToBuffCompress(buf, &cap, (char *)(uintptr_t)src, (unsigned)n, level, 0, 0);
    ck_assert_int_eq(rc, BZ_OK);
    *out_len = cap;
    return (uint8_t *)buf;
}

static void check_ours_decodes(const uint8_t *bz, size_t bzlen, const uint8_t *expect, size_t n, unsigned threads)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    gc_error err;
    int rc = bz2_decompress(bz, bzlen, 0, threads, &out, &out_len, &err);
    ck_assert_msg(rc == GC_OK, "decompress failed (%d): %s", rc, err.msg);
    ck_assert_uint_eq(out_len, n);
    ck_assert(n == 0 || memcmp(out, expect, n) == 0);
    free(out);
}

/* Full round trip: ours -> libbz2 and ours -> ours, threads 1 and 4 equal. */
static void roundtrip(const uint8_t *src, size_t n, int level)
{
    size_t l1, l4;
    uint8_t *c1 = ours_compress(src, n, level, 1, &l1);
    uint8_t *c4 = ours_compress(src, n, level, 4, &l4);
    ck_assert_uint_eq(l1, l4);
    ck_assert_msg(memcmp(c1, c4, l1) == 0, "output differs between thread counts");
    uint8_t *back;
    size_t bl;
    ck_assert_int_eq(libbz2_decompress(c1, l1, &back, &bl), BZ_OK);
    ck_assert_uint_eq(bl, n);
    ck_assert(n == 0 || memcmp(back, src, n) == 0);
    free(back);
    check_ours_decodes(c1, l1, src, n, 1);
    check_ours_decodes(c1, l1, src, n, 3);
    free(c1);
    free(c4);
}

static void roundtrip_free(uint8_t *src, size_t n, int level)
{
    roundtrip(src, n, level);
    free(src);
}

/* ---- BWT unit tests ---- */

static const uint8_t *naive_blk;
static size_t naive_n;
static int naive_cmp(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    for (size_t k = 0; k < naive_n; k++) {
        uint8_t x = naive_blk[(i + k) % naive_n], y = naive_blk[(j + k) % naive_n];
        if (x != y)
            return x < y ? -1 : 1;
    }
    if (i == j)
        return 0;
    if (i == 0 || j == 0) /* equal rotations: rotation 0 after its equals, as bzip2 */
        return i == 0 ? 1 : -1;
    return i < j ? -1 : 1; /* the others' order does not show in the output */
}

static void check_bwt(const uint8_t *blk, size_t n)
{
    size_t *idx = malloc(n * sizeof *idx);
    uint8_t *want = malloc(n), *got = malloc(n);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    naive_blk = blk;
    naive_n = n;
    qsort(idx, n, sizeof *idx, naive_cmp);
    int32_t want_orig = -1;
    for (size_t i = 0; i < n; i++) {
        want[i] = blk[(idx[i] + n - 1) % n];
        if (idx[i] == 0)
            want_orig = (int32_t)i;
    }
    int32_t orig = bz2_bwt(blk, (int32_t)n, got);
    ck_assert_int_eq(orig, want_orig);
    ck_assert(memcmp(got, want, n) == 0);
    free(idx);
    free(want);
    free(got);
}

START_TEST(test_bwt_small)
{
    uint8_t b[600];
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + rnd() % 500;
        unsigned alpha = 1 + rnd() % (round % 3 == 0 ? 2 : 255);
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)('a' + rnd() % alpha);
        if (round % 5 == 0) { /* periodic: u^k */
            size_t p = 1 + rnd() % 7;
            for (size_t i = p; i < n; i++)
                b[i] = b[i - p];
        }
        check_bwt(b, n);
    }
}
END_TEST

START_TEST(test_bwt_repetitive)
{
    /* Fibonacci string: worst case for comparison-based sorting (small:
     * the naive reference sort is quadratic here). */
    size_t n = 2500;
    uint8_t *f = malloc(n + 1);
    size_t a = 1, b = 2;
    f[0] = 'a';
    f[1] = 'b';
    while (b < n) { /* f_k = f_{k-1} f_{k-2} */
        size_t nb = b + a < n ? b + a : n;
        memcpy(f + b, f, nb - b);
        a = b;
        b = nb;
    }
    check_bwt(f, n);
    check_bwt(f, 987);
    memset(f, 'x', n);
    check_bwt(f, n);
    for (size_t i = 0; i < n; i++)
        f[i] = "abcab"[i % 5];
    check_bwt(f, n);
    f[n - 1] = 'z';
    check_bwt(f, n);
    free(f);
}
END_TEST

START_TEST(test_bwt_large_repetitive_fast)
{
    /* 900k blocks of periodic / Fibonacci / long-repeat data: must finish
     * quickly (O(n log n)), and be decodable. */
    size_t n = 900000;
    uint8_t *f = malloc(n);
    uint8_t *o = malloc(n);
    size_t a = 1, b = 2;
    f[0] = 'a';
    f[1] = 'b';
    while (b < n) {
        size_t nb = b + a < n ? b + a : n;
        memcpy(f + b, f, nb - b);
        a = b;
        b = nb;
    }
    clock_t t0 = clock();
    ck_assert_int_ge(bz2_bwt(f, (int32_t)n, o), 0);
    for (size_t i = 0; i < n; i++) /* period 1000 with one defect */
        f[i] = (uint8_t)(i % 1000 * 7);
    f[n / 2] ^= 1;
    ck_assert_int_ge(bz2_bwt(f, (int32_t)n, o), 0);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    ck_assert_msg(secs < 20, "repetitive BWT too slow: %.1fs", secs);
    roundtrip(f, 300000, 9);
    free(f);
    free(o);
}
END_TEST

/* Large-block BWT check without a quadratic reference: invert the output
 * by LF mapping. The walk from origPtr must visit all n rows before it
 * returns (one cycle), and then `out` is the BWT of what it spells, so
 * spelling blk back proves it. Primitive blocks only (no ties). */
static void check_bwt_inverse(const uint8_t *blk, size_t n)
{
    uint8_t *out = malloc(n);
    uint32_t *lf = malloc(n * sizeof *lf);
    int32_t orig = bz2_bwt(blk, (int32_t)n, out);
    ck_assert_int_ge(orig, 0);
    ck_assert_int_lt(orig, (int32_t)n);
    uint32_t next[256] = { 0 };
    for (size_t i = 0; i < n; i++)
        next[out[i]]++;
    for (uint32_t c = 0, sum = 0; c < 256; c++) {
        uint32_t v = next[c];
        next[c] = sum;
        sum += v;
    }
    for (size_t i = 0; i < n; i++)
        lf[i] = next[out[i]]++;
    size_t j = (size_t)orig, bad = 0, early = 0;
    for (size_t k = n; k-- > 0;) { /* row j is rotation k + 1: out[j] = blk[k] */
        bad += out[j] != blk[k];
        j = lf[j];
        early += k > 0 && j == (size_t)orig;
    }
    ck_assert_msg(!bad && !early && j == (size_t)orig, "BWT wrong (%zu bytes, %zu early)", bad, early);
    free(out);
    free(lf);
}

/* Random bytes with `copies` copies of `segs` random segments of length
 * seg_len pasted in: few long ties, or many identical short ones. */
static uint8_t *make_with_copies(size_t n, int segs, size_t seg_len, size_t copies)
{
    uint8_t *b = make_random(n), *seg = make_random((size_t)segs * seg_len);
    for (size_t c = 0; c < copies; c++)
        memcpy(b + rnd() % (n - seg_len), seg + (rnd() % (unsigned)segs) * seg_len, seg_len);
    free(seg);
    return b;
}

/* "a b^12 X b^5" with X random in {c, d}: 47k LMS substrings sharing their
 * first 10 bytes, in one 2-byte bucket far larger than a sort buffer. */
static uint8_t *make_long_substrings(size_t n)
{
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) {
        size_t k = i % 19;
        b[i] = k == 0 ? 'a' : k == 13 ? (uint8_t)('c' + (rnd() & 1)) : 'b';
    }
    return b;
}

START_TEST(test_bwt_tie_stage_paths)
{
    /* Ties in a few large groups (doubling settles them), one long repeat
     * (doubling stops paying off, SA-IS takes over), mostly ties (text:
     * SA-IS, several levels). Small enough for the naive reference. */
    uint8_t *b = make_with_copies(4000, 4, 24, 40);
    check_bwt(b, 4000);
    free(b);
    b = make_with_copies(4000, 1, 1500, 1);
    check_bwt(b, 4000);
    free(b);
    b = make_text(5000);
    check_bwt(b, 5000);
    free(b);
    for (int round = 0; round < 40; round++) { /* small alphabets, copies */
        size_t n = 200 + rnd() % 2000;
        b = make_with_copies(n, 1 + round % 3, 5 + rnd() % 40, rnd() % 30);
        for (size_t i = 0; i < n; i++)
            b[i] = round % 2 ? (uint8_t)('a' + b[i] % 3) : b[i];
        check_bwt(b, n);
        free(b);
    }
}
END_TEST

START_TEST(test_bwt_large_blocks)
{
    size_t n = 900000;
    uint8_t *b = make_random(n);
    for (size_t i = 0; i < n; i++) /* binary: one huge bucket */
        b[i] = (uint8_t)('a' + (b[i] & 1));
    check_bwt_inverse(b, n);
    free(b);
    b = make_long_substrings(n);
    check_bwt_inverse(b, n);
    free(b);
    b = make_random(n); /* half copied: long ties */
    memcpy(b + n / 2, b, n / 3);
    check_bwt_inverse(b, n);
    free(b);
    b = make_with_copies(n, 4, 24, 9000);
    check_bwt_inverse(b, n);
    free(b);
    b = make_text(n);
    check_bwt_inverse(b, n);
    free(b);
}
END_TEST

START_TEST(test_bwt_periodic_root)
{
    /* u^k is only recognised after the tie stage finds equal rotations;
     * origPtr must still name the last of rotation 0's equals. */
    size_t p = 1000, k = 900, n = p * k;
    uint8_t *s = malloc(n), *got = malloc(n), *root = malloc(p);
    for (int alpha = 2; alpha <= 256; alpha *= 16) {
        for (size_t i = 0; i < p; i++)
            s[i] = (uint8_t)(rnd() % (unsigned)alpha);
        check_bwt(s, p);
        for (size_t i = p; i < n; i++)
            s[i] = s[i - p];
        int32_t r = bz2_bwt(s, (int32_t)p, root);
        ck_assert_int_eq(bz2_bwt(s, (int32_t)n, got), r * (int32_t)k + (int32_t)k - 1);
        for (size_t i = 0; i < n; i++)
            ck_assert(got[i] == root[i / k]);
    }
    free(s);
    free(got);
    free(root);
}
END_TEST

START_TEST(test_bwt_sort_fallbacks)
{
    /* Budget 1: every comparison sort (substrings, records, doubling
     * pairs) hands over to its heapsort almost at once. */
    bwt_test_budget_cap = 1;
    for (int round = 0; round < 30; round++) {
        size_t n = 100 + rnd() % 3000;
        uint8_t *b = make_with_copies(n, 1 + round % 4, 3 + rnd() % 30, rnd() % 60);
        unsigned alpha = round % 3 == 0 ? 2 : round % 3 == 1 ? 5 : 256;
        for (size_t i = 0; i < n; i++)
            b[i] = (uint8_t)(b[i] % alpha);
        check_bwt(b, n);
        free(b);
    }
    size_t n = 900000;
    uint8_t *b = make_random(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)('a' + (b[i] & 1));
    check_bwt_inverse(b, n);
    free(b);
    b = make_with_copies(n, 4, 24, 9000);
    check_bwt_inverse(b, n);
    free(b);
    bwt_test_budget_cap = 0;
}
END_TEST

/* ---- Huffman ---- */

START_TEST(test_code_lengths_limited)
{
    uint32_t freq[BZ2_MAX_ALPHA];
    uint8_t len[BZ2_MAX_ALPHA];
    /* Fibonacci frequencies force depth > 17 without limiting. */
    uint32_t a = 1, b = 1;
    for (int i = 0; i < 40; i++) {
        freq[i] = a;
        uint32_t c = a + b;
        a = b;
        b = c < 100000000 ? c : b;
    }
    bz2_code_lengths(freq, 40, 17, len);
    double kraft = 0;
    for (int i = 0; i < 40; i++) {
        ck_assert_int_ge(len[i], 1);
        ck_assert_int_le(len[i], 17);
        kraft += 1.0 / (double)(1u << len[i]);
    }
    ck_assert(kraft <= 1.0 + 1e-12);
    for (int i = 0; i < 258; i++)
        freq[i] = 0;
    bz2_code_lengths(freq, 258, 17, len);
    for (int i = 0; i < 258; i++)
        ck_assert_int_le(len[i], 17);
}
END_TEST

/* libbz2's own construction (exported by libbz2.so): ours must give its
 * lengths for every frequency vector, ties and the 17-bit rescaling included. */
extern void BZ2_hbMakeCodeLengths(unsigned char *len, int32_t *freq, int32_t alpha, int32_t max_len);

START_TEST(test_code_lengths_as_libbz2)
{
    uint32_t freq[BZ2_MAX_ALPHA];
    int32_t ifreq[BZ2_MAX_ALPHA];
    uint8_t ours[BZ2_MAX_ALPHA], theirs[BZ2_MAX_ALPHA];
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 3000; round++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int alpha = 3 + (int)(x % (BZ2_MAX_ALPHA - 2));
        int shape = round % 4; /* flat small counts (many ties), skewed, zeros, Fibonacci-like (deep) */
        uint32_t a = 1, b = 1;
        for (int i = 0; i < alpha; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t f = shape == 0   ? (uint32_t)(x % 4)
                         : shape == 1 ? (uint32_t)(x % 50000) >> (x >> 60)
                         : shape == 2 ? (x % 3 ? 0 : (uint32_t)(x % 900))
                                      : a;
            uint32_t c = a + b;
            a = b, b = c < 400000 ? c : 1;
            freq[i] = f;
        }
        uint64_t total = 0; /* at most a block's symbols (libbz2's sums overflow past that) */
        for (int i = 0; i < alpha; i++)
            total += freq[i];
        for (int i = 0; i < alpha; i++)
            ifreq[i] = (int32_t)(freq[i] /= (uint32_t)(total / 900001 + 1));
        bz2_code_lengths(freq, alpha, 17, ours);
        BZ2_hbMakeCodeLengths(theirs, ifreq, alpha, 17);
        ck_assert_msg(memcmp(ours, theirs, (size_t)alpha) == 0, "round %d (alpha %d, shape %d)", round, alpha,
                      shape);
    }
}
END_TEST

START_TEST(test_rnums_table)
{
    extern int BZ2_rNums[512]; /* libbz2's copy of the format table */
    for (int i = 0; i < 512; i++)
        ck_assert_int_eq(bz2_rnums[i], BZ2_rNums[i]);
}
END_TEST

/* ---- round trips ---- */

START_TEST(test_empty_and_tiny)
{
    roundtrip((const uint8_t *)"", 0, 9);
    roundtrip((const uint8_t *)"x", 1, 9);
    roundtrip((const uint8_t *)"ab", 2, 1);
    /* Our empty stream is byte-identical to bzip2's (14 bytes). */
    size_t l;
    uint8_t *c = ours_compress(NULL, 0, 9, 1, &l);
    size_t ll;
    uint8_t *ref = libbz2_compress((const uint8_t *)"", 0, 9, &ll);
    ck_assert_uint_eq(l, ll);
    ck_assert(memcmp(c, ref, l) == 0);
    free(c);
    free(ref);
}
END_TEST

START_TEST(test_runs)
{
    static const size_t lens[] = { 1, 2, 3, 4, 5, 6, 254, 255, 256, 257, 258, 259, 260, 511, 1000, 100000 };
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t n = lens[k] + 20;
        uint8_t *b = malloc(n);
        memset(b, 'q', n);
        memcpy(b, "head", 4);
        memcpy(b + 4 + lens[k], "tail-of-the-run!", 16);
        roundtrip(b, n, 9);
        roundtrip(b + 4, lens[k], 9); /* run alone */
        free(b);
    }
    /* mixed runs of every length 1..300 */
    size_t n = 0, cap = 300 * 301 / 2 + 1;
    uint8_t *b = malloc(cap);
    for (size_t r = 1; r <= 300; r++) {
        memset(b + n, (int)(r & 0xff), r);
        n += r;
    }
    roundtrip(b, n, 1);
    free(b);
}
END_TEST

START_TEST(test_block_exactly_full)
{
    /* No runs: RLE1 output == input, so limit bytes fill one block. */
    size_t limit = bz2_block_limit(1);
    size_t n = limit + 1;
    uint8_t *b = malloc(n + 5);
    for (size_t i = 0; i < n + 5; i++)
        b[i] = (uint8_t)(i * 7 + i / 256);
    size_t *st;
    ck_assert_uint_eq(bz2_rle1_plan(b, limit, limit, 1, &st), 1);
    free(st);
    ck_assert_uint_eq(bz2_rle1_plan(b, n, limit, 1, &st), 2);
    ck_assert_uint_eq(st[1], limit);
    free(st);
    roundtrip(b, limit, 1);
    roundtrip(b, n, 1);
    /* A run of 3 whose first byte reaches the limit ends the block whole
     * (limit + 2 RLE1 bytes), as bzip2 adds runs to a block whole. */
    memset(b + limit - 1, 'q', 3);
    ck_assert_uint_eq(bz2_rle1_plan(b, n + 5, limit, 1, &st), 2);
    ck_assert_uint_eq(st[1], limit + 2);
    free(st);
    roundtrip(b, n + 5, 1);
    /* A run unit that straddles the limit stays whole in the block, which then
     * holds limit + 3 RLE1 bytes. */
    for (size_t i = limit - 1; i < limit + 2; i++)
        b[i] = (uint8_t)(i * 7 + i / 256);
    memset(b + limit - 2, 'r', 7);
    ck_assert_uint_eq(bz2_rle1_plan(b, n + 5, limit, 1, &st), 2);
    ck_assert_uint_eq(st[1], limit + 5);
    free(st);
    roundtrip(b, n + 5, 1);
    free(b);
}
END_TEST

START_TEST(test_blocks_ignore_segments)
{
    /* Blocks are bzip2's wherever the input lies: 40 MiB of one byte is 255-byte
     * run units of 5 RLE1 bytes, ceil(limit / 5) of them to a block, across
     * 32 MiB (docs/BZIP2.md, section 3). */
    size_t n = BZ2_SEGMENT_BYTES + (8u << 20);
    uint8_t *b = malloc(n);
    memset(b, 'z', n);
    size_t *st, per = (bz2_block_limit(9) + 4) / 5 * 255;
    ck_assert_uint_gt(per, n);
    ck_assert_uint_eq(bz2_rle1_plan(b, n, bz2_block_limit(9), 1, &st), 1);
    ck_assert_uint_eq(st[1], n);
    free(st);
    per = (bz2_block_limit(1) + 4) / 5 * 255;
    ck_assert_uint_eq(bz2_rle1_plan(b, n, bz2_block_limit(1), 1, &st), (n + per - 1) / per);
    ck_assert_uint_eq(st[1], per);
    ck_assert_uint_eq(st[7], 7 * per);
    free(st);
    roundtrip(b, n, 9);
    /* literals: every block holds exactly limit bytes, one across 32 MiB */
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 7 + i / 256);
    size_t limit = bz2_block_limit(1), nb = bz2_rle1_plan(b, n, limit, 1, &st);
    ck_assert_uint_eq(nb, (n + limit - 1) / limit);
    for (size_t k = 0; k < nb; k++)
        ck_assert_uint_eq(st[k], k * limit);
    free(st);
    free(b);
}
END_TEST

START_TEST(test_all_bytes_and_random)
{
    uint8_t all[256 * 3];
    for (int i = 0; i < 256 * 3; i++)
        all[i] = (uint8_t)(i % 256);
    roundtrip(all, sizeof all, 9);
    roundtrip_free(make_random(300000), 300000, 2);
    roundtrip_free(make_random(1000), 1000, 9);
}
END_TEST

START_TEST(test_text_multiblock_levels)
{
    size_t n = 450000;
    uint8_t *t = make_text(n);
    for (int level = 1; level <= 9; level += 4)
        roundtrip(t, n, level);
    /* ratio sanity vs libbz2 at the same level */
    size_t ol, rl;
    uint8_t *o = ours_compress(t, n, 9, 2, &ol);
    uint8_t *r = libbz2_compress(t, n, 9, &rl);
    ck_assert_msg(ol <= rl + rl / 100, "ratio: ours %zu vs libbz2 %zu", ol, rl);
    free(o);
    free(r);
    free(t);
}
END_TEST

START_TEST(test_periodic_fibonacci_streams)
{
    size_t n = 400000;
    uint8_t *f = malloc(n);
    size_t a = 1, b = 2;
    f[0] = 'a';
    f[1] = 'b';
    while (b < n) {
        size_t nb = b + a < n ? b + a : n;
        memcpy(f + b, f, nb - b);
        a = b;
        b = nb;
    }
    roundtrip(f, n, 1);
    for (size_t i = 0; i < n; i++)
        f[i] = "abc"[i % 3];
    roundtrip(f, n, 1); /* periodic RLE1 blocks (origPtr tie rule) */
    free(f);
}
END_TEST

/* ---- streams from other encoders ---- */

START_TEST(test_libbz2_every_level)
{
    size_t n = 250000;
    uint8_t *t = make_text(n);
    for (int level = 1; level <= 9; level++) {
        size_t cl;
        uint8_t *c = libbz2_compress(t, n, level, &cl);
        check_ours_decodes(c, cl, t, n, 1);
        check_ours_decodes(c, cl, t, n, 4);
        free(c);
    }
    free(t);
}
END_TEST

/* Run `cmd` (a shell command with %s = input file) and return its stdout. */
static uint8_t *run_tool(const char *tool, const char *args, const uint8_t *in, size_t n, size_t *out_len)
{
    char path[] = "/tmp/check_bzip2_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert(write(fd, in, n) == (ssize_t)n);
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    int have = system(cmd) == 0;
    if (!have) {
        unlink(path);
        ck_abort_msg("%s is not installed: it is needed to test streams from other encoders", tool);
    }
    snprintf(cmd, sizeof cmd, "%s %s < %s", tool, args, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len, p)) > 0) {
        len += r;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    ck_assert_int_eq(pclose(p), 0);
    unlink(path);
    *out_len = len;
    return buf;
}

START_TEST(test_pbzip2_lbzip2_streams)
{
    size_t n = 1200000;
    uint8_t *t = make_text(n);
    memset(t + 1000, 0, 300000); /* a long run too */
    static const char *const cmds[][2] = {
        { "pbzip2", "-c -1 -p2" }, { "pbzip2", "-c -9 -p2" }, { "lbzip2", "-c -1 -n2" },
        { "lbzip2", "-c -9 -n2" }, { "bzip2", "-c -1" },
    };
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        size_t cl;
        uint8_t *c = run_tool(cmds[k][0], cmds[k][1], t, n, &cl);
        check_ours_decodes(c, cl, t, n, 1);
        check_ours_decodes(c, cl, t, n, 4);
        free(c);
    }
    /* and the tools decode our output */
    size_t ol;
    uint8_t *o = ours_compress(t, n, 1, 2, &ol);
    static const char *const dec[] = { "pbzip2", "lbzip2", "bzip2" };
    for (size_t k = 0; k < 3; k++) {
        size_t dl;
        uint8_t *d = run_tool(dec[k], "-dc", o, ol, &dl);
        ck_assert_uint_eq(dl, n);
        ck_assert(memcmp(d, t, n) == 0);
        free(d);
    }
    free(o);
    free(t);
}
END_TEST

START_TEST(test_concatenated_streams)
{
    size_t n1 = 150000, n2 = 5;
    uint8_t *a = make_text(n1);
    size_t l1, l2, l3;
    uint8_t *c1 = ours_compress(a, n1, 1, 1, &l1);
    uint8_t *c2 = libbz2_compress((const uint8_t *)"tail!", n2, 3, &l2);
    uint8_t *c3 = ours_compress(NULL, 0, 5, 1, &l3);
    uint8_t *cat = malloc(l1 + l2 + l3 + l1);
    memcpy(cat, c1, l1);
    memcpy(cat + l1, c3, l3);
    memcpy(cat + l1 + l3, c2, l2);
    memcpy(cat + l1 + l3 + l2, c1, l1);
    size_t total = l1 + l2 + l3 + l1;
    uint8_t *want = malloc(n1 * 2 + n2);
    memcpy(want, a, n1);
    memcpy(want + n1, "tail!", n2);
    memcpy(want + n1 + n2, a, n1);
    check_ours_decodes(cat, total, want, 2 * n1 + n2, 1);
    check_ours_decodes(cat, total, want, 2 * n1 + n2, 4);
    /* trailing garbage is an error naming the stream */
    cat[total - 1] = cat[total - 1]; /* keep valid */
    uint8_t *g = malloc(total + 3);
    memcpy(g, cat, total);
    memcpy(g + total, "xyz", 3);
    uint8_t *out;
    size_t ol;
    gc_error err;
    ck_assert_int_eq(bz2_decompress(g, total + 3, 0, 2, &out, &ol, &err), GC_E_CORRUPT);
    ck_assert_msg(strstr(err.msg, "after stream 4") != NULL, "%s", err.msg);
    free(g);
    free(cat);
    free(want);
    free(a);
    free(c1);
    free(c2);
    free(c3);
}
END_TEST

START_TEST(test_randomised_block)
{
    /* libbz2 never writes randomised blocks; our encoder can (test hook),
     * and both libbz2 and our decoder must undo the randomisation. */
    size_t n = 250000;
    uint8_t *t = make_text(n);
    bz2_options o = { .level = 1, .threads = 2 };
    uint8_t *c;
    size_t cl;
    gc_error err;
    ck_assert_int_eq(bz2_compress_ex(t, n, &o, BZ2_ENC_RANDOMISE, &c, &cl, &err), GC_OK);
    uint8_t *back;
    size_t bl;
    ck_assert_int_eq(libbz2_decompress(c, cl, &back, &bl), BZ_OK);
    ck_assert_uint_eq(bl, n);
    ck_assert(memcmp(back, t, n) == 0);
    free(back);
    check_ours_decodes(c, cl, t, n, 1);
    check_ours_decodes(c, cl, t, n, 3);
    free(c);
    free(t);
}
END_TEST

/* ---- hostile input ---- */

START_TEST(test_bit_flips)
{
    size_t n = 3000;
    uint8_t *t = make_text(n);
    size_t cl;
    uint8_t *c = ours_compress(t, n, 9, 1, &cl);
    uint8_t *m = malloc(cl);
    int errors = 0;
    for (size_t bit = 0; bit < cl * 8; bit++) {
        memcpy(m, c, cl);
        m[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
        uint8_t *out = NULL;
        size_t ol;
        gc_error err;
        int rc = bz2_decompress(m, cl, 0, 1 + bit % 2, &out, &ol, &err);
        if (rc == GC_OK) {
            /* only padding bits of the last byte, or a level digit that
             * still allows the block size, may be flipped */
            ck_assert_msg(ol == n && memcmp(out, t, n) == 0, "bit %zu: wrong output accepted", bit);
            ck_assert(bit >= (cl - 1) * 8 || bit / 8 == 3);
        } else {
            errors++;
            ck_assert(rc == GC_E_CORRUPT || rc == GC_E_CRC || rc == GC_E_TRUNCATED);
            ck_assert(strncmp(err.msg, "bzip2: ", 7) == 0);
        }
        free(out);
    }
    ck_assert_int_gt(errors, (int)(cl * 8) - 8);
    free(m);
    free(c);
    free(t);
}
END_TEST

START_TEST(test_truncation)
{
    size_t n = 2000;
    uint8_t *t = make_text(n);
    size_t cl;
    uint8_t *c = ours_compress(t, n, 9, 1, &cl);
    for (size_t k = 0; k < cl; k++) {
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, c, k);
        uint8_t *out = NULL;
        size_t ol;
        gc_error err;
        int rc = bz2_decompress(cut, k, 0, 2, &out, &ol, &err);
        ck_assert_msg(rc != GC_OK, "prefix %zu accepted", k);
        ck_assert_msg(rc == GC_E_TRUNCATED || rc == GC_E_CORRUPT, "prefix %zu: rc %d", k, rc);
        free(cut);
    }
    free(c);
    free(t);
}
END_TEST

START_TEST(test_crc_message_and_limit)
{
    size_t n = 500000;
    uint8_t *t = make_text(n);
    size_t cl;
    uint8_t *c = ours_compress(t, n, 1, 2, &cl); /* 5+ blocks */
    uint8_t *out;
    size_t ol;
    gc_error err;
    ck_assert_int_eq(bz2_decompress(c, cl, n - 1, 2, &out, &ol, &err), GC_E_LIMIT);
    ck_assert_int_eq(bz2_decompress(c, cl, n, 2, &out, &ol, &err), GC_OK);
    free(out);
    ck_assert_int_eq(bz2_decompress(c, cl, 1000, 1, &out, &ol, &err), GC_E_LIMIT);
    /* corrupt the stored CRC of block 1 (right after the 4-byte header
     * and 6-byte magic) */
    c[10] ^= 0x40;
    ck_assert_int_eq(bz2_decompress(c, cl, 0, 2, &out, &ol, &err), GC_E_CRC);
    ck_assert_msg(strstr(err.msg, "stream 1 block 1: block CRC mismatch") != NULL, "%s", err.msg);
    c[10] ^= 0x40;
    /* the stream CRC: the last 4 bytes hold it (minus padding bits) */
    c[cl - 2] ^= 0x10;
    ck_assert_int_eq(bz2_decompress(c, cl, 0, 2, &out, &ol, &err), GC_E_CRC);
    ck_assert_msg(strstr(err.msg, "stream CRC mismatch") != NULL, "%s", err.msg);
    ck_assert_int_eq(bz2_decompress((const uint8_t *)"BZh9", 4, 0, 1, &out, &ol, &err), GC_E_TRUNCATED);
    ck_assert_int_eq(bz2_decompress((const uint8_t *)"PK\3\4abc", 7, 0, 1, &out, &ol, &err), GC_E_CORRUPT);
    ck_assert_int_eq(bz2_decompress(NULL, 0, 0, 1, &out, &ol, &err), GC_E_TRUNCATED);
    bz2_options bad = { .level = 10 };
    ck_assert_int_eq(bz2_compress(t, 10, &bad, &out, &ol, &err), GC_E_INVALID);
    free(c);
    free(t);
}
END_TEST

START_TEST(test_block_level_and_four_run_end)
{
    /* A level-1 header on a stream whose block is larger than 100k. */
    size_t n = 300000;
    uint8_t *t = make_text(n);
    size_t cl;
    uint8_t *c = ours_compress(t, n, 9, 1, &cl);
    c[3] = '1';
    uint8_t *out;
    size_t ol;
    gc_error err;
    ck_assert_int_eq(bz2_decompress(c, cl, 0, 1, &out, &ol, &err), GC_E_CORRUPT);
    ck_assert_msg(strstr(err.msg, "exceeds level 1") != NULL, "%s", err.msg);
    free(c);
    free(t);
}
END_TEST

/* The plain one-chain LF walk bz2_inverse_bwt must match byte for byte,
 * whatever the column (a valid BWT or a hostile one whose T vector splits
 * into several cycles). */
static void check_inverse_bwt(const uint8_t *col, uint32_t n, uint32_t orig, size_t cap)
{
    uint32_t counts[256] = { 0 }, cf[256], sum = 0;
    for (uint32_t i = 0; i < n; i++)
        counts[col[i]]++;
    for (int c = 0; c < 256; c++) {
        cf[c] = sum;
        sum += counts[c];
    }
    uint32_t *tt = malloc((size_t)n * sizeof *tt + 4);
    uint8_t *expect = malloc(n + 1), *ll = malloc(cap);
    for (uint32_t i = 0; i < n; i++)
        tt[cf[col[i]]++] = i << 8 | col[i];
    for (uint32_t k = 0, p = orig; k < n; k++) {
        expect[k] = (uint8_t)tt[p];
        p = tt[p] >> 8;
    }
    memcpy(ll, col, n);
    ck_assert_int_eq(bz2_inverse_bwt(ll, cap, n, orig, counts), 0);
    ck_assert_msg(memcmp(ll, expect, n) == 0, "inverse BWT differs (n=%u orig=%u)", n, orig);
    free(tt);
    free(expect);
    free(ll);
}

START_TEST(test_inverse_bwt_lanes)
{
    static const uint32_t sizes[] = { 1, 2, 1000, 65535, 65536, 70001, 300000, 899981, 900000 };
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        uint32_t n = sizes[s];
        size_t cap = (size_t)BZ2_MAX_BLOCK + BZ2_IBWT_SLACK;
        uint8_t *blk = s % 2 ? make_text(n) : make_random(n), *col = malloc(n);
        int32_t orig = bz2_bwt(blk, (int32_t)n, col);
        ck_assert_int_ge(orig, 0);
        check_inverse_bwt(col, n, (uint32_t)orig, cap); /* valid: lanes */
        check_inverse_bwt(col, n, (uint32_t)orig, n);   /* no scratch: one chain */
        check_inverse_bwt(blk, n, rnd() % n, cap);      /* hostile column */
        memset(col, 'a', n / 2);                        /* many short cycles */
        check_inverse_bwt(col, n, n - 1, cap);
        free(blk);
        free(col);
    }
}
END_TEST

/* MTF/RUNA-RUNB symbols against a byte-at-a-time reference. */
START_TEST(test_mtf_encode_reference)
{
    for (int round = 0; round < 6; round++) {
        size_t n = 20000 + rnd() % 20000;
        int alpha = round == 0 ? 256 : 1 + (int)(rnd() % 256);
        uint8_t *bwt = malloc(n), seq[256], list[256];
        for (int i = 0; i < 256; i++)
            seq[i] = (uint8_t)(i % alpha);
        for (size_t i = 0; i < n; i++) /* mix of runs and far jumps */
            bwt[i] = (uint8_t)(rnd() % 3 ? (i ? bwt[i - 1] : 0) : rnd() % alpha);
        uint16_t *sym = malloc((n + 1) * sizeof *sym), *ref = malloc((n + 1) * sizeof *ref);
        uint32_t freq[BZ2_MAX_ALPHA];
        size_t m = bz2_mtf_encode(bwt, n, seq, alpha, sym, freq), r = 0;
        for (int i = 0; i < alpha; i++)
            list[i] = (uint8_t)i;
        uint32_t zrun = 0;
        for (size_t i = 0; i <= n; i++) {
            int j = 0;
            if (i < n)
                while (list[j] != seq[bwt[i]])
                    j++;
            if (i < n && j == 0) {
                zrun++;
                continue;
            }
            while (zrun) { /* bijective base 2, least significant digit first */
                if (zrun & 1) {
                    ref[r++] = BZ2_RUNA;
                    zrun = (zrun - 1) / 2;
                } else {
                    ref[r++] = BZ2_RUNB;
                    zrun = (zrun - 2) / 2;
                }
            }
            if (i == n)
                break;
            memmove(list + 1, list, (size_t)j);
            list[0] = seq[bwt[i]];
            ref[r++] = (uint16_t)(j + 1);
        }
        ref[r++] = (uint16_t)(alpha + 1);
        ck_assert_uint_eq(m, r);
        ck_assert(memcmp(sym, ref, r * sizeof *ref) == 0);
        free(bwt);
        free(sym);
        free(ref);
    }
}
END_TEST

/* ---- input that changes while the codec runs ---- */

/*
 * The daemon runs the codec on a client's memfd mapped MAP_SHARED, which the
 * client can keep writing. A second thread flips bytes of the input (each put
 * back after a moment) while the codec runs; every call must return GC_OK or
 * an error (ASan, in CI, checks the accesses), and a stream compress returns
 * must be a valid bzip2 stream: every block is read once, so its CRC matches
 * what was encoded even if the input changed meanwhile.
 */
#define HOSTILE_SECONDS 0.5
#define HOSTILE_ITERS 200

typedef struct flipper {
    uint8_t *buf;
    const uint8_t *pristine;
    size_t len;
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
        size_t at = (x >> 8) % f->len;
        __atomic_store_n(&f->buf[at], (uint8_t)(f->pristine[at] ^ (uint8_t)((x >> 48) | 1)), __ATOMIC_RELAXED);
        for (unsigned spin = (unsigned)(x >> 32) % 256; spin; spin--)
            __asm__ __volatile__("" ::: "memory");
        __atomic_store_n(&f->buf[at], f->pristine[at], __ATOMIC_RELAXED);
    }
    return NULL;
}

static void flipper_run(flipper *f, uint8_t *buf, const uint8_t *pristine, size_t len)
{
    f->buf = buf;
    f->pristine = pristine;
    f->len = len;
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

/* Text with runs of 4..9 equal bytes (RLE1 units that the plan and the
 * block encoder must agree on). */
static uint8_t *make_runs_text(size_t n)
{
    uint8_t *b = make_text(n);
    for (size_t i = 0; i + 16 < n; i += 16 + rnd() % 48)
        memset(b + i, b[i], 4 + rnd() % 6);
    return b;
}

START_TEST(test_compress_input_changes)
{
    /* 4 blocks at level 1; at 8 threads, enough input that the plan counts tiles first */
    static const unsigned thread_counts[] = { 1, 2, 4, 8 };
    static const size_t sizes[] = { 350000, 350000, 350000, 3u << 20 };
    uint8_t *src = make_runs_text(sizes[3]);
    uint8_t *in = malloc(sizes[3]);
    memcpy(in, src, sizes[3]);
    for (size_t t = 0; t < 4; t++) {
        size_t n = sizes[t];
        flipper f;
        flipper_run(&f, in, src, n);
        double t0 = seconds_now();
        unsigned ok = 0;
        for (int it = 0; it < HOSTILE_ITERS && (it == 0 || seconds_now() - t0 < HOSTILE_SECONDS); it++) {
            bz2_options o = { .level = 1, .threads = thread_counts[t] };
            uint8_t *out = NULL, *back = NULL;
            size_t out_len = 0, back_len = 0;
            gc_error err;
            int rc = bz2_compress(in, n, &o, &out, &out_len, &err);
            ck_assert_msg(rc >= GC_OK && rc <= GC_E_DEVICE, "status %d", rc);
            if (rc != GC_OK)
                continue;
            ok++;
            /* whatever bytes it saw, the stream is valid and about n bytes long */
            rc = bz2_decompress(out, out_len, 0, 2, &back, &back_len, &err);
            ck_assert_msg(rc == GC_OK, "threads %u: stream from a changing input: %s", thread_counts[t], err.msg);
            ck_assert_uint_eq(back_len, n);
            free(back);
            free(out);
        }
        flipper_stop(&f);
        ck_assert_uint_gt(ok, 0);
    }
    free(in);
    free(src);
}
END_TEST

START_TEST(test_decompress_input_changes)
{
    static const unsigned thread_counts[] = { 1, 2, 4 };
    size_t n = 350000;
    uint8_t *src = make_runs_text(n);
    size_t clen;
    uint8_t *comp = ours_compress(src, n, 1, 2, &clen);
    uint8_t *in = malloc(clen);
    memcpy(in, comp, clen);
    for (size_t t = 0; t < 3; t++) {
        flipper f;
        flipper_run(&f, in, comp, clen);
        double t0 = seconds_now();
        for (int it = 0; it < HOSTILE_ITERS && seconds_now() - t0 < HOSTILE_SECONDS; it++) {
            uint8_t *out = NULL;
            size_t out_len = 0;
            gc_error err;
            int rc = bz2_decompress(in, clen, 4 * n, thread_counts[t], &out, &out_len, &err);
            ck_assert_msg(rc >= GC_OK && rc <= GC_E_DEVICE, "status %d", rc);
            if (rc == GC_OK)
                ck_assert_uint_le(out_len, 4 * n);
            free(out);
        }
        flipper_stop(&f);
        /* every flip was undone: the stream decodes again */
        uint8_t *out = NULL;
        size_t out_len = 0;
        gc_error err;
        ck_assert_int_eq(bz2_decompress(in, clen, 0, thread_counts[t], &out, &out_len, &err), GC_OK);
        ck_assert_uint_eq(out_len, n);
        ck_assert(memcmp(out, src, n) == 0);
        free(out);
    }
    free(in);
    free(comp);
    free(src);
}
END_TEST

/* A block whose input changed after the plan sized it is refused by the
 * block encoder, not written over the level's limit. */
START_TEST(test_block_over_plan_refused)
{
    size_t limit = bz2_block_limit(1), n = limit;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) /* 4 equal bytes then a different one: RLE1 grows it 6/5 */
        b[i] = (uint8_t)(i % 5 == 4 ? 1 : 0);
    bz2_bitwriter w;
    bz2_bw_init(&w, 1024);
    uint32_t crc;
    ck_assert_int_eq(bz2_encode_block(b, n, limit, 0, &w, &crc), GC_E_INVALID);
    bz2_bw_free(&w);
    free(b);
}
END_TEST

/* ---- stage boundaries (bz2_stages.h) ---- */

/* A block's column built here from the lower stages, as another backend's
 * BWT would hand it in: CRC, RLE1, (mask), BWT, byte counts. */
static void column_of(const uint8_t *src, size_t n, unsigned flags, bz2_column *c)
{
    uint8_t *rle = malloc(n + n / 4 + 1);
    size_t m = bz2_rle1_encode(src, n, rle);
    memset(c, 0, sizeof *c);
    c->randomised = (flags & BZ2_ENC_RANDOMISE) != 0;
    if (c->randomised) {
        bz2_rand rs;
        bz2_rand_init(&rs);
        for (size_t i = 0; i < m; i++)
            rle[i] ^= bz2_rand_next(&rs);
    }
    c->bwt = malloc(m);
    c->cap = m;
    c->n = (uint32_t)m;
    c->crc = bz2_crc(src, n);
    int32_t orig = bz2_bwt(rle, (int32_t)m, c->bwt);
    ck_assert_int_ge(orig, 0);
    c->orig = (uint32_t)orig;
    for (size_t i = 0; i < m; i++)
        c->counts[c->bwt[i]]++;
    free(rle);
}

/* One block through the emitter into *one (flushed); its bits must equal
 * bz2_encode_block's. Returns the block's length in bits. */
static uint64_t emit_and_compare(const uint8_t *src, size_t n, size_t limit, unsigned flags, const bz2_column *c,
                                 bz2_bitwriter *one)
{
    bz2_bitwriter ref;
    uint32_t crc = 0;
    bz2_bw_init(one, 1024);
    bz2_bw_init(&ref, 1024);
    ck_assert_int_eq(bz2_emit_block(c, one), GC_OK);
    ck_assert_int_eq(bz2_encode_block(src, n, limit, flags, &ref, &crc), GC_OK);
    ck_assert_uint_eq(crc, c->crc);
    uint64_t bits = bz2_bw_bits(one);
    ck_assert_uint_eq(bits, bz2_bw_bits(&ref));
    bz2_bw_flush(one);
    bz2_bw_flush(&ref);
    ck_assert_msg(memcmp(one->buf, ref.buf, one->len) == 0, "block bits differ");
    bz2_bw_free(&ref);
    return bits;
}

typedef struct staged {
    size_t nb;        /* blocks */
    bz2_column *cols; /* the encoder's columns */
    uint8_t *bz;      /* the stream spliced from the emitter's blocks */
    size_t bz_len;
} staged;

/* (a) encoder: columns -> bz2_emit_block -> stream, equal to bz2_compress_ex's. */
static void encode_by_stages(const uint8_t *src, size_t n, int level, unsigned flags, staged *s)
{
    size_t limit = bz2_block_limit(level), *starts = NULL;
    s->nb = bz2_rle1_plan(src, n, limit, 1, &starts);
    s->cols = calloc(s->nb + 1, sizeof *s->cols);
    bz2_bitwriter w;
    bz2_bw_init(&w, 1024);
    bz2_bw_put(&w, 24, 0x425a68);
    bz2_bw_put(&w, 8, (uint32_t)('0' + level));
    uint32_t combined = 0;
    for (size_t i = 0; i < s->nb; i++) {
        size_t len = starts[i + 1] - starts[i];
        bz2_bitwriter one;
        column_of(src + starts[i], len, flags, &s->cols[i]);
        uint64_t bits = emit_and_compare(src + starts[i], len, limit, flags, &s->cols[i], &one);
        bz2_bw_append(&w, one.buf, bits);
        bz2_bw_free(&one);
        combined = bz2_combine_crc(combined, s->cols[i].crc);
    }
    bz2_bw_put(&w, 24, (uint32_t)(BZ2_EOS_MAGIC >> 24));
    bz2_bw_put(&w, 24, (uint32_t)(BZ2_EOS_MAGIC & 0xffffff));
    bz2_bw_put(&w, 32, combined);
    bz2_bw_flush(&w);
    s->bz = w.buf;
    s->bz_len = w.len;
    free(starts);
    bz2_options o = { .level = level, .threads = 2 };
    uint8_t *whole;
    size_t whole_len;
    gc_error err;
    ck_assert_int_eq(bz2_compress_ex(src, n, &o, flags, &whole, &whole_len, &err), GC_OK);
    ck_assert_uint_eq(s->bz_len, whole_len);
    ck_assert_msg(memcmp(s->bz, whole, whole_len) == 0, "stream from the emitter differs");
    free(whole);
}

static void staged_free(staged *s)
{
    for (size_t i = 0; i < s->nb; i++)
        free(s->cols[i].bwt);
    free(s->cols);
    free(s->bz);
}

static void assert_same_result(const bz2_dblock *a, const bz2_dblock *b)
{
    ck_assert_int_eq(a->status, b->status);
    ck_assert_str_eq(a->msg, b->msg);
    ck_assert_uint_eq(a->out_len, b->out_len);
    ck_assert(a->out_len == 0 || memcmp(a->out, b->out, a->out_len) == 0);
    if (a->status == GC_OK || a->status == GC_E_CRC || a->status == GC_E_LIMIT) {
        ck_assert_uint_eq(a->end_bit, b->end_bit);
        ck_assert_uint_eq(a->stored_crc, b->stored_crc);
        ck_assert_uint_eq(a->nblock, b->nblock);
    }
}

static void same_column(const bz2_column *got, const bz2_column *want)
{
    ck_assert_uint_eq(got->n, want->n);
    ck_assert_uint_eq(got->orig, want->orig);
    ck_assert_uint_eq(got->crc, want->crc);
    ck_assert_int_eq(got->randomised, want->randomised);
    ck_assert(memcmp(got->bwt, want->bwt, want->n) == 0);
    ck_assert(memcmp(got->counts, want->counts, sizeof want->counts) == 0);
}

/* Stage 1 then stage 2 at bit pos, against bz2_decode_block; the column
 * stage 1 produced is left in *c (bwt: BZ2_COLUMN_CAP bytes, caller's). */
static void decode_by_stages(const uint8_t *bz, size_t len, uint64_t pos, size_t max_out, bz2_column *c,
                             bz2_dblock *whole)
{
    bz2_dblock r;
    bz2_decode_block(bz, len, pos, max_out, whole);
    if (bz2_decode_column(bz, len, pos, c, &r) == GC_OK) {
        ck_assert_int_eq(r.status, GC_OK);
        ck_assert_uint_eq(r.out_len, 0);
        uint8_t *col = malloc(c->n ? c->n : 1);
        memcpy(col, c->bwt, c->n);
        int rc = bz2_invert_column(c, max_out, &r);
        ck_assert_int_eq(rc, r.status);
        memcpy(c->bwt, col, c->n); /* the column again, for the caller */
        free(col);
    }
    assert_same_result(&r, whole);
    free(r.out);
}

static uint64_t bits_at(const uint8_t *b, size_t len, uint64_t pos, unsigned n)
{
    bz2_bitreader br;
    bz2_br_init(&br, b, len, pos);
    return n > 32 ? (uint64_t)bz2_br_get(&br, n - 32) << 32 | bz2_br_get(&br, 32) : bz2_br_get(&br, n);
}

static void set_bits(uint8_t *b, uint64_t pos, unsigned n, uint32_t v)
{
    for (unsigned k = 0; k < n; k++) {
        uint64_t bit = pos + k;
        uint8_t mask = (uint8_t)(0x80 >> (bit % 8));
        b[bit / 8] = (uint8_t)((v >> (n - 1 - k)) & 1 ? b[bit / 8] | mask : b[bit / 8] & ~mask);
    }
}

/* (b) decoder: every block of s->bz decoded stage by stage equals
 * bz2_decode_block, and stage 1's column is the encoder's. */
static void check_decode_stages(const staged *s)
{
    bz2_column c = { .bwt = malloc(BZ2_COLUMN_CAP), .cap = BZ2_COLUMN_CAP };
    uint64_t pos = 32;
    for (size_t i = 0; i < s->nb; i++) {
        ck_assert_uint_eq(bits_at(s->bz, s->bz_len, pos, 48), BZ2_BLOCK_MAGIC);
        bz2_dblock whole;
        decode_by_stages(s->bz, s->bz_len, pos, 0, &c, &whole);
        ck_assert_int_eq(whole.status, GC_OK);
        same_column(&c, &s->cols[i]);
        free(whole.out);
        pos = whole.end_bit;
    }
    ck_assert_uint_eq(bits_at(s->bz, s->bz_len, pos, 48), BZ2_EOS_MAGIC);
    free(c.bwt);
}

/* (c) errors: stage 1's column with a bad origPtr, or stage 1 on a cut
 * stream, give what bz2_decode_block gives for the same damage. */
static void check_stage_errors(const staged *s)
{
    if (s->nb == 0)
        return;
    bz2_column c = { .bwt = malloc(BZ2_COLUMN_CAP), .cap = BZ2_COLUMN_CAP };
    uint8_t *bad = malloc(s->bz_len);
    const uint32_t n = s->cols[0].n, origs[] = { n, n + 1, 0xffffff };
    for (size_t k = 0; k < 3; k++) {
        memcpy(bad, s->bz, s->bz_len);
        set_bits(bad, 32 + 48 + 32 + 1, 24, origs[k]); /* block 1's origPtr field */
        bz2_dblock whole, r;
        decode_by_stages(bad, s->bz_len, 32, 0, &c, &whole);
        char want[sizeof whole.msg];
        snprintf(want, sizeof want, "origPtr %u out of range (block length %u)", origs[k], n);
        ck_assert_int_eq(whole.status, GC_E_CORRUPT);
        ck_assert_str_eq(whole.msg, want);
        ck_assert_int_eq(bz2_decode_column(s->bz, s->bz_len, 32, &c, &r), GC_OK);
        c.orig = origs[k]; /* the good stream's column, pointer corrupted after stage 1 */
        ck_assert_int_eq(bz2_invert_column(&c, 0, &r), GC_E_CORRUPT);
        assert_same_result(&r, &whole);
        free(whole.out);
    }
    /* cuts inside block 1 (about 40 spread over the stream, and each of its
     * last 16 bytes): truncated until the cut passes the block's end */
    bz2_dblock whole;
    bz2_decode_block(s->bz, s->bz_len, 32, 0, &whole);
    uint64_t end_bit = whole.end_bit;
    free(whole.out);
    size_t step = s->bz_len / 40 > 13 ? s->bz_len / 40 : 13;
    for (size_t cut = 0; cut <= s->bz_len; cut += (cut + 16 >= s->bz_len ? 1 : step)) {
        decode_by_stages(s->bz, cut, 32, 0, &c, &whole);
        ck_assert_int_eq(whole.status, (uint64_t)cut * 8 < end_bit ? GC_E_TRUNCATED : GC_OK);
        free(whole.out);
    }
    /* a limit the block's output exceeds, and a wrong stored CRC */
    decode_by_stages(s->bz, s->bz_len, 32, 1, &c, &whole);
    free(whole.out);
    memcpy(bad, s->bz, s->bz_len);
    bad[10] ^= 0x08;
    decode_by_stages(bad, s->bz_len, 32, 0, &c, &whole);
    ck_assert_int_eq(whole.status, GC_E_CRC);
    free(whole.out);
    free(bad);
    free(c.bwt);
}

static void check_stages(const uint8_t *src, size_t n, int level, unsigned flags)
{
    staged s;
    encode_by_stages(src, n, level, flags, &s);
    check_decode_stages(&s);
    check_stage_errors(&s);
    staged_free(&s);
}

START_TEST(test_stages_small_inputs)
{
    check_stages((const uint8_t *)"", 0, 9, 0);
    check_stages((const uint8_t *)"x", 1, 9, 0);
    check_stages((const uint8_t *)"aaaa", 4, 9, 0);
    uint8_t all[256 * 3];
    for (int i = 0; i < 256 * 3; i++)
        all[i] = (uint8_t)(i % 256);
    check_stages(all, sizeof all, 1, 0);
}
END_TEST

START_TEST(test_stages_text_runs_random)
{
    size_t n = 300000;
    uint8_t *t = make_text(n);
    check_stages(t, n, 1, 0); /* 3 blocks */
    check_stages(t, 150000, 1, BZ2_ENC_RANDOMISE);
    free(t);
    size_t m = 0, cap = 300 * 301 / 2 + 120000;
    uint8_t *b = malloc(cap);
    for (size_t r = 1; r <= 300; r++) { /* runs of every length 1..300 */
        memset(b + m, (int)(r & 0xff), r);
        m += r;
    }
    memset(b + m, 'q', 100000); /* and a long one */
    m += 100000;
    check_stages(b, m, 9, 0);
    free(b);
    uint8_t *rnd_data = make_random(200000);
    check_stages(rnd_data, 200000, 2, 0);
    free(rnd_data);
}
END_TEST

START_TEST(test_stages_full_block)
{
    /* Level 9: the first block is full (899981 RLE1 bytes, the limit). */
    size_t n = 1000000;
    uint8_t *t = make_text(n);
    staged s;
    encode_by_stages(t, n, 9, 0, &s);
    ck_assert_uint_eq(s.nb, 2);
    ck_assert_uint_ge(s.cols[0].n, bz2_block_limit(9) - 4);
    ck_assert_uint_le(s.cols[0].n, bz2_block_limit(9));
    check_decode_stages(&s);
    check_stage_errors(&s);
    staged_free(&s);
    free(t);
}
END_TEST

START_TEST(test_stages_foreign_stream)
{
    /* libbz2's blocks, decoded stage by stage, give the input back. */
    size_t n = 1200000;
    uint8_t *t = make_text(n);
    memset(t + 5000, 0, 200000);
    size_t cl;
    uint8_t *bz = libbz2_compress(t, n, 9, &cl);
    bz2_column c = { .bwt = malloc(BZ2_COLUMN_CAP), .cap = BZ2_COLUMN_CAP };
    uint64_t pos = 32;
    size_t done = 0, blocks = 0;
    while (bits_at(bz, cl, pos, 48) == BZ2_BLOCK_MAGIC) {
        bz2_dblock whole;
        decode_by_stages(bz, cl, pos, 0, &c, &whole);
        ck_assert_int_eq(whole.status, GC_OK);
        ck_assert_uint_le(done + whole.out_len, n);
        ck_assert(memcmp(whole.out, t + done, whole.out_len) == 0);
        done += whole.out_len;
        pos = whole.end_bit;
        blocks++;
        free(whole.out);
    }
    ck_assert_uint_eq(done, n);
    ck_assert_uint_ge(blocks, 2);
    free(c.bwt);
    free(bz);
    free(t);
}
END_TEST

/* A stream of one block emitted from column c (level 9, any CRC). */
static uint8_t *stream_of_column(const bz2_column *c, size_t *len)
{
    bz2_bitwriter w;
    bz2_bw_init(&w, 1024);
    bz2_bw_put(&w, 32, 0x425a6839); /* "BZh9" */
    ck_assert_int_eq(bz2_emit_block(c, &w), GC_OK);
    bz2_bw_put(&w, 24, (uint32_t)(BZ2_EOS_MAGIC >> 24));
    bz2_bw_put(&w, 24, (uint32_t)(BZ2_EOS_MAGIC & 0xffffff));
    bz2_bw_put(&w, 32, c->crc);
    bz2_bw_flush(&w);
    *len = w.len;
    return w.buf;
}

START_TEST(test_stage_contracts)
{
    uint8_t blk[] = "bcaaaa"; /* RLE1 bytes ending in 4 equal ones: no count byte */
    bz2_column c = { .bwt = malloc(BZ2_COLUMN_CAP), .cap = BZ2_COLUMN_CAP, .n = 6, .crc = 0x1234 };
    c.orig = (uint32_t)bz2_bwt(blk, 6, c.bwt);
    for (int i = 0; i < 6; i++)
        c.counts[c.bwt[i]]++;
    /* the emitter refuses what no block can hold, writing nothing */
    bz2_bitwriter w;
    bz2_bw_init(&w, 64);
    bz2_column bad = c;
    bad.orig = 6;
    ck_assert_int_eq(bz2_emit_block(&bad, &w), GC_E_INVALID);
    bad.orig = 0;
    bad.n = 0;
    ck_assert_int_eq(bz2_emit_block(&bad, &w), GC_E_INVALID);
    bad.n = BZ2_MAX_BLOCK + 1;
    ck_assert_int_eq(bz2_emit_block(&bad, &w), GC_E_INVALID);
    ck_assert_uint_eq(bz2_bw_bits(&w), 0);
    bz2_bw_free(&w);
    /* stage 2 refuses a column that does not fit its buffer or whose
     * counts do not add up (nothing a valid stream produces) */
    bz2_dblock r;
    bad = c;
    bad.cap = 5;
    ck_assert_int_eq(bz2_invert_column(&bad, 0, &r), GC_E_INVALID);
    ck_assert_ptr_null(r.out);
    bad = c;
    bad.counts['a']--;
    ck_assert_int_eq(bz2_invert_column(&bad, 0, &r), GC_E_INVALID);
    ck_assert_str_eq(r.msg, "byte counts add up to 5, not the block length 6");
    /* stage 1 needs room for the largest block */
    bad = c;
    bad.cap = BZ2_MAX_BLOCK - 1;
    size_t len;
    uint8_t *bz = stream_of_column(&c, &len);
    ck_assert_int_eq(bz2_decode_column(bz, len, 32, &bad, &r), GC_E_INVALID);
    /* the missing count byte: the same error through both paths */
    bz2_dblock whole;
    decode_by_stages(bz, len, 32, 0, &c, &whole);
    ck_assert_int_eq(whole.status, GC_E_CORRUPT);
    ck_assert_str_eq(whole.msg, "block ends inside a run (count byte missing)");
    ck_assert_int_eq(bz2_invert_column(&c, 0, &r), GC_E_CORRUPT);
    ck_assert_str_eq(r.msg, whole.msg);
    free(bz);
    free(c.bwt);
}
END_TEST

/* ---- streaming: splicing parts and partial decoding ---- */

START_TEST(test_eos_magic_aperiodic)
{
    /* bz2_stream_body finds the end marker from the end trying 0..7 padding
     * bits; two matches at offsets d apart (d = 1..7) would need the 48-bit
     * magic to equal itself shifted by d on their 48-d overlapping bits. */
    for (unsigned d = 1; d <= 7; d++) {
        uint64_t m = BZ2_EOS_MAGIC;
        ck_assert_msg((m >> d) != (m & ((1ull << (48 - d)) - 1)), "eos magic has period %u", d);
    }
    /* the check does see a periodic value */
    uint64_t p = 0xaaaaaaaaaaaaull;
    ck_assert((p >> 2) == (p & ((1ull << 46) - 1)));
    /* and, directly: the magic followed by any CRC and padding never shows
     * the magic at a second padding offset */
    uint8_t b[11];
    for (unsigned pad = 0; pad < 8; pad++) {
        for (int trial = 0; trial < 64; trial++) {
            memset(b, 0, sizeof b);
            uint64_t start = 8 - pad; /* 88 bits: magic at start, CRC, pad zero bits */
            set_bits(b, start, 24, (uint32_t)(BZ2_EOS_MAGIC >> 24));
            set_bits(b, start + 24, 24, (uint32_t)(BZ2_EOS_MAGIC & 0xffffff));
            set_bits(b, start + 48, 32, rnd());
            int hits = 0;
            for (unsigned q = 0; q < 8; q++)
                hits += bits_at(b, 11, 88 - q - 80, 48) == BZ2_EOS_MAGIC;
            ck_assert_int_eq(hits, 1);
        }
    }
}
END_TEST

/* bz2_format.h's framing writers, which the CPU engine and both GPU framing
 * paths share: the header's bytes, and the trailer at every bit offset a
 * stream's blocks can end on, ORed in without touching the bits around it. */
START_TEST(test_format_framing)
{
    uint8_t h[BZ2_STREAM_HEADER_BITS / 8];
    for (int level = 1; level <= 9; level++) {
        bz2_stream_header(h, level);
        ck_assert(h[0] == 'B' && h[1] == 'Z' && h[2] == 'h' && h[3] == '0' + level);
    }
    for (unsigned pos = 0; pos < 16; pos++) {
        uint8_t b[16];
        memset(b, 0, sizeof b);
        uint32_t crc = rnd();
        if (pos)
            set_bits(b, 0, pos, 0xffffffffu >> (32 - pos)); /* bits of the last block */
        bz2_stream_trailer(b, pos, crc);
        ck_assert_uint_eq(bits_at(b, sizeof b, 0, pos ? pos : 1), pos ? 0xffffffffu >> (32 - pos) : 0);
        ck_assert_uint_eq(bits_at(b, sizeof b, pos, 48), BZ2_EOS_MAGIC);
        ck_assert_uint_eq(bits_at(b, sizeof b, pos + 48, 32), crc);
        uint64_t end = pos + BZ2_STREAM_TRAILER_BITS;
        ck_assert_uint_eq(bits_at(b, sizeof b, end, (unsigned)(sizeof b * 8 - end)), 0);
    }
    ck_assert_uint_eq(bz2_combine_parts(0, 1, 7), bz2_combine_crc(0, 7));
    ck_assert_uint_eq(bz2_combine_parts(0x80000001u, 1, 0), bz2_combine_crc(0x80000001u, 0));
}
END_TEST

/* Reference: append bits [0, nbits) of src to dst at bit *dbits, one by one. */
static void ref_append(uint8_t *dst, uint64_t *dbits, const uint8_t *src, uint64_t nbits)
{
    for (uint64_t i = 0; i < nbits; i++, (*dbits)++) {
        unsigned bit = (src[i / 8] >> (7 - i % 8)) & 1;
        uint8_t mask = (uint8_t)(0x80 >> (*dbits % 8));
        dst[*dbits / 8] = (uint8_t)(bit ? dst[*dbits / 8] | mask : dst[*dbits / 8] & ~mask);
    }
}

START_TEST(test_splice_every_shift)
{
    /* Random bit strings of many lengths spliced one after the other, from
     * every starting shift 0..7: bytes, pending bits and counters equal a
     * bit-by-bit reference; bits past nbits in src never leak. */
    enum { CAP = 4096 };
    uint8_t *src = malloc(CAP), *ref = calloc(1, 4 * CAP), *got = calloc(1, 4 * CAP + 16);
    static const uint64_t lens[] = { 0,  1,  2,  3,  5,   7,   8,   9,   15,   16,   17,          31,         63,
                                     64, 65, 71, 72, 127, 128, 129, 255, 1000, 4093, 8 * 777 + 3, 8 * CAP - 1 };
    for (unsigned shift = 0; shift < 8; shift++) {
        for (int round = 0; round < 6; round++) {
            memset(ref, 0, 4 * CAP);
            memset(got, 0xee, 4 * CAP + 16);
            uint64_t rbits = 0;
            size_t glen = 0;
            bz2_splicer sp = { 0 };
            /* the first piece sets the shift */
            for (size_t i = 0; i < CAP; i++)
                src[i] = (uint8_t)rnd();
            glen += bz2_splice(&sp, src, shift, got + glen);
            ref_append(ref, &rbits, src, shift);
            for (int k = 0; k < 4; k++) {
                uint64_t n = lens[rnd() % (sizeof lens / sizeof lens[0])];
                if (rbits + n > 8ull * 4 * CAP - 64)
                    break;
                for (size_t i = 0; i < CAP; i++)
                    src[i] = (uint8_t)rnd(); /* including bits past n: must be ignored */
                size_t w = bz2_splice(&sp, src, n, got + glen);
                ck_assert_uint_le(w, n / 8 + 1);
                glen += w;
                ref_append(ref, &rbits, src, n);
                ck_assert_uint_eq(sp.bits, rbits);
                ck_assert_uint_eq(glen, rbits / 8);
                ck_assert_uint_eq(sp.nacc, rbits % 8);
                ck_assert_msg(memcmp(got, ref, glen) == 0, "shift %u: bytes differ", shift);
                uint8_t want_acc = sp.nacc ? (uint8_t)(ref[glen] & (0xff00u >> sp.nacc)) : 0;
                ck_assert_uint_eq(sp.acc, want_acc);
            }
            /* finish: magic, CRC, zero padding */
            uint32_t crc = rnd();
            uint8_t tail[10];
            for (int k = 0; k < 6; k++)
                tail[k] = (uint8_t)(BZ2_EOS_MAGIC >> (40 - 8 * k));
            for (int k = 0; k < 4; k++)
                tail[6 + k] = (uint8_t)(crc >> (24 - 8 * k));
            ref_append(ref, &rbits, tail, 80);
            size_t w = bz2_splice_finish(&sp, crc, got + glen);
            ck_assert_uint_eq(w, (rbits + 7) / 8 - glen);
            glen += w;
            ck_assert_uint_eq(sp.nacc, 0);
            ck_assert_uint_eq(sp.bits % 8, 0);
            ck_assert(memcmp(got, ref, glen) == 0);
        }
    }
    free(src);
    free(ref);
    free(got);
}
END_TEST

START_TEST(test_splice_in_place_and_skip)
{
    /* A stream part is spliced inside its own buffer, its output starting
     * 0..4 bytes before its body (over its header), while whoever keeps
     * the order learns the state after it with bz2_splice_skip: both equal
     * an ordinary splice into another buffer, for every starting shift. */
    enum { CAP = 4096 };
    static const uint64_t lens[] = { 0, 1, 5, 7, 8, 9, 63, 64, 65, 129, 1000, 8 * 777 + 3, 8 * (CAP - 8) - 1 };
    uint8_t *src = malloc(CAP), *want = malloc(CAP + 8), *buf = malloc(CAP + 8);
    for (unsigned shift = 0; shift < 8; shift++)
        for (unsigned gap = 0; gap <= 4; gap++)
            for (unsigned k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                for (size_t i = 0; i < CAP; i++)
                    src[i] = (uint8_t)rnd();
                bz2_splicer start = { 0 };
                uint8_t lead = (uint8_t)rnd();
                bz2_splice(&start, &lead, shift, want); /* shift pending bits */
                bz2_splicer a = start, b = start, c = start;
                size_t n = bz2_splice(&a, src, lens[k], want);
                memcpy(buf + 4, src, CAP);
                size_t m = bz2_splice(&b, buf + 4, lens[k], buf + 4 - gap);
                ck_assert_uint_eq(m, n);
                ck_assert_msg(memcmp(buf + 4 - gap, want, n) == 0, "in place: shift %u gap %u len %llu", shift,
                              gap, (unsigned long long)lens[k]);
                bz2_splice_skip(&c, src, lens[k]);
                ck_assert_msg(b.acc == a.acc && c.acc == a.acc, "state: shift %u gap %u len %llu: %x %x %x", shift,
                              gap, (unsigned long long)lens[k], a.acc, b.acc, c.acc);
                ck_assert_uint_eq(c.nacc, a.nacc);
                ck_assert_uint_eq(c.bits, a.bits);
            }
    free(src);
    free(want);
    free(buf);
}
END_TEST

static uint8_t *counted_compress(const uint8_t *src, size_t n, int level, unsigned threads, size_t *len,
                                 uint32_t *blocks)
{
    bz2_options o = { .level = level, .threads = threads };
    uint8_t *out = NULL;
    gc_error err;
    ck_assert_int_eq(bz2_compress_counted(src, n, &o, &out, len, blocks, &err), GC_OK);
    return out;
}

/* One stream from the streams of consecutive parts: header, the parts'
 * bodies spliced, end marker with the folded combined CRC. */
static uint8_t *splice_parts(uint8_t *const *parts, const size_t *lens, const uint32_t *blocks, int nparts,
                             int level, size_t *out_len)
{
    size_t cap = 16;
    for (int i = 0; i < nparts; i++)
        cap += lens[i] + 1;
    uint8_t *out = malloc(cap);
    bz2_splicer sp = { 0 };
    size_t o = bz2_splice_header(&sp, level, out);
    ck_assert_uint_eq(o, 4);
    uint32_t combined = 0;
    for (int i = 0; i < nparts; i++) {
        uint64_t body;
        uint32_t c;
        gc_error err;
        ck_assert_int_eq(bz2_stream_body(parts[i], lens[i], &body, &c, &err), GC_OK);
        ck_assert_uint_eq(parts[i][3], '0' + level);
        /* the body starts right after the 32-bit header: byte 4 */
        o += bz2_splice(&sp, parts[i] + 4, body, out + o);
        combined = bz2_combine_parts(combined, blocks[i], c);
    }
    o += bz2_splice_finish(&sp, combined, out + o);
    ck_assert_uint_le(o, cap);
    *out_len = o;
    return out;
}

START_TEST(test_stream_body)
{
    gc_error err;
    uint64_t body;
    uint32_t c;
    for (int level = 1; level <= 9; level += 4) {
        size_t sizes[] = { 0, 1, 77, 3000, 250000 };
        for (int k = 0; k < 5; k++) {
            uint8_t *t = make_text(sizes[k]);
            size_t len;
            uint32_t blocks = 99;
            uint8_t *z = counted_compress(t, sizes[k], level, 2, &len, &blocks);
            ck_assert_uint_eq(blocks,
                              sizes[k] ? (sizes[k] + bz2_block_limit(level) - 1) / bz2_block_limit(level) : 0);
            ck_assert_int_eq(bz2_stream_body(z, len, &body, &c, &err), GC_OK);
            ck_assert_uint_eq(body == 0, blocks == 0);
            ck_assert_uint_le(len * 8 - (32 + body + 80), 7);
            ck_assert_uint_eq(c, (uint32_t)bits_at(z, len, 32 + body + 48, 32));
            /* the same stream re-spliced from its own body */
            uint8_t *parts[1] = { z };
            size_t ls[1] = { len }, rl;
            uint8_t *re = splice_parts(parts, ls, &blocks, 1, level, &rl);
            ck_assert_uint_eq(rl, len);
            ck_assert(memcmp(re, z, len) == 0);
            /* not a stream of ours: bad level, cut end, garbage after it */
            uint8_t *m = malloc(len + 1);
            memcpy(m, z, len);
            m[3] = '0';
            ck_assert_int_eq(bz2_stream_body(m, len, &body, &c, &err), GC_E_CORRUPT);
            m[3] = z[3];
            ck_assert_int_eq(bz2_stream_body(m, len - 1, &body, &c, &err), GC_E_CORRUPT);
            m[len] = 0x5a;
            ck_assert_int_eq(bz2_stream_body(m, len + 1, &body, &c, &err), GC_E_CORRUPT);
            if ((32 + body + 80) % 8) { /* a set padding bit */
                m[len - 1] |= 1;
                ck_assert_int_eq(bz2_stream_body(m, len, &body, &c, &err), GC_E_CORRUPT);
            }
            free(m);
            free(re);
            free(z);
            free(t);
        }
    }
    ck_assert_int_eq(bz2_stream_body((const uint8_t *)"BZh9", 4, &body, &c, &err), GC_E_CORRUPT);
    ck_assert_int_eq(bz2_stream_body(NULL, 0, &body, &c, &err), GC_E_INVALID);
    ck_assert_uint_eq(bz2_combine_parts(0x80000001u, 33, 0), 0x00000003u);
    ck_assert_uint_eq(bz2_combine_parts(0x12345678u, 32, 1), 0x12345679u);
}
END_TEST

START_TEST(test_splice_small_parts)
{
    /* Parts smaller than a segment: the spliced stream is not what one
     * bz2_compress would write, but it must equal the bit-by-bit reference
     * concatenation and decode (stream CRC included: the fold) to the whole. */
    for (int trial = 0; trial < 12; trial++) {
        int level = trial % 2 ? 9 : 1, np = 2 + trial % 4;
        uint8_t *parts[6] = { 0 }, *src[6] = { 0 };
        size_t lens[6] = { 0 }, n[6] = { 0 }, total = 0;
        uint32_t blocks[6] = { 0 };
        for (int i = 0; i < np; i++) {
            n[i] = (i + trial) % 3 == 0 ? rnd() % 300000 : rnd() % 2000;
            if (trial == 3 && i == 1)
                n[i] = 0; /* an empty part: no blocks */
            src[i] = make_text(n[i]);
            parts[i] = counted_compress(src[i], n[i], level, 0, &lens[i], &blocks[i]);
            total += n[i];
        }
        size_t sl;
        uint8_t *s = splice_parts(parts, lens, blocks, np, level, &sl);
        /* reference */
        uint8_t *ref = calloc(1, sl + 16);
        uint64_t rb = 0;
        uint32_t combined = 0;
        ref_append(ref, &rb, parts[0], 32);
        for (int i = 0; i < np; i++) {
            uint64_t body;
            uint32_t c;
            gc_error err;
            ck_assert_int_eq(bz2_stream_body(parts[i], lens[i], &body, &c, &err), GC_OK);
            uint8_t *b = calloc(1, lens[i]);
            uint64_t bb = 0;
            for (uint64_t k = 0; k < body; k++) { /* bits 32.. of the part */
                unsigned bit = (parts[i][(32 + k) / 8] >> (7 - (32 + k) % 8)) & 1;
                b[bb / 8] |= (uint8_t)(bit << (7 - bb % 8));
                bb++;
            }
            ref_append(ref, &rb, b, body);
            free(b);
            for (uint32_t k = 0; k < blocks[i]; k++)
                combined = (combined << 1) | (combined >> 31);
            combined ^= c;
        }
        uint8_t t[10];
        for (int k = 0; k < 6; k++)
            t[k] = (uint8_t)(BZ2_EOS_MAGIC >> (40 - 8 * k));
        for (int k = 0; k < 4; k++)
            t[6 + k] = (uint8_t)(combined >> (24 - 8 * k));
        ref_append(ref, &rb, t, 80);
        ck_assert_uint_eq(sl, (rb + 7) / 8);
        ck_assert(memcmp(s, ref, sl) == 0);
        uint8_t *want = malloc(total + 1);
        size_t at = 0;
        for (int i = 0; i < np; i++) {
            memcpy(want + at, src[i], n[i]);
            at += n[i];
        }
        check_ours_decodes(s, sl, want, total, 2);
        uint8_t *lb;
        size_t ll;
        ck_assert_int_eq(libbz2_decompress(s, sl, &lb, &ll), BZ_OK);
        ck_assert_uint_eq(ll, total);
        ck_assert(total == 0 || memcmp(lb, want, total) == 0);
        free(lb);
        free(want);
        free(ref);
        free(s);
        for (int i = 0; i < np; i++) {
            free(parts[i]);
            free(src[i]);
        }
    }
}
END_TEST

/* Runs of 1..600 equal bytes (255, 256, 259 among them) of a few values. */
static uint8_t *make_runs(size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n;) {
        size_t r = rnd() % 4 == 0 ? 255 + rnd() % 5 : 1 + rnd() % 600;
        uint8_t v = (uint8_t)(rnd() % 3);
        for (; r-- && i < n; i++)
            b[i] = v;
    }
    return b;
}

/* A cut found as input arrives in steps of 1 byte to 64 KiB (bz2_rle1_walk_to)
 * is the first block start from min of the whole input's plan, whatever the
 * steps; nothing is claimed before it. */
static void check_walk_arriving(const uint8_t *src, size_t n, int level)
{
    size_t limit = bz2_block_limit(level), *st;
    size_t nb = bz2_rle1_plan(src, n, limit, 1, &st);
    const size_t mins[] = { 1, n / 3, n / 2, n };
    for (size_t m = 0; m < sizeof mins / sizeof *mins; m++) {
        size_t want = 0;
        for (size_t k = 0; k < nb && !want; k++)
            want = st[k] >= mins[m] ? st[k] : 0;
        bz2_rle1_walk w = { 0, 0, 0 };
        size_t got = 0, arrived = 0;
        while (!got && arrived < n) {
            size_t step = (size_t)1 << (rnd() % 17);
            arrived += step < n - arrived ? step : n - arrived;
            got = bz2_rle1_walk_to(src, arrived, arrived == n, &w, mins[m], limit);
        }
        ck_assert_msg(got == want, "n %zu level %d min %zu: cut %zu, the plan's %zu", n, level, mins[m], got,
                      want);
    }
    free(st);
}

/* check over text, runs, random bytes and one value (a level 1 block covers ~5 MB of it, a level
 * 9 block ~46 MB, more than the input), at levels 1, 5 and 9. */
static void over_walk_corpora(void (*check)(const uint8_t *src, size_t n, int level))
{
    const size_t sizes[] = { 3u << 20, 4u << 20, 2u << 20, 12u << 20 };
    uint8_t *c = malloc(sizes[3]);
    ck_assert_ptr_nonnull(c);
    memset(c, 'x', sizes[3]);
    uint8_t *data[] = { make_text(sizes[0]), make_runs(sizes[1]), make_random(sizes[2]), c };
    for (int level = 1; level <= 9; level += 4)
        for (size_t d = 0; d < 4; d++)
            check(data[d], sizes[d], level);
    for (size_t d = 0; d < 4; d++)
        free(data[d]);
}

START_TEST(test_rle1_walk_arriving)
{
    over_walk_corpora(check_walk_arriving);
}
END_TEST

/* Bytes in runs of 1..24 (4, 5, 16, 19, 20, 21 and 255-259 among them), few values: every case of
 * the 16-byte unit count (bz2_rle1.c units16) at every offset. */
static uint8_t *make_short_runs(size_t n)
{
    static const size_t lens[] = { 1, 2, 3, 4, 5, 6, 15, 16, 17, 19, 20, 21, 24, 255, 256, 259 };
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n;) {
        size_t r = rnd() % 8 ? 1 + rnd() % 24 : lens[rnd() % (sizeof lens / sizeof *lens)];
        uint8_t v = (uint8_t)(rnd() % 3);
        for (; r-- && i < n; i++)
            b[i] = v;
    }
    return b;
}

/* bzip2's block starts the plain way (docs/BZIP2.md, section 3): units one at a time. */
static size_t plan_by_units(const uint8_t *src, size_t n, size_t limit, size_t *st, size_t cap)
{
    size_t nb = 0, u = 0;
    for (size_t i = 0; i < n;) {
        if (u == 0 && nb < cap)
            st[nb++] = i;
        size_t r = 1;
        while (i + r < n && r < 255 && src[i + r] == src[i])
            r++;
        u += r >= 4 ? 5 : r;
        i += r;
        if (u >= limit)
            u = 0;
    }
    return nb;
}

/* The walk (16 bytes at a time where it can) finds the blocks a unit-by-unit parse finds, with
 * limits small enough to put a block end at every offset of its stretches. */
START_TEST(test_rle1_plan_matches_units)
{
    const size_t n = 1u << 20;
    uint8_t *data[] = { make_text(n), make_runs(n), make_random(n), make_short_runs(n) };
    const size_t limits[] = { 5, 7, 20, 21, 22, 37, 100, 1000, 65536, 0 };
    size_t *want = malloc(n * sizeof *want);
    for (size_t d = 0; d < sizeof data / sizeof *data; d++) {
        for (size_t l = 0; l < sizeof limits / sizeof *limits; l++) {
            size_t limit = limits[l] ? limits[l] : bz2_block_limit(1), *st;
            size_t nb = bz2_rle1_plan(data[d], n, limit, 1, &st);
            size_t wn = plan_by_units(data[d], n, limit, want, n);
            ck_assert_msg(nb == wn, "data %zu limit %zu: %zu blocks, the units give %zu", d, limit, nb, wn);
            for (size_t k = 0; k < nb; k++)
                ck_assert_msg(st[k] == want[k], "data %zu limit %zu: block %zu starts at %zu, not %zu", d, limit,
                              k, st[k], want[k]);
            free(st);
        }
        free(data[d]);
    }
    free(want);
}
END_TEST

/* Runs of one value from 1 byte to 2 MiB, most of them around multiples of 255 (the unit cut),
 * between stretches of random bytes: sparse volumes, zero padding. */
static uint8_t *make_long_runs(size_t n)
{
    uint8_t *b = make_random(n);
    for (size_t i = 0; i < n;) {
        size_t r = rnd() % 8 == 0 ? rnd() % (2u << 20) : 255 * (1 + rnd() % 40) - 4 + rnd() % 9;
        r = r < n - i ? r : n - i;
        memset(b + i, (int)(rnd() % 2), r);
        i += r + rnd() % 3000;
    }
    return b;
}

/* Random bytes with a run of 250 to 262 equal bytes across every tile edge (BZ2_RLE1_TILE from
 * at), cut there at many splits: where counting by position stops being exact (a run over 255). */
static uint8_t *make_edge_runs(size_t n, size_t at)
{
    uint8_t *b = make_random(n);
    for (size_t k = 1, e = at + BZ2_RLE1_TILE; e + 300 < n; k++, e += BZ2_RLE1_TILE) {
        /* odd edges: runs just over 255 cut near their middle, where both sides are shortest */
        size_t len = k % 2 ? 256 + k / 2 % 3 : 250 + k % 13, before = k % 2 ? 118 + k / 2 % 20 : k * 37 % len;
        memset(b + e - before, (int)(k % 3), len);
    }
    return b;
}

/* The plan with its tiles counted on several threads (and long runs taken whole) finds the
 * blocks a unit-by-unit parse finds; the input is large enough that the threads count tiles. */
START_TEST(test_rle1_plan_threads)
{
    const size_t n = 5u << 20;
    uint8_t *data[] = { make_text(n),      make_runs(n),   make_short_runs(n),
                        make_long_runs(n), make_random(n), make_edge_runs(n, 0) };
    const size_t limits[] = { 37, 20000, 65536, 0, 1 };
    const unsigned threads[] = { 1, 2, 4, 8 };
    size_t *want = malloc(n * sizeof *want);
    for (size_t d = 0; d < sizeof data / sizeof *data; d++) {
        for (size_t l = 0; l < sizeof limits / sizeof *limits; l++) {
            size_t limit = limits[l] > 1 ? limits[l] : bz2_block_limit(limits[l] ? 9 : 1);
            size_t wn = plan_by_units(data[d], n, limit, want, n);
            for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
                size_t *st, nb = bz2_rle1_plan(data[d], n, limit, threads[t], &st);
                ck_assert_msg(nb == wn, "data %zu limit %zu threads %u: %zu blocks, the units give %zu", d, limit,
                              threads[t], nb, wn);
                for (size_t k = 0; k < nb; k++)
                    ck_assert_msg(st[k] == want[k],
                                  "data %zu limit %zu threads %u: block %zu starts at %zu, not %zu", d, limit,
                                  threads[t], k, st[k], want[k]);
                ck_assert_uint_eq(st[nb], n);
                free(st);
            }
        }
        free(data[d]);
    }
    free(want);
}
END_TEST

/*
 * A settle that adds up scanned tiles (bz2_rle1_scan of the read, the
 * bytes before it left by the last part) finds the block start the plain
 * walk finds, whatever the data, the levels and where the read begins.
 */
START_TEST(test_rle1_scanned_settle)
{
    const size_t n = 3u << 20;
    const size_t ats[] = { 0, 1, 5, 4099, 900001 };
    for (size_t a = 0; a < sizeof ats / sizeof *ats; a++) {
        size_t at = ats[a];
        uint8_t *data[] = { make_text(n), make_runs(n), make_random(n), make_short_runs(n),
                            make_edge_runs(n, at) };
        for (size_t d = 0; d < sizeof data / sizeof *data; d++) {
            bz2_rle1_tiles *t = bz2_rle1_scan(data[d] + at, n - at);
            ck_assert_ptr_nonnull(t);
            for (int level = 1; level <= 9; level += 2) {
                size_t limit = bz2_block_limit(level);
                for (size_t len = n; len > at; len -= len / 3 + 1) {
                    size_t want = bz2_rle1_last_start(data[d], len, limit, NULL, 0);
                    size_t got = bz2_rle1_last_start(data[d], len, limit, t, at);
                    ck_assert_msg(got == want, "data %zu at %zu level %d len %zu: %zu, the walk says %zu", d, at,
                                  level, len, got, want);
                }
            }
            free(t);
            free(data[d]);
        }
    }
}
END_TEST

/* Whether x is one of the plan's nb block starts st[0..nb). */
static bool plan_has(const size_t *st, size_t nb, size_t x)
{
    for (size_t k = 0; k < nb; k++)
        if (st[k] == x)
            return true;
    return false;
}

/*
 * A file stream's parts as the daemon settles them (bz2_rle1_last_start):
 * each part reads a span of 1 byte to 2 MiB behind the bytes the last one
 * left and keeps them up to their last block start. Every cut is a block
 * start of the whole input's plan, none of the plan's is missed up to 259
 * bytes before the part's end (what follows may still extend a unit there),
 * and the parts cover the input.
 */
static void check_settle_chain(const uint8_t *src, size_t n, int level)
{
    size_t limit = bz2_block_limit(level), *st;
    size_t nb = bz2_rle1_plan(src, n, limit, 1, &st);
    size_t a = 0, read_to = 0;
    while (read_to < n) {
        size_t span = 1 + rnd() % (2u << 20);
        read_to += span < n - read_to ? span : n - read_to;
        if (read_to == n)
            break; /* the last part keeps all */
        size_t keep = bz2_rle1_last_start(src + a, read_to - a, limit, NULL, 0);
        ck_assert_msg(keep == 0 || plan_has(st, nb, a + keep), "level %d: cut %zu is no block start", level,
                      a + keep);
        for (size_t k = 0; k < nb; k++)
            ck_assert_msg(st[k] <= a + keep || st[k] + 259 > read_to,
                          "level %d: part [%zu, %zu) cut at %zu misses block start %zu", level, a, read_to,
                          a + keep, st[k]);
        a += keep;
    }
    free(st);
}

START_TEST(test_rle1_settle_chain)
{
    over_walk_corpora(check_settle_chain);
}
END_TEST

START_TEST(test_splice_segment_identity)
{
    /* 40 MiB of text at level 1: compressing it in two parts cut at the
     * first block start from 32 MiB on and splicing them is bit for bit
     * bz2_compress of the whole (a part that starts at a block start plans
     * the whole input's blocks). */
    size_t n = BZ2_SEGMENT_BYTES + (8u << 20);
    uint8_t *t = make_text(n);
    size_t wl, *st, cut = 0;
    uint32_t wb;
    uint8_t *whole = counted_compress(t, n, 1, 0, &wl, &wb);
    size_t nb = bz2_rle1_plan(t, n, bz2_block_limit(1), 1, &st);
    for (size_t k = 0; k < nb && !cut; k++)
        cut = st[k] >= BZ2_SEGMENT_BYTES ? st[k] : 0;
    free(st);
    ck_assert_uint_gt(cut, BZ2_SEGMENT_BYTES); /* not where segments cut */
    uint8_t *parts[2];
    size_t lens[2];
    uint32_t blocks[2];
    parts[0] = counted_compress(t, cut, 1, 0, &lens[0], &blocks[0]);
    parts[1] = counted_compress(t + cut, n - cut, 1, 0, &lens[1], &blocks[1]);
    ck_assert_uint_eq(blocks[0] + blocks[1], wb);
    size_t sl;
    uint8_t *s = splice_parts(parts, lens, blocks, 2, 1, &sl);
    ck_assert_uint_eq(sl, wl);
    ck_assert(memcmp(s, whole, wl) == 0);
    free(s);
    free(parts[0]);
    free(parts[1]);
    free(whole);
    free(t);
}
END_TEST

/* The daemon's way: keep the unconsumed tail, append the next piece, call
 * bz2_decompress_part with more = 1 until the last piece. pieces[] are the
 * piece lengths (summing to n). Returns the final status; *out gets the
 * concatenated output, *garbage_abs the absolute offset of trailing garbage
 * (or (size_t)-1). */
typedef struct streamed {
    int rc;
    gc_error err;
    uint8_t *out;
    size_t out_len;
    size_t garbage_abs;
    bz2_dstate st;
    unsigned calls;
} streamed;

static void stream_decode(const uint8_t *in, size_t n, const size_t *pieces, size_t npieces, unsigned threads,
                          streamed *r)
{
    memset(r, 0, sizeof *r);
    r->garbage_abs = (size_t)-1;
    uint8_t *buf = malloc(n + 1);
    size_t blen = 0, fed = 0, consumed_abs = 0, ocap = 1024;
    r->out = malloc(ocap);
    for (size_t p = 0; p < npieces; p++) {
        memcpy(buf + blen, in + fed, pieces[p]);
        blen += pieces[p];
        fed += pieces[p];
        int more = p + 1 < npieces;
        uint8_t *o = NULL;
        size_t ol = 0, used = 0;
        unsigned bit0 = r->st.bit;
        int had_garbage = r->st.garbage;
        r->calls++;
        r->rc = bz2_decompress_part(buf, blen, more, &r->st, 0, threads, NULL, &o, &ol, &used, &r->err);
        if (r->rc != GC_OK) {
            ck_assert(o == NULL);
            break;
        }
        ck_assert(o != NULL);
        ck_assert_uint_le(used, blen);
        ck_assert_uint_le(r->st.bit, 7);
        if (more && blen >= BZ2_PART_PROGRESS_BYTES) /* the progress bound */
            ck_assert_msg(used > 0 || r->st.bit != bit0, "no progress with %zu bytes", blen);
        if (!more)
            ck_assert_msg(used == blen && r->st.bit == 0, "last call left %zu of %zu bytes", blen - used, blen);
        if (had_garbage)
            ck_assert_uint_eq(ol, 0);
        else if (r->st.garbage)
            r->garbage_abs = consumed_abs + (size_t)r->st.garbage_at;
        if (r->out_len + ol > ocap) {
            while (r->out_len + ol > ocap)
                ocap *= 2;
            r->out = realloc(r->out, ocap);
        }
        memcpy(r->out + r->out_len, o, ol);
        r->out_len += ol;
        free(o);
        memmove(buf, buf + used, blen - used);
        blen -= used;
        consumed_abs += used;
    }
    free(buf);
}

/* Streamed decode of in, cut as pieces[], must give bz2_decompress's result:
 * same bytes and status, same message on error; trailing garbage is flagged
 * at the offset where the whole decode sees it, with the output of the
 * input before it. Returns the whole decode's status. */
static int check_streamed(const uint8_t *in, size_t n, const size_t *pieces, size_t npieces, unsigned threads)
{
    uint8_t *want = NULL;
    size_t wl = 0;
    gc_error werr;
    int wrc = bz2_decompress(in, n, 0, threads, &want, &wl, &werr);
    streamed r;
    stream_decode(in, n, pieces, npieces, threads, &r);
    if (wrc == GC_E_CORRUPT && strstr(werr.msg, "trailing garbage after stream")) {
        ck_assert_msg(r.rc == GC_OK, "streamed: %d %s (whole: %s)", r.rc, r.err.msg, werr.msg);
        ck_assert(r.st.garbage);
        char msg[128];
        snprintf(msg, sizeof msg, "bzip2: trailing garbage after stream %u", r.st.stream_no);
        ck_assert_str_eq(msg, werr.msg);
        /* the output is the decode of what precedes the garbage */
        ck_assert(r.garbage_abs != (size_t)-1 && r.garbage_abs < n);
        uint8_t *pre;
        size_t pl;
        gc_error perr;
        ck_assert_int_eq(bz2_decompress(in, r.garbage_abs, 0, threads, &pre, &pl, &perr), GC_OK);
        ck_assert_uint_eq(pl, r.out_len);
        ck_assert(pl == 0 || memcmp(pre, r.out, pl) == 0);
        free(pre);
    } else {
        ck_assert_msg(r.rc == wrc, "streamed status %d (%s), whole %d (%s)", r.rc, r.err.msg, wrc,
                      wrc ? werr.msg : "ok");
        ck_assert(!r.st.garbage);
        if (wrc == GC_OK) {
            ck_assert_uint_eq(r.out_len, wl);
            ck_assert(wl == 0 || memcmp(r.out, want, wl) == 0);
        } else {
            ck_assert_str_eq(r.err.msg, werr.msg);
        }
    }
    free(r.out);
    free(want);
    return wrc;
}

/* Random cut schedule: npieces pieces of n bytes (some empty ones too). */
static size_t random_pieces(size_t n, size_t *pieces, size_t max_pieces, size_t max_piece)
{
    size_t k = 0, left = n;
    while (left && k + 1 < max_pieces) {
        size_t p = rnd() % 8 == 0 ? 0 : 1 + rnd() % max_piece;
        if (p > left)
            p = left;
        pieces[k++] = p;
        left -= p;
    }
    pieces[k++] = left;
    return k;
}

static void check_streamed_schedules(const uint8_t *in, size_t n, int every_cut, int one_byte, int randoms,
                                     size_t max_piece)
{
    size_t *pieces = malloc((n + 2) * sizeof *pieces);
    if (one_byte) {
        for (size_t i = 0; i < n; i++)
            pieces[i] = 1;
        pieces[0] = n ? 1 : 0;
        check_streamed(in, n, pieces, n ? n : 1, 1 + (unsigned)(n % 2));
    }
    if (every_cut) {
        for (size_t k = 0; k <= n; k++) {
            pieces[0] = k;
            pieces[1] = n - k;
            check_streamed(in, n, pieces, 2, 1);
        }
    }
    for (int t = 0; t < randoms; t++) {
        size_t np = random_pieces(n, pieces, n + 2 < 4096 ? n + 2 : 4096, max_piece);
        check_streamed(in, n, pieces, np, 1 + t % 3);
    }
    pieces[0] = n; /* one call */
    check_streamed(in, n, pieces, 1, 2);
    free(pieces);
}

/* A small stream with several tiny blocks (spliced from tiny parts), so
 * that every cut position can be tried cheaply. */
static uint8_t *tiny_multiblock(int level, int nparts, size_t *len, uint8_t **plain, size_t *plain_len)
{
    uint8_t *parts[8] = { 0 }, *src[8] = { 0 };
    size_t lens[8] = { 0 }, n[8] = { 0 }, total = 0;
    uint32_t blocks[8] = { 0 };
    for (int i = 0; i < nparts; i++) {
        n[i] = 20 + rnd() % 200;
        src[i] = make_text(n[i]);
        parts[i] = counted_compress(src[i], n[i], level, 1, &lens[i], &blocks[i]);
        total += n[i];
    }
    uint8_t *s = splice_parts(parts, lens, blocks, nparts, level, len);
    *plain = malloc(total);
    *plain_len = total;
    size_t at = 0;
    for (int i = 0; i < nparts; i++) {
        memcpy(*plain + at, src[i], n[i]);
        at += n[i];
        free(parts[i]);
        free(src[i]);
    }
    return s;
}

START_TEST(test_part_valid_streams)
{
    size_t len, pl;
    uint8_t *plain;
    /* tiny multi-block: every cut, 1-byte pieces */
    uint8_t *s = tiny_multiblock(9, 5, &len, &plain, &pl);
    check_ours_decodes(s, len, plain, pl, 1);
    check_streamed_schedules(s, len, 1, 1, 20, 40);
    free(s);
    free(plain);
    /* one-block level-9 stream: every cut, 1-byte pieces */
    uint8_t *t = make_text(3000);
    s = ours_compress(t, 3000, 9, 1, &len);
    check_streamed_schedules(s, len, 1, 1, 10, 100);
    free(s);
    /* libbz2's stream, two levels */
    for (int level = 1; level <= 9; level += 8) {
        s = libbz2_compress(t, 3000, level, &len);
        check_streamed_schedules(s, len, 0, 1, 20, 200);
        free(s);
    }
    free(t);
    /* bigger multi-block streams, ours at 1 and 9 and libbz2's: random cuts */
    size_t n = 450000;
    t = make_text(n);
    for (int i = 0; i < 3; i++) {
        s = i == 2 ? libbz2_compress(t, n, 1, &len) : ours_compress(t, n, i ? 9 : 1, 2, &len);
        check_streamed_schedules(s, len, 0, 0, 6, len / 3);
        check_streamed_schedules(s, len, 0, 0, 2, 5000);
        free(s);
    }
    /* randomised blocks */
    bz2_options o = { .level = 1, .threads = 2 };
    gc_error err;
    ck_assert_int_eq(bz2_compress_ex(t, 250000, &o, BZ2_ENC_RANDOMISE, &s, &len, &err), GC_OK);
    check_streamed_schedules(s, len, 0, 0, 6, len / 2);
    free(s);
    free(t);
}
END_TEST

START_TEST(test_part_multistream)
{
    /* ours (tiny multi-block), libbz2's, an empty stream, ours again */
    size_t l1, l2, l3, pl;
    uint8_t *plain;
    uint8_t *c1 = tiny_multiblock(1, 3, &l1, &plain, &pl);
    uint8_t *c2 = libbz2_compress((const uint8_t *)"tail!", 5, 3, &l2);
    uint8_t *c3 = ours_compress(NULL, 0, 5, 1, &l3);
    size_t total = 2 * l1 + l2 + l3;
    uint8_t *cat = malloc(total + 8);
    memcpy(cat, c1, l1);
    memcpy(cat + l1, c3, l3);
    memcpy(cat + l1 + l3, c2, l2);
    memcpy(cat + l1 + l3 + l2, c1, l1);
    ck_assert_int_eq(check_streamed(cat, total, (size_t[]){ total }, 1, 1), GC_OK);
    check_streamed_schedules(cat, total, 1, 1, 20, 30);
    /* trailing garbage after stream 4: flagged at its offset, output before it */
    static const char *tails[] = { "xyz", "BZh0", "BZx", "B?", "Z", "BZh91" };
    for (int k = 0; k < 6; k++) {
        size_t tl = strlen(tails[k]);
        memcpy(cat + total, tails[k], tl);
        check_streamed_schedules(cat, total + tl, 1, 1, 10, 20);
        streamed r;
        size_t pieces[3] = { total - 3, 2, tl + 1 };
        stream_decode(cat, total + tl, pieces, 3, 1, &r);
        if (k < 5) {
            ck_assert_int_eq(r.rc, GC_OK);
            ck_assert(r.st.garbage);
            ck_assert_uint_eq(r.st.stream_no, 4);
            ck_assert_uint_eq(r.garbage_abs, total);
            ck_assert_uint_eq(r.out_len, 2 * pl + 5);
        } else { /* "BZh9" and one byte: a truncated stream 5, not garbage */
            ck_assert_int_eq(r.rc, GC_E_TRUNCATED);
            ck_assert_str_eq(r.err.msg, "bzip2: stream 5: input ends before the end-of-stream marker");
        }
        free(r.out);
    }
    /* a "BZ" of a fifth stream cut short is truncation, not garbage */
    memcpy(cat + total, "BZ", 2);
    ck_assert_int_eq(check_streamed(cat, total + 2, (size_t[]){ total + 1, 1 }, 2, 1), GC_E_TRUNCATED);
    free(cat);
    free(plain);
    free(c1);
    free(c2);
    free(c3);
}
END_TEST

START_TEST(test_part_hostile)
{
    size_t len, pl;
    uint8_t *plain;
    uint8_t *s = tiny_multiblock(9, 4, &len, &plain, &pl);
    uint8_t *m = malloc(len);
    size_t pieces[64];
    /* every bit flipped, a random cut schedule each */
    int errors = 0;
    for (size_t bit = 0; bit < len * 8; bit++) {
        memcpy(m, s, len);
        m[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
        size_t np = random_pieces(len, pieces, 64, 1 + rnd() % 60);
        errors += check_streamed(m, len, pieces, np, 1 + (unsigned)(bit % 2)) != GC_OK;
    }
    /* padding, the level digit and bits of tables no selector picks may
     * flip harmlessly; nearly everything else must be refused */
    ck_assert_int_gt(errors, (int)(len * 8) * 9 / 10);
    /* every truncation, fed in random pieces and in 1-byte pieces: always
     * GC_E_TRUNCATED (a cut never reads as corruption: the streamed decode
     * waits on exactly that) */
    for (size_t k = 0; k < len; k++) {
        size_t np = random_pieces(k, pieces, 64, 1 + rnd() % 30);
        ck_assert_int_eq(check_streamed(s, k, pieces, np, 1), GC_E_TRUNCATED);
    }
    for (size_t k = 0; k < len; k += 7)
        check_streamed_schedules(s, k, 0, 1, 0, 1);
    free(m);
    free(s);
    free(plain);
    /* header alone, header cut, empty input */
    check_streamed_schedules((const uint8_t *)"BZh9", 4, 1, 1, 0, 1);
    ck_assert_int_eq(check_streamed((const uint8_t *)"BZh9", 4, (size_t[]){ 2, 2 }, 2, 1), GC_E_TRUNCATED);
    check_streamed_schedules((const uint8_t *)"BZh", 3, 1, 1, 0, 1);
    check_streamed_schedules((const uint8_t *)"BZh0xxxxxxxxxxxx", 16, 1, 1, 0, 1);
    check_streamed_schedules((const uint8_t *)"Q", 1, 1, 1, 0, 1);
    streamed r;
    stream_decode((const uint8_t *)"", 0, (size_t[]){ 0, 0, 0 }, 3, 1, &r);
    ck_assert_int_eq(r.rc, GC_E_TRUNCATED);
    ck_assert_str_eq(r.err.msg, "bzip2: empty input");
    ck_assert_uint_eq(r.calls, 3);
    free(r.out);
    ck_assert_int_eq(check_streamed((const uint8_t *)"", 0, (size_t[]){ 0 }, 1, 1), GC_E_TRUNCATED);
    /* invalid arguments */
    bz2_dstate st = { .bit = 8 };
    uint8_t *o;
    size_t ol, used;
    gc_error err;
    ck_assert_int_eq(bz2_decompress_part((const uint8_t *)"BZh9", 4, 1, &st, 0, 1, NULL, &o, &ol, &used, &err),
                     GC_E_INVALID);
}
END_TEST

/* A stream with one block of 101 'a' whose Huffman tables are incomplete
 * (RUNA 0, RUNB 100, EOB 101; 11x is no code); data RUNA RUNB EOB = a run
 * of 5, so RLE1 "aaaa" + count 97. bad: RUNB becomes 110 (invalid) instead.
 * *code_bit: where the data's first bit is. */
static uint8_t *incomplete_table_stream(int bad, size_t *len, uint64_t *code_bit)
{
    uint8_t *b = calloc(1, 64);
    uint8_t want[101];
    memset(want, 'a', sizeof want);
    uint32_t crc = bz2_crc(want, sizeof want);
    memcpy(b, "BZh1", 4);
    uint64_t p = 32;
    set_bits(b, p, 24, (uint32_t)(BZ2_BLOCK_MAGIC >> 24)), p += 24;
    set_bits(b, p, 24, (uint32_t)(BZ2_BLOCK_MAGIC & 0xffffff)), p += 24;
    set_bits(b, p, 32, crc), p += 32;
    set_bits(b, p, 1, 0), p += 1;
    set_bits(b, p, 24, 0), p += 24;      /* origPtr */
    set_bits(b, p, 16, 0x0200), p += 16; /* range 6 (0x60..0x6f) */
    set_bits(b, p, 16, 0x4000), p += 16; /* byte 0x61 'a' */
    set_bits(b, p, 3, 2), p += 3;        /* 2 tables */
    set_bits(b, p, 15, 1), p += 15;      /* 1 selector */
    set_bits(b, p, 1, 0), p += 1;        /* table 0 */
    for (int t = 0; t < 2; t++) {        /* lengths 1, 3, 3 */
        set_bits(b, p, 5, 1), p += 5;
        set_bits(b, p, 1, 0), p += 1;    /* RUNA: 1 */
        set_bits(b, p, 5, 0x14), p += 5; /* +1 +1, RUNB: 3 */
        set_bits(b, p, 1, 0), p += 1;    /* EOB: 3 */
    }
    *code_bit = p;
    set_bits(b, p, 1, 0), p += 1;           /* RUNA */
    set_bits(b, p, 3, bad ? 6 : 4), p += 3; /* RUNB (or no code) */
    set_bits(b, p, 3, 5), p += 3;           /* EOB */
    set_bits(b, p, 24, (uint32_t)(BZ2_EOS_MAGIC >> 24)), p += 24;
    set_bits(b, p, 24, (uint32_t)(BZ2_EOS_MAGIC & 0xffffff)), p += 24;
    set_bits(b, p, 32, crc), p += 32;
    *len = (size_t)((p + 7) / 8);
    return b;
}

START_TEST(test_part_incomplete_tables)
{
    /* The decoder peeks 20 bits for a code; with the input cut, those past
     * the end read as zeros. Canonical codes fill the code space from 0, so
     * the zero completion is valid whenever any completion is: a cut never
     * turns into "invalid Huffman code", only truncation. */
    size_t len;
    uint64_t code_bit;
    uint8_t *s = incomplete_table_stream(0, &len, &code_bit);
    uint8_t want[101];
    memset(want, 'a', sizeof want);
    check_ours_decodes(s, len, want, sizeof want, 1);
    for (size_t k = 0; k < len; k++) {
        uint8_t *o;
        size_t ol;
        gc_error err;
        ck_assert_int_eq(bz2_decompress(s, k, 0, 1, &o, &ol, &err), GC_E_TRUNCATED);
    }
    check_streamed_schedules(s, len, 1, 1, 10, 8);
    free(s);
    s = incomplete_table_stream(1, &len, &code_bit);
    uint64_t bad_bits = code_bit + 1 + 2; /* the "11" that no code starts with */
    for (size_t k = 0; k <= len; k++) {
        uint8_t *o;
        size_t ol;
        gc_error err;
        int rc = bz2_decompress(s, k, 0, 1, &o, &ol, &err);
        if ((uint64_t)k * 8 >= bad_bits) {
            ck_assert_int_eq(rc, GC_E_CORRUPT);
            ck_assert_str_eq(err.msg, "bzip2: stream 1 block 1: invalid Huffman code");
        } else {
            ck_assert_int_eq(rc, GC_E_TRUNCATED);
        }
    }
    check_streamed_schedules(s, len, 1, 1, 10, 8);
    free(s);
}
END_TEST

START_TEST(test_oversubscribed_tables)
{
    /* Lengths no encoder writes (Kraft sum > 1) that bzip2 decodes: codes
     * by (length, symbol), those that do not fit their length never seen.
     * libbz2 is the oracle; ours must agree whole, streamed and cut. */
    uint8_t s[BZ2_OVERSUB_CAP];
    size_t len = bz2_oversub_stream(s, sizeof s);
    ck_assert_uint_gt(len, 0);
    const uint8_t *plain = (const uint8_t *)bz2_oversub_plain;
    size_t n = strlen(bz2_oversub_plain);
    uint8_t *ref = NULL;
    size_t ref_len = 0;
    ck_assert_int_eq(libbz2_decompress(s, len, &ref, &ref_len), BZ_OK);
    ck_assert_uint_eq(ref_len, n);
    ck_assert(memcmp(ref, plain, n) == 0);
    free(ref);
    check_ours_decodes(s, len, plain, n, 1);
    check_ours_decodes(s, len, plain, n, 4);
    check_streamed_schedules(s, len, 1, 1, 10, 8);
    for (size_t k = 0; k < len; k++) {
        uint8_t *o;
        size_t ol;
        gc_error err;
        ck_assert_int_eq(bz2_decompress(s, k, 0, 1, &o, &ol, &err), GC_E_TRUNCATED);
    }
}
END_TEST

START_TEST(test_oversubscribed_hostile)
{
    /* Codes that do not fit, at every length up to the lookup table's and
     * past it: never an out-of-bounds table entry (ASan), and wherever libbz2
     * refuses the stream so do we; where it decodes, the same bytes. */
    static const int sets[][6] = {
        { 1, 1, 1, 1, 1, 1 }, { 1, 1, 1, 1, 1, 20 },    { 2, 2, 2, 2, 2, 1 },       { 10, 10, 10, 10, 1, 1 },
        { 1, 2, 3, 4, 5, 5 }, { 12, 12, 11, 11, 1, 1 }, { 20, 20, 20, 20, 20, 20 }, { 3, 1, 2, 3, 3, 1 },
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        uint8_t s[BZ2_OVERSUB_CAP];
        size_t len = bz2_oversub_stream_with(s, sizeof s, sets[i]);
        ck_assert_uint_gt(len, 0);
        uint8_t *ref = NULL, *o = NULL;
        size_t ref_len = 0, ol = 0;
        gc_error err;
        int want = libbz2_decompress(s, len, &ref, &ref_len);
        int rc = bz2_decompress(s, len, 0, 1, &o, &ol, &err);
        ck_assert_msg((rc == GC_OK) == (want == BZ_OK), "set %zu: ours %d (%s), libbz2 %d", i, rc,
                      rc ? err.msg : "", want);
        if (rc == GC_OK) {
            ck_assert_uint_eq(ol, ref_len);
            ck_assert(memcmp(o, ref, ol) == 0);
            free(o);
            free(ref);
        } else {
            ck_assert(rc == GC_E_CORRUPT || rc == GC_E_TRUNCATED || rc == GC_E_CRC);
        }
        check_streamed_schedules(s, len, 1, 1, 10, 8);
    }
}
END_TEST

START_TEST(test_part_long_block_bound)
{
    /* A block whose code lengths go up and down forever (1,0 1,1 ...: legal
     * steps, never ending) is refused once it passes BZ2_MAX_BLOCK_COMPRESSED,
     * by the whole decode and by the streamed one alike, and a streamed call
     * holding BZ2_PART_PROGRESS_BYTES fails instead of waiting. */
    size_t n = BZ2_PART_PROGRESS_BYTES + (1u << 20);
    uint8_t *b = calloc(1, n);
    memcpy(b, "BZh9", 4);
    uint64_t p = 32;
    set_bits(b, p, 24, (uint32_t)(BZ2_BLOCK_MAGIC >> 24)), p += 24;
    set_bits(b, p, 24, (uint32_t)(BZ2_BLOCK_MAGIC & 0xffffff)), p += 24;
    set_bits(b, p, 32, 0x12345678), p += 32; /* block CRC */
    set_bits(b, p, 1, 0), p += 1;
    set_bits(b, p, 24, 0), p += 24;      /* origPtr */
    set_bits(b, p, 16, 0x8000), p += 16; /* range 0 used */
    set_bits(b, p, 16, 0x8000), p += 16; /* byte 0 used */
    set_bits(b, p, 3, 2), p += 3;        /* 2 tables */
    set_bits(b, p, 15, 1), p += 15;      /* 1 selector */
    set_bits(b, p, 1, 0), p += 1;        /* selector 0 */
    set_bits(b, p, 5, 2), p += 5;        /* table 0 starts at length 2 */
    for (; p + 4 <= (uint64_t)n * 8; p += 4)
        set_bits(b, p, 4, 0xb); /* 1,0 (up) 1,1 (down) */
    uint8_t *o;
    size_t ol;
    gc_error err;
    ck_assert_int_eq(bz2_decompress(b, n, 0, 2, &o, &ol, &err), GC_E_CORRUPT);
    ck_assert_msg(strstr(err.msg, "stream 1 block 1: compressed block exceeds 3145728 bytes") != NULL, "%s",
                  err.msg);
    /* the same within the bound is just truncated */
    ck_assert_int_eq(bz2_decompress(b, BZ2_MAX_BLOCK_COMPRESSED, 0, 2, &o, &ol, &err), GC_E_TRUNCATED);
    size_t pieces[6] = { 1u << 20, 1u << 20, 1u << 20, 1u << 20, 1u << 20, 0 };
    streamed r;
    stream_decode(b, n, pieces, 5, 2, &r);
    ck_assert_int_eq(r.rc, GC_E_CORRUPT);
    ck_assert_uint_eq(r.calls, 4); /* the call holding 4 MiB decides */
    free(r.out);
    check_streamed(b, n, pieces, 5, 1);
    free(b);
}
END_TEST

/* ---- parallel planning and decoding ahead (common/parallel.h, bz2_spec.c) ---- */

START_TEST(test_plan_threads_agree)
{
    /* Three segments and a tail, with runs that cross the segment cuts. */
    size_t n = 3 * BZ2_SEGMENT_BYTES + 123457;
    uint8_t *b = malloc(n);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++)
        b[i] = (i / 1000) % 7 == 0 ? 'r' : (uint8_t)(i * 7 + i / 256);
    size_t limit = bz2_block_limit(9), *ref, *st;
    size_t nb = bz2_rle1_plan(b, n, limit, 1, &ref);
    ck_assert_uint_gt(nb, 3);
    static const unsigned threads[] = { 2, 3, 0 };
    for (size_t t = 0; t < 3; t++) {
        ck_assert_uint_eq(bz2_rle1_plan(b, n, limit, threads[t], &st), nb);
        ck_assert_msg(memcmp(st, ref, (nb + 1) * sizeof *st) == 0, "plan differs with %u threads", threads[t]);
        free(st);
    }
    free(ref);
    free(b);
}
END_TEST

/* Decode with a thread count; returns the status, *msg the error text. */
static int decode_threads(const uint8_t *bz, size_t len, unsigned threads, uint8_t **out, size_t *out_len,
                          char *msg, size_t msg_size)
{
    gc_error err;
    int rc = bz2_decompress(bz, len, 0, threads, out, out_len, &err);
    snprintf(msg, msg_size, "%s", rc == GC_OK ? "" : err.msg);
    return rc;
}

START_TEST(test_decode_ahead_equals_sequential)
{
    /* About 80 blocks at level 1: the window (4 x threads, 64 at 16) wraps for every count. */
    size_t n = 8u << 20, clen;
    uint8_t *src = make_text(n);
    uint8_t *bz = ours_compress(src, n, 1, 0, &clen);
    static const unsigned threads[] = { 2, 3, 8, 16, 0 };
    for (size_t t = 0; t < 5; t++)
        check_ours_decodes(bz, clen, src, n, threads[t]);
    /* A corrupt block in the middle and a cut stream: every thread count
     * reports what the sequential decoder reports. */
    uint8_t *bad = malloc(clen);
    memcpy(bad, bz, clen);
    bad[clen / 2] ^= 0x10;
    size_t cuts[2] = { clen, clen * 2 / 3 };
    for (size_t c = 0; c < 2; c++) {
        char ref_msg[256], msg[256];
        uint8_t *out = NULL;
        size_t out_len;
        int ref = decode_threads(bad, cuts[c], 1, &out, &out_len, ref_msg, sizeof ref_msg);
        ck_assert_int_ne(ref, GC_OK);
        for (size_t t = 0; t < 5; t++) {
            out = NULL;
            int rc = decode_threads(bad, cuts[c], threads[t], &out, &out_len, msg, sizeof msg);
            ck_assert_msg(rc == ref && strcmp(msg, ref_msg) == 0, "threads %u: %d \"%s\", sequential %d \"%s\"",
                          threads[t], rc, msg, ref, ref_msg);
            ck_assert_ptr_null(out);
        }
    }
    free(bad);
    free(bz);
    free(src);
}
END_TEST

/* What a decode into the caller's buffer told its job. */
typedef struct heard {
    const uint8_t *dst;  /* the call's buffer */
    const uint8_t *want; /* the whole decode's bytes from this call's first */
    size_t last, calls;
    size_t charged;
    size_t refuse_after; /* may_grow says no once this much is charged (0: never) */
} heard;

static void heard_progress(void *ctx, size_t final)
{
    heard *h = ctx;
    ck_assert_uint_gt(final, h->last); /* ascending: every block accepted has output here */
    ck_assert_uint_le(final, h->charged);
    ck_assert(memcmp(h->dst, h->want, final) == 0); /* final means final: these are the right bytes */
    h->last = final;
    h->calls++;
}

static bool heard_grow(void *ctx, size_t more)
{
    heard *h = ctx;
    if (h->refuse_after && h->charged + more > h->refuse_after)
        return false;
    h->charged += more;
    return true;
}

/* Chained calls with out_soft, each into a fresh buffer of out_soft + one block's most. */
static void check_part_into(const uint8_t *bz, size_t len, const uint8_t *want, size_t want_len, size_t soft,
                            unsigned threads)
{
    bz2_dstate st = { .out_soft = soft }, ref = { .out_soft = soft };
    size_t at = 0, out_at = 0, ref_at = 0;
    unsigned calls = 0;
    while (at < len || calls == 0) {
        size_t cap = soft + BZ2_MAX_BLOCK_OUTPUT;
        uint8_t *buf = malloc(cap);
        heard h = { .dst = buf, .want = want + out_at };
        gc_job job = { .may_grow = heard_grow, .progress = heard_progress, .ctx = &h };
        size_t got = 0, used = 0, ref_used = 0, ref_len = 0;
        uint8_t *ref_out = NULL;
        gc_error err, ref_err;
        int rc =
            bz2_decompress_part_into(bz + at, len - at, 0, &st, 0, buf, cap, threads, &job, &got, &used, &err);
        ck_assert_msg(rc == GC_OK, "into: %s", err.msg);
        ck_assert_int_eq(bz2_decompress_part(bz + ref_at, len - ref_at, 0, &ref, 0, threads, NULL, &ref_out,
                                             &ref_len, &ref_used, &ref_err),
                         GC_OK);
        /* the same call as bz2_decompress_part: bytes, where it stopped, its state */
        ck_assert_uint_eq(got, ref_len);
        ck_assert_uint_eq(used, ref_used);
        ck_assert_uint_eq(st.bit, ref.bit);
        ck_assert_uint_eq(st.block_no, ref.block_no);
        ck_assert(memcmp(buf, ref_out, got) == 0);
        /* the job heard every byte, charged as written */
        ck_assert_uint_eq(h.last, got);
        ck_assert_uint_eq(h.charged, got);
        ck_assert_uint_le(out_at + got, want_len);
        free(ref_out);
        free(buf);
        at += used;
        ref_at += ref_used;
        out_at += got;
        ck_assert_uint_lt(++calls, 1000);
        if (got == 0 && used == 0)
            break;
    }
    ck_assert_uint_eq(out_at, want_len);
    ck_assert_uint_gt(calls, 1);
}

START_TEST(test_part_into_caller_buffer)
{
    /* Level 1, about 30 blocks; stops every 1 MiB: several calls, several blocks each. */
    size_t n = 3u << 20, clen;
    uint8_t *src = make_text(n);
    uint8_t *bz = ours_compress(src, n, 1, 0, &clen);
    check_part_into(bz, clen, src, n, 1u << 20, 1);
    check_part_into(bz, clen, src, n, 1u << 20, 4);
    /* A buffer too small for the next block: LIMIT, the caller's buffer still the caller's (ASan: not freed). */
    uint8_t *small = malloc(150000);
    bz2_dstate st = { 0 };
    heard h = { .dst = small, .want = src };
    gc_job job = { .may_grow = heard_grow, .progress = heard_progress, .ctx = &h };
    size_t got = 1, used = 1;
    gc_error err;
    ck_assert_int_eq(bz2_decompress_part_into(bz, clen, 0, &st, 0, small, 150000, 2, &job, &got, &used, &err),
                     GC_E_LIMIT);
    ck_assert_msg(strstr(err.msg, "does not fit its buffer of 150000 bytes"), "%s", err.msg);
    ck_assert_uint_eq(got, 0);
    ck_assert_uint_eq(h.calls, 1); /* the first block (about 100 kB at level 1) was final */
    ck_assert_uint_gt(h.last, 90000);
    /* may_grow refusing: LIMIT, as the growing decoder says it */
    memset(&st, 0, sizeof st);
    uint8_t *roomy = malloc(1u << 20);
    heard h2 = { .dst = roomy, .want = src, .refuse_after = 150000 };
    job.ctx = &h2;
    ck_assert_int_eq(bz2_decompress_part_into(bz, clen, 0, &st, 0, roomy, 1u << 20, 2, &job, &got, &used, &err),
                     GC_E_LIMIT);
    ck_assert_msg(strstr(err.msg, "does not fit the memory it may use"), "%s", err.msg);
    ck_assert_uint_eq(h2.calls, 1);
    free(roomy);
    free(small);
    free(bz);
    free(src);
}
END_TEST

static Suite *bzip2_suite(void)
{
    Suite *s = suite_create("bzip2");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rnums_table);
    tcase_add_test(tc, test_bwt_small);
    tcase_add_test(tc, test_bwt_repetitive);
    tcase_add_test(tc, test_bwt_large_repetitive_fast);
    tcase_add_test(tc, test_bwt_tie_stage_paths);
    tcase_add_test(tc, test_bwt_large_blocks);
    tcase_add_test(tc, test_bwt_periodic_root);
    tcase_add_test(tc, test_bwt_sort_fallbacks);
    tcase_add_test(tc, test_code_lengths_limited);
    tcase_add_test(tc, test_code_lengths_as_libbz2);
    tcase_add_test(tc, test_empty_and_tiny);
    tcase_add_test(tc, test_runs);
    tcase_add_test(tc, test_block_exactly_full);
    tcase_add_test(tc, test_blocks_ignore_segments);
    tcase_add_test(tc, test_all_bytes_and_random);
    tcase_add_test(tc, test_text_multiblock_levels);
    tcase_add_test(tc, test_periodic_fibonacci_streams);
    tcase_add_test(tc, test_libbz2_every_level);
    tcase_add_test(tc, test_pbzip2_lbzip2_streams);
    tcase_add_test(tc, test_concatenated_streams);
    tcase_add_test(tc, test_randomised_block);
    tcase_add_test(tc, test_bit_flips);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_crc_message_and_limit);
    tcase_add_test(tc, test_block_level_and_four_run_end);
    tcase_add_test(tc, test_inverse_bwt_lanes);
    tcase_add_test(tc, test_mtf_encode_reference);
    tcase_add_test(tc, test_stages_small_inputs);
    tcase_add_test(tc, test_stages_text_runs_random);
    tcase_add_test(tc, test_stages_full_block);
    tcase_add_test(tc, test_stages_foreign_stream);
    tcase_add_test(tc, test_stage_contracts);
    suite_add_tcase(s, tc);

    TCase *streaming = tcase_create("streaming");
    tcase_set_timeout(streaming, 300);
    tcase_add_test(streaming, test_eos_magic_aperiodic);
    tcase_add_test(streaming, test_format_framing);
    tcase_add_test(streaming, test_splice_every_shift);
    tcase_add_test(streaming, test_splice_in_place_and_skip);
    tcase_add_test(streaming, test_stream_body);
    tcase_add_test(streaming, test_splice_small_parts);
    tcase_add_test(streaming, test_rle1_walk_arriving);
    tcase_add_test(streaming, test_rle1_plan_matches_units);
    tcase_add_test(streaming, test_rle1_plan_threads);
    tcase_add_test(streaming, test_rle1_scanned_settle);
    tcase_add_test(streaming, test_rle1_settle_chain);
    tcase_add_test(streaming, test_splice_segment_identity);
    tcase_add_test(streaming, test_part_valid_streams);
    tcase_add_test(streaming, test_part_multistream);
    tcase_add_test(streaming, test_part_hostile);
    tcase_add_test(streaming, test_part_incomplete_tables);
    tcase_add_test(streaming, test_part_long_block_bound);
    tcase_add_test(streaming, test_oversubscribed_tables);
    tcase_add_test(streaming, test_oversubscribed_hostile);
    suite_add_tcase(s, streaming);

    TCase *hostile = tcase_create("changing input");
    tcase_set_timeout(hostile, 300); /* bounded in time; sanitizers are slow */
    tcase_add_test(hostile, test_block_over_plan_refused);
    tcase_add_test(hostile, test_compress_input_changes);
    tcase_add_test(hostile, test_decompress_input_changes);
    suite_add_tcase(s, hostile);
    TCase *par = tcase_create("parallel");
    tcase_set_timeout(par, 300);
    tcase_add_test(par, test_plan_threads_agree);
    tcase_add_test(par, test_decode_ahead_equals_sequential);
    tcase_add_test(par, test_part_into_caller_buffer);
    suite_add_tcase(s, par);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bzip2_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
