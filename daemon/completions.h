/*
 * completions.h - finished requests on their way back to the event loop.
 *
 * The server owns one completion queue. CPU workers and device schedulers
 * push finished requests from their own threads; the loop is woken (an
 * event made active, which libevent's pthread support makes safe) and
 * hands each request to the deliver callback on the loop thread.
 */
#ifndef GCD_COMPLETIONS_H
#define GCD_COMPLETIONS_H

#include <event2/event.h>

#include "request.h"

typedef struct gcd_completions gcd_completions;

typedef void (*gcd_deliver_fn)(gcd_request *r, void *ctx); /* on the loop thread */

/* NULL if out of memory. */
gcd_completions *gcd_completions_new(struct event_base *base, gcd_deliver_fn deliver, void *ctx);

/* A finished request (any thread). */
void gcd_completions_push(gcd_completions *q, gcd_request *r);

/* gcd_completions_push in the shape of the pools' done callbacks (ctx: the queue). */
void gcd_completions_done(gcd_request *r, void *queue);

/* Deliver what is queued now (loop thread; at shutdown, after the producers stopped). */
void gcd_completions_drain(gcd_completions *q);

/* Free the queue (nothing may be queued or pushed any more). */
void gcd_completions_free(gcd_completions *q);

#endif
