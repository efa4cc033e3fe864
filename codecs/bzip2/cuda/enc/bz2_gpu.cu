/*
 * bz2_gpu.cu - the bzip2 encoder in the batch pipeline (gpu_codec.cuh). A
 * unit is a 32 MiB segment of the input, a piece the segments one slot
 * holds. Blocks do not end at segments (docs/BZIP2.md sections 3 and 11):
 * a piece's kernels encode the input carried from the piece before (in the
 * context's d_join) followed by its own, up to its last whole block, and
 * carry the rest on; the job's last piece encodes all that is left. So each
 * piece starts at a block start and the blocks are bzip2's, with no pass
 * over the input on the host; the carry is under one block's input and
 * costs a device-to-device copy.
 *
 * piece_kernels runs the piece's blocks up to their bit lengths (and waits:
 * the rotation sort reads a count per round), often before the pieces
 * before it are placed, so results are kept per piece; piece_place gives the piece
 * its bit offset in the stream (pieces are placed in order); then
 * piece_place_kernels packs its bits at that offset mod 8, and the bytes
 * go back. A piece that starts mid-byte shares that byte with the one
 * before: its own bits of it come back in h_meta and finish() ORs them in,
 * with the stream header, the end-of-stream marker and the combined CRC.
 * The scratch is large, so it is made on first use rather than with every
 * context: per slot what a piece keeps until its pack, per context the
 * stages' working memory (SlotBuffers::d_lazy, d_work).
 *
 * Decode jobs are not cut into pieces (their output size is only known once
 * decoded): the codec hands them to bz2_decode_jobs (bz2_dec.cu), whole.
 */
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <vector>

#include "bz2_dec.cuh"
#include "bz2_gpu.cuh"
#include "gpu_codec.cuh"

namespace gcgpu {

namespace {

class Bz2EncodeJob final : public GpuJob {
  public:
    explicit Bz2EncodeJob(gc_gpu_job &job) : job_(job)
    {
    }

    int prepare(size_t j)
    {
        level_ = job_.opt.bzip2.level == 0 ? 9 : job_.opt.bzip2.level;
        if (level_ < 1 || level_ > 9)
            return gc_fail(&job_.err, GC_E_INVALID, "gpu bzip2: job %zu: level %d out of range 1..9", j, level_);
        if (job_.dst_cap < (BZ2_STREAM_HEADER_BITS + BZ2_STREAM_TRAILER_BITS) / 8)
            return gc_fail(&job_.err, GC_E_LIMIT, "gpu bzip2: job %zu: output buffer of %zu bytes is too small", j,
                           job_.dst_cap);
        units = (job_.src_len + BZ2_SEGMENT_BYTES - 1) / BZ2_SEGMENT_BYTES;
        job_.blocks = 0;
        try {
            first_.assign(units, 0);
            off_.assign(units, 0);
            res_.assign(units, Bz2Result{});
            len_.assign(units, 0);
        } catch (const std::bad_alloc &) {
            return gc_fail(&job_.err, GC_E_NOMEM, "gpu bzip2: job %zu: out of host memory", j);
        }
        out_len = job_.dst_cap;
        out_sized_on_device = true;
        kernels_wait = true;
        return GC_OK;
    }

    int piece_units(uint64_t u0, const SlotCaps &caps, uint64_t *n, gc_error *err) const override
    {
        /* as many segments as the slot's input buffer holds (at least two: min_slot_in), with room for a carry */
        uint64_t k = std::max<uint64_t>(1, std::min<uint64_t>(caps.in_cap, kBz2MaxPiece - kBz2MaxCarry) /
                                               BZ2_SEGMENT_BYTES);
        k = std::min(k, units - u0);
        if (std::min<uint64_t>(BZ2_SEGMENT_BYTES, job_.src_len) > caps.in_cap)
            return gc_fail(err, GC_E_LIMIT,
                           "gpu bzip2: a 32 MiB segment does not fit the GPU batch buffers (%zu bytes)",
                           caps.slot_bytes);
        while (k > 1 && k * BZ2_SEGMENT_BYTES > caps.in_cap)
            k--;
        *n = k;
        return GC_OK;
    }

    void piece_begin(Piece &p, uint8_t *h_meta) override
    {
        (void)h_meta;
        p.in_host = job_.src + p.u0 * BZ2_SEGMENT_BYTES;
        p.in_len = std::min<uint64_t>(p.n * BZ2_SEGMENT_BYTES, job_.src_len - p.u0 * BZ2_SEGMENT_BYTES);
    }

    int piece_kernels(Piece &p, const SlotBuffers &b, cudaStream_t st, gc_error *err) override
    {
        if (failed_)
            return GC_OK;
        const bool whole = p.u0 + p.n == units;
        const uint8_t *src = b.d_in;
        uint64_t len = carry_ + p.in_len;
        int rc = GC_OK;
        if (!whole || carry_)
            rc = join(p, b, st, &src, err);
        Bz2Scratch s;
        if (rc == GC_OK)
            rc = scratch(b, len, &s, err);
        len_[p.u0] = len;
        if (rc == GC_OK)
            rc = bz2_enc_blocks(src, len, whole, level_, s, b.d_tab32, st, &res_[p.u0], nullptr, err);
        if (rc == GC_OK && !whole)
            rc = carry_on(b, st, len, res_[p.u0].in_used, err);
        if (rc == GC_E_DEVICE)
            return rc;
        if (rc != GC_OK)
            fail(rc, err->msg);
        return GC_OK;
    }

    int piece_meta_d2h(const Piece &p, const SlotBuffers &b, cudaStream_t st, uint64_t *bytes,
                       gc_error *err) override
    {
        (void)p, (void)b, (void)st, (void)err;
        *bytes = 0; /* the totals came back in piece_kernels */
        return GC_OK;
    }

    int piece_place(Piece &p, const uint8_t *h_meta, gc_error *err) override
    {
        (void)h_meta, (void)err;
        p.out_len = 0;
        if (failed_)
            return GC_OK;
        const Bz2Result &r = res_[p.u0];
        const uint64_t o = BZ2_STREAM_HEADER_BITS + bits_;
        const unsigned sh = (unsigned)(o % 8);
        const uint64_t dev_bytes = (sh + r.bits + 7) / 8;
        if ((o + r.bits + BZ2_STREAM_TRAILER_BITS + 7) / 8 > job_.dst_cap) {
            fail(GC_E_LIMIT, "gpu bzip2: the stream does not fit the output buffer");
            return GC_OK;
        }
        place_ = Place{ r.blocks, r.bits, sh };
        off_[p.u0] = o;
        p.out_dev_off = sh ? 1 : 0;
        p.out_host = job_.dst + o / 8 + p.out_dev_off;
        p.out_len = dev_bytes - p.out_dev_off;
        bits_ += r.bits;
        job_.blocks += r.blocks;
        combined_ = bz2_combine_parts(combined_, r.blocks, r.combined);
        return GC_OK;
    }

    int piece_place_kernels(Piece &p, const SlotBuffers &b, cudaStream_t st, gc_error *err) override
    {
        if (failed_)
            return GC_OK;
        Bz2Scratch s;
        int rc = scratch(b, len_[p.u0], &s, err);
        if (rc == GC_OK)
            rc = bz2_enc_pack(s, place_.blocks, place_.bits, place_.shift, b.d_out, b.out_cap, true, st, err);
        if (rc == GC_OK && place_.shift)
            rc = cudaMemcpyAsync(b.h_meta, b.d_out, 1, cudaMemcpyDeviceToHost, st) == cudaSuccess
                     ? GC_OK
                     : gc_fail(err, GC_E_DEVICE, "cuda: the piece's first byte back");
        if (rc == GC_E_DEVICE)
            return rc;
        if (rc != GC_OK) {
            fail(rc, err->msg);
            p.out_len = 0;
        }
        first_[p.u0] = place_.shift ? 0x100 : 0; /* filled in by piece_check */
        return GC_OK;
    }

    int piece_check(const Piece &p, const uint8_t *h_meta, gc_error *err) override
    {
        if (failed_)
            return gc_fail(err, (gc_status)fail_code_, "%s", fail_msg_);
        if (first_[p.u0])
            first_[p.u0] = 0x100 | h_meta[0];
        return GC_OK;
    }

    size_t finish() override
    {
        uint8_t *d = job_.dst;
        bz2_stream_header(d, level_);
        uint64_t o = BZ2_STREAM_HEADER_BITS;
        /* the first bits of pieces that start mid-byte */
        for (uint64_t u = 0; u < units; u++)
            if (first_[u])
                d[off_[u] / 8] |= (uint8_t)first_[u];
        o += bits_;
        uint64_t end = o + BZ2_STREAM_TRAILER_BITS;
        if (o % 8 == 0)
            d[o / 8] = 0;
        for (uint64_t i = o / 8 + 1; i < (end + 7) / 8; i++)
            d[i] = 0;
        bz2_stream_trailer(d, o, combined_);
        return (size_t)((end + 7) / 8);
    }

  private:
    struct Place {
        uint32_t blocks;
        uint64_t bits;
        unsigned shift;
    };

    /* Scratch carved for a piece of `len` input bytes (rounded up, so pieces of
     * one size carve alike): the slot's piece part, the context's work part. A
     * slot's part never grows while a piece of its own is between its kernels
     * and its pack; the work part is only used inside piece_kernels. */
    int scratch(const SlotBuffers &b, uint64_t len, Bz2Scratch *s, gc_error *err)
    {
        uint64_t piece =
            std::max<uint64_t>(kBz2ScratchStep, (len + kBz2ScratchStep - 1) / kBz2ScratchStep * kBz2ScratchStep);
        size_t piece_need = bz2_piece_bytes(piece), work_need = bz2_work_bytes(piece);
        if (!device_grow(b.d_lazy, b.lazy_cap, piece_need) || !device_grow(b.d_work, b.work_cap, work_need))
            return gc_fail(err, GC_E_LIMIT, "gpu bzip2: no device memory for %zu + %zu bytes of scratch",
                           piece_need, work_need);
        return bz2_scratch_carve2(*b.d_lazy, *b.lazy_cap, *b.d_work, *b.work_cap, piece, s, err);
    }

    /* The piece's input after the carry in d_join (sized once per context
     * for the largest, so it never grows, losing a carry, mid-job). */
    int join(const Piece &p, const SlotBuffers &b, cudaStream_t st, const uint8_t **src, gc_error *err)
    {
        if (!device_grow(b.d_join, b.join_cap, b.in_cap + kBz2MaxCarry))
            return gc_fail(err, GC_E_LIMIT, "gpu bzip2: no device memory for %zu bytes of carried input",
                           b.in_cap + kBz2MaxCarry);
        if (carry_ + p.in_len > *b.join_cap)
            return gc_fail(err, GC_E_INTERNAL, "gpu bzip2: carried input over its buffer");
        GC_CUDA(cudaMemcpyAsync(*b.d_join + carry_, b.d_in, p.in_len, cudaMemcpyDeviceToDevice, st));
        *src = *b.d_join;
        return GC_OK;
    }

    /* The input after the piece's last whole block, d_join[used, len), to
     * the front of d_join for the next piece; done before the next piece's
     * kernels (on another stream) start. */
    int carry_on(const SlotBuffers &b, cudaStream_t st, uint64_t len, uint64_t used, gc_error *err)
    {
        uint64_t tail = len - used;
        if (used == 0 || tail > kBz2MaxCarry)
            return gc_fail(err, GC_E_INTERNAL, "gpu bzip2: a piece ended %llu bytes before its last block's end",
                           (unsigned long long)tail);
        for (uint64_t o = 0; o < tail; o += used) /* chunks of at most `used`: source and copy never overlap */
            GC_CUDA(cudaMemcpyAsync(*b.d_join + o, *b.d_join + used + o, std::min(used, tail - o),
                                    cudaMemcpyDeviceToDevice, st));
        GC_CUDA(cudaStreamSynchronize(st));
        carry_ = tail;
        return GC_OK;
    }

    void fail(int code, const char *msg)
    {
        if (failed_)
            return;
        failed_ = true;
        fail_code_ = code;
        snprintf(fail_msg_, sizeof fail_msg_, "%s", msg);
    }

    gc_gpu_job &job_;
    int level_ = 9;
    std::vector<Bz2Result> res_; /* by a piece's first unit: its totals (pieces overlap in the pipeline) */
    std::vector<uint64_t> len_;  /* by a piece's first unit: the input its kernels encoded (carry included) */
    uint64_t carry_ = 0;         /* bytes at the front of d_join that start the next piece */
    Place place_{};
    uint64_t bits_ = 0;
    uint32_t combined_ = 0;
    std::vector<uint16_t> first_; /* by a piece's first unit: 0x100 | its bits of a shared first byte */
    std::vector<uint64_t> off_;   /* by a piece's first unit: its bit offset in the stream */
    bool failed_ = false;
    int fail_code_ = GC_OK;
    char fail_msg_[sizeof(gc_error::msg)] = "";
};

int bz2_prepare(gc_gpu_job &job, size_t j, GpuJob **out)
{
    if (job.op != GC_GPU_ENCODE) /* decode jobs run whole (bz2_decode_jobs) */
        return gc_fail(&job.err, GC_E_INVALID, "gpu bzip2: job %zu: operation %d", j, (int)job.op);
    Bz2EncodeJob *r = new (std::nothrow) Bz2EncodeJob(job);
    if (!r)
        return gc_fail(&job.err, GC_E_NOMEM, "gpu bzip2: job %zu: out of host memory", j);
    int rc = r->prepare(j);
    if (rc != GC_OK) {
        delete r;
        return rc;
    }
    *out = r;
    return GC_OK;
}

size_t bz2_slot_scratch(size_t b)
{
    (void)b;
    return 0; /* lazily, per slot: SlotBuffers::d_lazy */
}

size_t bz2_slot_meta(size_t b)
{
    (void)b;
    return 64;
}

} // namespace

/* Slots hold kBz2SlotSegments segments (bz2_policy.cuh): larger pieces sort faster. */
const GpuCodec kBzip2Codec = {
    GC_GPU_CODEC_BZIP2, "bzip2",        bz2_slot_scratch, bz2_slot_meta, kBz2SlotSegments *BZ2_SEGMENT_BYTES,
    bz2_prepare,        bz2_decode_jobs
};

} // namespace gcgpu
