/*
 * bz2_dec_policy.cuh - tuning of the bzip2 decoder's kernels (bz2_dec_*.cu):
 * geometry only, nothing here changes an output byte or a verdict. The
 * measurements behind the values are in docs/history/BENCHMARKS-2026-11-27.md.
 */
#ifndef GC_BZ2_DEC_POLICY_CUH
#define GC_BZ2_DEC_POLICY_CUH

#include <stdint.h>

namespace gcgpu {

/* Block candidates decoded at once (each holds a 900 kB column on the
 * device): a stream with more is decoded in waves of this many. */
constexpr uint32_t kDecMaxColumns = 2048;
/* Columns whose inverse BWT runs at once (T takes 4 bytes per column
 * byte). */
constexpr uint32_t kDecSortColumns = 512;
/* Huffman stage: symbol groups per segment (one thread decodes a segment),
 * and segments per CTA (they share the candidate's tables). */
constexpr uint32_t kDecSegGroups = 32;
constexpr int kDecSegThreads = 64;
/* RLE1 stage: warps per CTA (one chunk each, or one block in the block
 * scan), and the column bytes of a chunk (a multiple of 128). */
constexpr int kDecRle1Warps = 4;
constexpr uint32_t kDecRle1Chunk = 4096;
/* Bits of the first-level Huffman lookup table in shared memory. */
constexpr int kDecLutBits = 10;
/* Huffman stage's walk: threads per block candidate (whole warps; they
 * share each group's lookups, bz2_dec_chase.cuh), and more where the batch
 * has fewer than kDecWalkFewBelow candidates per SM: few walks at once,
 * each a chain of group latencies that more threads per group shorten. */
constexpr int kDecWalkThreads = 128;
constexpr int kDecWalkFewThreads = 256;
constexpr uint32_t kDecWalkFewBelow = 1;
/* The walk asks for the input this many bytes a lane ahead of a group
 * (the first warp: 32 times as far), so its windows come from L1. */
constexpr uint64_t kDecChaseAhead = 128;
/* How far ahead (32-bit words) a lone bit reader asks for its input. */
constexpr uint64_t kDecPrefetchWords = 256;
/* Inverse BWT's T by counting (bz2_dec_lf.cu): column bytes a CTA sorts
 * in shared memory, and its warps (one slice of the tile each). */
constexpr uint32_t kDecLfTile = 4096;
constexpr int kDecLfWarps = 8;
/* Inverse BWT: one splitter row in this many; a thread follows the cycle
 * from each splitter to the next. */
constexpr uint32_t kDecSplitStride = 32;
/* Threads of the grid-wide kernels. */
constexpr int kDecThreads = 256;
/* Output bytes expanded per round on the device before they go to the host. */
constexpr uint64_t kDecRoundBytes = 512ull << 20;
/* Decode jobs of a batch decode together, up to this many and this much
 * input at once (their blocks share the kernels' launches). */
constexpr uint32_t kDecMaxJobs = 256;
constexpr uint64_t kDecGroupInput = 256ull << 20;
/* A stream whose block candidates are mostly not blocks (crafted, or data
 * that embeds the magic) is handed back: more false candidates than this
 * plus the blocks found. */
constexpr uint32_t kDecFalseSlack = 64;

} // namespace gcgpu

#endif
