/*
 * completions.h - finished requests on their way back to the event loop.
 *
 * The server owns one completion queue. CPU workers and device schedulers
 * push finished requests from their own threads; the loop is woken (an
 * event made active, which libevent's pthread support makes safe) and
 * hands each request to the deliver callback on the loop thread.
 *
 * An engine may also announce that more of a running request's output is
 * final (gcd_completions_announce): the loop hands the request to the
 * progress callback while the engine goes on. A drain hands out every
 * announcement it takes before any finished request, so a request is
 * never announced after it was delivered (and freed).
 */
#ifndef GCD_COMPLETIONS_H
#define GCD_COMPLETIONS_H

#include <event2/event.h>

#include "request.h"

typedef struct gcd_completions gcd_completions;

/* deliver and progress are called on the loop thread. NULL if out of memory.
 * progress may be NULL: announcements are then dropped. */
gcd_completions *gcd_completions_new(struct event_base *base, gcd_request_fn deliver, gcd_request_fn progress,
                                     void *ctx);

/* The first `final` bytes of r's output are final (the engine's thread; r->progress_to is the queue). */
void gcd_completions_announce(gcd_request *r, size_t final);

/* A finished request (any thread). */
void gcd_completions_push(gcd_completions *q, gcd_request *r);

/* gcd_completions_push in the shape of the pools' done callbacks (ctx: the queue). */
void gcd_completions_done(gcd_request *r, void *queue);

/* Deliver what is queued now (loop thread; at shutdown, after the producers stopped). */
void gcd_completions_drain(gcd_completions *q);

/* Free the queue (nothing may be queued or pushed any more). */
void gcd_completions_free(gcd_completions *q);

#endif
