/* completions.c - the completion queue (see completions.h). */
#include "completions.h"

#include <pthread.h>
#include <stdlib.h>

#include "request_queue.h"

struct gcd_completions {
    pthread_mutex_t lock;
    gcd_request_queue done;
    gcd_request *announced; /* progress_next-linked, newest first */
    struct event *wake;
    gcd_request_fn deliver, progress;
    void *ctx;
};

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    gcd_completions_drain(arg);
}

gcd_completions *gcd_completions_new(struct event_base *base, gcd_request_fn deliver, gcd_request_fn progress,
                                     void *ctx)
{
    gcd_completions *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->wake = event_new(base, -1, 0, on_wake, q);
    if (!q->wake) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    q->deliver = deliver;
    q->progress = progress;
    q->ctx = ctx;
    return q;
}

void gcd_completions_push(gcd_completions *q, gcd_request *r)
{
    pthread_mutex_lock(&q->lock);
    gcd_queue_push(&q->done, r);
    event_active(q->wake, EV_READ, 0);
    pthread_mutex_unlock(&q->lock);
}

void gcd_completions_done(gcd_request *r, void *queue)
{
    gcd_completions_push(queue, r);
}

void gcd_completions_announce(gcd_request *r, size_t final)
{
    gcd_completions *q = r->progress_to;
    atomic_store_explicit(&r->output_final, final, memory_order_release);
    if (!q || !q->progress)
        return;
    pthread_mutex_lock(&q->lock);
    if (!r->progress_queued) { /* one entry says it all: the loop reads output_final when it comes */
        r->progress_queued = true;
        r->progress_next = q->announced;
        q->announced = r;
        event_active(q->wake, EV_READ, 0);
    }
    pthread_mutex_unlock(&q->lock);
}

void gcd_completions_drain(gcd_completions *q)
{
    pthread_mutex_lock(&q->lock);
    gcd_request *a = q->announced;
    q->announced = NULL;
    gcd_request *r = gcd_queue_take_all(&q->done);
    pthread_mutex_unlock(&q->lock);
    /* Announcements first: a request may be among the finished ones. Each is
     * unlinked under the lock, as its engine may announce it again meanwhile
     * (into the next drain: a finished request announces nothing more). */
    while (a) {
        pthread_mutex_lock(&q->lock);
        gcd_request *next = a->progress_next;
        a->progress_next = NULL;
        a->progress_queued = false;
        pthread_mutex_unlock(&q->lock);
        q->progress(a, q->ctx);
        a = next;
    }
    while (r) {
        gcd_request *next = r->next;
        r->next = NULL;
        q->deliver(r, q->ctx);
        r = next;
    }
}

void gcd_completions_free(gcd_completions *q)
{
    if (!q)
        return;
    event_free(q->wake);
    pthread_mutex_destroy(&q->lock);
    free(q);
}
