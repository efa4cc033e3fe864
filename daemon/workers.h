/*
 * workers.h - the CPU worker pool: codec work never runs on the event loop.
 *
 * The loop submits requests; a worker thread runs them through the engine
 * and queues them as completed; the loop is woken (an event made active from
 * the worker, which libevent's pthread support makes safe) and hands each
 * completed request to the done callback on the loop thread.
 */
#ifndef GCD_WORKERS_H
#define GCD_WORKERS_H

#include <event2/event.h>

#include "request.h"

typedef struct gcd_workers gcd_workers;

typedef void (*gcd_run_fn)(gcd_request *r, void *ctx);   /* on a worker thread */
typedef void (*gcd_done_fn)(gcd_request *r, void *ctx);  /* on the loop thread */

/* Start n threads (at least 1). NULL if nothing could be started. */
gcd_workers *gcd_workers_start(struct event_base *base, unsigned n,
                               gcd_run_fn run, gcd_done_fn done, void *ctx);

/* Queue a request (loop thread). */
void gcd_workers_submit(gcd_workers *w, gcd_request *r);

/*
 * Hand a request finished elsewhere (a device scheduler thread) to the loop
 * through the same completion queue. Any thread.
 */
void gcd_workers_complete(gcd_workers *w, gcd_request *r);

/* Requests queued or running. */
unsigned gcd_workers_pending(const gcd_workers *w);
unsigned gcd_workers_threads(const gcd_workers *w);

/*
 * Stop: queued requests still run, then the threads exit and are joined.
 * Completed requests not yet delivered are handed to done first.
 */
void gcd_workers_stop(gcd_workers *w);

#endif
