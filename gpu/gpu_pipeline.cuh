/*
 * gpu_pipeline.cuh - the context and the batch pipeline's state, shared by
 * gpu_context.cu (lifetime), gpu_pipeline.cu (the batch state machine) and
 * gpu_resident.cu (the device-resident calls). Not seen by C code.
 */
#ifndef GC_GPU_PIPELINE_CUH
#define GC_GPU_PIPELINE_CUH

#include <pthread.h>

#include <memory>
#include <vector>

#include "gpu_codec.cuh"
#include "gpu_internal.cuh"
#include "host_copy.cuh"

namespace gcgpu {

enum SlotState { S_IDLE = 0, S_STAGE_IN, S_GPU, S_D2H, S_STAGE_OUT };

/* One stream with its own pinned staging and device buffers, holding one
 * piece at a time. */
struct Slot {
    cudaStream_t st = nullptr;
    uint8_t *h_in = nullptr, *h_out = nullptr, *h_meta = nullptr;
    uint8_t *d_in = nullptr, *d_out = nullptr, *d_meta = nullptr, *d_scr = nullptr;
    uint8_t *d_lazy = nullptr; /* a codec's scratch made on first use (SlotBuffers::d_lazy) */
    size_t lazy_cap = 0;
    cudaEvent_t e_h0 = nullptr, e_h1 = nullptr, e_k1 = nullptr, e_m1 = nullptr, e_d0 = nullptr, e_d1 = nullptr;
    int state = S_IDLE;
    bool used = false;
    /* the piece in flight */
    uint64_t seq = 0;
    size_t job = 0;
    Piece p;
    uint64_t meta_d2h = 0;   /* bytes of results queued back by piece_meta_d2h */
    bool h2d_queued = false; /* its input's H2D is queued (ahead of its turn, see kernels_wait) */
    /* [in_lo, in_hi) of the input goes straight from caller memory (page-locked),
     * the rest through h_in at the same offsets; likewise the output through h_out */
    uint64_t in_lo = 0, in_hi = 0, out_lo = 0, out_hi = 0;
    CopyTask cp[2];
};

/* One job in the batch, as the pipeline tracks it. */
struct JobState {
    std::unique_ptr<GpuJob> codec; /* null until prepared, and for a job that failed there */
    uint64_t next_unit = 0, done_units = 0;
    uint64_t place_next = 0; /* two-phase output: first unit of the next piece to place */
    /* page-locked parts of the caller's buffers: [lo, hi) addresses */
    uintptr_t src_lo = 0, src_hi = 0, dst_lo = 0, dst_hi = 0;
    bool failed = false;
    bool whole = false; /* handed to its codec's run_whole before the pipeline ran */
};

} // namespace gcgpu

struct gc_gpu_ctx {
    int dev = 0;
    unsigned ns = 0;
    size_t piece_bytes = 0, in_cap = 0, out_cap = 0, meta_cap = 0, scr_cap = 0;
    gcgpu::CrcTables *d_tab = nullptr;
    gcgpu::Crc32Tables *d_tab32 = nullptr;
    uint8_t *d_work = nullptr; /* a codec's working scratch, made on first use (SlotBuffers::d_work) */
    size_t work_cap = 0;
    uint8_t *d_join = nullptr; /* input a codec carries between a job's pieces (SlotBuffers::d_join) */
    size_t join_cap = 0;
    pthread_mutex_t mu;
    std::vector<gcgpu::Slot> slots;
    cudaEvent_t e_begin = nullptr, e_legacy = nullptr;
    uint8_t *h_small = nullptr;      /* pinned, for the *_device calls */
    gcgpu::CopyPool *pool = nullptr; /* staging copies of the batch pipeline */
};

namespace gcgpu {

/* The codecs the pipeline can run, and the one a job names (null: none). */
extern const GpuCodec *const kCodecs[];
extern const size_t kCodecCount;
const GpuCodec *codec_find(int id);

/* Make ctx's device current (gpu_context.cu). */
int ctx_use(gc_gpu_ctx *ctx, gc_error *err);
/* The context's streams are non-blocking: make stream 0 wait for work the
 * caller queued on the legacy default stream (gpu_context.cu). */
int order_after_legacy(gc_gpu_ctx *ctx, gc_error *err);

} // namespace gcgpu

#endif
