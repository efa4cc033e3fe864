/*
 * bz2_bwt_lms.c - stage 1 of the rotation sort (bz2_bwt_sort.h): find the
 * LMS positions and sort them by their LMS substrings.
 *
 * Substring order. Compare the substrings of p and q byte by byte; past
 * its end (t[p + len] included) a substring reads as 0xff. This gives the
 * rotation order unless the substrings are equal: if q's substring is
 * longer and agrees with p's on all len + 1 bytes, then q + len is an
 * L position with the same byte as the S position p + len, so
 * rot(q) < rot(p); and q's next byte is <= t[q + len] < 0xff (an L byte
 * is >= its successor, and t[p + len] is smaller than the L byte before
 * it), so the fill makes q compare smaller too, never equal. Hence two
 * substrings compare equal exactly when they are identical (same length),
 * and those ties are left to bz2_bwt_reduce.c.
 * Every comparison stops at the end of a substring and the substrings
 * tile the block, so the work is O(n) plus the quicksort's O(m log m);
 * an introsort-style depth limit (heapsort) keeps that a worst case.
 */
#include <stdlib.h>
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

/* ---- bucketing by the first two bytes ---- */

/* Counting sort of the LMS positions by t[p], t[p+1] into sa[0..m).
 * Afterwards bkt[b] is the end of bucket b (its start is bkt[b - 1]). */
static void bucket2(const uint8_t *t, int32_t n, const int32_t *lenb, int32_t *sa, int32_t *bkt)
{
    int32_t half = (n + 1) / 2;
    memset(bkt, 0, 65536 * sizeof *bkt);
    for (int32_t k = 0; k < half; k++)
        if (lenb[k]) {
            int32_t p = 2 * k + (lenb[k] & 1);
            bkt[t[p] << 8 | t[p + 1]]++;
        }
    for (int32_t b = 0, sum = 0; b < 65536; b++) {
        int32_t c = bkt[b];
        bkt[b] = sum;
        sum += c;
    }
    for (int32_t k = 0; k < half; k++)
        if (lenb[k]) {
            int32_t p = 2 * k + (lenb[k] & 1);
            sa[bkt[t[p] << 8 | t[p + 1]]++] = p;
        }
}

/* ---- multikey quicksort by substring ---- */

#define INSERTION_MAX 16

typedef struct lms_frame {
    int32_t lo, hi, depth, budget;
} lms_frame;

typedef struct lms_sorter {
    const uint8_t *t;
    const int32_t *lenb;
    int32_t *sa;
    uint64_t *head;
    lms_frame *stack;
    size_t sp, cap;
    int tied;
} lms_sorter;

/* Bytes of p's substring from depth d on (its last byte included). */
static inline int32_t rest(const lms_sorter *s, int32_t p, int32_t d)
{
    return (s->lenb[p >> 1] >> 1) + 1 - d;
}

/* The 8 bytes at depth d as a big-endian number, 0xff past the end. */
static inline uint64_t key_at(const lms_sorter *s, int32_t p, int32_t d)
{
    int32_t r = rest(s, p, d);
    if (r <= 0)
        return ~0ull;
    uint64_t v;
    memcpy(&v, s->t + p + d, 8);
    v = __builtin_bswap64(v);
    return r >= 8 ? v : v | (~0ull >> (8 * r));
}

/* Substrings of p and q, equal in their first d bytes: <0, 0, >0. Equal
 * keys in the word where one substring ends mean identical substrings. */
static int lms_cmp(const lms_sorter *s, int32_t p, int32_t q, int32_t d)
{
    for (;; d += 8) {
        uint64_t a = key_at(s, p, d), b = key_at(s, q, d);
        if (a != b)
            return a < b ? -1 : 1;
        if (rest(s, p, d) < 8)
            return 0;
    }
}

/* Slots [a, b) hold identical substrings: clear their tie bits. */
static void mark_tied(lms_sorter *s, int32_t a, int32_t b)
{
    for (int32_t x = a + 1; x < b; x++)
        s->head[x >> 6] &= ~(1ull << (x & 63));
    s->tied = 1;
}

static void insertion_sort(lms_sorter *s, int32_t lo, int32_t hi, int32_t d)
{
    int32_t *sa = s->sa;
    int ties = 0;
    for (int32_t i = lo + 1; i < hi; i++) {
        int32_t v = sa[i], j = i;
        int r = 1;
        while (j > lo && (r = lms_cmp(s, v, sa[j - 1], d)) < 0) {
            sa[j] = sa[j - 1];
            j--;
        }
        ties |= r == 0;
        sa[j] = v;
    }
    if (!ties) /* the common case: no second pass */
        return;
    for (int32_t a = lo; a < hi;) {
        int32_t b = a + 1;
        while (b < hi && lms_cmp(s, sa[a], sa[b], d) == 0)
            b++;
        if (b - a > 1)
            mark_tied(s, a, b);
        a = b;
    }
}

static int push(lms_sorter *s, int32_t lo, int32_t hi, int32_t d, int32_t budget)
{
    if (hi - lo < 2)
        return 0;
    if (s->sp == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        lms_frame *ns = realloc(s->stack, cap * sizeof *ns);
        if (!ns)
            return -1;
        s->stack = ns;
        s->cap = cap;
    }
    s->stack[s->sp++] = (lms_frame){ lo, hi, d, budget };
    return 0;
}

/* Partitioning rounds a range may take before it is heapsorted instead:
 * 2 log2(size), so adversarial pivots cannot make the sort quadratic. */
static int32_t depth_budget(int32_t size) { return 2 * (32 - __builtin_clz((uint32_t)size)); }

/* Slot (of a, b, c) holding the median key at depth d. */
static int32_t med3(const lms_sorter *s, int32_t a, int32_t b, int32_t c, int32_t d)
{
    const int32_t *sa = s->sa;
    uint64_t ka = key_at(s, sa[a], d), kb = key_at(s, sa[b], d), kc = key_at(s, sa[c], d);
    if (ka < kb)
        return kb < kc ? b : ka < kc ? c : a;
    return ka < kc ? a : kb < kc ? c : b;
}

static int32_t pivot_slot(const lms_sorter *s, int32_t lo, int32_t hi, int32_t d)
{
    int32_t n = hi - lo, mid = lo + n / 2;
    if (n < 64)
        return med3(s, lo, mid, hi - 1, d);
    int32_t e = n / 8; /* Tukey's ninther: robust on runs and sawtooth data */
    return med3(s, med3(s, lo, lo + e, lo + 2 * e, d), med3(s, mid - e, mid, mid + e, d),
                med3(s, hi - 1 - 2 * e, hi - 1 - e, hi - 1, d), d);
}

static void sift_down(lms_sorter *s, int32_t *a, int32_t root, int32_t n, int32_t d)
{
    int32_t v = a[root];
    uint64_t kv = key_at(s, v, d);
    for (int32_t c; (c = 2 * root + 1) < n; root = c) {
        uint64_t kc = key_at(s, a[c], d);
        if (c + 1 < n) {
            uint64_t k1 = key_at(s, a[c + 1], d);
            if (k1 > kc) {
                c++;
                kc = k1;
            }
        }
        if (kc <= kv)
            break;
        a[root] = a[c];
    }
    a[root] = v;
}

/* Fallback when the quicksort degenerates: heapsort by the key at depth
 * d, then queue every run of equal keys for the next 8 bytes. */
static int heap_fallback(lms_sorter *s, int32_t lo, int32_t hi, int32_t d)
{
    int32_t *a = s->sa + lo, n = hi - lo;
    for (int32_t i = n / 2; i-- > 0;)
        sift_down(s, a, i, n, d);
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t v = a[0];
        a[0] = a[i];
        a[i] = v;
        sift_down(s, a, 0, i, d);
    }
    for (int32_t x = 0; x < n;) {
        uint64_t k = key_at(s, a[x], d);
        int32_t y = x + 1;
        while (y < n && key_at(s, a[y], d) == k)
            y++;
        if (y - x > 1) {
            if (rest(s, a[x], d) < 8)
                mark_tied(s, lo + x, lo + y);
            else if (push(s, lo + x, lo + y, d + 8, depth_budget(y - x)))
                return -1;
        }
        x = y;
    }
    return 0;
}

/* Three-way partition of sa[lo..hi) around key pv at depth d: on return
 * [lo, *lt) < pv, [*lt, *gt) == pv, [*gt, hi) > pv. */
static void partition(lms_sorter *s, int32_t lo, int32_t hi, int32_t d, uint64_t pv, int32_t *lt,
                      int32_t *gt)
{
    int32_t *sa = s->sa;
    int32_t l = lo, i = lo, g = hi;
    while (i < g) {
        int32_t v = sa[i];
        uint64_t k = key_at(s, v, d);
        if (k < pv) {
            sa[i++] = sa[l];
            sa[l++] = v;
        } else if (k > pv) {
            sa[i] = sa[--g];
            sa[g] = v;
        } else {
            i++;
        }
    }
    *lt = l;
    *gt = g;
}

/* Sort one frame: partition, queue the smaller/greater parts, and go on
 * with the equal part 8 bytes deeper until its substrings have ended. */
static int sort_frame(lms_sorter *s, lms_frame f)
{
    int32_t lo = f.lo, hi = f.hi, d = f.depth, budget = f.budget;
    while (hi - lo > 1) {
        if (hi - lo <= INSERTION_MAX) {
            insertion_sort(s, lo, hi, d);
            return 0;
        }
        if (budget-- <= 0)
            return heap_fallback(s, lo, hi, d);
        int32_t p = s->sa[pivot_slot(s, lo, hi, d)];
        uint64_t pv = key_at(s, p, d);
        int ended = rest(s, p, d) < 8;
        int32_t lt, gt;
        partition(s, lo, hi, d, pv, &lt, &gt);
        if (push(s, lo, lt, d, budget) || push(s, gt, hi, d, budget))
            return -1;
        if (ended) {
            if (gt - lt > 1)
                mark_tied(s, lt, gt);
            return 0;
        }
        lo = lt;
        hi = gt;
        d += 8;
        budget = depth_budget(hi - lo);
    }
    return 0;
}

static int sort_bucket(lms_sorter *s, int32_t lo, int32_t hi)
{
    if (push(s, lo, hi, 2, depth_budget(hi - lo)))
        return -1;
    while (s->sp)
        if (sort_frame(s, s->stack[--s->sp]))
            return -1;
    return 0;
}

int bwt_lms_sort(const uint8_t *t, int32_t n, const int32_t *lenb, int32_t *sa, uint64_t *head)
{
    int32_t *bkt = malloc(65536 * sizeof *bkt);
    if (!bkt)
        return -1;
    bucket2(t, n, lenb, sa, bkt);
    lms_sorter s = { .t = t, .lenb = lenb, .sa = sa, .head = head };
    int rc = 0;
    for (int32_t b = 0, lo = 0; b < 65536 && rc == 0; lo = bkt[b++])
        if (bkt[b] - lo > 1)
            rc = sort_bucket(&s, lo, bkt[b]);
    free(s.stack);
    free(bkt);
    return rc ? -1 : s.tied;
}
