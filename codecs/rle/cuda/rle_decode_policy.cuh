/*
 * rle_decode_policy.cuh - tuning of the rle decoder's kernels (rle_decode.cu),
 * apart from the algorithm: occupancy, the size of a work item, the span walk
 * and grid sizes. The block geometry is tile_policy.cuh's. The measurements
 * behind these values are in docs/history/BENCHMARKS-2026-11.md.
 */
#ifndef GC_RLE_DECODE_POLICY_CUH
#define GC_RLE_DECODE_POLICY_CUH

#include "tile_policy.cuh"

/* Minimum resident blocks per SM that dec_expand is compiled for
 * (__launch_bounds__): 4 beat 3 on every class once the decoder's CRC tables
 * fit 24 KiB of shared memory. -DGC_DEC_MINB=n builds a variant. */
#ifndef GC_DEC_MINB
#define GC_DEC_MINB 4
#endif
/* Widths 1 and 2: runs per run tile (16 per thread). An item pays a set-up
 * (lengths scanned, symbols staged) about as dear as expanding a window; at
 * 2048 runs, short runs of narrow elements made items of one window each.
 * Wider elements keep kRunTile: their symbols would not fit four blocks'
 * shared memory per SM. */
#ifndef GC_DEC_RUN_TILE_NARROW
#define GC_DEC_RUN_TILE_NARROW 4096
#endif
/* Runs each lane takes per turn of the span walk at width 1: one shared
 * atomic per lane and word rather than per run where a word holds several
 * run starts (short runs of narrow elements: 256 runs of mean 8 bytes per span). */
#ifndef GC_DEC_WALK_RUNS1
#define GC_DEC_WALK_RUNS1 4
#endif

namespace gcgpu {

/* Runs per run tile (8 per thread), the least any width uses. */
constexpr int kRunTile = 2048;
template <int W>
__host__ __device__ constexpr int dec_run_tile()
{
    return W <= 2 ? GC_DEC_RUN_TILE_NARROW : kRunTile;
}

/* Work items of an rle chunk (see run_tile_for in rle_decode.cu): at least
 * kRunTileMin runs, at most kItemBytes of output, kItemSlack below a whole
 * number of windows. */
constexpr uint32_t kRunTileMin = 64;
constexpr uint64_t kItemBytes = 8 * kWin - 1024;
constexpr uint64_t kItemSlack = 1024;

/* Runs per lane and turn of the span walk, by width. */
template <int W>
constexpr int kWalkRuns = W == 1   ? GC_DEC_WALK_RUNS1
                          : W == 2 ? 2
                                   : 1;

/* Grids of the per-chunk kernels (grid-stride loops take the rest):
 * dec_check runs a thread per chunk in blocks of kDecChunkThreads, at most
 * kDecThreadBlocksPerSm blocks per SM; dec_map, dec_cscan and dec_ccrc a warp
 * per chunk, at most kDecWarpBlocksPerSm blocks per SM. */
constexpr int kDecChunkThreads = 256;
constexpr int kDecThreadBlocksPerSm = 8;
constexpr int kDecWarpBlocksPerSm = 16;

} // namespace gcgpu

#endif
