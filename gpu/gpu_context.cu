/*
 * gpu_context.cu - a device context's lifetime: gc_gpu_open allocates, once,
 * the slots (a stream each, with pinned staging and device buffers sized for
 * every codec of the pipeline), the CRC tables and the staging copy pool;
 * gc_gpu_close frees them.
 *
 * Environment, read by gc_gpu_open:
 *   GC_GPU_COPY_THREADS staging copy threads (default: min(16, the CPUs the opening
 *                       thread may run on; its copy threads run on those CPUs too)
 *   GC_GPU_COPY_NT      0 disables non-temporal stores in the staging copies
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "gpu_pipeline.cuh"
#include "pipeline_policy.cuh"
/* common/parallel.h, whose C11 atomics C++ cannot include: the CPUs this thread may use */
extern "C" unsigned gc_cpu_count(void);

using namespace gcgpu;

namespace gcgpu {

bool host_pinned(const void *p)
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

bool device_grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return true;
    cudaFree(*buf);
    *buf = nullptr;
    *cap = 0;
    if (cudaMalloc(buf, need) != cudaSuccess) {
        (void)cudaGetLastError();
        *buf = nullptr;
        return false;
    }
    *cap = need;
    return true;
}

int ctx_use(gc_gpu_ctx *ctx, gc_error *err)
{
    GC_CUDA(cudaSetDevice(ctx->dev));
    return GC_OK;
}

int order_after_legacy(gc_gpu_ctx *ctx, gc_error *err)
{
    GC_CUDA(cudaEventRecord(ctx->e_legacy, cudaStreamLegacy));
    GC_CUDA(cudaStreamWaitEvent(ctx->slots[0].st, ctx->e_legacy, 0));
    return GC_OK;
}

} // namespace gcgpu

namespace {

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
        cudaFree(s.d_meta);
        cudaFree(s.d_scr);
        cudaFree(s.d_lazy);
        for (cudaEvent_t e : { s.e_h0, s.e_h1, s.e_k1, s.e_m1, s.e_d0, s.e_d1 })
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
    cudaFree(ctx->d_tab32);
    cudaFree(ctx->d_work);
    cudaFree(ctx->d_join);
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
    Crc32Tables *h_tab32 = static_cast<Crc32Tables *>(malloc(sizeof(Crc32Tables)));
    if (!h_tab32)
        return gc_fail(err, GC_E_NOMEM, "gpu: out of host memory");
    crc_tables_build(h_tab32);
    rc = cudaMalloc(&ctx->d_tab32, sizeof(Crc32Tables));
    if (rc == cudaSuccess)
        rc = cudaMemcpy(ctx->d_tab32, h_tab32, sizeof(Crc32Tables), cudaMemcpyHostToDevice);
    free(h_tab32);
    GC_CUDA(rc);
    GC_CUDA(cudaMallocHost(&ctx->h_small, 4096));
    GC_CUDA(cudaEventCreate(&ctx->e_begin));
    GC_CUDA(cudaEventCreateWithFlags(&ctx->e_legacy, cudaEventDisableTiming));
    /* a slot holds batch bytes of input (or what a codec needs at least) and, a little expanded, of output;
     * scratch and metadata as the hungriest codec needs */
    size_t b = ctx->piece_bytes;
    for (size_t i = 0; i < kCodecCount; i++) /* e.g. bzip2's two 32 MiB segments */
        b = std::max(b, kCodecs[i]->min_slot_in);
    ctx->in_cap = slot_buffer_bytes(b);
    ctx->out_cap = ctx->in_cap;
    ctx->meta_cap = ctx->scr_cap = 0;
    for (size_t i = 0; i < kCodecCount; i++) {
        ctx->meta_cap = std::max(ctx->meta_cap, kCodecs[i]->slot_meta(ctx->piece_bytes));
        ctx->scr_cap = std::max(ctx->scr_cap, kCodecs[i]->slot_scratch(ctx->piece_bytes));
    }
    ctx->slots.resize(ctx->ns);
    for (Slot &s : ctx->slots) {
        GC_CUDA(cudaStreamCreateWithFlags(&s.st, cudaStreamNonBlocking));
        GC_CUDA(cudaMallocHost(&s.h_in, ctx->in_cap));
        GC_CUDA(cudaMallocHost(&s.h_out, ctx->out_cap));
        GC_CUDA(cudaMallocHost(&s.h_meta, ctx->meta_cap));
        GC_CUDA(cudaMalloc(&s.d_in, ctx->in_cap));
        GC_CUDA(cudaMalloc(&s.d_out, ctx->out_cap));
        GC_CUDA(cudaMalloc(&s.d_meta, ctx->meta_cap));
        GC_CUDA(cudaMalloc(&s.d_scr, ctx->scr_cap));
        for (cudaEvent_t *e : { &s.e_h0, &s.e_h1, &s.e_k1, &s.e_m1, &s.e_d0, &s.e_d1 })
            GC_CUDA(cudaEventCreate(e));
    }
    /* the staging copy pool: its threads inherit the opening thread's CPUs (the
     * daemon opens a context from the CPUs near its GPU), so size it by those */
    long cores = (long)gc_cpu_count();
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
    ctx->ns = cfg && cfg->slots ? std::min(cfg->slots, kMaxSlots) : kDefaultSlots;
    ctx->piece_bytes = cfg && cfg->piece_bytes ? cfg->piece_bytes : kDefaultSlotBytes;
    if (ctx->piece_bytes < kMinSlotBytes)
        ctx->piece_bytes = kMinSlotBytes;
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
