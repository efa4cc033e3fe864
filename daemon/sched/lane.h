/*
 * lane.h - a lane: one scheduler thread with its own opened device context
 * (docs/ARCHITECTURE.md, "Vocabulary"); a GPU has --device-lanes of them.
 *
 * Requests routed to a lane wait in its queue, served fairly by user, then
 * by connection (fair_queue.h); its thread takes them as a batch, in that
 * order (up to max_batch_bytes, waiting at most max_wait_us for a batch to
 * fill once the first request is there), runs the batch on its device and
 * hands every request back through the completion callback. A device
 * failure retires the lane and reruns the batch on the CPU engine (the
 * batch may be what broke the device: it is not tried on another one); the
 * requests still waiting in the lane go back to the router (cfg.reroute),
 * to lanes in service. No request fails because of it. A job the device declines (device.h: a
 * compressed stream over its buffer, an operation it has no kernel for)
 * reruns alone on the CPU engine; the lane stays in service.
 */
#ifndef GCD_LANE_H
#define GCD_LANE_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "request.h"

typedef struct gcd_lane gcd_lane;

typedef struct gcd_lane_config {
    uint64_t max_batch_bytes;
    uint64_t max_wait_us;
    unsigned cpu_threads;   /* codec threads for the CPU fallback */
    gcd_request_fn reroute; /* where a retired lane's unrun requests go, on the lane's thread (required) */
    void *reroute_ctx;
} gcd_lane_config;

/* A lane's load: requests and their input bytes submitted and not yet
 * completed (queued or in the running batch). */
typedef struct gcd_lane_load {
    uint64_t bytes;
    unsigned requests;
} gcd_lane_load;

/* Counters for STATS (a consistent snapshot). */
typedef struct gcd_lane_stats {
    uint64_t batches;
    uint64_t requests;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t h2d_ns, kernel_ns, d2h_ns, wall_ns;
    uint64_t fallbacks; /* requests rerun on the CPU: a device failure, or a job it declined */
    unsigned queue_depth;
    gcd_lane_load in_flight; /* the load it is routed by (gcd_lane_get_load) */
    bool retired;
} gcd_lane_stats;

/* Start the thread; takes ownership of dev; complete is called on the lane
 * thread for each finished request. NULL on failure (dev closed). */
gcd_lane *gcd_lane_start(gcd_device *dev, const gcd_lane_config *cfg, gcd_request_fn complete, void *ctx);

/* Queue a request (any thread). */
void gcd_lane_submit(gcd_lane *b, gcd_request *r);

/* True once the device failed; route new work elsewhere. */
bool gcd_lane_retired(gcd_lane *b);

/* Whether new work may be queued here: in service, and not being stopped. */
bool gcd_lane_accepting(gcd_lane *b);

gcd_lane_load gcd_lane_get_load(gcd_lane *b);
void gcd_lane_get_stats(gcd_lane *b, gcd_lane_stats *out);
const char *gcd_lane_name(const gcd_lane *b);
unsigned gcd_lane_gpu(const gcd_lane *b); /* the GPU the lane's context is of (gcd_device.gpu) */

/* Finish queued work, stop the thread, close the device. */
void gcd_lane_stop(gcd_lane *b);

#endif
