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
#include "bz2_dec_huff.cuh"
#include "bz2_dec_walk.cuh"
#include "gpu_pipeline.cuh"

namespace gcgpu {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr uint32_t kRandWords = (BZ2_MAX_BLOCK + 31) / 32;

/* Bit k: byte k of a randomised block is flipped (bz2_rand_next's sequence). */
const uint32_t *rand_map_host()
{
    static uint32_t map[kRandWords];
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] {
        bz2_rand r;
        bz2_rand_init(&r);
        for (uint32_t k = 0; k < BZ2_MAX_BLOCK; k++)
            if (bz2_rand_next(&r))
                map[k / 32] |= 1u << (k % 32);
    });
    return map;
}

/* Carves aligned regions off a base (null base: only sums the sizes). */
struct Carver {
    uint8_t *base;
    size_t off = 0;
    template <typename T>
    T *take(size_t count)
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
    uint64_t cols = std::min<uint64_t>(kDecMaxColumns, in_len / 16 + kDecMaxJobs);
    g->columns = (uint32_t)cols;
    g->sort_cols = std::min<uint32_t>(kDecSortColumns, g->columns);
    g->cand_cap = (uint32_t)std::min<uint64_t>(in_len / 6 + 64, 1u << 20);
    g->sp_cap = g->sort_cols * (BZ2_MAX_BLOCK / kDecSplitStride + 2);
    return bz2_dec_scan_tmp(g->cand_cap, &g->cub_bytes, err);
}

size_t carve(Carver &c, const Geometry &g, uint64_t in_len, bool copy_in, bool out_round, DecScratch *s)
{
    *s = DecScratch{};
    s->in_cap = copy_in ? in_len : 0;
    s->in = copy_in ? c.take<uint8_t>(in_len + 16 * kDecMaxJobs) : nullptr;
    s->cand_cap = g.cand_cap;
    s->cand = c.take<uint64_t>(g.cand_cap);
    s->cand_tmp = c.take<uint64_t>(g.cand_cap);
    s->cand_job = c.take<uint32_t>(g.cand_cap);
    s->jobs = c.take<DecInput>(kDecMaxJobs);
    s->n_cand = c.take<uint32_t>(1);
    s->columns = g.columns;
    s->sort_cols = g.sort_cols;
    s->res = c.take<DecCand>(g.columns);
    s->cols = c.take<uint8_t>((size_t)g.columns * BZ2_MAX_BLOCK);
    s->sel = c.take<uint8_t>((size_t)g.columns * kDecSelBytes);
    s->tabs = c.take<HuffTab>(g.columns);
    s->hw = c.take<DecHuffWalk>(g.columns);
    s->seg_bit = c.take<uint64_t>((size_t)g.columns * kDecMaxSegs);
    s->seg_count = c.take<uint32_t>((size_t)g.columns * kDecMaxSegs);
    s->seg_off = c.take<uint32_t>((size_t)g.columns * kDecMaxSegs);
    s->seg_list = c.take<uint8_t>((size_t)g.columns * kDecMaxSegs * 256);
    s->err_key = c.take<unsigned long long>(g.columns);
    s->blk = c.take<DecBlk>(g.columns);
    s->tt = c.take<uint32_t>((size_t)g.sort_cols * BZ2_MAX_BLOCK);
    s->lf_hist = c.take<uint32_t>((size_t)g.sort_cols * kDecLfTiles * 256);
    s->sp_cap = g.sp_cap;
    s->sp_next = c.take<uint32_t>(g.sp_cap);
    s->sp_len = c.take<uint32_t>(g.sp_cap);
    s->sp_dist = c.take<uint32_t>(g.sp_cap);
    s->r1_map = c.take<uint32_t>((size_t)g.columns * kDecRle1Chunks);
    s->r1_size = c.take<uint32_t>((size_t)g.columns * kDecRle1Chunks * 5);
    s->r1_state = c.take<uint32_t>((size_t)g.columns * kDecRle1Chunks);
    s->r1_off = c.take<uint32_t>((size_t)g.columns * kDecRle1Chunks);
    s->rand_map = c.take<uint32_t>(kRandWords);
    s->out = out_round ? c.take<uint8_t>(kDecRoundBytes) : nullptr;
    s->crc_blk = c.take<Bz2Block>(g.columns);
    s->crc_acc = c.take<uint32_t>(g.columns);
    s->cub_bytes = g.cub_bytes;
    s->cub_tmp = c.take<uint8_t>(g.cub_bytes);
    return c.off;
}

/*
 * Host memory to and from the device through the context's pinned slot
 * buffers and its copy pool (the pipeline is idle while a whole job runs),
 * two chunks in flight: one slot's staging copy runs while the other's DMA
 * does. Page-locked caller memory (a registered memfd) goes straight over
 * DMA.
 */
int copy_in(gc_gpu_ctx *ctx, uint8_t *d, const uint8_t *h, uint64_t len, gc_error *err)
{
    if (len == 0)
        return GC_OK;
    if (host_pinned(h) && host_pinned(h + len - 1)) {
        GC_CUDA(cudaMemcpyAsync(d, h, len, cudaMemcpyHostToDevice, ctx->slots[0].st));
        GC_CUDA(cudaStreamSynchronize(ctx->slots[0].st));
        return GC_OK;
    }
    size_t nbuf = std::min<size_t>(2, ctx->slots.size());
    CopyTask t;
    for (uint64_t o = 0, k = 0; o < len; o += ctx->in_cap, k++) {
        Slot &sl = ctx->slots[k % nbuf];
        size_t n = (size_t)std::min<uint64_t>(ctx->in_cap, len - o);
        GC_CUDA(cudaStreamSynchronize(sl.st)); /* its h_in is free again */
        copy_pool_submit(ctx->pool, &t, sl.h_in, h + o, n);
        copy_task_wait(ctx->pool, &t);
        GC_CUDA(cudaMemcpyAsync(d + o, sl.h_in, n, cudaMemcpyHostToDevice, sl.st));
    }
    for (size_t i = 0; i < nbuf; i++)
        GC_CUDA(cudaStreamSynchronize(ctx->slots[i].st));
    return GC_OK;
}

int copy_out(gc_gpu_ctx *ctx, uint8_t *h, const uint8_t *d, uint64_t len, gc_error *err)
{
    if (len == 0)
        return GC_OK;
    GC_CUDA(cudaStreamSynchronize(ctx->slots[0].st)); /* d was written there */
    if (host_pinned(h) && host_pinned(h + len - 1)) {
        GC_CUDA(cudaMemcpyAsync(h, d, len, cudaMemcpyDeviceToHost, ctx->slots[0].st));
        GC_CUDA(cudaStreamSynchronize(ctx->slots[0].st));
        return GC_OK;
    }
    size_t nbuf = std::min<size_t>(2, ctx->slots.size());
    CopyTask t[2];
    int rc = GC_OK;
    for (uint64_t o = 0, k = 0; rc == GC_OK && o < len; o += ctx->out_cap, k++) {
        Slot &sl = ctx->slots[k % nbuf];
        CopyTask &tk = t[k % nbuf];
        size_t n = (size_t)std::min<uint64_t>(ctx->out_cap, len - o);
        if (k >= nbuf)
            copy_task_wait(ctx->pool, &tk); /* its h_out is free again */
        cudaError_t e = cudaMemcpyAsync(sl.h_out, d + o, n, cudaMemcpyDeviceToHost, sl.st);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(sl.st);
        if (e != cudaSuccess) {
            rc = gc_fail(err, GC_E_DEVICE, "cuda: output copy: %s", cudaGetErrorString(e));
            break;
        }
        copy_pool_submit(ctx->pool, &tk, h + o, sl.h_out, n);
    }
    /* no copy may touch the caller's memory after we return */
    for (uint64_t k = 0; k < nbuf && k * ctx->out_cap < len; k++)
        copy_task_wait(ctx->pool, &t[k]);
    return rc;
}

/* Where the output goes, a round at a time. */
class DecSink {
  public:
    virtual ~DecSink()
    {
    }
    /* room for total bytes of output */
    virtual int reserve(uint64_t total, gc_error *err) = 0;
    /* device memory a round starting at output offset off is expanded into */
    virtual uint8_t *round(uint64_t off) = 0;
    virtual int round_done(uint64_t off, uint64_t len, cudaStream_t st, gc_error *err) = 0;
};

class DeviceSink : public DecSink {
  public:
    DeviceSink(uint8_t *d, size_t cap) : d_(d), cap_(cap)
    {
    }
    int reserve(uint64_t total, gc_error *err) override
    {
        if (total > cap_)
            return gc_fail(err, GC_E_LIMIT, "gpu bzip2: the output exceeds the %zu bytes of its buffer", cap_);
        return GC_OK;
    }
    uint8_t *round(uint64_t off) override
    {
        return d_ + off;
    }
    int round_done(uint64_t, uint64_t, cudaStream_t, gc_error *) override
    {
        return GC_OK;
    }

  private:
    uint8_t *d_;
    size_t cap_;
};

class HostSink : public DecSink {
  public:
    HostSink(gc_gpu_ctx *ctx, gc_gpu_job &job, uint8_t *d_round) : ctx_(ctx), job_(job), d_round_(d_round)
    {
    }
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
    uint8_t *round(uint64_t) override
    {
        return d_round_;
    }
    int round_done(uint64_t off, uint64_t len, cudaStream_t, gc_error *err) override
    {
        return copy_out(ctx_, job_.dst + off, d_round_, len, err);
    }

  private:
    gc_gpu_ctx *ctx_;
    gc_gpu_job &job_;
    uint8_t *d_round_;
};

/* One job of a group: its input on the device, its walk, its output. */
struct JobRun {
    gc_gpu_job *job = nullptr; /* null: device-resident */
    DecInput in{};
    DecSink *sink = nullptr;
    DecWalk w;
    uint32_t c_first = 0, c_count = 0; /* its candidates in the group's arrays */
    int status = GC_OK;
    gc_error err{};
    uint64_t total = 0;
    size_t acc0 = 0, acc1 = 0; /* its blocks in the wave's accepted list */
};

/*
 * Decodes a group of jobs together: every job's candidates in one Huffman
 * launch, every accepted block in the same inverse-BWT and RLE1 launches.
 * A single job with more candidates than the scratch holds goes in waves.
 * A job's own problems end that job (status, err); a CUDA failure ends the
 * group (the return value).
 */
struct Decoder {
    gc_gpu_ctx *ctx;
    DecScratch &s;
    std::vector<JobRun> &jobs;
    gc_gpu_bzip2_dec_stages st{};
    cudaStream_t stream;
    std::vector<uint64_t> cand; /* job-relative bit offsets, job after job */
    std::vector<DecCand> res;
    std::vector<DecAccepted> acc;
    std::vector<DecBlk> blk;
    std::vector<Bz2Block> place;
    bool rand_ready = false;
    bool overflow = false;

    Decoder(gc_gpu_ctx *c, DecScratch &sc, std::vector<JobRun> &j) : ctx(c), s(sc), jobs(j), stream(c->slots[0].st)
    {
    }

    static bool device_failed(int rc)
    {
        return rc == GC_E_DEVICE;
    }

    /* A job-level failure: recorded on the job; a device failure goes up. */
    int job_fail(JobRun &j, int rc, const gc_error &e)
    {
        if (device_failed(rc))
            return rc;
        if (j.status == GC_OK) {
            j.status = rc;
            j.err = e;
        }
        return GC_OK;
    }

    int peek(const JobRun &j, uint64_t at, uint8_t out[16], gc_error *err)
    {
        memset(out, 0, 16);
        if (at >= j.in.len)
            return GC_OK;
        size_t n = (size_t)std::min<uint64_t>(16, j.in.len - at);
        GC_CUDA(cudaMemcpyAsync(ctx->h_small, j.in.in + at, n, cudaMemcpyDeviceToHost, stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        memcpy(out, ctx->h_small, n);
        return GC_OK;
    }

    /* Every job's candidates, job after job, and the job table. */
    int scan(gc_error *err)
    {
        auto t0 = Clock::now();
        std::vector<DecInput> table;
        std::vector<uint32_t> owner;
        uint32_t total = 0;
        for (size_t k = 0; k < jobs.size(); k++) {
            JobRun &j = jobs[k];
            table.push_back(j.in);
            j.c_first = total;
            uint32_t n = 0;
            gc_error e{};
            int rc = bz2_dec_scan(j.in.in, j.in.len, s, s.cand + total, s.cand_cap - total, stream, &n, &e);
            if (rc != GC_OK) {
                if (job_fail(j, rc, e) != GC_OK)
                    return gc_fail(err, (gc_status)rc, "%s", e.msg);
                n = 0;
            }
            j.c_count = n;
            total += n;
            owner.insert(owner.end(), n, (uint32_t)k);
        }
        cand.resize(total);
        if (total) {
            GC_CUDA(
                cudaMemcpyAsync(cand.data(), s.cand, total * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
            GC_CUDA(cudaMemcpyAsync(s.cand_job, owner.data(), total * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                    stream));
        }
        GC_CUDA(cudaMemcpyAsync(s.jobs, table.data(), table.size() * sizeof(DecInput), cudaMemcpyHostToDevice,
                                stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        st.candidates += total;
        st.scan_ms += ms_since(t0);
        return GC_OK;
    }

    int huffman(uint32_t c0, uint32_t c1, gc_error *err)
    {
        auto t0 = Clock::now();
        int rc = bz2_dec_huff(s.jobs, s.cand + c0, s.cand_job + c0, c1 - c0, s, stream, err);
        if (rc != GC_OK)
            return rc;
        res.resize(c1 - c0);
        if (c1 > c0)
            GC_CUDA(
                cudaMemcpyAsync(res.data(), s.res, (c1 - c0) * sizeof(DecCand), cudaMemcpyDeviceToHost, stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        st.huffman_ms += ms_since(t0);
        return GC_OK;
    }

    /* Job k's walk over the wave [c0, c1); *next: the group candidate its walk needs next (or none). */
    int walk(size_t k, uint32_t c0, uint32_t c1, uint32_t *next, gc_error *err)
    {
        JobRun &j = jobs[k];
        *next = UINT32_MAX;
        if (j.status != GC_OK || j.w.done)
            return GC_OK;
        uint32_t a = std::max(c0, j.c_first), e = std::min(c1, j.c_first + j.c_count);
        if (a > e)
            a = e;
        DecPeek pk = [this, &j](uint64_t at, uint8_t out[16], gc_error *pe) { return peek(j, at, out, pe); };
        size_t first = acc.size();
        uint32_t nx = UINT32_MAX;
        gc_error je{};
        int rc = bz2_dec_walk(j.w, cand.data() + j.c_first, j.c_count, a - j.c_first, e - j.c_first,
                              res.data() + (a - c0), pk, acc, &nx, &je);
        for (size_t i = first; i < acc.size(); i++) {
            acc[i].cand += j.c_first; /* group index */
            acc[i].job = (uint32_t)k;
        }
        if (rc != GC_OK) {
            acc.resize(first);
            if (device_failed(rc))
                return gc_fail(err, (gc_status)rc, "%s", je.msg);
            return job_fail(j, rc, je);
        }
        if (nx != UINT32_MAX)
            *next = nx + j.c_first;
        j.acc0 = first;
        j.acc1 = acc.size();
        return GC_OK;
    }

    int block_fail(size_t i, int code, uint32_t e, gc_error *detail)
    {
        JobRun &j = jobs[acc[i].job];
        gc_error je{};
        if (detail)
            je = *detail;
        else
            gc_fail(&je, (gc_status)code, "bzip2: stream %u block %u: %s", acc[i].sno, acc[i].bno,
                    bz2_dec_error(e));
        return job_fail(j, code, je);
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
            blk[i] = DecBlk{
                acc[i].cand - c0, r.n, r.orig, r.rand, 0, r.n / kDecSplitStride + (r.n % kDecSplitStride != 0) + 1,
                kDecOk,           0,   r.n,    0
            };
            rand |= r.rand != 0;
        }
        if (rand && !rand_ready) {
            GC_CUDA(cudaMemcpyAsync(s.rand_map, rand_map_host(), kRandWords * sizeof(uint32_t),
                                    cudaMemcpyHostToDevice, stream));
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
            waves.push_back({ a, sp });
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
            if (blk[i].status != kDecOk &&
                (rc = block_fail(i, bz2_dec_status(blk[i].status), blk[i].status, nullptr)))
                return rc;
        return GC_OK;
    }

    /* One round of job j: blocks [a, b) expanded at its output offset, CRCs checked, handed to its sink. */
    int round(JobRun &j, size_t a, size_t b, uint64_t bytes, uint32_t c0, gc_error *err)
    {
        auto t0 = Clock::now();
        place.assign(b - a, Bz2Block{});
        uint64_t o = 0;
        for (size_t i = a; i < b; i++) {
            place[i - a].in_start = (uint32_t)o;
            place[i - a].in_len = blk[i].out_len;
            o += blk[i].out_len;
        }
        GC_CUDA(cudaMemcpyAsync(s.crc_blk, place.data(), place.size() * sizeof(Bz2Block), cudaMemcpyHostToDevice,
                                stream));
        int rc = bz2_dec_rle1_expand(s.blk + a, (uint32_t)(b - a), j.sink->round(j.total), bytes, s, ctx->d_tab32,
                                     stream, err);
        if (rc != GC_OK)
            return rc;
        GC_CUDA(cudaMemcpyAsync(place.data(), s.crc_blk, place.size() * sizeof(Bz2Block), cudaMemcpyDeviceToHost,
                                stream));
        GC_CUDA(cudaStreamSynchronize(stream));
        st.rle1_ms += ms_since(t0);
        for (size_t i = a; i < b; i++) {
            uint32_t stored = res[acc[i].cand - c0].crc;
            if (place[i - a].crc != stored) {
                gc_error e{};
                gc_fail(&e, GC_E_CRC,
                        "bzip2: stream %u block %u: block CRC mismatch (stored 0x%08x, computed 0x%08x)",
                        acc[i].sno, acc[i].bno, stored, place[i - a].crc);
                return block_fail(i, GC_E_CRC, kDecCrc, &e);
            }
        }
        t0 = Clock::now();
        gc_error e{};
        rc = j.sink->round_done(j.total, bytes, stream, &e);
        st.output_ms += ms_since(t0);
        if (rc != GC_OK)
            return job_fail(j, rc, e) != GC_OK ? gc_fail(err, (gc_status)rc, "%s", e.msg) : GC_OK;
        j.total += bytes;
        return GC_OK;
    }

    /* Job j's blocks of this wave to its output. */
    int output(JobRun &j, uint32_t c0, gc_error *err)
    {
        if (j.status != GC_OK || j.acc0 == j.acc1)
            return GC_OK;
        uint64_t sum = 0;
        for (size_t i = j.acc0; i < j.acc1; i++)
            sum += blk[i].out_len;
        gc_error e{};
        int rc = j.sink->reserve(j.total + sum, &e);
        if (rc != GC_OK)
            return job_fail(j, rc, e) != GC_OK ? gc_fail(err, (gc_status)rc, "%s", e.msg) : GC_OK;
        for (size_t a = j.acc0; a < j.acc1 && j.status == GC_OK;) {
            size_t b = a;
            uint64_t bytes = 0;
            while (b < j.acc1 && (b == a || bytes + blk[b].out_len <= kDecRoundBytes))
                bytes += blk[b++].out_len;
            rc = round(j, a, b, bytes, c0, err);
            if (rc != GC_OK)
                return rc;
            a = b;
        }
        st.blocks += j.acc1 - j.acc0;
        return GC_OK;
    }

    /* One wave [c0, c1): *next is where a single job's walk goes on (none: every job is done). */
    int wave(uint32_t c0, uint32_t c1, uint32_t *next, gc_error *err)
    {
        st.waves++;
        int rc = huffman(c0, c1, err);
        if (rc != GC_OK)
            return rc;
        acc.clear();
        auto t0 = Clock::now();
        *next = UINT32_MAX;
        for (size_t k = 0; k < jobs.size(); k++) {
            uint32_t nx = UINT32_MAX;
            rc = walk(k, c0, c1, &nx, err);
            if (rc != GC_OK)
                return rc;
            if (nx != UINT32_MAX)
                *next = std::min(*next, nx);
        }
        st.walk_ms += ms_since(t0);
        if (!acc.empty() && (rc = invert(c0, err)) != GC_OK)
            return rc;
        for (JobRun &j : jobs)
            if ((rc = output(j, c0, err)) != GC_OK)
                return rc;
        return GC_OK;
    }

    /* A stream's part resumes where the previous one stopped (gc_gpu_job.part). */
    static void resume(JobRun &j)
    {
        j.w.len_bits = j.in.len * 8;
        if (j.job && j.job->partial)
            bz2_dec_walk_resume(j.w, j.job->part, j.job->part_more != 0);
    }

    int run(gc_error *err)
    {
        for (JobRun &j : jobs)
            resume(j);
        int rc = scan(err);
        if (rc != GC_OK)
            return rc;
        if (jobs.size() > 1 && cand.size() > s.columns) {
            overflow = true; /* waves are for one job at a time: the caller splits the group */
            return GC_OK;
        }
        uint32_t ncand = (uint32_t)cand.size(), c0 = 0;
        for (;;) {
            uint32_t c1 = std::min<uint32_t>(ncand, c0 + s.columns), next = UINT32_MAX;
            rc = wave(c0, c1, &next, err);
            if (rc != GC_OK)
                return rc;
            bool open = false;
            for (JobRun &j : jobs)
                open |= j.status == GC_OK && !j.w.done;
            if (!open)
                break;
            if (next == UINT32_MAX || next < c1) {
                for (JobRun &j : jobs)
                    if (j.status == GC_OK && !j.w.done) {
                        gc_error e{};
                        gc_fail(&e, GC_E_INTERNAL, "gpu bzip2: the framing walk stopped");
                        job_fail(j, GC_E_INTERNAL, e);
                    }
                break;
            }
            c0 = next;
        }
        for (JobRun &j : jobs)
            st.streams += j.w.sno;
        return GC_OK;
    }
};

int scratch_for(gc_gpu_ctx *ctx, uint64_t in_len, bool host, DecScratch *s, gc_error *err)
{
    Geometry g{};
    int rc = geometry(in_len, &g, err);
    if (rc != GC_OK)
        return rc;
    Carver sizer{ nullptr };
    size_t need = carve(sizer, g, in_len, host, host, s);
    if (!device_grow(&ctx->d_work, &ctx->work_cap, need))
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: no device memory for %zu bytes of decoder scratch", need);
    Carver c{ ctx->d_work };
    carve(c, g, in_len, host, host, s);
    return GC_OK;
}

void finish_job(JobRun &r)
{
    gc_gpu_job &job = *r.job;
    job.status = r.status;
    if (r.status != GC_OK)
        job.err = r.err;
    job.dst_len = r.status == GC_OK ? (size_t)r.total : 0;
    if (r.status == GC_OK && job.partial)
        bz2_dec_walk_part(r.w, job.src_len, &job.part, &job.part_used);
}

/* Jobs [0, n) together (n <= kDecMaxJobs): inputs to the device, one decode. */
int decode_group(gc_gpu_ctx *ctx, gc_gpu_job **jobs, size_t n, gc_gpu_batch_stats *bs, gc_error *err)
{
    auto t_group = Clock::now();
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += (jobs[k]->src_len + 15) & ~15ull;
    DecScratch s;
    gc_error e{};
    int rc = scratch_for(ctx, total, true, &s, &e);
    if (rc != GC_OK) {
        for (size_t k = 0; k < n; k++) {
            jobs[k]->status = rc;
            jobs[k]->err = e;
        }
        return GC_OK;
    }
    std::vector<JobRun> runs(n);
    std::vector<HostSink> sinks;
    sinks.reserve(n);
    uint64_t off = 0;
    for (size_t k = 0; k < n; k++) {
        gc_gpu_job &job = *jobs[k];
        sinks.emplace_back(ctx, job, s.out);
        runs[k].job = &job;
        runs[k].sink = &sinks[k];
        runs[k].in = DecInput{ s.in + off, job.src_len };
        auto t0 = Clock::now();
        rc = copy_in(ctx, s.in + off, job.src, job.src_len, err);
        if (rc != GC_OK)
            return rc;
        bs->h2d_ms += ms_since(t0);
        bs->h2d_bytes += job.src_len;
        off += (job.src_len + 15) & ~15ull;
    }
    Decoder d(ctx, s, runs);
    rc = d.run(err);
    if (rc != GC_OK)
        return rc;
    /* a group whose candidates overflowed the scratch: each job alone (with waves) */
    if (d.overflow) {
        for (size_t k = 0; k < n && rc == GC_OK; k++)
            rc = decode_group(ctx, jobs + k, 1, bs, err);
        return rc;
    }
    bs->kernel_ms += d.st.scan_ms + d.st.huffman_ms + d.st.ibwt_ms + d.st.rle1_ms;
    bs->d2h_ms += d.st.output_ms;
    bs->pieces++;
    for (JobRun &r : runs) {
        finish_job(r);
        bs->d2h_bytes += r.job->dst_len;
    }
    bs->wall_ms += ms_since(t_group);
    return GC_OK;
}

} // namespace

int bz2_dec_scratch_bytes(uint64_t in_len, bool copy_in, bool out_round, size_t *bytes, gc_error *err)
{
    Geometry g{};
    int rc = geometry(in_len, &g, err);
    DecScratch s;
    Carver c{ nullptr };
    *bytes = rc == GC_OK ? carve(c, g, in_len, copy_in, out_round, &s) : 0;
    return rc;
}

int bz2_dec_carve(void *base, size_t len, uint64_t in_len, bool copy_in, bool out_round, DecScratch *s,
                  gc_error *err)
{
    Geometry g{};
    int rc = geometry(in_len, &g, err);
    if (rc != GC_OK)
        return rc;
    Carver c{ static_cast<uint8_t *>(base) };
    if (carve(c, g, in_len, copy_in, out_round, s) > len)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: %zu bytes of scratch are too few", len);
    return GC_OK;
}

int bz2_decode_jobs(gc_gpu_ctx *ctx, gc_gpu_job **jobs, size_t n, gc_gpu_batch_stats *st, gc_error *err)
{
    for (size_t k = 0; k < n; k++) {
        jobs[k]->status = GC_OK;
        jobs[k]->dst_len = 0;
        gc_error_clear(&jobs[k]->err);
    }
    std::vector<gc_gpu_job *> ok;
    for (size_t k = 0; k < n; k++) {
        if (!jobs[k]->src && jobs[k]->src_len)
            jobs[k]->status = gc_fail(&jobs[k]->err, GC_E_INVALID, "gpu bzip2: decode job without its input");
        else
            ok.push_back(jobs[k]);
    }
    for (size_t a = 0; a < ok.size();) {
        size_t b = a;
        uint64_t in = 0;
        while (b < ok.size() && b - a < kDecMaxJobs && (b == a || in + ok[b]->src_len <= kDecGroupInput))
            in += ok[b++]->src_len;
        int rc = decode_group(ctx, ok.data() + a, b - a, st, err);
        if (rc != GC_OK)
            return rc;
        a = b;
    }
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
        std::vector<JobRun> runs(1);
        runs[0].in = DecInput{ static_cast<const uint8_t *>(d_src), src_len };
        runs[0].sink = &sink;
        Decoder d(ctx, s, runs);
        rc = d.run(err);
        if (rc == GC_OK && runs[0].status != GC_OK) {
            rc = runs[0].status;
            *err = runs[0].err;
        }
        out = runs[0].total;
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
