/*
 * parallel.h - a minimal fork-join "parallel for" over independent items.
 *
 * Why not a persistent pool: codec calls already run on the daemon's worker
 * threads, and the work items (bzip2 blocks, RLE chunks) cost far more than
 * a pthread_create. Spawning per call keeps nesting deadlock-free and the
 * code obvious. The calling thread takes part in the work.
 */
#ifndef GC_PARALLEL_H
#define GC_PARALLEL_H

#include <stddef.h>

typedef void (*gc_item_fn)(void *ctx, size_t index);

/* Number of online CPUs (at least 1). */
unsigned gc_cpu_count(void);

/*
 * Call fn(ctx, i) for every i in [0, n_items), on up to max_threads threads
 * (0 = gc_cpu_count()). Items are handed out dynamically in index order.
 * Returns when every call has finished. If threads cannot be created the
 * remaining work runs on the calling thread, so this cannot fail.
 */
void gc_parallel_for(size_t n_items, unsigned max_threads, gc_item_fn fn, void *ctx);

#endif
