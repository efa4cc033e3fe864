/*
 * bz2_bwt_records.c - sorting (key, position) records by their 64-bit key,
 * for the substring sort (bz2_bwt_substr.c). Large inputs go through an
 * MSD radix sort by key byte (faster than quicksort alone: no
 * mispredicted comparisons), the parts through an introsort with
 * three-way partitions (keys repeat a lot: identical substrings) that
 * falls back to heapsort, so O(n log n) in the worst case.
 */
#include <string.h>

#include "bz2_bwt_sort.h"

/* Ranges from this size on are radix sorted: below it, clearing and
 * scanning 256 counters costs more than the comparisons it saves. */
#define RADIX_MIN 256

static inline void rec_swap(bwt_rec *a, int32_t i, int32_t j)
{
    bwt_rec t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static void rec_insertion(bwt_rec *a, int32_t n)
{
    for (int32_t i = 1; i < n; i++) {
        bwt_rec v = a[i];
        int32_t j = i;
        for (; j > 0 && a[j - 1].key > v.key; j--)
            a[j] = a[j - 1];
        a[j] = v;
    }
}

static void rec_heapsort(bwt_rec *a, int32_t n)
{
    for (int32_t end = n, i = n / 2;;) {
        if (i > 0)
            i--;
        else if (--end > 0)
            rec_swap(a, 0, end);
        else
            return;
        for (int32_t r = i, c; (c = 2 * r + 1) < end; r = c) {
            if (c + 1 < end && a[c + 1].key > a[c].key)
                c++;
            if (a[c].key <= a[r].key)
                break;
            rec_swap(a, r, c);
        }
    }
}

static inline uint64_t med3(uint64_t a, uint64_t b, uint64_t c)
{
    if (a > b) {
        uint64_t t = a;
        a = b;
        b = t;
    }
    return b < c ? b : a > c ? a : c;
}

/* Introsort with three-way partitions (keys repeat a lot). */
static void rec_sort(bwt_rec *a, int32_t n, int32_t budget)
{
    while (n > 16) {
        if (budget-- <= 0) {
            rec_heapsort(a, n);
            return;
        }
        uint64_t pv = med3(a[0].key, a[n / 2].key, a[n - 1].key);
        int32_t lt = 0, i = 0, gt = n;
        while (i < gt) {
            if (a[i].key < pv)
                rec_swap(a, i++, lt++);
            else if (a[i].key > pv)
                rec_swap(a, i, --gt);
            else
                i++;
        }
        if (lt < n - gt) { /* recurse into the smaller side */
            rec_sort(a, lt, budget);
            a += gt;
            n -= gt;
        } else {
            rec_sort(a + gt, n - gt, budget);
            n = lt;
        }
    }
    rec_insertion(a, n);
}

/* MSD radix sort by the key's bytes from `shift` down, through tmp;
 * parts too small to pay for a 256-way count go to rec_sort. */
static void rec_radix(bwt_rec *a, bwt_rec *tmp, int32_t n, int shift)
{
    int32_t cnt[256] = { 0 }, start[256];
    for (int32_t i = 0; i < n; i++)
        cnt[a[i].key >> shift & 255]++;
    for (int32_t b = 0, sum = 0; b < 256; b++) {
        start[b] = sum;
        sum += cnt[b];
    }
    if (cnt[a[0].key >> shift & 255] < n) { /* else: one part, nothing moves */
        for (int32_t i = 0; i < n; i++)
            tmp[start[a[i].key >> shift & 255]++] = a[i];
        memcpy(a, tmp, (size_t)n * sizeof *a);
    }
    for (int32_t b = 0, lo = 0; b < 256; lo += cnt[b++]) {
        if (cnt[b] < 2 || shift == 0) /* shift 0: whole keys equal */
            continue;
        if (cnt[b] >= RADIX_MIN)
            rec_radix(a + lo, tmp, cnt[b], shift - 8);
        else
            rec_sort(a + lo, cnt[b], bwt_depth_budget(cnt[b]));
    }
}

void bwt_rec_sort(bwt_rec *a, bwt_rec *tmp, int32_t n)
{
    if (n >= RADIX_MIN)
        rec_radix(a, tmp, n, 56);
    else
        rec_sort(a, n, bwt_depth_budget(n));
}
