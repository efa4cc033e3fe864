/*
 * bz2_bwt_reduce.c - stage 2 of the rotation sort (bz2_bwt_sort.h): order
 * the LMS rotations whose LMS substrings are identical.
 *
 * Two such rotations compare like the rotations at their next LMS
 * positions. Number the LMS positions 0..m-1 in block order and name each
 * by the rank of its substring: sorting the LMS rotations is sorting the
 * rotations of this reduced string of names. It is primitive when the
 * block is (equal names would tile the block periodically).
 * Two ways, by measurement:
 *   - few ties (binaries): prefix doubling over the tied slots only
 *     (bz2_bwt_double.c) - typically 2-3 cheap rounds;
 *   - many ties (text, source: most substrings recur), or doubling that
 *     stops paying off (long repeats need ~log2(length) rounds): SA-IS on
 *     the whole reduced string (bz2_bwt_sais.c), linear time.
 * Any group refinement doubling achieved is kept as finer names.
 */
#include <stdlib.h>

#include "bz2_bwt_sort.h"

/* Replace the LMS positions in sa[0..m) by their reduced indices. */
static void to_reduced(const bwt_lms *l, int32_t *sa)
{
    for (int32_t x = 0; x < l->m; x++)
        sa[x] = bwt_lms_rank(l, sa[x]);
}

/* r[k] = group number of reduced index k; returns the number of groups. */
static int32_t name_groups(const int32_t *sa, int32_t m, const uint64_t *head, int32_t *r)
{
    int32_t names = 0;
    for (int32_t x = 0; x < m; x++) {
        names += bwt_tie_is_head(head, x);
        r[sa[x]] = names - 1;
    }
    return names;
}

/* Doubling first when at most half the slots are tied: on such blocks it
 * beats SA-IS; on text-like blocks most slots tie, and SA-IS wins. */
static int32_t try_doubling(int32_t n, int32_t *sa, int32_t m, uint64_t *head, int32_t tied)
{
    if (tied > m / 2)
        return tied;
    int32_t *key = 3 * (int64_t)m <= n ? sa + 2 * m : malloc((size_t)m * sizeof *key);
    if (!key) /* not fatal: SA-IS needs no key array */
        return tied;
    tied = bwt_double(sa, m, head, sa + m, key, tied);
    if (key != sa + 2 * m)
        free(key);
    return tied;
}

int bwt_reduce(const bwt_lms *l, int32_t *sa, uint64_t *head, int32_t tied)
{
    int32_t n = l->n, m = l->m;
    to_reduced(l, sa);
    tied = try_doubling(n, sa, m, head, tied);
    int32_t *r = sa + m; /* m <= n / 2: sa[m..2m) is free */
    if (tied > 0) {
        int32_t names = name_groups(sa, m, head, r);
        int rc = bwt_sais_int(r, m, names, sa, sa + 2 * m, n - 2 * m);
        if (rc)
            return rc;
    }
    bwt_lms_list(l, r); /* reduced indices back to positions */
    for (int32_t x = 0; x < m; x++)
        sa[x] = r[sa[x]];
    return 0;
}
