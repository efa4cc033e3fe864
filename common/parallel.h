/*
 * parallel.h - one process-wide pool of threads for the CPU codecs.
 *
 * Why a persistent pool: the daemon runs many requests at once, each of
 * which wants every core for its blocks. Threads spawned per call made N
 * requests run N x cores threads, paid a spawn per call (per speculative
 * batch when decoding), and could not start a block of the next request
 * while the last blocks of this one ran. The pool runs items of every
 * open work on the same gc_cpu_count() threads, oldest work first.
 *
 * Why at most gc_cpu_count() threads run items: a thread outside the pool
 * that calls gc_parallel_for leaves its items to the pool and waits, so
 * the daemon's workers and a stream's parts in flight add no threads to
 * the pool's (were they to run items beside it, N CPUs would carry N +
 * workers threads). Only a gc_work's caller (the bzip2 decoder's walk) runs items
 * beside the pool.
 *
 * Why it cannot deadlock: a pool thread that opens a work (nesting) runs
 * its items itself, as does every caller when the pool has no threads, so
 * a work waits only for pool threads that are running items, and items
 * must not wait for one another.
 *
 * After fork() the child starts a fresh pool on first use.
 */
#ifndef GC_PARALLEL_H
#define GC_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*gc_item_fn)(void *ctx, size_t index);

/* CPUs this process may run on (its affinity mask; at least 1). */
unsigned gc_cpu_count(void);

/*
 * Call fn(ctx, i) for every i in [0, n_items), on up to max_threads threads
 * (0 = gc_cpu_count()): pool threads, or the caller itself when it is a
 * pool thread, when there is one item, or when the pool has no threads.
 * Items are handed out dynamically in index order. Returns when every call
 * has finished. Cannot fail.
 */
void gc_parallel_for(size_t n_items, unsigned max_threads, gc_item_fn fn, void *ctx);

/*
 * memcpy(dst, src, len) in stripes on up to max_threads threads as
 * gc_parallel_for runs items: a destination mapped fresh (a client's memfd)
 * has its pages made as they are first written, which one thread does far
 * more slowly than it copies. Small copies stay on the caller.
 */
void gc_parallel_copy(void *dst, const void *src, size_t len, unsigned max_threads);

/*
 * Open-ended work, for a caller that decides as it goes how far ahead the
 * pool may run (speculative decoding): items [0, limit) may be handed out,
 * in index order, to up to max_threads - 1 pool threads and to the caller.
 *
 *   gc_work_open(&w, max_threads, fn, ctx);   w lives in the caller
 *   gc_work_allow(&w, limit);                 raise the limit (never lowers it)
 *   gc_work_take(&w, &i)                      the caller takes the next item itself
 *   gc_work_close(&w);                        hand out no more; wait for running ones
 *
 * The fields are the pool's (parallel.c); the struct is public only so that
 * opening a work needs no allocation and so cannot fail.
 */
typedef struct gc_work {
    gc_item_fn fn;
    void *ctx;
    _Atomic size_t next, limit;
    unsigned max_helpers; /* pool threads it may have */
    unsigned helpers;     /* pool threads in it (under the pool's lock) */
    bool listed;          /* on the pool's list of open works */
    struct gc_work *prev, *after;
} gc_work;

void gc_work_open(gc_work *w, unsigned max_threads, gc_item_fn fn, void *ctx);
void gc_work_allow(gc_work *w, size_t limit);
bool gc_work_take(gc_work *w, size_t *index);
void gc_work_close(gc_work *w);

#endif
