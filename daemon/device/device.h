/*
 * device.h - what the scheduler needs from an accelerator.
 *
 * One implementation drives a CUDA device (device_gpu.c); another runs the
 * same batches on the CPU engine (device_emulated.c) so that batching,
 * routing and fallback are tested on machines without a GPU.
 */
#ifndef GCD_DEVICE_H
#define GCD_DEVICE_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "request.h"

/* Times for one batch, from CUDA event timestamps on a real device (an emulated one: its codec time as kernel and wall time). */
typedef struct gcd_batch_timing {
    uint64_t h2d_ns;    /* summed host-to-device copy time */
    uint64_t kernel_ns; /* summed kernel time */
    uint64_t d2h_ns;    /* summed device-to-host copy time */
    uint64_t wall_ns;   /* first copy start to last copy end */
} gcd_batch_timing;

typedef struct gcd_device_ops {
    /*
     * Run every request of the batch, setting each one's output and error
     * (a corrupt input fails only its own request). A request the device
     * declines (gcd_device_declines) gets r->device_declined: the scheduler
     * reruns it alone on the CPU engine. Returning GC_E_DEVICE means the
     * device failed: the scheduler reruns the whole batch on the CPU engine
     * and retires the device.
     */
    int (*run_batch)(void *dev, gcd_request **reqs, size_t n, gcd_batch_timing *timing, gc_error *err);
    /* Release the device. */
    void (*close)(void *dev);
} gcd_device_ops;

/*
 * Whether a job's status from the device sends its request back to the CPU
 * engine instead of to its client: the device cannot run the job
 * (GC_E_UNSUPPORTED), or a compressed stream outgrew the output the device
 * had for it (GC_E_LIMIT on a compress: bzip2's gc_gpu_bzip2_encode_cap,
 * rle's chunk over the context's piece size). The CPU engine has no such limits.
 * A codec whose device verdicts are less exact than the CPU engine's
 * (codec.h gpu_reruns_failures: a bzip2 decompress) has every failure rerun.
 * Any other status is the request's answer (a GC_E_LIMIT on an rle
 * decompress is a frame's declared size: final). GC_E_DEVICE is never a
 * job's alone: the whole batch reruns.
 */
static inline bool gcd_device_declines(const gcd_request *r, int status)
{
    if (status == GC_OK || status == GC_E_DEVICE)
        return false;
    const gcd_codec *codec = gcd_codec_find(r->codec);
    if (codec && codec->gpu_reruns_failures && codec->gpu_reruns_failures(r))
        return true;
    return status == GC_E_UNSUPPORTED || (status == GC_E_LIMIT && r->op == GPUCOMP__OP__OP_COMPRESS);
}

typedef struct gcd_device {
    const gcd_device_ops *ops;
    void *impl;
    char name[96];
    unsigned gpu;  /* the GPU this context is of: CUDA device index, or the stand-in's number */
    bool has_cpus; /* run the device's lane threads on cpus: the CPUs near it (affinity.h) */
    cpu_set_t cpus;
} gcd_device;

/*
 * A CPU-backed stand-in: with hand_back, answers every compress job GC_E_LIMIT after
 * allocating its output, as the CUDA backend does for a bzip2 stream that
 * outgrew its buffer, and every job whose output grows (a bzip2 decompress)
 * GC_E_CORRUPT after producing its output, as a device that refuses a stream
 * the CPU engine accepts.
 */
int gcd_device_emulated_open(gcd_device *d, unsigned index, bool hand_back, gc_error *err);

/*
 * Fault injection (device_faulty.c): wrap the opened device d so that its
 * fail_at-th batch (1 = the first) runs and then fails with GC_E_DEVICE, as
 * on a device that failed during it. On failure d is closed.
 */
int gcd_device_fail_at(gcd_device *d, uint64_t fail_at, gc_error *err);

/* Registered buffers report pinned without locking anything (testing aid). */
void gcd_device_emulated_enable_pinning(void);

/* CUDA device `index` (device_gpu.c); GC_E_UNSUPPORTED in builds without CUDA. */
int gcd_device_gpu_open(gcd_device *d, unsigned index, uint64_t batch_bytes, gc_error *err);

/*
 * Let the memfd cache page-lock registered client buffers (OP_REGISTER) for
 * DMA, the one pinning mechanism (docs/DECISIONS.md: page-locking costs far
 * more than one staging copy, so it pays only for buffers a client says it
 * will reuse).
 */
void gcd_device_gpu_enable_pinning(void);

/* Number of usable CUDA devices (0 without CUDA or a driver). */
unsigned gcd_device_gpu_count(void);

#endif
