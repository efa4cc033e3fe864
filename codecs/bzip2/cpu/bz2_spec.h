/*
 * bz2_spec.h - decoding candidate blocks ahead of the decoder's walk.
 *
 * The block scan (bz2_stream.c) finds every bit offset where the 48-bit
 * block magic occurs; most are blocks, a few are chance matches inside
 * compressed data. The walk accepts a candidate only where the previous
 * block ended, one at a time and in order. Meanwhile the pool decodes the
 * candidates after it, up to a window ahead, so the walk mostly finds its
 * next block decoded. There is no barrier: a slow block delays only the walk,
 * never the decoding of the blocks behind it (docs/BZIP2.md, "Parallel
 * decoding").
 *
 * Bounded: at most `window` candidates are decoded and not yet released, a
 * helper starts no decode while the held output passes BZ2_SPEC_HELD_MAX
 * (the walk decodes that candidate itself when it gets there), and
 * bz2_spec_stop ends speculation on input whose candidates are mostly
 * false. The walk decodes a candidate itself when no helper has taken it,
 * so progress never depends on the pool, and while a helper decodes the one
 * it waits for, it decodes the next ones of the window.
 */
#ifndef GC_BZ2_SPEC_H
#define GC_BZ2_SPEC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "bz2_stages.h"
#include "parallel.h"

#define BZ2_SPEC_HELD_MAX ((size_t)256 << 20)
/* Candidates decoded ahead of the walk, per decoding thread: room for the
 * others to go on while one decodes a block that expands much more than
 * theirs (docs/DECISIONS.md). A tuning build may set it. */
#ifndef BZ2_SPEC_WINDOW_PER_THREAD
#define BZ2_SPEC_WINDOW_PER_THREAD 4
#endif

typedef struct bz2_spec {
    const uint8_t *src;
    size_t len, max_out;
    const uint64_t *cand; /* candidate magic offsets, ascending */
    size_t n_cand;
    size_t window; /* slots: how far ahead of the walk */
    size_t ahead;  /* how far ahead now (<= window; bz2_spec_limit) */
    bool speculate;
    bz2_dblock *slot;             /* candidate i decodes into slot[i % window] */
    _Atomic unsigned char *state; /* per candidate: SPEC_FREE, _RUNNING, _DONE, _DEAD */
    _Atomic size_t held;          /* bytes of decoded output not yet released */
    size_t floor;                 /* candidates below it are released */
    size_t wasted;                /* decoded candidates the walk skipped: chance matches */
    gc_work work;
    pthread_mutex_t lock;
    pthread_cond_t done; /* a candidate's decode finished */
} bz2_spec;

/* What a block whose magic is at bit pos may read: up to
 * BZ2_MAX_BLOCK_COMPRESSED bytes from the byte holding its first bit. */
static inline size_t bz2_block_len_cap(size_t len, uint64_t pos)
{
    uint64_t cap = pos / 8 + BZ2_MAX_BLOCK_COMPRESSED;
    return cap < len ? (size_t)cap : len;
}

/* Start decoding ahead on up to threads threads. -1: out of memory. */
int bz2_spec_open(bz2_spec *s, const uint8_t *src, size_t len, size_t max_out, const uint64_t *cand, size_t n_cand,
                  unsigned threads);
/* Candidate ci decoded (by a helper or now by the caller); every candidate
 * below ci is released. The walk reads it, then calls bz2_spec_consumed. */
bz2_dblock *bz2_spec_get(bz2_spec *s, size_t ci);
/* The walk is done with candidate ci (returned by bz2_spec_get): frees its
 * output and lets the pool run further ahead. */
void bz2_spec_consumed(bz2_spec *s, size_t ci);
/* Decode nothing more ahead of the walk (mostly false candidates). */
void bz2_spec_stop(bz2_spec *s);
/* Decode at most n candidates ahead (the walk expects to stop soon: blocks
 * decoded past where it stops would be decoded again by the next call). */
void bz2_spec_limit(bz2_spec *s, size_t n);
/* Wait for running decodes and free everything. */
void bz2_spec_close(bz2_spec *s);

#endif
