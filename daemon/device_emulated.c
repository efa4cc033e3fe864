/*
 * device_emulated.c - a stand-in device that runs batches on the CPU engine.
 *
 * It exists so the scheduler (batching, routing, device failure and
 * fallback, per-device stats) is exercised by the CI suite on machines with
 * no GPU: `gpucompd --gpu=emulate`, `--gpu=emulate-failing` or
 * `--gpu=emulate-limit`. Each job goes through its codec's GPU hooks as on a
 * CUDA device (device_gpu.c), so those hooks are exercised in CI too.
 */
#include <stdio.h>
#include <stdlib.h>

#include "codec.h"
#include "device.h"
#include "engine.h"
#include "fd_map_cache.h"
#include "fd_payload.h"
#include "gpu.h"

typedef struct emulated {
    uint64_t batches;
    uint64_t fail_at;
    bool limit_compress;
} emulated;

/* A status the device itself gives r: a declined one sends r back to the CPU engine (device.h). */
static int device_answer(gcd_request *r, int rc)
{
    r->device_declined = gcd_device_declines(r, rc);
    return rc;
}

/*
 * One request as the CUDA backend takes it: the codec's GPU job (codec, op,
 * options, output capacity) first, then the work, here on the CPU engine;
 * its output must fit the job's capacity as a device's must. With
 * limit_compress every compress job gets its output and then GC_E_LIMIT,
 * as a bzip2 stream that outgrew gc_gpu_bzip2_encode_cap does.
 */
static int emulate_job(const emulated *e, gcd_request *r)
{
    const gcd_codec *codec = gcd_codec_find(r->codec);
    gc_gpu_job job = { 0 };
    size_t cap = 0;
    if (!codec || !codec->gpu_job)
        return gc_fail(&r->error, GC_E_INTERNAL, "codec %d has no GPU backend but was routed to one",
                       (int)r->codec);
    int rc = codec->gpu_job(r, &job, &cap);
    if (rc != GC_OK)
        return device_answer(r, rc);
    if (e->limit_compress && job.op == GC_GPU_ENCODE) {
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

static int emulated_run_batch(void *impl, gcd_request **reqs, size_t n, gcd_batch_timing *t,
                              gc_error *err)
{
    emulated *e = impl;
    if (e->fail_at && ++e->batches >= e->fail_at)
        return gc_fail(err, GC_E_DEVICE, "emulated device failure at batch %llu",
                       (unsigned long long)e->batches);
    for (size_t i = 0; i < n; i++) {
        gc_error_clear(&reqs[i]->error);
        reqs[i]->device_declined = false;
        int rc = emulate_job(e, reqs[i]);
        if (rc != GC_OK && reqs[i]->error.code == GC_OK)
            reqs[i]->error.code = (gc_status)rc;
    }
    *t = (gcd_batch_timing){ 0 };
    return GC_OK;
}

static void emulated_close(void *impl)
{
    free(impl);
}

static const gcd_device_ops emulated_ops = { emulated_run_batch, emulated_close };

int gcd_device_emulated_open(gcd_device *d, unsigned index, uint64_t fail_at, bool limit_compress,
                             gc_error *err)
{
    emulated *e = calloc(1, sizeof *e);
    if (!e)
        return gc_fail(err, GC_E_NOMEM, "out of memory");
    e->fail_at = fail_at;
    e->limit_compress = limit_compress;
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
