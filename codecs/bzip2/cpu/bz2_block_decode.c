/*
 * bz2_block_decode.c - the decoder's first stage: one block's header
 * fields, selectors, code lengths and Huffman/MTF/RUNA-RUNB symbols, up to
 * its BWT column (bz2_stages.h); bz2_block_invert.c does the rest, and
 * bz2_decode_block runs both.
 *
 * Hostile input: every count read from the stream is checked before use
 * (selectors <= 18002 stored, lengths 1..20 at every step, codes that do
 * not fit their length never built, <= 900000 BWT bytes; origPtr in
 * stage 2), reads past the end yield zero bits and are reported as
 * truncation (stage 2 computes the output size before allocating it, for
 * max_out). Truncation is exact, which the streamed decode
 * (bz2_decompress_part) relies on: an input cut inside a block never
 * reads as GC_E_CORRUPT. As long as every bit consumed lies inside src,
 * the decode is the one of the uncut input; every failure once a bit past
 * the end was consumed is turned into GC_E_TRUNCATED by fail(), and
 * success needs no overrun at the EOB. The one look-ahead, decode_sym's
 * 20-bit peek, cannot make a cut input fail early: canonical codes
 * (complete, incomplete, or cut short where oversubscribed) fill the
 * 20-bit code space from 0 upwards without gaps (the codes of length l
 * span [first[l] << (20-l), (first[l]+count[l]) << (20-l)), clipped to
 * 2^20, and first[l+1] = (first[l]+count[l]) << 1), so the valid windows
 * are exactly [0, K); zeros past the end give the smallest completion of
 * the real bits, which is invalid only if every completion is.
 * Semantics follow the reference decoder where the format leaves room
 * (docs/BZIP2.md, "Decoder acceptance rules").
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bz2_stages.h"

#define LUT_BITS 10

typedef struct htab {
    uint16_t lut[1u << LUT_BITS];            /* sym << 5 | len, 0 = longer code */
    int32_t first[BZ2_MAX_CODE_LEN_DEC + 1]; /* first canonical code of each length */
    int32_t count[BZ2_MAX_CODE_LEN_DEC + 1];
    int32_t index[BZ2_MAX_CODE_LEN_DEC + 1]; /* its position in sorted[] */
    uint16_t sorted[BZ2_MAX_ALPHA];          /* symbols by (length, symbol) */
} htab;

typedef struct dstate {
    bz2_bitreader br;
    bz2_dblock *r;
    bz2_column *c;
    int n_in_use;
    uint8_t seq_to_byte[256];
    int n_groups;
    uint32_t n_sel;
    uint8_t sel[BZ2_MAX_SELECTORS];
    uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    htab tab[BZ2_MAX_GROUPS];
} dstate;

__attribute__((format(printf, 3, 4))) static int fail(dstate *d, int code, const char *fmt, ...)
{
    /* Garbage read as zero bits past the end: call it what it is. */
    if (bz2_br_overrun(&d->br) && code == GC_E_CORRUPT) {
        code = GC_E_TRUNCATED;
        fmt = "input ends inside the block";
    }
    va_list ap;
    va_start(ap, fmt);
    bz2_dblock_vfail(d->r, code, fmt, ap);
    va_end(ap);
    return code;
}

static int read_header(dstate *d)
{
    bz2_bitreader *br = &d->br;
    d->c->crc = bz2_br_get(br, 32);
    d->c->randomised = (int)bz2_br_get(br, 1);
    d->c->orig = bz2_br_get(br, 24);
    uint32_t ranges = bz2_br_get(br, 16);
    d->n_in_use = 0;
    memset(d->seq_to_byte, 0, sizeof d->seq_to_byte); /* mtf_take reads whole words */
    for (int i = 0; i < 16; i++) {
        if (!(ranges & (0x8000u >> i)))
            continue;
        uint32_t bits = bz2_br_get(br, 16);
        for (int j = 0; j < 16; j++)
            if (bits & (0x8000u >> j))
                d->seq_to_byte[d->n_in_use++] = (uint8_t)(i * 16 + j);
    }
    if (bz2_br_overrun(br))
        return fail(d, GC_E_TRUNCATED, "input ends inside the block header");
    if (d->n_in_use == 0)
        return fail(d, GC_E_CORRUPT, "symbol map is empty");
    d->n_groups = (int)bz2_br_get(br, 3);
    if (d->n_groups < BZ2_MIN_GROUPS || d->n_groups > BZ2_MAX_GROUPS)
        return fail(d, GC_E_CORRUPT, "invalid number of Huffman tables (%d)", d->n_groups);
    uint32_t n_sel = bz2_br_get(br, 15);
    if (n_sel < 1)
        return fail(d, GC_E_CORRUPT, "no selectors");
    uint8_t list[BZ2_MAX_GROUPS] = { 0, 1, 2, 3, 4, 5 };
    for (uint32_t i = 0; i < n_sel; i++) {
        int j = 0;
        while (bz2_br_get(br, 1)) {
            if (++j >= d->n_groups)
                return fail(d, GC_E_CORRUPT, "selector %u out of range", i);
        }
        uint8_t v = list[j];
        for (; j > 0; j--)
            list[j] = list[j - 1];
        list[0] = v;
        if (i < BZ2_MAX_SELECTORS) /* extra selectors are read and ignored */
            d->sel[i] = v;
    }
    d->n_sel = n_sel < BZ2_MAX_SELECTORS ? n_sel : BZ2_MAX_SELECTORS;
    if (bz2_br_overrun(br))
        return fail(d, GC_E_TRUNCATED, "input ends inside the selectors");
    int alpha = d->n_in_use + 2;
    for (int t = 0; t < d->n_groups; t++) {
        int curr = (int)bz2_br_get(br, 5);
        for (int s = 0; s < alpha; s++) {
            for (;;) {
                if (curr < 1 || curr > BZ2_MAX_CODE_LEN_DEC)
                    return fail(d, GC_E_CORRUPT, "table %d: code length out of range", t);
                if (!bz2_br_get(br, 1))
                    break;
                curr += bz2_br_get(br, 1) ? -1 : 1;
            }
            d->len[t][s] = (uint8_t)curr;
        }
    }
    if (bz2_br_overrun(br))
        return fail(d, GC_E_TRUNCATED, "input ends inside the code lengths");
    return GC_OK;
}

/* Canonical decoding tables, as the reference decoder builds them: codes
 * are handed out by (length, symbol), counting up; a code that does not fit
 * in its length (the lengths are oversubscribed: no encoder writes them,
 * but bzip2 decodes them) is never produced, and once a length's codes
 * reach past its code space every longer code is unreachable. Incomplete
 * sets leave bit patterns without a code (decode_sym fails on them). first[]
 * stays below 258 << 20, so no arithmetic here overflows. */
static void build_table(dstate *d, int t)
{
    const uint8_t *len = d->len[t];
    int alpha = d->n_in_use + 2;
    htab *h = &d->tab[t];
    memset(h->count, 0, sizeof h->count);
    for (int s = 0; s < alpha; s++)
        h->count[len[s]]++;
    int32_t code = 0, idx = 0;
    for (int l = 1; l <= BZ2_MAX_CODE_LEN_DEC; l++) {
        h->first[l] = code;
        h->index[l] = idx;
        for (int s = 0; s < alpha; s++)
            if (len[s] == l)
                h->sorted[idx++] = (uint16_t)s;
        code = (code + h->count[l]) << 1;
    }
    memset(h->lut, 0, sizeof h->lut);
    for (int l = 1; l <= LUT_BITS; l++) {
        for (int k = 0; k < h->count[l]; k++) {
            uint32_t c = (uint32_t)(h->first[l] + k);
            if (c >> l)
                break; /* past this length's code space: unreachable */
            uint32_t lo = c << (LUT_BITS - l), hi = (c + 1) << (LUT_BITS - l);
            uint16_t e = (uint16_t)(h->sorted[h->index[l] + k] << 5 | l);
            for (uint32_t x = lo; x < hi; x++)
                h->lut[x] = e;
        }
    }
}

/* Next symbol, or -1 if the bits match no code. */
static inline int decode_sym(const htab *h, bz2_bitreader *br)
{
    uint32_t v = bz2_br_peek(br, BZ2_MAX_CODE_LEN_DEC);
    uint16_t e = h->lut[v >> (BZ2_MAX_CODE_LEN_DEC - LUT_BITS)];
    if (e) {
        bz2_br_skip(br, e & 31);
        return e >> 5;
    }
    for (int l = LUT_BITS + 1; l <= BZ2_MAX_CODE_LEN_DEC; l++) {
        int32_t c = (int32_t)(v >> (BZ2_MAX_CODE_LEN_DEC - l));
        /* c >= first[l] here: shorter codes were ruled out before */
        if ((uint32_t)(c - h->first[l]) < (uint32_t)h->count[l]) {
            bz2_br_skip(br, (unsigned)l);
            return h->sorted[h->index[l] + c - h->first[l]];
        }
    }
    return -1;
}

/* Take entry j of the MTF list and move it to the front. Indices are
 * mostly small, so those shift the list with word operations instead of
 * a memmove call (little-endian: m[0] is the low byte of a word). */
static inline uint8_t mtf_take(uint8_t *m, unsigned j)
{
    uint8_t v = m[j];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (j < 16) {
        uint64_t lo, hi;
        memcpy(&lo, m, 8);
        memcpy(&hi, m + 8, 8);
        if (j < 8) {
            uint64_t keep = ~0ull << (8 * j) << 8; /* bytes after j */
            lo = (lo & keep) | ((lo << 8) & ~keep) | v;
            memcpy(m, &lo, 8);
        } else {
            uint64_t keep = ~0ull << (8 * (j - 8)) << 8;
            hi = (hi & keep) | (((hi << 8) | (lo >> 56)) & ~keep);
            lo = (lo << 8) | v;
            memcpy(m, &lo, 8);
            memcpy(m + 8, &hi, 8);
        }
        return v;
    }
#endif
    memmove(m + 1, m, j);
    m[0] = v;
    return v;
}

/* Huffman + MTF + zero runs -> the BWT column, counts per byte. */
static int decode_symbols(dstate *d)
{
    bz2_bitreader *br = &d->br;
    uint8_t *ll = d->c->bwt;
    uint32_t *counts = d->c->counts;
    uint8_t mtf[256];
    memcpy(mtf, d->seq_to_byte, 256);
    int eob = d->n_in_use + 1;
    uint32_t nblock = 0, run = 0, weight = 1, group = 0;
    int left = 0;
    const htab *h = NULL;
    for (;;) {
        if (left == 0) {
            if (group >= d->n_sel)
                return fail(d, GC_E_CORRUPT, "more symbol groups than selectors");
            if (bz2_br_overrun(br))
                return fail(d, GC_E_TRUNCATED, "input ends inside the block data");
            h = &d->tab[d->sel[group++]];
            left = BZ2_GROUP_SIZE;
        }
        left--;
        int sym = decode_sym(h, br);
        if (sym < 0) /* not a cut input's doing: see the file comment */
            return fail(d, GC_E_CORRUPT, "invalid Huffman code");
        if (sym <= BZ2_RUNB) {
            /* bijective base 2: RUNA adds weight, RUNB adds 2*weight */
            run += weight << sym;
            weight <<= 1;
            if (run > BZ2_MAX_BLOCK)
                return fail(d, GC_E_CORRUPT, "zero run exceeds the block size");
            continue;
        }
        if (run) {
            if (nblock + run > BZ2_MAX_BLOCK)
                return fail(d, GC_E_CORRUPT, "block exceeds %u bytes", BZ2_MAX_BLOCK);
            memset(ll + nblock, mtf[0], run);
            counts[mtf[0]] += run;
            nblock += run;
            run = 0;
            weight = 1;
        }
        if (sym == eob)
            break;
        uint8_t v = mtf_take(mtf, (unsigned)sym - 1);
        if (nblock >= BZ2_MAX_BLOCK)
            return fail(d, GC_E_CORRUPT, "block exceeds %u bytes", BZ2_MAX_BLOCK);
        ll[nblock++] = v;
        counts[v]++;
    }
    if (bz2_br_overrun(br))
        return fail(d, GC_E_TRUNCATED, "input ends inside the block data");
    d->c->n = nblock;
    d->c->end_bit = bz2_br_pos(br);
    return GC_OK;
}

static int decode_column(dstate *d)
{
    int rc = read_header(d);
    for (int t = 0; rc == GC_OK && t < d->n_groups; t++)
        build_table(d, t);
    return rc == GC_OK ? decode_symbols(d) : rc;
}

int bz2_decode_column(const uint8_t *src, size_t len, uint64_t magic_bit, bz2_column *c, bz2_dblock *r)
{
    uint8_t *bwt = c->bwt;
    size_t cap = c->cap;
    memset(r, 0, sizeof *r);
    memset(c, 0, sizeof *c);
    c->bwt = bwt;
    c->cap = cap;
    if (!bwt || cap < BZ2_MAX_BLOCK)
        return bz2_dblock_fail(r, GC_E_INVALID, "column buffer smaller than %u bytes", BZ2_MAX_BLOCK);
    dstate *d = malloc(sizeof *d);
    if (!d)
        return bz2_dblock_fail(r, GC_E_NOMEM, "out of memory");
    d->r = r;
    d->c = c;
    bz2_br_init(&d->br, src, len, magic_bit + 48);
    int rc = decode_column(d);
    free(d);
    return rc;
}

void bz2_decode_block_flags(const uint8_t *src, size_t len, uint64_t magic_bit, size_t max_out, unsigned flags,
                            bz2_dblock *r)
{
    memset(r, 0, sizeof *r);
    bz2_column c = { .bwt = malloc(BZ2_COLUMN_CAP), .cap = BZ2_COLUMN_CAP };
    if (!c.bwt)
        bz2_dblock_fail(r, GC_E_NOMEM, "out of memory");
    else if (bz2_decode_column(src, len, magic_bit, &c, r) == GC_OK)
        bz2_invert_column_flags(&c, max_out, flags, r);
    free(c.bwt);
}

void bz2_decode_block(const uint8_t *src, size_t len, uint64_t magic_bit, size_t max_out, bz2_dblock *r)
{
    bz2_decode_block_flags(src, len, magic_bit, max_out, 0, r);
}
