/*
 * bz2_stream.c - stream framing and the bzip2.h API.
 *
 * Compression: split the input into blocks (bz2_rle1_plan, one cheap
 * walk over tiles the threads count first), encode every block into its own bit buffer in parallel, then
 * concatenate at bit granularity between the stream header and the
 * end-of-stream marker. Blocks do not depend on each other, so the bytes
 * are the same for every thread count.
 *
 * Decompression: blocks are found by scanning for the 48-bit block magic
 * at every bit offset. The pool decodes candidates ahead of a walk from the
 * stream header (bz2_spec.c), which accepts a candidate only where the
 * previous block ended, so false positives inside compressed data are
 * discarded and the result equals sequential decoding. If too many
 * candidates turn out false, speculation stops (bounded waste).
 * The walk is written once, for the streamed decode (bz2_decompress_part:
 * stop before a piece the input cuts, resume from bz2_dstate);
 * bz2_decompress is its single call with more = 0.
 *
 * Streamed compression: bz2_compress_counted, bz2_stream_body and
 * bz2_splice* (docs/BZIP2.md, "Streaming").
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_spec.h"
#include "bz2_stages.h"
#include "bzip2.h"
#include "parallel.h"

/* ------------------------------------------------------------------ */
/* compression                                                         */

size_t bz2_compress_bound(size_t src_len, int level)
{
    if (level < 1 || level > 9)
        level = 9;
    /* RLE1 grows data by <= 5/4; MTF symbols cost <= 17 bits; per block
     * headers/tables/selectors take < 8 KiB; plus stream framing. */
    size_t rle = src_len + src_len / 4 + 8;
    size_t blocks = rle / (bz2_block_limit(level) / 2) + 1;
    return rle / 8 * 17 + 17 + blocks * 8192 + 64;
}

typedef struct cjob {
    const uint8_t *src;
    const size_t *starts;
    size_t limit;
    unsigned flags;
    bz2_bitwriter *bits;
    uint32_t *crcs;
    uint64_t *nbits; /* exact bit length of each block */
    int *rcs;
    const gc_job *job;
} cjob;

static void compress_one(void *ctx, size_t i)
{
    cjob *j = ctx;
    size_t n = j->starts[i + 1] - j->starts[i];
    if (gc_job_cancelled(j->job)) { /* the rest of the blocks are not worth starting */
        j->rcs[i] = GC_E_IO;
        return;
    }
    bz2_bw_init(&j->bits[i], n / 2 + 1024);
    j->rcs[i] = bz2_encode_block(j->src + j->starts[i], n, j->limit, j->flags, &j->bits[i], &j->crcs[i]);
    j->nbits[i] = bz2_bw_bits(&j->bits[i]);
    bz2_bw_flush(&j->bits[i]); /* pad to whole bytes; nbits keeps the length */
}

static int compress_impl(const uint8_t *src, size_t src_len, const bz2_options *opt, unsigned flags, uint8_t **dst,
                         size_t *dst_len, uint32_t *blocks, gc_error *err)
{
    int level = opt ? opt->level : 9;
    unsigned threads = opt ? opt->threads : 0;
    if (level == 0)
        level = 9;
    if (!dst || !dst_len || (!src && src_len))
        return gc_fail(err, GC_E_INVALID, "bzip2: invalid arguments");
    if (level < 1 || level > 9)
        return gc_fail(err, GC_E_INVALID, "bzip2: level %d out of range 1..9", level);
    *dst = NULL;
    *dst_len = 0;

    size_t *starts = NULL;
    size_t limit = bz2_block_limit(level);
    size_t nb = bz2_rle1_plan(src, src_len, limit, threads, &starts);
    if (nb == (size_t)-1)
        return gc_fail(err, GC_E_NOMEM, "bzip2: out of memory");
    cjob job = { .src = src,
                 .starts = starts,
                 .limit = limit + BZ2_BLOCK_OVERSHOOT,
                 .flags = flags,
                 .job = opt ? opt->job : NULL };
    job.bits = calloc(nb + 1, sizeof *job.bits);
    job.crcs = calloc(nb + 1, sizeof *job.crcs);
    job.rcs = calloc(nb + 1, sizeof *job.rcs);
    uint64_t *nbits = calloc(nb + 1, sizeof *nbits);
    job.nbits = nbits;
    int rc = GC_E_NOMEM;
    if (!job.bits || !job.crcs || !job.rcs || !nbits)
        goto out;
    gc_parallel_for(nb, threads, compress_one, &job);
    uint64_t total_bits = 32 + 80;
    for (size_t i = 0; i < nb; i++) {
        if (job.rcs[i] != GC_OK) {
            rc = job.rcs[i];
            goto out;
        }
        total_bits += nbits[i];
    }
    /* One word-at-a-time pass (bz2_splice) into a buffer of the exact size. */
    size_t cap = (size_t)(total_bits / 8) + 16, o;
    uint8_t *buf = malloc(cap);
    if (!buf)
        goto out;
    bz2_splicer sp = { 0 };
    o = bz2_splice_header(&sp, level, buf);
    uint32_t combined = 0;
    for (size_t i = 0; i < nb; i++) {
        o += bz2_splice(&sp, job.bits[i].buf, nbits[i], buf + o);
        combined = bz2_combine_crc(combined, job.crcs[i]);
    }
    o += bz2_splice_finish(&sp, combined, buf + o);
    *dst = buf;
    *dst_len = o;
    if (blocks)
        *blocks = (uint32_t)nb;
    rc = GC_OK;
out:
    for (size_t i = 0; job.bits && i < nb; i++)
        bz2_bw_free(&job.bits[i]);
    free(job.bits);
    free(job.crcs);
    free(job.rcs);
    free(nbits);
    free(starts);
    if (rc == GC_E_IO)
        return gc_fail(err, rc, "bzip2: cancelled");
    if (rc == GC_E_INVALID) /* bz2_encode_block: a block outgrew the plan */
        return gc_fail(err, rc, "bzip2: the input changed while it was being compressed");
    if (rc != GC_OK)
        return gc_fail(err, rc, "bzip2: out of memory while compressing");
    gc_error_clear(err);
    return GC_OK;
}

int bz2_compress_ex(const uint8_t *src, size_t src_len, const bz2_options *opt, unsigned flags, uint8_t **dst,
                    size_t *dst_len, gc_error *err)
{
    return compress_impl(src, src_len, opt, flags, dst, dst_len, NULL, err);
}

int bz2_compress(const uint8_t *src, size_t src_len, const bz2_options *opt, uint8_t **dst, size_t *dst_len,
                 gc_error *err)
{
    return compress_impl(src, src_len, opt, 0, dst, dst_len, NULL, err);
}

int bz2_compress_counted(const uint8_t *src, size_t src_len, const bz2_options *opt, uint8_t **dst,
                         size_t *dst_len, uint32_t *blocks, gc_error *err)
{
    if (blocks)
        *blocks = 0;
    return compress_impl(src, src_len, opt, 0, dst, dst_len, blocks, err);
}

/* ------------------------------------------------------------------ */
/* splicing streams of consecutive parts                               */

/* Bits [pos, pos+n) of s (n <= 57), MSB first; the caller keeps them in s. */
static uint64_t bits_at(const uint8_t *s, uint64_t pos, unsigned n)
{
    uint64_t v = 0;
    size_t first = (size_t)(pos / 8), last = (size_t)((pos + n - 1) / 8);
    for (size_t i = first; i <= last; i++)
        v = v << 8 | s[i];
    unsigned tail = (unsigned)((last + 1) * 8 - (pos + n)); /* bits after the field in s[last] */
    return (v >> tail) & ((1ull << n) - 1);
}

/*
 * Why the end marker is found unambiguously: if the 48-bit magic M matched
 * at two bit offsets a < a + d with d in 1..7 (two padding lengths), the
 * overlapping bits would agree: M[i] = M[i + d] for i = 0..47-d, i.e.
 * (M >> d) == (M & (2^(48-d) - 1)), M periodic with period d. For
 * M = 0x177245385090 none of d = 1..7 satisfies this (checked at run time
 * below once, and by tests/check_bzip2.c: test_eos_magic_aperiodic), so at
 * most one padding length can show the magic.
 */
static int eos_magic_aperiodic(void)
{
    const uint64_t m = BZ2_EOS_MAGIC;
    for (unsigned d = 1; d <= 7; d++)
        if ((m >> d) == (m & ((1ull << (48 - d)) - 1)))
            return 0;
    return 1;
}

int bz2_stream_body(const uint8_t *s, size_t len, uint64_t *body_bits, uint32_t *combined, gc_error *err)
{
    if (!s || !body_bits || !combined)
        return gc_fail(err, GC_E_INVALID, "bzip2: invalid arguments");
    if (len < 14 || s[0] != 'B' || s[1] != 'Z' || s[2] != 'h' || s[3] < '1' || s[3] > '9')
        return gc_fail(err, GC_E_CORRUPT, "bzip2: not a bzip2 stream (bad header)");
    if (!eos_magic_aperiodic()) /* cannot happen: see the comment above */
        return gc_fail(err, GC_E_INTERNAL, "bzip2: end-of-stream magic is periodic");
    uint64_t total = (uint64_t)len * 8;
    for (unsigned pad = 0; pad < 8; pad++) {
        uint64_t at = total - pad - 80; /* first bit of the magic */
        if (at < 32)
            break;
        if (pad && (s[len - 1] & ((1u << pad) - 1)) != 0)
            break; /* padding bits must be zero: more padding cannot be either */
        if (bits_at(s, at, 48) != BZ2_EOS_MAGIC)
            continue;
        uint32_t c = (uint32_t)bits_at(s, at + 48, 32);
        if (at == 32 && c != 0)
            break; /* no blocks but a combined CRC */
        *body_bits = at - 32;
        *combined = c;
        gc_error_clear(err);
        return GC_OK;
    }
    return gc_fail(err, GC_E_CORRUPT, "bzip2: no end-of-stream marker at the end of the stream");
}

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline void store_be64(uint8_t *p, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

size_t bz2_splice(bz2_splicer *sp, const uint8_t *src, uint64_t nbits, uint8_t *out)
{
    size_t whole = (size_t)(nbits / 8), o = 0, i = 0;
    unsigned s = sp->nacc;
    unsigned rest = (unsigned)(nbits % 8);
    sp->bits += nbits;
    if (s == 0) {
        memmove(out, src, whole);
        o = i = whole;
    } else {
        uint8_t acc = sp->acc;
        /* 8 source bytes -> 8 output bytes: the pending s bits on top, the
         * source shifted right by s, its last s bits pending again. */
        for (; i + 8 <= whole; i += 8, o += 8) {
            uint64_t w = load_be64(src + i);
            store_be64(out + o, (uint64_t)acc << 56 | w >> s);
            acc = (uint8_t)(w << (8 - s));
        }
        for (; i < whole; i++, o++) {
            uint8_t b = src[i]; /* read before out[o], which may be it, is written */
            out[o] = (uint8_t)(acc | b >> s);
            acc = (uint8_t)(b << (8 - s));
        }
        sp->acc = acc;
    }
    if (rest) {
        uint8_t b = (uint8_t)(src[whole] & (0xffu << (8 - rest))); /* the last rest bits, left-aligned */
        if (s + rest >= 8) {
            out[o++] = (uint8_t)(sp->acc | b >> s);
            sp->acc = (uint8_t)(b << (8 - s));
            sp->nacc = s + rest - 8;
        } else {
            sp->acc = (uint8_t)(sp->acc | b >> s);
            sp->nacc = s + rest;
        }
    }
    return o;
}

void bz2_splice_skip(bz2_splicer *sp, const uint8_t *src, uint64_t nbits)
{
    uint64_t total = sp->nacc + nbits;
    if (total < 8) { /* nothing becomes whole: splicing is as cheap */
        uint8_t none[1];
        bz2_splice(sp, src, nbits, none);
        return;
    }
    /* total >= 8 with nacc <= 7 makes nbits >= keep: the pending bits all come from src */
    unsigned keep = (unsigned)(total % 8);
    sp->acc = keep ? (uint8_t)(bits_at(src, nbits - keep, keep) << (8 - keep)) : 0;
    sp->nacc = keep;
    sp->bits += nbits;
}

size_t bz2_splice_header(bz2_splicer *sp, int level, uint8_t *out)
{
    uint8_t h[4];
    bz2_stream_header(h, level);
    return bz2_splice(sp, h, BZ2_STREAM_HEADER_BITS, out);
}

size_t bz2_splice_finish(bz2_splicer *sp, uint32_t combined, uint8_t *out)
{
    uint8_t t[BZ2_STREAM_TRAILER_BITS / 8] = { 0 };
    bz2_stream_trailer(t, 0, combined);
    size_t o = bz2_splice(sp, t, BZ2_STREAM_TRAILER_BITS, out);
    if (sp->nacc) {
        out[o++] = sp->acc; /* zero padding: acc's unused bits are 0 */
        sp->bits += 8 - sp->nacc;
        sp->acc = 0;
        sp->nacc = 0;
    }
    return o;
}

/* ------------------------------------------------------------------ */
/* decompression: finding blocks                                       */

typedef struct u64vec {
    uint64_t *v;
    size_t n, cap;
    int oom;
} u64vec;

static void vec_push(u64vec *v, uint64_t x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        uint64_t *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) {
            v->oom = 1;
            return;
        }
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

#define SCAN_CHUNK (1u << 20)

typedef struct scan_job {
    const uint8_t *src;
    size_t len;
    uint8_t shifts[256]; /* byte value at window offset 2 -> possible shifts */
    u64vec *found;       /* one vector per chunk */
} scan_job;

/* Candidates whose first bit lies in bytes [chunk*SCAN_CHUNK, +SCAN_CHUNK). */
static void scan_chunk(void *ctx, size_t chunk)
{
    scan_job *j = ctx;
    size_t a = chunk * SCAN_CHUNK, b = a + SCAN_CHUNK;
    if (b > j->len)
        b = j->len;
    const uint64_t mask = (1ull << 48) - 1;
    for (size_t i = a; i < b; i++) {
        /* Byte i+2 lies wholly inside the magic for every shift 0..7. */
        if (i + 2 >= j->len)
            break;
        unsigned m = j->shifts[j->src[i + 2]];
        if (!m)
            continue;
        uint8_t win[8] = { 0 };
        size_t avail = j->len - i < 8 ? j->len - i : 8;
        memcpy(win, j->src + i, avail);
        uint64_t w;
        memcpy(&w, win, 8);
        w = __builtin_bswap64(w);
        for (unsigned s = 0; s < 8; s++) {
            if (!(m & (1u << s)))
                continue;
            uint64_t bit = (uint64_t)i * 8 + s;
            if (bit + 48 <= (uint64_t)j->len * 8 && ((w >> (16 - s)) & mask) == BZ2_BLOCK_MAGIC)
                vec_push(&j->found[chunk], bit);
        }
    }
}

/* Every bit offset where the block magic occurs, ascending. */
static int find_candidates(const uint8_t *src, size_t len, unsigned threads, u64vec *out)
{
    scan_job j = { .src = src, .len = len };
    for (unsigned s = 0; s < 8; s++)
        j.shifts[(BZ2_BLOCK_MAGIC >> (24 + s)) & 0xff] |= (uint8_t)(1u << s);
    size_t chunks = len / SCAN_CHUNK + 1;
    j.found = calloc(chunks, sizeof *j.found);
    if (!j.found)
        return -1;
    gc_parallel_for(chunks, threads, scan_chunk, &j);
    int rc = 0;
    for (size_t c = 0; c < chunks; c++) {
        for (size_t k = 0; k < j.found[c].n; k++)
            vec_push(out, j.found[c].v[k]);
        rc |= j.found[c].oom;
        free(j.found[c].v);
    }
    free(j.found);
    return rc || out->oom ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* decompression: the walk                                             */

typedef struct dctx {
    const uint8_t *src;
    size_t len;
    int more;       /* more input follows src (bz2_decompress_part) */
    bz2_dstate *st; /* where the decode stands */
    size_t max_out;
    unsigned threads;
    u64vec cand;
    bz2_spec spec; /* the candidates, decoded ahead of the walk */
    size_t blocks; /* accepted by this call */
    uint8_t *out;
    size_t out_len, out_cap;
    int fixed; /* out is the caller's: never moved or freed (bz2_decompress_part_into) */
    const gc_job *job;
} dctx;

/* The decoded block whose magic is at bit pos, or NULL when the scan did
 * not find that magic (cannot happen). Candidates before pos were chance
 * matches. *ci becomes pos's candidate. */
static bz2_dblock *block_at(dctx *d, uint64_t pos, size_t *ci)
{
    while (*ci < d->cand.n && d->cand.v[*ci] < pos)
        (*ci)++;
    if (*ci >= d->cand.n || d->cand.v[*ci] != pos)
        return NULL;
    return bz2_spec_get(&d->spec, *ci);
}

/* 0, or -1 out of memory, -2 refused by may_grow, -3 past the caller's buffer. */
static int append_out(dctx *d, const uint8_t *p, size_t n)
{
    if (d->fixed) {
        if (d->out_cap - d->out_len < n)
            return -3;
        if (!gc_job_may_grow(d->job, n))
            return -2;
    } else if (d->out_cap - d->out_len < n) {
        size_t cap = d->out_cap ? d->out_cap : 1u << 16;
        while (cap - d->out_len < n)
            cap *= 2;
        if (!gc_job_may_grow(d->job, cap - d->out_cap))
            return -2;
        uint8_t *no = realloc(d->out, cap);
        if (!no)
            return -1;
        d->out = no;
        d->out_cap = cap;
    }
    memcpy(d->out + d->out_len, p, n);
    d->out_len += n;
    return 0;
}

static uint64_t read_bits48(const uint8_t *src, size_t len, uint64_t pos)
{
    bz2_bitreader br;
    bz2_br_init(&br, src, len, pos);
    uint64_t hi = bz2_br_get(&br, 24);
    return hi << 24 | bz2_br_get(&br, 24);
}

/* The head stream's end marker (bz2_dstate.head): its CRC is checked by
 * bz2_dstate_follow, which knows the blocks before the part. */
static void end_head(bz2_dstate *st, uint32_t stored)
{
    st->head = 0;
    st->head_ended = 1;
    st->head_blocks = st->block_no;
    st->head_combined = st->combined;
    st->head_stored = stored;
}

/* Walk result (besides GC_OK and errors): the input ends inside the next
 * piece and more follows; stop before it. */
#define WALK_WAIT (-1)

/* Decode the blocks of the current stream (st->stream_no) from bit *pos up
 * to and including its end marker. */
static int walk_stream(dctx *d, uint64_t *pos, size_t *ci, gc_error *err)
{
    bz2_dstate *st = d->st;
    unsigned sno = st->stream_no;
    uint64_t total_bits = (uint64_t)d->len * 8;
    for (;;) {
        unsigned bno = st->block_no + 1;
        if (*pos + 48 > total_bits) {
            if (d->more)
                return WALK_WAIT;
            return gc_fail(err, GC_E_TRUNCATED, "bzip2: stream %u: input ends before the end-of-stream marker",
                           sno);
        }
        uint64_t magic = read_bits48(d->src, d->len, *pos);
        if (magic == BZ2_EOS_MAGIC) {
            if (*pos + 80 > total_bits) {
                if (d->more)
                    return WALK_WAIT;
                return gc_fail(err, GC_E_TRUNCATED, "bzip2: stream %u: input ends inside the stream CRC", sno);
            }
            bz2_bitreader br;
            bz2_br_init(&br, d->src, d->len, *pos + 48);
            uint32_t stored = bz2_br_get(&br, 32);
            if (st->head)
                end_head(st, stored);
            else if (stored != st->combined)
                return gc_fail(err, GC_E_CRC,
                               "bzip2: stream %u: stream CRC mismatch (stored 0x%08x, computed 0x%08x)", sno,
                               stored, st->combined);
            *pos = (*pos + 80 + 7) & ~7ull;
            st->in_stream = 0;
            return GC_OK;
        }
        if (magic != BZ2_BLOCK_MAGIC)
            return gc_fail(err, GC_E_CORRUPT, "bzip2: stream %u block %u: bad block magic", sno, bno);
        bz2_dblock local, *r = block_at(d, *pos, ci);
        if (!r) {
            bz2_decode_block(d->src, bz2_block_len_cap(d->len, *pos), *pos, d->max_out, &local);
            r = &local;
        }
        int rc = r->status;
        /* cut by the cap, not by the end of the input: too long, whoever decodes it and
         * however the input is split into parts */
        if (rc == GC_E_TRUNCATED && bz2_block_len_cap(d->len, *pos) < d->len)
            rc = gc_fail(err, GC_E_CORRUPT, "bzip2: stream %u block %u: compressed block exceeds %zu bytes", sno,
                         bno, BZ2_MAX_BLOCK_COMPRESSED);
        else if (rc == GC_E_TRUNCATED && d->more)
            rc = WALK_WAIT; /* cut by the end of this part: decode it again with more input */
        else if (rc == GC_OK && r->nblock > (uint32_t)st->level * 100000u)
            rc = gc_fail(err, GC_E_CORRUPT, "bzip2: stream %u block %u: block length %u exceeds level %d", sno,
                         bno, r->nblock, st->level);
        else if (rc != GC_OK)
            gc_fail(err, rc, "bzip2: stream %u block %u: %s", sno, bno, r->msg);
        else if (d->max_out && r->out_len > d->max_out - d->out_len)
            rc =
                gc_fail(err, GC_E_LIMIT, "bzip2: stream %u block %u: decompressed size exceeds the %zu byte limit",
                        sno, bno, d->max_out);
        else if (gc_job_cancelled(d->job))
            rc = gc_fail(err, GC_E_IO, "bzip2: cancelled");
        else if ((rc = append_out(d, r->out, r->out_len)) != 0)
            rc = rc == -2   ? gc_fail(err, GC_E_LIMIT,
                                      "bzip2: stream %u block %u: the output does not fit "
                                        "the memory it may use (%zu bytes so far)",
                                      sno, bno, d->out_len)
                 : rc == -3 ? gc_fail(err, GC_E_LIMIT,
                                      "bzip2: stream %u block %u: the output does not fit "
                                      "its buffer of %zu bytes",
                                      sno, bno, d->out_cap)
                            : gc_fail(err, GC_E_NOMEM, "bzip2: out of memory");
        if (rc == GC_OK && st->head && r->nblock > st->head_max_nblock)
            st->head_max_nblock = r->nblock;
        uint32_t block_crc = r->stored_crc;
        uint64_t end_bit = r->end_bit;
        if (r == &local)
            free(local.out);
        else
            bz2_spec_consumed(&d->spec, *ci);
        if (rc != GC_OK)
            return rc;
        st->combined = bz2_combine_crc(st->combined, block_crc);
        st->block_no = bno;
        *pos = end_bit;
        if (d->fixed)
            gc_job_progress(d->job, d->out_len);
        if (st->out_soft && d->out_len >= st->out_soft) {
            st->soft_stopped = 1;
            return WALK_WAIT; /* enough output for one call: the caller resumes here */
        }
        if (st->out_soft) { /* decode ahead only the blocks this call should still need */
            size_t per_block = d->out_len / ++d->blocks + 1;
            bz2_spec_limit(&d->spec, (st->out_soft - d->out_len) / per_block + 1);
        }
        /* Mostly false candidates (hostile input): stop speculating. */
        if (d->spec.wasted > 16 + bno)
            bz2_spec_stop(&d->spec);
    }
}

/* The one decoder walk: stream headers, blocks, end markers from bit *pos
 * until the input ends (GC_OK), more is needed (WALK_WAIT), trailing garbage
 * (GC_OK with st->garbage) or an error. */
static int walk(dctx *d, uint64_t *pos, gc_error *err)
{
    bz2_dstate *st = d->st;
    size_t ci = 0;
    for (;;) {
        if (st->in_stream) {
            int rc = walk_stream(d, pos, &ci, err);
            if (rc != GC_OK)
                return rc;
            continue;
        }
        /* between streams: *pos is byte aligned */
        size_t at = (size_t)(*pos / 8), left = d->len - at;
        unsigned sno = st->stream_no + 1;
        if (left == 0) {
            if (d->more)
                return WALK_WAIT;
            if (sno == 1)
                return gc_fail(err, GC_E_TRUNCATED, "bzip2: empty input");
            return GC_OK;
        }
        size_t cmp = left < 3 ? left : 3;
        int level = left > 3 ? d->src[at + 3] - '0' : 0; /* read once: src may change under us */
        if (memcmp(d->src + at, BZ2_STREAM_MAGIC, cmp) != 0 || (left > 3 && (level < 1 || level > 9))) {
            if (sno == 1)
                return gc_fail(err, GC_E_CORRUPT, "bzip2: not a bzip2 stream (bad header)");
            st->garbage = 1;
            st->garbage_at = at;
            return GC_OK;
        }
        if (left < 4) {
            if (d->more)
                return WALK_WAIT;
            return gc_fail(err, GC_E_TRUNCATED, "bzip2: stream %u: input ends inside the stream header", sno);
        }
        st->in_stream = 1;
        st->stream_no = sno;
        st->level = level;
        st->combined = 0;
        st->block_no = 0;
        *pos += 32;
    }
}

/* Both entry points, with d's output (the caller's buffer or none yet) set. */
static int decompress_part(dctx *d, size_t *used, gc_error *err)
{
    bz2_dstate *st = d->st;
    if (d->len)
        st->seen_any = 1;
    st->soft_stopped = 0;
    d->threads = d->threads ? d->threads : gc_cpu_count();
    bool spec_open = false;
    int rc = GC_OK;
    uint64_t pos = st->bit;
    if (st->garbage) { /* everything after the garbage is dropped */
        pos = (uint64_t)d->len * 8;
        goto out;
    }
    if (find_candidates(d->src, d->len, d->threads, &d->cand) ||
        bz2_spec_open(&d->spec, d->src, d->len, d->max_out, d->cand.v, d->cand.n, d->threads)) {
        rc = gc_fail(err, GC_E_NOMEM, "bzip2: out of memory");
        goto out;
    }
    spec_open = true;
    rc = walk(d, &pos, err);
    if (rc == WALK_WAIT)
        rc = GC_OK;
    if (st->garbage)
        pos = (uint64_t)d->len * 8;
out:
    if (spec_open)
        bz2_spec_close(&d->spec);
    free(d->cand.v);
    if (rc != GC_OK)
        return rc;
    *used = (size_t)(pos / 8);
    st->bit = (unsigned)(pos % 8);
    gc_error_clear(err);
    return GC_OK;
}

/* ------------------------------------------------------------------ */
/* decompression: parts decoded in parallel                            */

int bz2_find_part_start(const uint8_t *buf, size_t len, size_t from, uint64_t *bit)
{
    uint8_t shifts[256] = { 0 }; /* byte value at window offset 2 -> shifts where a magic may begin */
    for (unsigned s = 0; s < 8; s++) {
        shifts[(BZ2_BLOCK_MAGIC >> (24 + s)) & 0xff] |= (uint8_t)(1u << s);
        shifts[(BZ2_EOS_MAGIC >> (24 + s)) & 0xff] |= (uint8_t)(1u << s);
    }
    const uint64_t mask = (1ull << 48) - 1;
    for (size_t i = from; i + 6 <= len; i++) {
        unsigned m = shifts[buf[i + 2]];
        if (!m)
            continue;
        uint8_t win[8] = { 0 };
        memcpy(win, buf + i, len - i < 8 ? len - i : 8);
        uint64_t w = load_be64(win);
        for (unsigned s = 0; s < 8; s++) {
            uint64_t at = (uint64_t)i * 8 + s, v = (w >> (16 - s)) & mask;
            if ((m & (1u << s)) && at + 48 <= (uint64_t)len * 8 && (v == BZ2_BLOCK_MAGIC || v == BZ2_EOS_MAGIC)) {
                *bit = at;
                return GC_OK;
            }
        }
    }
    return GC_E_TRUNCATED;
}

void bz2_dstate_at_magic(bz2_dstate *st, unsigned bit)
{
    /* stream_no 1: what follows the head stream is decided as after a first
     * stream (trailing garbage, not a bad header) */
    *st = (bz2_dstate){ .bit = bit, .in_stream = 1, .level = 9, .stream_no = 1, .seen_any = 1, .head = 1 };
}

bool bz2_dstate_follow(bz2_dstate *prev, const bz2_dstate *part)
{
    if (!prev->in_stream || prev->garbage || prev->level < 1 || prev->level > 9)
        return false;
    if (part->head_max_nblock > (uint32_t)prev->level * 100000u)
        return false;
    bz2_dstate next = *part;
    if (part->head) { /* the part ended inside the head stream */
        next.level = prev->level;
        next.combined = bz2_combine_parts(prev->combined, part->block_no, part->combined);
        next.block_no = prev->block_no + part->block_no;
    } else if (bz2_combine_parts(prev->combined, part->head_blocks, part->head_combined) != part->head_stored) {
        return false;
    }
    next.stream_no = prev->stream_no + part->stream_no - 1;
    next.head = next.head_ended = 0;
    next.head_max_nblock = next.head_blocks = next.head_combined = next.head_stored = 0;
    *prev = next;
    return true;
}

static int check_part_args(const uint8_t *src, size_t len, const bz2_dstate *st, const void *dst,
                           const size_t *dst_len, const size_t *used, gc_error *err)
{
    if (!dst || !dst_len || !used || !st || (!src && len) || st->bit > 7)
        return gc_fail(err, GC_E_INVALID, "bzip2: invalid arguments");
    return GC_OK;
}

int bz2_decompress_part(const uint8_t *src, size_t len, int more, bz2_dstate *st, size_t max_output,
                        unsigned threads, const gc_job *job, uint8_t **dst, size_t *dst_len, size_t *used,
                        gc_error *err)
{
    if (check_part_args(src, len, st, dst, dst_len, used, err) != GC_OK)
        return GC_E_INVALID;
    *dst = NULL;
    *dst_len = 0;
    *used = 0;
    dctx d = {
        .src = src, .len = len, .more = more != 0, .st = st, .max_out = max_output, .job = job, .threads = threads
    };
    int rc = decompress_part(&d, used, err);
    if (rc == GC_OK && !d.out && !(d.out = malloc(1)))
        rc = gc_fail(err, GC_E_NOMEM, "bzip2: out of memory");
    if (rc != GC_OK) {
        free(d.out);
        *used = 0;
        return rc;
    }
    *dst = d.out;
    *dst_len = d.out_len;
    return GC_OK;
}

int bz2_decompress_part_into(const uint8_t *src, size_t len, int more, bz2_dstate *st, size_t max_output,
                             uint8_t *dst, size_t dst_cap, unsigned threads, const gc_job *job, size_t *dst_len,
                             size_t *used, gc_error *err)
{
    if (check_part_args(src, len, st, dst, dst_len, used, err) != GC_OK)
        return GC_E_INVALID;
    *dst_len = 0;
    *used = 0;
    dctx d = { .src = src,
               .len = len,
               .more = more != 0,
               .st = st,
               .max_out = max_output,
               .job = job,
               .threads = threads,
               .out = dst,
               .out_cap = dst_cap,
               .fixed = 1 };
    int rc = decompress_part(&d, used, err);
    if (rc != GC_OK) {
        *used = 0;
        return rc;
    }
    *dst_len = d.out_len;
    return GC_OK;
}

int bz2_decompress(const uint8_t *src, size_t src_len, size_t max_output, unsigned threads, uint8_t **dst,
                   size_t *dst_len, gc_error *err)
{
    return bz2_decompress_job(src, src_len, max_output, threads, NULL, dst, dst_len, err);
}

/* The whole decode is the streamed one in a single call with more = 0,
 * trailing garbage being an error. */
int bz2_decompress_job(const uint8_t *src, size_t src_len, size_t max_output, unsigned threads, const gc_job *job,
                       uint8_t **dst, size_t *dst_len, gc_error *err)
{
    if (!dst || !dst_len || (!src && src_len))
        return gc_fail(err, GC_E_INVALID, "bzip2: invalid arguments");
    bz2_dstate st = { 0 };
    size_t used;
    int rc = bz2_decompress_part(src, src_len, 0, &st, max_output, threads, job, dst, dst_len, &used, err);
    if (rc == GC_OK && st.garbage) {
        free(*dst);
        *dst = NULL;
        *dst_len = 0;
        return gc_fail(err, GC_E_CORRUPT, "bzip2: trailing garbage after stream %u", st.stream_no);
    }
    return rc;
}
