/*
 * device_emulated.c - a stand-in device that runs batches on the CPU engine.
 *
 * It exists so the scheduler (batching, routing, device failure and
 * fallback, per-device stats) is exercised by the CI suite on machines with
 * no GPU: `gpucompd --gpu=emulate` or `--gpu=emulate-failing`.
 */
#include <stdio.h>
#include <stdlib.h>

#include "device.h"
#include "engine.h"
#include "fd_map_cache.h"

typedef struct emulated {
    uint64_t batches;
    uint64_t fail_at;
} emulated;

static int emulated_run_batch(void *impl, gcd_request **reqs, size_t n, gcd_batch_timing *t,
                              gc_error *err)
{
    emulated *e = impl;
    if (e->fail_at && ++e->batches >= e->fail_at)
        return gc_fail(err, GC_E_DEVICE, "emulated device failure at batch %llu",
                       (unsigned long long)e->batches);
    for (size_t i = 0; i < n; i++) {
        gc_error_clear(&reqs[i]->error);
        int rc = gcd_engine_compute_cpu(reqs[i], 1);
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

int gcd_device_emulated_open(gcd_device *d, unsigned index, uint64_t fail_at, gc_error *err)
{
    emulated *e = calloc(1, sizeof *e);
    if (!e)
        return gc_fail(err, GC_E_NOMEM, "out of memory");
    e->fail_at = fail_at;
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
