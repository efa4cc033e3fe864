/*
 * fd_map_cache.h - mappings of client memfds, kept between requests.
 *
 * mmap/munmap of a request's memfds on every call costs more than the GPU
 * work for large buffers (populating page tables, faults) and, with many
 * clients, serialises the daemon's threads on the process's mmap lock. A
 * client that reuses its buffers (the library keeps its staging memfds)
 * sends the same files again and again: their mappings are kept here and
 * reused, so a steady stream of requests does no mapping work at all.
 *
 * Safety: a file is sealed against shrinking before it is first mapped, so
 * a cached mapping can never point past the end of its file. Memory: an
 * entry keeps its file's pages alive, so entries are dropped when the
 * connection that last used them closes, and the cache is bounded in count
 * and bytes. Thread-safe (one mutex; the critical sections do no I/O but
 * mmap/munmap).
 */
#ifndef GCD_FD_MAP_CACHE_H
#define GCD_FD_MAP_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gc_status.h"

typedef struct gcd_fd_map gcd_fd_map;

/*
 * Bound the cache: max_bytes of mapped files kept between requests (0
 * disables caching) and max_registered bytes of registered files (below).
 * Call once at start.
 */
void gcd_fd_map_cache_init(uint64_t max_bytes, uint64_t max_registered);

/*
 * A mapping of at least len bytes of fd (already sealed against shrinking),
 * writable if asked, tagged with owner (the connection). populate: fault the
 * pages in now when they exist. NULL with err set on failure.
 */
gcd_fd_map *gcd_fd_map_acquire(int fd, size_t len, bool writable, const void *owner, gc_error *err);

uint8_t *gcd_fd_map_addr(const gcd_fd_map *m);

/* Done with it for this request. */
void gcd_fd_map_release(gcd_fd_map *m);

/*
 * Page-locking for DMA (set by the GPU device when it opens): a registered
 * mapping is pinned once and stays pinned while registered, so the pipeline
 * moves it straight over DMA instead of staging it.
 */
typedef bool (*gcd_pin_fn)(void *addr, size_t len, bool read_only);
typedef void (*gcd_unpin_fn)(void *addr);
void gcd_fd_map_cache_set_pinning(gcd_pin_fn pin, gcd_unpin_fn unpin);

/* Pin m if it may be and is not pinned yet (best effort); true if it is pinned. */
bool gcd_fd_map_pin(gcd_fd_map *m);

/*
 * Registration (OP_REGISTER): the first len bytes of fd (sealed against
 * shrinking, at least len long) are mapped writable, faulted in and, when a
 * pinning hook is set, page-locked now, and stay so until unregistered or
 * until owner's connection closes: registered entries are never evicted.
 * The total is bounded by max_registered (GC_E_LIMIT beyond it). Registering
 * the same file again on the same connection is a no-op if it is big enough.
 * *pinned: whether the pages are page-locked for DMA.
 */
int gcd_fd_map_register(int fd, size_t len, const void *owner, bool *pinned, gc_error *err);

/* End owner's registration of fd's file (GC_E_INVALID if there is none). */
int gcd_fd_map_unregister(int fd, const void *owner, gc_error *err);

/* Bytes registered now. */
uint64_t gcd_fd_map_registered_bytes(void);

/*
 * The owner's connection closed: end its registrations, take its idle
 * entries out of the cache. They come back as a list (NULL: none) for
 * gcd_fd_map_unmap_dropped, on any thread: unmapping a large file takes
 * long enough to hold up every connection if the event loop did it.
 */
gcd_fd_map *gcd_fd_map_cache_drop_owner(const void *owner);
void gcd_fd_map_unmap_dropped(gcd_fd_map *list);

/* Unmap everything (shutdown; nothing may be in use). */
void gcd_fd_map_cache_clear(void);

#endif
