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
 * Types and LMS flags are bit sets (m / 4 bytes, cache resident), walked
 * a word at a time where possible: per-position tests are unpredictable
 * branches.
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_bwt_sort.h"

#define EMPTY (-1)

typedef struct level {
    const int32_t *r; /* the string, values in [0, k) */
    int32_t m, k;
    uint64_t *s;   /* type bits, 1 = S */
    uint64_t *lms; /* LMS bits */
    int32_t *cnt;  /* k symbol counts, or NULL: recount */
    int32_t *bkt;  /* k bucket bounds */
} level;

static inline int32_t prev_of(int32_t i, int32_t m)
{
    return i ? i - 1 : m - 1;
}
static inline int bit(const uint64_t *b, int32_t i)
{
    return (int)(b[i >> 6] >> (i & 63) & 1);
}
static inline int32_t n_words(int32_t m)
{
    return (m + 63) >> 6;
}

/* ---- types ---- */

/* Type of the last position: it compares with r[0], and when equal
 * inherits the type of position 0, i.e. of the first change in r.
 * Returns -1 for a constant string. */
static int last_type(const int32_t *r, int32_t m)
{
    if (r[m - 1] != r[0])
        return r[m - 1] < r[0];
    for (int32_t j = 0; j + 1 < m; j++)
        if (r[j] != r[j + 1])
            return r[j] < r[j + 1];
    return -1;
}

/* S bits right to left without data-dependent branches, then
 * LMS = S & ~(S << 1); the position before 0 is m - 1. */
static int classify(level *l)
{
    const int32_t *r = l->r;
    int32_t m = l->m, words = n_words(m);
    int s0 = last_type(r, m);
    if (s0 < 0)
        return -1;
    unsigned s = (unsigned)s0;
    for (int32_t w = words - 1; w >= 0; w--) {
        int32_t base = w << 6, top = m - base < 64 ? m - base : 64;
        uint64_t v = 0;
        for (int32_t j = top - 1; j >= 0; j--) {
            int32_t i = base + j;
            if (i + 1 < m) {
                int32_t a = r[i], b = r[i + 1];
                s = (unsigned)(a < b) | ((unsigned)(a == b) & s);
            }
            v |= (uint64_t)s << j;
        }
        l->s[w] = v;
    }
    uint64_t carry = (uint64_t)(unsigned)s0; /* type of m - 1 */
    for (int32_t w = 0; w < words; w++) {
        uint64_t v = l->s[w];
        l->lms[w] = v & ~(v << 1 | carry);
        carry = v >> 63;
    }
    return 0;
}

/* ---- buckets ---- */

/* bkt[c] = first slot (heads) or one past the last slot (tails) of c.
 * From the saved counts, or by counting again when there was no room
 * to save them. */
static void bucket_bounds(const level *l, int tails)
{
    int32_t *b = l->bkt, *c = l->cnt;
    if (!c) {
        memset(b, 0, (size_t)l->k * sizeof *b);
        for (int32_t i = 0; i < l->m; i++)
            b[l->r[i]]++;
    }
    for (int32_t x = 0, sum = 0; x < l->k; x++) {
        int32_t v = c ? c[x] : b[x];
        sum += v;
        b[x] = tails ? sum : sum - v;
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
        if (!bit(l->s, i))
            sa[b[r[i]]++] = i;
    }
    /* Every slot is filled when this scan reaches it: L slots by the scan
     * above, S slots by this one (from a larger, earlier scanned entry). */
    bucket_bounds(l, 1);
    for (int32_t x = m - 1; x >= 0; x--) {
        int32_t j = sa[x];
        int32_t i = prev_of(j, m);
        if (bit(l->s, i))
            sa[--b[r[i]]] = i;
    }
}

/* ---- stage 1 and naming ---- */

/* Stage 1: LMS positions sorted by LMS substring into sa[0..m2). */
static int32_t sort_substrings(const level *l, int32_t *sa)
{
    int32_t m = l->m, m2 = 0, words = n_words(m);
    memset(sa, 0xff, (size_t)m * sizeof *sa);
    bucket_bounds(l, 1);
    for (int32_t w = 0; w < words; w++)
        for (uint64_t v = l->lms[w]; v; v &= v - 1) {
            int32_t i = (w << 6) + __builtin_ctzll(v);
            sa[--l->bkt[l->r[i]]] = i;
        }
    induce(l, sa);
    for (int32_t x = 0; x < m; x++) { /* keep the LMS entries, in order */
        int32_t p = sa[x];
        sa[m2] = p;
        m2 += bit(l->lms, p);
    }
    return m2;
}

/* Length of p's LMS substring (up to the next LMS position, cyclic). */
static int32_t substring_len(const level *l, int32_t p)
{
    int32_t words = n_words(l->m), q = p + 1;
    for (;;) {
        if (q >= l->m) { /* wrapped: position 0 is not necessarily LMS */
            for (q = 0; !bit(l->lms, q);)
                q++;
            return l->m - p + q;
        }
        uint64_t v = l->lms[q >> 6] >> (q & 63);
        if (v)
            return q + __builtin_ctzll(v) - p;
        q = (q | 63) + 1;
        if ((q >> 6) >= words)
            q = l->m;
    }
}

/* Equal LMS substrings of equal length: same symbols (types follow). */
static int same_symbols(const level *l, int32_t p, int32_t q, int32_t len)
{
    const int32_t *r = l->r;
    int32_t m = l->m;
    if (p + len < m && q + len < m)
        return memcmp(r + p, r + q, (size_t)(len + 1) * sizeof *r) == 0;
    for (int32_t d = 0; d <= len; d++) /* one of them wraps */
        if (r[(p + d) % m] != r[(q + d) % m])
            return 0;
    return 1;
}

/* Name the sorted substrings; the names land in position order in
 * sa[m - m2 .. m) (LMS positions are >= 2 apart, so p >> 1 is unique).
 * Returns the number of distinct names. */
static int32_t name_substrings(const level *l, int32_t *sa, int32_t m2)
{
    int32_t m = l->m, names = 0, prev = 0, prev_len = -1;
    memset(sa + m2, 0xff, (size_t)(m - m2) * sizeof *sa);
    for (int32_t x = 0; x < m2; x++) {
        int32_t p = sa[x], len = substring_len(l, p);
        if (len != prev_len || !same_symbols(l, p, prev, len))
            names++;
        prev = p;
        prev_len = len;
        sa[m2 + (p >> 1)] = names - 1;
    }
    for (int32_t x = m - 1, y = m; x >= m2; x--)
        if (sa[x] != EMPTY)
            sa[--y] = sa[x];
    return names;
}

/* ---- stage 3 and recursion ---- */

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

/* bkt (and cnt, saving recounts) go to spare when it has room; else bkt
 * alone is allocated, which bounds the extra memory by 4 k bytes. */
static int alloc_buckets(level *l, int32_t *spare, int32_t spare_len)
{
    int32_t k = l->k;
    l->cnt = NULL;
    if (k <= spare_len) {
        l->bkt = spare;
        if (2 * (int64_t)k <= spare_len)
            l->cnt = spare + k;
    } else {
        l->bkt = malloc((size_t)k * sizeof *l->bkt);
    }
    if (!l->bkt)
        return -1;
    if (l->cnt) {
        memset(l->cnt, 0, (size_t)k * sizeof *l->cnt);
        for (int32_t i = 0; i < l->m; i++)
            l->cnt[l->r[i]]++;
    }
    return 0;
}

static void free_buckets(level *l, int32_t *spare)
{
    if (l->bkt != spare)
        free(l->bkt);
    l->cnt = l->bkt = NULL;
}

/* Stage 2 when names repeat: sort the names' string, then turn its
 * order back into LMS positions in sa[0..m2). */
static int sort_reduced(level *l, int32_t *sa, int32_t m2, int32_t names, int32_t *spare, int32_t spare_len)
{
    int32_t *pos = sa + l->m - m2, words = n_words(l->m), c = 0;
    int rc = bwt_sais_int(pos, m2, names, sa, spare, spare_len);
    if (rc)
        return rc;
    for (int32_t w = 0; w < words; w++)
        for (uint64_t v = l->lms[w]; v; v &= v - 1)
            pos[c++] = (w << 6) + __builtin_ctzll(v);
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
    if (names < m2) {
        free_buckets(l, spare); /* the recursion may reuse spare */
        int rc = sort_reduced(l, sa, m2, names, spare, spare_len);
        if (rc)
            return rc;
        if (alloc_buckets(l, spare, spare_len))
            return -1;
    }
    induce_final(l, sa, m2);
    return 0;
}

int bwt_sais_int(const int32_t *r, int32_t m, int32_t k, int32_t *sa, int32_t *spare, int32_t spare_len)
{
    if (m == 1) {
        sa[0] = 0;
        return 0;
    }
    level l = { .r = r, .m = m, .k = k };
    size_t words = (size_t)n_words(m);
    l.s = malloc(2 * words * sizeof *l.s);
    if (!l.s)
        return -1;
    l.lms = l.s + words;
    int rc = sais_level(&l, sa, spare, spare_len);
    free_buckets(&l, spare);
    free(l.s);
    return rc;
}
