/* parallel.c - the process-wide pool of parallel.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "parallel.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scratch.h"

/* A pool thread gives its stage buffers back after this long without work (scratch.h). */
#define IDLE_RELEASE_SECONDS 1

/*
 * One lock guards the list of open works and the helper counts; items are
 * handed out without it (an atomic compare-and-swap on next), so the lock
 * is taken once per work a thread joins, not once per item.
 *
 * A free thread joins the oldest open work that wants one: first come,
 * first served, so that an older request (a stream's earlier part) finishes
 * first rather than all of them finishing late together.
 */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a work was opened or its limit raised */
    pthread_cond_t left; /* a helper left a work */
    gc_work *head, *tail;
    unsigned threads; /* started */
    bool started;
    bool atfork;
} pool = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, false, false
};

unsigned gc_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

bool gc_work_take(gc_work *w, size_t *index)
{
    size_t i = atomic_load(&w->next);
    do {
        if (i >= atomic_load(&w->limit))
            return false;
    } while (!atomic_compare_exchange_weak(&w->next, &i, i + 1));
    *index = i;
    return true;
}

static bool joinable(const gc_work *w)
{
    return w->helpers < w->max_helpers && atomic_load(&w->next) < atomic_load(&w->limit);
}

/* Set in the pool's threads: a work they open runs on them (nesting), not beside them. */
static _Thread_local bool in_pool;

/* Under the lock: wait for work; a thread holding stage buffers frees them if none comes soon. */
static void idle_wait(void)
{
    if (!gc_scratch_held()) {
        pthread_cond_wait(&pool.wake, &pool.lock);
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += IDLE_RELEASE_SECONDS;
    if (pthread_cond_timedwait(&pool.wake, &pool.lock, &until) == ETIMEDOUT) {
        pthread_mutex_unlock(&pool.lock);
        gc_scratch_release();
        pthread_mutex_lock(&pool.lock);
    }
}

static void *pool_thread(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "gc-codec");
    in_pool = true;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        gc_work *w = pool.head;
        while (w && !joinable(w))
            w = w->after;
        if (!w) {
            idle_wait();
            continue;
        }
        w->helpers++;
        pthread_mutex_unlock(&pool.lock);
        size_t i;
        while (gc_work_take(w, &i))
            w->fn(w->ctx, i);
        pthread_mutex_lock(&pool.lock);
        if (--w->helpers == 0) /* gc_work_close, or a caller in wait_for_pool, may be waiting */
            pthread_cond_broadcast(&pool.left);
    }
    return NULL;
}

/* The child of a fork has none of the parent's threads: start afresh. */
static void pool_after_fork(void)
{
    pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    pool.lock = fresh_lock;
    pool.wake = fresh_cond;
    pool.left = fresh_cond;
    pool.head = pool.tail = NULL;
    pool.threads = 0;
    pool.started = false;
}

/* Under the lock. A thread that cannot be created leaves the pool smaller. */
static void pool_start(void)
{
    if (pool.started)
        return;
    pool.started = true;
    if (!pool.atfork && pthread_atfork(NULL, NULL, pool_after_fork) == 0)
        pool.atfork = true;
    unsigned n = gc_cpu_count();
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (unsigned k = 0; k < n; k++) {
        pthread_t t;
        if (pthread_create(&t, &attr, pool_thread, NULL) != 0)
            break;
        pool.threads++;
    }
    pthread_attr_destroy(&attr);
}

/* Open w with up to max_helpers pool threads. */
static void work_open(gc_work *w, unsigned max_helpers, gc_item_fn fn, void *ctx)
{
    *w = (gc_work){ .fn = fn, .ctx = ctx };
    atomic_init(&w->next, 0);
    atomic_init(&w->limit, 0);
    w->max_helpers = max_helpers;
    if (w->max_helpers == 0)
        return;
    pthread_mutex_lock(&pool.lock);
    pool_start();
    w->listed = true;
    w->prev = pool.tail;
    if (pool.tail)
        pool.tail->after = w;
    else
        pool.head = w;
    pool.tail = w;
    pthread_mutex_unlock(&pool.lock);
}

void gc_work_open(gc_work *w, unsigned max_threads, gc_item_fn fn, void *ctx)
{
    if (max_threads == 0)
        max_threads = gc_cpu_count();
    work_open(w, max_threads - 1, fn, ctx); /* the caller is one of the threads */
}

void gc_work_allow(gc_work *w, size_t limit)
{
    size_t old = atomic_load(&w->limit);
    while (old < limit && !atomic_compare_exchange_weak(&w->limit, &old, limit))
        ;
    if (old >= limit || !w->listed)
        return;
    pthread_mutex_lock(&pool.lock);
    if (w->helpers < w->max_helpers) /* else no sleeping thread may join it */
        pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

void gc_work_close(gc_work *w)
{
    atomic_store(&w->limit, 0); /* takes fail from here on */
    if (!w->listed)
        return;
    pthread_mutex_lock(&pool.lock);
    if (w->prev)
        w->prev->after = w->after;
    else
        pool.head = w->after;
    if (w->after)
        w->after->prev = w->prev;
    else
        pool.tail = w->prev;
    w->listed = false;
    while (w->helpers > 0)
        pthread_cond_wait(&pool.left, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

/*
 * Whether the caller of a parallel_for leaves its items to the pool: a
 * thread outside the pool does, when the pool has threads, so that however
 * many callers there are (the daemon's workers, a stream's parts) at most
 * gc_cpu_count() threads run items; a pool thread (nested) runs its own.
 */
static bool leave_to_pool(void)
{
    if (in_pool)
        return false;
    pthread_mutex_lock(&pool.lock);
    pool_start();
    bool threads = pool.threads > 0;
    pthread_mutex_unlock(&pool.lock);
    return threads;
}

/* Wait until the pool has run all n items of w, then close it. */
static void wait_for_pool(gc_work *w, size_t n)
{
    pthread_mutex_lock(&pool.lock);
    while (atomic_load(&w->next) < n || w->helpers > 0)
        pthread_cond_wait(&pool.left, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    gc_work_close(w);
}

void gc_parallel_for(size_t n_items, unsigned max_threads, gc_item_fn fn, void *ctx)
{
    if (max_threads == 0)
        max_threads = gc_cpu_count();
    if (n_items < max_threads)
        max_threads = n_items > 0 ? (unsigned)n_items : 1u;
    gc_work w;
    if (max_threads > 1 && leave_to_pool()) {
        work_open(&w, max_threads, fn, ctx);
        gc_work_allow(&w, n_items);
        wait_for_pool(&w, n_items);
        return;
    }
    gc_work_open(&w, max_threads, fn, ctx);
    gc_work_allow(&w, n_items);
    size_t i;
    while (gc_work_take(&w, &i))
        fn(ctx, i);
    gc_work_close(&w); /* every item is taken: this waits for the helpers' last ones */
}

/* Bytes of one gc_parallel_copy item; a copy of at most COPY_ALONE stays on the caller. */
#define COPY_STRIPE ((size_t)1 << 20)
#define COPY_ALONE (2 * COPY_STRIPE)

typedef struct copy_job {
    unsigned char *dst;
    const unsigned char *src;
    size_t len;
} copy_job;

static void copy_stripe(void *ctx, size_t i)
{
    const copy_job *c = ctx;
    size_t off = i * COPY_STRIPE, n = c->len - off < COPY_STRIPE ? c->len - off : COPY_STRIPE;
    memcpy(c->dst + off, c->src + off, n);
}

void gc_parallel_copy(void *dst, const void *src, size_t len, unsigned max_threads)
{
    if (len <= COPY_ALONE) {
        if (len)
            memcpy(dst, src, len);
        return;
    }
    copy_job c = { dst, src, len };
    gc_parallel_for((len + COPY_STRIPE - 1) / COPY_STRIPE, max_threads, copy_stripe, &c);
}
