/*
 * gpu_stub.c - the gpu.h API for builds without CUDA: no devices, and every
 * other call fails with GC_E_UNSUPPORTED so the daemon stays on the CPU.
 */
#include "gpu.h"

#define NO_CUDA(err) gc_fail(err, GC_E_UNSUPPORTED, "gpu: gpucompd was built without CUDA (configure --with-cuda)")

int gc_gpu_device_count(void)
{
    return 0;
}

int gc_gpu_device_info(int dev, gc_gpu_info *info, gc_error *err)
{
    (void)dev;
    (void)info;
    return NO_CUDA(err);
}

int gc_gpu_open(int dev, const gc_gpu_config *cfg, gc_gpu_ctx **out, gc_error *err)
{
    (void)dev;
    (void)cfg;
    if (out)
        *out = NULL;
    return NO_CUDA(err);
}

void gc_gpu_close(gc_gpu_ctx *ctx)
{
    (void)ctx;
}

int gc_gpu_run_batch(gc_gpu_ctx *ctx, gc_gpu_job *jobs, size_t n_jobs, gc_gpu_batch_stats *stats, gc_error *err)
{
    (void)ctx;
    (void)jobs;
    (void)n_jobs;
    (void)stats;
    return NO_CUDA(err);
}

size_t gc_gpu_rle_scratch_size(size_t src_len, const rle_options *opt)
{
    (void)src_len;
    (void)opt;
    return 0;
}

int gc_gpu_rle_encode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, const rle_options *opt,
                             void *d_dst, size_t dst_cap, size_t *dst_len, void *d_scratch, size_t scratch_len,
                             gc_error *err)
{
    (void)ctx;
    (void)d_src;
    (void)src_len;
    (void)opt;
    (void)d_dst;
    (void)dst_cap;
    (void)dst_len;
    (void)d_scratch;
    (void)scratch_len;
    return NO_CUDA(err);
}

int gc_gpu_rle_decode_device(gc_gpu_ctx *ctx, const void *d_frame, size_t frame_len, void *d_dst, size_t dst_cap,
                             size_t *dst_len, void *d_scratch, size_t scratch_len, gc_error *err)
{
    (void)ctx;
    (void)d_frame;
    (void)frame_len;
    (void)d_dst;
    (void)dst_cap;
    (void)dst_len;
    (void)d_scratch;
    (void)scratch_len;
    return NO_CUDA(err);
}

size_t gc_gpu_bzip2_scratch_size(size_t piece_bytes)
{
    (void)piece_bytes;
    return 0;
}

int gc_gpu_bzip2_encode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, int level, void *d_dst,
                               size_t dst_cap, size_t *dst_len, void *d_scratch, size_t scratch_len,
                               gc_gpu_bzip2_stages *stages, gc_error *err)
{
    (void)ctx;
    (void)d_src;
    (void)src_len;
    (void)level;
    (void)d_dst;
    (void)dst_cap;
    (void)dst_len;
    (void)d_scratch;
    (void)scratch_len;
    (void)stages;
    return NO_CUDA(err);
}

int gc_gpu_bzip2_decode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, void *d_dst, size_t dst_cap,
                               size_t *dst_len, gc_gpu_bzip2_dec_stages *stages, gc_error *err)
{
    (void)ctx;
    (void)d_src;
    (void)src_len;
    (void)d_dst;
    (void)dst_cap;
    (void)dst_len;
    (void)stages;
    return NO_CUDA(err);
}

void *gc_gpu_stream(gc_gpu_ctx *ctx, unsigned i)
{
    (void)ctx;
    (void)i;
    return NULL;
}

int gc_gpu_host_register(void *p, size_t len, int read_only, gc_error *err)
{
    (void)p;
    (void)len;
    (void)read_only;
    return gc_fail(err, GC_E_UNSUPPORTED, "built without CUDA");
}

void gc_gpu_host_unregister(void *p)
{
    (void)p;
}
