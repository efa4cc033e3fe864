/* fd_map_cache.c - cached memfd mappings (see fd_map_cache.h). */
#include "fd_map_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room for a registered input and output per client of a 64+-client load, and more. */
#define CACHE_ENTRIES 512

struct gcd_fd_map {
    dev_t dev;
    ino_t ino;
    uint8_t *addr;
    size_t len;
    bool writable;
    bool cached;     /* false: a one-off mapping, unmapped on release */
    bool registered; /* OP_REGISTER: never evicted, counted in registered_bytes */
    unsigned refs;
    uint64_t last_use;
    const void *owner;
    enum { PIN_NONE, PIN_BUSY, PIN_DONE, PIN_FAILED } pin;
    gcd_fd_map *next; /* dropped entries waiting to be unmapped (gcd_fd_map_cache_drop_owner) */
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static gcd_fd_map *entries[CACHE_ENTRIES];
static uint64_t cached_bytes, max_cached_bytes, use_clock;
static uint64_t registered_bytes, max_registered_bytes;
static gcd_pin_fn pin_hook;
static gcd_unpin_fn unpin_hook;

void gcd_fd_map_cache_init(uint64_t max_bytes, uint64_t max_registered)
{
    max_cached_bytes = max_bytes;
    max_registered_bytes = max_registered;
}

uint8_t *gcd_fd_map_addr(const gcd_fd_map *m)
{
    return m->addr;
}

/*
 * Populate (one bulk fault-in instead of a fault per 4 KiB on the hot path)
 * only the pages the file already has: a fresh output sized for its worst
 * case would otherwise get every page of that bound allocated. A
 * registration populates always (populate): its pages are locked next.
 */
static gcd_fd_map *map_new(int fd, const struct stat *st, size_t len, bool writable, bool populate, gc_error *err)
{
    gcd_fd_map *m = calloc(1, sizeof *m);
    if (!m) {
        gc_fail(err, GC_E_NOMEM, "out of memory");
        return NULL;
    }
    populate = populate || (uint64_t)st->st_blocks * 512 >= len;
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void *p = mmap(NULL, len, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
        free(m);
        gc_fail(err, errno == ENOMEM ? GC_E_NOMEM : GC_E_INVALID, "cannot map a %zu-byte memfd%s: %s", len,
                writable ? " for writing" : "", strerror(errno));
        return NULL;
    }
    *m = (gcd_fd_map){
        .dev = st->st_dev, .ino = st->st_ino, .addr = p, .len = len, .writable = writable, .refs = 1
    };
    return m;
}

static size_t page_round(size_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t p = pg > 0 ? (size_t)pg : 4096;
    return (len + p - 1) / p * p;
}

/*
 * A large mapping is emptied a slice at a time before it goes: MADV_DONTNEED
 * holds the process's memory map only shared and for one slice, where one
 * munmap of the whole would stall every other thread's page faults and
 * mappings (the I/O threads', the lanes') until it is done.
 */
#define UNMAP_SLICE ((size_t)64 << 20)

static void unmap(gcd_fd_map *m)
{
    if (m->pin == PIN_DONE && unpin_hook)
        unpin_hook(m->addr);
    for (size_t off = 0; m->len > UNMAP_SLICE && off < m->len; off += UNMAP_SLICE)
        madvise(m->addr + off, m->len - off < UNMAP_SLICE ? m->len - off : UNMAP_SLICE, MADV_DONTNEED);
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
    bool mine = m->cached && m->pin == PIN_NONE && pin_hook && m->registered;
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

/* Remove entry i from the cache (lock held); the caller unmaps. */
static gcd_fd_map *take_entry(int i)
{
    gcd_fd_map *m = entries[i];
    entries[i] = NULL;
    if (m->registered)
        registered_bytes -= m->len;
    else
        cached_bytes -= m->len;
    m->registered = false;
    return m;
}

/*
 * Take entry i out of the cache (lock held): returned if idle, for the
 * caller to unmap after unlocking; NULL if a request still uses it, which
 * then unmaps it on release.
 */
static gcd_fd_map *retire_entry(int i)
{
    gcd_fd_map *m = take_entry(i);
    if (m->refs == 0)
        return m;
    m->cached = false;
    return NULL;
}

static int find(const struct stat *st)
{
    for (int i = 0; i < CACHE_ENTRIES; i++)
        if (entries[i] && entries[i]->dev == st->st_dev && entries[i]->ino == st->st_ino)
            return i;
    return -1;
}

/* A free entry, evicting the least recently used idle entry if needed (lock held). */
static int free_entry(size_t need, gcd_fd_map **evicted, size_t *n_evicted)
{
    for (;;) {
        int free_i = -1, lru = -1;
        for (int i = 0; i < CACHE_ENTRIES; i++) {
            if (!entries[i] && free_i < 0)
                free_i = i;
            else if (entries[i] && entries[i]->refs == 0 && !entries[i]->registered &&
                     (lru < 0 || entries[i]->last_use < entries[lru]->last_use))
                lru = i;
        }
        if (free_i >= 0 && cached_bytes + need <= max_cached_bytes)
            return free_i;
        if (lru < 0)
            return -1;
        evicted[(*n_evicted)++] = take_entry(lru);
    }
}

gcd_fd_map *gcd_fd_map_acquire(int fd, size_t len, bool writable, const void *owner, gc_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        gc_fail(err, GC_E_INVALID, "cannot stat a passed descriptor: %s", strerror(errno));
        return NULL;
    }
    gcd_fd_map *evicted[CACHE_ENTRIES + 1];
    size_t n_evicted = 0;
    gcd_fd_map *hit = NULL;
    pthread_mutex_lock(&cache_lock);
    int i = find(&st);
    if (i >= 0 && entries[i]->len >= len && (entries[i]->writable || !writable)) {
        hit = entries[i];
        hit->refs++;
    } else if (i >= 0 && entries[i]->refs == 0 && !entries[i]->registered) {
        evicted[n_evicted++] = take_entry(i); /* too small or read-only: replace it */
    }
    if (hit) {
        hit->last_use = ++use_clock;
        if (!hit->registered) /* a registration stays with the connection that made it */
            hit->owner = owner;
    }
    pthread_mutex_unlock(&cache_lock);
    for (size_t k = 0; k < n_evicted; k++)
        unmap(evicted[k]);
    if (hit)
        return hit;

    gcd_fd_map *m = map_new(fd, &st, len, writable, false, err);
    if (!m)
        return NULL;
    n_evicted = 0;
    pthread_mutex_lock(&cache_lock);
    int e = find(&st) < 0 ? free_entry(len, evicted, &n_evicted) : -1;
    if (e >= 0) {
        m->cached = true;
        m->owner = owner;
        m->last_use = ++use_clock;
        entries[e] = m;
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

/* Take owner's entries (or all) out of the cache: those idle come back as a list to unmap. */
static gcd_fd_map *drop_where(const void *owner, bool everything)
{
    gcd_fd_map *dropped = NULL;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_ENTRIES; i++) {
        gcd_fd_map *m = entries[i];
        if (!m || !(everything || m->owner == owner))
            continue;
        if (m->registered) /* ends with its connection, in use or not */
            m = retire_entry(i);
        else
            m = m->refs == 0 ? take_entry(i) : NULL;
        if (m) {
            m->next = dropped;
            dropped = m;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return dropped;
}

gcd_fd_map *gcd_fd_map_cache_drop_owner(const void *owner)
{
    return drop_where(owner, false);
}

void gcd_fd_map_unmap_dropped(gcd_fd_map *list)
{
    while (list) {
        gcd_fd_map *next = list->next;
        unmap(list);
        list = next;
    }
}

void gcd_fd_map_cache_clear(void)
{
    gcd_fd_map_unmap_dropped(drop_where(NULL, true));
}

uint64_t gcd_fd_map_registered_bytes(void)
{
    pthread_mutex_lock(&cache_lock);
    uint64_t n = registered_bytes;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

/* Would registering `adding` bytes in place of `replacing` pass the limit? (lock held) */
static bool over_limit(size_t adding, size_t replacing, gc_error *err)
{
    if (registered_bytes - replacing + adding <= max_registered_bytes)
        return false;
    gc_fail(err, GC_E_LIMIT,
            "registering %zu bytes would exceed the daemon's limit of %llu registered bytes (%llu in use)", adding,
            (unsigned long long)max_registered_bytes, (unsigned long long)registered_bytes);
    return true;
}

/*
 * Make room for registering len bytes of st's file (lock held): an idle
 * unregistered entry of the file big enough and writable is promoted (its
 * index returned, *promote set), a smaller or read-only idle one goes to
 * *evicted. -1 with err set when the file is busy or registered elsewhere.
 */
static int registration_entry(const struct stat *st, size_t len, const void *owner, bool *promote,
                              gcd_fd_map **evicted, size_t *n_evicted, gc_error *err)
{
    *promote = false;
    int i = find(st);
    if (i < 0)
        return CACHE_ENTRIES;
    gcd_fd_map *m = entries[i];
    if (m->registered && m->owner != owner) {
        gc_fail(err, GC_E_INVALID, "this file is registered by another connection");
        return -1;
    }
    if (m->len >= len && m->writable) {
        *promote = true;
        return i;
    }
    if (m->refs > 0) {
        gc_fail(err, GC_E_BUSY, "a request is using this file: register it again when it is done");
        return -1;
    }
    if (m->registered && over_limit(len, m->len, err)) /* refuse before dropping it */
        return -1;
    evicted[(*n_evicted)++] = take_entry(i);
    return CACHE_ENTRIES;
}

/* Count m as registered (lock held); false with err set if over the limit. */
static bool charge_registration(gcd_fd_map *m, gc_error *err)
{
    if (m->registered)
        return true;
    if (over_limit(m->len, 0, err))
        return false;
    if (m->cached)
        cached_bytes -= m->len;
    registered_bytes += m->len;
    m->registered = true;
    return true;
}

/* Put a fresh registered mapping in the cache (lock held); false with err set if it cannot. */
static bool insert_registered(gcd_fd_map *m, const struct stat *st, const void *owner, gcd_fd_map **evicted,
                              size_t *n_evicted, gc_error *err)
{
    if (find(st) >= 0) { /* registered meanwhile by a concurrent request of this file */
        gc_fail(err, GC_E_BUSY, "this file is being registered by another request");
        return false;
    }
    if (!charge_registration(m, err))
        return false;
    int e = free_entry(0, evicted, n_evicted);
    if (e < 0) {
        registered_bytes -= m->len;
        m->registered = false;
        gc_fail(err, GC_E_LIMIT, "the daemon holds %d mapped files, all in use", CACHE_ENTRIES);
        return false;
    }
    m->cached = true;
    m->owner = owner;
    m->last_use = ++use_clock;
    entries[e] = m;
    return true;
}

static void unmap_all(gcd_fd_map **maps, size_t n)
{
    for (size_t k = 0; k < n; k++)
        unmap(maps[k]);
}

/* Find or make the registered entry for fd's file, holding a reference; NULL with err set. */
static gcd_fd_map *registered_entry(int fd, const struct stat *st, size_t len, const void *owner, gc_error *err)
{
    gcd_fd_map *evicted[CACHE_ENTRIES + 1];
    size_t n_evicted = 0;
    bool promote;
    pthread_mutex_lock(&cache_lock);
    int i = registration_entry(st, len, owner, &promote, evicted, &n_evicted, err);
    gcd_fd_map *m = promote ? entries[i] : NULL;
    if (m && charge_registration(m, err)) {
        m->owner = owner;
        m->refs++;
    } else {
        m = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    unmap_all(evicted, n_evicted);
    if (m || i < 0 || promote)
        return m;

    m = map_new(fd, st, len, true, true, err);
    if (!m)
        return NULL;
    n_evicted = 0;
    pthread_mutex_lock(&cache_lock);
    bool ok = insert_registered(m, st, owner, evicted, &n_evicted, err);
    pthread_mutex_unlock(&cache_lock);
    unmap_all(evicted, n_evicted);
    if (!ok) {
        unmap(m);
        return NULL;
    }
    return m; /* map_new's reference */
}

int gcd_fd_map_register(int fd, size_t len, const void *owner, bool *pinned, gc_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return gc_fail(err, GC_E_INVALID, "cannot stat a passed descriptor: %s", strerror(errno));
    if (len == 0 || (uint64_t)st.st_size < len)
        return gc_fail(err, GC_E_INVALID, "cannot register %zu bytes of a file of %lld bytes", len,
                       (long long)st.st_size);
    /* Limits first: mapping populates every page, so a sparse huge file would be paid for in full. */
    pthread_mutex_lock(&cache_lock);
    int i = find(&st);
    size_t replacing = i >= 0 && entries[i]->registered && entries[i]->owner == owner ? entries[i]->len : 0;
    bool over = over_limit(len, replacing, err);
    pthread_mutex_unlock(&cache_lock);
    if (over)
        return err->code;
    gcd_fd_map *m = registered_entry(fd, &st, len, owner, err);
    if (!m)
        return err->code;
    *pinned = gcd_fd_map_pin(m); /* outside the lock: page-locking a large file takes a while */
    gcd_fd_map_release(m);
    return GC_OK;
}

int gcd_fd_map_unregister(int fd, const void *owner, gc_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return gc_fail(err, GC_E_INVALID, "cannot stat a passed descriptor: %s", strerror(errno));
    pthread_mutex_lock(&cache_lock);
    int i = find(&st);
    bool mine = i >= 0 && entries[i]->registered && entries[i]->owner == owner;
    gcd_fd_map *idle = mine ? retire_entry(i) : NULL;
    pthread_mutex_unlock(&cache_lock);
    if (idle)
        unmap(idle);
    return mine ? GC_OK : gc_fail(err, GC_E_INVALID, "this file is not registered on this connection");
}
