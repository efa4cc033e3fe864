/*
 * check_bz2_dec_walk.cc - the GPU bzip2 decoder's framing walk
 * (codecs/bzip2/cuda/dec/bz2_dec_walk.cu) decoding a decompress stream's
 * part on a CPU-only host: the walk is plain C++, and the CPU engine's
 * first stage stands in for the device's Huffman stage
 * (tests/fuzz/bz2_walk_model.c), as in the walk's fuzzer.
 *
 * A part that begins at a block or end magic inside a stream (the "head"
 * stream, bz2_dstate_at_magic) must leave exactly the bz2_dstate the CPU
 * engine's bz2_decompress_part leaves for the same input: the head
 * stream's end-of-stream CRC recorded and not checked, its longest block
 * kept, so that bz2_dstate_follow confirms a GPU part as it confirms a
 * CPU one (at levels below 9 too). Every check outside the head stays.
 * The device's own run of the same cases is tests/gpu/test_gpu_bzip2_dec.cu
 * ("stream parts").
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

/* The walk is plain C++ in a .cu file (nvcc builds it into the daemon's
 * CUDA library): a CPU-only build compiles it here. */
#include "bz2_dec_walk.cu"
#include "bzip2.h"
extern "C" {
#include "fuzz/bz2_walk_model.h"
#include "test_rng.h"
}

using namespace gcgpu;

typedef std::vector<uint8_t> Bytes;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    return (uint32_t)(test_xorshift(&rng_state) >> 16);
}

static Bytes make_text(size_t n)
{
    static const char *words[] = { "walk ", "head ", "stream ", "block\n", "magic ", "of ", "the " };
    Bytes b;
    while (b.size() < n) {
        for (const char *w = words[rnd() % 7]; *w && b.size() < n; w++)
            b.push_back((uint8_t)*w);
        if (rnd() % 5 == 0 && b.size() < n)
            b.push_back((uint8_t)('0' + rnd() % 10));
    }
    return b;
}

static Bytes compress(const Bytes &src, int level)
{
    bz2_options o = { level, 2, nullptr };
    uint8_t *out = nullptr;
    size_t len = 0;
    gc_error err;
    ck_assert_msg(bz2_compress(src.data(), src.size(), &o, &out, &len, &err) == GC_OK, "%s", err.msg);
    Bytes s(out, out + len);
    free(out);
    return s;
}

/* Streams of `piece` input bytes each, one after the other, as pbzip2 writes a file. */
static Bytes many_streams(size_t total, size_t piece, int level)
{
    Bytes text = make_text(total), all;
    for (size_t at = 0; at < total; at += piece) {
        Bytes one(text.begin() + (long)at, text.begin() + (long)std::min(total, at + piece));
        Bytes s = compress(one, level);
        all.insert(all.end(), s.begin(), s.end());
    }
    return all;
}

static uint64_t bits_at(const uint8_t *p, size_t len, uint64_t bit, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++, bit++) {
        uint64_t byte = bit / 8;
        v = v << 1 | (byte < len ? (p[byte] >> (7 - bit % 8)) & 1u : 0u);
    }
    return v;
}

static DecCand candidate(const uint8_t *p, size_t len, uint64_t bit)
{
    bz2_walk_cand m;
    bz2_walk_model(p, len, bit, &m);
    DecCand c;
    memset(&c, 0, sizeof c);
    c.status = m.status == 0 ? kDecOk : m.status == 1 ? kDecTruncated : kDecBadCode;
    c.n = m.n;
    c.orig = m.orig;
    c.crc = m.crc;
    c.rand = m.rand;
    c.end_bit = m.end_bit;
    for (int k = 0; k < 16; k++)
        c.tail[k] = (uint8_t)bits_at(p, len, m.end_bit + 8u * (uint64_t)k, 8);
    return c;
}

/* src[0..len) from state *st as the device decoder walks it (waves of four candidates, so
 * the walk resumes between waves as the driver's does): its status, *st and *used after. */
static int gpu_walk(const uint8_t *src, size_t len, bool more, bz2_dstate *st, size_t *used, gc_error *err)
{
    std::vector<uint64_t> cand;
    for (uint64_t bit = 0; bit + 48 <= (uint64_t)len * 8; bit++)
        if (bits_at(src, len, bit, 48) == BZ2_BLOCK_MAGIC)
            cand.push_back(bit);
    DecWalk w;
    w.len_bits = (uint64_t)len * 8;
    bz2_dec_walk_resume(w, *st, more);
    DecPeek peek = [&](uint64_t at, uint8_t out[16], gc_error *) {
        memset(out, 0, 16);
        for (uint64_t k = 0; k < 16 && at + k < len; k++)
            out[k] = src[at + k];
        return (int)GC_OK;
    };
    std::vector<DecAccepted> acc;
    std::vector<DecCand> res;
    uint32_t n = (uint32_t)cand.size(), c0 = 0;
    for (;;) {
        uint32_t c1 = std::min(n, c0 + 4), next = UINT32_MAX;
        res.clear();
        for (uint32_t i = c0; i < c1; i++)
            res.push_back(candidate(src, len, cand[i]));
        int rc = bz2_dec_walk(w, cand.data(), n, c0, c1, res.data(), peek, acc, &next, err);
        if (rc != GC_OK)
            return rc;
        if (w.done)
            break;
        ck_assert_msg(next != UINT32_MAX && next >= c1, "the walk stopped without asking for a later wave");
        c0 = next;
    }
    bz2_dec_walk_part(w, len, st, used);
    return GC_OK;
}

static int cpu_part(const uint8_t *src, size_t len, bool more, bz2_dstate *st, size_t *used, gc_error *err)
{
    uint8_t *out = nullptr;
    size_t out_len = 0;
    int rc = bz2_decompress_part(src, len, more, st, 0, 2, nullptr, &out, &out_len, used, err);
    free(out);
    return rc;
}

#define SAME(f)                                                                                        \
    ck_assert_msg(g.f == c.f, "%s: " #f ": walk %llu, CPU engine %llu", what, (unsigned long long)g.f, \
                  (unsigned long long)c.f)

static void same_state(const char *what, const bz2_dstate &g, const bz2_dstate &c)
{
    SAME(bit);
    SAME(in_stream);
    SAME(level);
    SAME(combined);
    SAME(stream_no);
    SAME(block_no);
    SAME(garbage);
    SAME(garbage_at);
    SAME(seen_any);
    SAME(out_soft);
    SAME(head);
    SAME(head_max_nblock);
    SAME(head_ended);
    SAME(head_blocks);
    SAME(head_combined);
    SAME(head_stored);
    SAME(soft_stopped);
}

/* The part from magic bit `from` to the byte holding bit `to` (the next part's first bit; the
 * input's end: more == false) decoded from bz2_dstate_at_magic by both: the same status, used
 * bytes and state. Returns that state (or the status, through *rc). */
static bz2_dstate both_at_magic(const Bytes &bz, uint64_t from, uint64_t to, bool more, const char *what, int *rc)
{
    size_t at = (size_t)(from / 8), end = (size_t)((to + 7) / 8);
    bz2_dstate g, c;
    bz2_dstate_at_magic(&g, (unsigned)(from % 8));
    bz2_dstate_at_magic(&c, (unsigned)(from % 8));
    size_t gu = 0, cu = 0;
    gc_error ge, ce;
    memset(&ge, 0, sizeof ge);
    memset(&ce, 0, sizeof ce);
    int grc = gpu_walk(bz.data() + at, end - at, more, &g, &gu, &ge);
    int crc = cpu_part(bz.data() + at, end - at, more, &c, &cu, &ce);
    ck_assert_msg(grc == crc, "%s: walk %s \"%s\", CPU engine %s \"%s\"", what, gc_status_str(grc), ge.msg,
                  gc_status_str(crc), ce.msg);
    *rc = crc;
    if (crc == GC_OK) {
        ck_assert_msg(gu == cu, "%s: walk used %zu bytes, CPU engine %zu", what, gu, cu);
        same_state(what, g, c);
    }
    return c;
}

/* Every real magic of bz (block and end-of-stream), ascending. */
static std::vector<uint64_t> magics(const Bytes &bz)
{
    std::vector<uint64_t> m;
    uint64_t bit;
    size_t from = 0;
    while (bz2_find_part_start(bz.data(), bz.size(), from, &bit) == GC_OK) {
        m.push_back(bit);
        from = (size_t)(bit / 8) + 1;
    }
    return m;
}

/* The decode of bz up to the byte holding bit `to`, from its start, in one CPU call: the state
 * a part beginning at `to` follows. */
static bz2_dstate prefix_state(const Bytes &bz, uint64_t to)
{
    bz2_dstate st;
    memset(&st, 0, sizeof st);
    size_t used = 0;
    gc_error e;
    int rc = cpu_part(bz.data(), (size_t)((to + 7) / 8), true, &st, &used, &e);
    ck_assert_msg(rc == GC_OK, "prefix: %s", e.msg);
    ck_assert_msg((uint64_t)used * 8 + st.bit == to, "the prefix decode did not stop at the part's first bit");
    return st;
}

/*
 * Parts of bz beginning at every `stride`-th magic (every one: 1), each to
 * the next such magic: both decoders agree on each, and each is confirmed
 * by the decode in front of it, the state after it being the one-call
 * decode's. Returns the number of parts whose head stream ended inside.
 */
static unsigned check_parts(const char *name, const Bytes &bz, size_t stride)
{
    std::vector<uint64_t> m = magics(bz), cuts;
    for (size_t k = 1; k < m.size(); k += stride)
        cuts.push_back(m[k]);
    ck_assert_msg(!cuts.empty(), "%s: no magic", name);
    unsigned head_ended = 0;
    for (size_t k = 0; k < cuts.size(); k++) {
        bool more = k + 1 < cuts.size();
        uint64_t to = more ? cuts[k + 1] : (uint64_t)bz.size() * 8;
        std::string what =
            std::string(name) + ", part " + std::to_string(k + 1) + " at bit " + std::to_string(cuts[k]);
        int rc;
        bz2_dstate part = both_at_magic(bz, cuts[k], to, more, what.c_str(), &rc);
        ck_assert_msg(rc == GC_OK, "%s: refused", what.c_str());
        head_ended += part.head_ended != 0;
        bz2_dstate prev = prefix_state(bz, cuts[k]);
        ck_assert_msg(bz2_dstate_follow(&prev, &part), "%s: not confirmed by the decode in front", what.c_str());
        if (more)
            same_state(what.c_str(), prev, prefix_state(bz, to));
    }
    return head_ended;
}

START_TEST(test_head_level_1)
{
    /* level 1: blocks of at most 100000 bytes, which the head's longest block must prove */
    Bytes bz = compress(make_text(700000), 1);
    ck_assert_uint_gt(check_parts("ours -1", bz, 1), 0);
    ck_assert_uint_gt(check_parts("ours -1, every 3rd magic", bz, 3), 0);
}
END_TEST

START_TEST(test_head_level_9)
{
    Bytes bz = compress(make_text(2600000), 9);
    ck_assert_uint_gt(check_parts("ours -9", bz, 1), 0);
}
END_TEST

START_TEST(test_head_many_streams)
{
    /* one stream per 200 kB of input, two blocks each at level 1: every other magic is an end marker */
    Bytes bz = many_streams(1500000, 200000, 1);
    ck_assert_uint_gt(check_parts("streams of 200 kB at -1", bz, 1), 4);
    ck_assert_uint_gt(check_parts("streams of 200 kB at -1, every 2nd magic", bz, 2), 4);
    ck_assert_uint_gt(check_parts("streams of 200 kB at -1, every 5th magic", bz, 5), 0);
    Bytes b9 = many_streams(1000000, 300000, 9); /* one block a stream */
    ck_assert_uint_gt(check_parts("streams of 300 kB at -9", b9, 1), 2);
}
END_TEST

/* A part that begins at an end marker (its head stream has no block in it) and one that begins
 * at the first block of the next stream: the edges just before and just after an end marker. */
START_TEST(test_edge_at_end_marker)
{
    Bytes a = compress(make_text(150000), 1), b = compress(make_text(150000), 1), bz = a;
    bz.insert(bz.end(), b.begin(), b.end());
    std::vector<uint64_t> m = magics(bz);
    uint64_t eos = 0, next_block = 0;
    for (size_t k = 0; k + 1 < m.size(); k++)
        if (bits_at(bz.data(), bz.size(), m[k], 48) == BZ2_EOS_MAGIC) {
            eos = m[k];
            next_block = m[k + 1];
            break;
        }
    ck_assert_uint_gt(eos, 0);
    ck_assert_uint_eq(next_block, (uint64_t)a.size() * 8 + 32); /* after the next stream's header */
    int rc;
    /* the head ends at once: no block, its CRC recorded; then the second stream whole */
    bz2_dstate p = both_at_magic(bz, eos, (uint64_t)bz.size() * 8, false, "from the end marker", &rc);
    ck_assert_int_eq(rc, GC_OK);
    ck_assert_int_eq(p.head_ended, 1);
    ck_assert_uint_eq(p.head_blocks, 0);
    ck_assert_uint_eq(p.stream_no, 2);
    bz2_dstate prev = prefix_state(bz, eos);
    ck_assert(bz2_dstate_follow(&prev, &p));
    /* the part in front of it stops exactly at the end marker */
    p = both_at_magic(bz, m[0], eos, true, "up to the end marker", &rc);
    ck_assert_int_eq(rc, GC_OK);
    ck_assert_int_eq(p.head, 1);
    ck_assert_int_eq(p.head_ended, 0);
    /* up to the next stream's first block: the head stream ends, the next one begins, no block yet */
    p = both_at_magic(bz, m[0], next_block, true, "across the end marker", &rc);
    ck_assert_int_eq(rc, GC_OK);
    ck_assert_int_eq(p.head_ended, 1);
    ck_assert_int_eq(p.in_stream, 1);
    ck_assert_uint_eq(p.block_no, 0);
    /* and a part beginning at that first block is a head stream of its own */
    p = both_at_magic(bz, next_block, (uint64_t)bz.size() * 8, false, "from the next stream's first block", &rc);
    ck_assert_int_eq(rc, GC_OK);
    ck_assert_int_eq(p.head_ended, 1);
    prev = prefix_state(bz, next_block);
    ck_assert(bz2_dstate_follow(&prev, &p));
}
END_TEST

/* The head stream's stored CRC is only recorded (a wrong one is refused by bz2_dstate_follow);
 * a later stream's, which the part saw whole, still fails the walk as it fails the CPU engine. */
START_TEST(test_checks_outside_the_head_stay)
{
    Bytes a = compress(make_text(250000), 1), b = compress(make_text(250000), 1), bz = a;
    bz.insert(bz.end(), b.begin(), b.end());
    std::vector<uint64_t> m = magics(bz);
    /* the first stream's stored CRC: the 32 bits after its end magic */
    uint64_t eos1 = 0;
    for (uint64_t x : m)
        if (bits_at(bz.data(), bz.size(), x, 48) == BZ2_EOS_MAGIC) {
            eos1 = x;
            break;
        }
    ck_assert_uint_gt(eos1, 0);
    Bytes bad = bz;
    uint64_t crc_bit = eos1 + 48 + 5;
    bad[crc_bit / 8] ^= (uint8_t)(0x80u >> (crc_bit % 8));
    int rc;
    bz2_dstate p = both_at_magic(bad, m[1], (uint64_t)bad.size() * 8, false, "a wrong head CRC", &rc);
    ck_assert_int_eq(rc, GC_OK);
    ck_assert_int_eq(p.head_ended, 1);
    bz2_dstate prev = prefix_state(bad, m[1]);
    ck_assert_msg(!bz2_dstate_follow(&prev, &p), "a head stream with a wrong stored CRC was confirmed");
    /* the second stream's stored CRC is checked by the walk itself */
    Bytes bad2 = bz;
    size_t last = bad2.size() - 2; /* inside the second stream's stored CRC (or its padding) */
    bad2[last] ^= 0x10;
    both_at_magic(bad2, m[1], (uint64_t)bad2.size() * 8, false, "a wrong CRC after the head", &rc);
    ck_assert_int_eq(rc, GC_E_CRC);
    /* a level-9 head's longest block is recorded as it is: a level-1 stream in front refuses it */
    Bytes big = compress(make_text(400000), 9);
    p = both_at_magic(big, 32, (uint64_t)big.size() * 8, false, "a level-9 block", &rc);
    ck_assert_int_eq(rc, GC_OK);
    ck_assert_uint_gt(p.head_max_nblock, 100000);
}
END_TEST

static Suite *walk_suite(void)
{
    Suite *s = suite_create("bz2_dec_walk");
    TCase *tc = tcase_create("head");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_head_level_1);
    tcase_add_test(tc, test_head_level_9);
    tcase_add_test(tc, test_head_many_streams);
    tcase_add_test(tc, test_edge_at_end_marker);
    tcase_add_test(tc, test_checks_outside_the_head_stay);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(walk_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
