/*
 * bz2_block_encode.c - one block, from its slice of the input to bits:
 * CRC, RLE1 and BWT here, then the block emitter (bz2_block_emit.c) for
 * MTF/RLE2, table choice and the block's fields. Blocks are independent,
 * so bz2_stream.c runs these in parallel.
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_stages.h"
#include "scratch.h"

/* xor the format's mask into a block's RLE1 bytes (randomised blocks). */
static void randomise(uint8_t *b, size_t m)
{
    bz2_rand rs;
    bz2_rand_init(&rs);
    for (size_t i = 0; i < m; i++)
        b[i] ^= bz2_rand_next(&rs);
}

/* The block's column: its RLE1 bytes' BWT (from rle[0..m)) into bwt. */
static int make_column(uint8_t *rle, size_t m, uint8_t *bwt, bz2_column *c)
{
    if (c->randomised)
        randomise(rle, m);
    int32_t orig = bz2_bwt(rle, (int32_t)m, bwt);
    if (orig < 0)
        return GC_E_NOMEM;
    c->bwt = bwt;
    c->cap = m;
    c->n = (uint32_t)m;
    c->orig = (uint32_t)orig;
    return GC_OK;
}

/*
 * The input may be a client's memory that changes while we run: the block is
 * copied once and the CRC and RLE1 both come from the copy (so the block is
 * self-consistent), and a copy whose RLE1 output no longer fits the limit the
 * plan sized the block for is refused rather than written as an oversized
 * (non-conforming) block.
 */
int bz2_encode_block(const uint8_t *src, size_t n, size_t limit, unsigned flags, bz2_bitwriter *w, uint32_t *crc)
{
    uint8_t *copy = gc_scratch(GC_SCRATCH_BZ2_COPY, n);
    uint8_t *rle = gc_scratch(GC_SCRATCH_BZ2_RLE1, n + n / 4 + 1);
    uint8_t *bwt = NULL;
    int rc = GC_E_NOMEM;
    if (!copy || !rle)
        return rc;
    memcpy(copy, src, n);
    *crc = bz2_crc(copy, n);
    size_t m = bz2_rle1_encode(copy, n, rle); /* <= n + n / 4 for any bytes */
    if (m > limit) {
        return GC_E_INVALID;
    }
    bz2_column c = { .crc = *crc, .randomised = (flags & BZ2_ENC_RANDOMISE) != 0 };
    bwt = gc_scratch(GC_SCRATCH_BZ2_BWT, m);
    if (bwt && (rc = make_column(rle, m, bwt, &c)) == GC_OK)
        rc = bz2_emit_block(&c, w);
    return rc;
}
