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
 * The GPU backend encodes (the CPU engine's stream, byte for byte) and
 * decodes (the CPU engine's checks, its verdicts less exact: see
 * gpu_reruns_failures).
 */
static bool gpu_takes(const gcd_request *r)
{
    return r->op == GPUCOMP__OP__OP_COMPRESS || r->op == GPUCOMP__OP__OP_DECOMPRESS;
}

/*
 * The device's break-even, one per operation: the decoder has a larger fixed
 * latency per request than the encoder (docs/DECISIONS.md). A decompress
 * counts its compressed input: its output size is not known beforehand.
 */
static uint64_t gpu_min_bytes(const gcd_config *cfg, const gcd_request *r)
{
    return r->op == GPUCOMP__OP__OP_DECOMPRESS ? cfg->gpu_min_bytes_bzip2_decompress : cfg->gpu_min_bytes_bzip2;
}

/* The first capacity a decode job gets: its output is rarely smaller than its input. */
#define GPU_DECODE_FIRST_CAP ((size_t)1 << 20)

/*
 * An fd request's decode output is its memfd from the first grow on: the file
 * keeps its bytes as it grows (only the mapping is made again), so nothing
 * is copied, and it grows to exactly the length asked (an output memfd is
 * sealed against shrinking; the device asks once per wave of blocks).
 */
static int grow_memfd(gcd_request *r, gc_gpu_job *job, size_t len, gc_error *err)
{
    gcd_request_drop_output(r);
    int rc = gcd_request_alloc_output(r, len, err);
    if (rc != GC_OK)
        return rc;
    job->dst = r->output;
    job->dst_cap = len;
    return GC_OK;
}

/*
 * A decode job's output, as the device asks for room (gpu.h `grow`): a
 * malloc'd buffer in r->output, charged to the request as the CPU decoder's
 * growth is (charge_growth), never beyond max_output. The capacity at least
 * doubles, so the copies stay linear in the output. An fd request's output
 * is its memfd (grow_memfd).
 */
static int gpu_grow(gc_gpu_job *job, size_t len, gc_error *err)
{
    gcd_request *r = job->user;
    if (len <= job->dst_cap)
        return GC_OK;
    if (len > r->max_output)
        return gc_fail(err, GC_E_LIMIT, "bzip2: decompressed size exceeds the %llu byte limit",
                       (unsigned long long)r->max_output);
    if (r->out_fd >= 0)
        return grow_memfd(r, job, len, err);
    size_t cap = job->dst_cap > SIZE_MAX / 2 ? SIZE_MAX : job->dst_cap * 2;
    if (cap < GPU_DECODE_FIRST_CAP)
        cap = GPU_DECODE_FIRST_CAP;
    if (cap < len)
        cap = len;
    if (cap > r->max_output)
        cap = (size_t)r->max_output; /* >= len */
    size_t more = cap - job->dst_cap;
    int rc = gcd_request_charge(r, more, "output", err);
    if (rc != GC_OK)
        return rc;
    uint8_t *grown = realloc(job->dst, cap);
    if (!grown) {
        gcd_request_uncharge(r, more);
        return gc_fail(err, GC_E_NOMEM, "bzip2: cannot grow the output to %zu bytes", cap);
    }
    r->output_charge += more;
    r->output = job->dst = grown;
    job->dst_cap = cap;
    return GC_OK;
}

/*
 * A compress's stream that outgrows gc_gpu_bzip2_encode_cap fails its job
 * with GC_E_LIMIT and the lane reruns the request on the CPU engine
 * (device.h). A decompress's output grows as it is decoded (gpu_grow).
 */
static int gpu_job(gcd_request *r, gc_gpu_job *job, size_t *out_cap)
{
    job->codec = GC_GPU_CODEC_BZIP2;
    if (r->op != GPUCOMP__OP__OP_COMPRESS) {
        job->op = GC_GPU_DECODE;
        job->grow = gpu_grow;
        *out_cap = 0;
        return GC_OK;
    }
    job->op = GC_GPU_ENCODE;
    job->opt.bzip2.level = (int)r->level; /* 0 = 9, as bz2_options */
    *out_cap = gc_gpu_bzip2_encode_cap((size_t)r->total_size);
    return GC_OK;
}

/*
 * After a decode job: an fd request's output is in its memfd already
 * (grow_memfd); one whose output is empty never grew, so its memfd is sized
 * here, to 0 bytes, as the CPU path sizes it.
 */
static int gpu_finish(gcd_request *r, gc_gpu_job *job)
{
    if (job->op != GC_GPU_DECODE || r->out_fd < 0 || r->out_map)
        return GC_OK;
    return gcd_request_alloc_output(r, 0, &r->error);
}

/*
 * A decompress the device fails, whatever the status (but GC_E_DEVICE),
 * reruns on the CPU engine: the client gets the CPU engine's exact status
 * and message, and a stream the device refuses but the CPU engine accepts
 * still decodes. A compress keeps the codec-neutral rule (device.h).
 */
static bool gpu_reruns_failures(const gcd_request *r)
{
    return r->op == GPUCOMP__OP__OP_DECOMPRESS;
}

const gcd_codec gcd_codec_bzip2 = {
    .id = GPUCOMP__CODEC__CODEC_BZIP2,
    .name = "bzip2",
    .check = check,
    .work_bytes = work_bytes,
    .run_cpu = run_cpu,
    .gpu_takes = gpu_takes,
    .gpu_min_bytes = gpu_min_bytes,
    .gpu_job = gpu_job,
    .gpu_finish = gpu_finish,
    .gpu_reruns_failures = gpu_reruns_failures,
};
