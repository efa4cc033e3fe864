/*
 * bz2_ibwt.c - inverse BWT: the last column of a block back to its bytes.
 *
 * The decode is a pointer chase through the T vector (row -> next row and
 * the byte it emits); at 3.6 MB per 900k block nearly every step misses L2,
 * so one chain runs at memory latency. We instead cut the cycle into
 * segments at a few chosen rows (marked in T) and follow LANES segments at
 * once, which lets the CPU overlap their loads. Segment lengths are only
 * known at the end, so each segment writes into fixed-size chunks taken
 * from a pool (the block's own column buffer, free once T is built); the
 * chunks are then concatenated in cycle order starting at origPtr.
 *
 * Hostile input can make T several cycles instead of one; then a segment
 * may never meet a marked row. The pool bounds every chain (it exhausts),
 * and the final walk checks that the segments form one cycle of exactly n
 * bytes; anything else falls back to the plain single chase, which gives
 * the same bytes (and so the same CRC verdict) as before.
 */
#include <stdlib.h>
#include <string.h>

#include "bz2_internal.h"

#define LANES 16
#define MAX_SEGS 128
#define CHUNK 4096u
#define MARK 0x80000000u
#define ROW_OF(e) (((e) & ~MARK) >> 8)
#define MIN_SPLIT (1u << 16) /* below this, T fits in L2: one chain is fine */
#define MAX_CHUNKS ((BZ2_MAX_BLOCK + BZ2_IBWT_SLACK) / CHUNK)

_Static_assert(BZ2_IBWT_SLACK >= (MAX_SEGS + 1) * CHUNK, "pool must cover a partial chunk per segment");

typedef struct seg {
    uint32_t row;     /* start row (marked in T) */
    uint32_t end_row; /* first marked row after it: the next segment */
    uint32_t first;   /* first chunk */
    uint32_t nchunks;
    uint32_t tail; /* bytes in the last chunk */
} seg;

typedef struct lane {
    int seg; /* -1 = idle */
    uint32_t p;
    uint32_t chunk;
    uint8_t *w, *end;
} lane;

typedef struct chase {
    const uint32_t *tt;
    uint8_t *pool;
    uint32_t pool_chunks, used_chunks;
    uint16_t next_chunk[MAX_CHUNKS];
    seg segs[MAX_SEGS];
    int nsegs, next_seg;
    lane lanes[LANES];
} chase;

/* T: tt[row] = (row of the next rotation) << 8 | byte it emits. */
static void build_t(const uint8_t *ll, uint32_t n, const uint32_t counts[256], uint32_t *tt)
{
    uint32_t cf[256], sum = 0;
    for (int c = 0; c < 256; c++) {
        cf[c] = sum;
        sum += counts[c];
    }
    for (uint32_t i = 0; i < n; i++)
        tt[cf[ll[i]]++] = i << 8 | ll[i];
}

static void chase_single(const uint32_t *tt, uint32_t n, uint32_t orig, uint8_t *out)
{
    uint32_t p = orig;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t e = tt[p];
        out[k] = (uint8_t)e;
        p = e >> 8;
    }
}

static int new_chunk(chase *c, uint32_t *idx)
{
    if (c->used_chunks >= c->pool_chunks)
        return -1;
    *idx = c->used_chunks++;
    return 0;
}

/* Give lane l the next unstarted segment and emit its first byte (its own
 * start row is marked, so it must not end the segment). */
static int lane_start(chase *c, lane *l)
{
    if (c->next_seg >= c->nsegs) {
        l->seg = -1;
        return 0;
    }
    seg *s = &c->segs[c->next_seg];
    l->seg = c->next_seg++;
    if (new_chunk(c, &s->first))
        return -1;
    s->nchunks = 1;
    l->chunk = s->first;
    l->w = c->pool + (size_t)s->first * CHUNK;
    l->end = l->w + CHUNK;
    uint32_t e = c->tt[s->row];
    *l->w++ = (uint8_t)e;
    l->p = ROW_OF(e);
    return 0;
}

static int lane_grow(chase *c, lane *l)
{
    uint32_t k;
    if (new_chunk(c, &k))
        return -1;
    c->next_chunk[l->chunk] = (uint16_t)k;
    c->segs[l->seg].nchunks++;
    l->chunk = k;
    l->w = c->pool + (size_t)k * CHUNK;
    l->end = l->w + CHUNK;
    return 0;
}

static int lane_finish(chase *c, lane *l)
{
    seg *s = &c->segs[l->seg];
    s->end_row = l->p;
    s->tail = (uint32_t)(CHUNK - (uint32_t)(l->end - l->w));
    return lane_start(c, l);
}

/* Follow all segments, LANES at a time. -1: the pool ran out. */
static int run_lanes(chase *c)
{
    for (int i = 0; i < LANES; i++)
        if (lane_start(c, &c->lanes[i]))
            return -1;
    for (;;) {
        int active = 0;
        for (int i = 0; i < LANES; i++) {
            lane *l = &c->lanes[i];
            if (l->seg < 0)
                continue;
            active = 1;
            uint32_t e = c->tt[l->p];
            if (__builtin_expect((e & MARK) != 0, 0)) {
                if (lane_finish(c, l))
                    return -1;
                continue;
            }
            *l->w++ = (uint8_t)e;
            l->p = e >> 8;
            if (__builtin_expect(l->w == l->end, 0) && lane_grow(c, l))
                return -1;
        }
        if (!active)
            return 0;
    }
}

static int seg_at_row(const chase *c, uint32_t row)
{
    for (int i = 0; i < c->nsegs; i++)
        if (c->segs[i].row == row)
            return i;
    return -1;
}

static size_t seg_len(const seg *g)
{
    return (size_t)(g->nchunks - 1) * CHUNK + g->tail;
}

/* Segment order along the cycle from segment 0 (origPtr) into order[];
 * -1 unless the segments form one cycle of exactly n bytes. */
static int order_segments(const chase *c, uint32_t n, int *order)
{
    uint8_t seen[MAX_SEGS] = { 0 };
    size_t total = 0;
    int s = 0;
    for (int k = 0; k < c->nsegs; k++) {
        if (s < 0 || seen[s])
            return -1;
        seen[s] = 1;
        order[k] = s;
        total += seg_len(&c->segs[s]);
        s = seg_at_row(c, c->segs[s].end_row);
    }
    return (s == 0 && total == n) ? 0 : -1;
}

static void copy_segments(const chase *c, const int *order, uint8_t *out)
{
    size_t o = 0;
    for (int k = 0; k < c->nsegs; k++) {
        const seg *g = &c->segs[order[k]];
        uint32_t ch = g->first;
        for (uint32_t j = 0; j < g->nchunks; j++) {
            size_t m = j + 1 < g->nchunks ? CHUNK : g->tail;
            memcpy(out + o, c->pool + (size_t)ch * CHUNK, m);
            o += m;
            ch = c->next_chunk[ch];
        }
    }
}

/* Segment starts: origPtr first, then rows spread evenly (their positions
 * in the output are effectively random, which balances the lanes). */
static void pick_starts(chase *c, uint32_t *tt, uint32_t n, uint32_t orig)
{
    c->nsegs = 0;
    c->segs[c->nsegs++].row = orig;
    tt[orig] |= MARK;
    for (uint32_t k = 1; k < MAX_SEGS; k++) {
        uint32_t r = (uint32_t)((uint64_t)k * n / MAX_SEGS);
        if (tt[r] & MARK)
            continue;
        tt[r] |= MARK;
        c->segs[c->nsegs++].row = r;
    }
}

/* Returns 0 when out holds the block, -1 when the lanes failed (T is then
 * unmarked again for the single chase). */
static int chase_lanes(chase *c, uint32_t *tt, uint32_t n, uint32_t orig, uint8_t *pool, size_t pool_cap,
                       uint8_t *out)
{
    c->tt = tt;
    c->pool = pool;
    c->pool_chunks = (uint32_t)(pool_cap / CHUNK);
    if (c->pool_chunks > MAX_CHUNKS)
        c->pool_chunks = MAX_CHUNKS;
    c->used_chunks = 0;
    c->next_seg = 0;
    pick_starts(c, tt, n, orig);
    int order[MAX_SEGS];
    int rc = run_lanes(c);
    if (rc == 0)
        rc = order_segments(c, n, order);
    for (int i = 0; i < c->nsegs; i++)
        tt[c->segs[i].row] &= ~MARK;
    /* out may be T's own memory: copy only once T is no longer needed */
    if (rc == 0)
        copy_segments(c, order, out);
    return rc;
}

int bz2_inverse_bwt(uint8_t *ll, size_t ll_cap, uint32_t n, uint32_t orig, const uint32_t counts[256])
{
    uint32_t *tt = malloc((size_t)n * sizeof *tt + 1);
    if (!tt)
        return -1;
    build_t(ll, n, counts, tt);
    int done = 0;
    if (n >= MIN_SPLIT && ll_cap >= (size_t)n + BZ2_IBWT_SLACK) {
        chase *c = malloc(sizeof *c);
        if (!c) {
            free(tt);
            return -1;
        }
        /* The chunks go to ll (dead now); the ordered bytes to tt's
         * memory (n <= 4n bytes), then back to ll. */
        uint8_t *tmp = (uint8_t *)tt;
        if (chase_lanes(c, tt, n, orig, ll, ll_cap, tmp) == 0) {
            memcpy(ll, tmp, n);
            done = 1;
        }
        free(c);
    }
    if (!done)
        chase_single(tt, n, orig, ll);
    free(tt);
    return 0;
}
