/*
 * bz2_block_emit.c - the block emitter: a block's BWT column to its bits
 * (symbol map, MTF/RLE2, table choice, then the fields in format order,
 * docs/BZIP2.md sections 5-7). The encoder's last stage, exported in
 * bz2_stages.h so that a BWT computed elsewhere (a GPU) is coded here.
 */
#include <stdlib.h>

#include "bz2_stages.h"
#include "scratch.h"

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

/* Magic, CRC, randomised bit, origPtr, then the symbol map: 16 bits saying
 * which 16-byte ranges are used, then 16 bits for each used range; most
 * significant bit = lowest byte. */
static void put_header(bz2_bitwriter *w, const bz2_column *c, const uint8_t in_use[256])
{
    bz2_bw_put(w, 24, (uint32_t)(BZ2_BLOCK_MAGIC >> 24));
    bz2_bw_put(w, 24, (uint32_t)(BZ2_BLOCK_MAGIC & 0xffffff));
    bz2_bw_put(w, 32, c->crc);
    bz2_bw_put(w, 1, (uint32_t)(c->randomised != 0));
    bz2_bw_put(w, 24, c->orig);
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
}

/* Tables, selectors and the symbols (freq: the symbol counts). */
static int put_coded(bz2_bitwriter *w, const uint16_t *sym, size_t n_sym, const uint32_t *freq, int alpha)
{
    int n_groups = bz2_table_count(n_sym);
    size_t n_sel = (n_sym + BZ2_GROUP_SIZE - 1) / BZ2_GROUP_SIZE;
    uint8_t *sel = malloc(n_sel);
    uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    uint32_t code[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    if (!sel)
        return GC_E_NOMEM;
    bz2_choose_tables(sym, n_sym, freq, alpha, n_groups, len, sel);
    bz2_bw_put(w, 3, (uint32_t)n_groups);
    bz2_bw_put(w, 15, (uint32_t)n_sel);
    put_selectors(w, sel, n_sel, n_groups);
    for (int t = 0; t < n_groups; t++) {
        put_lengths(w, len[t], alpha);
        bz2_canonical_codes(len[t], alpha, code[t]);
    }
    for (size_t g = 0, i = 0; g < n_sel; g++) {
        const uint8_t *l = len[sel[g]];
        const uint32_t *k = code[sel[g]];
        size_t end = i + BZ2_GROUP_SIZE < n_sym ? i + BZ2_GROUP_SIZE : n_sym;
        for (; i < end; i++)
            bz2_bw_put(w, l[sym[i]], k[sym[i]]);
    }
    free(sel);
    return GC_OK;
}

int bz2_emit_block(const bz2_column *c, bz2_bitwriter *w)
{
    if (c->n < 1 || c->n > BZ2_MAX_BLOCK || c->orig >= c->n)
        return GC_E_INVALID;
    uint8_t in_use[256] = { 0 }, seq[256];
    for (uint32_t i = 0; i < c->n; i++)
        in_use[c->bwt[i]] = 1;
    int n_in_use = 0;
    for (int b = 0; b < 256; b++)
        if (in_use[b])
            seq[b] = (uint8_t)n_in_use++;
    uint16_t *sym = gc_scratch(GC_SCRATCH_BZ2_SYM, ((size_t)c->n + 1) * sizeof *sym);
    uint32_t freq[BZ2_MAX_ALPHA];
    if (!sym)
        return GC_E_NOMEM;
    size_t n_sym = bz2_mtf_encode(c->bwt, c->n, seq, n_in_use, sym, freq);
    put_header(w, c, in_use);
    int rc = put_coded(w, sym, n_sym, freq, n_in_use + 2);
    return rc == GC_OK && w->oom ? GC_E_NOMEM : rc;
}
