/*
 * bz2_bwt_sort.h - stages of the cyclic rotation sort behind bz2_bwt()
 * (bz2_bwt.c drives them). Internal to the bzip2 codec.
 *
 * The sort is an induced sort (Itoh-Tanaka / SA-IS family) adapted to
 * cyclic rotations of a primitive block t[0..n):
 *   type:  rotation i is S if rot(i) < rot(i+1), else L (never equal when
 *          t is primitive); i is an LMS position if it is S and i-1 is L.
 *   The driver rotates the block so that position 0 is an LMS position;
 *   then the LMS substring of p, t[p .. next LMS] (both ends included),
 *   never wraps past t[n] (== t[0]).
 *   1. bz2_bwt_lms.c: find the LMS positions; bz2_bwt_substr.c: sort them
 *      by their LMS substrings (2-byte buckets, then multikey quicksort /
 *      radix sort on cached 8-byte keys, bz2_bwt_records.c).
 *   2. bz2_bwt_reduce.c: LMS rotations with equal substrings are ordered
 *      by the rotations at the next LMS positions: the reduced string of
 *      substring names is sorted by prefix doubling (bz2_bwt_double.c)
 *      or SA-IS (bz2_bwt_sais.c).
 *   3. bz2_bwt_induce.c: two scans induce the order of every other
 *      rotation from the sorted LMS ones and write the BWT.
 * Only ~1/3 of the rotations of typical data are LMS, and only they are
 * compared; everything else costs two linear scans. O(n log n) worst
 * case. Memory besides the block and its output: 5n bytes (rotated copy,
 * sa), under n/2 in bit sets and prefix counts, 0.8 MB of fixed buffers,
 * and at most 2n more for the reduced string's buckets or doubling keys
 * when the free part of sa is too small for them.
 */
#ifndef GC_BZ2_BWT_SORT_H
#define GC_BZ2_BWT_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes after t[n-1] a rotated block must hold: t[n + k] = t[k % n]. Key
 * reads go up to 7 bytes past an LMS substring's end (<= n). */
#define BWT_PAD 16

/* Returned by the stages when two rotations are equal: the block is a
 * power u^k of a shorter string (bz2_bwt.c then sorts u). */
#define BWT_NOT_PRIMITIVE (-2)

/* Introsort depth budget for n elements: 2 log2(n) partitioning rounds
 * before heapsort takes over, which makes every comparison sort here
 * O(n log n) whatever the pivots. bwt_test_budget_cap > 0 (set by tests
 * only, never while blocks are being compressed) lowers it so that the
 * heapsort fallbacks get exercised. */
extern int bwt_test_budget_cap;
static inline int32_t bwt_depth_budget(int32_t n)
{
    int32_t b = 2 * (32 - __builtin_clz((uint32_t)n | 1));
    return bwt_test_budget_cap > 0 && bwt_test_budget_cap < b ? bwt_test_budget_cap : b;
}

/* ---- tie marks: one bit per sorted slot, set where a group begins ---- */
/* Slots [a, b) form a tied group (equal so far) when bit a is set and
 * bits a+1 .. b-1 are clear. A bit array, not a list of groups: there can
 * be m / 2 groups. */
static inline int bwt_tie_is_head(const uint64_t *head, int32_t x)
{
    return (int)(head[x >> 6] >> (x & 63) & 1);
}
/* Words of a mark array for `slots` slots. */
static inline size_t bwt_tie_words(int32_t slots)
{
    return (size_t)slots / 64 + 1;
}

/* ---- bz2_bwt_lms.c: the LMS positions as a bit set ---- */
typedef struct bwt_lms {
    uint64_t *bits; /* bit p set iff p is LMS; bit n is set as a sentinel */
    int32_t *cum;   /* cum[w] = LMS positions below 64 w */
    int32_t n, m;   /* block length, LMS count (<= n / 2: they are >= 2 apart) */
} bwt_lms;
/* Find the LMS positions of t (0 is one). Returns -1 when out of memory. */
int bwt_lms_find(const uint8_t *t, int32_t n, bwt_lms *l);
void bwt_lms_free(bwt_lms *l);
/* Next LMS position after p (n after the last one): p's substring is
 * t[p .. bwt_lms_next(p)]. */
static inline int32_t bwt_lms_next(const bwt_lms *l, int32_t p)
{
    int32_t q = p + 1;
    const uint64_t *w = l->bits + (q >> 6);
    uint64_t v = *w >> (q & 63);
    if (v)
        return q + __builtin_ctzll(v);
    do
        v = *++w;
    while (!v);
    return (int32_t)((w - l->bits) << 6) + __builtin_ctzll(v);
}
/* Index of LMS position p among all LMS positions in block order. */
static inline int32_t bwt_lms_rank(const bwt_lms *l, int32_t p)
{
    uint64_t below = l->bits[p >> 6] & ((1ull << (p & 63)) - 1);
    return l->cum[p >> 6] + __builtin_popcountll(below);
}
/* Write the LMS positions in increasing order to pos[0..m). */
void bwt_lms_list(const bwt_lms *l, int32_t *pos);

/* ---- bz2_bwt_substr.c ---- */
/* Sort the LMS positions by their LMS substrings into sa[0..m). Groups of
 * equal substrings are marked in head (all bits set on entry). Returns
 * the number of slots in tied groups, -1 when out of memory. */
int bwt_lms_sort(const uint8_t *t, const bwt_lms *l, int32_t *sa, uint64_t *head);

/* ---- bz2_bwt_records.c ---- */
typedef struct bwt_rec {
    uint64_t key;
    int32_t pos;
    int32_t ended; /* the substring ends within this key */
} bwt_rec;
/* Sort a[0..n) by key (any order among equal keys); tmp holds n records. */
void bwt_rec_sort(bwt_rec *a, bwt_rec *tmp, int32_t n);

/* ---- bz2_bwt_reduce.c ---- */
/* Order the `tied` tied slots of sa[0..m) (LMS positions sorted by
 * substring) completely; sa[m..n) is scratch. Returns 0, -1 (out of
 * memory), or BWT_NOT_PRIMITIVE when two rotations turn out equal (t is
 * a power of a shorter string). */
int bwt_reduce(const bwt_lms *l, int32_t *sa, uint64_t *head, int32_t tied);

/* ---- bz2_bwt_double.c ---- */
/* Prefix doubling rounds on reduced indices sa[0..m) grouped by head;
 * rank[0..m) and key[0..m) are scratch, rank ends as group starts. Stops
 * when a round fails to halve the tied slots; returns those left. */
int32_t bwt_double(int32_t *sa, int32_t m, uint64_t *head, int32_t *rank, int32_t *key, int32_t tied);

/* ---- bz2_bwt_sais.c ---- */
/* Sort the cyclic rotations of r[0..m) (values in [0, k)) into sa[0..m).
 * r must not overlap sa. spare[0..spare_len) is scratch used for bucket
 * arrays when large enough (else they are allocated). Returns 0, -1 (out
 * of memory) or BWT_NOT_PRIMITIVE (r is a power of a shorter string). */
int bwt_sais_int(const int32_t *r, int32_t m, int32_t k, int32_t *sa, int32_t *spare, int32_t spare_len);

/* ---- bz2_bwt_induce.c ---- */
/* sa[0..m) holds the LMS positions in rotation order. Induce the order of
 * all rotations (sa[] is overwritten), write the last column to out[0..n)
 * and return the rank of rotation `zero`. */
int32_t bwt_induce(const uint8_t *t, int32_t n, int32_t *sa, int32_t m, int32_t zero, uint8_t *out);

#endif
