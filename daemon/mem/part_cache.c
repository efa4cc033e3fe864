/* part_cache.c - large buffers kept for their user's next part (see part_cache.h). */
#include "part_cache.h"

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "gc_mem.h"

/* Smaller blocks come from malloc's own free lists without fresh pages. */
#define KEPT_FROM ((size_t)1 << 20)

typedef struct {
    void *p;
    size_t size; /* malloc_usable_size */
    uid_t uid;
    unsigned long long age; /* when it was kept: the oldest goes first */
} kept;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kept slots[GCD_PART_CACHE_MAX_BUFFERS];
static size_t n_kept, bytes_kept, limit_bytes;
static unsigned long long clock_now, n_reused;

/*
 * A fresh block gets a thirty-second more than asked, so a part's input and
 * an output bound a little larger than it can take each other's block.
 */
#define HEADROOM 32

/* A kept block of size serves a request of len if it wastes at most a sixteenth of len. */
static bool fits(size_t size, size_t len)
{
    return size >= len && size - len <= len / 16;
}

static void take_slot(size_t i)
{
    bytes_kept -= slots[i].size;
    slots[i] = slots[--n_kept];
}

void gcd_part_cache_set_limit(size_t limit)
{
    pthread_mutex_lock(&lock);
    limit_bytes = limit;
    pthread_mutex_unlock(&lock);
    if (!limit)
        gcd_part_cache_drop();
}

void *gcd_part_cache_alloc(uid_t uid, size_t len)
{
    void *p = NULL;
    if (len >= KEPT_FROM) {
        pthread_mutex_lock(&lock);
        size_t best = n_kept;
        for (size_t i = 0; i < n_kept; i++)
            if (slots[i].uid == uid && fits(slots[i].size, len) &&
                (best == n_kept || slots[i].size < slots[best].size))
                best = i;
        if (best < n_kept) {
            p = slots[best].p;
            take_slot(best);
            n_reused++;
        }
        pthread_mutex_unlock(&lock);
    }
    if (p)
        return p;
    return gc_big_malloc(len < KEPT_FROM ? (len ? len : 1) : len + len / HEADROOM);
}

/* The oldest kept block, or n_kept if none. */
static size_t oldest(void)
{
    size_t o = n_kept;
    for (size_t i = 0; i < n_kept; i++)
        if (o == n_kept || slots[i].age < slots[o].age)
            o = i;
    return o;
}

void gcd_part_cache_free(uid_t uid, void *p)
{
    size_t size = p ? malloc_usable_size(p) : 0;
    if (size < KEPT_FROM) { /* every request's small blocks: no lock */
        free(p);
        return;
    }
    void *evicted[GCD_PART_CACHE_MAX_BUFFERS + 1];
    size_t n_evicted = 0;
    pthread_mutex_lock(&lock);
    if (size > limit_bytes) {
        evicted[n_evicted++] = p;
    } else {
        while (n_kept == GCD_PART_CACHE_MAX_BUFFERS || bytes_kept + size > limit_bytes) {
            size_t o = oldest();
            evicted[n_evicted++] = slots[o].p;
            take_slot(o);
        }
        slots[n_kept++] = (kept){ .p = p, .size = size, .uid = uid, .age = ++clock_now };
        bytes_kept += size;
    }
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < n_evicted; i++) /* unmapping is slow: not under the lock */
        free(evicted[i]);
}

void gcd_part_cache_drop(void)
{
    void *all[GCD_PART_CACHE_MAX_BUFFERS];
    pthread_mutex_lock(&lock);
    size_t n = n_kept;
    for (size_t i = 0; i < n; i++)
        all[i] = slots[i].p;
    n_kept = bytes_kept = 0;
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < n; i++)
        free(all[i]);
}

gcd_part_cache_stats gcd_part_cache_get_stats(void)
{
    pthread_mutex_lock(&lock);
    gcd_part_cache_stats st = { .buffers = n_kept, .bytes = bytes_kept, .reused = n_reused };
    pthread_mutex_unlock(&lock);
    return st;
}
