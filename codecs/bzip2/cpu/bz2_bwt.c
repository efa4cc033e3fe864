/*
 * bz2_bwt.c - Burrows-Wheeler transform of one block by sorting its CYCLIC
 * rotations (bzip2 needs rotations, not suffixes with a sentinel).
 *
 * Ordering rule (docs/BZIP2.md): rotations compare as cyclic strings;
 * rotations that are equal - only possible when the block is a repetition
 * u^k of a shorter string - give the same last-column bytes, and origPtr
 * names the last of rotation 0's equals, where bzip2's fallback sort puts it.
 * Such a block is transformed through its primitive root u (every rotation
 * of a primitive string is distinct, so any correct sort gives one answer):
 *   BWT(u^k) = BWT(u) with each byte repeated k times,
 *   origPtr = k * origPtr(u) + k - 1.
 *
 * A primitive block is sorted by induced sorting (bz2_bwt_sort.h: LMS
 * substrings by multikey quicksort, their ties through the reduced string
 * by prefix doubling or SA-IS, everything else induced in two scans),
 * after rotating it to start at an LMS position, which only renumbers
 * rotations. Periodicity is not tested up front (a KMP pass would tax
 * every block for the rare periodic one): a periodic block shows up as equal rotations in the tie
 * stage, and only then is reduced to its root.
 * None of these choices changes the output bytes.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bz2_bwt_sort.h"
#include "bz2_internal.h"
#include "scratch.h"

/* Blocks whose LMS substrings tied, i.e. that needed the reduced-string
 * stage (text and source nearly always; compressed data rarely). */
static atomic_ulong fallback_count;
int bwt_test_budget_cap;

unsigned long bz2_bwt_fallback_count(void)
{
    return atomic_load_explicit(&fallback_count, memory_order_relaxed);
}

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

/* Start of a maximal run of the smallest byte: an LMS position (the byte
 * before is larger, the run is followed by a larger one). -1 when all
 * bytes are equal. */
static int32_t lms_start(const uint8_t *blk, int32_t n)
{
    uint8_t lo = 255;
    for (int32_t i = 0; i < n; i++)
        lo = blk[i] < lo ? blk[i] : lo;
    for (int32_t i = 0; i < n; i++)
        if (blk[i] == lo && blk[i ? i - 1 : n - 1] != lo)
            return i;
    return -1;
}

/* t = blk rotated left by r, followed by BWT_PAD bytes of its start (this thread's scratch). */
static uint8_t *rotated_copy(const uint8_t *blk, int32_t n, int32_t r)
{
    uint8_t *t = gc_scratch(GC_SCRATCH_BZ2_TEXT, (size_t)n + BWT_PAD);
    if (!t)
        return NULL;
    memcpy(t, blk + r, (size_t)(n - r));
    memcpy(t + n - r, blk, (size_t)r);
    for (int32_t k = 0; k < BWT_PAD; k++)
        t[n + k] = t[k % n];
    return t;
}

/* Sort the LMS rotations of t (t[0] LMS) into sa[0..m); bwt_reduce's
 * codes. */
static int sort_lms(const uint8_t *t, const bwt_lms *l, int32_t *sa)
{
    size_t words = bwt_tie_words(l->m);
    uint64_t *head = malloc(words * sizeof *head);
    if (!head)
        return -1;
    memset(head, 0xff, words * sizeof *head);
    int rc = bwt_lms_sort(t, l, sa, head);
    if (rc > 0) {
        atomic_fetch_add_explicit(&fallback_count, 1, memory_order_relaxed);
        rc = bwt_reduce(l, sa, head, rc);
    }
    free(head);
    return rc;
}

/* BWT of blk when it is primitive: origPtr, -1 when out of memory,
 * BWT_NOT_PRIMITIVE when it is not. */
static int32_t bwt_primitive(const uint8_t *blk, int32_t n, uint8_t *out)
{
    int32_t r = lms_start(blk, n);
    if (r < 0)
        return BWT_NOT_PRIMITIVE;
    uint8_t *t = rotated_copy(blk, n, r);
    int32_t *sa = gc_scratch(GC_SCRATCH_BZ2_SA, (size_t)n * sizeof *sa);
    bwt_lms l = { 0 };
    int32_t rc = -1;
    if (t && sa && bwt_lms_find(t, n, &l) == 0)
        rc = sort_lms(t, &l, sa);
    if (rc == 0) /* original rotation 0 is rotation n - r of t */
        rc = bwt_induce(t, n, sa, l.m, r ? n - r : 0, out);
    bwt_lms_free(&l);
    return rc;
}

/* BWT of u^(n/p) from that of its root u = blk[0..p). */
static int32_t bwt_periodic(const uint8_t *blk, int32_t n, int32_t p, uint8_t *out)
{
    uint8_t *root = malloc((size_t)p);
    if (!root)
        return -1;
    int32_t r = bz2_bwt(blk, p, root);
    if (r >= 0) {
        int32_t k = n / p;
        for (int32_t i = 0; i < p; i++)
            memset(out + (size_t)i * k, root[i], (size_t)k);
        r = r * k + k - 1; /* the last of rotation 0's k equals */
    }
    free(root);
    return r;
}

int32_t bz2_bwt(const uint8_t *blk, int32_t n, uint8_t *out)
{
    if (n <= 0)
        return 0;
    if (n == 1) {
        out[0] = blk[0];
        return 0;
    }
    int32_t r = bwt_primitive(blk, n, out);
    if (r != BWT_NOT_PRIMITIVE)
        return r;
    int32_t *fail = malloc((size_t)n * sizeof *fail);
    if (!fail)
        return -1;
    int32_t p = primitive_period(blk, n, fail);
    free(fail);
    return p < n ? bwt_periodic(blk, n, p, out) : -1;
}
