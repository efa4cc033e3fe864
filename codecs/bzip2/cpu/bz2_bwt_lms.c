/*
 * bz2_bwt_lms.c - stage 1a of the rotation sort (bz2_bwt_sort.h): find the
 * LMS positions. Kept as a bit set with per-word prefix counts (n / 6
 * bytes): it stays in cache, gives a substring's end by a bit scan and a
 * position's LMS index by a popcount, where an int per position would
 * cost n * 2 bytes and cache misses.
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_bwt_sort.h"

/* S-type bits, right to left without branches: type(i) = S iff
 * t[i] < t[i+1], or equal bytes and type(i+1) = S. type(n) = type(0) = S
 * (position 0 is LMS by construction). */
static void s_types(const uint8_t *t, int32_t n, uint64_t *s_bits)
{
    unsigned s = 1;
    for (int32_t w = (n - 1) >> 6; w >= 0; w--) {
        int32_t base = w << 6, top = n - base < 64 ? n - base : 64;
        uint64_t v = 0;
        for (int32_t j = top - 1; j >= 0; j--) {
            unsigned a = t[base + j], b = t[base + j + 1];
            s = (a < b) | ((a == b) & s);
            v |= (uint64_t)s << j;
        }
        s_bits[w] = v;
    }
}

/* LMS = S with an L before it: bits & ~(bits shifted up one), in place,
 * low to high. Position 0's predecessor n-1 is L. */
static void lms_from_types(uint64_t *bits, int32_t words)
{
    uint64_t carry = 0; /* type of the position below the word */
    for (int32_t w = 0; w < words; w++) {
        uint64_t v = bits[w];
        bits[w] = v & ~(v << 1 | carry);
        carry = v >> 63;
    }
}

int bwt_lms_find(const uint8_t *t, int32_t n, bwt_lms *l)
{
    int32_t words = n / 64 + 1; /* room for the sentinel bit n */
    l->bits = malloc((size_t)words * sizeof *l->bits);
    l->cum = malloc((size_t)(words + 1) * sizeof *l->cum);
    if (!l->bits || !l->cum) {
        bwt_lms_free(l);
        return -1;
    }
    memset(l->bits, 0, (size_t)words * sizeof *l->bits);
    s_types(t, n, l->bits);
    lms_from_types(l->bits, words);
    int32_t sum = 0;
    for (int32_t w = 0; w < words; w++) {
        l->cum[w] = sum;
        sum += __builtin_popcountll(l->bits[w]);
    }
    l->cum[words] = sum;
    l->bits[n >> 6] |= 1ull << (n & 63);
    l->n = n;
    l->m = sum;
    return 0;
}

void bwt_lms_free(bwt_lms *l)
{
    free(l->bits);
    free(l->cum);
    l->bits = NULL;
    l->cum = NULL;
}

void bwt_lms_list(const bwt_lms *l, int32_t *pos)
{
    int32_t k = 0;
    for (int32_t w = 0; k < l->m; w++)
        for (uint64_t v = l->bits[w]; v && k < l->m; v &= v - 1)
            pos[k++] = (w << 6) + __builtin_ctzll(v);
}
