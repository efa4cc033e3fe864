/*
 * bz2_bwt_induce.c - stage 3 of the rotation sort (bz2_bwt_sort.h): from
 * the sorted LMS rotations, induce the order of all rotations.
 *
 * Within the bucket of a byte c, L rotations (rot(i) > rot(i+1)) precede
 * S ones. A left-to-right scan places each L rotation i-1 at the head of
 * its bucket when it meets i: its successor is smaller, so already placed,
 * and placing in scan order keeps the order of the successors. A
 * right-to-left scan does the same for S rotations from the bucket tails.
 * Every chain of L (S) rotations ends in an LMS (an L) rotation, so
 * nothing is missed; in the cyclic setting the smallest rotation is LMS
 * and plays the role of the sentinel.
 *
 * Types are not stored: in the L scan only L and LMS rotations are
 * present, and i-1 is L iff t[i-1] >= t[i]. In the S scan, i-1 is S iff
 * t[i-1] < t[i], or t[i-1] == t[i] and i is S; S entries placed by the
 * scan carry a flag bit for that test.
 */
#include <string.h>

#include "bz2_bwt_sort.h"

#define EMPTY (-1)
#define S_FLAG (1 << 30) /* positions are < 2^30 */

/* Bucket bounds: lo[c] = first slot of byte c, hi[c] = one past its last. */
static void buckets(const uint8_t *t, int32_t n, int32_t lo[256], int32_t hi[256])
{
    int32_t cnt[256] = { 0 };
    for (int32_t i = 0; i < n; i++)
        cnt[t[i]]++;
    for (int c = 0, sum = 0; c < 256; c++) {
        lo[c] = sum;
        sum += cnt[c];
        hi[c] = sum;
    }
}

/* Move the sorted LMS rotations from sa[0..m) to the tails of their
 * buckets, in order; every other slot becomes EMPTY. Going from the top
 * down never overwrites an entry still to be moved: the x-th smallest
 * goes to a slot >= x. */
static void place_lms(const uint8_t *t, int32_t n, int32_t *sa, int32_t m, const int32_t hi[256])
{
    int32_t tail[256];
    memcpy(tail, hi, sizeof tail);
    memset(sa + m, 0xff, (size_t)(n - m) * sizeof *sa);
    for (int32_t x = m - 1; x >= 0; x--) {
        int32_t p = sa[x];
        sa[x] = EMPTY;
        sa[--tail[t[p]]] = p;
    }
}

static void induce_l(const uint8_t *t, int32_t n, int32_t *sa, const int32_t lo[256])
{
    int32_t head[256];
    memcpy(head, lo, sizeof head);
    for (int32_t x = 0; x < n; x++) {
        int32_t j = sa[x];
        if (j == EMPTY)
            continue;
        int32_t i = j ? j - 1 : n - 1;
        if (t[i] >= t[j])
            sa[head[t[i]]++] = i;
    }
}

/* The S scan visits every slot once, right to left, after its final entry
 * is in place: the natural moment to emit the BWT byte. */
static int32_t induce_s(const uint8_t *t, int32_t n, int32_t *sa, const int32_t hi[256], int32_t zero,
                        uint8_t *out)
{
    int32_t tail[256], orig = 0;
    memcpy(tail, hi, sizeof tail);
    for (int32_t x = n - 1; x >= 0; x--) {
        int32_t v = sa[x], j = v & (S_FLAG - 1);
        int32_t i = j ? j - 1 : n - 1;
        int ci = t[i], cj = t[j];
        out[x] = (uint8_t)ci;
        if (j == zero)
            orig = x;
        if (ci < cj + (v >> 30)) /* v >> 30: 1 for S entries */
            sa[--tail[ci]] = i | S_FLAG;
    }
    return orig;
}

int32_t bwt_induce(const uint8_t *t, int32_t n, int32_t *sa, int32_t m, int32_t zero, uint8_t *out)
{
    int32_t lo[256], hi[256];
    buckets(t, n, lo, hi);
    place_lms(t, n, sa, m, hi);
    induce_l(t, n, sa, lo);
    return induce_s(t, n, sa, hi, zero, out);
}
