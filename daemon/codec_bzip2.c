/* codec_bzip2.c - the bzip2 codec's entry in the codec table (docs/BZIP2.md). */
#include "codec.h"

#include <stdlib.h>
#include <string.h>

#include "bzip2.h"
#include "fd_payload.h"
#include "gpu.h"
#include "settings.h"

static int check(const gcd_request *r, gc_error *err)
{
    if (r->level > 9)
        return gc_fail(err, GC_E_INVALID, "bzip2 level %u out of range 1..9", r->level);
    return GC_OK;
}

static uint64_t work_bytes(const gcd_request *r)
{
    return r->total_size;
}

/* The decoder asks before its output buffer grows: growth is charged to the request. */
static bool charge_growth(void *ctx, size_t more)
{
    gcd_request *r = ctx;
    gc_error ignored;
    if (gcd_request_charge(r, more, "output", &ignored) != GC_OK)
        return false;
    r->output_charge += more;
    return true;
}

/* Compress into a buffer of the codec's own, charged once it exists (not run if it cannot be). */
static int compress(gcd_request *r, unsigned threads, const gc_job *job, uint8_t **out, size_t *out_len)
{
    bz2_options opt = { .level = (int)r->level, .threads = threads, .job = job };
    int rc = bz2_compress(r->input, r->total_size, &opt, out, out_len, &r->error);
    if (rc == GC_OK && r->out_fd < 0) {
        rc = gcd_request_charge(r, *out_len, "output", &r->error);
        if (rc == GC_OK)
            r->output_charge += *out_len;
    }
    return rc;
}

/*
 * The bzip2 codec allocates its own output (charged as it grows when
 * decompressing, once made when compressing); an fd request gets it copied
 * into its memfd, charged there instead.
 */
static int run_cpu(gcd_request *r, unsigned threads)
{
    gc_job job = { .cancel = &r->cancelled, .may_grow = charge_growth, .ctx = r };
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = r->op == GPUCOMP__OP__OP_COMPRESS
                 ? compress(r, threads, &job, &out, &out_len)
                 : bz2_decompress_job(r->input, r->total_size, r->max_output, threads, &job, &out,
                                      &out_len, &r->error);
    if (rc == GC_OK && r->out_fd >= 0) {
        gcd_request_uncharge(r, r->output_charge); /* the staging buffer: freed right after the copy */
        r->output_charge = 0;
        rc = gcd_request_alloc_output(r, out_len, &r->error);
        if (rc == GC_OK && out_len)
            memcpy(r->output, out, out_len);
        free(out);
    } else if (rc == GC_OK) {
        r->output = out;
    } else {
        free(out);
    }
    r->output_len = rc == GC_OK ? out_len : 0;
    return rc;
}

/*
 * The GPU backend encodes (the CPU engine's stream, byte for byte); it has no
 * bzip2 decoder, so a decompress never goes to a device.
 */
static bool gpu_takes(const gcd_request *r)
{
    return r->op == GPUCOMP__OP__OP_COMPRESS;
}

/* The device's bzip2 path has a large fixed cost per request: a break-even of its own. */
static uint64_t gpu_min_bytes(const gcd_config *cfg)
{
    return cfg->gpu_min_bytes_bzip2;
}

/*
 * A stream that outgrows gc_gpu_bzip2_encode_cap fails its job with GC_E_LIMIT
 * and the lane reruns the request on the CPU engine (device.h).
 */
static int gpu_job(gcd_request *r, gc_gpu_job *job, size_t *out_cap)
{
    job->codec = GC_GPU_CODEC_BZIP2;
    if (r->op != GPUCOMP__OP__OP_COMPRESS) {
        job->op = GC_GPU_DECODE;
        return gc_fail(&r->error, GC_E_UNSUPPORTED, "bzip2: the GPU backend has no decoder");
    }
    job->op = GC_GPU_ENCODE;
    job->opt.bzip2.level = (int)r->level; /* 0 = 9, as bz2_options */
    *out_cap = gc_gpu_bzip2_encode_cap((size_t)r->total_size);
    return GC_OK;
}

const gcd_codec gcd_codec_bzip2 = {
    .id = GPUCOMP__CODEC__CODEC_BZIP2,
    .name = "bzip2",
    .check = check,
    .work_bytes = work_bytes,
    .run_cpu = run_cpu,
    .gpu_takes = gpu_takes,
    .gpu_scope = "compress",
    .gpu_min_bytes = gpu_min_bytes,
    .gpu_job = gpu_job,
};
