/*
 * engine.h - one request through its codec: the checks before a request is
 * admitted (loop thread), the CPU run (worker threads and a failed lane's
 * fallback), and the finish whichever backend ran it. Routing is dispatch.h.
 */
#ifndef GCD_ENGINE_H
#define GCD_ENGINE_H

#include "request.h"

/* Run r's operation on the CPU engine: r->error, r->output, r->backend, r->engine_ns. */
void gcd_engine_run_cpu(gcd_request *r, unsigned threads);

/* Only the codec work, no timing or clean-up: for devices that emulate a GPU on the CPU. */
int gcd_engine_compute_cpu(gcd_request *r, unsigned threads);

/* After any backend ran r: complete the error message and release the input. */
void gcd_engine_finish(gcd_request *r);

/*
 * True if r must not run: its client has gone (r->cancelled), or its user's
 * share of the memory budget is full (answers it does not read). r is then
 * finished with an error. Workers and devices ask before starting a request.
 */
bool gcd_engine_skip(gcd_request *r);

/* Validate op/codec/options before any payload is accepted (loop thread). */
int gcd_engine_check(const gcd_request *r, gc_error *err);

#endif
