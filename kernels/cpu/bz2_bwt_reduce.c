/*
 * bz2_bwt_reduce.c - stage 2 of the rotation sort (bz2_bwt_sort.h): order
 * the LMS rotations whose LMS substrings are identical.
 *
 * Two such rotations compare like the rotations at their next LMS
 * positions. Number the LMS positions 0..m-1 in block order and name each
 * by the rank of its substring: sorting the LMS rotations is sorting the
 * rotations of this reduced string of names, which bz2_bwt_sais.c does in
 * linear time (long repeats of typical text make a doubling sort here
 * take ~15 passes). The reduced string is primitive when the block is:
 * equal names would tile the block periodically.
 */
#include <stdio.h>
#include "bz2_bwt_sort.h"

/* Names (group numbers, from the tie marks) of the LMS positions in
 * block order, into r[0..m) = sa[m..2m). lenb (sa + n / 2) is reused: an
 * LMS pair gets its name + 1, others keep 0. r[j] is written no later
 * than lenb slot >= j is read, as m <= n / 2. */
static int32_t reduced_string(int32_t n, int32_t *sa, int32_t m, const uint64_t *head)
{
    int32_t *lenb = sa + n / 2, *r = sa + m, half = (n + 1) / 2, names = 0;
    for (int32_t x = 0; x < m; x++) {
        names += bwt_tie_is_head(head, x);
        lenb[sa[x] >> 1] = names;
    }
    for (int32_t q = 0, j = 0; q < half; q++)
        if (lenb[q])
            r[j++] = lenb[q] - 1;
    return names;
}

int bwt_reduce(const uint8_t *t, int32_t n, int32_t *sa, int32_t m, const uint64_t *head)
{
    int32_t names = reduced_string(n, sa, m, head);
    int32_t *r = sa + m;
#ifdef BWT_STATS
    { int32_t tied = 0; for (int32_t x = 0; x < m; x++) tied += !bwt_tie_is_head(head, x) || (x + 1 < m && !bwt_tie_is_head(head, x + 1));
      fprintf(stderr, "n=%d m=%d names=%d tied=%d\n", n, m, names, tied); }
#endif
    int rc = bwt_sais_int(r, m, names, sa, sa + 2 * m, n - 2 * m);
    if (rc)
        return rc;
    bwt_lms_list(t, n, r); /* reduced indices back to positions */
    for (int32_t x = 0; x < m; x++)
        sa[x] = r[sa[x]];
    return 0;
}
