/*
 * workers.h - the CPU worker pool: codec work never runs on the event loop.
 *
 * The loop submits requests, and so does a retired lane handing back work
 * it never ran (dispatch.c reroute, on that lane's thread): the queue is
 * locked. A worker thread runs each through the CPU engine (engine.h; a part
 * may announce its output as it goes, completions.h) and hands it to the
 * done callback, from the worker thread (the server passes them to its
 * completion queue). A worker gives its stage buffers back when it finds
 * its queue empty (scratch.h).
 * A free worker takes the next request in fair order (fair_queue.h): of the
 * user served the fewest bytes, then of that user's connection served the
 * fewest, so one user's flood does not hold back the others.
 */
#ifndef GCD_WORKERS_H
#define GCD_WORKERS_H

#include "request.h"

typedef struct gcd_workers gcd_workers;

/* Start n threads (at least 1), each codec call using codec_threads; done is
 * called on the worker thread for each finished request. NULL if none could start. */
gcd_workers *gcd_workers_start(unsigned n, unsigned codec_threads, gcd_request_fn done, void *ctx);

/* Queue a request (loop thread). */
void gcd_workers_submit(gcd_workers *w, gcd_request *r);

/* Requests queued or running, and their input bytes. */
unsigned gcd_workers_pending(const gcd_workers *w);
uint64_t gcd_workers_pending_bytes(const gcd_workers *w);
unsigned gcd_workers_threads(const gcd_workers *w);
/* The CPUs its requests' codec calls share (--codec-threads, at most the host's). */
unsigned gcd_workers_cpus(const gcd_workers *w);

/* Stop: queued requests still run and are handed to done, then the threads are joined. */
void gcd_workers_stop(gcd_workers *w);

#endif
