/*
 * bz2_policy.cuh - tuning of the bzip2 encoder's kernels (bz2_enc_*.cu):
 * geometry only, nothing here changes an output byte. The measurements
 * behind the values are in docs/history/BENCHMARKS-2026-11-27.md.
 */
#ifndef GC_BZ2_POLICY_CUH
#define GC_BZ2_POLICY_CUH

#include <stdint.h>

namespace gcgpu {

/* Largest piece (input bytes of whole segments) one scratch serves; offsets
 * inside a piece are 32-bit, ranks of the rotation sort 28-bit. */
constexpr uint64_t kBz2MaxPiece = 1ull << 30;
/* Input a batch piece carries to the next (bz2_gpu.cu): less than one
 * block's, which is at most 900000 RLE1 bytes of 255-byte runs (5 bytes
 * each); BZ2_MAX_BLOCK_OUTPUT in bzip2.h is the same bound. */
constexpr uint64_t kBz2MaxCarry = 900000ull / 5 * 259;
/* A slot's sort scratch is sized for its piece rounded up to this (it only
 * grows): a slot that serves 16 MiB requests holds a quarter of what a
 * 64 MiB piece needs. */
constexpr uint64_t kBz2ScratchStep = 4ull << 20;
/* 32 MiB segments a pipeline slot holds (GpuCodec::min_slot_in): larger
 * pieces pay the sort's per-round costs and the per-block kernels' idle SMs
 * less often (docs/history/BENCHMARKS-2026-11-27.md, "bzip2 compression on
 * the GPU"); 4 costs 2 x 129 MiB of pinned
 * staging per slot. */
constexpr uint64_t kBz2SlotSegments = 4;
/* Threads of the grid-wide kernels. */
constexpr int kBz2Threads = 256;
/* Table choice: threads of the CTA that handles one block (its assignment
 * passes are latency-bound loads of the block's symbols). */
constexpr int kBz2TableThreads = 1024;
/* RLE1 writer: output bytes per thread. */
constexpr uint32_t kBz2RleBytesPerThread = 16;
/* Block CRC: input bytes per thread (a tile), summed into the block's CRC. */
constexpr uint32_t kBz2CrcTile = 4096;
/* The rotation sort's first key: at least this many bytes of each rotation
 * (with the block index above them in a 64-bit radix key, and more of the
 * rotation where the radix passes these need leave room). */
constexpr int kBz2KeyBytes = 6;
/* The rotation sort's rounds: a group of more than this many members is one
 * CUB's segmented sort gives a CTA of its own (its medium tile on sm_86 and
 * later; correct whatever CUB's own threshold, only the split moves). */
constexpr uint32_t kBz2SegmentLarge = 112;
/* A round is segmented (each group on its own) while at most this many of
 * each 256 unresolved rotations sit in large groups. */
constexpr uint32_t kBz2SegmentShare = 22;
/* A round splits (large groups by radix passes over (group ordinal, rank),
 * small ones segmented) while at most this many of each 256 sit in large
 * groups; above, every group goes by the radix passes. */
constexpr uint32_t kBz2SplitShare = 224;
/* The rotation sort's repeat steps (bz2_enc_bwt_chain.cu): a step q must
 * repeat this many bytes of the root's start at q, leave at most one byte in
 * 2^kBz2StepMissShift with s[i] != s[i + q], fit kBz2StepRepeats times in
 * the root (so the search over q is short), and is looked for among the
 * first kBz2StepTries such q. */
constexpr uint32_t kBz2StepProbe = 32;
constexpr uint32_t kBz2StepRepeats = 8;
constexpr int kBz2StepMissShift = 10;
constexpr int kBz2StepTries = 4;
/* MTF: the block is cut into chunks of this many bytes, each moved to front
 * by one thread from the list the chunks before it leave. */
constexpr uint32_t kBz2MtfChunk = 4096;
/* MTF/RLE2 kernels: warps (one chunk or block each) per CTA. */
constexpr int kBz2MtfWarps = 4;

} // namespace gcgpu

#endif
