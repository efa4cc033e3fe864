/*
 * device_gpu.c - a CUDA device behind the scheduler (gpu/gpu.h).
 *
 * Turns a batch of requests into gc_gpu_jobs (output buffers allocated here
 * so they can be the client's mapped memfd), runs them in one pipelined call
 * and copies per-job status back. The codec's part of each job comes from
 * the codec table (codec.h); dispatch.c routes here only what a codec's
 * gpu_takes accepts. A job whose output grows as it is decoded (a bzip2
 * decompress) gets no buffer here: the codec's grow hook makes it (in the
 * client's memfd for an fd request). A job the device declines
 * (GC_E_LIMIT on a compress, GC_E_UNSUPPORTED, any failure of a bzip2
 * decompress: device.h) is marked for the lane to rerun on the CPU, which
 * drops what the device produced first.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "affinity.h"
#include "codec.h"
#include "device.h"
#include "fd_map_cache.h"
#include "gpu.h"
#include "log.h"

unsigned gcd_device_gpu_count(void)
{
    int n = gc_gpu_device_count();
    return n > 0 ? (unsigned)n : 0;
}

/* Size the output of one request; false (with r->error set) if it cannot be run. */
static bool prepare_job(gcd_request *r, gc_gpu_job *job)
{
    job->src = r->input;
    job->src_len = r->total_size;
    job->user = r;
    const gcd_codec *codec = gcd_codec_find(r->codec);
    size_t cap = 0;
    if (!codec || !codec->gpu_job) {
        gc_fail(&r->error, GC_E_INTERNAL, "codec %d has no GPU backend but was routed to one", (int)r->codec);
        return false;
    }
    int rc = codec->gpu_job(r, job, &cap);
    if (rc != GC_OK) {
        r->device_declined = gcd_device_declines(r, rc);
        return false;
    }
    /* An output that grows as it is decoded (job->grow) starts empty: the codec makes it. */
    if (!job->grow && gcd_request_alloc_output(r, cap, &r->error) != GC_OK)
        return false;
    /* Registered client memfds are pinned already; the pipeline then skips its staging copy. */
    if (r->in_map)
        gcd_fd_map_pin(r->in_map);
    if (r->out_map)
        gcd_fd_map_pin(r->out_map);
    job->dst = job->grow ? NULL : r->output;
    job->dst_cap = job->grow ? 0 : cap;
    return true;
}

/* A job's result into its request: its output length, or its failure and whether the CPU reruns it. */
static void take_result(gcd_request *r, gc_gpu_job *job)
{
    r->output_len = job->dst_len;
    if (job->status == GC_OK) {
        const gcd_codec *codec = gcd_codec_find(r->codec);
        if (codec && codec->gpu_finish)
            codec->gpu_finish(r, job); /* its failure (r->error) is the request's answer */
        return;
    }
    r->error = job->err, r->error.code = (gc_status)job->status;
    r->device_declined = gcd_device_declines(r, job->status);
}

static int gpu_run_batch(void *impl, gcd_request **reqs, size_t n, gcd_batch_timing *t, gc_error *err)
{
    gc_gpu_job *jobs = calloc(n, sizeof *jobs);
    if (!jobs)
        return gc_fail(err, GC_E_NOMEM, "out of memory building a batch");
    size_t n_jobs = 0;
    for (size_t i = 0; i < n; i++) {
        gc_error_clear(&reqs[i]->error);
        reqs[i]->device_declined = false;
        if (prepare_job(reqs[i], &jobs[n_jobs]))
            n_jobs++;
    }
    gc_gpu_batch_stats st = { 0 };
    int rc = n_jobs ? gc_gpu_run_batch(impl, jobs, n_jobs, &st, err) : GC_OK;
    for (size_t j = 0; rc == GC_OK && j < n_jobs; j++)
        take_result(jobs[j].user, &jobs[j]);
    free(jobs);
    t->h2d_ns = (uint64_t)(st.h2d_ms * 1e6);
    t->kernel_ns = (uint64_t)(st.kernel_ms * 1e6);
    t->d2h_ns = (uint64_t)(st.d2h_ms * 1e6);
    t->wall_ns = (uint64_t)(st.wall_ms * 1e6);
    return rc;
}

static void gpu_close(void *impl)
{
    gc_gpu_close(impl);
}

static const gcd_device_ops gpu_ops = { gpu_run_batch, gpu_close };

static bool pin_for_dma(void *addr, size_t len, bool read_only)
{
    gc_error err;
    if (gc_gpu_host_register(addr, len, read_only, &err) == GC_OK)
        return true;
    gcd_log(LOG_INFO, "staging instead of pinning a client buffer: %s", err.msg);
    return false;
}

void gcd_device_gpu_enable_pinning(void)
{
    gcd_fd_map_cache_set_pinning(pin_for_dma, gc_gpu_host_unregister);
}

/* The CPUs near the GPU (affinity.h) among those this thread may use: false when that is all of them. */
static bool near_cpus(unsigned index, const char *pci_address, cpu_set_t *near)
{
    cpu_set_t allowed;
    if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0)
        return false;
    int n = gcd_affinity_device_cpus("/sys", pci_address, &allowed, near);
    char list[256];
    gcd_affinity_format(near, list, sizeof list);
    if (gcd_affinity_narrows(n, &allowed)) {
        gcd_log(LOG_INFO, "gpu%u (%s): its lanes run on CPUs %s, the ones near it", index, pci_address, list);
        return true;
    }
    if (n < 0)
        gcd_log(LOG_DEBUG, "gpu%u (%s): no CPU list near it in sysfs: lanes run anywhere", index, pci_address);
    else
        gcd_log(LOG_DEBUG, "gpu%u (%s): CPUs %s of the daemon's are near it: lanes run anywhere", index,
                pci_address, n ? list : "none");
    return false;
}

/*
 * Open the context from the CPUs near the GPU, so that the page-locked
 * staging it allocates is placed on the GPU's node; the thread's own
 * affinity is given back after.
 */
static int open_near(unsigned index, const gc_gpu_config *cfg, gcd_device *d, gc_gpu_ctx **ctx, gc_error *err)
{
    cpu_set_t saved;
    bool moved = d->has_cpus && pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0 &&
                 pthread_setaffinity_np(pthread_self(), sizeof d->cpus, &d->cpus) == 0;
    int rc = gc_gpu_open((int)index, cfg, ctx, err);
    if (moved && pthread_setaffinity_np(pthread_self(), sizeof saved, &saved) != 0)
        gcd_log(LOG_WARNING, "gpu%u: could not restore the thread's CPU affinity", index);
    return rc;
}

int gcd_device_gpu_open(gcd_device *d, unsigned index, uint64_t batch_bytes, gc_error *err)
{
    gc_gpu_info info;
    int rc = gc_gpu_device_info((int)index, &info, err);
    if (rc != GC_OK)
        return rc;
    d->has_cpus = near_cpus(index, info.pci_address, &d->cpus);
    /* The default slots, each piece a quarter of a batch (--batch-bytes): a
     * full batch spans several pieces, so one piece's copies overlap another's
     * kernels within it. */
    gc_gpu_config cfg = { .slots = 0, .piece_bytes = batch_bytes / 4 };
    gc_gpu_ctx *ctx;
    rc = open_near(index, &cfg, d, &ctx, err);
    if (rc != GC_OK)
        return rc;
    d->ops = &gpu_ops;
    d->impl = ctx;
    snprintf(d->name, sizeof d->name, "gpu%u (%.80s)", index, info.name);
    return GC_OK;
}
