/*
 * bz2_walk_model.c - see bz2_walk_model.h. origPtr is checked here too, as
 * the GPU's stage does (the CPU engine checks it in its second stage).
 */
#include "bz2_walk_model.h"

#include <stdlib.h>

#include "bz2_stages.h"

void bz2_walk_model(const uint8_t *src, size_t len, uint64_t bit, bz2_walk_cand *out)
{
    static uint8_t *col;
    if (!col)
        col = malloc(BZ2_COLUMN_CAP);
    bz2_column c = { .bwt = col, .cap = col ? BZ2_COLUMN_CAP : 0 };
    bz2_dblock r;
    int rc = bz2_decode_column(src, len, bit, &c, &r);
    *out = (bz2_walk_cand){
        .n = c.n, .orig = c.orig, .crc = c.crc, .rand = (uint32_t)c.randomised, .end_bit = c.end_bit
    };
    if (rc == GC_E_TRUNCATED)
        out->status = 1;
    else if (rc != GC_OK || c.orig >= c.n)
        out->status = 2;
    else
        out->status = 0;
}
