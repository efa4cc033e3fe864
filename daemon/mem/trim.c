/* trim.c - idle heap trimming off the event loop (see trim.h). */
#include "trim.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "log.h"
#include "part_cache.h"

/* Idle ticks in a row before a trim: the CPU pool's threads free their
 * scratch after a second without work (common/parallel.c). On a loaded host
 * they and the workers may free it later than that, after the first trim:
 * a second trim, later in the same idle spell, gives that back too. */
#define TRIM_IDLE_TICKS 2
#define TRIM_LATE_TICKS 6

struct gcd_trim {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool requested, stopping;  /* lock */
    atomic_uint_fast64_t done; /* trims finished */
    /* the loop's side, touched by gcd_trim_tick only */
    uint64_t last_activity;
    unsigned idle_ticks;
    bool dirty; /* work happened since the last trim */
};

static void *trim_main(void *arg)
{
    gcd_trim *t = arg;
    pthread_setname_np(pthread_self(), "gcd-trim");
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->requested && !t->stopping)
            pthread_cond_wait(&t->wake, &t->lock);
        if (t->stopping)
            break;
        t->requested = false;
        pthread_mutex_unlock(&t->lock);
        gcd_part_cache_stats kept = gcd_part_cache_get_stats();
        gcd_part_cache_drop(); /* first: what it frees is then trimmed too */
        malloc_trim(0);
        gcd_log(LOG_DEBUG, "idle: %zu kept part buffers (%zu MiB) freed, %llu reused since the start",
                kept.buffers, kept.bytes >> 20, kept.reused);
        atomic_fetch_add(&t->done, 1);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

gcd_trim *gcd_trim_start(void)
{
    gcd_trim *t = calloc(1, sizeof *t);
    if (!t) {
        gcd_log(LOG_WARNING, "cannot allocate the heap trimmer: freed memory stays with the daemon");
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->wake, NULL);
    atomic_init(&t->done, 0);
    if (pthread_create(&t->thread, NULL, trim_main, t) != 0) {
        gcd_log(LOG_WARNING, "cannot start the heap trimmer: freed memory stays with the daemon");
        pthread_cond_destroy(&t->wake);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
    }
    return t;
}

void gcd_trim_tick(gcd_trim *t, bool busy, uint64_t activity)
{
    if (!t)
        return;
    if (busy || activity != t->last_activity) {
        t->last_activity = activity;
        t->idle_ticks = 0;
        t->dirty = true;
        return;
    }
    if (!t->dirty)
        return;
    ++t->idle_ticks;
    if (t->idle_ticks != TRIM_IDLE_TICKS && t->idle_ticks != TRIM_LATE_TICKS)
        return;
    if (t->idle_ticks == TRIM_LATE_TICKS)
        t->dirty = false;
    pthread_mutex_lock(&t->lock);
    t->requested = true;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->lock);
}

uint64_t gcd_trim_count(gcd_trim *t)
{
    return t ? atomic_load(&t->done) : 0;
}

void gcd_trim_stop(gcd_trim *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    t->stopping = true;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
