/*
 * bz2_rle1.c - bzip2's first stage: runs of 4..255 equal bytes become the
 * 4 bytes followed by a count byte (run length - 4, 0..251), and the
 * splitting of the input into blocks by the size of that RLE1 output.
 *
 * Both functions walk the input in the same "units", so a block boundary
 * never falls inside a 5-byte run unit (docs/BZIP2.md, "Blocks and RLE1"):
 *   - at position i let r = length of the run of src[i] starting at i,
 *     capped at 255 and at the end of the input (or block);
 *   - r >= 4: one unit, 5 output bytes, consumes r input bytes;
 *   - r <  4: r units of 1 output byte each, consuming 1 input byte each.
 */
#include <stdlib.h>

#include "bz2_internal.h"

/* Length of the run of src[i] starting at i, capped at 255 and at n. */
static size_t run_length(const uint8_t *src, size_t i, size_t n)
{
    size_t end = n - i > 255 ? i + 255 : n;
    size_t j = i + 1;
    while (j < end && src[j] == src[i])
        j++;
    return j - i;
}

size_t bz2_rle1_plan(const uint8_t *src, size_t n, size_t limit, size_t **starts)
{
    /* Every block but the last holds >= limit - 4 output bytes, and 5
     * output bytes cost >= 4 input bytes, so this bounds the count. */
    size_t cap = n / ((limit - 4) / 2) + 2;
    size_t *st = malloc(cap * sizeof *st);
    if (!st)
        return (size_t)-1;
    size_t nb = 0, used = 0;
    size_t i = 0;
    while (i < n) {
        size_t r = run_length(src, i, n);
        size_t cost = r >= 4 ? 5 : r;
        if (used == 0)
            st[nb++] = i; /* a block starts here */
        if (used + cost > limit) {
            if (r >= 4) {
                used = 0; /* the unit does not fit: it opens the next block */
                continue;
            }
            /* Literal bytes can be split: fill the block exactly. */
            r = limit - used;
            cost = r;
        }
        used += cost;
        i += r;
        if (used == limit)
            used = 0;
    }
    st[nb] = n;
    *starts = st;
    return nb;
}

size_t bz2_rle1_encode(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t o = 0, i = 0;
    while (i < n) {
        size_t r = run_length(src, i, n);
        if (r >= 4) {
            dst[o] = dst[o + 1] = dst[o + 2] = dst[o + 3] = src[i];
            dst[o + 4] = (uint8_t)(r - 4);
            o += 5;
        } else {
            for (size_t k = 0; k < r; k++)
                dst[o + k] = src[i];
            o += r;
        }
        i += r;
    }
    return o;
}
