/*
 * rle_encode_policy.cuh - tuning of the rle encoder's kernels (rle_encode.cu),
 * apart from the algorithm: occupancy targets and grid sizes. The block
 * geometry is tile_policy.cuh's. The measurements behind these values are in
 * docs/history/BENCHMARKS-2026-11.md.
 */
#ifndef GC_RLE_ENCODE_POLICY_CUH
#define GC_RLE_ENCODE_POLICY_CUH

#include "tile_policy.cuh"

/* Minimum resident blocks per SM that enc_analyze is compiled for
 * (__launch_bounds__): trades registers for occupancy; 4 beat 1 on nearly
 * every data class. -DGC_ENC_MINB=n builds a variant (build-gpu.sh's
 * GPU_VARIANT_FLAGS). */
#ifndef GC_ENC_MINB
#define GC_ENC_MINB 4
#endif
/* enc_emit alone: 3 (no register spills) helped short runs of narrow elements
 * but cost more on long runs and wide elements, so it follows GC_ENC_MINB. */
#ifndef GC_EMIT_MINB
#define GC_EMIT_MINB GC_ENC_MINB
#endif

namespace gcgpu {

/* enc_chunks: one warp per chunk (kWarps chunks per block), at most this many
 * blocks per SM (a grid-stride loop takes the rest). */
constexpr int kEncChunkBlocksPerSm = 16;

} // namespace gcgpu

#endif
