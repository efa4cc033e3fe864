/*
 * pipeline_policy.cuh - tuning of the host side of the batch pipeline
 * (gpu_context.cu, gpu_pipeline.cu) and its staging copies (host_copy.cu): slots, slot
 * sizes, piece sizes and copy threads. The measurements behind these values
 * are in docs/history/BENCHMARKS-2026-11.md.
 */
#ifndef GC_PIPELINE_POLICY_CUH
#define GC_PIPELINE_POLICY_CUH

#include <stddef.h>
#include <stdint.h>

namespace gcgpu {

/* Slots (streams with their own staging and device buffers) per context:
 * gc_gpu_config.slots, this many when 0, at most kMaxSlots. */
constexpr unsigned kDefaultSlots = 3;
constexpr unsigned kMaxSlots = 16;
/* Input bytes one slot holds: gc_gpu_config.piece_bytes, this when 0, at
 * least kMinSlotBytes. */
constexpr size_t kDefaultSlotBytes = 64u << 20;
constexpr size_t kMinSlotBytes = 64u << 10;
/* rle chunks per piece at most (the size of a slot's metadata buffers, rle_gpu.cu). */
constexpr uint64_t kMaxPieceChunks = 1u << 16;

/* Staging copy threads per context: one per CPU up to kDefaultCopyThreads
 * (the staging copies are what bounds a large request); GC_GPU_COPY_THREADS
 * may ask for up to kMaxCopyThreads. */
constexpr long kDefaultCopyThreads = 16;
constexpr long kMaxCopyThreads = 64;
/* The copy pool: bytes per stripe handed to one thread; copies up to
 * kCopyInline run on the submitter; non-temporal stores from kCopyNtMin on;
 * at most kCopyMaxQueue tasks queued. */
constexpr size_t kCopyStripe = 1u << 20;
constexpr size_t kCopyInline = 256u << 10;
constexpr size_t kCopyNtMin = 64u << 10;
constexpr size_t kCopyMaxQueue = 64;

} // namespace gcgpu

#endif
