/*
 * bz2_block_decode.c - decode one bzip2 block: header fields, selectors,
 * code lengths, Huffman/MTF/RUNA-RUNB symbols, inverse BWT, optional
 * de-randomisation, inverse RLE1 and the CRC check.
 *
 * Hostile input: every count read from the stream is checked before use
 * (selectors <= 18002 stored, lengths 1..20 at every step, Huffman tables
 * not oversubscribed, <= 900000 BWT bytes, origPtr < block length), reads
 * past the end yield zero bits and are reported as truncation, and the
 * output size is computed before it is allocated (max_out).
 * Semantics follow the reference decoder where the format leaves room
 * (docs/BZIP2.md, "Decoder acceptance rules").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bz2_internal.h"

#define LUT_BITS 10

typedef struct htab {
    uint16_t lut[1u << LUT_BITS]; /* sym << 5 | len, 0 = longer code */
    int32_t first[BZ2_MAX_CODE_LEN_DEC + 1]; /* first canonical code of each length */
    int32_t count[BZ2_MAX_CODE_LEN_DEC + 1];
    int32_t index[BZ2_MAX_CODE_LEN_DEC + 1]; /* its position in sorted[] */
    uint16_t sorted[BZ2_MAX_ALPHA];          /* symbols by (length, symbol) */
} htab;

typedef struct dstate {
    bz2_bitreader br;
    bz2_dblock *r;
    int randomised;
    uint32_t orig;
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
    vsnprintf(d->r->msg, sizeof d->r->msg, fmt, ap);
    va_end(ap);
    d->r->status = code;
    return code;
}

static int read_header(dstate *d)
{
    bz2_bitreader *br = &d->br;
    d->r->stored_crc = bz2_br_get(br, 32);
    d->randomised = (int)bz2_br_get(br, 1);
    d->orig = bz2_br_get(br, 24);
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

/* Canonical decoding tables; oversubscribed length sets are rejected (no
 * encoder can produce them), incomplete ones are allowed. */
static int build_table(dstate *d, int t)
{
    const uint8_t *len = d->len[t];
    int alpha = d->n_in_use + 2;
    htab *h = &d->tab[t];
    memset(h->count, 0, sizeof h->count);
    for (int s = 0; s < alpha; s++)
        h->count[len[s]]++;
    uint32_t kraft = 0;
    for (int l = 1; l <= BZ2_MAX_CODE_LEN_DEC; l++)
        kraft += (uint32_t)h->count[l] << (BZ2_MAX_CODE_LEN_DEC - l);
    if (kraft > (1u << BZ2_MAX_CODE_LEN_DEC))
        return fail(d, GC_E_CORRUPT, "table %d: oversubscribed Huffman code", t);
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
            uint32_t lo = c << (LUT_BITS - l), hi = (c + 1) << (LUT_BITS - l);
            uint16_t e = (uint16_t)(h->sorted[h->index[l] + k] << 5 | l);
            for (uint32_t x = lo; x < hi; x++)
                h->lut[x] = e;
        }
    }
    return GC_OK;
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

/* Huffman + MTF + zero runs -> the BWT column in ll[], counts per byte. */
static int decode_symbols(dstate *d, uint8_t *ll, uint32_t counts[256], uint32_t *nblock_out)
{
    bz2_bitreader *br = &d->br;
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
        if (sym < 0)
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
    *nblock_out = nblock;
    return GC_OK;
}

/* Inverse BWT in place (ll holds BZ2_MAX_BLOCK + BZ2_IBWT_SLACK bytes),
 * then the de-randomisation of randomised blocks. */
static int inverse_bwt(dstate *d, uint8_t *ll, uint32_t n, const uint32_t counts[256])
{
    if (bz2_inverse_bwt(ll, BZ2_MAX_BLOCK + BZ2_IBWT_SLACK, n, d->orig, counts))
        return fail(d, GC_E_NOMEM, "out of memory");
    if (d->randomised) {
        bz2_rand rs;
        bz2_rand_init(&rs);
        for (uint32_t k = 0; k < n; k++)
            ll[k] ^= bz2_rand_next(&rs);
    }
    return GC_OK;
}

/* Inverse RLE1: after 4 equal bytes the next byte is a repeat count. A
 * block may not end right after such 4 bytes (the reference decoder
 * rejects it too). First pass sizes the output, second writes it. */
static int inverse_rle1(dstate *d, const uint8_t *b, uint32_t n, size_t max_out)
{
    size_t total = 0;
    int last = -1, run = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (run == 4) {
            total += b[i];
            run = 0;
            last = -1;
            continue;
        }
        total++;
        run = (b[i] == last) ? run + 1 : 1;
        last = b[i];
    }
    if (run == 4)
        return fail(d, GC_E_CORRUPT, "block ends inside a run (count byte missing)");
    if (max_out && total > max_out)
        return fail(d, GC_E_LIMIT, "decompressed size exceeds the %zu byte limit", max_out);
    uint8_t *out = malloc(total ? total : 1);
    if (!out)
        return fail(d, GC_E_NOMEM, "out of memory");
    size_t o = 0;
    last = -1;
    run = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (run == 4) {
            memset(out + o, last, b[i]);
            o += b[i];
            run = 0;
            last = -1;
            continue;
        }
        out[o++] = b[i];
        run = (b[i] == last) ? run + 1 : 1;
        last = b[i];
    }
    d->r->out = out;
    d->r->out_len = total;
    return GC_OK;
}

void bz2_decode_block(const uint8_t *src, size_t len, uint64_t magic_bit, size_t max_out,
                      bz2_dblock *r)
{
    memset(r, 0, sizeof *r);
    dstate *d = malloc(sizeof *d);
    uint8_t *ll = malloc(BZ2_MAX_BLOCK + BZ2_IBWT_SLACK);
    uint32_t counts[256] = { 0 };
    uint32_t n = 0;
    if (!d || !ll) {
        snprintf(r->msg, sizeof r->msg, "out of memory");
        r->status = GC_E_NOMEM;
        goto out;
    }
    d->r = r;
    bz2_br_init(&d->br, src, len, magic_bit + 48);
    if (read_header(d))
        goto out;
    for (int t = 0; t < d->n_groups; t++)
        if (build_table(d, t))
            goto out;
    if (decode_symbols(d, ll, counts, &n))
        goto out;
    r->nblock = n;
    r->end_bit = bz2_br_pos(&d->br);
    if (d->orig >= n) {
        fail(d, GC_E_CORRUPT, "origPtr %u out of range (block length %u)", d->orig, n);
        goto out;
    }
    if (inverse_bwt(d, ll, n, counts) || inverse_rle1(d, ll, n, max_out))
        goto out;
    uint32_t crc = bz2_crc(r->out, r->out_len);
    if (crc != r->stored_crc) {
        fail(d, GC_E_CRC, "block CRC mismatch (stored 0x%08x, computed 0x%08x)", r->stored_crc, crc);
        free(r->out);
        r->out = NULL;
        r->out_len = 0;
    }
out:
    free(ll);
    free(d);
}
