/* codec_rle.c - the rle codec's entry in the codec table (docs/FORMAT.md). */
#include "codec.h"

#include "fd_payload.h"
#include "gpu.h"
#include "rle.h"

static rle_options options_of(const gcd_request *r, unsigned threads)
{
    return (rle_options){ .width = r->element_width, .chunk_size = r->chunk_size, .threads = threads };
}

static int check(const gcd_request *r, gc_error *err)
{
    if (r->op != GPUCOMP__OP__OP_COMPRESS)
        return GC_OK; /* a frame carries its own options */
    rle_options in = options_of(r, 1), out;
    return rle_options_resolve(&in, &out, err);
}

/* An rle decompress moves the original size its header declares (docs/FORMAT.md). */
static uint64_t work_bytes(const gcd_request *r)
{
    uint64_t bytes = r->total_size, declared = 0;
    if (r->op != GPUCOMP__OP__OP_DECOMPRESS || r->total_size < RLE_HEADER_FIXED || !r->input)
        return bytes;
    for (int i = 7; i >= 0; i--)
        declared = declared << 8 | r->input[RLE_ORIGINAL_SIZE_OFFSET + i];
    return declared > bytes ? declared : bytes;
}

static int compress(gcd_request *r, unsigned threads)
{
    rle_options opt = options_of(r, threads);
    size_t cap = rle_compress_bound(r->total_size, &opt);
    int rc = gcd_request_alloc_output(r, cap, &r->error);
    if (rc != GC_OK)
        return rc;
    return rle_compress(r->input, r->total_size, &opt, r->output, cap, &r->output_len, &r->error);
}

/* The output size a frame declares, within the request's max_output; an error in r->error. */
static int decoded_size(gcd_request *r, size_t *size)
{
    rle_frame_info info;
    int rc = rle_frame_parse(r->input, r->total_size, &info, &r->error);
    if (rc != GC_OK)
        return rc;
    if (info.original_size > r->max_output)
        return gc_fail(&r->error, GC_E_LIMIT,
                       "rle: frame would decompress to %llu bytes, over the limit of %llu",
                       (unsigned long long)info.original_size, (unsigned long long)r->max_output);
    *size = (size_t)info.original_size;
    return GC_OK;
}

static int decompress(gcd_request *r, unsigned threads)
{
    size_t size = 0;
    int rc = decoded_size(r, &size);
    if (rc == GC_OK)
        rc = gcd_request_alloc_output(r, size, &r->error);
    if (rc != GC_OK)
        return rc;
    return rle_decompress(r->input, r->total_size, threads, r->output, size, &r->output_len,
                          &r->error);
}

static int run_cpu(gcd_request *r, unsigned threads)
{
    return r->op == GPUCOMP__OP__OP_COMPRESS ? compress(r, threads) : decompress(r, threads);
}

static bool gpu_takes(const gcd_request *r)
{
    return r->op == GPUCOMP__OP__OP_COMPRESS || r->op == GPUCOMP__OP__OP_DECOMPRESS;
}

static int gpu_job(gcd_request *r, gc_gpu_job *job, size_t *out_cap)
{
    job->codec = GC_GPU_CODEC_RLE;
    if (r->op == GPUCOMP__OP__OP_COMPRESS) {
        job->op = GC_GPU_ENCODE;
        job->opt.rle = options_of(r, 1);
        *out_cap = rle_compress_bound(r->total_size, &job->opt.rle);
        return GC_OK;
    }
    job->op = GC_GPU_DECODE;
    return decoded_size(r, out_cap);
}

const gcd_codec gcd_codec_rle = {
    .id = GPUCOMP__CODEC__CODEC_RLE,
    .name = "rle",
    .check = check,
    .work_bytes = work_bytes,
    .run_cpu = run_cpu,
    .gpu_takes = gpu_takes,
    .gpu_job = gpu_job,
};
