/*
 * device_emulated.c - a stand-in device that runs batches on the CPU engine.
 *
 * It exists so the scheduler (batching, routing, device failure and
 * fallback, per-device stats) is exercised by the CI suite on machines with
 * no GPU: `gpucompd --gpu=emulate`, `--gpu=emulate-failing` or
 * `--gpu=emulate-limit`. Each job goes through its codec's GPU hooks as on a
 * CUDA device (device_gpu.c), so those hooks are exercised in CI too: a
 * bzip2 decompress's output reaches the client through the codec's grow
 * and gpu_finish.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bzip2.h"
#include "codec.h"
#include "device.h"
#include "engine.h"
#include "fd_map_cache.h"
#include "gc_clock.h"
#include "gpu.h"

typedef struct emulated {
    bool hand_back;
} emulated;

/* A status the device itself gives r: a declined one sends r back to the CPU engine (device.h). */
static int device_answer(gcd_request *r, int rc)
{
    r->device_declined = gcd_device_declines(r, rc);
    return rc;
}

/* The emulated device's own memory for a decode's output (a real one fails GC_E_LIMIT beyond its own). */
#define EMULATED_DEVICE_MEMORY ((size_t)1 << 30)

/* The output leaves the emulated device in rounds of this size, each through the job's grow. */
#define EMULATED_OUTPUT_ROUND ((size_t)1 << 20)

static bool within_device_memory(void *ctx, size_t more)
{
    size_t *held = ctx;
    if (more > EMULATED_DEVICE_MEMORY - *held)
        return false;
    *held += more;
    return true;
}

/*
 * The device's decoder for a job whose output grows (gpu.h `grow`): the CPU
 * engine's, into the emulated device's own memory, not the budget, and not
 * bounded by the request's max_output (the job's grow is what enforces it).
 * A failure reads as a device's, less exact than the CPU engine's words.
 */
static int device_decode(gc_gpu_job *job, gcd_request *r, uint8_t **out, size_t *out_len)
{
    if (job->codec != GC_GPU_CODEC_BZIP2 || job->op != GC_GPU_DECODE)
        return gc_fail(&job->err, GC_E_UNSUPPORTED, "emulated device: no decoder with a growing output");
    size_t held = 0;
    gc_job ask = { .cancel = &r->cancelled, .may_grow = within_device_memory, .ctx = &held };
    gc_error why = { 0 };
    int rc;
    if (job->partial) { /* a stream's part, as the CUDA decoder runs it (gpu.h) */
        bz2_dstate ds = job->part;
        ds.out_soft = 0; /* the device has no early stop (gpu.h) */
        rc = bz2_decompress_part(job->src, job->src_len, job->part_more, &ds, 0, 1, &ask, out, out_len,
                                 &job->part_used, &why);
        ds.out_soft = job->part.out_soft;
        job->part = ds;
    } else {
        rc = bz2_decompress_job(job->src, job->src_len, 0, 1, &ask, out, out_len, &why);
    }
    if (rc != GC_OK)
        gc_fail(&job->err, rc, "bzip2: emulated device: the stream failed a check (%s)", gc_status_str(rc));
    return rc;
}

/*
 * A job whose output size is known only once decoded, as the CUDA backend
 * runs it: the decoder works in the device's memory, the output leaves it in
 * rounds, each one first made room for through job->grow (the codec's hook:
 * more than once, with growing lengths), and the codec's gpu_finish moves it
 * where the client expects it. No output is kept from a failed job: the lane
 * drops what grow made. With hand_back the job fails with GC_E_CORRUPT once
 * its output is all there, as a device that refuses what the CPU engine
 * accepts.
 */
static int emulate_grown(const emulated *e, const gcd_codec *codec, gcd_request *r, gc_gpu_job *job)
{
    uint8_t *dev = NULL;
    size_t len = 0;
    int rc = device_decode(job, r, &dev, &len);
    for (size_t done = 0; rc == GC_OK && done < len;) {
        size_t round = len - done < EMULATED_OUTPUT_ROUND ? len - done : EMULATED_OUTPUT_ROUND;
        if (done + round > job->dst_cap)
            rc = job->grow(job, done + round, &job->err);
        if (rc == GC_OK && done + round > job->dst_cap)
            rc = gc_fail(&job->err, GC_E_INTERNAL, "%s: grow left %zu bytes for %zu", codec->name, job->dst_cap,
                         done + round);
        if (rc == GC_OK) {
            memcpy(job->dst + done, dev + done, round);
            done += round;
        }
    }
    free(dev);
    if (rc == GC_OK && e->hand_back)
        rc = gc_fail(&job->err, GC_E_CORRUPT, "%s: emulated device: refused the stream after decoding it",
                     codec->name);
    job->dst_len = rc == GC_OK ? len : 0;
    job->status = rc;
    /* As device_gpu.c takes a job's result. */
    r->output_len = job->dst_len;
    if (rc != GC_OK) {
        r->error = job->err, r->error.code = (gc_status)rc;
        return device_answer(r, rc);
    }
    return codec->gpu_finish ? codec->gpu_finish(r, job) : GC_OK;
}

/*
 * One request as the CUDA backend takes it: the codec's GPU job (codec, op,
 * options, output capacity) first, then the work, here on the CPU engine;
 * its output must fit the job's capacity as a device's must. With
 * hand_back every compress job gets its output and then GC_E_LIMIT, as a
 * bzip2 stream that outgrew gc_gpu_bzip2_encode_cap does. A job whose output
 * grows goes through emulate_grown.
 */
static int emulate_job(const emulated *e, gcd_request *r)
{
    const gcd_codec *codec = gcd_codec_find(r->codec);
    gc_gpu_job job = { .src = r->input, .src_len = r->total_size, .user = r };
    size_t cap = 0;
    if (!codec || !codec->gpu_job)
        return gc_fail(&r->error, GC_E_INTERNAL, "codec %d has no GPU backend but was routed to one",
                       (int)r->codec);
    int rc = codec->gpu_job(r, &job, &cap);
    if (rc != GC_OK)
        return device_answer(r, rc);
    if (job.grow)
        return emulate_grown(e, codec, r, &job);
    if (e->hand_back && job.op == GC_GPU_ENCODE) {
        rc = gcd_request_alloc_output(r, cap, &r->error);
        if (rc != GC_OK)
            return rc;
        return device_answer(r, gc_fail(&r->error, GC_E_LIMIT,
                                        "%s: emulated device: the stream did not fit its %zu-byte output",
                                        codec->name, cap));
    }
    rc = gcd_engine_compute_cpu(r, 1);
    if (rc == GC_OK && r->output_len > cap) {
        size_t len = r->output_len;
        gcd_request_drop_output(r);
        return device_answer(r, gc_fail(&r->error, GC_E_LIMIT,
                                        "%s: emulated device: %zu bytes of output, over the job's %zu",
                                        codec->name, len, cap));
    }
    return rc;
}

static int emulated_run_batch(void *impl, gcd_request **reqs, size_t n, gcd_batch_timing *t, gc_error *err)
{
    (void)err;
    emulated *e = impl;
    uint64_t start = gc_now_ns();
    for (size_t i = 0; i < n; i++) {
        gc_error_clear(&reqs[i]->error);
        reqs[i]->device_declined = false;
        int rc = emulate_job(e, reqs[i]);
        if (rc != GC_OK && reqs[i]->error.code == GC_OK)
            reqs[i]->error.code = (gc_status)rc;
    }
    /* no copies: the batch's time is all codec work, so STATS shows an emulated lane as busy as it was */
    uint64_t spent = gc_now_ns() - start;
    *t = (gcd_batch_timing){ .kernel_ns = spent, .wall_ns = spent };
    return GC_OK;
}

static void emulated_close(void *impl)
{
    free(impl);
}

static const gcd_device_ops emulated_ops = { emulated_run_batch, emulated_close };

int gcd_device_emulated_open(gcd_device *d, unsigned index, bool hand_back, gc_error *err)
{
    emulated *e = calloc(1, sizeof *e);
    if (!e)
        return gc_fail(err, GC_E_NOMEM, "out of memory");
    e->hand_back = hand_back;
    d->ops = &emulated_ops;
    d->impl = e;
    snprintf(d->name, sizeof d->name, "emulated%u", index);
    return GC_OK;
}

/*
 * Emulated page-locking: nothing is locked, but registered buffers report
 * pinned, so the registration paths (the daemon's cache, the library's
 * staging memfds) run in CI as they do on a GPU host.
 */
static bool emulated_pin(void *addr, size_t len, bool read_only)
{
    (void)addr, (void)len, (void)read_only;
    return true;
}

static void emulated_unpin(void *addr)
{
    (void)addr;
}

void gcd_device_emulated_enable_pinning(void)
{
    gcd_fd_map_cache_set_pinning(emulated_pin, emulated_unpin);
}
