/*
 * bz2_resident.cu - bzip2's device-resident encoder (gpu.h): input and
 * stream both in device memory, on the context's stream 0, in pieces of as
 * many 32 MiB segments as the caller's scratch holds. A piece ends after its
 * last whole block and the next starts there (docs/BZIP2.md section 11): the
 * input is on the device already, so a piece is only a window on it. For
 * tests and the stage-by-stage benchmark; the daemon runs gc_gpu_run_batch.
 */
#include <pthread.h>

#include "bz2_gpu.cuh"
#include "gpu_pipeline.cuh"

using namespace gcgpu;

namespace {

/* The largest piece (whole segments, up to kBz2MaxPiece) whose scratch fits len bytes; 0 if none. */
uint64_t piece_for(size_t len)
{
    uint64_t best = 0;
    for (uint64_t k = 1; k * BZ2_SEGMENT_BYTES <= kBz2MaxPiece; k++) {
        if (bz2_scratch_bytes(k * BZ2_SEGMENT_BYTES) > len)
            break;
        best = k * BZ2_SEGMENT_BYTES;
    }
    return best;
}

int encode(gc_gpu_ctx *ctx, const uint8_t *src, size_t len, int level, uint8_t *dst, size_t cap, size_t *dst_len,
           void *scr, size_t scr_len, gc_gpu_bzip2_stages *stages, gc_error *err)
{
    cudaStream_t st = ctx->slots[0].st;
    uint8_t head[BZ2_STREAM_HEADER_BITS / 8];
    bz2_stream_header(head, level);
    GC_CUDA(cudaMemcpyAsync(dst, head, sizeof head, cudaMemcpyHostToDevice, st));
    uint64_t piece = piece_for(scr_len);
    if (len && !piece)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: %zu bytes of scratch hold no 32 MiB segment", scr_len);
    Bz2Scratch s{};
    if (len) {
        int rc = bz2_scratch_carve(scr, scr_len, piece, &s, err);
        if (rc != GC_OK)
            return rc;
    }
    CudaEvent p0, p1;
    GC_CUDA(p0.create());
    GC_CUDA(p1.create());
    uint64_t o = BZ2_STREAM_HEADER_BITS;
    uint32_t comb = 0;
    float ms[4] = { 0, 0, 0, 0 };
    double pack_ms = 0;
    int rc = GC_OK;
    for (uint64_t a = 0; rc == GC_OK && a < len;) {
        Bz2Result r;
        uint64_t n = min64(piece, len - a);
        rc = bz2_enc_blocks(src + a, n, a + n == len, level, s, ctx->d_tab32, st, &r, ms, err);
        if (rc != GC_OK)
            break;
        uint64_t word = o / 32;
        if (cudaEventRecord(p0.get(), st) != cudaSuccess)
            rc = gc_fail(err, GC_E_DEVICE, "cuda: cudaEventRecord");
        if (rc == GC_OK)
            rc = bz2_enc_pack(s, r.blocks, r.bits, (unsigned)(o % 32), dst + 4 * word, cap - 4 * word, false, st,
                              err);
        if (rc == GC_OK && cudaEventRecord(p1.get(), st) == cudaSuccess &&
            cudaEventSynchronize(p1.get()) == cudaSuccess) {
            float t = 0;
            cudaEventElapsedTime(&t, p0.get(), p1.get());
            pack_ms += t;
        }
        o += r.bits;
        a += r.in_used;
        comb = bz2_combine_parts(comb, r.blocks, r.combined);
        if (stages) {
            stages->blocks += r.blocks;
            stages->pieces++;
        }
    }
    if (rc != GC_OK)
        return rc;
    uint64_t end = o + BZ2_STREAM_TRAILER_BITS;
    if ((end + 7) / 8 > cap)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: the stream does not fit %zu bytes", cap);
    uint8_t tail[16] = { 0 };
    uint64_t b0 = o / 8;
    if (o % 8)
        GC_CUDA(cudaMemcpyAsync(tail, dst + b0, 1, cudaMemcpyDeviceToHost, st));
    GC_CUDA(cudaStreamSynchronize(st));
    bz2_stream_trailer(tail, o % 8, comb);
    GC_CUDA(cudaMemcpyAsync(dst + b0, tail, (end + 7) / 8 - b0, cudaMemcpyHostToDevice, st));
    GC_CUDA(cudaStreamSynchronize(st));
    *dst_len = (size_t)((end + 7) / 8);
    if (stages) {
        stages->plan_ms += ms[0];
        stages->bwt_ms += ms[1];
        stages->mtf_ms += ms[2];
        stages->tables_ms += ms[3];
        stages->pack_ms += pack_ms;
    }
    return GC_OK;
}

} // namespace

extern "C" size_t gc_gpu_bzip2_scratch_size(size_t piece_bytes)
{
    uint64_t k = (piece_bytes + BZ2_SEGMENT_BYTES - 1) / BZ2_SEGMENT_BYTES;
    k = k < 1 ? 1 : k;
    if (k * BZ2_SEGMENT_BYTES > kBz2MaxPiece)
        k = kBz2MaxPiece / BZ2_SEGMENT_BYTES;
    return bz2_scratch_bytes(k * BZ2_SEGMENT_BYTES);
}

extern "C" int gc_gpu_bzip2_encode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, int level,
                                          void *d_dst, size_t dst_cap, size_t *dst_len, void *d_scratch,
                                          size_t scratch_len, gc_gpu_bzip2_stages *stages, gc_error *err)
{
    if (!ctx || !dst_len || (!d_src && src_len) || !d_dst || ((uintptr_t)d_dst & 3))
        return gc_fail(err, GC_E_INVALID, "gpu bzip2: encode: missing or misaligned argument");
    if (level == 0)
        level = 9;
    if (level < 1 || level > 9)
        return gc_fail(err, GC_E_INVALID, "gpu bzip2: level %d out of range 1..9", level);
    if (dst_cap < 14)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: output capacity %zu below 14 bytes", dst_cap);
    pthread_mutex_lock(&ctx->mu);
    int rc = ctx_use(ctx, err);
    if (rc == GC_OK)
        rc = order_after_legacy(ctx, err);
    if (rc == GC_OK)
        rc = encode(ctx, (const uint8_t *)d_src, src_len, level, (uint8_t *)d_dst, dst_cap, dst_len, d_scratch,
                    scratch_len, stages, err);
    pthread_mutex_unlock(&ctx->mu);
    if (rc == GC_OK)
        gc_error_clear(err);
    return rc;
}
