/*
 * bz2_dec.cu - the bzip2 decoder's driver (bz2_dec.cuh): scratch, the waves
 * of candidates, the framing walk between them, output rounds, and the two
 * ways in: a batch job with its input and output in host memory (the
 * pipeline hands bzip2 decode jobs over whole: their output size is only
 * known once decoded), and the device-resident call of gpu.h.
 *
 * Per wave of up to s.columns candidates: Huffman stage on all of them,
 * results back, the walk decides which are blocks, their inverse BWT and
 * RLE1 sizes, results back, then output rounds of up to kDecRoundBytes
 * (expansion, block CRCs checked before a round leaves the device).
 */
#include <string.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bz2_dec.cuh"
#include "bz2_dec_walk.cuh"
#include "gpu_pipeline.cuh"

extern "C" {
extern const uint16_t bz2_rnums[512]; /* kernels/cpu/bz2_rand.c: the format's table */
}

namespace gcgpu {

const char *bz2_dec_error(uint32_t e)
{
    static const char *const words[kDecErrorCount] = {
        "no error",
        "input ends inside the block",
        "symbol map is empty",
        "invalid number of Huffman tables",
        "no selectors",
        "selector out of range",
        "code length out of range",
        "oversubscribed Huffman code",
        "more symbol groups than selectors",
        "invalid Huffman code",
        "zero run exceeds the block size",
        "block exceeds 900000 bytes",
        "origPtr out of range",
        "the BWT column is not one cycle from origPtr",
        "block ends inside a run (count byte missing)",
        "block CRC mismatch",
    };
    return e < kDecErrorCount ? words[e] : "unknown decoder error";
}

int bz2_dec_status(uint32_t e)
{
    switch (e) {
    case kDecOk:
        return GC_OK;
    case kDecTruncated:
        return GC_E_TRUNCATED;
    case kDecCrc:
        return GC_E_CRC;
    default:
        return GC_E_CORRUPT;
    }
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr uint32_t kRandWords = (kDecColumn + 31) / 32;

/* Bit k: byte k of a randomised block is flipped (bz2_rand_next's sequence). */
const uint32_t *rand_map_host()
{
    static uint32_t map[kRandWords];
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] {
        int32_t to_go = 0, tpos = 0;
        for (uint32_t k = 0; k < kDecColumn; k++) {
            if (to_go == 0) {
                to_go = bz2_rnums[tpos];
                tpos = (tpos + 1) & 511;
            }
            to_go--;
            if (to_go == 1)
                map[k / 32] |= 1u << (k % 32);
        }
    });
    return map;
}

/* Carves aligned regions off a base (null base: only sums the sizes). */
struct Carver {
    uint8_t *base;
    size_t off = 0;
    template <typename T> T *take(size_t count)
    {
        off = (off + 255) & ~(size_t)255;
        T *p = base ? reinterpret_cast<T *>(base + off) : nullptr;
        off += count * sizeof(T);
        return p;
    }
};

struct Geometry {
    uint32_t columns, sort_cols, cand_cap, sp_cap;
    size_t cub_bytes;
};

int geometry(uint64_t in_len, Geometry *g, gc_error *err)
{
    uint64_t cols = std::min<uint64_t>(kDecMaxColumns, in_len / 16 + 2);
    g->columns = (uint32_t)cols;
    g->sort_cols = std::min<uint32_t>(kDecSortColumns, g->columns);
    g->cand_cap = (uint32_t)std::min<uint64_t>(in_len / 6 + 64, 1u << 20);
    g->sp_cap = g->sort_cols * (kDecColumn / kDecSplitStride + 2);
    size_t a = 0, b = 0;
    int rc = bz2_dec_scan_tmp(g->cand_cap, &a, err);
    if (rc == GC_OK)
        rc = bz2_dec_ibwt_tmp(g->sort_cols, &b, err);
    g->cub_bytes = std::max(a, b);
    return rc;
}

size_t carve(Carver &c, const Geometry &g, uint64_t in_len, bool copy_in, bool out_round, DecScratch *s)
{
    *s = DecScratch{};
    s->in_cap = copy_in ? in_len : 0;
    s->in = copy_in ? c.take<uint8_t>(in_len + 16) : nullptr;
    s->cand_cap = g.cand_cap;
    s->cand = c.take<uint64_t>(g.cand_cap);
    s->cand_tmp = c.take<uint64_t>(g.cand_cap);
    s->n_cand = c.take<uint32_t>(1);
    s->columns = g.columns;
    s->sort_cols = g.sort_cols;
    s->res = c.take<DecCand>(g.columns);
    s->cols = c.take<uint8_t>((size_t)g.columns * kDecColumn);
    s->blk = c.take<DecBlk>(g.columns);
    s->keys = c.take<uint8_t>((size_t)g.sort_cols * kDecColumn);
    s->vals_in = c.take<uint32_t>((size_t)g.sort_cols * kDecColumn);
    s->tt = c.take<uint32_t>((size_t)g.sort_cols * kDecColumn);
    s->sp_cap = g.sp_cap;
    s->sp_next = c.take<uint32_t>(g.sp_cap);
    s->sp_len = c.take<uint32_t>(g.sp_cap);
    s->sp_dist = c.take<uint32_t>(g.sp_cap);
    s->rand_map = c.take<uint32_t>(kRandWords);
    s->out = out_round ? c.take<uint8_t>(kDecRoundBytes) : nullptr;
    s->crc_blk = c.take<Bz2Block>(g.columns);
    s->crc_acc = c.take<uint32_t>(g.columns);
    s->cub_bytes = g.cub_bytes;
    s->cub_tmp = c.take<uint8_t>(g.cub_bytes);
    return c.off;
}

/* Where the output goes, a round at a time. */
class DecSink {
  public:
    virtual ~DecSink() {}
    /* room for total bytes of output */
    virtual int reserve(uint64_t total, gc_error *err) = 0;
    /* device memory a round starting at output offset off is expanded into */
    virtual uint8_t *round(uint64_t off) = 0;
    virtual int round_done(uint64_t off, uint64_t len, cudaStream_t st, gc_error *err) = 0;
};

class DeviceSink : public DecSink {
  public:
    DeviceSink(uint8_t *d, size_t cap) : d_(d), cap_(cap) {}
    int reserve(uint64_t total, gc_error *err) override
    {
        if (total > cap_)
            return gc_fail(err, GC_E_LIMIT, "gpu bzip2: the output exceeds the %zu bytes of its buffer", cap_);
        return GC_OK;
    }
    uint8_t *round(uint64_t off) override { return d_ + off; }
    int round_done(uint64_t, uint64_t, cudaStream_t, gc_error *) override { return GC_OK; }

  private:
    uint8_t *d_;
    size_t cap_;
};

class HostSink : public DecSink {
  public:
    HostSink(gc_gpu_job &job, uint8_t *d_round) : job_(job), d_round_(d_round) {}
    int reserve(uint64_t total, gc_error *err) override
    {
        if (total <= job_.dst_cap)
            return GC_OK;
        if (!job_.grow)
            return gc_fail(err, GC_E_LIMIT, "bzip2: decompressed size exceeds the %zu byte limit", job_.dst_cap);
        int rc = job_.grow(&job_, (size_t)total, err);
        if (rc == GC_OK && (job_.dst_cap < total || !job_.dst))
            rc = gc_fail(err, GC_E_INTERNAL, "gpu bzip2: grow gave %zu bytes, not %llu", job_.dst_cap,
                         (unsigned long long)total);
        return rc;
    }
    uint8_t *round(uint64_t) override { return d_round_; }
    int round_done(uint64_t off, uint64_t len, cudaStream_t st, gc_error *err) override
    {
        GC_CUDA(cudaMemcpyAsync(job_.dst + off, d_round_, len, cudaMemcpyDeviceToHost, st));
        GC_CUDA(cudaStreamSynchronize(st));
        return GC_OK;
    }

  private:
    gc_gpu_job &job_;
    uint8_t *d_round_;
};

struct Decoder {
    gc_gpu_ctx *ctx;
    const uint8_t *d_in;
    uint64_t len;
    DecScratch &s;
    DecSink &sink;
    gc_gpu_bzip2_dec_stages st{};
    cudaStream_t stream;
    std::vector<uint64_t> cand;
    std::vector<DecCand> res;
    std::vector<DecAccepted> acc;
    std::vector<DecBlk> blk;
    std::vector<Bz2Block> place;
    bool rand_ready = false;
    uint64_t total = 0;

    Decoder(gc_gpu_ctx *c, const uint8_t *in, uint64_t n, DecScratch &sc, DecSink &sk)
        : ctx(c), d_in(in), len(n), s(sc), sink(sk), stream(c->slots[0].st)
    {
    }

    int peek(uint64_t at, uint8_t out[16], gc_error *err)
    {
        memset(out, 0, 16);
        if (at >= len)
            return GC_OK;
        size_t n = (size_t)std::min<uint64_t>(16, len - at);
        GC_CUDA(cudaMemcpyAsync(ctx->h_small, d_in + at, n, cudaMemcpyDeviceToHost, stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        memcpy(out, ctx->h_small, n);
        return GC_OK;
    }

    int scan(gc_error *err)
    {
        auto t0 = Clock::now();
        uint32_t n = 0;
        int rc = bz2_dec_scan(d_in, len, s, stream, &n, err);
        if (rc != GC_OK)
            return rc;
        cand.resize(n);
        if (n) {
            GC_CUDA(cudaMemcpyAsync(cand.data(), s.cand, n * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
            GC_CUDA(cudaStreamSynchronize(stream));
        }
        st.candidates = n;
        st.scan_ms += ms_since(t0);
        return GC_OK;
    }

    int huffman(uint32_t c0, uint32_t c1, gc_error *err)
    {
        auto t0 = Clock::now();
        int rc = bz2_dec_huff(d_in, len, s.cand + c0, c1 - c0, s, stream, err);
        if (rc != GC_OK)
            return rc;
        res.resize(c1 - c0);
        if (c1 > c0)
            GC_CUDA(cudaMemcpyAsync(res.data(), s.res, (c1 - c0) * sizeof(DecCand), cudaMemcpyDeviceToHost, stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        st.huffman_ms += ms_since(t0);
        return GC_OK;
    }

    int block_error(size_t i, uint32_t e, gc_error *err)
    {
        return gc_fail(err, (gc_status)bz2_dec_status(e), "bzip2: stream %u block %u: %s", acc[i].sno, acc[i].bno,
                       bz2_dec_error(e));
    }

    /* Inverse BWT of the accepted blocks, sort wave by sort wave, and their RLE1 sizes. */
    int invert(uint32_t c0, gc_error *err)
    {
        auto t0 = Clock::now();
        size_t nb = acc.size();
        blk.assign(nb, DecBlk{});
        bool rand = false;
        for (size_t i = 0; i < nb; i++) {
            const DecCand &r = res[acc[i].cand - c0];
            blk[i] = DecBlk{acc[i].cand - c0, r.n,    r.orig, r.rand, 0, r.n / kDecSplitStride + (r.n % kDecSplitStride != 0) + 1,
                            kDecOk,           0,      r.n,    0};
            rand |= r.rand != 0;
        }
        if (rand && !rand_ready) {
            GC_CUDA(cudaMemcpyAsync(s.rand_map, rand_map_host(), kRandWords * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                    stream));
            rand_ready = true;
        }
        std::vector<std::pair<size_t, uint32_t>> waves; /* first block, its splitter total */
        for (size_t a = 0; a < nb;) {
            uint32_t col0 = blk[a].col, sp = 0;
            size_t b = a;
            for (; b < nb && blk[b].col < col0 + s.sort_cols; b++) {
                blk[b].sp_off = sp;
                sp += blk[b].nsp;
            }
            waves.push_back({a, sp});
            a = b;
        }
        GC_CUDA(cudaMemcpyAsync(s.blk, blk.data(), nb * sizeof(DecBlk), cudaMemcpyHostToDevice, stream));
        for (size_t k = 0; k < waves.size(); k++) {
            size_t a = waves[k].first, b = k + 1 < waves.size() ? waves[k + 1].first : nb;
            int rc = bz2_dec_ibwt(s.blk + a, (uint32_t)(b - a), blk[a].col, waves[k].second, s, stream, err);
            if (rc != GC_OK)
                return rc;
        }
        GC_CUDA(cudaStreamSynchronize(stream));
        st.ibwt_ms += ms_since(t0);
        t0 = Clock::now();
        int rc = bz2_dec_rle1_size(s.blk, (uint32_t)nb, s, stream, err);
        if (rc != GC_OK)
            return rc;
        GC_CUDA(cudaMemcpyAsync(blk.data(), s.blk, nb * sizeof(DecBlk), cudaMemcpyDeviceToHost, stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        st.rle1_ms += ms_since(t0);
        for (size_t i = 0; i < nb; i++)
            if (blk[i].status != kDecOk)
                return block_error(i, blk[i].status, err);
        return GC_OK;
    }

    /* One round: blocks [a, b) expanded at output offset total, CRCs checked, handed to the sink. */
    int round(size_t a, size_t b, uint64_t bytes, uint32_t c0, gc_error *err)
    {
        auto t0 = Clock::now();
        place.assign(b - a, Bz2Block{});
        uint64_t o = 0;
        for (size_t i = a; i < b; i++) {
            place[i - a].in_start = (uint32_t)o;
            place[i - a].in_len = blk[i].out_len;
            o += blk[i].out_len;
        }
        GC_CUDA(cudaMemcpyAsync(s.crc_blk, place.data(), place.size() * sizeof(Bz2Block), cudaMemcpyHostToDevice, stream));
        int rc = bz2_dec_rle1_expand(s.blk + a, (uint32_t)(b - a), sink.round(total), bytes, s, ctx->d_tab32, stream, err);
        if (rc != GC_OK)
            return rc;
        GC_CUDA(cudaMemcpyAsync(place.data(), s.crc_blk, place.size() * sizeof(Bz2Block), cudaMemcpyDeviceToHost, stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        st.rle1_ms += ms_since(t0);
        for (size_t i = a; i < b; i++) {
            uint32_t stored = res[acc[i].cand - c0].crc;
            if (place[i - a].crc != stored)
                return gc_fail(err, GC_E_CRC, "bzip2: stream %u block %u: block CRC mismatch (stored 0x%08x, computed 0x%08x)",
                               acc[i].sno, acc[i].bno, stored, place[i - a].crc);
        }
        t0 = Clock::now();
        rc = sink.round_done(total, bytes, stream, err);
        st.output_ms += ms_since(t0);
        total += bytes;
        return rc;
    }

    int output(uint32_t c0, gc_error *err)
    {
        uint64_t sum = 0;
        for (const DecBlk &b : blk)
            sum += b.out_len;
        int rc = sink.reserve(total + sum, err);
        for (size_t a = 0; rc == GC_OK && a < blk.size();) {
            size_t b = a;
            uint64_t bytes = 0;
            while (b < blk.size() && (b == a || bytes + blk[b].out_len <= kDecRoundBytes) && b - a < s.columns)
                bytes += blk[b++].out_len;
            rc = round(a, b, bytes, c0, err);
            a = b;
        }
        st.blocks += blk.size();
        return rc;
    }

    int run(uint64_t *out_len, gc_error *err)
    {
        int rc = scan(err);
        if (rc != GC_OK)
            return rc;
        DecWalk w;
        w.len_bits = len * 8;
        DecPeek pk = [this](uint64_t at, uint8_t out[16], gc_error *e) { return peek(at, out, e); };
        uint32_t ncand = (uint32_t)cand.size(), c0 = 0;
        for (;;) {
            uint32_t c1 = std::min<uint32_t>(ncand, c0 + s.columns), next = UINT32_MAX;
            st.waves++;
            rc = huffman(c0, c1, err);
            acc.clear();
            auto t0 = Clock::now();
            if (rc == GC_OK)
                rc = bz2_dec_walk(w, cand.data(), ncand, c0, c1, res.data(), pk, acc, &next, err);
            st.walk_ms += ms_since(t0);
            if (rc == GC_OK && !acc.empty())
                rc = invert(c0, err);
            if (rc == GC_OK && !acc.empty())
                rc = output(c0, err);
            if (rc != GC_OK)
                return rc;
            if (w.done)
                break;
            if (next == UINT32_MAX || next < c1)
                return gc_fail(err, GC_E_INTERNAL, "gpu bzip2: the framing walk stopped at candidate %u", next);
            c0 = next;
        }
        st.streams = w.sno;
        *out_len = total;
        return GC_OK;
    }
};

int scratch_for(gc_gpu_ctx *ctx, uint64_t in_len, bool host, DecScratch *s, gc_error *err)
{
    Geometry g{};
    int rc = geometry(in_len, &g, err);
    if (rc != GC_OK)
        return rc;
    Carver sizer{nullptr};
    size_t need = carve(sizer, g, in_len, host, host, s);
    if (!device_grow(&ctx->d_work, &ctx->work_cap, need))
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: no device memory for %zu bytes of decoder scratch", need);
    Carver c{ctx->d_work};
    carve(c, g, in_len, host, host, s);
    return GC_OK;
}

} // namespace

int bz2_dec_scratch_bytes(uint64_t in_len, bool copy_in, bool out_round, size_t *bytes, gc_error *err)
{
    Geometry g{};
    int rc = geometry(in_len, &g, err);
    DecScratch s;
    Carver c{nullptr};
    *bytes = rc == GC_OK ? carve(c, g, in_len, copy_in, out_round, &s) : 0;
    return rc;
}

int bz2_dec_carve(void *base, size_t len, uint64_t in_len, bool copy_in, bool out_round, DecScratch *s, gc_error *err)
{
    Geometry g{};
    int rc = geometry(in_len, &g, err);
    if (rc != GC_OK)
        return rc;
    Carver c{static_cast<uint8_t *>(base)};
    if (carve(c, g, in_len, copy_in, out_round, s) > len)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: %zu bytes of scratch are too few", len);
    return GC_OK;
}

/* A batch job, whole: input to the device, decode, output rounds to the
 * caller's buffer (grown through job.grow). The job's own problems are its
 * status; GC_E_DEVICE (err) fails the batch. */
int bz2_decode_job(gc_gpu_ctx *ctx, gc_gpu_job &job, gc_error *err)
{
    job.status = GC_OK;
    job.dst_len = 0;
    gc_error_clear(&job.err);
    if ((!job.src && job.src_len) || (!job.dst && !job.grow)) {
        job.status = gc_fail(&job.err, GC_E_INVALID, "gpu bzip2: decode job without a buffer");
        return GC_OK;
    }
    DecScratch s;
    int rc = scratch_for(ctx, job.src_len, true, &s, &job.err);
    if (rc == GC_OK && job.src_len) {
        cudaStream_t st = ctx->slots[0].st;
        cudaError_t e = cudaMemcpyAsync(s.in, job.src, job.src_len, cudaMemcpyHostToDevice, st);
        if (e != cudaSuccess)
            rc = gc_fail(&job.err, GC_E_DEVICE, "cuda: input copy: %s", cudaGetErrorString(e));
    }
    uint64_t out = 0;
    if (rc == GC_OK) {
        HostSink sink(job, s.out);
        Decoder d(ctx, s.in, job.src_len, s, sink);
        rc = d.run(&out, &job.err);
    }
    if (rc == GC_E_DEVICE) {
        *err = job.err;
        return rc;
    }
    job.status = rc;
    job.dst_len = rc == GC_OK ? (size_t)out : 0;
    return GC_OK;
}

} // namespace gcgpu

using namespace gcgpu;

extern "C" int gc_gpu_bzip2_decode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, void *d_dst,
                                          size_t dst_cap, size_t *dst_len, gc_gpu_bzip2_dec_stages *stages,
                                          gc_error *err)
{
    if (!ctx || !dst_len || (!d_src && src_len) || (!d_dst && dst_cap) || ((uintptr_t)d_src & 3))
        return gc_fail(err, GC_E_INVALID, "gpu bzip2: decode: missing or misaligned argument");
    *dst_len = 0;
    pthread_mutex_lock(&ctx->mu);
    int rc = ctx_use(ctx, err);
    if (rc == GC_OK)
        rc = order_after_legacy(ctx, err);
    DecScratch s;
    if (rc == GC_OK)
        rc = scratch_for(ctx, src_len, false, &s, err);
    uint64_t out = 0;
    if (rc == GC_OK) {
        DeviceSink sink(static_cast<uint8_t *>(d_dst), dst_cap);
        Decoder d(ctx, static_cast<const uint8_t *>(d_src), src_len, s, sink);
        rc = d.run(&out, err);
        if (stages)
            *stages = d.st;
    }
    pthread_mutex_unlock(&ctx->mu);
    if (rc == GC_OK) {
        *dst_len = (size_t)out;
        gc_error_clear(err);
    }
    return rc;
}
