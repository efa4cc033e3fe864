/*
 * bz2_bwt_sais.c - sorting the cyclic rotations of an integer string by
 * induced sorting (SA-IS, Nong-Zhang-Chan), for the reduced strings of the
 * rotation sort (bz2_bwt_reduce.c). Linear time: long repeats, which make
 * comparison or doubling sorts slow, cost nothing extra here.
 *
 * Cyclic version: types compare rotations (rot(i) vs rot(i+1)), indices
 * wrap, and there is no sentinel - the smallest rotation is LMS and takes
 * its place (see bz2_bwt_induce.c). Per level:
 *   1. place the LMS positions in any order, induce: the LMS substrings
 *      come out sorted;
 *   2. name them; if names repeat, sort the string of names recursively
 *      (at most half as long);
 *   3. place the LMS positions in their final order and induce again.
 * A string that is a power u^k (k >= 2) reduces to a power again, down to
 * a constant string, which is reported as BWT_NOT_PRIMITIVE.
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "bz2_bwt_sort.h"

#define EMPTY (-1)

typedef struct level {
    const int32_t *r; /* the string, values in [0, k) */
    int32_t m, k;
    uint64_t *s;      /* type bits, 1 = S */
    int32_t *bkt;     /* k bucket bounds */
} level;

static inline int32_t prev_of(int32_t i, int32_t m) { return i ? i - 1 : m - 1; }
static inline int32_t next_of(int32_t i, int32_t m) { return i + 1 < m ? i + 1 : 0; }
static inline int is_s(const level *l, int32_t i) { return (int)(l->s[i >> 6] >> (i & 63) & 1); }
static inline int is_lms(const level *l, int32_t i)
{
    return is_s(l, i) && !is_s(l, prev_of(i, l->m));
}

/* Cyclic types, computed right to left from a position whose successor
 * differs. Returns -1 for a constant string. */
static int classify(level *l)
{
    const int32_t *r = l->r;
    int32_t m = l->m, j = 0;
    while (j < m && r[j] == r[next_of(j, m)])
        j++;
    if (j == m)
        return -1;
    int s = r[j] < r[next_of(j, m)];
    for (int32_t c = 0, i = j; c < m; c++, i = prev_of(i, m)) {
        int32_t nx = next_of(i, m);
        if (c > 0)
            s = r[i] < r[nx] || (r[i] == r[nx] && s);
        if (s)
            l->s[i >> 6] |= 1ull << (i & 63);
    }
    return 0;
}

/* bkt[c] = first slot (heads) or one past the last slot (tails) of c. */
static void bucket_bounds(const level *l, int tails)
{
    int32_t *b = l->bkt;
    memset(b, 0, (size_t)l->k * sizeof *b);
    for (int32_t i = 0; i < l->m; i++)
        b[l->r[i]]++;
    for (int32_t c = 0, sum = 0; c < l->k; c++) {
        int32_t v = b[c];
        b[c] = tails ? sum + v : sum;
        sum += v;
    }
}

static void induce(const level *l, int32_t *sa)
{
    const int32_t *r = l->r;
    int32_t m = l->m, *b = l->bkt;
    bucket_bounds(l, 0);
    for (int32_t x = 0; x < m; x++) {
        int32_t j = sa[x];
        if (j == EMPTY)
            continue;
        int32_t i = prev_of(j, m);
        if (!is_s(l, i))
            sa[b[r[i]]++] = i;
    }
    bucket_bounds(l, 1);
    for (int32_t x = m - 1; x >= 0; x--) {
        int32_t j = sa[x];
        if (j == EMPTY)
            continue;
        int32_t i = prev_of(j, m);
        if (is_s(l, i))
            sa[--b[r[i]]] = i;
    }
}

/* Stage 1: LMS positions sorted by LMS substring into sa[0..m2). */
static int32_t sort_substrings(const level *l, int32_t *sa)
{
    int32_t m = l->m, m2 = 0;
    memset(sa, 0xff, (size_t)m * sizeof *sa);
    bucket_bounds(l, 1);
    for (int32_t i = 0; i < m; i++)
        if (is_lms(l, i))
            sa[--l->bkt[l->r[i]]] = i;
    induce(l, sa);
    for (int32_t x = 0; x < m; x++)
        if (is_lms(l, sa[x]))
            sa[m2++] = sa[x];
    return m2;
}

/* Equal LMS substrings: same values and types up to the next LMS. */
static int same_substring(const level *l, int32_t p, int32_t q)
{
    for (int32_t d = 0; d < l->m; d++) {
        if (l->r[p] != l->r[q] || is_s(l, p) != is_s(l, q))
            return 0;
        if (d > 0 && (is_lms(l, p) || is_lms(l, q)))
            return is_lms(l, p) && is_lms(l, q);
        p = next_of(p, l->m);
        q = next_of(q, l->m);
    }
    return 1;
}

/* Name the sorted substrings; the names land in position order in
 * sa[m - m2 .. m) (LMS positions are >= 2 apart, so p >> 1 is unique).
 * Returns the number of distinct names. */
static int32_t name_substrings(const level *l, int32_t *sa, int32_t m2)
{
    int32_t m = l->m, names = 0;
    memset(sa + m2, 0xff, (size_t)(m - m2) * sizeof *sa);
    for (int32_t x = 0; x < m2; x++) {
        if (x == 0 || !same_substring(l, sa[x], sa[x - 1]))
            names++;
        sa[m2 + (sa[x] >> 1)] = names - 1;
    }
    for (int32_t x = m - 1, y = m; x >= m2; x--)
        if (sa[x] != EMPTY)
            sa[--y] = sa[x];
    return names;
}

/* Stage 3: sa[0..m2) holds the LMS positions in final order. */
static void induce_final(const level *l, int32_t *sa, int32_t m2)
{
    memset(sa + m2, 0xff, (size_t)(l->m - m2) * sizeof *sa);
    bucket_bounds(l, 1);
    for (int32_t x = m2 - 1; x >= 0; x--) {
        int32_t p = sa[x];
        sa[x] = EMPTY;
        sa[--l->bkt[l->r[p]]] = p;
    }
    induce(l, sa);
}

static int alloc_buckets(level *l, int32_t *spare, int32_t spare_len)
{
    l->bkt = l->k <= spare_len ? spare : malloc((size_t)l->k * sizeof *l->bkt);
    return l->bkt ? 0 : -1;
}

static void free_buckets(level *l, int32_t *spare)
{
    if (l->bkt != spare)
        free(l->bkt);
    l->bkt = NULL;
}

/* Stage 2 when names repeat: sort the names' string, then turn its
 * order back into LMS positions in sa[0..m2). */
static int sort_reduced(level *l, int32_t *sa, int32_t m2, int32_t names, int32_t *spare,
                        int32_t spare_len)
{
    int32_t m = l->m, *pos = sa + m - m2;
    int rc = bwt_sais_int(pos, m2, names, sa, spare, spare_len);
    if (rc)
        return rc;
    for (int32_t i = 0, c = 0; i < m; i++)
        if (is_lms(l, i))
            pos[c++] = i;
    for (int32_t x = 0; x < m2; x++)
        sa[x] = pos[sa[x]];
    return 0;
}

static int sais_level(level *l, int32_t *sa, int32_t *spare, int32_t spare_len)
{
    if (classify(l))
        return BWT_NOT_PRIMITIVE;
    if (alloc_buckets(l, spare, spare_len))
        return -1;
    int32_t m2 = sort_substrings(l, sa);
    int32_t names = name_substrings(l, sa, m2);
#ifdef BWT_STATS
    fprintf(stderr, "  level m=%d k=%d m2=%d names=%d\n", l->m, l->k, m2, names);
#endif
    if (names < m2) {
        free_buckets(l, spare); /* the recursion may reuse spare */
        int rc = sort_reduced(l, sa, m2, names, spare, spare_len);
        if (rc)
            return rc;
        if (alloc_buckets(l, spare, spare_len))
            return -1;
    }
    induce_final(l, sa, m2);
    free_buckets(l, spare);
    return 0;
}

int bwt_sais_int(const int32_t *r, int32_t m, int32_t k, int32_t *sa, int32_t *spare,
                 int32_t spare_len)
{
    if (m == 1) {
        sa[0] = 0;
        return 0;
    }
    level l = { .r = r, .m = m, .k = k };
    size_t words = (size_t)m / 64 + 1;
    l.s = calloc(words, sizeof *l.s);
    if (!l.s)
        return -1;
    int rc = sais_level(&l, sa, spare, spare_len);
    free_buckets(&l, spare);
    free(l.s);
    return rc;
}
