/*
 * rle_gpu.cu - the rle codec in the batch pipeline (gpu_codec.cuh): encode
 * and decode jobs over the kernels of rle_encode.cu and rle_decode.cu. A
 * piece is whole chunks.
 *
 * Encode sizes its output on the device: a piece's record sizes come back
 * first (piece_meta_d2h), then the pipeline places the records after those of
 * the pieces before it (piece_place) and copies them back. The frame header
 * and its CRC are written on the host when the job finishes (a few bytes per
 * chunk); the device never sees a frame header in the batch path.
 *
 * Decode works from a private copy of the frame's index (rle_frame_index_copy,
 * validated after it was made): the frame is the caller's memory (a client's
 * memfd in the daemon) and may change at any time, so record sizes and
 * offsets, the staging lengths and the device's index all come from the copy.
 * Each chunk's status word comes back with the output; the first bad one
 * fails the job (piece_check).
 */
#include <string.h>

#include <algorithm>
#include <new>
#include <vector>

#include "gpu_codec.cuh"
#include "pipeline_policy.cuh"
extern "C" {
#include "crc32c.h"
}

namespace gcgpu {

namespace {

/* h_meta: [0, 8) the encoder's record total, from kMetaIndex the piece's
 * index entries (encode: back from the device; decode: to it) or, decode, its
 * chunk status words back. */
constexpr uint64_t kMetaIndex = 64;

#define RLE_GPU_CUDA(call)                                                                    \
    do {                                                                                      \
        cudaError_t rc_ = (call);                                                             \
        if (rc_ != cudaSuccess)                                                               \
            return gc_fail(err, GC_E_DEVICE, "cuda: %s: %s", #call, cudaGetErrorString(rc_)); \
    } while (0)

/* What encode and decode share: the chunk geometry of the job. */
class RleJob : public GpuJob {
  public:
    explicit RleJob(gc_gpu_job &job) : job_(job)
    {
    }

    int piece_units(uint64_t c0, const SlotCaps &caps, uint64_t *pn, gc_error *err) const override
    {
        uint64_t n = std::min<uint64_t>(units - c0, std::max<uint64_t>(1, caps.slot_bytes / cs_));
        n = std::min(n, kMaxPieceChunks);
        /* rle pieces stay within slot_bytes, whatever other codecs made the buffers */
        const size_t in_cap = std::min(caps.in_cap, slot_buffer_bytes(caps.slot_bytes));
        const size_t out_cap = std::min(caps.out_cap, in_cap);
        for (; n >= 1; n = n / 2) {
            uint64_t body = piece_body(c0, n);
            uint64_t rec = piece_records(c0, n);
            size_t scr = scratch(body);
            if (body <= in_cap && rec <= out_cap && rec <= in_cap && scr <= caps.scr_cap &&
                kMetaIndex + n * RLE_INDEX_ENTRY <= caps.meta_cap) {
                *pn = n;
                return GC_OK;
            }
            if (n == 1)
                break;
        }
        return gc_fail(err, GC_E_LIMIT, "gpu rle: chunk_size %u does not fit the GPU batch buffers (%zu bytes)",
                       (unsigned)cs_, caps.slot_bytes);
    }

  protected:
    /* bytes of original data in chunks [c0, c0 + n) */
    uint64_t piece_body(uint64_t c0, uint64_t n) const
    {
        return std::min<uint64_t>(n * cs_, body_ - c0 * cs_);
    }
    /* bytes of records of chunks [c0, c0 + n) (encode: at most) */
    virtual uint64_t piece_records(uint64_t c0, uint64_t n) const = 0;
    virtual size_t scratch(uint64_t body) const = 0;

    gc_gpu_job &job_;
    unsigned width_ = 1;
    uint32_t cs_ = 0;
    uint64_t body_ = 0;        /* bytes in whole elements (the chunks'); the tail is in the header */
    uint64_t header_size_ = 0; /* of the frame */
};

class RleEncodeJob final : public RleJob {
  public:
    explicit RleEncodeJob(gc_gpu_job &job) : RleJob(job)
    {
    }

    int prepare(size_t j)
    {
        (void)j;
        rle_options o;
        int rc = rle_options_resolve(&job_.opt.rle, &o, &job_.err);
        if (rc != GC_OK)
            return rc;
        size_t bound = rle_compress_bound(job_.src_len, &o);
        if (job_.dst_cap < bound)
            return gc_fail(&job_.err, GC_E_LIMIT,
                           "rle: output buffer of %zu bytes is below rle_compress_bound() = %zu", job_.dst_cap,
                           bound);
        width_ = o.width;
        cs_ = o.chunk_size;
        body_ = job_.src_len - job_.src_len % o.width;
        units = (body_ + o.chunk_size - 1) / o.chunk_size;
        if (units > UINT32_MAX)
            return gc_fail(&job_.err, GC_E_LIMIT, "rle: %zu bytes is too large for one frame", job_.src_len);
        header_size_ = rle_header_size_for(units);
        out_len = bound;
        out_sized_on_device = true;
        return GC_OK;
    }

    void piece_begin(Piece &p, uint8_t *h_meta) override
    {
        (void)h_meta;
        p.in_host = job_.src + p.u0 * cs_;
        p.in_len = piece_body(p.u0, p.n);
    }

    int piece_kernels(Piece &p, const SlotBuffers &b, cudaStream_t st, gc_error *err) override
    {
        EncParams e;
        e.src = b.d_in;
        e.body_len = p.in_len;
        e.width = width_;
        e.chunk_size = cs_;
        e.chunk_count = p.n;
        e.records = b.d_out;
        e.records_cap = b.out_cap;
        e.out_base = b.d_out;
        e.index = (uint32_t *)b.d_meta;
        unsigned long long *d_total = nullptr;
        int rc = enc_launch(e, b.d_tab, b.d_scr, b.scr_cap, st, &d_total, err);
        p.d_results = d_total; /* in the slot's scratch: the piece's record bytes */
        return rc;
    }

    int piece_meta_d2h(const Piece &p, const SlotBuffers &b, cudaStream_t st, uint64_t *bytes,
                       gc_error *err) override
    {
        RLE_GPU_CUDA(cudaMemcpyAsync(b.h_meta, p.d_results, 8, cudaMemcpyDeviceToHost, st));
        RLE_GPU_CUDA(
            cudaMemcpyAsync(b.h_meta + kMetaIndex, b.d_meta, RLE_INDEX_ENTRY * p.n, cudaMemcpyDeviceToHost, st));
        *bytes = RLE_INDEX_ENTRY * p.n + 8;
        return GC_OK;
    }

    /* The records go after those of the pieces before; the index entries into the header. */
    int piece_place(Piece &p, const uint8_t *h_meta, gc_error *err) override
    {
        uint64_t total = *(const volatile unsigned long long *)h_meta;
        memcpy(job_.dst + RLE_INDEX_OFFSET + RLE_INDEX_ENTRY * p.u0, h_meta + kMetaIndex, RLE_INDEX_ENTRY * p.n);
        uint64_t off = header_size_ + records_written_;
        records_written_ += total;
        if (off + total > job_.dst_cap) /* cannot happen: the bound covers it */
            return gc_fail(err, GC_E_INTERNAL, "gpu rle: encoder output past rle_compress_bound");
        p.out_host = job_.dst + off;
        p.out_len = total;
        return GC_OK;
    }

    size_t finish() override
    {
        uint8_t *f = job_.dst;
        rle_header_write_fixed(f, width_, cs_, job_.src_len, (uint32_t)units, job_.src + body_);
        const uint64_t crc_at = rle_header_crc_offset(units);
        rle_put_le(f + crc_at, crc32c(f, crc_at), RLE_HEADER_CRC);
        return header_size_ + records_written_;
    }

  private:
    uint64_t piece_records(uint64_t c0, uint64_t n) const override
    {
        return piece_body(c0, n) + RLE_CHUNK_HEADER * n;
    }
    size_t scratch(uint64_t body) const override
    {
        return enc_scratch_bytes(body, width_, cs_);
    }

    uint64_t records_written_ = 0; /* bytes of records placed */
};

class RleDecodeJob final : public RleJob {
  public:
    explicit RleDecodeJob(gc_gpu_job &job) : RleJob(job)
    {
    }

    int prepare(size_t j)
    {
        int rc = rle_frame_parse(job_.src, job_.src_len, &info_, &job_.err);
        if (rc != GC_OK)
            return rc;
        if (info_.original_size > job_.dst_cap)
            return gc_fail(&job_.err, GC_E_LIMIT,
                           "rle: output buffer of %zu bytes is below the original size %llu", job_.dst_cap,
                           (unsigned long long)info_.original_size);
        width_ = info_.width;
        cs_ = info_.chunk_size;
        body_ = info_.original_size - info_.tail_len;
        units = info_.chunk_count;
        header_size_ = info_.header_size;
        try {
            index_.assign(units, 0);
        } catch (const std::bad_alloc &) {
            return gc_fail(&job_.err, GC_E_NOMEM, "gpu rle: job %zu: no memory for a %llu-chunk index", j,
                           (unsigned long long)units);
        }
        rc = rle_frame_index_copy(job_.src, job_.src_len, &info_, index_.data(), &job_.err);
        if (rc != GC_OK)
            return rc;
        rec_cursor_ = info_.header_size;
        out_len = (size_t)body_;
        return GC_OK;
    }

    void piece_begin(Piece &p, uint8_t *h_meta) override
    {
        uint64_t rec = piece_records(p.u0, p.n); /* the sizes piece_units fitted to the slot: same copy */
        p.in_host = job_.src + rec_cursor_;
        p.in_len = rec;
        rec_cursor_ += rec;
        memcpy(h_meta + kMetaIndex, index_.data() + p.u0, RLE_INDEX_ENTRY * p.n);
        p.meta_in_off = kMetaIndex;
        p.meta_in_len = RLE_INDEX_ENTRY * p.n;
        p.out_host = job_.dst + p.u0 * cs_;
        p.out_len = piece_body(p.u0, p.n);
    }

    int piece_kernels(Piece &p, const SlotBuffers &b, cudaStream_t st, gc_error *err) override
    {
        DecParams d;
        d.records = b.d_in;
        d.records_len = p.in_len;
        d.index = (const uint32_t *)b.d_meta;
        d.width = width_;
        d.chunk_size = cs_;
        d.chunk_count = p.n;
        d.body_len = p.out_len;
        d.out = b.d_out;
        uint32_t *d_status = nullptr;
        int rc = dec_launch(d, b.d_tab, b.d_scr, b.scr_cap, st, &d_status, err);
        p.d_results = d_status; /* in the slot's scratch: the piece's chunk status words */
        return rc;
    }

    int piece_meta_d2h(const Piece &p, const SlotBuffers &b, cudaStream_t st, uint64_t *bytes,
                       gc_error *err) override
    {
        RLE_GPU_CUDA(cudaMemcpyAsync(b.h_meta + kMetaIndex, p.d_results, sizeof(uint32_t) * p.n,
                                     cudaMemcpyDeviceToHost, st));
        *bytes = sizeof(uint32_t) * p.n;
        return GC_OK;
    }

    int piece_check(const Piece &p, const uint8_t *h_meta, gc_error *err) override
    {
        const uint32_t *stw = (const uint32_t *)(h_meta + kMetaIndex);
        for (uint64_t i = 0; i < p.n; i++)
            if (stw[i])
                return dec_status_error(stw[i], p.u0 + i, err);
        return GC_OK;
    }

    size_t finish() override
    {
        if (info_.tail_len)
            memcpy(job_.dst + body_, info_.tail, info_.tail_len);
        return (size_t)info_.original_size;
    }

  private:
    uint64_t piece_records(uint64_t c0, uint64_t n) const override
    {
        uint64_t rec = 0;
        for (uint64_t c = c0; c < c0 + n; c++)
            rec += index_[c];
        return rec;
    }
    size_t scratch(uint64_t body) const override
    {
        return dec_scratch_bytes(body, width_, cs_);
    }

    rle_frame_info info_{};
    std::vector<uint32_t> index_;
    uint64_t rec_cursor_ = 0; /* frame offset of the next piece's records */
};

template <class J>
int make_job(gc_gpu_job &job, size_t j, GpuJob **out)
{
    J *r = new (std::nothrow) J(job);
    if (!r)
        return gc_fail(&job.err, GC_E_NOMEM, "gpu rle: job %zu: out of host memory", j);
    int rc = r->prepare(j);
    if (rc != GC_OK) {
        delete r;
        return rc;
    }
    *out = r;
    return GC_OK;
}

int rle_prepare(gc_gpu_job &job, size_t j, GpuJob **out)
{
    switch (job.op) {
    case GC_GPU_ENCODE: return make_job<RleEncodeJob>(job, j, out);
    case GC_GPU_DECODE: return make_job<RleDecodeJob>(job, j, out);
    }
    return gc_fail(&job.err, GC_E_INVALID, "gpu rle: job %zu: unknown operation %d", j, (int)job.op);
}

/* A slot of b input bytes: the larger of the encoder's and decoder's scratch
 * for b bytes in the smallest chunks (width 1, 4 KiB chunks). */
size_t rle_slot_scratch(size_t b)
{
    return std::max(enc_scratch_bytes(b, 1, 4096), dec_scratch_bytes(b, 1, 4096));
}

/* The piece's index entries or status words after kMetaIndex, for up to
 * kMaxPieceChunks chunks. */
size_t rle_slot_meta(size_t b)
{
    (void)b;
    return kMetaIndex + kMaxPieceChunks * RLE_INDEX_ENTRY + 256;
}

} // namespace

const GpuCodec kRleCodec = { GC_GPU_CODEC_RLE, "rle", rle_slot_scratch, rle_slot_meta, 0, rle_prepare, nullptr };

} // namespace gcgpu
