/* workers.c - the CPU worker pool (see workers.h). */
#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "log.h"

/* A FIFO of requests linked through request->next. */
typedef struct request_queue {
    gcd_request *head, *tail;
} request_queue;

struct gcd_workers {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    request_queue todo;       /* submitted, not started */
    request_queue done;       /* finished, not yet delivered to the loop */
    bool stopping;
    atomic_uint pending;      /* submitted and not yet delivered */
    unsigned n_threads;
    pthread_t *threads;
    struct event *done_event; /* made active by workers, runs on the loop */
    gcd_run_fn run;
    gcd_done_fn deliver;
    void *ctx;
};

static void queue_push(request_queue *q, gcd_request *r)
{
    r->next = NULL;
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
}

static gcd_request *queue_take_all(request_queue *q)
{
    gcd_request *all = q->head;
    q->head = q->tail = NULL;
    return all;
}

static gcd_request *queue_pop(request_queue *q)
{
    gcd_request *r = q->head;
    if (r) {
        q->head = r->next;
        if (!q->head)
            q->tail = NULL;
        r->next = NULL;
    }
    return r;
}

static void *worker_main(void *arg)
{
    gcd_workers *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        gcd_request *r = queue_pop(&w->todo);
        if (!r) {
            if (w->stopping)
                break;
            pthread_cond_wait(&w->wake, &w->lock);
            continue;
        }
        pthread_mutex_unlock(&w->lock);
        w->run(r, w->ctx);
        pthread_mutex_lock(&w->lock);
        queue_push(&w->done, r);
        event_active(w->done_event, EV_READ, 0);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void deliver_completed(evutil_socket_t fd, short what, void *arg)
{
    gcd_workers *w = arg;
    pthread_mutex_lock(&w->lock);
    gcd_request *r = queue_take_all(&w->done);
    pthread_mutex_unlock(&w->lock);
    while (r) {
        gcd_request *next = r->next;
        r->next = NULL;
        atomic_fetch_sub(&w->pending, 1);
        w->deliver(r, w->ctx);
        r = next;
    }
}

gcd_workers *gcd_workers_start(struct event_base *base, unsigned n,
                               gcd_run_fn run, gcd_done_fn done, void *ctx)
{
    gcd_workers *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->run = run;
    w->deliver = done;
    w->ctx = ctx;
    atomic_init(&w->pending, 0);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    w->done_event = event_new(base, -1, 0, deliver_completed, w);
    w->threads = calloc(n ? n : 1, sizeof *w->threads);
    if (!w->done_event || !w->threads) {
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
    pthread_mutex_lock(&w->lock);
    queue_push(&w->todo, r);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

void gcd_workers_complete(gcd_workers *w, gcd_request *r)
{
    atomic_fetch_add(&w->pending, 1); /* taken off again when delivered */
    pthread_mutex_lock(&w->lock);
    queue_push(&w->done, r);
    event_active(w->done_event, EV_READ, 0);
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
    if (w->done_event)
        deliver_completed(-1, 0, w);
    free(w->threads);
    if (w->done_event)
        event_free(w->done_event);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
