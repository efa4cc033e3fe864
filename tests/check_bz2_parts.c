/*
 * check_bz2_parts.c - decoding a bzip2 input in parts found by their magic
 * (bzip2.h bz2_find_part_start, bz2_dstate_at_magic, bz2_dstate_follow),
 * as the daemon's decompress streams do (codec_bzip2.c): every part decoded
 * on its own, then confirmed in order or decoded again from the exact state.
 * The result must be bz2_decompress's, bytes, status and message, whatever
 * the cuts: chance magics planted at a cut, stream edges and trailing
 * garbage at a cut, damage and truncation.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bzip2.h"
#include "test_rng.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void)
{
    return (uint32_t)(test_xorshift(&rng_state) >> 16);
}

static uint8_t *make_text(size_t n)
{
    static const char *words[] = { "stream ", "part ", "magic ", "block\n", "chance ", "of ", "the " };
    uint8_t *b = malloc(n ? n : 1);
    size_t i = 0;
    while (i < n) {
        const char *w = words[rnd() % 7];
        for (; *w && i < n; w++)
            b[i++] = (uint8_t)*w;
        if (rnd() % 5 == 0 && i < n)
            b[i++] = (uint8_t)('0' + rnd() % 10);
    }
    return b;
}

static uint8_t *compress(const uint8_t *src, size_t n, int level, size_t *len)
{
    bz2_options o = { .level = level, .threads = 2 };
    uint8_t *out = NULL;
    gc_error err;
    ck_assert_msg(bz2_compress(src, n, &o, &out, len, &err) == GC_OK, "%s", err.msg);
    return out;
}

/* ---- the model of the stream hooks ---- */

typedef struct result {
    int rc;
    gc_error err;
    uint8_t *out;
    size_t out_len;
    int garbage;
    uint64_t garbage_at;
    unsigned reruns;
} result;

static void append(result *r, const uint8_t *p, size_t n)
{
    r->out = realloc(r->out, r->out_len + n + 1);
    memcpy(r->out + r->out_len, p, n);
    r->out_len += n;
}

/* Decode bz[from/8, to) from state st (its bit set from `from`); more: input follows `to`. */
static int decode(const uint8_t *bz, uint64_t from, size_t to, int more, bz2_dstate *st, uint8_t **o, size_t *ol,
                  size_t *used, gc_error *err)
{
    st->bit = (unsigned)(from % 8);
    size_t at = (size_t)(from / 8);
    return bz2_decompress_part(bz + at, to - at, more, st, 0, 2, NULL, o, ol, used, err);
}

/*
 * Parts begin at bits cuts[0..n) (ascending, each a magic bz2_find_part_start
 * found) and at bit 0; part k's input ends at the byte holding cut k's first
 * bit, so a decode from the right state stops exactly there.
 */
static result decode_in_parts(const uint8_t *bz, size_t len, const uint64_t *cuts, size_t n)
{
    result res = { .out = malloc(1) };
    size_t parts = n + 1;
    bz2_dstate *sp = calloc(parts, sizeof *sp);
    uint8_t **so = calloc(parts, sizeof *so);
    size_t *sl = calloc(parts, sizeof *sl), *su = calloc(parts, sizeof *su);
    int *src = calloc(parts, sizeof *src);
    /* every part at once, from its magic */
    for (size_t k = 1; k < parts; k++) {
        size_t to = k < n ? (size_t)((cuts[k] + 7) / 8) : len;
        gc_error e;
        bz2_dstate_at_magic(&sp[k], (unsigned)(cuts[k - 1] % 8));
        src[k] = decode(bz, cuts[k - 1], to, k < n, &sp[k], &so[k], &sl[k], &su[k], &e);
    }
    /* in order: confirm, or decode again from where the decode in front stopped */
    bz2_dstate st = { 0 };
    uint64_t end = 0;
    for (size_t k = 0; k < parts; k++) {
        size_t to = k < n ? (size_t)((cuts[k] + 7) / 8) : len;
        bz2_dstate next = st;
        uint8_t *o;
        size_t ol, used, base;
        if (k > 0 && src[k] == GC_OK && cuts[k - 1] == end && bz2_dstate_follow(&next, &sp[k])) {
            o = so[k];
            ol = sl[k];
            base = (size_t)(cuts[k - 1] / 8);
            used = su[k] + base;
            so[k] = NULL;
        } else {
            res.reruns += k > 0;
            next = st;
            int rc = decode(bz, end, to, k < n, &next, &o, &ol, &used, &res.err);
            if (rc != GC_OK) {
                res.rc = rc;
                break;
            }
            base = (size_t)(end / 8);
            used += base;
        }
        append(&res, o, ol);
        free(o);
        st = next;
        end = (uint64_t)used * 8 + st.bit;
        if (st.garbage) {
            res.garbage = 1;
            res.garbage_at = base + st.garbage_at;
            break;
        }
    }
    for (size_t k = 0; k < parts; k++)
        free(so[k]);
    free(sp);
    free(so);
    free(sl);
    free(su);
    free(src);
    return res;
}

/* Cuts as the stream hooks make them: the first magic from every `part` bytes on. */
static size_t auto_cuts(const uint8_t *bz, size_t len, size_t part, uint64_t *cuts, size_t max)
{
    size_t n = 0;
    uint64_t at;
    size_t from = part;
    while (n < max && from < len && bz2_find_part_start(bz, len, from, &at) == GC_OK) {
        cuts[n++] = at;
        from = (size_t)(at / 8) + part;
    }
    return n;
}

/* Parts decode to what bz2_decompress gives: output, or status and message and a prefix of its output. */
static result check_parts(const uint8_t *bz, size_t len, const uint64_t *cuts, size_t n)
{
    uint8_t *whole = NULL;
    size_t whole_len = 0;
    gc_error werr;
    int wrc = bz2_decompress(bz, len, 0, 2, &whole, &whole_len, &werr);
    result r = decode_in_parts(bz, len, cuts, n);
    if (wrc == GC_E_CORRUPT && r.rc == GC_OK && r.garbage) { /* trailing garbage: the stream keeps the data */
        ck_assert_msg(strstr(werr.msg, "trailing garbage"), "%s", werr.msg);
        return r;
    }
    ck_assert_msg(r.rc == wrc, "parts: %d (%s), whole: %d (%s)", r.rc, r.err.msg, wrc, werr.msg);
    if (wrc != GC_OK) {
        ck_assert_str_eq(r.err.msg, werr.msg);
        return r;
    }
    ck_assert_uint_eq(r.out_len, whole_len);
    ck_assert(memcmp(r.out, whole, whole_len) == 0);
    ck_assert(!r.garbage);
    free(whole);
    return r;
}

static void check_auto(const uint8_t *bz, size_t len, size_t part)
{
    uint64_t cuts[4096];
    size_t n = auto_cuts(bz, len, part, cuts, 4096);
    ck_assert_uint_gt(n, 1);
    result r = check_parts(bz, len, cuts, n);
    ck_assert_msg(r.reruns == 0, "%u parts decoded again with no chance magic at a cut", r.reruns);
    free(r.out);
}

/* ---- tests ---- */

START_TEST(test_find_part_start)
{
    /* both magics at every shift, and none whose 48 bits pass the end */
    static const uint64_t magics[] = { BZ2_BLOCK_MAGIC, BZ2_EOS_MAGIC };
    for (unsigned m = 0; m < 2; m++)
        for (unsigned shift = 0; shift < 8; shift++) {
            uint8_t buf[16] = { 0 };
            uint64_t at = 24 + shift, v = magics[m] << 16 >> shift; /* 48 bits at bit `shift` of a word */
            for (unsigned i = 0; i < 8; i++)
                buf[3 + i] |= (uint8_t)(v >> (56 - 8 * i));
            uint64_t bit;
            ck_assert_int_eq(bz2_find_part_start(buf, sizeof buf, 0, &bit), GC_OK);
            ck_assert_uint_eq(bit, at);
            ck_assert_int_eq(bz2_find_part_start(buf, sizeof buf, 4, &bit), GC_E_TRUNCATED);
            ck_assert_int_eq(bz2_find_part_start(buf, (size_t)((at + 47) / 8), 0, &bit), GC_E_TRUNCATED);
        }
}
END_TEST

START_TEST(test_parts_equal_whole_ours)
{
    size_t n = 3u << 20, len;
    uint8_t *t = make_text(n);
    for (int level = 1; level <= 9; level += 8) {
        uint8_t *bz = compress(t, n, level, &len);
        check_auto(bz, len, 5000);
        check_auto(bz, len, 20000);
        free(bz);
    }
    free(t);
}
END_TEST

/* An encoder's output for t (the tool is needed: CI installs it). */
static uint8_t *run_tool(const char *cmd, const uint8_t *in, size_t n, size_t *out_len)
{
    char path[] = "/tmp/check_bz2_parts_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert(write(fd, in, n) == (ssize_t)n);
    close(fd);
    char line[512];
    snprintf(line, sizeof line, "%s < %s", cmd, path);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 20, len = 0, got;
    uint8_t *buf = malloc(cap);
    while ((got = fread(buf + len, 1, cap - len, p)) > 0)
        if ((len += got) == cap)
            buf = realloc(buf, cap *= 2);
    ck_assert_msg(pclose(p) == 0, "%s failed (is it installed?)", cmd);
    unlink(path);
    *out_len = len;
    return buf;
}

START_TEST(test_parts_equal_whole_other_encoders)
{
    static const char *const cmds[] = { "bzip2 -c -1", "bzip2 -c -9", "lbzip2 -c -9 -n2", "pbzip2 -c -9 -p2",
                                        "pbzip2 -c -1 -p2 -b1" };
    size_t n = 4u << 20, len;
    uint8_t *t = make_text(n);
    memset(t + 100000, 'z', 400000); /* runs too */
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        uint8_t *bz = run_tool(cmds[k], t, n, &len);
        check_auto(bz, len, 5000);
        check_auto(bz, len, 20000);
        free(bz);
    }
    free(t);
}
END_TEST

/*
 * Data whose every block holds the block magic by chance: a block's map of
 * the byte values it uses (16 bits per group of 16 values, after 121 bits
 * of header) spells the magic in groups 1..3 when exactly the values of its
 * 1 bits in 16..63 occur, and all others do.
 */
static uint8_t *planted_magic_data(size_t n)
{
    uint8_t allowed[256];
    size_t na = 0;
    for (unsigned v = 0; v < 256; v++)
        if (v < 16 || v >= 64 || ((BZ2_BLOCK_MAGIC >> (47 - (v - 16))) & 1))
            allowed[na++] = (uint8_t)v;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = allowed[rnd() % na];
    return b;
}

#define PLANTED_AT (121 + 16) /* bits after a block's first bit */

START_TEST(test_chance_magic_at_a_cut_is_decoded_again)
{
    size_t n = 700000, len;
    uint8_t *t = planted_magic_data(n);
    uint8_t *bz = compress(t, n, 1, &len);
    /* the magics: true blocks, each followed PLANTED_AT bits later by a planted one */
    uint64_t cuts[64], at;
    size_t nc = 0, planted = 0;
    for (size_t from = 0; nc < 64 && bz2_find_part_start(bz, len, from, &at) == GC_OK; from = (size_t)(at / 8) + 1)
        cuts[nc++] = at;
    for (size_t i = 1; i < nc; i++)
        planted += cuts[i] - cuts[i - 1] == PLANTED_AT;
    ck_assert_uint_ge(planted, 4); /* 100k blocks of 700000 bytes: 7 of them */
    /* a cut at every planted magic: each part behind one is decoded again, from the right bit */
    uint64_t chance[64];
    size_t nch = 0;
    for (size_t i = 1; i < nc; i++)
        if (cuts[i] - cuts[i - 1] == PLANTED_AT)
            chance[nch++] = cuts[i];
    result r = check_parts(bz, len, chance, nch);
    ck_assert_uint_eq(r.reruns, nch);
    free(r.out);
    /* and cuts at every magic, true or not: only the chance ones cost a rerun */
    r = check_parts(bz, len, cuts, nc);
    ck_assert_uint_eq(r.reruns, nch);
    free(r.out);
    free(bz);
    free(t);
}
END_TEST

/* Two streams: cuts at the first one's end marker and at the second one's first block. */
START_TEST(test_stream_edge_at_a_cut)
{
    size_t n = 500000, l1, l2;
    uint8_t *t = make_text(n);
    uint8_t *a = compress(t, n, 1, &l1), *b = compress(t, n / 3, 9, &l2);
    uint8_t *cat = malloc(l1 + l2);
    memcpy(cat, a, l1);
    memcpy(cat + l1, b, l2);
    uint64_t eos, blk;
    ck_assert_int_eq(bz2_find_part_start(cat, l1, l1 - 11, &eos), GC_OK);
    ck_assert_int_eq(bz2_find_part_start(cat, l1 + l2, l1, &blk), GC_OK);
    ck_assert_uint_eq(blk, (uint64_t)(l1 + 4) * 8);
    uint64_t cuts[][2] = { { eos, blk } };
    result r = check_parts(cat, l1 + l2, cuts[0], 2);
    ck_assert_uint_eq(r.reruns, 0);
    ck_assert_uint_eq(r.out_len, n + n / 3);
    free(r.out);
    r = check_parts(cat, l1 + l2, &eos, 1);
    ck_assert_uint_eq(r.reruns, 0);
    free(r.out);
    r = check_parts(cat, l1 + l2, &blk, 1);
    ck_assert_uint_eq(r.reruns, 0);
    free(r.out);
    free(cat);
    free(a);
    free(b);
    free(t);
}
END_TEST

/* Trailing garbage holding a magic: the part cut there is dropped, the garbage found where it begins. */
START_TEST(test_garbage_at_a_cut)
{
    size_t n = 300000, len;
    uint8_t *t = make_text(n);
    uint8_t *bz = compress(t, n, 1, &len);
    static const uint8_t junk[] = { 'j', 'u', 'n', 'k', 0x31, 0x41, 0x59, 0x26, 0x53, 0x59, 1, 2, 3, 4, 5, 6, 7 };
    uint8_t *g = malloc(len + sizeof junk);
    memcpy(g, bz, len);
    memcpy(g + len, junk, sizeof junk);
    uint64_t cut = (uint64_t)(len + 4) * 8, at;
    ck_assert_int_eq(bz2_find_part_start(g, len + sizeof junk, len, &at), GC_OK);
    ck_assert_uint_eq(at, cut);
    result r = check_parts(g, len + sizeof junk, &cut, 1);
    ck_assert(r.garbage);
    ck_assert_uint_eq(r.garbage_at, len);
    ck_assert_uint_eq(r.out_len, n);
    ck_assert(memcmp(r.out, t, n) == 0);
    free(r.out);
    free(g);
    free(bz);
    free(t);
}
END_TEST

/* Damage in a later part: the same status and message as the whole decode, the parts before it kept. */
START_TEST(test_damage_and_truncation)
{
    size_t n = 2u << 20, len;
    uint8_t *t = make_text(n);
    uint8_t *bz = compress(t, n, 1, &len);
    uint64_t cuts[256];
    size_t nc = auto_cuts(bz, len, 5000, cuts, 256);
    ck_assert_uint_gt(nc, 4);
    uint8_t *bad = malloc(len);
    memcpy(bad, bz, len);
    size_t hit = (size_t)(cuts[2] / 8) + 3000;
    ck_assert_uint_lt(hit, (size_t)(cuts[3] / 8));
    bad[hit] ^= 0x55;
    result r = check_parts(bad, len, cuts, nc);
    ck_assert_int_ne(r.rc, GC_OK);
    ck_assert_uint_gt(r.out_len, 0);
    ck_assert(memcmp(r.out, t, r.out_len) == 0);
    free(r.out);
    for (size_t cut_len = len / 2; cut_len < len; cut_len += len / 5) { /* truncated inside a part */
        size_t n2 = 0;
        while (n2 < nc && cuts[n2] + 48 <= (uint64_t)cut_len * 8)
            n2++;
        r = check_parts(bz, cut_len, cuts, n2);
        ck_assert_int_eq(r.rc, GC_E_TRUNCATED);
        free(r.out);
    }
    free(bad);
    free(bz);
    free(t);
}
END_TEST

/* A part of a level-9 stream's blocks does not follow a level-1 stream's decode. */
START_TEST(test_follow_checks_level_and_crc)
{
    bz2_dstate prev = { .in_stream = 1, .level = 1, .stream_no = 2, .block_no = 3, .combined = 0x12345678 };
    bz2_dstate part;
    bz2_dstate_at_magic(&part, 0);
    part.head_max_nblock = 100001;
    part.block_no = 2;
    part.combined = 0xabcdef;
    bz2_dstate p = prev;
    ck_assert(!bz2_dstate_follow(&p, &part));
    ck_assert_uint_eq(p.block_no, 3);
    part.head_max_nblock = 100000;
    ck_assert(bz2_dstate_follow(&p, &part));
    ck_assert_uint_eq(p.block_no, 5);
    ck_assert_uint_eq(p.stream_no, 2);
    ck_assert_uint_eq(p.combined, bz2_combine_parts(0x12345678, 2, 0xabcdef));
    /* the head stream ended in the part: its stored CRC must be all its blocks' */
    bz2_dstate_at_magic(&part, 0);
    part.head = 0;
    part.head_ended = 1;
    part.head_blocks = 1;
    part.head_combined = 7;
    part.head_stored = bz2_combine_parts(0x12345678, 1, 7) ^ 1;
    part.in_stream = 0;
    part.stream_no = 2;
    p = prev;
    ck_assert(!bz2_dstate_follow(&p, &part));
    part.head_stored ^= 1;
    ck_assert(bz2_dstate_follow(&p, &part));
    ck_assert_uint_eq(p.stream_no, 3);
    ck_assert(!p.in_stream);
    /* nothing follows a decode between streams or after garbage */
    bz2_dstate between = { .level = 9, .stream_no = 1 };
    bz2_dstate_at_magic(&part, 0);
    ck_assert(!bz2_dstate_follow(&between, &part));
}
END_TEST

static Suite *parts_suite(void)
{
    Suite *s = suite_create("bz2_parts");
    TCase *tc = tcase_create("parts");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_find_part_start);
    tcase_add_test(tc, test_follow_checks_level_and_crc);
    tcase_add_test(tc, test_parts_equal_whole_ours);
    tcase_add_test(tc, test_parts_equal_whole_other_encoders);
    tcase_add_test(tc, test_chance_magic_at_a_cut_is_decoded_again);
    tcase_add_test(tc, test_stream_edge_at_a_cut);
    tcase_add_test(tc, test_garbage_at_a_cut);
    tcase_add_test(tc, test_damage_and_truncation);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(parts_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
