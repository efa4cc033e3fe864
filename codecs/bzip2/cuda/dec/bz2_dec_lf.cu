/*
 * bz2_dec_lf.cu - the inverse BWT's T vector (bz2_dec_ibwt.cu walks it): for
 * each accepted block of a sort wave, the stable counting sort of its column
 * that bzip2's own decoder does with cftab, on tiles.
 *
 * Byte i of the column (the last column L) goes to row C[L[i]] + the number
 * of equal bytes before it, and that row gets tt = i << 8 | L[i], splitter
 * rows marked, exactly what a stable sort of (L[i], i) followed by packing
 * gives. Three launches per wave:
 *
 *   count    one CTA per tile of kDecLfTile bytes, each warp a slice of it,
 *            32 bytes a step: the tile's histogram;
 *   offsets  one CTA per block: per byte value, a prefix over the block's
 *            tiles plus C (the bytes below it): each tile's first row for
 *            every byte value;
 *   scatter  one CTA per tile again: the tile sorted by counting in shared
 *            memory (each warp walks its slice in index order, equal bytes
 *            of a step taking consecutive places), then written out, so
 *            that each value's entries leave as one contiguous run of rows
 *            instead of 4-byte writes scattered over the block's rows.
 *
 * Equal bytes of a step find each other with eight ballots, one per bit,
 * whose time does not depend on the data (__match_any_sync's does).
 *
 * It replaced CUB's segmented radix sort on (byte, row) pairs and a packing
 * pass: a byte key sorts by counting in one read and one scatter, where the
 * general sort moved keys and values through global memory more than once
 * and needed a sorted copy of both (docs/DECISIONS.md, "The inverse BWT's T
 * by counting", has the measurements).
 */
#include <cub/cub.cuh>

#include "bz2_dec.cuh"

namespace gcgpu {
namespace {

constexpr uint32_t kLfBytes = 256; /* byte values */
constexpr int kLfThreads = kDecLfWarps * 32;
constexpr uint32_t kLfSlice = kDecLfTile / kDecLfWarps; /* a warp's bytes of the tile */
static_assert(kLfThreads == (int)kLfBytes, "one thread per byte value in the prefix steps");
static_assert(kLfSlice % 32 == 0, "a slice is whole warp steps");

/* Tile t's counters (or first rows) of the wave's block k. */
__device__ __forceinline__ uint64_t tile_at(uint32_t k, uint32_t t)
{
    return ((uint64_t)k * kDecLfTiles + t) * kLfBytes;
}

/* The lanes of the warp whose byte equals this lane's (itself included), among those with one. */
__device__ __forceinline__ uint32_t byte_peers(uint32_t c, bool valid)
{
    uint32_t peers = __ballot_sync(0xffffffffu, valid);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const bool bit = (c >> k) & 1;
        const uint32_t set = __ballot_sync(0xffffffffu, bit);
        peers &= bit ? set : ~set;
    }
    return valid ? peers : 0;
}

/* This CTA's tile of block b: its bytes and their count; false when past the block. */
__device__ __forceinline__ bool cta_tile(const DecBlk &b, const uint8_t *cols, const uint8_t **in, uint32_t *start,
                                         uint32_t *len)
{
    *start = blockIdx.x * kDecLfTile;
    if (*start >= b.n)
        return false;
    *len = min(kDecLfTile, b.n - *start);
    *in = cols + (uint64_t)b.col * BZ2_MAX_BLOCK + *start;
    return true;
}

/*
 * Walks this warp's slice of the tile in index order, 32 bytes a step. Per
 * value, at[c] is where its next byte goes; each byte gets at[c] plus the
 * equal bytes of its step before it, and at[c] moves past them. Calls
 * place(i, c, pos) for each byte (i: its index in the tile).
 */
template <typename Place>
__device__ __forceinline__ void walk_slice(const uint8_t *in, uint32_t len, uint32_t *at, Place place)
{
    const uint32_t lane = threadIdx.x % 32, below_me = (1u << lane) - 1;
    const uint32_t from = (threadIdx.x / 32) * kLfSlice, to = min(from + kLfSlice, len);
    for (uint32_t s = from; s < to; s += 32) {
        const uint32_t i = s + lane;
        const bool valid = i < to;
        const uint32_t c = valid ? in[i] : 0;
        const uint32_t peers = byte_peers(c, valid);
        const uint32_t rank = __popc(peers & below_me), pos = valid ? at[c] + rank : 0;
        __syncwarp(); /* every lane has read its value's place before any moves it on */
        if (valid) {
            place(i, c, pos);
            if (rank == __popc(peers) - 1)
                at[c] = pos + 1;
        }
        __syncwarp();
    }
}

/* Each warp's count of every value in its slice, into cnt[warp][value] (zeroed here). */
__device__ __forceinline__ void count_slices(const uint8_t *in, uint32_t len, uint32_t (*cnt)[kLfBytes])
{
    for (uint32_t w = 0; w < kDecLfWarps; w++)
        cnt[w][threadIdx.x] = 0;
    __syncthreads();
    walk_slice(in, len, cnt[threadIdx.x / 32], [](uint32_t, uint32_t, uint32_t) {});
    __syncthreads();
}

/* Each tile's byte histogram. grid (kDecLfTiles, nb). */
__global__ void __launch_bounds__(kLfThreads) lf_count(const DecBlk *blk, const uint8_t *cols, uint32_t *hist)
{
    __shared__ uint32_t cnt[kDecLfWarps][kLfBytes];
    const uint8_t *in;
    uint32_t start, len;
    if (!cta_tile(blk[blockIdx.y], cols, &in, &start, &len))
        return;
    count_slices(in, len, cnt);
    uint32_t sum = 0;
    for (uint32_t w = 0; w < kDecLfWarps; w++)
        sum += cnt[w][threadIdx.x];
    hist[tile_at(blockIdx.y, blockIdx.x) + threadIdx.x] = sum;
}

/* Counters to first rows: a prefix over the block's tiles, plus C. grid nb, kLfBytes threads. */
__global__ void __launch_bounds__(kLfBytes) lf_offsets(const DecBlk *blk, uint32_t *hist)
{
    using Scan = cub::BlockScan<uint32_t, kLfBytes>;
    __shared__ typename Scan::TempStorage scan;
    const DecBlk &b = blk[blockIdx.x];
    const uint32_t c = threadIdx.x, tiles = min((b.n + kDecLfTile - 1) / kDecLfTile, kDecLfTiles);
    uint32_t run = 0;
    for (uint32_t t = 0; t < tiles; t++) {
        uint32_t *h = hist + tile_at(blockIdx.x, t);
        const uint32_t v = h[c];
        h[c] = run;
        run += v;
    }
    uint32_t below;
    Scan(scan).ExclusiveSum(run, below);
    for (uint32_t t = 0; t < tiles; t++)
        hist[tile_at(blockIdx.x, t) + c] += below;
}

/* Each byte to its row: tt = i << 8 | byte, splitter rows marked. grid (kDecLfTiles, nb). */
__global__ void __launch_bounds__(kLfThreads)
    lf_scatter(const DecBlk *blk, uint32_t col0, const uint8_t *cols, const uint32_t *hist, uint32_t *tt)
{
    using Scan = cub::BlockScan<uint32_t, kLfThreads>;
    __shared__ typename Scan::TempStorage scan;
    __shared__ uint32_t at[kDecLfWarps][kLfBytes]; /* counts, then where each warp's next byte of a value goes */
    __shared__ uint32_t shift[kLfBytes];           /* a value's first row less its first place in the tile */
    __shared__ uint32_t sorted[kDecLfTile];        /* the tile by (byte, index): i << 8 | byte */
    const DecBlk &b = blk[blockIdx.y];
    const uint8_t *in;
    uint32_t start, len;
    if (!cta_tile(b, cols, &in, &start, &len))
        return;
    count_slices(in, len, at);
    const uint32_t c = threadIdx.x;
    uint32_t run = 0;
    for (uint32_t w = 0; w < kDecLfWarps; w++) {
        const uint32_t v = at[w][c];
        at[w][c] = run;
        run += v;
    }
    uint32_t first;
    Scan(scan).ExclusiveSum(run, first);
    for (uint32_t w = 0; w < kDecLfWarps; w++)
        at[w][c] += first;
    shift[c] = hist[tile_at(blockIdx.y, blockIdx.x) + c] - first;
    __syncthreads();
    walk_slice(in, len, at[threadIdx.x / 32],
               [&](uint32_t i, uint32_t v, uint32_t pos) { sorted[pos] = (start + i) << 8 | v; });
    __syncthreads();
    uint32_t *t = tt + (uint64_t)(b.col - col0) * BZ2_MAX_BLOCK;
    for (uint32_t p = threadIdx.x; p < len; p += kLfThreads) {
        const uint32_t e = sorted[p], row = shift[e & 0xff] + p;
        t[row] = e | ((row % kDecSplitStride == 0 || row == b.orig) ? kDecTtMark : 0);
    }
}

} // namespace

int bz2_dec_lf(const DecBlk *d_blk, uint32_t nb, uint32_t col0, DecScratch &s, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    if (nb > s.sort_cols)
        return gc_fail(err, GC_E_INTERNAL, "gpu bzip2: %u blocks in a sort wave of %u", nb, s.sort_cols);
    dim3 tiles(kDecLfTiles, nb);
    lf_count<<<tiles, kLfThreads, 0, st>>>(d_blk, s.cols, s.lf_hist);
    GC_CUDA_LAUNCHED("lf_count");
    lf_offsets<<<nb, kLfBytes, 0, st>>>(d_blk, s.lf_hist);
    GC_CUDA_LAUNCHED("lf_offsets");
    lf_scatter<<<tiles, kLfThreads, 0, st>>>(d_blk, col0, s.cols, s.lf_hist, s.tt);
    GC_CUDA_LAUNCHED("lf_scatter");
    return GC_OK;
}

} // namespace gcgpu
