/*
 * tile_policy.cuh - the block geometry every kernel of the CUDA backend is
 * built around (the CRC machinery, the rle encoder and decoder): how many
 * threads a block has and how much memory each covers. The per-family tuning
 * is in rle_encode_policy.cuh, rle_decode_policy.cuh and pipeline_policy.cuh.
 */
#ifndef GC_TILE_POLICY_CUH
#define GC_TILE_POLICY_CUH

#include <stdint.h>

namespace gcgpu {

/* A block of 256 threads covers one 16 KiB window of memory aligned to 16
 * bytes; each thread owns a contiguous 64-byte cell of it (four 16-byte
 * vectors). A warp's 32 cells are 2 KiB of contiguous data, what the
 * tensor-core CRC takes in one go (warp_crc); warps' CRCs combine with one
 * GF(2) multiply each. */
constexpr int kThreads = 256;
constexpr int kCell = 64;
constexpr uint32_t kWin = kThreads * kCell; /* 16384 */
constexpr int kWarps = kThreads / 32;
constexpr int kSpan = kCell * 32; /* bytes of a warp's 32 cells: 2048 */
constexpr int kWinLog2 = 14;
static_assert(kWin == 1u << kWinLog2, "kWinLog2");

/* Tile length in bytes, chunk-relative: a tile must fit one window wherever
 * it starts, so 16 bytes less when chunk starts are not 16-byte aligned. */
static inline uint32_t tile_len_for(uint32_t chunk_size)
{
    return (chunk_size % 16 == 0) ? kWin : kWin - 16;
}

} // namespace gcgpu

#endif
