/*
 * gpu_pipeline.cu - gc_gpu_run_batch: the batched, stream-overlapped host
 * pipeline, for jobs of any codec (gpu_codec.cuh says what a codec provides).
 *
 * Jobs are cut into pieces of whole units that fit one slot (a stream with
 * its own pinned staging and device buffers, allocated once in gc_gpu_open,
 * gpu_context.cu). A piece goes through these steps, each slot holding one
 * piece at a time:
 *
 *   stage-in   copy the piece's pageable input into the slot's pinned h_in
 *              (the context's copy pool: several threads, several pieces at once)
 *   queue      H2D, the codec's kernels and the D2H of its per-piece results;
 *              when the output's size is known already, the output D2H too
 *   d2h        (output sized on the device) once the results are back and
 *              the codec has placed the output, the output D2H
 *   stage-out  copy the pinned h_out into the caller's pageable output
 *
 * The host thread never blocks on one piece: it polls CUDA events and the
 * copy tasks, moves every slot on as far as it can, and copies stripes itself
 * when it has nothing else to do. So the stage-in of piece k+1, the GPU work
 * of piece k and the stage-out of piece k-1 run at once. Pieces are queued on
 * the GPU in order, and a job's outputs sized on the device are placed in
 * unit order (each needs the sizes of those before it).
 *
 * Caller memory that is page-locked (cudaMallocHost, or cudaHostRegister as
 * gc_gpu_host_register does for registered memfds) is not staged: the DMA
 * reads / writes it directly. Everything else is staged.
 *
 * Each piece is timed with events.
 */
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <new>
#include <vector>

#include "gpu_pipeline.cuh"
#include "pipeline_policy.cuh"
extern "C" {
#include "gc_clock.h"
}

namespace gcgpu {

const GpuCodec *const kCodecs[] = { &kRleCodec, &kBzip2Codec };
const size_t kCodecCount = sizeof kCodecs / sizeof kCodecs[0];

const GpuCodec *codec_find(int id)
{
    for (size_t i = 0; i < kCodecCount; i++)
        if ((int)kCodecs[i]->id == id)
            return kCodecs[i];
    return nullptr;
}

} // namespace gcgpu

using namespace gcgpu;

namespace {

struct Batch {
    gc_gpu_ctx *ctx;
    gc_gpu_job *jobs;
    size_t n;
    std::vector<JobState> js;
    SlotCaps caps;
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
    if (len && host_pinned(p) && host_pinned(p + len - 1)) {
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

SlotBuffers slot_buffers(gc_gpu_ctx *ctx, Slot &sl)
{
    return SlotBuffers{ sl.d_in,      sl.d_out,      sl.d_meta,      sl.d_scr,     sl.h_meta,     ctx->in_cap,
                        ctx->out_cap, ctx->meta_cap, ctx->scr_cap,   ctx->d_tab,   ctx->d_tab32,  &sl.d_lazy,
                        &sl.lazy_cap, &ctx->d_work,  &ctx->work_cap, &ctx->d_join, &ctx->join_cap };
}

/* Prepare a job: its codec checks it and makes its GpuJob; false when it
 * failed already (status set). */
bool job_prepare(Batch &b, size_t j)
{
    gc_gpu_job &job = b.jobs[j];
    JobState &s = b.js[j];
    gc_error_clear(&job.err);
    job.status = GC_OK;
    job.dst_len = 0;
    if ((!job.src && job.src_len) || !job.dst) {
        job.status = gc_fail(&job.err, GC_E_INVALID, "gpu: job %zu: missing buffer", j);
        return false;
    }
    const GpuCodec *codec = codec_find((int)job.codec);
    if (!codec) {
        job.status = gc_fail(&job.err, GC_E_INVALID, "gpu: job %zu: no GPU codec %d", j, (int)job.codec);
        return false;
    }
    GpuJob *gj = nullptr;
    int rc = codec->prepare(job, j, &gj);
    if (rc != GC_OK) {
        job.status = rc;
        return false;
    }
    s.codec.reset(gj);
    if (gj->units) {
        locate_direct(job.src, job.src_len, &s.src_lo, &s.src_hi);
        locate_direct(job.dst, gj->out_len, &s.dst_lo, &s.dst_hi);
    }
    return true;
}

void job_finish(Batch &b, size_t j)
{
    gc_gpu_job &job = b.jobs[j];
    JobState &s = b.js[j];
    if (s.failed || job.status != GC_OK)
        return;
    job.dst_len = s.codec->finish();
    b.st.bytes_in += job.src_len;
    b.st.bytes_out += job.dst_len;
}

/* The next piece in job order; false when every job is cut up. */
bool next_piece(Batch &b, size_t *pj, uint64_t *pu0, uint64_t *pn)
{
    for (; b.gen_job < b.n; b.gen_job++, b.gen_prepared = false) {
        size_t j = b.gen_job;
        JobState &s = b.js[j];
        if (s.whole)
            continue;
        if (!b.gen_prepared) {
            b.gen_prepared = true;
            if (!job_prepare(b, j)) {
                s.failed = true;
                continue;
            }
            if (s.codec->units == 0) {
                job_finish(b, j);
                continue;
            }
        }
        if (s.failed || s.next_unit >= s.codec->units)
            continue;
        uint64_t n = 0;
        int rc = s.codec->piece_units(s.next_unit, b.caps, &n, &b.jobs[j].err);
        if (rc != GC_OK) {
            b.jobs[j].status = rc;
            s.failed = true;
            continue;
        }
        *pj = j;
        *pu0 = s.next_unit;
        *pn = n;
        s.next_unit += n;
        return true;
    }
    return false;
}

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
    } parts[3] = { { 0, lo, pinned }, { lo, hi - lo, host + lo }, { hi, len - hi, pinned + hi } };
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

/* Start a piece on an idle slot: the codec says where its bytes are and
 * stages its metadata; its input goes to the copy pool. */
void piece_begin(Batch &b, Slot &sl, size_t j, uint64_t u0, uint64_t n)
{
    JobState &s = b.js[j];
    sl.seq = b.next_seq++;
    sl.job = j;
    sl.p = Piece();
    sl.p.u0 = u0;
    sl.p.n = n;
    sl.meta_d2h = 0;
    sl.h2d_queued = false;
    sl.used = true;
    s.codec->piece_begin(sl.p, sl.h_meta);
    if (!s.codec->out_sized_on_device)
        direct_part(s.dst_lo, s.dst_hi, sl.p.out_host, sl.p.out_len, &sl.out_lo, &sl.out_hi);
    direct_part(s.src_lo, s.src_hi, sl.p.in_host, sl.p.in_len, &sl.in_lo, &sl.in_hi);
    stage(b.ctx->pool, sl.cp, sl.h_in, sl.p.in_host, sl.p.in_len, sl.in_lo, sl.in_hi);
    sl.state = S_STAGE_IN;
}

/* Queue the output D2H of a placed piece. */
int piece_output_d2h(Batch &b, Slot &sl, gc_error *err)
{
    GC_CUDA(cudaEventRecord(sl.e_d0, sl.st));
    GC_CUDA(dma_parts(sl.d_out + sl.p.out_dev_off, sl.p.out_host, sl.h_out, sl.p.out_len, sl.out_lo, sl.out_hi,
                      false, sl.st));
    GC_CUDA(cudaEventRecord(sl.e_d1, sl.st));
    b.st.d2h_bytes += sl.p.out_len + sl.meta_d2h;
    sl.state = S_D2H;
    return GC_OK;
}

bool copies_done(const Slot &sl);

/* Queue a staged piece's H2D (input and metadata), once. */
int piece_h2d(Batch &b, Slot &sl, gc_error *err)
{
    if (sl.h2d_queued)
        return GC_OK;
    GC_CUDA(cudaEventRecord(sl.e_h0, sl.st));
    GC_CUDA(dma_parts(sl.d_in, (uint8_t *)sl.p.in_host, sl.h_in, sl.p.in_len, sl.in_lo, sl.in_hi, true, sl.st));
    if (sl.p.meta_in_len)
        GC_CUDA(cudaMemcpyAsync(sl.d_meta, sl.h_meta + sl.p.meta_in_off, sl.p.meta_in_len, cudaMemcpyHostToDevice,
                                sl.st));
    GC_CUDA(cudaEventRecord(sl.e_h1, sl.st));
    b.st.h2d_bytes += sl.p.in_len;
    sl.h2d_queued = true;
    return GC_OK;
}

/* Input staged: queue H2D, kernels and what can be copied back already. */
int piece_queue(Batch &b, Slot &sl, gc_error *err)
{
    GpuJob &cj = *b.js[sl.job].codec;
    const SlotBuffers bufs = slot_buffers(b.ctx, sl);
    /* the host loop polls events: drop a cudaErrorNotReady the runtime may
     * have kept, so that the launchers' cudaGetLastError() sees only theirs */
    cudaError_t pending = cudaGetLastError();
    if (pending != cudaSuccess && pending != cudaErrorNotReady)
        return gc_fail(err, GC_E_DEVICE, "cuda: %s", cudaGetErrorString(pending));
    int rc = piece_h2d(b, sl, err);
    if (rc != GC_OK)
        return rc;
    if (cj.kernels_wait) /* the next staged piece's copy overlaps these kernels rather than following them */
        for (Slot &next : b.ctx->slots)
            if (next.state == S_STAGE_IN && next.seq == sl.seq + 1 && copies_done(next) &&
                (rc = piece_h2d(b, next, err)) != GC_OK)
                return rc;
    rc = cj.piece_kernels(sl.p, bufs, sl.st, err);
    if (rc != GC_OK)
        return rc;
    GC_CUDA(cudaEventRecord(sl.e_k1, sl.st));
    if (cj.out_sized_on_device) {
        /* the results first; the output once the codec has placed it */
        if ((rc = cj.piece_meta_d2h(sl.p, bufs, sl.st, &sl.meta_d2h, err)) != GC_OK)
            return rc;
        GC_CUDA(cudaEventRecord(sl.e_m1, sl.st));
        sl.state = S_GPU;
        return GC_OK;
    }
    /* the output's size is known: queue the copies now */
    GC_CUDA(cudaEventRecord(sl.e_m1, sl.st));
    GC_CUDA(cudaEventRecord(sl.e_d0, sl.st));
    if ((rc = cj.piece_meta_d2h(sl.p, bufs, sl.st, &sl.meta_d2h, err)) != GC_OK)
        return rc;
    GC_CUDA(dma_parts(sl.d_out, sl.p.out_host, sl.h_out, sl.p.out_len, sl.out_lo, sl.out_hi, false, sl.st));
    GC_CUDA(cudaEventRecord(sl.e_d1, sl.st));
    b.st.d2h_bytes += sl.p.out_len + sl.meta_d2h;
    sl.state = S_D2H;
    return GC_OK;
}

/* Output sized on the device, results back: the codec places the output,
 * then its D2H is queued. */
int piece_place(Batch &b, Slot &sl, gc_error *err)
{
    JobState &s = b.js[sl.job];
    int rc = s.codec->piece_place(sl.p, sl.h_meta, err);
    if (rc == GC_OK)
        rc = s.codec->piece_place_kernels(sl.p, slot_buffers(b.ctx, sl), sl.st, err);
    if (rc != GC_OK)
        return rc;
    s.place_next = sl.p.u0 + sl.p.n;
    direct_part(s.dst_lo, s.dst_hi, sl.p.out_host, sl.p.out_len, &sl.out_lo, &sl.out_hi);
    return piece_output_d2h(b, sl, err);
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
    if (s.codec->out_sized_on_device)
        b.st.d2h_ms += ev_ms(sl.e_k1, sl.e_m1);
    b.st.pieces++;
    if (!s.failed) {
        int rc = s.codec->piece_check(sl.p, sl.h_meta, &job.err);
        if (rc != GC_OK) {
            job.status = rc;
            s.failed = true;
        }
    }
    if (s.failed) /* nothing to hand over */
        stage(ctx->pool, sl.cp, nullptr, nullptr, 0, 0, 0);
    else
        stage(ctx->pool, sl.cp, sl.p.out_host, sl.h_out, sl.p.out_len, sl.out_lo, sl.out_hi);
    sl.state = S_STAGE_OUT;
}

void piece_done(Batch &b, Slot &sl)
{
    JobState &s = b.js[sl.job];
    s.done_units += sl.p.n;
    if (s.done_units == s.codec->units)
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
        uint64_t u0, n;
        if (!next_piece(b, &j, &u0, &n))
            break;
        piece_begin(b, sl, j, u0, n);
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
    /* outputs sized on the device: placed once the results are back, in unit order per job */
    for (bool again = true; again;) {
        again = false;
        for (Slot &sl : ctx->slots) {
            if (sl.state != S_GPU || b.js[sl.job].place_next != sl.p.u0)
                continue;
            if ((rc = ev_poll(sl.e_m1, err)) < 0)
                return GC_E_DEVICE;
            if (rc) {
                if ((rc = piece_place(b, sl, err)) != GC_OK)
                    return rc;
                *progress = again = true;
            }
        }
    }
    for (size_t i = 0; i < ns; i++)
        *busy = *busy || ctx->slots[i].state != S_IDLE;
    return GC_OK;
}

/* The jobs their codec runs whole (run_whole_decode), before the pipeline starts. */
int run_whole_jobs(Batch &b, gc_error *err)
{
    for (size_t c = 0; c < kCodecCount; c++) {
        const GpuCodec *codec = kCodecs[c];
        if (!codec->run_whole_decode)
            continue;
        std::vector<gc_gpu_job *> whole;
        for (size_t j = 0; j < b.n; j++) {
            if ((int)b.jobs[j].codec == (int)codec->id && b.jobs[j].op == GC_GPU_DECODE) {
                b.js[j].whole = true;
                whole.push_back(&b.jobs[j]);
            }
        }
        if (whole.empty())
            continue;
        int rc = codec->run_whole_decode(b.ctx, whole.data(), whole.size(), &b.st, err);
        if (rc != GC_OK)
            return rc;
        for (gc_gpu_job *job : whole) {
            if (job->status == GC_OK) {
                b.st.bytes_in += job->src_len;
                b.st.bytes_out += job->dst_len;
            }
        }
    }
    return GC_OK;
}

int batch_run(Batch &b, gc_error *err)
{
    gc_gpu_ctx *ctx = b.ctx;
    const size_t ns = ctx->slots.size();
    GC_CUDA(cudaEventRecord(ctx->e_begin, ctx->slots[0].st));
    for (size_t i = 1; i < ns; i++)
        GC_CUDA(cudaStreamWaitEvent(ctx->slots[i].st, ctx->e_begin, 0));
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
    b.st.wall_ms += wall; /* after the whole jobs' own (run_whole_jobs) */
    return GC_OK;
}

} // namespace

extern "C" int gc_gpu_run_batch(gc_gpu_ctx *ctx, gc_gpu_job *jobs, size_t n_jobs, gc_gpu_batch_stats *stats,
                                gc_error *err)
{
    if (!ctx || (!jobs && n_jobs))
        return gc_fail(err, GC_E_INVALID, "gpu: run_batch: missing argument");
    uint64_t t0 = gc_now_ns();
    pthread_mutex_lock(&ctx->mu);
    int rc;
    gc_gpu_batch_stats st{};
    {
        Batch b;
        b.ctx = ctx;
        b.jobs = jobs;
        b.n = n_jobs;
        b.caps = SlotCaps{ ctx->in_cap, ctx->out_cap, ctx->meta_cap, ctx->scr_cap, ctx->piece_bytes };
        bool fits = true;
        try {
            b.js.resize(n_jobs);
        } catch (const std::bad_alloc &) {
            fits = false; /* every job fails on its own; the device is fine */
            for (size_t j = 0; j < n_jobs; j++)
                jobs[j].status =
                    gc_fail(&jobs[j].err, GC_E_NOMEM, "gpu: out of host memory for a batch of %zu jobs", n_jobs);
        }
        rc = ctx_use(ctx, err);
        if (rc == GC_OK && fits)
            rc = run_whole_jobs(b, err);
        if (rc == GC_OK && fits)
            rc = batch_run(b, err);
        if (rc != GC_OK) {
            /* leave the streams idle before returning; errors here are the same device failure */
            for (Slot &s : ctx->slots)
                (void)cudaStreamSynchronize(s.st);
        }
        st = b.st;
    }
    pthread_mutex_unlock(&ctx->mu);
    st.host_ms = (double)(gc_now_ns() - t0) / 1e6;
    if (stats)
        *stats = st;
    if (rc == GC_OK)
        gc_error_clear(err);
    return rc;
}
