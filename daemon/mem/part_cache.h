/*
 * part_cache.h - the large buffers of requests and stream parts (inputs read
 * from files, outputs), kept a short while after they are freed so the next
 * part of the same user takes one instead of fresh memory.
 *
 * Why: such buffers are too large for malloc's free lists, so glibc maps
 * each one anew and unmaps it when it is freed. Every part then pays the
 * kernel for zeroing fresh pages as it is filled, and for an unmap that
 * interrupts every thread of the daemon to flush its TLB: with many streams
 * at once that, not the copies, is where the daemon's CPU went
 * (docs/DECISIONS.md, "Part buffers are reused").
 *
 * A buffer is reused only for the user (peer uid) who freed it: it still
 * holds that user's bytes, which no other user may ever see, even through
 * a bug that sends bytes a codec did not write. A buffer is reused only for
 * a request close to its size, so what a request holds stays close to what
 * the budget charged it.
 *
 * Bounded: at most a fixed number of buffers and `limit` bytes are kept
 * (the oldest go first), and the daemon drops them all when it idles
 * (trim.h). Thread-safe.
 */
#ifndef GCD_PART_CACHE_H
#define GCD_PART_CACHE_H

#include <stddef.h>
#include <sys/types.h>

/* Buffers kept at most: a few parts in flight for each stream of a busy host. */
#define GCD_PART_CACHE_MAX_BUFFERS 64

/* The most bytes kept (0: keep nothing); the daemon sets it from its budget. */
void gcd_part_cache_set_limit(size_t limit);

/* A buffer of at least len bytes for uid: a kept one that fits, or gc_big_malloc's. Free it with gcd_part_cache_free. */
void *gcd_part_cache_alloc(uid_t uid, size_t len);

/* Keep p (any malloc'd block, or NULL) for uid's next alloc if it is large enough to be worth it; else free it. */
void gcd_part_cache_free(uid_t uid, void *p);

/* Free every kept buffer (when the daemon idles). */
void gcd_part_cache_drop(void);

/* Buffers and bytes kept now; alloc calls served from the cache so far. */
typedef struct {
    size_t buffers, bytes;
    unsigned long long reused;
} gcd_part_cache_stats;
gcd_part_cache_stats gcd_part_cache_get_stats(void);

#endif
