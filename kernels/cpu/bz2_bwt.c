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
 *      sort for small ranges, but only down to depth DEEP bytes: ranges
 *      still equal there are recorded as "deep groups" (long repeats; on
 *      such data comparison sorting is quadratic);
 *   3. deep groups are finished by prefix doubling on cyclic ranks
 *      (Larsson-Sadakane): rank = start of the rotation's group, sort a
 *      group by the rank h bytes further, split, double h (from DEEP).
 *      Only unfinished groups are revisited; O(n log n) per pass.
 * Any correct sort gives the same order here, so none of these engineering
 * choices changes the output bytes.
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
    struct frame *stack;
    size_t stack_cap;
    struct frame *deep; /* groups equal in their first DEEP bytes */
    size_t n_deep, deep_cap;
} sort_ctx;

/* Comparison sorting stops at this depth (2 radix bytes + 8 keys of 8). */
/* Ranges this small are insertion sorted. */
#ifndef INSERTION_MAX
#define INSERTION_MAX 16
#endif
#ifndef DEEP
#define DEEP (2 + 8 * 32)
#endif

typedef struct frame {
    int32_t lo, hi, depth;
} frame;

static inline uint64_t key8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* Compare rotations a and b, known equal in their first d bytes, up to
 * depth DEEP: <0, 0 (equal to DEEP), >0. */
static inline int rot_cmp(const sort_ctx *c, int32_t a, int32_t b, int32_t d)
{
    const uint8_t *ext = c->ext;
    for (; d < DEEP; d += 8) {
        uint64_t ka = key8(ext + a + d), kb = key8(ext + b + d);
        if (ka != kb)
            return ka < kb ? -1 : 1;
    }
    return 0;
}

static int push_deep(sort_ctx *c, int32_t lo, int32_t hi)
{
    if (c->n_deep == c->deep_cap) {
        size_t cap = c->deep_cap ? c->deep_cap * 2 : 64;
        frame *nd = realloc(c->deep, cap * sizeof *nd);
        if (!nd)
            return -1;
        c->deep = nd;
        c->deep_cap = cap;
    }
    c->deep[c->n_deep++] = (frame){ lo, hi, DEEP };
    return 0;
}

/* Small ranges: insertion sort to depth DEEP, then record runs that are
 * still equal as deep groups. */
static int insertion_sort(sort_ctx *c, int32_t lo, int32_t hi, int32_t d)
{
    int32_t *sa = c->sa;
    int ties = 0;
    for (int32_t i = lo + 1; i < hi; i++) {
        int32_t v = sa[i];
        int32_t j = i;
        int r = 1;
        while (j > lo && (r = rot_cmp(c, v, sa[j - 1], d)) < 0) {
            sa[j] = sa[j - 1];
            j--;
        }
        ties |= r == 0;
        sa[j] = v;
    }
    if (!ties)
        return 0;
    for (int32_t a = lo; a < hi;) {
        int32_t b = a + 1;
        while (b < hi && rot_cmp(c, sa[a], sa[b], d) == 0)
            b++;
        if (b - a > 1 && push_deep(c, a, b))
            return -1;
        a = b;
    }
    return 0;
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

/* Multikey quicksort of sa[lo..hi), all equal in their first d bytes, down
 * to depth DEEP. Returns -1 when out of memory, else 0. */
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
            if (d >= DEEP) {
                if (push_deep(c, lo, hi))
                    return -1;
                break;
            }
            if (hi - lo <= INSERTION_MAX) {
                if (insertion_sort(c, lo, hi, d))
                    return -1;
                break;
            }
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

/* Finish the deep groups by prefix doubling. Ranks: a rotation's rank is
 * the start index of its group in sa (its own index once alone), so
 * comparing ranks h bytes further compares the next h bytes. Keys of a
 * pass are stored in tmp before any rank changes, so a pass only ever
 * sees ranks of the previous one. */
static int doubling_sort(sort_ctx *c)
{
    int32_t n = c->n;
    int32_t *sa = c->sa;
    int32_t *rank = malloc((size_t)n * sizeof *rank);
    uint64_t *tmp = malloc((size_t)n * sizeof *tmp);
    /* Open groups have >= 2 members, so there are never more than this. */
    size_t total = 0;
    for (size_t g = 0; g < c->n_deep; g++)
        total += (size_t)(c->deep[g].hi - c->deep[g].lo);
    size_t cap = total / 2 + 1;
    frame *next = malloc(cap * sizeof *next);
    frame *grown = realloc(c->deep, cap * sizeof *grown);
    if (grown) {
        c->deep = grown;
        c->deep_cap = cap;
    }
    if (!rank || !tmp || !next || !grown)
        goto oom;
    for (int32_t j = 0; j < n; j++)
        rank[sa[j]] = j;
    for (size_t g = 0; g < c->n_deep; g++)
        for (int32_t j = c->deep[g].lo; j < c->deep[g].hi; j++)
            rank[sa[j]] = c->deep[g].lo;
    for (int64_t h = DEEP; c->n_deep > 0; h *= 2) {
        int32_t hm = (int32_t)(h % n);
        /* Phase 1: sort every open group by (rank at +h, index). */
        for (size_t g = 0; g < c->n_deep; g++) {
            int32_t a = c->deep[g].lo, b = c->deep[g].hi;
            for (int32_t j = a; j < b; j++) {
                int32_t p = sa[j] + hm;
                int32_t r = rank[p >= n ? p - n : p];
                tmp[j] = (uint64_t)(uint32_t)r << 32 | (uint32_t)sa[j];
            }
            sort_u64(tmp + a, (size_t)(b - a));
            for (int32_t j = a; j < b; j++)
                sa[j] = (int32_t)(uint32_t)tmp[j];
        }
        /* Phase 2: split where the key changes, renumber, keep open ones. */
        size_t n_next = 0;
        for (size_t g = 0; g < c->n_deep; g++) {
            int32_t a = c->deep[g].lo, b = c->deep[g].hi;
            for (int32_t s = a, j = a + 1; j <= b; j++) {
                if (j < b && (tmp[j] >> 32) == (tmp[s] >> 32))
                    continue;
                for (int32_t t = s; t < j; t++)
                    rank[sa[t]] = s;
                if (j - s > 1)
                    next[n_next++] = (frame){ s, j, 0 };
                s = j;
            }
        }
        frame *t = c->deep;
        c->deep = next;
        next = t;
        c->n_deep = n_next;
        if (h >= n && n_next) /* equal rotations: impossible when primitive */
            goto oom;
    }
    free(rank);
    free(tmp);
    free(next);
    return 0;
oom:
    free(rank);
    free(tmp);
    free(next);
    return -1;
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
    size_t elen = 2 * (size_t)n + DEEP + 16; /* keys read up to n-1+DEEP+7 */
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
    int rc = bucket_sort2(&c);
    for (int b = 0; b < 65536 && rc == 0; b++)
        if (bucket[b + 1] - bucket[b] > 1)
            rc = mkqs(&c, bucket[b], bucket[b + 1], 2);
    if (rc == 0 && c.n_deep) {
        atomic_fetch_add_explicit(&fallback_count, 1, memory_order_relaxed);
        rc = doubling_sort(&c);
    }
    free(c.stack);
    free(c.deep);
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
