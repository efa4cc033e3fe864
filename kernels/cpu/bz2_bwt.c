/*
 * bz2_bwt.c - Burrows-Wheeler transform of one block by sorting its CYCLIC
 * rotations (bzip2 needs rotations, not suffixes with a sentinel).
 *
 * Ordering rule (docs/BZIP2.md): rotations compare as cyclic strings;
 * rotations that are equal - only possible when the block is a repetition
 * u^k of a shorter string - are ordered by starting index. We handle that
 * case up front by sorting the primitive root u instead (every rotation of
 * a primitive string is distinct, so any correct sort gives one answer):
 *   BWT(u^k) = BWT(u) with each byte repeated k times, origPtr = k * origPtr(u).
 *
 * Sorting a primitive block:
 *   1. bucket by the first two bytes (counting sort, 65536 buckets);
 *   2. sort each bucket by multikey quicksort on 8-byte big-endian keys read
 *      from a copy of the block doubled (so reads never wrap), insertion
 *      sort for small ranges;
 *   3. step 2 is fast on real data but quadratic on highly repetitive data,
 *      so it runs under a work budget; past it the whole block is sorted by
 *      prefix doubling on cyclic ranks (Manber-Myers / Larsson-Sadakane
 *      style, O(n log n) per pass, only unsorted groups revisited).
 * Both paths produce the same (unique) order, so the budget never changes
 * the output bytes.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bz2_internal.h"

static atomic_ulong fallback_count;

unsigned long bz2_bwt_fallback_count(void) { return atomic_load_explicit(&fallback_count, memory_order_relaxed); }

/* ---- periodicity ---- */

/* Smallest p with blk = u^(n/p), |u| = p (p = n if blk is primitive).
 * Knuth-Morris-Pratt failure function; fail[] has n entries. */
static int32_t primitive_period(const uint8_t *s, int32_t n, int32_t *fail)
{
    int32_t k = 0;
    fail[0] = 0;
    for (int32_t i = 1; i < n; i++) {
        while (k > 0 && s[i] != s[k])
            k = fail[k - 1];
        if (s[i] == s[k])
            k++;
        fail[i] = k;
    }
    int32_t p = n - fail[n - 1];
    return n % p == 0 ? p : n;
}

/* ---- shared state of one sort ---- */

typedef struct sort_ctx {
    const uint8_t *ext; /* block repeated: ext[i] = blk[i % n], 2n + 16 bytes */
    int32_t n;
    int32_t *sa;
    int32_t *bucket; /* 65537 two-byte bucket starts */
    uint64_t work;
    uint64_t budget;
    struct frame *stack;
    size_t stack_cap;
} sort_ctx;

typedef struct frame {
    int32_t lo, hi, depth;
} frame;

static inline uint64_t key8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* Rotation a < rotation b, both known equal in their first d bytes. */
static inline int rot_less(sort_ctx *c, int32_t a, int32_t b, int32_t d)
{
    const uint8_t *ext = c->ext;
    for (; d < c->n; d += 8) {
        uint64_t ka = key8(ext + a + d), kb = key8(ext + b + d);
        c->work++;
        if (ka != kb)
            return ka < kb;
    }
    return a < b; /* unreachable for primitive blocks */
}

static void insertion_sort(sort_ctx *c, int32_t lo, int32_t hi, int32_t d)
{
    int32_t *sa = c->sa;
    for (int32_t i = lo + 1; i < hi; i++) {
        int32_t v = sa[i];
        int32_t j = i;
        while (j > lo && rot_less(c, v, sa[j - 1], d)) {
            sa[j] = sa[j - 1];
            j--;
        }
        sa[j] = v;
    }
}

static inline uint64_t med3(uint64_t a, uint64_t b, uint64_t c)
{
    if (a > b) {
        uint64_t t = a;
        a = b;
        b = t;
    }
    if (b > c)
        b = c;
    return a > b ? a : b;
}

static int push(sort_ctx *c, size_t *sp, int32_t lo, int32_t hi, int32_t d)
{
    if (hi - lo < 2)
        return 0;
    if (*sp == c->stack_cap) {
        size_t cap = c->stack_cap ? c->stack_cap * 2 : 256;
        frame *ns = realloc(c->stack, cap * sizeof *ns);
        if (!ns)
            return -1;
        c->stack = ns;
        c->stack_cap = cap;
    }
    c->stack[(*sp)++] = (frame){ lo, hi, d };
    return 0;
}

/* Multikey quicksort of sa[lo..hi), all equal in their first d bytes.
 * Returns 1 if the work budget ran out (sa is then a permutation of the
 * same range, in no particular order), -1 when out of memory, 0 done. */
static int mkqs(sort_ctx *c, int32_t lo, int32_t hi, int32_t d)
{
    int32_t *sa = c->sa;
    const uint8_t *ext = c->ext;
    size_t sp = 0;
    if (push(c, &sp, lo, hi, d))
        return -1;
    while (sp) {
        frame f = c->stack[--sp];
        lo = f.lo;
        hi = f.hi;
        d = f.depth;
        while (hi - lo > 1) {
            if (d >= c->n) /* equal rotations: impossible when primitive */
                break;
            if (hi - lo <= 16) {
                insertion_sort(c, lo, hi, d);
                break;
            }
            c->work += (uint64_t)(hi - lo);
            if (c->work > c->budget)
                return 1;
            const uint8_t *base = ext + d;
            uint64_t pv = med3(key8(base + sa[lo]), key8(base + sa[lo + (hi - lo) / 2]),
                               key8(base + sa[hi - 1]));
            int32_t lt = lo, i = lo, gt = hi;
            while (i < gt) {
                int32_t v = sa[i];
                uint64_t k = key8(base + v);
                if (k < pv) {
                    sa[i++] = sa[lt];
                    sa[lt++] = v;
                } else if (k > pv) {
                    sa[i] = sa[--gt];
                    sa[gt] = v;
                } else {
                    i++;
                }
            }
            if (push(c, &sp, lo, lt, d) || push(c, &sp, gt, hi, d))
                return -1;
            lo = lt;
            hi = gt;
            d += 8;
        }
    }
    return 0;
}

/* ---- fallback: prefix doubling on cyclic ranks ---- */

static void sort_u64(uint64_t *a, size_t n)
{
    while (n > 16) {
        uint64_t pv = med3(a[0], a[n / 2], a[n - 1]);
        size_t lt = 0, i = 0, gt = n;
        while (i < gt) {
            uint64_t v = a[i];
            if (v < pv) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v > pv) {
                a[i] = a[--gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        /* recurse into the smaller side, loop on the larger */
        if (lt < n - gt) {
            sort_u64(a, lt);
            a += gt;
            n -= gt;
        } else {
            sort_u64(a + gt, n - gt);
            n = lt;
        }
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* sa holds the rotations bucketed by their first two bytes (c->bucket).
 * Refine by doubling h: sort each unsorted group by the rank of the
 * rotation h further on. Ranks are group start indexes. */
static int doubling_sort(sort_ctx *c)
{
    int32_t n = c->n;
    int32_t *sa = c->sa;
    int32_t *rank = malloc((size_t)n * sizeof *rank);
    int32_t *gend = malloc((size_t)n * sizeof *gend);
    uint64_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (!rank || !gend || !tmp) {
        free(rank);
        free(gend);
        free(tmp);
        return -1;
    }
    for (int b = 0; b < 65536; b++) {
        int32_t lo = c->bucket[b], hi = c->bucket[b + 1];
        if (lo < hi)
            gend[lo] = hi;
        for (int32_t j = lo; j < hi; j++)
            rank[sa[j]] = lo;
    }
    for (int64_t h = 2; h < n; h *= 2) {
        int any = 0;
        /* Phase 1: sort every unsorted group by (rank at +h, index). The
         * keys go to tmp so phase 2 can split without reading new ranks. */
        for (int32_t a = 0; a < n; a = gend[a]) {
            int32_t b = gend[a];
            if (b - a < 2)
                continue;
            any = 1;
            for (int32_t j = a; j < b; j++) {
                int32_t r = rank[(int32_t)(((int64_t)sa[j] + h) % n)];
                tmp[j] = (uint64_t)(uint32_t)r << 32 | (uint32_t)sa[j];
            }
            sort_u64(tmp + a, (size_t)(b - a));
            for (int32_t j = a; j < b; j++)
                sa[j] = (int32_t)(uint32_t)tmp[j];
        }
        if (!any)
            break;
        /* Phase 2: split groups where the key changes, renumber. */
        for (int32_t a = 0; a < n;) {
            int32_t b = gend[a];
            if (b - a >= 2) {
                int32_t s = a;
                for (int32_t j = a + 1; j <= b; j++) {
                    if (j == b || (tmp[j] >> 32) != (tmp[s] >> 32)) {
                        gend[s] = j;
                        for (int32_t t = s; t < j; t++)
                            rank[sa[t]] = s;
                        s = j;
                    }
                }
            }
            a = b;
        }
    }
    free(rank);
    free(gend);
    free(tmp);
    return 0;
}

/* ---- driver ---- */

/* Counting sort of all rotations by their first two bytes. */
static int bucket_sort2(sort_ctx *c)
{
    int32_t n = c->n;
    const uint8_t *ext = c->ext;
    int32_t *bk = c->bucket;
    memset(bk, 0, 65537 * sizeof *bk);
    for (int32_t i = 0; i < n; i++)
        bk[((unsigned)ext[i] << 8 | ext[i + 1]) + 1]++;
    for (int b = 0; b < 65536; b++)
        bk[b + 1] += bk[b];
    int32_t *next = malloc(65536 * sizeof *next);
    if (!next)
        return -1;
    memcpy(next, bk, 65536 * sizeof *next);
    for (int32_t i = 0; i < n; i++)
        c->sa[next[(unsigned)ext[i] << 8 | ext[i + 1]]++] = i;
    free(next);
    return 0;
}

static int sort_primitive(const uint8_t *blk, int32_t n, int32_t *sa)
{
    sort_ctx c = { 0 };
    size_t elen = 2 * (size_t)n + 16;
    uint8_t *ext = malloc(elen);
    int32_t *bucket = malloc(65537 * sizeof *bucket);
    if (!ext || !bucket) {
        free(ext);
        free(bucket);
        return -1;
    }
    for (size_t i = 0; i < elen; i += (size_t)n)
        memcpy(ext + i, blk, elen - i < (size_t)n ? elen - i : (size_t)n);
    c.ext = ext;
    c.n = n;
    c.sa = sa;
    c.bucket = bucket;
    c.budget = (uint64_t)n * 48 + 100000;
    int rc = bucket_sort2(&c);
    for (int b = 0; b < 65536 && rc == 0; b++)
        if (bucket[b + 1] - bucket[b] > 1)
            rc = mkqs(&c, bucket[b], bucket[b + 1], 2);
    if (rc == 1) {
        atomic_fetch_add_explicit(&fallback_count, 1, memory_order_relaxed);
        rc = bucket_sort2(&c);
        if (rc == 0)
            rc = doubling_sort(&c);
    }
    free(c.stack);
    free(ext);
    free(bucket);
    return rc;
}

int32_t bz2_bwt(const uint8_t *blk, int32_t n, uint8_t *out)
{
    if (n <= 0)
        return 0;
    if (n == 1) {
        out[0] = blk[0];
        return 0;
    }
    int32_t *sa = malloc((size_t)n * sizeof *sa);
    if (!sa)
        return -1;
    int32_t p = primitive_period(blk, n, sa);
    if (p < n) {
        free(sa);
        uint8_t *root = malloc((size_t)p);
        if (!root)
            return -1;
        int32_t r = bz2_bwt(blk, p, root);
        if (r >= 0) {
            int32_t k = n / p;
            for (int32_t i = 0; i < p; i++)
                memset(out + (size_t)i * k, root[i], (size_t)k);
            r *= k;
        }
        free(root);
        return r;
    }
    if (sort_primitive(blk, n, sa) != 0) {
        free(sa);
        return -1;
    }
    int32_t orig = -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t s = sa[i];
        if (s == 0) {
            orig = i;
            out[i] = blk[n - 1];
        } else {
            out[i] = blk[s - 1];
        }
    }
    free(sa);
    return orig;
}
