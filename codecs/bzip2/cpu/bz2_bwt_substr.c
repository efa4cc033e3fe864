/*
 * bz2_bwt_substr.c - stage 1b of the rotation sort (bz2_bwt_sort.h): sort
 * the LMS positions by their LMS substrings.
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
 *
 * Method: counting sort by the first two bytes, then per bucket a
 * multikey quicksort on 8-byte big-endian keys. Reading a key costs a
 * cache miss (and a bit scan for the substring's end), so a range that
 * fits the record buffer reads each key once into (key, position)
 * records and sorts those (bz2_bwt_records.c); only larger ranges are
 * partitioned reading keys in place.
 * Every comparison stops at the end of a substring and the substrings
 * tile the block, so the work is O(n) plus the quicksorts' O(m log m);
 * introsort-style depth limits (heapsort) keep that a worst case.
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_bwt_sort.h"

/* Record buffer: ranges up to this size are sorted on cached keys. */
#define REC_MAX 16384

typedef struct frame {
    int32_t lo, hi, depth, budget;
} frame;

typedef struct sorter {
    const uint8_t *t;
    const bwt_lms *lms;
    int32_t *sa;
    uint64_t *head;
    frame *stack;
    size_t sp, cap;
    bwt_rec *rec; /* REC_MAX records + REC_MAX scratch */
    int32_t tied; /* slots in tied groups */
} sorter;

/* ---- keys ---- */

/* The 8 bytes of p's substring at depth d as a big-endian number, 0xff
 * past its end; *ended = whether the substring ends within them. */
static inline uint64_t key_at(const sorter *s, int32_t p, int32_t d, int *ended)
{
    int32_t r = bwt_lms_next(s->lms, p) - p + 1 - d; /* bytes left */
    *ended = r < 8;
    if (r <= 0)
        return ~0ull;
    uint64_t v;
    memcpy(&v, s->t + p + d, 8);
    v = __builtin_bswap64(v);
    return r >= 8 ? v : v | (~0ull >> (8 * r));
}

static inline uint64_t key_of(const sorter *s, int32_t p, int32_t d)
{
    int ended;
    return key_at(s, p, d, &ended);
}

/* ---- bookkeeping ---- */

/* Slots [a, b) hold identical substrings: clear their tie bits. */
static void mark_tied(sorter *s, int32_t a, int32_t b)
{
    for (int32_t x = a + 1; x < b; x++)
        s->head[x >> 6] &= ~(1ull << (x & 63));
    s->tied += b - a;
}

/* Queue sa[lo..hi) at depth d with `budget` partitioning rounds left:
 * parts split off by a partition inherit the budget, a fresh one comes
 * only with a deeper key. */
static int push(sorter *s, int32_t lo, int32_t hi, int32_t d, int32_t budget)
{
    if (hi - lo < 2)
        return 0;
    if (s->sp == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        frame *ns = realloc(s->stack, cap * sizeof *ns);
        if (!ns)
            return -1;
        s->stack = ns;
        s->cap = cap;
    }
    s->stack[s->sp++] = (frame){ lo, hi, d, budget };
    return 0;
}

/* Sort sa[lo..hi) (equal in their first d bytes) by the key at depth d
 * on cached records; runs of equal keys are tied or queued 8 deeper. */
static int sort_cached(sorter *s, int32_t lo, int32_t hi, int32_t d)
{
    int32_t n = hi - lo, *sa = s->sa + lo;
    bwt_rec *r = s->rec;
    for (int32_t i = 0; i < n; i++) {
        int ended;
        r[i].key = key_at(s, sa[i], d, &ended);
        r[i].pos = sa[i];
        r[i].ended = ended;
    }
    bwt_rec_sort(r, s->rec + REC_MAX, n);
    for (int32_t i = 0; i < n; i++)
        sa[i] = r[i].pos;
    for (int32_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && r[b].key == r[a].key;)
            b++;
        if (b - a < 2)
            continue;
        /* equal keys: all ended (identical substrings) or none ended */
        if (r[a].ended)
            mark_tied(s, lo + a, lo + b);
        else if (push(s, lo + a, lo + b, d + 8, bwt_depth_budget(b - a)))
            return -1;
    }
    return 0;
}

/* ---- large ranges: partition reading keys in place ---- */

static int32_t med3_slot(const sorter *s, int32_t a, int32_t b, int32_t c, int32_t d)
{
    const int32_t *sa = s->sa;
    uint64_t ka = key_of(s, sa[a], d), kb = key_of(s, sa[b], d), kc = key_of(s, sa[c], d);
    if (ka < kb)
        return kb < kc ? b : ka < kc ? c : a;
    return ka < kc ? a : kb < kc ? c : b;
}

/* Tukey's ninther: robust on runs and sawtooth data. */
static int32_t pivot_slot(const sorter *s, int32_t lo, int32_t hi, int32_t d)
{
    int32_t e = (hi - lo) / 8, mid = lo + (hi - lo) / 2;
    return med3_slot(s, med3_slot(s, lo, lo + e, lo + 2 * e, d), med3_slot(s, mid - e, mid, mid + e, d),
                     med3_slot(s, hi - 1 - 2 * e, hi - 1 - e, hi - 1, d), d);
}

/* Three-way partition of sa[lo..hi) around key pv at depth d: on return
 * [lo, *lt) < pv, [*lt, *gt) == pv, [*gt, hi) > pv. */
static void partition(sorter *s, int32_t lo, int32_t hi, int32_t d, uint64_t pv, int32_t *lt, int32_t *gt)
{
    int32_t *sa = s->sa;
    int32_t l = lo, i = lo, g = hi;
    while (i < g) {
        int32_t v = sa[i];
        uint64_t k = key_of(s, v, d);
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

/* In-place heapsort by the key at depth d: for a range too large for the
 * record buffer whose partitioning has used up its budget. */
static void sift_down(const sorter *s, int32_t *a, int32_t root, int32_t n, int32_t d)
{
    int32_t v = a[root];
    uint64_t kv = key_of(s, v, d);
    for (int32_t c; (c = 2 * root + 1) < n; root = c) {
        uint64_t kc = key_of(s, a[c], d);
        if (c + 1 < n) {
            uint64_t k1 = key_of(s, a[c + 1], d);
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

static int heap_fallback(sorter *s, int32_t lo, int32_t hi, int32_t d)
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
    for (int32_t x = 0, y; x < n; x = y) {
        int ended;
        uint64_t k = key_at(s, a[x], d, &ended);
        for (y = x + 1; y < n && key_of(s, a[y], d) == k;)
            y++;
        if (y - x < 2)
            continue;
        if (ended)
            mark_tied(s, lo + x, lo + y);
        else if (push(s, lo + x, lo + y, d + 8, bwt_depth_budget(y - x)))
            return -1;
    }
    return 0;
}

/* Sort one frame: partition while too large for the record buffer,
 * queueing the smaller/greater parts and following the equal part. */
static int sort_frame(sorter *s, frame f)
{
    int32_t lo = f.lo, hi = f.hi, d = f.depth, budget = f.budget;
    while (hi - lo > REC_MAX) {
        if (budget-- <= 0)
            return heap_fallback(s, lo, hi, d);
        int32_t p = s->sa[pivot_slot(s, lo, hi, d)];
        int ended;
        uint64_t pv = key_at(s, p, d, &ended);
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
        budget = bwt_depth_budget(hi - lo);
    }
    return hi - lo > 1 ? sort_cached(s, lo, hi, d) : 0;
}

/* ---- driver ---- */

/* Counting sort of the LMS positions by t[p], t[p+1] into sa[0..m).
 * Afterwards bkt[b] is the end of bucket b (its start is bkt[b - 1]). */
static void bucket2(const uint8_t *t, const bwt_lms *l, int32_t *sa, int32_t *bkt)
{
    memset(bkt, 0, 65536 * sizeof *bkt);
    for (int32_t k = 0, w = 0; k < l->m; w++)
        for (uint64_t v = l->bits[w]; v && k < l->m; v &= v - 1, k++) {
            int32_t p = (w << 6) + __builtin_ctzll(v);
            bkt[t[p] << 8 | t[p + 1]]++;
        }
    for (int32_t b = 0, sum = 0; b < 65536; b++) {
        int32_t c = bkt[b];
        bkt[b] = sum;
        sum += c;
    }
    for (int32_t k = 0, w = 0; k < l->m; w++)
        for (uint64_t v = l->bits[w]; v && k < l->m; v &= v - 1, k++) {
            int32_t p = (w << 6) + __builtin_ctzll(v);
            sa[bkt[t[p] << 8 | t[p + 1]]++] = p;
        }
}

static int sort_buckets(sorter *s, const int32_t *bkt)
{
    for (int32_t b = 0, lo = 0; b < 65536; lo = bkt[b++]) {
        if (bkt[b] - lo < 2)
            continue;
        if (push(s, lo, bkt[b], 2, bwt_depth_budget(bkt[b] - lo)))
            return -1;
        while (s->sp)
            if (sort_frame(s, s->stack[--s->sp]))
                return -1;
    }
    return 0;
}

int bwt_lms_sort(const uint8_t *t, const bwt_lms *l, int32_t *sa, uint64_t *head)
{
    int32_t *bkt = malloc(65536 * sizeof *bkt);
    sorter s = { .t = t, .lms = l, .sa = sa, .head = head };
    s.rec = malloc(2 * REC_MAX * sizeof *s.rec); /* records, radix buffer */
    int rc = -1;
    if (bkt && s.rec) {
        bucket2(t, l, sa, bkt);
        rc = sort_buckets(&s, bkt);
    }
    free(s.stack);
    free(s.rec);
    free(bkt);
    return rc ? -1 : s.tied;
}
