/*
 * rle_pipeline.cu - the per-device context and the batched, stream-overlapped
 * host pipeline behind gc_gpu_rle_run_batch, plus the device-resident entry
 * points.
 *
 * Jobs are cut into pieces of whole chunks that fit one slot (a stream with
 * its own pinned staging and device buffers, allocated once in gc_gpu_open).
 * Pieces go round-robin over the slots; per piece the host queues H2D,
 * kernels and (encode) a small D2H of the record sizes, then, while the GPU
 * works on that, it waits for the previous piece's kernels, learns its output
 * size and queues its D2H. So H2D of piece k+1, kernels of piece k and D2H of
 * piece k-1 run at once on different streams. Each piece is timed with events.
 * Frame headers and header CRCs are made on the host (a few bytes per chunk);
 * the device never sees a frame header in the batch path.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "gpu_internal.cuh"
extern "C" {
#include "crc32c.h"
}

using namespace gcgpu;

namespace {

constexpr uint64_t kMaxPieceChunks = 1u << 16;

struct Slot {
    cudaStream_t st = nullptr;
    uint8_t *h_in = nullptr, *h_out = nullptr, *h_meta = nullptr;
    uint8_t *d_in = nullptr, *d_out = nullptr, *d_idx = nullptr, *d_scr = nullptr;
    cudaEvent_t e_h0 = nullptr, e_h1 = nullptr, e_k1 = nullptr, e_m1 = nullptr, e_d0 = nullptr, e_d1 = nullptr;
    int state = 0; /* 0 idle, 1 kernels queued, 2 output copy queued */
    bool used = false;
    /* the piece in flight */
    size_t job = 0;
    uint64_t c0 = 0, n = 0, body = 0, rec_len = 0;
    uint64_t out_off = 0, out_len = 0;
    bool staged_out = false;
    unsigned long long *d_total = nullptr;
    uint32_t *d_status = nullptr;
};

struct JobState {
    bool pinned_src = false, pinned_dst = false;
    unsigned width = 1;
    uint32_t cs = 0;
    uint64_t body = 0, cc = 0, next_chunk = 0, rec_cursor = 0, done_chunks = 0;
    uint64_t header_size = 0, records_written = 0;
    const uint8_t *index = nullptr; /* decode: the frame's index (host) */
    rle_frame_info info{};
    bool failed = false;
};

bool is_pinned(const void *p)
{
    if (!p)
        return false;
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

} // namespace

struct gc_gpu_ctx {
    int dev = 0;
    unsigned ns = 0;
    size_t batch = 0, in_cap = 0, out_cap = 0, idx_cap = 0, scr_cap = 0;
    CrcTables *d_tab = nullptr;
    pthread_mutex_t mu;
    std::vector<Slot> slots;
    cudaEvent_t e_begin = nullptr, e_legacy = nullptr;
    uint8_t *h_small = nullptr; /* pinned, for the *_device calls */
};

namespace {

int ctx_use(gc_gpu_ctx *ctx, gc_error *err)
{
    GC_CUDA(cudaSetDevice(ctx->dev));
    return GC_OK;
}

/* The context's streams are non-blocking: make stream 0 wait for work the
 * caller queued on the legacy default stream (cudaMemset, kernels without a
 * stream), as a synchronous API would. */
int order_after_legacy(gc_gpu_ctx *ctx, gc_error *err)
{
    GC_CUDA(cudaEventRecord(ctx->e_legacy, cudaStreamLegacy));
    GC_CUDA(cudaStreamWaitEvent(ctx->slots[0].st, ctx->e_legacy, 0));
    return GC_OK;
}

void ctx_free(gc_gpu_ctx *ctx)
{
    if (!ctx)
        return;
    (void)cudaSetDevice(ctx->dev);
    for (Slot &s : ctx->slots) {
        if (s.st)
            (void)cudaStreamSynchronize(s.st);
        cudaFreeHost(s.h_in);
        cudaFreeHost(s.h_out);
        cudaFreeHost(s.h_meta);
        cudaFree(s.d_in);
        cudaFree(s.d_out);
        cudaFree(s.d_idx);
        cudaFree(s.d_scr);
        for (cudaEvent_t e : {s.e_h0, s.e_h1, s.e_k1, s.e_m1, s.e_d0, s.e_d1})
            if (e)
                cudaEventDestroy(e);
        if (s.st)
            cudaStreamDestroy(s.st);
    }
    if (ctx->e_begin)
        cudaEventDestroy(ctx->e_begin);
    if (ctx->e_legacy)
        cudaEventDestroy(ctx->e_legacy);
    cudaFree(ctx->d_tab);
    cudaFreeHost(ctx->h_small);
    (void)cudaGetLastError();
    pthread_mutex_destroy(&ctx->mu);
    delete ctx;
}

int ctx_alloc(gc_gpu_ctx *ctx, gc_error *err)
{
    GC_CUDA(cudaSetDevice(ctx->dev));
    CrcTables *h_tab = (CrcTables *)malloc(sizeof(CrcTables));
    if (!h_tab)
        return gc_fail(err, GC_E_NOMEM, "gpu: out of host memory");
    crc_tables_build(h_tab);
    cudaError_t rc = cudaMalloc(&ctx->d_tab, sizeof(CrcTables));
    if (rc == cudaSuccess)
        rc = cudaMemcpy(ctx->d_tab, h_tab, sizeof(CrcTables), cudaMemcpyHostToDevice);
    free(h_tab);
    GC_CUDA(rc);
    GC_CUDA(cudaMallocHost(&ctx->h_small, 4096));
    GC_CUDA(cudaEventCreate(&ctx->e_begin));
    GC_CUDA(cudaEventCreateWithFlags(&ctx->e_legacy, cudaEventDisableTiming));
    size_t b = ctx->batch;
    ctx->in_cap = b + b / 64 + (64 << 10);
    ctx->out_cap = ctx->in_cap;
    ctx->idx_cap = kMaxPieceChunks * 4 + 256;
    ctx->scr_cap = std::max(enc_scratch_bytes(b, 1, 4096), dec_scratch_bytes(b, 1, 4096));
    ctx->slots.resize(ctx->ns);
    for (Slot &s : ctx->slots) {
        GC_CUDA(cudaStreamCreateWithFlags(&s.st, cudaStreamNonBlocking));
        GC_CUDA(cudaMallocHost(&s.h_in, ctx->in_cap));
        GC_CUDA(cudaMallocHost(&s.h_out, ctx->out_cap));
        GC_CUDA(cudaMallocHost(&s.h_meta, ctx->idx_cap + 64));
        GC_CUDA(cudaMalloc(&s.d_in, ctx->in_cap));
        GC_CUDA(cudaMalloc(&s.d_out, ctx->out_cap));
        GC_CUDA(cudaMalloc(&s.d_idx, ctx->idx_cap));
        GC_CUDA(cudaMalloc(&s.d_scr, ctx->scr_cap));
        for (cudaEvent_t *e : {&s.e_h0, &s.e_h1, &s.e_k1, &s.e_m1, &s.e_d0, &s.e_d1})
            GC_CUDA(cudaEventCreate(e));
    }
    return GC_OK;
}

} // namespace

extern "C" int gc_gpu_open(int dev, const gc_gpu_config *cfg, gc_gpu_ctx **out, gc_error *err)
{
    if (!out)
        return gc_fail(err, GC_E_INVALID, "gpu: gc_gpu_open needs an output pointer");
    *out = nullptr;
    int n = gc_gpu_device_count();
    if (dev < 0 || dev >= n)
        return gc_fail(err, GC_E_INVALID, "gpu: device %d does not exist (%d visible)", dev, n);
    gc_gpu_ctx *ctx = new (std::nothrow) gc_gpu_ctx();
    if (!ctx)
        return gc_fail(err, GC_E_NOMEM, "gpu: out of host memory");
    pthread_mutex_init(&ctx->mu, nullptr);
    ctx->dev = dev;
    ctx->ns = cfg && cfg->streams ? std::min(cfg->streams, 16u) : 3;
    ctx->batch = cfg && cfg->batch_bytes ? cfg->batch_bytes : (64u << 20);
    if (ctx->batch < (64u << 10))
        ctx->batch = 64u << 10;
    int rc = ctx_alloc(ctx, err);
    if (rc != GC_OK) {
        ctx_free(ctx);
        return rc;
    }
    gc_error_clear(err);
    *out = ctx;
    return GC_OK;
}

extern "C" void gc_gpu_close(gc_gpu_ctx *ctx)
{
    ctx_free(ctx);
}

extern "C" void *gc_gpu_stream(gc_gpu_ctx *ctx, unsigned i)
{
    if (!ctx || ctx->slots.empty())
        return nullptr;
    return (void *)ctx->slots[i % ctx->slots.size()].st;
}

extern "C" size_t gc_gpu_rle_scratch_size(size_t src_len, const rle_options *opt)
{
    rle_options o;
    if (rle_options_resolve(opt, &o, nullptr) != GC_OK)
        return 0;
    uint64_t body = src_len - src_len % o.width;
    return std::max(enc_scratch_bytes(body, o.width, o.chunk_size), dec_scratch_bytes(body, o.width, o.chunk_size));
}

/* ---- device-resident calls ------------------------------------------------ */

extern "C" int gc_gpu_rle_encode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len,
                                        const rle_options *opt, void *d_dst, size_t dst_cap,
                                        size_t *dst_len, void *d_scratch, size_t scratch_len,
                                        gc_error *err)
{
    if (!ctx || !dst_len || (!d_src && src_len) || !d_dst)
        return gc_fail(err, GC_E_INVALID, "gpu rle: encode: missing argument");
    rle_options o;
    int rc = rle_options_resolve(opt, &o, err);
    if (rc != GC_OK)
        return rc;
    size_t bound = rle_compress_bound(src_len, &o);
    if (dst_cap < bound)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: output capacity %zu below rle_compress_bound() = %zu",
                       dst_cap, bound);
    uint64_t body = src_len - src_len % o.width;
    uint64_t cc = (body + o.chunk_size - 1) / o.chunk_size;
    if (cc > UINT32_MAX)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: %zu bytes is too large for one frame", src_len);
    uint64_t hdr = 32 + 4 * cc + 4;
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
    p.index = (uint32_t *)((uint8_t *)d_dst + 32);
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

extern "C" int gc_gpu_rle_decode_device(gc_gpu_ctx *ctx, const void *d_frame, size_t frame_len,
                                        void *d_dst, size_t dst_cap, size_t *dst_len,
                                        void *d_scratch, size_t scratch_len, gc_error *err)
{
    if (!ctx || !d_frame || !dst_len)
        return gc_fail(err, GC_E_INVALID, "gpu rle: decode: missing argument");
    if (frame_len < 32)
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
        cudaError_t e = cudaMemcpy(ctx->h_small, d_frame, 32, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            rc = gc_fail(err, GC_E_DEVICE, "cuda: decode: %s", cudaGetErrorString(e));
    }
    if (rc == GC_OK) {
        uint64_t cc = get32(ctx->h_small + 20);
        hsize = std::min<uint64_t>(32 + 4 * cc + 4, frame_len);
        hdr = (uint8_t *)malloc(hsize);
        if (!hdr) {
            rc = gc_fail(err, GC_E_NOMEM, "gpu rle: out of host memory");
        } else {
            cudaError_t e = cudaMemcpy(hdr, d_frame, hsize, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess)
                rc = gc_fail(err, GC_E_DEVICE, "cuda: decode: %s", cudaGetErrorString(e));
            else
                rc = rle_frame_parse(hdr, frame_len, &info, err); /* reads header and index only */
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
        p.index = (const uint32_t *)((const uint8_t *)d_frame + 32);
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

/* ---- the batch pipeline ------------------------------------------------------ */

namespace {

struct Batch {
    gc_gpu_ctx *ctx;
    gc_gpu_job *jobs;
    size_t n;
    std::vector<JobState> js;
    gc_gpu_batch_stats st{};
};

/* Prepare a job; false when it failed already (status set). */
bool job_prepare(Batch &b, size_t j)
{
    gc_gpu_job &job = b.jobs[j];
    JobState &s = b.js[j];
    gc_error_clear(&job.err);
    job.status = GC_OK;
    job.dst_len = 0;
    if ((!job.src && job.src_len) || !job.dst) {
        job.status = gc_fail(&job.err, GC_E_INVALID, "gpu rle: job %zu: missing buffer", j);
        return false;
    }
    if (job.op == GC_GPU_ENCODE) {
        rle_options o;
        int rc = rle_options_resolve(&job.opt, &o, &job.err);
        if (rc != GC_OK) {
            job.status = rc;
            return false;
        }
        size_t bound = rle_compress_bound(job.src_len, &o);
        if (job.dst_cap < bound) {
            job.status = gc_fail(&job.err, GC_E_LIMIT,
                                 "rle: output buffer of %zu bytes is below rle_compress_bound() = %zu",
                                 job.dst_cap, bound);
            return false;
        }
        s.width = o.width;
        s.cs = o.chunk_size;
        s.body = job.src_len - job.src_len % o.width;
        s.cc = (s.body + o.chunk_size - 1) / o.chunk_size;
        if (s.cc > UINT32_MAX) {
            job.status = gc_fail(&job.err, GC_E_LIMIT, "rle: %zu bytes is too large for one frame", job.src_len);
            return false;
        }
        s.header_size = 32 + 4 * s.cc + 4;
    } else if (job.op == GC_GPU_DECODE) {
        int rc = rle_frame_parse(job.src, job.src_len, &s.info, &job.err);
        if (rc != GC_OK) {
            job.status = rc;
            return false;
        }
        if (s.info.original_size > job.dst_cap) {
            job.status = gc_fail(&job.err, GC_E_LIMIT, "rle: output buffer of %zu bytes is below the original size %llu",
                                 job.dst_cap, (unsigned long long)s.info.original_size);
            return false;
        }
        s.width = s.info.width;
        s.cs = s.info.chunk_size;
        s.body = s.info.original_size - s.info.tail_len;
        s.cc = s.info.chunk_count;
        s.header_size = s.info.header_size;
        s.index = s.info.index;
        s.rec_cursor = s.info.header_size;
    } else {
        job.status = gc_fail(&job.err, GC_E_INVALID, "gpu rle: job %zu: unknown operation %d", j, (int)job.op);
        return false;
    }
    s.pinned_src = is_pinned(job.src);
    s.pinned_dst = is_pinned(job.dst);
    return true;
}

void job_finish(Batch &b, size_t j)
{
    gc_gpu_job &job = b.jobs[j];
    JobState &s = b.js[j];
    if (s.failed || job.status != GC_OK)
        return;
    if (job.op == GC_GPU_ENCODE) {
        uint8_t *f = job.dst;
        unsigned tail = (unsigned)(job.src_len % s.width);
        memcpy(f, RLE_MAGIC, 4);
        f[4] = RLE_VERSION;
        f[5] = (uint8_t)s.width;
        f[6] = (uint8_t)tail;
        f[7] = 0;
        put32(f + 8, s.cs);
        put64(f + 12, job.src_len);
        put32(f + 20, (uint32_t)s.cc);
        memset(f + 24, 0, 8);
        if (tail)
            memcpy(f + 24, job.src + job.src_len - tail, tail);
        put32(f + 32 + 4 * s.cc, crc32c(f, 32 + 4 * s.cc));
        job.dst_len = s.header_size + s.records_written;
    } else {
        if (s.info.tail_len)
            memcpy(job.dst + s.body, s.info.tail, s.info.tail_len);
        job.dst_len = s.info.original_size;
    }
    b.st.bytes_in += job.src_len;
    b.st.bytes_out += job.dst_len;
}

/* How many chunks from c0 fit one slot. */
uint64_t piece_chunks(const Batch &b, size_t j, uint64_t c0)
{
    const gc_gpu_ctx *ctx = b.ctx;
    const JobState &s = b.js[j];
    bool enc = b.jobs[j].op == GC_GPU_ENCODE;
    uint64_t n = std::min<uint64_t>(s.cc - c0, std::max<uint64_t>(1, ctx->batch / s.cs));
    n = std::min(n, kMaxPieceChunks);
    for (; n >= 1; n = n / 2) {
        uint64_t body = std::min<uint64_t>(n * s.cs, s.body - c0 * s.cs);
        uint64_t rec = body + 12 * n;
        if (!enc) {
            rec = 0;
            for (uint64_t c = c0; c < c0 + n; c++)
                rec += get32(s.index + 4 * c);
        }
        size_t scr = enc ? enc_scratch_bytes(body, s.width, s.cs) : dec_scratch_bytes(body, s.width, s.cs);
        if (body <= ctx->in_cap && rec <= ctx->out_cap && rec <= ctx->in_cap && scr <= ctx->scr_cap &&
            n * 4 <= ctx->idx_cap)
            return n;
        if (n == 1)
            break;
    }
    return 0;
}

#define BCUDA(call)                                                                              \
    do {                                                                                         \
        cudaError_t rc_ = (call);                                                                \
        if (rc_ != cudaSuccess)                                                                  \
            return gc_fail(err, GC_E_DEVICE, "cuda: %s: %s", #call, cudaGetErrorString(rc_));    \
    } while (0)

int piece_launch(Batch &b, Slot &sl, size_t j, uint64_t c0, uint64_t n, gc_error *err)
{
    gc_gpu_ctx *ctx = b.ctx;
    gc_gpu_job &job = b.jobs[j];
    JobState &s = b.js[j];
    sl.job = j;
    sl.c0 = c0;
    sl.n = n;
    sl.body = std::min<uint64_t>(n * s.cs, s.body - c0 * s.cs);
    sl.used = true;
    const uint8_t *src;
    uint64_t in_len;
    if (job.op == GC_GPU_ENCODE) {
        src = job.src + c0 * s.cs;
        in_len = sl.body;
    } else {
        uint64_t rec = 0;
        for (uint64_t c = c0; c < c0 + n; c++)
            rec += get32(s.index + 4 * c);
        src = job.src + s.rec_cursor;
        in_len = rec;
        sl.rec_len = rec;
        s.rec_cursor += rec;
        memcpy(sl.h_meta + 64, s.index + 4 * c0, 4 * n);
    }
    if (!s.pinned_src) {
        memcpy(sl.h_in, src, in_len);
        src = sl.h_in;
    }
    BCUDA(cudaEventRecord(sl.e_h0, sl.st));
    BCUDA(cudaMemcpyAsync(sl.d_in, src, in_len, cudaMemcpyHostToDevice, sl.st));
    if (job.op == GC_GPU_DECODE)
        BCUDA(cudaMemcpyAsync(sl.d_idx, sl.h_meta + 64, 4 * n, cudaMemcpyHostToDevice, sl.st));
    BCUDA(cudaEventRecord(sl.e_h1, sl.st));
    b.st.h2d_bytes += in_len;
    int rc;
    if (job.op == GC_GPU_ENCODE) {
        EncParams p;
        p.src = sl.d_in;
        p.body_len = sl.body;
        p.width = s.width;
        p.chunk_size = s.cs;
        p.chunk_count = n;
        p.records = sl.d_out;
        p.out_base = sl.d_out;
        p.index = (uint32_t *)sl.d_idx;
        rc = enc_launch(p, ctx->d_tab, sl.d_scr, ctx->scr_cap, sl.st, &sl.d_total, err);
        if (rc != GC_OK)
            return rc;
        BCUDA(cudaEventRecord(sl.e_k1, sl.st));
        BCUDA(cudaMemcpyAsync(sl.h_meta, sl.d_total, 8, cudaMemcpyDeviceToHost, sl.st));
        BCUDA(cudaMemcpyAsync(sl.h_meta + 64, sl.d_idx, 4 * n, cudaMemcpyDeviceToHost, sl.st));
        BCUDA(cudaEventRecord(sl.e_m1, sl.st));
        sl.state = 1;
    } else {
        DecParams p;
        p.records = sl.d_in;
        p.records_len = sl.rec_len;
        p.index = (const uint32_t *)sl.d_idx;
        p.width = s.width;
        p.chunk_size = s.cs;
        p.chunk_count = n;
        p.body_len = sl.body;
        p.out = sl.d_out;
        rc = dec_launch(p, ctx->d_tab, sl.d_scr, ctx->scr_cap, sl.st, &sl.d_status, err);
        if (rc != GC_OK)
            return rc;
        BCUDA(cudaEventRecord(sl.e_k1, sl.st));
        BCUDA(cudaEventRecord(sl.e_m1, sl.st));
        /* decode knows its output size: queue the copies now */
        BCUDA(cudaEventRecord(sl.e_d0, sl.st));
        BCUDA(cudaMemcpyAsync(sl.h_meta + 64, sl.d_status, 4 * n, cudaMemcpyDeviceToHost, sl.st));
        sl.out_off = c0 * s.cs;
        sl.out_len = sl.body;
        sl.staged_out = !s.pinned_dst;
        BCUDA(cudaMemcpyAsync(sl.staged_out ? sl.h_out : job.dst + sl.out_off, sl.d_out, sl.out_len,
                              cudaMemcpyDeviceToHost, sl.st));
        BCUDA(cudaEventRecord(sl.e_d1, sl.st));
        b.st.d2h_bytes += sl.out_len + 4 * n;
        sl.state = 2;
    }
    return GC_OK;
}

/* Encode: learn the piece's output size, queue its D2H. */
int piece_issue_d2h(Batch &b, Slot &sl, gc_error *err)
{
    if (sl.state != 1)
        return GC_OK;
    gc_gpu_job &job = b.jobs[sl.job];
    JobState &s = b.js[sl.job];
    BCUDA(cudaEventSynchronize(sl.e_m1));
    uint64_t total = *(unsigned long long *)sl.h_meta;
    memcpy(job.dst + 32 + 4 * sl.c0, sl.h_meta + 64, 4 * sl.n);
    sl.out_off = s.header_size + s.records_written;
    sl.out_len = total;
    s.records_written += total;
    if (sl.out_off + total > job.dst_cap) /* cannot happen: the bound covers it */
        return gc_fail(err, GC_E_INTERNAL, "gpu rle: encoder output past rle_compress_bound");
    sl.staged_out = !s.pinned_dst;
    BCUDA(cudaEventRecord(sl.e_d0, sl.st));
    BCUDA(cudaMemcpyAsync(sl.staged_out ? sl.h_out : job.dst + sl.out_off, sl.d_out, total,
                          cudaMemcpyDeviceToHost, sl.st));
    BCUDA(cudaEventRecord(sl.e_d1, sl.st));
    b.st.d2h_bytes += total + 4 * sl.n + 8;
    sl.state = 2;
    return GC_OK;
}

float ev_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return ms;
}

/* Wait for the slot's piece and hand its output to the job. */
int piece_complete(Batch &b, Slot &sl, gc_error *err)
{
    if (sl.state == 1) {
        int rc = piece_issue_d2h(b, sl, err);
        if (rc != GC_OK)
            return rc;
    }
    if (sl.state != 2)
        return GC_OK;
    BCUDA(cudaEventSynchronize(sl.e_d1));
    gc_gpu_job &job = b.jobs[sl.job];
    JobState &s = b.js[sl.job];
    b.st.h2d_ms += ev_ms(sl.e_h0, sl.e_h1);
    b.st.kernel_ms += ev_ms(sl.e_h1, sl.e_k1);
    b.st.d2h_ms += ev_ms(sl.e_d0, sl.e_d1);
    if (job.op == GC_GPU_ENCODE)
        b.st.d2h_ms += ev_ms(sl.e_k1, sl.e_m1);
    b.st.slices++;
    sl.state = 0;
    if (job.op == GC_GPU_DECODE && !s.failed) {
        const uint32_t *stw = (const uint32_t *)(sl.h_meta + 64);
        for (uint64_t i = 0; i < sl.n; i++) {
            if (stw[i]) {
                job.status = dec_status_error(stw[i], sl.c0 + i, &job.err);
                s.failed = true;
                break;
            }
        }
    }
    if (!s.failed && sl.staged_out)
        memcpy(job.dst + sl.out_off, sl.h_out, sl.out_len);
    s.done_chunks += sl.n;
    if (s.done_chunks == s.cc)
        job_finish(b, sl.job);
    return GC_OK;
}

int batch_run(Batch &b, gc_error *err)
{
    gc_gpu_ctx *ctx = b.ctx;
    const size_t ns = ctx->slots.size();
    BCUDA(cudaEventRecord(ctx->e_begin, ctx->slots[0].st));
    for (size_t i = 1; i < ns; i++)
        BCUDA(cudaStreamWaitEvent(ctx->slots[i].st, ctx->e_begin, 0));
    for (Slot &s : ctx->slots) {
        s.used = false;
        s.state = 0;
    }
    size_t next_slot = 0;
    Slot *prev = nullptr;
    int rc;
    for (size_t j = 0; j < b.n; j++) {
        if (!job_prepare(b, j)) {
            b.js[j].failed = true;
            continue;
        }
        JobState &s = b.js[j];
        if (s.cc == 0) {
            job_finish(b, j);
            continue;
        }
        while (s.next_chunk < s.cc && !s.failed) {
            uint64_t n = piece_chunks(b, j, s.next_chunk);
            if (n == 0) {
                b.jobs[j].status = gc_fail(&b.jobs[j].err, GC_E_LIMIT,
                                           "gpu rle: chunk_size %u does not fit the GPU batch buffers (%zu bytes)",
                                           (unsigned)s.cs, ctx->batch);
                s.failed = true;
                break;
            }
            Slot &sl = ctx->slots[next_slot];
            next_slot = (next_slot + 1) % ns;
            if ((rc = piece_complete(b, sl, err)) != GC_OK)
                return rc;
            if ((rc = piece_launch(b, sl, j, s.next_chunk, n, err)) != GC_OK)
                return rc;
            s.next_chunk += n;
            /* while this piece's H2D and kernels run, queue the previous piece's output copy */
            if (prev && (rc = piece_issue_d2h(b, *prev, err)) != GC_OK)
                return rc;
            prev = &sl;
        }
    }
    for (size_t i = 0; i < ns; i++) {
        Slot &sl = ctx->slots[(next_slot + i) % ns];
        if ((rc = piece_complete(b, sl, err)) != GC_OK)
            return rc;
    }
    float wall = 0;
    for (Slot &sl : ctx->slots)
        if (sl.used)
            wall = std::max(wall, ev_ms(ctx->e_begin, sl.e_d1));
    b.st.wall_ms = wall;
    return GC_OK;
}

} // namespace

extern "C" int gc_gpu_rle_run_batch(gc_gpu_ctx *ctx, gc_gpu_job *jobs, size_t n_jobs,
                                    gc_gpu_batch_stats *stats, gc_error *err)
{
    if (!ctx || (!jobs && n_jobs))
        return gc_fail(err, GC_E_INVALID, "gpu rle: run_batch: missing argument");
    double t0 = now_ms();
    pthread_mutex_lock(&ctx->mu);
    Batch b;
    b.ctx = ctx;
    b.jobs = jobs;
    b.n = n_jobs;
    b.js.resize(n_jobs);
    int rc = ctx_use(ctx, err);
    if (rc == GC_OK)
        rc = batch_run(b, err);
    if (rc != GC_OK) {
        /* leave the streams idle before returning; errors here are the same device failure */
        for (Slot &s : ctx->slots)
            (void)cudaStreamSynchronize(s.st);
    }
    pthread_mutex_unlock(&ctx->mu);
    b.st.host_ms = now_ms() - t0;
    if (stats)
        *stats = b.st;
    if (rc == GC_OK)
        gc_error_clear(err);
    return rc;
}
