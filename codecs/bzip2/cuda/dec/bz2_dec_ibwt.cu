/*
 * bz2_dec_ibwt.cu - the decoder's inverse BWT, for the accepted blocks of up
 * to kDecSortColumns consecutive columns at once.
 *
 * T comes from a stable counting sort of each column's bytes
 * (bz2_dec_lf.cu): row r of the sorted column holds F[r] (the byte) and
 * T[r] (the row that follows it), packed as T << 8 | F exactly like
 * bzip2's tt[], splitter rows marked. The block is F[orig], F[T(orig)],
 * F[T(T(orig))], ...: one long pointer chase. It is cut at splitter rows
 * (every kDecSplitStride-th row, and origPtr) into segments that threads
 * follow at once: a first walk measures each segment and finds the next
 * splitter, one CTA per block then ranks the segments from origPtr's by
 * pointer jumping (their output offsets, and the length d of origPtr's
 * cycle), and a second walk writes the bytes back into the column. T is one
 * cycle of n rows unless the block is periodic (all zeros, say): then
 * origPtr's cycle has d rows and, as bzip2's n-step chase does, the output
 * repeats its first d bytes; a last pass copies them and applies the
 * de-randomisation, which depends on the output position.
 */
#include "bz2_dec.cuh"

namespace gcgpu {
namespace {

constexpr uint32_t kNone = 0xffffffffu;

__device__ __forceinline__ uint32_t next_row(uint32_t e)
{
    return (e & ~kDecTtMark) >> 8;
}

/* Splitter q of a block: its row, and the index of a marked row. */
__device__ __forceinline__ uint32_t split_row(const DecBlk &b, uint32_t q)
{
    return q + 1 < b.nsp ? q * kDecSplitStride : b.orig;
}
__device__ __forceinline__ uint32_t orig_index(const DecBlk &b)
{
    return b.orig % kDecSplitStride == 0 ? b.orig / kDecSplitStride : b.nsp - 1;
}
__device__ __forceinline__ uint32_t split_index(const DecBlk &b, uint32_t row)
{
    return row == b.orig ? orig_index(b) : row / kDecSplitStride;
}
/* origPtr on a regular splitter row: its own splitter is not used */
__device__ __forceinline__ bool split_unused(const DecBlk &b, uint32_t q)
{
    return q + 1 == b.nsp && b.orig % kDecSplitStride == 0;
}

/* Each segment's length and the splitter that ends it; grid.y = block. */
__global__ void walk_measure(const DecBlk *blk, uint32_t col0, const uint32_t *tt, uint32_t *sp_next,
                             uint32_t *sp_len)
{
    const DecBlk &b = blk[blockIdx.y];
    uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= b.nsp || split_unused(b, q))
        return;
    const uint32_t *t = tt + (uint64_t)(b.col - col0) * BZ2_MAX_BLOCK;
    uint32_t e = t[split_row(b, q)], len = 0;
    for (;;) {
        len++;
        uint32_t p = next_row(e);
        e = t[p];
        if ((e & kDecTtMark) || len > b.n) {
            sp_next[b.sp_off + q] = split_index(b, p);
            break;
        }
    }
    sp_len[b.sp_off + q] = len;
}

/* Splitters of one block at most (the regular ones and origPtr's), and the
 * ranking's shape: one CTA per block, each thread holding kRankItems of them. */
constexpr uint32_t kMaxSplitters = BZ2_MAX_BLOCK / kDecSplitStride + 2;
constexpr int kRankThreads = 512;
constexpr int kRankItems = (int)((kMaxSplitters + kRankThreads - 1) / kRankThreads);
/* Where a segment's chain ends: at the segment whose successor is origPtr's
 * (the cycle closes), or at an index that names no splitter. */
constexpr uint16_t kEndOk = 0xffff, kEndBad = 0xfffe;
static_assert(kMaxSplitters < kEndBad, "splitter indices fit 16 bits below the ends");
/* The ranking's chain in shared memory: more than a CTA gets without asking when the stride is short. */
struct RankChain {
    uint32_t sum[kMaxSplitters];
    uint16_t nxt[kMaxSplitters];
};

/*
 * One CTA per block: each segment's distance from origPtr's along the cycle,
 * by pointer jumping in shared memory (Wyllie's list ranking). A segment
 * points to the one after it, the segment before origPtr's to the end; each
 * round adds the successor's sum and skips to the successor's successor, so
 * after ceil(log2(nsp)) rounds every segment holds the length from it to the
 * end, and its distance is the cycle's length less that. A segment off
 * origPtr's cycle (a periodic block) never reaches the end and gets no
 * distance. Sums saturate at n + 1: any sum over n is a bad cycle anyway.
 * It replaced one thread per block following the chain, thousands of
 * dependent loads (docs/DECISIONS.md, "The inverse BWT ranks its segments
 * in parallel").
 */
__global__ void __launch_bounds__(kRankThreads)
    walk_rank(DecBlk *blk, const uint32_t *sp_next, const uint32_t *sp_len, uint32_t *sp_dist)
{
    extern __shared__ __align__(16) unsigned char rank_smem[];
    RankChain &chain = *reinterpret_cast<RankChain *>(rank_smem);
    uint16_t *nxt = chain.nxt;
    uint32_t *sum = chain.sum;
    DecBlk &b = blk[blockIdx.x];
    const uint32_t nsp = min(b.nsp, kMaxSplitters), start = orig_index(b), cap = b.n + 1;
    const uint32_t *next = sp_next + b.sp_off, *len = sp_len + b.sp_off;
    if (start >= nsp) { /* no splitter for origPtr: nothing to rank */
        if (threadIdx.x == 0)
            b.status = kDecCycle;
        return;
    }
    for (uint32_t q = threadIdx.x; q < nsp; q += blockDim.x) {
        bool unused = split_unused(b, q);
        uint32_t to = unused ? kEndBad : next[q];
        nxt[q] = to == start ? kEndOk : to < nsp ? (uint16_t)to : kEndBad;
        sum[q] = unused ? 0 : min(len[q], cap);
    }
    __syncthreads();
    for (uint32_t reach = 1; reach < nsp; reach *= 2) {
        uint16_t nn[kRankItems];
        uint32_t ns[kRankItems];
#pragma unroll
        for (int k = 0; k < kRankItems; k++) {
            uint32_t q = threadIdx.x + (uint32_t)k * kRankThreads;
            if (q >= nsp)
                continue;
            nn[k] = nxt[q];
            ns[k] = sum[q];
            if (nn[k] < kEndBad) {
                ns[k] = min(ns[k] + sum[nn[k]], cap);
                nn[k] = nxt[nn[k]];
            }
        }
        __syncthreads(); /* every read of this round before any write */
#pragma unroll
        for (int k = 0; k < kRankItems; k++) {
            uint32_t q = threadIdx.x + (uint32_t)k * kRankThreads;
            if (q < nsp) {
                nxt[q] = nn[k];
                sum[q] = ns[k];
            }
        }
        __syncthreads();
    }
    const uint32_t d = sum[start];
    const bool ok = nxt[start] == kEndOk && d > 0 && d <= b.n;
    for (uint32_t q = threadIdx.x; ok && q < nsp; q += blockDim.x)
        if (nxt[q] == kEndOk && !split_unused(b, q))
            sp_dist[b.sp_off + q] = d - sum[q];
    if (threadIdx.x == 0) {
        if (ok)
            b.period = d;
        else
            b.status = kDecCycle;
    }
}

__device__ __forceinline__ uint32_t rand_bit(const uint32_t *map, uint32_t k)
{
    return (map[k >> 5] >> (k & 31)) & 1;
}

/* Each segment's bytes to its place in the column; grid.y = block. */
__global__ void walk_write(const DecBlk *blk, uint32_t col0, const uint32_t *tt, const uint32_t *sp_len,
                           const uint32_t *sp_dist, const uint32_t *rand_map, uint8_t *cols)
{
    const DecBlk &b = blk[blockIdx.y];
    uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= b.nsp || split_unused(b, q) || b.status != kDecOk)
        return;
    uint32_t d = sp_dist[b.sp_off + q];
    if (d == kNone)
        return;
    const uint32_t *t = tt + (uint64_t)(b.col - col0) * BZ2_MAX_BLOCK;
    uint8_t *out = cols + (uint64_t)b.col * BZ2_MAX_BLOCK;
    uint32_t len = sp_len[b.sp_off + q], p = split_row(b, q);
    bool rand = b.rand && b.period == b.n;
    /* the segment's bytes are contiguous: gather 8 and store a word (columns are 16-byte aligned) */
    uint64_t word = 0;
    uint32_t k = 0;
    for (; k < len && (d + k) % 8; k++) {
        uint32_t e = t[p];
        out[d + k] = (uint8_t)((e & 0xff) ^ (rand ? rand_bit(rand_map, d + k) : 0u));
        p = next_row(e);
    }
    for (; k < len; k++) {
        uint32_t e = t[p];
        uint64_t v = (e & 0xff) ^ (rand ? rand_bit(rand_map, d + k) : 0u);
        word |= v << (8 * ((d + k) % 8));
        if ((d + k) % 8 == 7) {
            *reinterpret_cast<uint64_t *>(out + d + k - 7) = word;
            word = 0;
        }
        p = next_row(e);
    }
    uint32_t first_word = (d + 7) & ~7u;                              /* word holds bytes from here on only */
    for (uint32_t j = max((d + k) & ~7u, first_word); j < d + k; j++) /* a partial last word */
        out[j] = (uint8_t)(word >> (8 * (j % 8)));
}

/* A periodic block: bytes [period, n) repeat [0, period), de-randomised; grid.y = block. */
__global__ void repeat_period(const DecBlk *blk, const uint32_t *rand_map, uint8_t *cols)
{
    const DecBlk &b = blk[blockIdx.y];
    if (b.status != kDecOk || b.period == b.n)
        return;
    uint8_t *out = cols + (uint64_t)b.col * BZ2_MAX_BLOCK;
    for (uint32_t k = b.period + blockIdx.x * blockDim.x + threadIdx.x; k < b.n; k += gridDim.x * blockDim.x)
        out[k] = (uint8_t)(out[k % b.period] ^ (b.rand ? rand_bit(rand_map, k) : 0u));
}

/* ... then its first period bytes de-randomised (after repeat_period read them). */
__global__ void rand_period_head(const DecBlk *blk, const uint32_t *rand_map, uint8_t *cols)
{
    const DecBlk &b = blk[blockIdx.y];
    if (b.status != kDecOk || b.period == b.n || !b.rand)
        return;
    uint8_t *out = cols + (uint64_t)b.col * BZ2_MAX_BLOCK;
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < b.period; k += gridDim.x * blockDim.x)
        out[k] ^= (uint8_t)rand_bit(rand_map, k);
}

} // namespace

int bz2_dec_ibwt(DecBlk *d_blk, uint32_t nb, uint32_t col0, uint32_t nsp_total, DecScratch &s, cudaStream_t st,
                 gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    if (nsp_total > s.sp_cap)
        return gc_fail(err, GC_E_INTERNAL, "gpu bzip2: %u splitters, room for %u", nsp_total, s.sp_cap);
    bz2_prof(st, nullptr, 0);
    int rc = bz2_dec_lf(d_blk, nb, col0, s, st, err);
    if (rc != GC_OK)
        return rc;
    bz2_prof(st, "dec_lf", nb);
    dim3 rows((BZ2_MAX_BLOCK + kDecThreads - 1) / kDecThreads / 8, nb);
    GC_CUDA(cudaMemsetAsync(s.sp_dist, 0xff, (size_t)nsp_total * sizeof(uint32_t), st));
    uint32_t max_sp = BZ2_MAX_BLOCK / kDecSplitStride + 2;
    dim3 sp((max_sp + kDecThreads - 1) / kDecThreads, nb);
    walk_measure<<<sp, kDecThreads, 0, st>>>(d_blk, col0, s.tt, s.sp_next, s.sp_len);
    GC_CUDA_LAUNCHED("walk_measure");
    bz2_prof(st, "dec_walk_measure", nb);
    GC_CUDA(cudaFuncSetAttribute(walk_rank, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(RankChain)));
    walk_rank<<<nb, kRankThreads, sizeof(RankChain), st>>>(d_blk, s.sp_next, s.sp_len, s.sp_dist);
    GC_CUDA_LAUNCHED("walk_rank");
    bz2_prof(st, "dec_walk_rank", nb);
    walk_write<<<sp, kDecThreads, 0, st>>>(d_blk, col0, s.tt, s.sp_len, s.sp_dist, s.rand_map, s.cols);
    GC_CUDA_LAUNCHED("walk_write");
    bz2_prof(st, "dec_walk_write", nb);
    repeat_period<<<rows, kDecThreads, 0, st>>>(d_blk, s.rand_map, s.cols);
    GC_CUDA_LAUNCHED("repeat_period");
    rand_period_head<<<rows, kDecThreads, 0, st>>>(d_blk, s.rand_map, s.cols);
    GC_CUDA_LAUNCHED("rand_period_head");
    return GC_OK;
}

} // namespace gcgpu
