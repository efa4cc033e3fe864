/*
 * bz2_block_invert.c - the decoder's second stage: a block's BWT column
 * (bz2_stages.h) back to its bytes: origPtr check, inverse BWT, optional
 * de-randomisation, inverse RLE1 and the CRC check. The column may come
 * from bz2_decode_column or from another backend's first stage.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bz2_stages.h"

int bz2_dblock_vfail(bz2_dblock *r, int code, const char *fmt, va_list ap)
{
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    r->status = code;
    return code;
}

int bz2_dblock_fail(bz2_dblock *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bz2_dblock_vfail(r, code, fmt, ap);
    va_end(ap);
    return code;
}

/* What a first stage must hand over: n within the buffer and the block
 * limit, counts adding up to n, origPtr a row of the column. */
static int check_column(const bz2_column *c, bz2_dblock *r)
{
    if (c->n > BZ2_MAX_BLOCK || c->n > c->cap || !c->bwt)
        return bz2_dblock_fail(r, GC_E_INVALID, "column of %u bytes does not fit its buffer", c->n);
    uint64_t sum = 0;
    for (int b = 0; b < 256; b++)
        sum += c->counts[b];
    if (sum != c->n)
        return bz2_dblock_fail(r, GC_E_INVALID, "byte counts add up to %llu, not the block length %u",
                               (unsigned long long)sum, c->n);
    if (c->orig >= c->n)
        return bz2_dblock_fail(r, GC_E_CORRUPT, "origPtr %u out of range (block length %u)", c->orig, c->n);
    return GC_OK;
}

/* Inverse BWT in place, then the de-randomisation of randomised blocks. */
static int inverse_bwt(bz2_column *c, bz2_dblock *r)
{
    if (bz2_inverse_bwt(c->bwt, c->cap, c->n, c->orig, c->counts))
        return bz2_dblock_fail(r, GC_E_NOMEM, "out of memory");
    if (c->randomised) {
        bz2_rand rs;
        bz2_rand_init(&rs);
        for (uint32_t k = 0; k < c->n; k++)
            c->bwt[k] ^= bz2_rand_next(&rs);
    }
    return GC_OK;
}

/* Output size of inverse RLE1 (after 4 equal bytes the next byte is a
 * repeat count); *cut set when the block ends right after such 4 bytes (the
 * reference decoder rejects it too), the size then counting those 4. */
static int64_t rle1_size(const uint8_t *b, uint32_t n, bool *cut)
{
    int64_t total = 0;
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
    *cut = run == 4;
    return total;
}

static void rle1_expand(const uint8_t *b, uint32_t n, uint8_t *out)
{
    size_t o = 0;
    int last = -1, run = 0;
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
}

/* Inverse RLE1 into r->out: sized first, so max_out is checked before the
 * output is allocated. */
static int inverse_rle1(const bz2_column *c, size_t max_out, bz2_dblock *r)
{
    bool cut;
    int64_t total = rle1_size(c->bwt, c->n, &cut);
    if (cut) {
        /* libbz2 reads the count from the inverse BWT's next step, which
         * wraps to the block's first byte, and writes that run first */
        r->bad_len = (size_t)total + c->bwt[0];
        return bz2_dblock_fail(r, GC_E_CORRUPT, "block ends inside a run (count byte missing)");
    }
    if (max_out && (uint64_t)total > max_out)
        return bz2_dblock_fail(r, GC_E_LIMIT, "decompressed size exceeds the %zu byte limit", max_out);
    uint8_t *out = malloc(total ? (size_t)total : 1);
    if (!out)
        return bz2_dblock_fail(r, GC_E_NOMEM, "out of memory");
    rle1_expand(c->bwt, c->n, out);
    r->out = out;
    r->out_len = (size_t)total;
    return GC_OK;
}

int bz2_invert_column_flags(bz2_column *c, size_t max_out, unsigned flags, bz2_dblock *r)
{
    memset(r, 0, sizeof *r);
    r->end_bit = c->end_bit;
    r->stored_crc = c->crc;
    r->nblock = c->n;
    if (check_column(c, r) || inverse_bwt(c, r) || inverse_rle1(c, max_out, r))
        return r->status;
    uint32_t crc = bz2_crc(r->out, r->out_len);
    if (crc != c->crc) {
        bz2_dblock_fail(r, GC_E_CRC, "block CRC mismatch (stored 0x%08x, computed 0x%08x)", c->crc, crc);
        r->bad_len = r->out_len;
        if (flags & BZ2_KEEP_BAD_CRC)
            return r->status;
        free(r->out);
        r->out = NULL;
        r->out_len = 0;
    }
    return r->status;
}

int bz2_invert_column(bz2_column *c, size_t max_out, bz2_dblock *r)
{
    return bz2_invert_column_flags(c, max_out, 0, r);
}
