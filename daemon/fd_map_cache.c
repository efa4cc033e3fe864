/* fd_map_cache.c - cached memfd mappings (see fd_map_cache.h). */
#include "fd_map_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_SLOTS 64

struct gcd_fd_map {
    dev_t dev;
    ino_t ino;
    uint8_t *addr;
    size_t len;
    bool writable;
    bool cached;          /* false: a one-off mapping, unmapped on release */
    unsigned refs;
    uint64_t last_use;
    const void *owner;
    enum { PIN_NONE, PIN_BUSY, PIN_DONE, PIN_FAILED } pin;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static gcd_fd_map *slots[CACHE_SLOTS];
static uint64_t cached_bytes, max_cached_bytes, use_clock;
static gcd_pin_fn pin_hook;
static gcd_unpin_fn unpin_hook;

void gcd_fd_map_cache_init(uint64_t max_bytes)
{
    max_cached_bytes = max_bytes;
}

uint8_t *gcd_fd_map_addr(const gcd_fd_map *m)
{
    return m->addr;
}

/*
 * Populate (one bulk fault-in instead of a fault per 4 KiB on the hot path)
 * only the pages the file already has: a fresh output sized for its worst
 * case would otherwise get every page of that bound allocated.
 */
static gcd_fd_map *map_new(int fd, const struct stat *st, size_t len, bool writable, gc_error *err)
{
    gcd_fd_map *m = calloc(1, sizeof *m);
    if (!m) {
        gc_fail(err, GC_E_NOMEM, "out of memory");
        return NULL;
    }
    bool populate = (uint64_t)st->st_blocks * 512 >= len;
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void *p = mmap(NULL, len, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
        free(m);
        gc_fail(err, GC_E_NOMEM, "cannot map a %zu-byte memfd: %s", len, strerror(errno));
        return NULL;
    }
    *m = (gcd_fd_map){ .dev = st->st_dev, .ino = st->st_ino, .addr = p, .len = len,
                       .writable = writable, .refs = 1 };
    return m;
}

static size_t page_round(size_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t p = pg > 0 ? (size_t)pg : 4096;
    return (len + p - 1) / p * p;
}

static void unmap(gcd_fd_map *m)
{
    if (m->pin == PIN_DONE && unpin_hook)
        unpin_hook(m->addr);
    munmap(m->addr, m->len);
    free(m);
}

void gcd_fd_map_cache_set_pinning(gcd_pin_fn pin, gcd_unpin_fn unpin)
{
    pthread_mutex_lock(&cache_lock);
    pin_hook = pin;
    unpin_hook = unpin;
    pthread_mutex_unlock(&cache_lock);
}

bool gcd_fd_map_pin(gcd_fd_map *m)
{
    pthread_mutex_lock(&cache_lock);
    bool mine = m->cached && m->pin == PIN_NONE && pin_hook;
    bool pinned = m->pin == PIN_DONE;
    if (mine)
        m->pin = PIN_BUSY; /* another lane may ask for the same file: one pins it */
    gcd_pin_fn pin = pin_hook;
    pthread_mutex_unlock(&cache_lock);
    if (!mine)
        return pinned;
    bool ok = pin(m->addr, page_round(m->len), !m->writable);
    pthread_mutex_lock(&cache_lock);
    m->pin = ok ? PIN_DONE : PIN_FAILED;
    pthread_mutex_unlock(&cache_lock);
    return ok;
}

/* Remove slot i from the cache (lock held); the caller unmaps. */
static gcd_fd_map *take_slot(int i)
{
    gcd_fd_map *m = slots[i];
    slots[i] = NULL;
    cached_bytes -= m->len;
    return m;
}

static int find(const struct stat *st)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (slots[i] && slots[i]->dev == st->st_dev && slots[i]->ino == st->st_ino)
            return i;
    return -1;
}

/* A free slot, evicting the least recently used idle entry if needed (lock held). */
static int free_slot(size_t need, gcd_fd_map **evicted, size_t *n_evicted)
{
    for (;;) {
        int free_i = -1, lru = -1;
        for (int i = 0; i < CACHE_SLOTS; i++) {
            if (!slots[i] && free_i < 0)
                free_i = i;
            else if (slots[i] && slots[i]->refs == 0 &&
                     (lru < 0 || slots[i]->last_use < slots[lru]->last_use))
                lru = i;
        }
        if (free_i >= 0 && cached_bytes + need <= max_cached_bytes)
            return free_i;
        if (lru < 0)
            return -1;
        evicted[(*n_evicted)++] = take_slot(lru);
    }
}

gcd_fd_map *gcd_fd_map_acquire(int fd, size_t len, bool writable, const void *owner, gc_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        gc_fail(err, GC_E_INVALID, "cannot stat a passed descriptor: %s", strerror(errno));
        return NULL;
    }
    gcd_fd_map *evicted[CACHE_SLOTS + 1];
    size_t n_evicted = 0;
    gcd_fd_map *hit = NULL;
    pthread_mutex_lock(&cache_lock);
    int i = find(&st);
    if (i >= 0 && slots[i]->len >= len && (slots[i]->writable || !writable)) {
        hit = slots[i];
        hit->refs++;
    } else if (i >= 0 && slots[i]->refs == 0) {
        evicted[n_evicted++] = take_slot(i); /* too small or read-only: replace it */
    }
    if (hit) {
        hit->last_use = ++use_clock;
        hit->owner = owner;
    }
    pthread_mutex_unlock(&cache_lock);
    for (size_t k = 0; k < n_evicted; k++)
        unmap(evicted[k]);
    if (hit)
        return hit;

    gcd_fd_map *m = map_new(fd, &st, len, writable, err);
    if (!m)
        return NULL;
    n_evicted = 0;
    pthread_mutex_lock(&cache_lock);
    int slot = find(&st) < 0 ? free_slot(len, evicted, &n_evicted) : -1;
    if (slot >= 0) {
        m->cached = true;
        m->owner = owner;
        m->last_use = ++use_clock;
        slots[slot] = m;
        cached_bytes += m->len;
    }
    pthread_mutex_unlock(&cache_lock);
    for (size_t k = 0; k < n_evicted; k++)
        unmap(evicted[k]);
    return m;
}

void gcd_fd_map_release(gcd_fd_map *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&cache_lock);
    bool drop = --m->refs == 0 && !m->cached;
    pthread_mutex_unlock(&cache_lock);
    if (drop)
        unmap(m);
}

static void drop_where(const void *owner, bool everything)
{
    gcd_fd_map *evicted[CACHE_SLOTS];
    size_t n = 0;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (slots[i] && slots[i]->refs == 0 && (everything || slots[i]->owner == owner))
            evicted[n++] = take_slot(i);
    pthread_mutex_unlock(&cache_lock);
    for (size_t k = 0; k < n; k++)
        unmap(evicted[k]);
}

void gcd_fd_map_cache_drop_owner(const void *owner)
{
    drop_where(owner, false);
}

void gcd_fd_map_cache_clear(void)
{
    drop_where(NULL, true);
}
