/*
 * bz2_rle1.c - bzip2's first stage: runs of 4..255 equal bytes become the
 * 4 bytes followed by a count byte (run length - 4, 0..251), and the
 * splitting of the input into blocks by the size of that RLE1 output, as
 * bzip2 1.0.8 splits it (docs/BZIP2.md, section 3):
 *   - the input is cut into units from its start: maximal runs of equal
 *     bytes, a run over 255 cut every 255 bytes from its start; a unit of
 *     r >= 4 bytes is 5 RLE1 bytes, a shorter one r bytes;
 *   - a block ends after the first unit that brings its RLE1 bytes to the
 *     limit or beyond (so up to limit + 4), the input's end ends the last.
 * Units do not restart at a block boundary, but any unit start is a place
 * the parse may start afresh: the units after it are the same, so a block
 * is encoded on its own (bz2_rle1_encode of its slice).
 */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "bz2_internal.h"
#include "parallel.h"

/* Length of the run of src[i] starting at i up to end (> i): 8 bytes a step. */
static size_t run_span(const uint8_t *src, size_t i, size_t end)
{
    uint64_t want = 0x0101010101010101ull * src[i];
    size_t j = i + 1;
    for (uint64_t w; j + 8 <= end; j += 8) {
        memcpy(&w, src + j, 8);
        if (w != want)
            break;
    }
    while (j < end && src[j] == src[i])
        j++;
    return j - i;
}

/* Length of the run of src[i] starting at i, capped at 255 and at n. */
static size_t run_length(const uint8_t *src, size_t i, size_t n)
{
    return run_span(src, i, n - i > 255 ? i + 255 : n);
}

/* Bytes of x that are zero, as 0x80 in that byte: exact, no false positives. */
static inline uint64_t zero_bytes(uint64_t x)
{
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full;
    return ~(((x & low7) + low7) | x | low7);
}

#if defined(__SSE2__)
/* Bit k set: p[k..k+4) are 4 equal bytes (reads p[0..19)). */
static inline unsigned run4_mask16(const uint8_t *p)
{
    __m128i a = _mm_loadu_si128((const __m128i *)p);
    __m128i e1 = _mm_cmpeq_epi8(a, _mm_loadu_si128((const __m128i *)(p + 1)));
    __m128i e2 = _mm_cmpeq_epi8(a, _mm_loadu_si128((const __m128i *)(p + 2)));
    __m128i e3 = _mm_cmpeq_epi8(a, _mm_loadu_si128((const __m128i *)(p + 3)));
    return (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_and_si128(e1, e2), e3));
}
#endif

/*
 * First position p in [i, stop) where 4 equal bytes of src[0..n) start (a
 * run unit can start only there: every byte before it is a 1-byte unit), or
 * stop. Runs of 4 are rare in most data, so the search is what a walk
 * costs: 32 bytes at a time with SSE2 (each byte compared with the next 3),
 * else eight: d = word ^ next word marks bytes equal to their successor;
 * three such marks in a row are four equal bytes (little-endian order).
 */
static size_t next_run4(const uint8_t *src, size_t i, size_t stop, size_t n)
{
#if defined(__SSE2__)
    while (i + 35 <= n && i < stop) {
        unsigned m = run4_mask16(src + i) | run4_mask16(src + i + 16) << 16;
        if (m) {
            size_t p = i + (size_t)__builtin_ctz(m);
            return p < stop ? p : stop;
        }
        i += 32;
    }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (i + 9 <= n && i < stop) {
        uint64_t a, b;
        memcpy(&a, src + i, 8);
        memcpy(&b, src + i + 1, 8);
        uint64_t z = zero_bytes(a ^ b); /* byte k: src[i+k] == src[i+k+1] */
        uint64_t three = z & (z >> 8) & (z >> 16);
        if (three) {
            size_t p = i + (size_t)__builtin_ctzll(three) / 8;
            return p < stop ? p : stop;
        }
        i += 6; /* a triple may still start at offsets 6 or 7 */
    }
#endif
    for (; i < stop && i + 3 < n; i++)
        if (src[i] == src[i + 1] && src[i] == src[i + 2] && src[i] == src[i + 3])
            return i;
    return stop;
}

#if defined(__SSE2__)
/*
 * RLE1 bytes of the 16 positions from p, counted by position: a byte is one
 * RLE1 byte unless it is the 5th or later of equal bytes (then none), and
 * the 4th of a run adds its count byte. Summed over positions from a run
 * boundary this is the units' count, as long as no run reaches 255 (the
 * cut every 255 bytes adds units): *long_run counts the 16-byte stretches
 * in a row whose bytes are all 5th or later, and the callers count such a
 * run another way once it reaches LONG_RUN. Reads p[-4..16).
 */
static inline unsigned units16(const uint8_t *p, unsigned *long_run)
{
    __m128i a0 = _mm_loadu_si128((const __m128i *)p), a1 = _mm_loadu_si128((const __m128i *)(p - 1));
    __m128i a2 = _mm_loadu_si128((const __m128i *)(p - 2)), a3 = _mm_loadu_si128((const __m128i *)(p - 3));
    __m128i e4 = _mm_cmpeq_epi8(a3, _mm_loadu_si128((const __m128i *)(p - 4)));
    __m128i four =
        _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi8(a0, a1), _mm_cmpeq_epi8(a1, a2)), _mm_cmpeq_epi8(a2, a3));
    unsigned fifth = (unsigned)_mm_movemask_epi8(_mm_and_si128(four, e4));
    unsigned fourth = (unsigned)_mm_movemask_epi8(_mm_andnot_si128(e4, four));
    *long_run = fifth == 0xFFFF ? *long_run + 1 : 0;
    return 16u - (unsigned)__builtin_popcount(fifth) + (unsigned)__builtin_popcount(fourth);
}
#endif

/* 16-byte stretches of one run in a row after which it may pass 255 bytes: a run that begins
 * where a count does has 251 bytes past its 4th before its 255th, which hold 15 stretches. */
#define LONG_RUN 7

/* One position's RLE1 bytes, as units16 counts them (p >= 4). */
static inline size_t units1(const uint8_t *p)
{
    bool four = p[0] == p[-1] && p[-1] == p[-2] && p[-2] == p[-3];
    return four ? (p[-3] == p[-4] ? 0 : 2) : 1;
}

/* RLE1 bytes of a run's first m bytes: 5 for each 255-byte unit, and a rest r is r under 4, else 5. */
static inline size_t run_prefix(size_t m)
{
    size_t r = m % 255;
    return 5 * (m / 255) + (r < 4 ? r : 5);
}

/* Start of the run that holds p, looking back as far as lo (lo if it goes on that far). */
static size_t run_start(const uint8_t *src, size_t p, size_t lo)
{
    uint64_t want = 0x0101010101010101ull * src[p];
    size_t s = p;
    for (uint64_t w; s >= lo + 8; s -= 8) {
        memcpy(&w, src + s - 8, 8);
        if (w != want)
            break;
    }
    while (s > lo && src[s - 1] == src[p])
        s--;
    return s;
}

/* How far back a count looks for the start of a run it begins inside: further, the tile is left to the walk. */
#define HEAD_LOOK ((size_t)4 << 10)

/*
 * RLE1 bytes of the positions [i, q) (i >= 4), each run's bytes counted by
 * their place in it (its units' bytes, run_prefix), or SIZE_MAX where a run
 * that began before i began too far back to tell. 16 positions at a time
 * where no run may pass 255 bytes (units16); a run that may is counted
 * whole, to its end or q.
 */
static size_t units_between(const uint8_t *src, size_t i, size_t q)
{
    size_t u = 0;
#if defined(__SSE2__)
    if (i < q && src[i] == src[i - 1]) { /* the run at i began before it */
        size_t lo = i > HEAD_LOOK ? i - HEAD_LOOK : 0, s = run_start(src, i, lo), e = i + run_span(src, i, q);
        if (s == lo)
            return SIZE_MAX;
        u += run_prefix(e - s) - run_prefix(i - s);
        i = e;
    }
    unsigned long_run = 0;
    for (size_t from = i; i + 16 <= q;) {
        u += units16(src + i, &long_run);
        if (long_run < LONG_RUN) {
            i += 16;
            continue;
        }
        /* [i, i + 16) lies in a run that began at or after from (a run boundary), all of whose
         * bytes units16 counted so far: as if it had one unit; count it whole instead */
        size_t s = run_start(src, i, from), e = i + run_span(src, i, q);
        if (e < i + 16)
            return SIZE_MAX; /* bytes changed under us */
        u += run_prefix(e - s) - run_prefix(i + 16 - s < 4 ? i + 16 - s : 4);
        i = e;
        long_run = 0;
    }
#else
    if (q - i >= 255)
        return SIZE_MAX; /* no cheap look at the runs: the exact walk counts it */
#endif
    for (; i < q; i++)
        u += units1(src + i);
    return u;
}

/*
 * From a run boundary i with u RLE1 bytes before it, to a run boundary at
 * or before q, whose count is u plus the positions' count up to q less the
 * part of the run that q cuts (its first m bytes: run_prefix(m)). Bytes
 * changed under us give any count, never a lower one.
 */
static void back_to_boundary(const uint8_t *src, size_t n, size_t i, size_t q, size_t counted, size_t *pos,
                             size_t *used)
{
    size_t b = q < n ? run_start(src, q, i) : q;
    size_t back = run_prefix(q - b);
    *used = counted >= *used + back ? counted - back : *used;
    *pos = b;
}

/* Whether the walk may count from i by positions: a run boundary with 4 bytes before it. */
static bool countable_from(const uint8_t *src, size_t i)
{
    return i >= 4 && src[i] != src[i - 1];
}

/* Positions add at most this many RLE1 bytes more than a count that stops inside a unit. */
#define UNIT_SLACK 20

/*
 * Move *pos and *used over whole 16-byte stretches while the block stays
 * clear of limit and they end by h. Text is full of runs of 4 (indentation),
 * which stop the 4-equal-bytes search every few dozen bytes; this counts
 * them without stopping, until a long stretch without runs (binary data
 * after a tar's zero padding) gives the search back its speed.
 */
static void skip_units(const uint8_t *src, size_t *pos, size_t *used, size_t h, size_t n, size_t limit)
{
    size_t i = *pos, q = i, u = *used;
    if (!countable_from(src, i))
        return;
#if defined(__SSE2__)
    unsigned long_run = 0, plain = 0; /* plain: stretches in a row of one RLE1 byte each */
    while (q + 16 <= h && u + UNIT_SLACK < limit && long_run < LONG_RUN - 1 && plain < 64) { /* 16 add <= 20 */
        unsigned c = units16(src + q, &long_run);
        plain = c == 16 ? plain + 1 : 0; /* runs grown sparse: the search skips such stretches faster */
        u += c;
        q += 16;
    }
#endif
    if (q != i)
        back_to_boundary(src, n, i, q, u, pos, used);
}

/*
 * Move *pos and *used over whole scanned tiles (bz2_rle1_scan) while the
 * block stays clear of limit and they end by h: the walk of a part whose
 * read was scanned on another thread costs a sum per tile.
 */
static void skip_tiles(const uint8_t *src, size_t *pos, size_t *used, size_t h, size_t n, size_t limit,
                       const bz2_rle1_tiles *t, size_t at)
{
    size_t i = *pos;
    if (!t || !countable_from(src, i))
        return;
    size_t k = i <= at ? 0 : (i - at + BZ2_RLE1_TILE - 1) / BZ2_RLE1_TILE;
    size_t q = at + k * BZ2_RLE1_TILE;
    if (k >= t->count || q + BZ2_RLE1_TILE > h || t->sum[k] == BZ2_RLE1_UNCOUNTED)
        return;
    size_t c = units_between(src, i, q), u = *used;
    if (c == SIZE_MAX || u + c + UNIT_SLACK >= limit)
        return;
    for (u += c; k < t->count && q + BZ2_RLE1_TILE <= h && t->sum[k] != BZ2_RLE1_UNCOUNTED &&
                 u + t->sum[k] + UNIT_SLACK < limit;
         k++, q += BZ2_RLE1_TILE)
        u += t->sum[k];
    back_to_boundary(src, n, i, q, u, pos, used);
}

/* Tiles [k, end) of t, a scan of src. */
static void count_tiles(const uint8_t *src, bz2_rle1_tiles *t, size_t k, size_t end)
{
    for (; k < end; k++) {
        /* the first tile's first positions look back at bytes this scan does not have */
        size_t u = k ? units_between(src, k * BZ2_RLE1_TILE, (k + 1) * BZ2_RLE1_TILE) : SIZE_MAX;
        t->sum[k] = u == SIZE_MAX ? BZ2_RLE1_UNCOUNTED : (uint32_t)u;
    }
}

static bz2_rle1_tiles *tiles_new(size_t n)
{
    size_t count = n / BZ2_RLE1_TILE;
    bz2_rle1_tiles *t = malloc(sizeof *t + (count ? count : 1) * sizeof *t->sum);
    if (t)
        t->count = count;
    return t;
}

bz2_rle1_tiles *bz2_rle1_scan(const uint8_t *src, size_t n)
{
    bz2_rle1_tiles *t = tiles_new(n);
    if (t)
        count_tiles(src, t, 0, t->count);
    return t;
}

/*
 * At a unit start i of a run of 255 bytes or more: take at once its whole
 * 255-byte units (5 RLE1 bytes each) that leave the block short of limit,
 * so a long run costs one look at its bytes, not a walk unit by unit
 * (zeros, sparse volumes). A whole unit inside src[0..n) is one whatever
 * follows n, so they may pass the walk's h. The unit that reaches the
 * limit, and the run's rest, are left to the walk. Whether it took any.
 */
static bool skip_long_run(const uint8_t *src, size_t *i, size_t *u, size_t n, size_t limit)
{
    size_t k = run_span(src, *i, n) / 255, room = *u + 5 < limit ? (limit - *u - 1) / 5 : 0;
    k = k < room ? k : room;
    *i += 255 * k;
    *u += 5 * k;
    return k > 0;
}

/* Every block but the last holds >= limit RLE1 bytes, and 5 of them cost
 * >= 4 input bytes, so this bounds the block count (plus the end entry). */
static size_t plan_cap(size_t len, size_t limit)
{
    return len / (limit / 2) + 3;
}

/*
 * Walk the block whose units before *pos hold *used RLE1 bytes (section 3)
 * through the units that start before h, reading up to n (h <= n): its end,
 * the unit boundary after the unit that brings it to limit, or 0 with *pos
 * and *used moved to h (or past it) if it ends at h or later. A stretch
 * before the next 4 equal bytes holds runs of 1..3 bytes, one RLE1 byte
 * each, so it is counted whole, and only the run where the limit falls is
 * looked at; the search for 4 equal bytes stops at the limit (or h), not at
 * the next such bytes, which in random data lie megabytes on. A stretch cut
 * at h splits no run that matters: a run reaching past h from before it is
 * under 4 bytes long, since 4 equal bytes starting before h are seen when h
 * + 3 <= n. An end below n is certain: the unit before it ended at a
 * different byte or at 255. Client memory may change under us: a run
 * shorter than 4 when measured counts its own length, and every end is past
 * *pos, so the plan stays within plan_cap whatever the bytes.
 */
static size_t block_walk(const uint8_t *src, size_t *pos, size_t *used, size_t h, size_t n, size_t limit,
                         const bz2_rle1_tiles *t, size_t at)
{
    size_t i = *pos, u = *used, e = 0;
    bool dense = false; /* runs of 4 close together: counting by position beats searching for them */
    while (i < h) {
        skip_tiles(src, &i, &u, h, n, limit, t, at);
        if (i >= h) /* its tiles reached h */
            break;
        if (dense)
            skip_units(src, &i, &u, h, n, limit);
        size_t stop = h - i > limit - u ? i + (limit - u) : h;
        size_t p = next_run4(src, i, stop, n);
        dense = p - i < 64;
        if (u + (p - i) >= limit) { /* ends at or after p = stop, after the run of its limit-th byte */
            e = p;
            /* that run has under 4 bytes from i, or one would start before stop */
            while (e < n && src[e] == src[e - 1])
                e++;
            break;
        }
        u += p - i;
        if ((i = p) >= h)
            break;
        size_t r = run_length(src, i, n);
        if (r == 255 && skip_long_run(src, &i, &u, n, limit))
            continue; /* look again from the unit after those taken */
        u += r >= 4 ? 5 : r;
        i += r;
        if (u >= limit) {
            e = i;
            break;
        }
    }
    *pos = i;
    *used = u;
    return e;
}

/* End of the block that starts at unit start a of src[0..n): see block_walk; n ends the last.
 * t (NULL: none) is bz2_rle1_scan of src: the walk adds its tiles up where it can. */
static size_t block_end(const uint8_t *src, size_t a, size_t n, size_t limit, const bz2_rle1_tiles *t)
{
    size_t used = 0, e = block_walk(src, &a, &used, n, n, limit, t, 0);
    return e ? e : n;
}

static size_t plan_blocks(const uint8_t *src, size_t n, size_t limit, size_t *st, size_t cap,
                          const bz2_rle1_tiles *t)
{
    size_t nb = 0;
    for (size_t a = 0; a < n && nb + 1 < cap; a = block_end(src, a, n, limit, t))
        st[nb++] = a;
    st[nb] = n;
    return nb;
}

/* Tiles one item of the plan's scan counts: enough that an item outweighs handing it out. */
#define SCAN_ITEM_TILES 64

typedef struct scan_job {
    const uint8_t *src;
    bz2_rle1_tiles *t;
} scan_job;

static void scan_item(void *ctx, size_t item)
{
    scan_job *j = ctx;
    size_t k = item * SCAN_ITEM_TILES, end = k + SCAN_ITEM_TILES < j->t->count ? k + SCAN_ITEM_TILES : j->t->count;
    count_tiles(j->src, j->t, k, end);
}

/* Threads from which counting tiles first beats the walk alone: one core counts tiles about as
 * fast as it walks text (docs/DECISIONS.md, "The plan's walk adds up tiles counted in parallel"). */
#define SCAN_MIN_THREADS 4

/*
 * bz2_rle1_scan on the pool's threads, for a plan with SCAN_MIN_THREADS or
 * more (0: every CPU): the walk then adds up tiles, and what is left of it
 * is serial only across each block's first and last tiles. NULL where the
 * threads would not pay (fewer, a small input) or memory is short: the
 * walk does it all.
 */
static bz2_rle1_tiles *scan_in_parallel(const uint8_t *src, size_t n, unsigned threads)
{
    size_t items = (n / BZ2_RLE1_TILE + SCAN_ITEM_TILES - 1) / SCAN_ITEM_TILES;
    if ((threads ? threads : gc_cpu_count()) < SCAN_MIN_THREADS || items < 2)
        return NULL;
    bz2_rle1_tiles *t = tiles_new(n);
    if (!t)
        return NULL;
    scan_job job = { src, t };
    gc_parallel_for(items, threads, scan_item, &job);
    return t;
}

size_t bz2_rle1_next_start(const uint8_t *src, size_t n, size_t *from, size_t min, size_t limit)
{
    size_t a = *from;
    while (a < min && a < n) {
        *from = a;
        a = block_end(src, a, n, limit, NULL);
    }
    return a < n ? a : 0;
}

size_t bz2_rle1_plan(const uint8_t *src, size_t n, size_t limit, unsigned threads, size_t **starts)
{
    size_t cap = plan_cap(n, limit);
    size_t *st = malloc(cap * sizeof *st);
    if (!st)
        return (size_t)-1;
    *starts = st;
    bz2_rle1_tiles *t = scan_in_parallel(src, n, threads);
    size_t nb = plan_blocks(src, n, limit, st, cap, t);
    free(t);
    return nb;
}

size_t bz2_rle1_encode(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t o = 0, i = 0;
    while (i < n) {
        size_t r = run_length(src, i, n);
        if (r >= 4) {
            dst[o] = dst[o + 1] = dst[o + 2] = dst[o + 3] = src[i];
            dst[o + 4] = (uint8_t)(r - 4);
            o += 5;
        } else {
            for (size_t k = 0; k < r; k++)
                dst[o + k] = src[i];
            o += r;
        }
        i += r;
    }
    return o;
}

/* bz2_rle1_walk_to, over a src whose bytes from at were scanned into t (NULL: none). */
static size_t walk_to(const uint8_t *src, size_t n, bool end, bz2_rle1_walk *w, size_t min, size_t limit,
                      const bz2_rle1_tiles *t, size_t at)
{
    /* units starting before h are whole whatever follows n: runs are at most 255 bytes, and 4 more
     * bytes settle a stretch's end and its 4-equal-byte search */
    size_t h = end ? n : n > 259 ? n - 259 : 0;
    while (w->start < min && w->pos < h) {
        size_t e = block_walk(src, &w->pos, &w->used, h, n, limit, t, at);
        if (!e)
            break;
        w->start = w->pos = e;
        w->used = 0;
    }
    return w->start >= min && w->start < n ? w->start : 0;
}

size_t bz2_rle1_walk_to(const uint8_t *src, size_t n, bool end, bz2_rle1_walk *w, size_t min, size_t limit)
{
    return walk_to(src, n, end, w, min, limit, NULL, 0);
}

size_t bz2_rle1_last_start(const uint8_t *src, size_t n, size_t limit, const bz2_rle1_tiles *t, size_t at)
{
    bz2_rle1_walk w = { 0 };
    size_t last = 0, start;
    while ((start = walk_to(src, n, false, &w, last + 1, limit, t, at)) != 0)
        last = start;
    return last;
}
