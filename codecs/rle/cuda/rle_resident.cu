/*
 * gpu_resident.cu - rle's device-resident entry points (gpu.h): encode and
 * decode buffers already in device memory, on the context's stream 0. Used by
 * the tests and benchmarks to measure the kernels without the PCIe copies;
 * the daemon runs gc_gpu_run_batch (gpu_pipeline.cu). Unlike the batch path,
 * the encoder writes the frame header on the device (enc_frame_header).
 */
#include <pthread.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "gpu_pipeline.cuh"

using namespace gcgpu;

extern "C" size_t gc_gpu_rle_scratch_size(size_t src_len, const rle_options *opt)
{
    rle_options o;
    if (rle_options_resolve(opt, &o, nullptr) != GC_OK)
        return 0;
    uint64_t body = src_len - src_len % o.width;
    return std::max(enc_scratch_bytes(body, o.width, o.chunk_size),
                    dec_scratch_bytes(body, o.width, o.chunk_size));
}

/* ---- device-resident calls ------------------------------------------------ */

extern "C" int gc_gpu_rle_encode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, const rle_options *opt,
                                        void *d_dst, size_t dst_cap, size_t *dst_len, void *d_scratch,
                                        size_t scratch_len, gc_error *err)
{
    if (!ctx || !dst_len || (!d_src && src_len) || !d_dst)
        return gc_fail(err, GC_E_INVALID, "gpu rle: encode: missing argument");
    rle_options o;
    int rc = rle_options_resolve(opt, &o, err);
    if (rc != GC_OK)
        return rc;
    size_t bound = rle_compress_bound(src_len, &o);
    if (dst_cap < bound)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: output capacity %zu below rle_compress_bound() = %zu", dst_cap,
                       bound);
    uint64_t body = src_len - src_len % o.width;
    uint64_t cc = (body + o.chunk_size - 1) / o.chunk_size;
    if (cc > UINT32_MAX)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: %zu bytes is too large for one frame", src_len);
    uint64_t hdr = rle_header_size_for(cc);
    pthread_mutex_lock(&ctx->mu);
    rc = ctx_use(ctx, err);
    if (rc == GC_OK)
        rc = order_after_legacy(ctx, err);
    cudaStream_t st = ctx->slots[0].st;
    EncParams p;
    p.src = (const uint8_t *)d_src;
    p.body_len = body;
    p.width = o.width;
    p.chunk_size = o.chunk_size;
    p.chunk_count = cc;
    p.out_base = (uint8_t *)d_dst;
    p.records = (uint8_t *)d_dst + hdr;
    p.records_cap = dst_cap - hdr;
    p.index = (uint32_t *)((uint8_t *)d_dst + RLE_INDEX_OFFSET);
    unsigned long long *d_total = nullptr;
    if (rc == GC_OK)
        rc = enc_launch(p, ctx->d_tab, d_scratch, scratch_len, st, &d_total, err);
    if (rc == GC_OK)
        rc = enc_frame_header((uint8_t *)d_dst, (const uint8_t *)d_src, src_len, o.width, o.chunk_size, cc,
                              ctx->d_tab, d_scratch, scratch_len, st, err);
    if (rc == GC_OK) {
        cudaError_t e = cudaMemcpyAsync(ctx->h_small, d_total, 8, cudaMemcpyDeviceToHost, st);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(st);
        if (e != cudaSuccess)
            rc = gc_fail(err, GC_E_DEVICE, "cuda: encode: %s", cudaGetErrorString(e));
        else
            *dst_len = (size_t)(hdr + *(unsigned long long *)ctx->h_small);
    }
    pthread_mutex_unlock(&ctx->mu);
    if (rc == GC_OK)
        gc_error_clear(err);
    return rc;
}

extern "C" int gc_gpu_rle_decode_device(gc_gpu_ctx *ctx, const void *d_frame, size_t frame_len, void *d_dst,
                                        size_t dst_cap, size_t *dst_len, void *d_scratch, size_t scratch_len,
                                        gc_error *err)
{
    if (!ctx || !d_frame || !dst_len)
        return gc_fail(err, GC_E_INVALID, "gpu rle: decode: missing argument");
    if (frame_len < RLE_HEADER_FIXED)
        return gc_fail(err, GC_E_TRUNCATED, "rle: frame: %zu bytes, shorter than the header", frame_len);
    pthread_mutex_lock(&ctx->mu);
    int rc = ctx_use(ctx, err);
    if (rc == GC_OK)
        rc = order_after_legacy(ctx, err);
    cudaStream_t st = ctx->slots[0].st;
    uint8_t *hdr = nullptr;
    std::vector<uint32_t> status;
    rle_frame_info info;
    uint64_t hsize = 0, body = 0;
    if (rc == GC_OK) {
        cudaError_t e = cudaMemcpy(ctx->h_small, d_frame, RLE_HEADER_FIXED, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            rc = gc_fail(err, GC_E_DEVICE, "cuda: decode: %s", cudaGetErrorString(e));
    }
    if (rc == GC_OK) {
        uint32_t cc = rle_get_le32(ctx->h_small + RLE_CHUNK_COUNT_OFFSET);
        hsize = std::min<uint64_t>(rle_header_size_for(cc), frame_len);
        hdr = (uint8_t *)malloc(hsize);
        if (!hdr) {
            rc = gc_fail(err, GC_E_NOMEM, "gpu rle: out of host memory");
        } else {
            cudaError_t e = cudaMemcpy(hdr, d_frame, hsize, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess)
                rc = gc_fail(err, GC_E_DEVICE, "cuda: decode: %s", cudaGetErrorString(e));
            else if (rle_get_le32(hdr + RLE_CHUNK_COUNT_OFFSET) != cc) /* hdr was sized by the first read */
                rc = gc_fail(err, GC_E_CORRUPT, "rle: frame: chunk_count changed while the header was read");
            else
                rc = rle_frame_parse(hdr, frame_len, &info, err); /* reads hdr[0..header_size) only */
        }
    }
    if (rc == GC_OK && info.original_size > dst_cap)
        rc = gc_fail(err, GC_E_LIMIT, "rle: output capacity %zu below the original size %llu", dst_cap,
                     (unsigned long long)info.original_size);
    if (rc == GC_OK) {
        body = info.original_size - info.tail_len;
        DecParams p;
        p.records = (const uint8_t *)d_frame + info.header_size;
        p.records_len = frame_len - info.header_size;
        p.index = (const uint32_t *)((const uint8_t *)d_frame + RLE_INDEX_OFFSET);
        p.width = info.width;
        p.chunk_size = info.chunk_size;
        p.chunk_count = info.chunk_count;
        p.body_len = body;
        p.out = (uint8_t *)d_dst;
        uint32_t *d_status = nullptr;
        rc = dec_launch(p, ctx->d_tab, d_scratch, scratch_len, st, &d_status, err);
        if (rc == GC_OK) {
            cudaError_t e = cudaSuccess;
            if (info.tail_len)
                e = cudaMemcpyAsync((uint8_t *)d_dst + body, info.tail, info.tail_len, cudaMemcpyHostToDevice, st);
            status.resize(info.chunk_count);
            if (e == cudaSuccess && info.chunk_count)
                e = cudaMemcpyAsync(status.data(), d_status, 4ull * info.chunk_count, cudaMemcpyDeviceToHost, st);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(st);
            if (e != cudaSuccess)
                rc = gc_fail(err, GC_E_DEVICE, "cuda: decode: %s", cudaGetErrorString(e));
        }
        for (size_t i = 0; rc == GC_OK && i < status.size(); i++)
            if (status[i])
                rc = dec_status_error(status[i], i, err);
    }
    free(hdr);
    pthread_mutex_unlock(&ctx->mu);
    if (rc == GC_OK) {
        *dst_len = (size_t)info.original_size;
        gc_error_clear(err);
    }
    return rc;
}
