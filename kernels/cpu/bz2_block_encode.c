/*
 * bz2_block_encode.c - one block, from its slice of the input to bits:
 * RLE1, BWT, MTF/RLE2, table choice, then the block's fields in format
 * order. Blocks are independent, so bz2_stream.c runs these in parallel.
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_internal.h"

/* Selectors are sent move-to-front coded, each MTF index j in unary
 * (j one-bits, then a zero). */
static void put_selectors(bz2_bitwriter *w, const uint8_t *sel, size_t n_sel, int n_groups)
{
    uint8_t list[BZ2_MAX_GROUPS];
    for (int i = 0; i < n_groups; i++)
        list[i] = (uint8_t)i;
    for (size_t i = 0; i < n_sel; i++) {
        unsigned j = 0;
        while (list[j] != sel[i])
            j++;
        for (unsigned k = j; k > 0; k--)
            list[k] = list[k - 1];
        list[0] = sel[i];
        bz2_bw_put(w, j + 1, ((1u << j) - 1) << 1);
    }
}

/* Code lengths: 5-bit start, then per symbol "10" (+1) / "11" (-1) steps
 * until the length is reached, and a 0 bit. */
static void put_lengths(bz2_bitwriter *w, const uint8_t *len, int alpha)
{
    int curr = len[0];
    bz2_bw_put(w, 5, (uint32_t)curr);
    for (int s = 0; s < alpha; s++) {
        for (; curr < len[s]; curr++)
            bz2_bw_put(w, 2, 2);
        for (; curr > len[s]; curr--)
            bz2_bw_put(w, 2, 3);
        bz2_bw_put(w, 1, 0);
    }
}

static void put_block(bz2_bitwriter *w, uint32_t crc, int randomised, int32_t orig,
                      const uint8_t in_use[256], const uint16_t *sym, size_t n_sym, int alpha)
{
    int n_groups = bz2_table_count(n_sym);
    size_t n_sel = (n_sym + BZ2_GROUP_SIZE - 1) / BZ2_GROUP_SIZE;
    uint8_t *sel = malloc(n_sel);
    uint32_t freq[BZ2_MAX_ALPHA] = { 0 };
    uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    uint32_t code[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    if (!sel) {
        w->oom = 1;
        return;
    }
    for (size_t i = 0; i < n_sym; i++)
        freq[sym[i]]++;
    bz2_choose_tables(sym, n_sym, freq, alpha, n_groups, len, sel);

    bz2_bw_put(w, 24, (uint32_t)(BZ2_BLOCK_MAGIC >> 24));
    bz2_bw_put(w, 24, (uint32_t)(BZ2_BLOCK_MAGIC & 0xffffff));
    bz2_bw_put(w, 32, crc);
    bz2_bw_put(w, 1, (uint32_t)randomised);
    bz2_bw_put(w, 24, (uint32_t)orig);
    /* Symbol map: 16 bits saying which 16-byte ranges are used, then 16
     * bits for each used range; most significant bit = lowest byte. */
    uint32_t ranges = 0;
    for (int r = 0; r < 16; r++)
        for (int b = 0; b < 16; b++)
            if (in_use[r * 16 + b])
                ranges |= 0x8000u >> r;
    bz2_bw_put(w, 16, ranges);
    for (int r = 0; r < 16; r++) {
        if (!(ranges & (0x8000u >> r)))
            continue;
        uint32_t bits = 0;
        for (int b = 0; b < 16; b++)
            if (in_use[r * 16 + b])
                bits |= 0x8000u >> b;
        bz2_bw_put(w, 16, bits);
    }
    bz2_bw_put(w, 3, (uint32_t)n_groups);
    bz2_bw_put(w, 15, (uint32_t)n_sel);
    put_selectors(w, sel, n_sel, n_groups);
    for (int t = 0; t < n_groups; t++) {
        put_lengths(w, len[t], alpha);
        bz2_canonical_codes(len[t], alpha, code[t]);
    }
    for (size_t g = 0, i = 0; g < n_sel; g++) {
        const uint8_t *l = len[sel[g]];
        const uint32_t *c = code[sel[g]];
        size_t end = i + BZ2_GROUP_SIZE < n_sym ? i + BZ2_GROUP_SIZE : n_sym;
        for (; i < end; i++)
            bz2_bw_put(w, l[sym[i]], c[sym[i]]);
    }
    free(sel);
}

/*
 * The input may be a client's memory that changes while we run: the block is
 * copied once and the CRC and RLE1 both come from the copy (so the block is
 * self-consistent), and a copy whose RLE1 output no longer fits the limit the
 * plan sized the block for is refused rather than written as an oversized
 * (non-conforming) block.
 */
int bz2_encode_block(const uint8_t *src, size_t n, size_t limit, unsigned flags,
                     bz2_bitwriter *w, uint32_t *crc)
{
    uint8_t *copy = malloc(n ? n : 1);
    uint8_t *rle = malloc(n + n / 4 + 1);
    uint8_t *bwt = NULL;
    uint16_t *sym = NULL;
    int rc = GC_E_NOMEM;
    if (!copy || !rle) {
        free(copy);
        free(rle);
        return rc;
    }
    memcpy(copy, src, n);
    src = copy;
    *crc = bz2_crc(src, n);
    size_t m = bz2_rle1_encode(src, n, rle); /* <= n + n / 4 for any bytes */
    if (m > limit) {
        rc = GC_E_INVALID;
        goto out;
    }
    int randomised = (flags & BZ2_ENC_RANDOMISE) != 0;
    if (randomised) {
        bz2_rand rs;
        bz2_rand_init(&rs);
        for (size_t i = 0; i < m; i++)
            rle[i] ^= bz2_rand_next(&rs);
    }
    bwt = malloc(m);
    sym = malloc((m + 1) * sizeof *sym);
    if (!bwt || !sym)
        goto out;
    int32_t orig = bz2_bwt(rle, (int32_t)m, bwt);
    if (orig < 0)
        goto out;
    uint8_t in_use[256] = { 0 }, seq[256];
    for (size_t i = 0; i < m; i++)
        in_use[rle[i]] = 1;
    int n_in_use = 0;
    for (int b = 0; b < 256; b++)
        if (in_use[b])
            seq[b] = (uint8_t)n_in_use++;
    uint32_t freq[BZ2_MAX_ALPHA];
    size_t n_sym = bz2_mtf_encode(bwt, m, seq, n_in_use, sym, freq);
    put_block(w, *crc, randomised, orig, in_use, sym, n_sym, n_in_use + 2);
    rc = w->oom ? GC_E_NOMEM : GC_OK;
out:
    free(copy);
    free(rle);
    free(bwt);
    free(sym);
    return rc;
}
