/* dispatch.c - routing between the CPU pool and device schedulers (see dispatch.h). */
#include "dispatch.h"

#include <stdio.h>
#include <string.h>

#include "batcher.h"
#include "rle.h"
#include "log.h"

/* Completion from a batcher thread: hand back through the worker pool's queue. */
static void device_done(gcd_request *r, void *server)
{
    gcd_server *s = server;
    gcd_workers_complete(s->workers, r);
}

static bool open_device(gcd_server *s, unsigned index, unsigned lane, gcd_device *dev)
{
    gc_error err = { 0 };
    int rc;
    switch (s->cfg.gpu) {
    case GCD_GPU_EMULATE:
        rc = gcd_device_emulated_open(dev, index, 0, &err);
        break;
    case GCD_GPU_EMULATE_FAILING:
        rc = gcd_device_emulated_open(dev, index, 2, &err); /* the second batch fails */
        break;
    default:
        rc = gcd_device_gpu_open(dev, index, s->cfg.batch_bytes, &err);
        break;
    }
    if (rc != GC_OK)
        gcd_log(LOG_WARNING, "device %u unusable, serving its share on the CPU: %s", index, err.msg);
    if (rc == GC_OK && s->cfg.device_lanes > 1) { /* name the lane: "gpu0 (...)" -> "gpu0.1 (...)" */
        char named[sizeof dev->name];
        const char *space = strchr(dev->name, ' ');
        int head = space ? (int)(space - dev->name) : (int)strlen(dev->name);
        snprintf(named, sizeof named, "%.*s.%u%s", head, dev->name, lane, space ? space : "");
        memcpy(dev->name, named, sizeof named);
    }
    return rc == GC_OK;
}

bool gcd_dispatch_init(gcd_server *s)
{
    unsigned wanted = 0;
    if (s->cfg.gpu == GCD_GPU_AUTO)
        wanted = gcd_device_gpu_count();
    else if (s->cfg.gpu == GCD_GPU_EMULATE || s->cfg.gpu == GCD_GPU_EMULATE_FAILING)
        wanted = 1;
    if (wanted > GCD_MAX_DEVICES)
        wanted = GCD_MAX_DEVICES;
    gcd_batcher_config bc = { s->cfg.batch_bytes, s->cfg.batch_wait_us, s->cfg.codec_threads };
    /* Several lanes per device (each its own context: streams, staging, thread) let
     * batch k+1 be staged while batch k is on the device. */
    for (unsigned k = 0; k < wanted * s->cfg.device_lanes && s->n_devices < GCD_MAX_DEVICES; k++) {
        unsigned i = k / s->cfg.device_lanes, lane = k % s->cfg.device_lanes;
        gcd_device dev = { 0 };
        if (!open_device(s, i, lane, &dev))
            continue;
        gcd_batcher *b = gcd_batcher_start(&dev, &bc, device_done, s);
        if (b) {
            s->devices[s->n_devices++] = b;
            gcd_log(LOG_INFO, "device %s ready", gcd_batcher_name(b));
        }
    }
    if (s->cfg.gpu == GCD_GPU_AUTO && s->n_devices > 0)
        gcd_device_gpu_enable_pinning(s->cfg.pin_client_buffers);
    else if (s->n_devices > 0)
        gcd_device_emulated_enable_pinning();
    if (s->cfg.gpu == GCD_GPU_AUTO && s->n_devices == 0)
        gcd_log(LOG_INFO, "no usable GPU: every request runs on the CPU engine");
    return true;
}

static gcd_batcher *least_loaded_device(gcd_server *s)
{
    gcd_batcher *best = NULL;
    unsigned best_depth = 0;
    for (unsigned i = 0; i < s->n_devices; i++) {
        if (gcd_batcher_retired(s->devices[i]))
            continue;
        unsigned depth = gcd_batcher_queue_depth(s->devices[i]);
        if (!best || depth < best_depth) {
            best = s->devices[i];
            best_depth = depth;
        }
    }
    return best;
}

/*
 * Bytes of data the request moves: its input, or for an rle decompress the
 * original size its header declares (the output dominates there). The header
 * is only peeked at; the engine validates it.
 */
static uint64_t work_bytes(const gcd_request *r)
{
    uint64_t bytes = r->total_size;
    if (r->codec == GPUCOMP__CODEC__CODEC_RLE && r->op == GPUCOMP__OP__OP_DECOMPRESS &&
        r->total_size >= RLE_HEADER_FIXED && r->input) {
        uint64_t declared = 0;
        for (int i = 7; i >= 0; i--)
            declared = declared << 8 | r->input[12 + i]; /* original_size, docs/FORMAT.md */
        if (declared > bytes)
            bytes = declared;
    }
    return bytes;
}

void gcd_dispatch_submit(gcd_server *s, gcd_request *r)
{
    s->requests_in_flight++;
    bool device_worthy = !gcd_request_is_registration(r) && r->codec == GPUCOMP__CODEC__CODEC_RLE &&
                         work_bytes(r) >= s->cfg.gpu_min_bytes;
    gcd_batcher *dev = device_worthy ? least_loaded_device(s) : NULL;
    if (dev)
        gcd_batcher_submit(dev, r);
    else
        gcd_workers_submit(s->workers, r);
}

void gcd_dispatch_stop(gcd_server *s)
{
    for (unsigned i = 0; i < s->n_devices; i++)
        gcd_batcher_stop(s->devices[i]);
    s->n_devices = 0;
}

const char *gcd_dispatch_backend(const gcd_server *s)
{
    for (unsigned i = 0; i < s->n_devices; i++)
        if (!gcd_batcher_retired(s->devices[i]))
            return "gpu";
    return "cpu";
}
