/* lane.c - batching scheduler for one device (see lane.h). */
#include "lane.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "fair_queue.h"
#include "gc_clock.h"
#include "log.h"

struct gcd_lane {
    gcd_device dev;
    gcd_lane_config cfg;
    gcd_request_fn complete;
    void *ctx;

    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    gcd_fair_queue queue; /* served by user, then connection */
    gcd_lane_load load;   /* under lock */
    bool stopping;
    gcd_lane_stats stats; /* under lock */
};

/* Wait (lock held) until the queue holds a full batch, the wait expires, or we stop. */
static void wait_for_batch(gcd_lane *b)
{
    while (!b->queue.count && !b->stopping)
        pthread_cond_wait(&b->wake, &b->lock);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + b->cfg.max_wait_us * 1000u;
    deadline.tv_sec += (time_t)(ns / 1000000000u);
    deadline.tv_nsec = (long)(ns % 1000000000u);
    for (;;) {
        if (b->stopping || b->queue.bytes >= b->cfg.max_batch_bytes)
            return;
        if (pthread_cond_timedwait(&b->wake, &b->lock, &deadline) == ETIMEDOUT)
            return;
    }
}

/*
 * Whether a batch of n already holds a part of r's stream. A stream's parts
 * go out in order, so a second one in the same batch only holds the first's
 * output back until both are done; on its own it can run on another lane.
 */
static bool holds_stream_of(gcd_request *const *reqs, size_t n, const gcd_request *r)
{
    for (size_t i = 0; r->stream && i < n; i++)
        if (reqs[i]->stream == r->stream)
            return true;
    return false;
}

/* Take requests off the queue (lock held), in fair order, up to max_batch_bytes and one part
 * of a stream; always at least one. A batch may hold several users' requests: each user's in
 * its turn. *batch_bytes: their input bytes, given back to the load once they complete. */
static size_t take_batch(gcd_lane *b, gcd_request ***out, uint64_t *batch_bytes)
{
    size_t n = 0, cap = 16;
    uint64_t bytes = 0;
    gcd_request **reqs = malloc(cap * sizeof *reqs);
    gcd_request *next;
    while (reqs && (next = gcd_fair_peek(&b->queue)) &&
           (n == 0 || (bytes + next->total_size <= b->cfg.max_batch_bytes && !holds_stream_of(reqs, n, next)))) {
        if (n == cap) {
            gcd_request **grown = realloc(reqs, 2 * cap * sizeof *reqs);
            if (!grown)
                break;
            reqs = grown;
            cap *= 2;
        }
        gcd_request *r = gcd_fair_pop(&b->queue);
        bytes += r->total_size;
        reqs[n++] = r;
    }
    *out = reqs;
    *batch_bytes = bytes;
    return n;
}

static void reset_result(gcd_request *r)
{
    gcd_request_drop_output(r);
    gc_error_clear(&r->error);
    r->device_declined = false;
}

/* The queued requests, off the queue and out of the load (lock held); NULL-terminated list. */
static gcd_request *take_queue(gcd_lane *b)
{
    gcd_request *all = gcd_fair_take_all(&b->queue);
    for (gcd_request *r = all; r; r = r->next) {
        b->load.bytes -= r->total_size;
        b->load.requests--;
    }
    return all;
}

/*
 * The device failed: retire the lane before anything else, so that new work
 * goes elsewhere at once; send what waits in the queue back to the router;
 * then rerun the failed batch on the CPU engine. Not on another device: the
 * batch itself may be what broke this one.
 */
static void fallback_to_cpu(gcd_lane *b, gcd_request **reqs, size_t n, const gc_error *why)
{
    gcd_log(LOG_ERR, "%s failed (%s): retiring it, rerunning %zu request(s) on the CPU", b->dev.name, why->msg, n);
    pthread_mutex_lock(&b->lock);
    b->stats.fallbacks += n;
    b->stats.retired = true;
    gcd_request *waiting = take_queue(b);
    pthread_mutex_unlock(&b->lock);
    while (waiting) {
        gcd_request *r = waiting;
        waiting = r->next;
        r->next = NULL;
        b->cfg.reroute(r, b->cfg.reroute_ctx);
    }
    for (size_t i = 0; i < n; i++) {
        reset_result(reqs[i]);
        gcd_engine_run_cpu(reqs[i], b->cfg.cpu_threads);
    }
    b->dev.ops->close(b->dev.impl);
    b->dev.impl = NULL;
}

/* A batch that ran: n requests served by the device, declined more handed back to the CPU. */
static void account(gcd_lane *b, gcd_request **reqs, size_t n, size_t declined, const gcd_batch_timing *t)
{
    pthread_mutex_lock(&b->lock);
    b->stats.batches++;
    b->stats.requests += n;
    b->stats.fallbacks += declined;
    for (size_t i = 0; i < n; i++) {
        b->stats.bytes_in += reqs[i]->total_size;
        b->stats.bytes_out += reqs[i]->output_len;
    }
    b->stats.h2d_ns += t->h2d_ns;
    b->stats.kernel_ns += t->kernel_ns;
    b->stats.d2h_ns += t->d2h_ns;
    b->stats.wall_ns += t->wall_ns;
    pthread_mutex_unlock(&b->lock);
}

/* Answer at once the requests that must not run (gcd_engine_skip); keep the rest, in order. */
static size_t drop_skipped(gcd_lane *b, gcd_request **reqs, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (gcd_engine_skip(reqs[i]))
            b->complete(reqs[i], b->ctx);
        else
            reqs[kept++] = reqs[i];
    }
    return kept;
}

/* Order reqs with the ones the device served first; returns how many it served. */
static size_t served_first(gcd_request **reqs, size_t n)
{
    size_t served = n;
    for (size_t i = 0; i < served;) {
        if (reqs[i]->device_declined) {
            gcd_request *r = reqs[i];
            reqs[i] = reqs[--served];
            reqs[served] = r;
        } else {
            i++;
        }
    }
    return served;
}

/*
 * A request the device handed back (device.h, gcd_device_declines: a bzip2
 * stream over its buffer, a job it has no kernel for) runs again on the CPU
 * engine as if routed there: the device's output buffer and its charge are
 * given back first. The device stays in service.
 */
static void rerun_declined(gcd_lane *b, gcd_request *r)
{
    gcd_log(LOG_INFO, "%s handed a request back (%s): rerunning it on the CPU engine", b->dev.name, r->error.msg);
    reset_result(r);
    gcd_engine_run_cpu(r, b->cfg.cpu_threads);
}

/* The device's answers into the requests: the served ones go out first, then the declined ones rerun on the CPU. */
static void deliver(gcd_lane *b, gcd_request **reqs, size_t n, uint64_t start, const gcd_batch_timing *timing)
{
    uint64_t per_request = (gc_now_ns() - start) / n;
    size_t served = served_first(reqs, n);
    for (size_t i = 0; i < served; i++) {
        reqs[i]->backend = GPUCOMP__BACKEND__BACKEND_GPU;
        reqs[i]->engine_ns = per_request;
        gcd_engine_finish(reqs[i]);
    }
    account(b, reqs, served, n - served, timing);
    /* The served answers go out first: the reruns take CPU time. */
    for (size_t i = 0; i < served; i++)
        b->complete(reqs[i], b->ctx);
    for (size_t i = served; i < n; i++) {
        rerun_declined(b, reqs[i]);
        b->complete(reqs[i], b->ctx);
    }
}

/* The batch's input is no longer this lane's work: out of the load it is routed by. */
static void release_load(gcd_lane *b, uint64_t bytes, size_t n)
{
    pthread_mutex_lock(&b->lock);
    b->load.bytes -= bytes;
    b->load.requests -= (unsigned)n;
    pthread_mutex_unlock(&b->lock);
}

/*
 * Run the n requests taken (bytes of input). The load is given back once the
 * device is done and before any answer goes out, so a client that has its
 * answer never sees its request still counted in STATS.
 */
static void run_batch(gcd_lane *b, gcd_request **reqs, size_t n, uint64_t bytes)
{
    size_t taken = n;
    n = drop_skipped(b, reqs, n);
    if (n == 0 || b->stats.retired) {
        release_load(b, bytes, taken);
        for (size_t i = 0; i < n; i++) /* routed here as it failed; only this thread sets retired */
            b->cfg.reroute(reqs[i], b->cfg.reroute_ctx);
        return;
    }
    gcd_batch_timing timing = { 0 };
    gc_error err = { 0 };
    uint64_t start = gc_now_ns();
    int rc = b->dev.ops->run_batch(b->dev.impl, reqs, n, &timing, &err);
    release_load(b, bytes, taken);
    gcd_log(LOG_DEBUG, "%s: batch of %zu request(s), %llu bytes in, %.3f ms (h2d %.3f, kernels %.3f, d2h %.3f)",
            b->dev.name, n, (unsigned long long)bytes, (double)(gc_now_ns() - start) / 1e6,
            (double)timing.h2d_ns / 1e6, (double)timing.kernel_ns / 1e6, (double)timing.d2h_ns / 1e6);
    if (rc != GC_E_DEVICE) {
        deliver(b, reqs, n, start, &timing);
        return;
    }
    fallback_to_cpu(b, reqs, n, &err);
    for (size_t i = 0; i < n; i++)
        b->complete(reqs[i], b->ctx);
}

static void *lane_main(void *arg)
{
    gcd_lane *b = arg;
    pthread_setname_np(pthread_self(), "gcd-lane");
    pthread_mutex_lock(&b->lock);
    for (;;) {
        wait_for_batch(b);
        if (!b->queue.count && b->stopping)
            break;
        gcd_request **reqs;
        uint64_t bytes;
        size_t n = take_batch(b, &reqs, &bytes);
        pthread_mutex_unlock(&b->lock);
        if (n)
            run_batch(b, reqs, n, bytes);
        free(reqs);
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

gcd_lane *gcd_lane_start(gcd_device *dev, const gcd_lane_config *cfg, gcd_request_fn complete, void *ctx)
{
    gcd_lane *b = calloc(1, sizeof *b);
    if (!b) {
        dev->ops->close(dev->impl);
        return NULL;
    }
    b->dev = *dev;
    b->cfg = *cfg;
    b->complete = complete;
    b->ctx = ctx;
    gcd_fair_init(&b->queue);
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->wake, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (dev->has_cpus) /* a GPU's lanes run near it (affinity.h) */
        pthread_attr_setaffinity_np(&attr, sizeof dev->cpus, &dev->cpus);
    int rc = pthread_create(&b->thread, &attr, lane_main, b);
    pthread_attr_destroy(&attr);
    if (rc != 0 && dev->has_cpus) /* those CPUs were taken from the daemon meanwhile: run anywhere */
        rc = pthread_create(&b->thread, NULL, lane_main, b);
    if (rc != 0) {
        dev->ops->close(dev->impl);
        pthread_mutex_destroy(&b->lock);
        pthread_cond_destroy(&b->wake);
        free(b);
        return NULL;
    }
    return b;
}

void gcd_lane_submit(gcd_lane *b, gcd_request *r)
{
    pthread_mutex_lock(&b->lock);
    gcd_fair_push(&b->queue, r);
    b->load.bytes += r->total_size;
    b->load.requests++;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->lock);
}

bool gcd_lane_retired(gcd_lane *b)
{
    pthread_mutex_lock(&b->lock);
    bool retired = b->stats.retired;
    pthread_mutex_unlock(&b->lock);
    return retired;
}

bool gcd_lane_accepting(gcd_lane *b)
{
    pthread_mutex_lock(&b->lock);
    bool accepting = !b->stats.retired && !b->stopping;
    pthread_mutex_unlock(&b->lock);
    return accepting;
}

gcd_lane_load gcd_lane_get_load(gcd_lane *b)
{
    pthread_mutex_lock(&b->lock);
    gcd_lane_load load = b->load;
    pthread_mutex_unlock(&b->lock);
    return load;
}

void gcd_lane_get_stats(gcd_lane *b, gcd_lane_stats *out)
{
    pthread_mutex_lock(&b->lock);
    *out = b->stats;
    out->queue_depth = (unsigned)b->queue.count;
    out->in_flight = b->load;
    pthread_mutex_unlock(&b->lock);
}

const char *gcd_lane_name(const gcd_lane *b)
{
    return b->dev.name;
}

unsigned gcd_lane_gpu(const gcd_lane *b)
{
    return b->dev.gpu;
}

void gcd_lane_stop(gcd_lane *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->stopping = true;
    pthread_cond_broadcast(&b->wake);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->thread, NULL);
    if (b->dev.impl)
        b->dev.ops->close(b->dev.impl);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->wake);
    free(b);
}
