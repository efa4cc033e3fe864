/*
 * bz2_rle1.c - bzip2's first stage: runs of 4..255 equal bytes become the
 * 4 bytes followed by a count byte (run length - 4, 0..251), and the
 * splitting of the input into blocks by the size of that RLE1 output.
 *
 * Both functions walk the input in the same "units", so a block boundary
 * never falls inside a 5-byte run unit, and never crosses a multiple of
 * BZ2_SEGMENT_BYTES of the input (docs/BZIP2.md, section 3):
 *   - at position i let r = length of the run of src[i] starting at i,
 *     capped at 255 and at the end of the input (or block);
 *   - r >= 4: one unit, 5 output bytes, consumes r input bytes;
 *   - r <  4: r units of 1 output byte each, consuming 1 input byte each.
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_internal.h"
#include "parallel.h"

/* Length of the run of src[i] starting at i, capped at 255 and at n. */
static size_t run_length(const uint8_t *src, size_t i, size_t n)
{
    size_t end = n - i > 255 ? i + 255 : n;
    size_t j = i + 1;
    while (j < end && src[j] == src[i])
        j++;
    return j - i;
}

/* Bytes of x that are zero, as 0x80 in that byte: exact, no false positives. */
static inline uint64_t zero_bytes(uint64_t x)
{
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full;
    return ~(((x & low7) + low7) | x | low7);
}

/*
 * First position p >= i where 4 equal bytes start (a run unit can start
 * only there: every byte before it is a 1-byte unit), or n. Eight bytes at
 * a time: d = word ^ next word marks bytes equal to their successor; three
 * such marks in a row are four equal bytes. Little-endian word order.
 */
static size_t next_run4(const uint8_t *src, size_t i, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (i + 9 <= n) {
        uint64_t a, b;
        memcpy(&a, src + i, 8);
        memcpy(&b, src + i + 1, 8);
        uint64_t z = zero_bytes(a ^ b); /* byte k: src[i+k] == src[i+k+1] */
        uint64_t three = z & (z >> 8) & (z >> 16);
        if (three)
            return i + (size_t)__builtin_ctzll(three) / 8;
        i += 6; /* a triple may still start at offsets 6 or 7 */
    }
#endif
    for (; i + 3 < n; i++)
        if (src[i] == src[i + 1] && src[i] == src[i + 2] && src[i] == src[i + 3])
            return i;
    return n;
}

/* Account n_bytes 1-byte units starting at i; they may split across blocks. */
static void plan_literals(size_t i, size_t n_bytes, size_t limit, size_t *st, size_t cap, size_t *nb, size_t *used)
{
    while (n_bytes > 0) {
        if (*used == 0) {
            if (*nb + 1 >= cap) /* cannot happen (see bz2_rle1_plan) */
                return;
            st[(*nb)++] = i; /* a block starts here */
        }
        size_t take = n_bytes < limit - *used ? n_bytes : limit - *used;
        *used += take;
        i += take;
        n_bytes -= take;
        if (*used == limit)
            *used = 0;
    }
}

/* Plan src[a..end) (one segment) greedily, appending block starts to st[*nb..cap). */
static void plan_segment(const uint8_t *src, size_t a, size_t end, size_t limit, size_t *st, size_t cap,
                         size_t *nb)
{
    size_t used = 0;
    size_t i = a;
    while (i < end) {
        size_t p = next_run4(src, i, end);
        plan_literals(i, p - i, limit, st, cap, nb, &used);
        i = p;
        if (i >= end)
            break;
        /* A run unit of 5 output bytes: never split; it opens the next block if it does not fit.
         * next_run4 saw 4 equal bytes at i (so i + 4 <= end); if they changed since (client
         * memory), the unit still consumes 4, which keeps the block count bound below. */
        size_t r = run_length(src, i, end);
        if (r < 4)
            r = 4;
        if (used + 5 > limit)
            used = 0;
        if (used == 0) {
            if (*nb + 1 >= cap) /* cannot happen (see cap): never write past the array */
                return;
            st[(*nb)++] = i;
        }
        used += 5;
        i += r;
        if (used == limit)
            used = 0;
    }
}

/* Every block but the last of a segment holds >= limit - 4 output bytes,
 * and 5 output bytes cost >= 4 input bytes, so this bounds a segment's
 * block count (plus one for the end entry). */
static size_t segment_cap(size_t len, size_t limit)
{
    return len / ((limit - 4) / 2) + 3;
}

typedef struct plan_job {
    const uint8_t *src;
    size_t n, limit;
    size_t **st; /* per segment: its block starts, or NULL (out of memory) */
    size_t *nb;  /* per segment: its block count */
} plan_job;

static void plan_one(void *ctx, size_t k)
{
    plan_job *j = ctx;
    size_t a = k * BZ2_SEGMENT_BYTES;
    size_t end = j->n - a > BZ2_SEGMENT_BYTES ? a + BZ2_SEGMENT_BYTES : j->n;
    size_t cap = segment_cap(end - a, j->limit);
    j->st[k] = malloc(cap * sizeof *j->st[k]);
    if (j->st[k])
        plan_segment(j->src, a, end, j->limit, j->st[k], cap, &j->nb[k]);
}

/* Segments do not share blocks, so they are planned in parallel. */
size_t bz2_rle1_plan(const uint8_t *src, size_t n, size_t limit, unsigned threads, size_t **starts)
{
    size_t segs = n ? (n - 1) / BZ2_SEGMENT_BYTES + 1 : 0;
    plan_job j = { .src = src, .n = n, .limit = limit };
    j.st = calloc(segs + 1, sizeof *j.st);
    j.nb = calloc(segs + 1, sizeof *j.nb);
    size_t total = 0, *st = NULL;
    int oom = !j.st || !j.nb;
    if (!oom)
        gc_parallel_for(segs, threads, plan_one, &j);
    for (size_t k = 0; !oom && k < segs; k++) {
        oom = !j.st[k];
        total += j.nb[k];
    }
    if (!oom)
        st = malloc((total + 1) * sizeof *st);
    if (st) {
        size_t at = 0;
        for (size_t k = 0; k < segs; k++) {
            memcpy(st + at, j.st[k], j.nb[k] * sizeof *st);
            at += j.nb[k];
        }
        st[total] = n;
    }
    for (size_t k = 0; j.st && k < segs; k++)
        free(j.st[k]);
    free(j.st);
    free(j.nb);
    if (!st)
        return (size_t)-1;
    *starts = st;
    return total;
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
