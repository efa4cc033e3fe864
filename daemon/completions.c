/* completions.c - the completion queue (see completions.h). */
#include "completions.h"

#include <pthread.h>
#include <stdlib.h>

#include "request_queue.h"

struct gcd_completions {
    pthread_mutex_t lock;
    gcd_request_queue done;
    struct event *wake;
    gcd_deliver_fn deliver;
    void *ctx;
};

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    gcd_completions_drain(arg);
}

gcd_completions *gcd_completions_new(struct event_base *base, gcd_deliver_fn deliver, void *ctx)
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

void gcd_completions_drain(gcd_completions *q)
{
    pthread_mutex_lock(&q->lock);
    gcd_request *r = gcd_queue_take_all(&q->done);
    pthread_mutex_unlock(&q->lock);
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
