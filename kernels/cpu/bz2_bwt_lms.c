/*
 * bz2_bwt_lms.c - stage 1a of the rotation sort (bz2_bwt_sort.h): find the
 * LMS positions (and their substring lengths) by one right-to-left scan.
 */
#include <string.h>

#include "bz2_bwt_sort.h"

/* ---- finding LMS positions ---- */

/* One right-to-left step: type(i) = S iff t[i] < t[i+1], or equal bytes
 * and type(i+1) = S. Returns 1 when i+1 is an LMS position (i L, i+1 S). */
static inline int type_step(const uint8_t *t, int32_t i, int *s_next)
{
    int s = t[i] < t[i + 1] || (t[i] == t[i + 1] && *s_next);
    int lms = !s && *s_next;
    *s_next = s;
    return lms;
}

/* Position 0 (== n) is S and LMS by construction; position 1 then cannot
 * be LMS, so the scans stop at i = 1. */
int32_t bwt_lms_find(const uint8_t *t, int32_t n, int32_t *lenb)
{
    memset(lenb, 0, (size_t)(n + 1) / 2 * sizeof *lenb);
    int32_t m = 1, next = n;
    int s_next = 1;
    for (int32_t i = n - 1; i > 0; i--) {
        if (type_step(t, i, &s_next) && i + 1 < n) {
            int32_t p = i + 1;
            lenb[p >> 1] = (next - p) << 1 | (p & 1);
            next = p;
            m++;
        }
    }
    lenb[0] = next << 1;
    return m;
}

void bwt_lms_list(const uint8_t *t, int32_t n, int32_t *pos)
{
    int32_t m = 0;
    int s_next = 1;
    for (int32_t i = n - 1; i > 0; i--)
        if (type_step(t, i, &s_next) && i + 1 < n)
            pos[m++] = i + 1;
    pos[m++] = 0;
    for (int32_t a = 0, b = m - 1; a < b; a++, b--) {
        int32_t v = pos[a];
        pos[a] = pos[b];
        pos[b] = v;
    }
}
