/*
 * bz2_bwt_double.c - prefix doubling (Larsson-Sadakane) on the reduced
 * string of the rotation sort (bz2_bwt_reduce.c), for blocks where few LMS
 * substrings tie: then a few doubling rounds over the tied slots cost far
 * less than an SA-IS pass over the whole reduced string.
 *
 * sa[0..m) holds reduced indices grouped by the tie marks; rank[k] is the
 * first slot of k's group. A group whose members agree in their first h
 * reduced symbols is sorted by the rank h symbols further on, then split
 * where that rank changes. All keys of a round are read before any rank
 * changes, so a round sees ranks of the previous one only.
 */
#include "bz2_bwt_sort.h"

/* ---- finding tied groups ---- */

/* First slot >= x whose mark bit equals `bit`, or limit. */
static int32_t find_bit(const uint64_t *head, int32_t x, int bit, int32_t limit)
{
    if (x >= limit)
        return limit;
    size_t w = (size_t)x >> 6;
    uint64_t v = (bit ? head[w] : ~head[w]) & (~0ull << (x & 63));
    while (!v) {
        if ((int32_t)(++w << 6) >= limit)
            return limit;
        v = bit ? head[w] : ~head[w];
    }
    int32_t r = (int32_t)(w << 6) + __builtin_ctzll(v);
    return r < limit ? r : limit;
}

/* Next tied group at or after slot `from` (a group head): its first slot,
 * and *end one past its last; m when there is none. A clear bit at z
 * means slot z continues the group of z - 1. */
static int32_t next_group(const uint64_t *head, int32_t from, int32_t m, int32_t *end)
{
    int32_t z = find_bit(head, from + 1, 0, m);
    if (z >= m)
        return m;
    *end = find_bit(head, z + 1, 1, m);
    return z - 1;
}

/* ---- sorting (key, value) pairs ---- */

static void swap_pair(int32_t *key, int32_t *val, int32_t a, int32_t b)
{
    int32_t k = key[a], v = val[a];
    key[a] = key[b];
    val[a] = val[b];
    key[b] = k;
    val[b] = v;
}

static void insertion_pairs(int32_t *key, int32_t *val, int32_t n)
{
    for (int32_t i = 1; i < n; i++) {
        int32_t k = key[i], v = val[i], j = i;
        for (; j > 0 && key[j - 1] > k; j--) {
            key[j] = key[j - 1];
            val[j] = val[j - 1];
        }
        key[j] = k;
        val[j] = v;
    }
}

static void heap_pairs(int32_t *key, int32_t *val, int32_t n)
{
    for (int32_t end = n, i = n / 2;;) {
        if (i > 0)
            i--;
        else if (--end > 0)
            swap_pair(key, val, 0, end);
        else
            return;
        for (int32_t r = i, c; (c = 2 * r + 1) < end; r = c) {
            if (c + 1 < end && key[c + 1] > key[c])
                c++;
            if (key[c] <= key[r])
                break;
            swap_pair(key, val, r, c);
        }
    }
}

static int32_t median3(const int32_t *k, int32_t a, int32_t b, int32_t c)
{
    if (k[a] < k[b])
        return k[b] < k[c] ? k[b] : k[a] < k[c] ? k[c] : k[a];
    return k[a] < k[c] ? k[a] : k[b] < k[c] ? k[c] : k[b];
}

/* Introsort with three-way partitions (ranks repeat a lot); heapsort
 * once `budget` rounds have not shrunk the range enough. */
static void sort_pairs(int32_t *key, int32_t *val, int32_t n, int budget)
{
    while (n > 16) {
        if (budget-- <= 0) {
            heap_pairs(key, val, n);
            return;
        }
        int32_t pv = median3(key, 0, n / 2, n - 1);
        int32_t lt = 0, i = 0, gt = n;
        while (i < gt) {
            if (key[i] < pv)
                swap_pair(key, val, i++, lt++);
            else if (key[i] > pv)
                swap_pair(key, val, i, --gt);
            else
                i++;
        }
        if (lt < n - gt) { /* recurse into the smaller side */
            sort_pairs(key, val, lt, budget);
            key += gt;
            val += gt;
            n -= gt;
        } else {
            sort_pairs(key + gt, val + gt, n - gt, budget);
            n = lt;
        }
    }
    insertion_pairs(key, val, n);
}

/* ---- one doubling round ---- */

static void sort_groups(int32_t *sa, int32_t m, const uint64_t *head, const int32_t *rank, int32_t *key, int32_t h)
{
    int32_t b = 0;
    for (int32_t a = next_group(head, 0, m, &b); a < m; a = next_group(head, b, m, &b)) {
        for (int32_t x = a; x < b; x++) {
            int32_t k = sa[x] + h;
            key[x] = rank[k >= m ? k - m : k];
        }
        sort_pairs(key + a, sa + a, b - a, bwt_depth_budget(b - a));
    }
}

/* Split each tied group where its sorted keys change; new groups get
 * their first slot as rank. Returns the slots still tied. */
static int32_t split_groups(const int32_t *sa, int32_t m, uint64_t *head, int32_t *rank, const int32_t *key)
{
    int32_t tied = 0, b = 0;
    for (int32_t a = next_group(head, 0, m, &b); a < m; a = next_group(head, b, m, &b)) {
        for (int32_t s = a, x = a + 1; x <= b; x++) {
            if (x < b && key[x] == key[s])
                continue;
            if (s > a) { /* the first part keeps rank a */
                head[s >> 6] |= 1ull << (s & 63);
                for (int32_t y = s; y < x; y++)
                    rank[sa[y]] = s;
            }
            tied += x - s > 1 ? x - s : 0;
            s = x;
        }
    }
    return tied;
}

int32_t bwt_double(int32_t *sa, int32_t m, uint64_t *head, int32_t *rank, int32_t *key, int32_t tied)
{
    for (int32_t x = 0, g = 0; x < m; x++) {
        if (head[x >> 6] >> (x & 63) & 1)
            g = x;
        rank[sa[x]] = g;
    }
    /* Rounds pay off while each at least halves the tied slots. */
    for (int32_t h = 1; tied > 0 && h < m; h *= 2) {
        sort_groups(sa, m, head, rank, key, h);
        int32_t left = split_groups(sa, m, head, rank, key);
        if (left > tied / 2)
            return left;
        tied = left;
    }
    return tied;
}
