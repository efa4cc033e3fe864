/*
 * batcher.h - the scheduler in front of one device.
 *
 * Requests routed to a device wait in its queue; its thread takes them as a
 * batch (up to max_batch_bytes, waiting at most max_wait_us for a batch to
 * fill once the first request is there), runs the batch on the device and
 * hands every request back through the completion callback. A device
 * failure reruns the batch on the CPU engine and retires the device: no
 * request fails because of it.
 */
#ifndef GCD_BATCHER_H
#define GCD_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "request.h"

typedef struct gcd_batcher gcd_batcher;

typedef struct gcd_batcher_config {
    uint64_t max_batch_bytes;
    uint64_t max_wait_us;
    unsigned cpu_threads;   /* codec threads for the CPU fallback */
} gcd_batcher_config;

/* Counters for STATS (a consistent snapshot). */
typedef struct gcd_batcher_stats {
    uint64_t batches;
    uint64_t requests;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t h2d_ns, kernel_ns, d2h_ns, wall_ns;
    uint64_t fallbacks;     /* requests rerun on the CPU after a device failure */
    unsigned queue_depth;
    bool retired;
} gcd_batcher_stats;

/* Called on the batcher thread for each finished request. */
typedef void (*gcd_complete_fn)(gcd_request *r, void *ctx);

/* Start the thread; takes ownership of dev. NULL on failure (dev closed). */
gcd_batcher *gcd_batcher_start(gcd_device *dev, const gcd_batcher_config *cfg,
                               gcd_complete_fn complete, void *ctx);

/* Queue a request (any thread). */
void gcd_batcher_submit(gcd_batcher *b, gcd_request *r);

/* True once the device failed; route new work elsewhere. */
bool gcd_batcher_retired(gcd_batcher *b);

unsigned gcd_batcher_queue_depth(gcd_batcher *b);
void gcd_batcher_get_stats(gcd_batcher *b, gcd_batcher_stats *out);
const char *gcd_batcher_name(const gcd_batcher *b);

/* Finish queued work, stop the thread, close the device. */
void gcd_batcher_stop(gcd_batcher *b);

#endif
