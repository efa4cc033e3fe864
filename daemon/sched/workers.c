/* workers.c - the CPU worker pool (see workers.h). */
#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "engine.h"
#include "fair_queue.h"
#include "parallel.h"
#include "log.h"
#include "scratch.h"

struct gcd_workers {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    gcd_fair_queue todo; /* submitted, not started: served by user, then connection */
    bool stopping;
    atomic_uint pending;            /* submitted and not yet handed to done */
    _Atomic uint64_t pending_bytes; /* their input bytes */
    unsigned n_threads, codec_threads;
    pthread_t *threads;
    gcd_request_fn done;
    void *ctx;
};

static void *worker_main(void *arg)
{
    gcd_workers *w = arg;
    pthread_setname_np(pthread_self(), "gcd-worker");
    pthread_mutex_lock(&w->lock);
    for (;;) {
        gcd_request *r = gcd_fair_pop(&w->todo);
        if (!r) {
            if (w->stopping)
                break;
            if (gc_scratch_held()) { /* a request it ran on its own thread (scratch.h): idle now */
                pthread_mutex_unlock(&w->lock);
                gc_scratch_release();
                pthread_mutex_lock(&w->lock);
                continue;
            }
            pthread_cond_wait(&w->wake, &w->lock);
            continue;
        }
        pthread_mutex_unlock(&w->lock);
        uint64_t bytes = r->total_size; /* as counted at submit: nothing touches a queued request */
        gcd_engine_run_cpu(r, w->codec_threads);
        atomic_fetch_sub(&w->pending_bytes, bytes);
        atomic_fetch_sub(&w->pending, 1);
        w->done(r, w->ctx);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

gcd_workers *gcd_workers_start(unsigned n, unsigned codec_threads, gcd_request_fn done, void *ctx)
{
    gcd_workers *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->codec_threads = codec_threads;
    w->done = done;
    w->ctx = ctx;
    gcd_fair_init(&w->todo);
    atomic_init(&w->pending, 0);
    atomic_init(&w->pending_bytes, 0);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    w->threads = calloc(n ? n : 1, sizeof *w->threads);
    if (!w->threads) {
        gcd_workers_stop(w);
        return NULL;
    }
    for (unsigned i = 0; i < (n ? n : 1); i++) {
        if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0)
            break;
        w->n_threads++;
    }
    if (w->n_threads == 0) {
        gcd_log(LOG_ERR, "cannot start any worker thread");
        gcd_workers_stop(w);
        return NULL;
    }
    return w;
}

void gcd_workers_submit(gcd_workers *w, gcd_request *r)
{
    atomic_fetch_add(&w->pending, 1);
    atomic_fetch_add(&w->pending_bytes, r->total_size);
    pthread_mutex_lock(&w->lock);
    gcd_fair_push(&w->todo, r);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

unsigned gcd_workers_pending(const gcd_workers *w)
{
    return atomic_load(&((gcd_workers *)w)->pending);
}

unsigned gcd_workers_threads(const gcd_workers *w)
{
    return w->n_threads;
}

uint64_t gcd_workers_pending_bytes(const gcd_workers *w)
{
    return atomic_load(&((gcd_workers *)w)->pending_bytes);
}

unsigned gcd_workers_cpus(const gcd_workers *w)
{
    unsigned cpus = gc_cpu_count();
    return w->codec_threads && w->codec_threads < cpus ? w->codec_threads : cpus;
}

void gcd_workers_stop(gcd_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < w->n_threads; i++)
        pthread_join(w->threads[i], NULL);
    free(w->threads);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
