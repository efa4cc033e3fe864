/*
 * request_queue.h - a FIFO of requests linked through request->next: the
 * completions' queue, and each connection's flow in the fair queue that the
 * worker pool and the lanes serve from (fair_queue.h). Not locked: its owner
 * holds its own lock.
 */
#ifndef GCD_REQUEST_QUEUE_H
#define GCD_REQUEST_QUEUE_H

#include <stddef.h>

#include "request.h"

typedef struct gcd_request_queue {
    gcd_request *head, *tail;
} gcd_request_queue;

static inline void gcd_queue_push(gcd_request_queue *q, gcd_request *r)
{
    r->next = NULL;
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
}

static inline gcd_request *gcd_queue_pop(gcd_request_queue *q)
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

/* Everything queued, as a list through ->next; the queue is left empty. */
static inline gcd_request *gcd_queue_take_all(gcd_request_queue *q)
{
    gcd_request *all = q->head;
    q->head = q->tail = NULL;
    return all;
}

#endif
