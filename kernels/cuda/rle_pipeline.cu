/*
 * rle_pipeline.cu - the per-device context and the batched, stream-overlapped
 * host pipeline behind gc_gpu_rle_run_batch, plus the device-resident entry
 * points.
 *
 * Jobs are cut into pieces of whole chunks that fit one slot (a stream with
 * its own pinned staging and device buffers, allocated once in gc_gpu_open).
 * A piece goes through these steps, each slot holding one piece at a time:
 *
 *   stage-in   copy the piece's pageable input into the slot's pinned h_in
 *              (the context's copy pool: several threads, several pieces at once)
 *   queue      H2D, kernels and (encode) a small D2H of the record sizes;
 *              (decode) also the output D2H, whose size is known
 *   d2h        (encode) once the record sizes are back, the output D2H
 *   stage-out  copy the pinned h_out into the caller's pageable output
 *
 * The host thread never blocks on one piece: it polls CUDA events and the
 * copy tasks, moves every slot on as far as it can, and copies stripes itself
 * when it has nothing else to do. So the stage-in of piece k+1, the GPU work
 * of piece k and the stage-out of piece k-1 run at once. Pieces are queued on
 * the GPU in order, and an encode job's output D2Hs are issued in chunk order
 * (each needs the sizes of those before it).
 *
 * Caller memory that is page-locked (cudaMallocHost, or cudaHostRegister as
 * gc_gpu_host_register does for registered memfds) is not staged: the DMA
 * reads / writes it directly. Everything else is staged.
 *
 * Environment, read by gc_gpu_open:
 *   GC_GPU_COPY_THREADS staging copy threads (default min(16, cores))
 *   GC_GPU_COPY_NT      0 disables non-temporal stores in the staging copies
 *
 * Each piece is timed with events. Frame headers and header CRCs are made on
 * the host (a few bytes per chunk); the device never sees a frame header in
 * the batch path.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <vector>

#include "gpu_internal.cuh"
#include "host_copy.cuh"
#include "pipeline_policy.cuh"
extern "C" {
#include "crc32c.h"
#include "gc_clock.h"
}

using namespace gcgpu;

namespace {


enum SlotState { S_IDLE = 0, S_STAGE_IN, S_GPU, S_D2H, S_STAGE_OUT };

struct Slot {
    cudaStream_t st = nullptr;
    uint8_t *h_in = nullptr, *h_out = nullptr, *h_meta = nullptr;
    uint8_t *d_in = nullptr, *d_out = nullptr, *d_idx = nullptr, *d_scr = nullptr;
    cudaEvent_t e_h0 = nullptr, e_h1 = nullptr, e_k1 = nullptr, e_m1 = nullptr, e_d0 = nullptr, e_d1 = nullptr;
    int state = S_IDLE;
    bool used = false;
    /* the piece in flight */
    uint64_t seq = 0;
    size_t job = 0;
    uint64_t c0 = 0, n = 0, body = 0;
    /* input: in_host[0..in_len); [in_lo, in_hi) goes straight from caller memory
     * (page-locked), the rest through h_in at the same offsets */
    const uint8_t *in_host = nullptr;
    uint64_t in_len = 0, in_lo = 0, in_hi = 0;
    /* output: out_host[0..out_len) likewise, through h_out */
    uint8_t *out_host = nullptr;
    uint64_t out_len = 0, out_lo = 0, out_hi = 0;
    CopyTask cp[2];
    unsigned long long *d_total = nullptr;
    uint32_t *d_status = nullptr;
};

struct JobState {
    unsigned width = 1;
    uint32_t cs = 0;
    uint64_t body = 0, cc = 0, next_chunk = 0, rec_cursor = 0, done_chunks = 0;
    uint64_t header_size = 0, records_written = 0;
    uint64_t meta_next = 0; /* encode: first chunk of the next piece whose output D2H is due */
    /* page-locked parts of the caller's buffers: [lo, hi) addresses */
    uintptr_t src_lo = 0, src_hi = 0, dst_lo = 0, dst_hi = 0;
    /* decode: a private copy of the frame's index, validated after it was made
     * (rle_frame_index_copy). The frame is the caller's memory (a client's memfd
     * in the daemon) and may change at any time: record sizes and offsets, the
     * staging lengths and the device's index all come from this copy only. */
    std::vector<uint32_t> index;
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
    CopyPool *pool = nullptr;   /* staging copies of the batch pipeline */
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
    copy_pool_destroy(ctx->pool);
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
    ctx->idx_cap = kMaxPieceChunks * RLE_INDEX_ENTRY + 256;
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
    /* the staging copy pool */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* one per CPU up to kDefaultCopyThreads (pipeline_policy.cuh) */
    unsigned threads = (unsigned)std::min<long>(kDefaultCopyThreads, std::max<long>(1, cores));
    const char *v = getenv("GC_GPU_COPY_THREADS");
    if (v && *v)
        threads = (unsigned)std::min(kMaxCopyThreads, std::max(0l, strtol(v, nullptr, 10)));
    v = getenv("GC_GPU_COPY_NT");
    bool nt = !(v && !strcmp(v, "0"));
    ctx->pool = copy_pool_create(threads, nt);
    if (!ctx->pool)
        return gc_fail(err, GC_E_NOMEM, "gpu: out of host memory");
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
    ctx->ns = cfg && cfg->streams ? std::min(cfg->streams, kMaxSlots) : kDefaultSlots;
    ctx->batch = cfg && cfg->batch_bytes ? cfg->batch_bytes : kDefaultSlotBytes;
    if (ctx->batch < kMinSlotBytes)
        ctx->batch = kMinSlotBytes;
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

extern "C" int gc_gpu_rle_decode_device(gc_gpu_ctx *ctx, const void *d_frame, size_t frame_len,
                                        void *d_dst, size_t dst_cap, size_t *dst_len,
                                        void *d_scratch, size_t scratch_len, gc_error *err)
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

/* ---- the batch pipeline ------------------------------------------------------ */

namespace {

struct Batch {
    gc_gpu_ctx *ctx;
    gc_gpu_job *jobs;
    size_t n;
    std::vector<JobState> js;
    gc_gpu_batch_stats st{};
    /* piece generator */
    size_t gen_job = 0;
    bool gen_prepared = false;
    uint64_t next_seq = 0, queue_seq = 0;
};

/* Where the caller's buffer [p, p + len) is page-locked: the whole of it
 * when it is pinned, else nowhere (it is staged). */
void locate_direct(const uint8_t *p, size_t len, uintptr_t *lo, uintptr_t *hi)
{
    *lo = *hi = 0;
    if (len && is_pinned(p) && is_pinned(p + len - 1)) {
        *lo = (uintptr_t)p;
        *hi = (uintptr_t)p + len;
    }
}

/* The part of [p, p + len) inside [lo, hi), as offsets [*a, *e); *a == *e ==
 * len when none. */
void direct_part(uintptr_t lo, uintptr_t hi, const void *p, uint64_t len, uint64_t *a, uint64_t *e)
{
    uintptr_t s = (uintptr_t)p;
    uintptr_t x = std::max<uintptr_t>(s, lo), y = std::min<uintptr_t>(s + len, hi);
    if (x < y) {
        *a = x - s;
        *e = y - s;
    } else {
        *a = *e = len;
    }
}

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
    size_t out_len;
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
        s.header_size = rle_header_size_for(s.cc);
        out_len = bound;
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
        try {
            s.index.assign(s.cc, 0);
        } catch (const std::bad_alloc &) {
            job.status = gc_fail(&job.err, GC_E_NOMEM, "gpu rle: no memory for a %llu-chunk index",
                                 (unsigned long long)s.cc);
            return false;
        }
        rc = rle_frame_index_copy(job.src, job.src_len, &s.info, s.index.data(), &job.err);
        if (rc != GC_OK) {
            job.status = rc;
            return false;
        }
        s.rec_cursor = s.info.header_size;
        out_len = (size_t)s.body;
    } else {
        job.status = gc_fail(&job.err, GC_E_INVALID, "gpu rle: job %zu: unknown operation %d", j, (int)job.op);
        return false;
    }
    if (s.cc) {
        locate_direct(job.src, job.src_len, &s.src_lo, &s.src_hi);
        locate_direct(job.dst, out_len, &s.dst_lo, &s.dst_hi);
    }
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
        rle_header_write_fixed(f, s.width, s.cs, job.src_len, (uint32_t)s.cc,
                               job.src + job.src_len - job.src_len % s.width);
        const uint64_t crc_at = rle_header_crc_offset(s.cc);
        rle_put_le(f + crc_at, crc32c(f, crc_at), RLE_HEADER_CRC);
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
        uint64_t rec = body + RLE_CHUNK_HEADER * n;
        if (!enc) {
            rec = 0;
            for (uint64_t c = c0; c < c0 + n; c++)
                rec += s.index[c];
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

/* The next piece in job order; false when every job is cut up. */
bool next_piece(Batch &b, size_t *pj, uint64_t *pc0, uint64_t *pn)
{
    for (; b.gen_job < b.n; b.gen_job++, b.gen_prepared = false) {
        size_t j = b.gen_job;
        JobState &s = b.js[j];
        if (!b.gen_prepared) {
            b.gen_prepared = true;
            if (!job_prepare(b, j)) {
                s.failed = true;
                continue;
            }
            if (s.cc == 0) {
                job_finish(b, j);
                continue;
            }
        }
        if (s.failed || s.next_chunk >= s.cc)
            continue;
        uint64_t n = piece_chunks(b, j, s.next_chunk);
        if (n == 0) {
            b.jobs[j].status = gc_fail(&b.jobs[j].err, GC_E_LIMIT,
                                       "gpu rle: chunk_size %u does not fit the GPU batch buffers (%zu bytes)",
                                       (unsigned)s.cs, b.ctx->batch);
            s.failed = true;
            continue;
        }
        *pj = j;
        *pc0 = s.next_chunk;
        *pn = n;
        s.next_chunk += n;
        return true;
    }
    return false;
}

#define BCUDA(call)                                                                              \
    do {                                                                                         \
        cudaError_t rc_ = (call);                                                                \
        if (rc_ != cudaSuccess)                                                                  \
            return gc_fail(err, GC_E_DEVICE, "cuda: %s: %s", #call, cudaGetErrorString(rc_));    \
    } while (0)

/* Is the event done? 1 yes, 0 not yet, else the device error. */
int ev_poll(cudaEvent_t e, gc_error *err)
{
    cudaError_t rc = cudaEventQuery(e);
    if (rc == cudaSuccess)
        return 1;
    if (rc == cudaErrorNotReady)
        return 0;
    gc_fail(err, GC_E_DEVICE, "cuda: cudaEventQuery: %s", cudaGetErrorString(rc));
    return -1;
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

/* Queue the staged parts (outside [lo, hi)) of host[0..len) <-> pinned[0..len). */
void stage(CopyPool *pool, CopyTask *cp, uint8_t *dst, const uint8_t *src, uint64_t len, uint64_t lo, uint64_t hi)
{
    copy_pool_submit(pool, &cp[0], dst, src, lo);
    copy_pool_submit(pool, &cp[1], dst + hi, src + hi, len - hi);
}

/* Copy host[0..len) <-> device, [lo, hi) straight from / to host, the rest
 * from / to the pinned staging buffer at the same offsets. */
cudaError_t dma_parts(uint8_t *dev, uint8_t *host, uint8_t *pinned, uint64_t len, uint64_t lo, uint64_t hi,
                      bool h2d, cudaStream_t st)
{
    struct Part {
        uint64_t off, n;
        uint8_t *h;
    } parts[3] = {{0, lo, pinned}, {lo, hi - lo, host + lo}, {hi, len - hi, pinned + hi}};
    for (const Part &p : parts) {
        if (!p.n)
            continue;
        cudaError_t rc = h2d ? cudaMemcpyAsync(dev + p.off, p.h, p.n, cudaMemcpyHostToDevice, st)
                             : cudaMemcpyAsync(p.h, dev + p.off, p.n, cudaMemcpyDeviceToHost, st);
        if (rc != cudaSuccess)
            return rc;
    }
    return cudaSuccess;
}

/* Start a piece on an idle slot: its input goes to the copy pool. */
void piece_begin(Batch &b, Slot &sl, size_t j, uint64_t c0, uint64_t n)
{
    gc_gpu_job &job = b.jobs[j];
    JobState &s = b.js[j];
    sl.seq = b.next_seq++;
    sl.job = j;
    sl.c0 = c0;
    sl.n = n;
    sl.body = std::min<uint64_t>(n * s.cs, s.body - c0 * s.cs);
    sl.used = true;
    if (job.op == GC_GPU_ENCODE) {
        sl.in_host = job.src + c0 * s.cs;
        sl.in_len = sl.body;
    } else {
        uint64_t rec = 0;
        for (uint64_t c = c0; c < c0 + n; c++)
            rec += s.index[c];
        sl.in_host = job.src + s.rec_cursor;
        sl.in_len = rec; /* the sizes piece_chunks fitted to the slot: same copy */
        s.rec_cursor += rec;
        memcpy(sl.h_meta + 64, s.index.data() + c0, RLE_INDEX_ENTRY * n);
        sl.out_host = job.dst + c0 * s.cs;
        sl.out_len = sl.body;
        direct_part(s.dst_lo, s.dst_hi, sl.out_host, sl.out_len, &sl.out_lo, &sl.out_hi);
    }
    direct_part(s.src_lo, s.src_hi, sl.in_host, sl.in_len, &sl.in_lo, &sl.in_hi);
    stage(b.ctx->pool, sl.cp, sl.h_in, sl.in_host, sl.in_len, sl.in_lo, sl.in_hi);
    sl.state = S_STAGE_IN;
}

/* Input staged: queue H2D, kernels and what can be copied back already. */
int piece_queue(Batch &b, Slot &sl, gc_error *err)
{
    gc_gpu_ctx *ctx = b.ctx;
    gc_gpu_job &job = b.jobs[sl.job];
    JobState &s = b.js[sl.job];
    const uint64_t n = sl.n;
    /* the host loop polls events: drop a cudaErrorNotReady the runtime may
     * have kept, so that the launchers' cudaGetLastError() sees only theirs */
    cudaError_t pending = cudaGetLastError();
    if (pending != cudaSuccess && pending != cudaErrorNotReady)
        return gc_fail(err, GC_E_DEVICE, "cuda: %s", cudaGetErrorString(pending));
    BCUDA(cudaEventRecord(sl.e_h0, sl.st));
    BCUDA(dma_parts(sl.d_in, (uint8_t *)sl.in_host, sl.h_in, sl.in_len, sl.in_lo, sl.in_hi, true, sl.st));
    if (job.op == GC_GPU_DECODE)
        BCUDA(cudaMemcpyAsync(sl.d_idx, sl.h_meta + 64, RLE_INDEX_ENTRY * n, cudaMemcpyHostToDevice, sl.st));
    BCUDA(cudaEventRecord(sl.e_h1, sl.st));
    b.st.h2d_bytes += sl.in_len;
    int rc;
    if (job.op == GC_GPU_ENCODE) {
        EncParams p;
        p.src = sl.d_in;
        p.body_len = sl.body;
        p.width = s.width;
        p.chunk_size = s.cs;
        p.chunk_count = n;
        p.records = sl.d_out;
        p.records_cap = ctx->out_cap;
        p.out_base = sl.d_out;
        p.index = (uint32_t *)sl.d_idx;
        rc = enc_launch(p, ctx->d_tab, sl.d_scr, ctx->scr_cap, sl.st, &sl.d_total, err);
        if (rc != GC_OK)
            return rc;
        BCUDA(cudaEventRecord(sl.e_k1, sl.st));
        BCUDA(cudaMemcpyAsync(sl.h_meta, sl.d_total, 8, cudaMemcpyDeviceToHost, sl.st));
        BCUDA(cudaMemcpyAsync(sl.h_meta + 64, sl.d_idx, RLE_INDEX_ENTRY * n, cudaMemcpyDeviceToHost, sl.st));
        BCUDA(cudaEventRecord(sl.e_m1, sl.st));
        sl.state = S_GPU;
    } else {
        DecParams p;
        p.records = sl.d_in;
        p.records_len = sl.in_len;
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
        BCUDA(cudaMemcpyAsync(sl.h_meta + 64, sl.d_status, sizeof(uint32_t) * n, cudaMemcpyDeviceToHost, sl.st));
        BCUDA(dma_parts(sl.d_out, sl.out_host, sl.h_out, sl.out_len, sl.out_lo, sl.out_hi, false, sl.st));
        BCUDA(cudaEventRecord(sl.e_d1, sl.st));
        b.st.d2h_bytes += sl.out_len + 4 * n;
        sl.state = S_D2H;
    }
    return GC_OK;
}

/* Encode, record sizes back: place the index entries, queue the output D2H. */
int piece_issue_d2h(Batch &b, Slot &sl, gc_error *err)
{
    gc_gpu_job &job = b.jobs[sl.job];
    JobState &s = b.js[sl.job];
    uint64_t total = *(volatile unsigned long long *)sl.h_meta;
    memcpy(job.dst + RLE_INDEX_OFFSET + RLE_INDEX_ENTRY * sl.c0, sl.h_meta + 64, RLE_INDEX_ENTRY * sl.n);
    uint64_t off = s.header_size + s.records_written;
    s.records_written += total;
    s.meta_next = sl.c0 + sl.n;
    if (off + total > job.dst_cap) /* cannot happen: the bound covers it */
        return gc_fail(err, GC_E_INTERNAL, "gpu rle: encoder output past rle_compress_bound");
    sl.out_host = job.dst + off;
    sl.out_len = total;
    direct_part(s.dst_lo, s.dst_hi, sl.out_host, sl.out_len, &sl.out_lo, &sl.out_hi);
    BCUDA(cudaEventRecord(sl.e_d0, sl.st));
    BCUDA(dma_parts(sl.d_out, sl.out_host, sl.h_out, sl.out_len, sl.out_lo, sl.out_hi, false, sl.st));
    BCUDA(cudaEventRecord(sl.e_d1, sl.st));
    b.st.d2h_bytes += total + RLE_INDEX_ENTRY * sl.n + 8;
    sl.state = S_D2H;
    return GC_OK;
}

/* Output on the host (pinned or direct): account, check, stage it out. */
void piece_d2h_done(Batch &b, Slot &sl)
{
    gc_gpu_job &job = b.jobs[sl.job];
    JobState &s = b.js[sl.job];
    gc_gpu_ctx *ctx = b.ctx;
    b.st.h2d_ms += ev_ms(sl.e_h0, sl.e_h1);
    b.st.kernel_ms += ev_ms(sl.e_h1, sl.e_k1);
    b.st.d2h_ms += ev_ms(sl.e_d0, sl.e_d1);
    if (job.op == GC_GPU_ENCODE)
        b.st.d2h_ms += ev_ms(sl.e_k1, sl.e_m1);
    b.st.slices++;
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
    if (s.failed) /* nothing to hand over */
        stage(ctx->pool, sl.cp, nullptr, nullptr, 0, 0, 0);
    else
        stage(ctx->pool, sl.cp, sl.out_host, sl.h_out, sl.out_len, sl.out_lo, sl.out_hi);
    sl.state = S_STAGE_OUT;
}

void piece_done(Batch &b, Slot &sl)
{
    JobState &s = b.js[sl.job];
    s.done_chunks += sl.n;
    if (s.done_chunks == s.cc)
        job_finish(b, sl.job);
    sl.state = S_IDLE;
}

bool copies_done(const Slot &sl)
{
    return copy_task_done(&sl.cp[0]) && copy_task_done(&sl.cp[1]);
}

/* One pass over the slots: move each on as far as it can go. Sets *busy when
 * something is still in flight. */
int batch_step(Batch &b, bool *progress, bool *busy, gc_error *err)
{
    gc_gpu_ctx *ctx = b.ctx;
    const size_t ns = ctx->slots.size();
    int rc;
    *busy = false;
    /* finished pieces free their slots */
    for (Slot &sl : ctx->slots) {
        if (sl.state == S_D2H) {
            if ((rc = ev_poll(sl.e_d1, err)) < 0)
                return GC_E_DEVICE;
            if (rc) {
                piece_d2h_done(b, sl);
                *progress = true;
            }
        }
        if (sl.state == S_STAGE_OUT && copies_done(sl)) {
            piece_done(b, sl);
            *progress = true;
        }
    }
    /* new pieces on idle slots (stage-in starts at once) */
    for (Slot &sl : ctx->slots) {
        if (sl.state != S_IDLE)
            continue;
        size_t j;
        uint64_t c0, n;
        if (!next_piece(b, &j, &c0, &n))
            break;
        piece_begin(b, sl, j, c0, n);
        *progress = true;
    }
    /* staged pieces go to the GPU in order */
    for (bool again = true; again;) {
        again = false;
        for (Slot &sl : ctx->slots) {
            if (sl.state == S_STAGE_IN && sl.seq == b.queue_seq && copies_done(sl)) {
                if ((rc = piece_queue(b, sl, err)) != GC_OK)
                    return rc;
                b.queue_seq++;
                *progress = again = true;
                break;
            }
        }
    }
    /* encode: output D2H once the sizes are back, in chunk order per job */
    for (bool again = true; again;) {
        again = false;
        for (Slot &sl : ctx->slots) {
            if (sl.state != S_GPU || b.js[sl.job].meta_next != sl.c0)
                continue;
            if ((rc = ev_poll(sl.e_m1, err)) < 0)
                return GC_E_DEVICE;
            if (rc) {
                if ((rc = piece_issue_d2h(b, sl, err)) != GC_OK)
                    return rc;
                *progress = again = true;
            }
        }
    }
    for (size_t i = 0; i < ns; i++)
        *busy = *busy || ctx->slots[i].state != S_IDLE;
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
        s.state = S_IDLE;
    }
    int rc = GC_OK;
    for (;;) {
        bool progress = false, busy = false;
        rc = batch_step(b, &progress, &busy, err);
        if (rc != GC_OK || (!busy && b.gen_job >= b.n))
            break;
        if (!progress && !copy_pool_help(ctx->pool))
            sched_yield();
    }
    if (rc != GC_OK) {
        /* no copy may touch the caller's buffers after we return */
        copy_pool_cancel(ctx->pool);
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
    uint64_t t0 = gc_now_ns();
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
    b.st.host_ms = (double)(gc_now_ns() - t0) / 1e6;
    if (stats)
        *stats = b.st;
    if (rc == GC_OK)
        gc_error_clear(err);
    return rc;
}
