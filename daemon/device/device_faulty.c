/*
 * device_faulty.c - fault injection: a wrapper that makes any device, a CUDA
 * one included, fail one batch with GC_E_DEVICE (gpucompd --fail-device).
 *
 * A real device failure (an Xid, a lost context) cannot be caused on demand,
 * yet the path it takes (the batch rerun on the CPU engine, the lane retired,
 * the other devices serving on) is the one a multi-GPU host depends on. The
 * failing batch runs on the device first and its results are then thrown
 * away, as when a failure surfaces at the batch's end: the work queued
 * behind it meanwhile is what a real failure leaves to be moved elsewhere.
 */
#include <stdlib.h>

#include "device.h"

typedef struct faulty {
    gcd_device inner;
    uint64_t batches;
    uint64_t fail_at;
} faulty;

static int faulty_run_batch(void *impl, gcd_request **reqs, size_t n, gcd_batch_timing *t, gc_error *err)
{
    faulty *f = impl;
    int rc = f->inner.ops->run_batch(f->inner.impl, reqs, n, t, err);
    if (++f->batches >= f->fail_at && rc == GC_OK)
        rc = gc_fail(err, GC_E_DEVICE, "injected device failure at batch %llu (--fail-device)",
                     (unsigned long long)f->batches);
    return rc;
}

static void faulty_close(void *impl)
{
    faulty *f = impl;
    f->inner.ops->close(f->inner.impl);
    free(f);
}

static const gcd_device_ops faulty_ops = { faulty_run_batch, faulty_close };

int gcd_device_fail_at(gcd_device *d, uint64_t fail_at, gc_error *err)
{
    faulty *f = calloc(1, sizeof *f);
    if (!f) {
        d->ops->close(d->impl);
        d->impl = NULL;
        return gc_fail(err, GC_E_NOMEM, "out of memory");
    }
    f->inner = *d;
    f->fail_at = fail_at ? fail_at : 1;
    d->ops = &faulty_ops;
    d->impl = f;
    return GC_OK;
}
