/*
 * bz2_dec_walk.cu - the decoder's framing walk (host side), see
 * bz2_dec_walk.cuh, and the words of the stages' verdicts. The same
 * acceptance rules as the CPU engine's bz2_stream.c; the messages name
 * stream and block the same way. Plain C++: its fuzzer builds it without
 * CUDA (tests/fuzz/fuzz_bz2_dec_walk.cc).
 */
#include <string.h>

#include <algorithm>

#include "bz2_dec_walk.cuh"

namespace gcgpu {

const char *bz2_dec_error(uint32_t e)
{
    static const char *const words[kDecErrorCount] = {
        "no error",
        "input ends inside the block",
        "symbol map is empty",
        "invalid number of Huffman tables",
        "no selectors",
        "selector out of range",
        "code length out of range",
        "more symbol groups than selectors",
        "invalid Huffman code",
        "zero run exceeds the block size",
        "block exceeds 900000 bytes",
        "origPtr out of range",
        "the BWT column is not one cycle from origPtr",
        "block ends inside a run (count byte missing)",
        "block CRC mismatch",
    };
    return e < kDecErrorCount ? words[e] : "unknown decoder error";
}

int bz2_dec_status(uint32_t e)
{
    switch (e) {
    case kDecOk: return GC_OK;
    case kDecTruncated: return GC_E_TRUNCATED;
    case kDecCrc: return GC_E_CRC;
    default: return GC_E_CORRUPT;
    }
}

namespace {

/* n (<= 57) bits at bit pos, from w.known or the device. */
int bits_at(DecWalk &w, const DecPeek &peek, uint64_t pos, int n, uint64_t *v, gc_error *err)
{
    if (w.known_at == UINT64_MAX || pos < w.known_at || pos + (uint64_t)n > w.known_at + 128) {
        int rc = peek(pos / 8, w.known, err);
        if (rc != GC_OK)
            return rc;
        w.known_at = pos / 8 * 8;
    }
    uint64_t off = pos - w.known_at, x = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = off + (uint64_t)i;
        x = x << 1 | ((w.known[b / 8] >> (7 - b % 8)) & 1u);
    }
    *v = x;
    return GC_OK;
}

/* A piece cut by the end of the input: wait for the rest, if it may come. */
bool stop_for_more(DecWalk &w)
{
    if (!w.more)
        return false;
    w.stopped = w.done = true;
    return true;
}

/* A stream header at w.pos (byte aligned), or the end of the input. */
int walk_header(DecWalk &w, const DecPeek &peek, gc_error *err)
{
    uint64_t left = (w.len_bits - w.pos) / 8;
    if (left == 0) {
        if (w.sno == 0 && !w.seen_any && !stop_for_more(w))
            return gc_fail(err, GC_E_TRUNCATED, "bzip2: empty input");
        w.done = true;
        return GC_OK;
    }
    uint64_t h = 0;
    int rc = bits_at(w, peek, w.pos, 32, &h, err);
    if (rc != GC_OK)
        return rc;
    uint8_t b[4] = { (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h };
    size_t cmp = left < 3 ? (size_t)left : 3;
    int level = left > 3 ? b[3] - '0' : 0;
    if (memcmp(b, BZ2_STREAM_MAGIC, cmp) != 0 || (left > 3 && (level < 1 || level > 9))) {
        if (w.sno == 0)
            return gc_fail(err, GC_E_CORRUPT, "bzip2: not a bzip2 stream (bad header)");
        if (w.partial) { /* the stream's answer says so; the output stands */
            w.garbage = w.done = true;
            w.garbage_at = w.pos / 8;
            return GC_OK;
        }
        return gc_fail(err, GC_E_CORRUPT, "bzip2: trailing garbage after stream %u", w.sno);
    }
    if (left < 4 && stop_for_more(w))
        return GC_OK;
    if (left < 4)
        return gc_fail(err, GC_E_TRUNCATED, "bzip2: stream %u: input ends inside the stream header", w.sno + 1);
    w.sno++;
    w.bno = 0;
    w.level = level;
    w.combined = 0;
    w.pos += 32;
    w.in_stream = true;
    return GC_OK;
}

/* The end-of-stream marker at w.pos: check the stream CRC (a head stream's: record it). */
int walk_eos(DecWalk &w, const DecPeek &peek, gc_error *err)
{
    if (w.pos + 80 > w.len_bits && stop_for_more(w))
        return GC_OK;
    if (w.pos + 80 > w.len_bits)
        return gc_fail(err, GC_E_TRUNCATED, "bzip2: stream %u: input ends inside the stream CRC", w.sno);
    uint64_t stored = 0;
    int rc = bits_at(w, peek, w.pos + 48, 32, &stored, err);
    if (rc != GC_OK)
        return rc;
    if (w.head) {
        w.head = false;
        w.head_ended = true;
        w.head_blocks = w.bno;
        w.head_combined = w.combined;
        w.head_stored = (uint32_t)stored;
    } else if ((uint32_t)stored != w.combined) {
        return gc_fail(err, GC_E_CRC, "bzip2: stream %u: stream CRC mismatch (stored 0x%08x, computed 0x%08x)",
                       w.sno, (uint32_t)stored, w.combined);
    }
    w.pos = (w.pos + 80 + 7) & ~7ull;
    w.in_stream = false;
    return GC_OK;
}

/*
 * Take candidate ci (decoded in res) as the stream's next block. A block
 * may use BZ2_MAX_BLOCK_COMPRESSED from the byte of its first bit, as in the CPU
 * engine: one that needs more is corrupt wherever the input is cut.
 */
int walk_block(DecWalk &w, uint32_t ci, const DecCand &r, std::vector<DecAccepted> &acc, gc_error *err)
{
    uint64_t cap_bits = (w.pos / 8 + BZ2_MAX_BLOCK_COMPRESSED) * 8;
    bool too_long =
        cap_bits < w.len_bits && (r.status == kDecTruncated || (r.status == kDecOk && r.end_bit > cap_bits));
    if (!too_long && r.status == kDecTruncated && stop_for_more(w))
        return GC_OK;
    w.bno++;
    if (too_long)
        return gc_fail(err, GC_E_CORRUPT, "bzip2: stream %u block %u: compressed block exceeds %llu bytes", w.sno,
                       w.bno, (unsigned long long)BZ2_MAX_BLOCK_COMPRESSED);
    w.skipped += w.last_cand == UINT32_MAX ? ci : ci - w.last_cand - 1;
    w.last_cand = ci;
    if (r.status != kDecOk)
        return gc_fail(err, (gc_status)bz2_dec_status(r.status), "bzip2: stream %u block %u: %s", w.sno, w.bno,
                       bz2_dec_error(r.status));
    if (r.n > (uint32_t)w.level * 100000u)
        return gc_fail(err, GC_E_CORRUPT, "bzip2: stream %u block %u: block length %u exceeds level %d", w.sno,
                       w.bno, r.n, w.level);
    if (w.skipped > kDecFalseSlack + w.accepted)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: %llu of the block magics found are not blocks",
                       (unsigned long long)w.skipped);
    if (w.head)
        w.head_max_n = std::max(w.head_max_n, r.n);
    acc.push_back(DecAccepted{ ci, w.sno, w.bno, 0 });
    w.accepted++;
    w.combined = bz2_combine_crc(w.combined, r.crc);
    w.pos = r.end_bit;
    w.known_at = r.end_bit;
    memcpy(w.known, r.tail, sizeof w.known);
    return GC_OK;
}

} // namespace

int bz2_dec_walk(DecWalk &w, const uint64_t *cand, uint32_t ncand, uint32_t c0, uint32_t c1, const DecCand *res,
                 const DecPeek &peek, std::vector<DecAccepted> &acc, uint32_t *next, gc_error *err)
{
    *next = UINT32_MAX;
    while (!w.done) {
        int rc;
        if (!w.in_stream) {
            rc = walk_header(w, peek, err);
        } else if (w.pos + 48 > w.len_bits) {
            rc = stop_for_more(w) ? GC_OK
                                  : gc_fail(err, GC_E_TRUNCATED,
                                            "bzip2: stream %u: input ends before the end-of-stream marker", w.sno);
        } else {
            const uint64_t *at = std::lower_bound(cand, cand + ncand, w.pos);
            uint32_t ci = (uint32_t)(at - cand);
            if (ci < ncand && *at == w.pos) {
                if (ci >= c1 || ci < c0) {
                    *next = ci;
                    return GC_OK;
                }
                rc = walk_block(w, ci, res[ci - c0], acc, err);
            } else {
                uint64_t magic = 0;
                rc = bits_at(w, peek, w.pos, 48, &magic, err);
                if (rc == GC_OK && magic == BZ2_EOS_MAGIC)
                    rc = walk_eos(w, peek, err);
                else if (rc == GC_OK)
                    rc =
                        gc_fail(err, GC_E_CORRUPT, "bzip2: stream %u block %u: bad block magic", w.sno, w.bno + 1);
            }
        }
        if (rc != GC_OK)
            return rc;
    }
    return GC_OK;
}

void bz2_dec_walk_resume(DecWalk &w, const bz2_dstate &p, bool more)
{
    w.partial = true;
    w.more = more;
    w.pos = p.bit;
    w.in_stream = p.in_stream != 0;
    w.level = p.level ? p.level : 9;
    w.combined = p.combined;
    w.sno = p.stream_no;
    w.bno = p.block_no;
    w.seen_any = p.seen_any != 0;
    w.head = p.head != 0;
    w.head_max_n = p.head_max_nblock;
    w.head_ended = p.head_ended != 0;
    w.head_blocks = p.head_blocks;
    w.head_combined = p.head_combined;
    w.head_stored = p.head_stored;
    if (p.garbage) /* nothing more is decoded: the rest is dropped */
        w.done = w.garbage = true;
}

void bz2_dec_walk_part(const DecWalk &w, uint64_t len, bz2_dstate *p, size_t *used)
{
    bool was_garbage = p->garbage != 0;
    *used = w.stopped ? (size_t)(w.pos / 8) : (size_t)len;
    p->bit = w.stopped ? (unsigned)(w.pos % 8) : 0;
    p->in_stream = w.in_stream;
    p->level = w.level;
    p->combined = w.combined;
    p->stream_no = w.sno;
    p->block_no = w.bno;
    p->seen_any = w.seen_any || len > 0;
    if (w.garbage && !was_garbage) {
        p->garbage = 1;
        p->garbage_at = w.garbage_at;
    }
    p->head = w.head;
    p->head_max_nblock = w.head_max_n;
    p->head_ended = w.head_ended;
    p->head_blocks = w.head_blocks;
    p->head_combined = w.head_combined;
    p->head_stored = w.head_stored;
    p->soft_stopped = 0; /* the walk has no early stop */
}

} // namespace gcgpu
