/*
 * bz2_enc_mtf.cu - symbol map, move-to-front and RLE2 of every block of a
 * piece (docs/BZIP2.md section 5).
 *
 * MTF is sequential in its list, but a chunk's list at its start is known
 * from the chunks before it without their indices: after any chunk the list
 * is the chunk's distinct symbols by last use, then the list it started
 * with minus those. And RLE2 only needs, across chunks, the zeros carried
 * in. So, with one warp per chunk of kBz2MtfChunk bytes:
 *   1. per block, the used bytes (symbol map);
 *   2. per chunk: its symbols by last use (the front any MTF leaves);
 *   3. per block, one warp chains those into each chunk's start list;
 *   4. per chunk: the MTF indices from its start list (idx);
 *   5. per chunk: its RLE2 symbols counted with no zeros carried in, its
 *      leading and trailing zeros;
 *   6. per block, one thread: each chunk's carried zeros and symbol offset;
 *   7. per chunk: its symbols written (the block's last chunk adds the last
 *      zero run and EOB).
 * The warp holds the 256-entry list 8 entries a lane; one MTF step is a
 * ballot for the position and a one-byte shift of the lanes before it.
 */
#include "bz2_gpu.cuh"

namespace gcgpu {

namespace {

/* 1. One CTA per block: its used bytes, as 8 words of bits. */
__global__ void symbol_map(const uint8_t *bwt, Bz2Block *blk)
{
    __shared__ uint32_t words[8];
    Bz2Block &b = blk[blockIdx.x];
    if (threadIdx.x < 8)
        words[threadIdx.x] = 0;
    __syncthreads();
    uint32_t bm[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
    const uint8_t *s = bwt + b.rle_off;
    for (uint32_t i = threadIdx.x; i < b.n; i += blockDim.x) {
        uint32_t v = s[i];
#pragma unroll
        for (int w = 0; w < 8; w++)
            bm[w] |= ((v >> 5) == (uint32_t)w ? 1u : 0u) << (v & 31);
    }
#pragma unroll
    for (int w = 0; w < 8; w++)
        if (bm[w])
            atomicOr(&words[w], bm[w]);
    __syncthreads();
    if (threadIdx.x < 8)
        b.in_use[threadIdx.x] = words[threadIdx.x];
}

/* One thread: chunk bases per block (chunk_base[nb] = total). */
__global__ void chunk_bases(const Bz2Block *blk, uint32_t nb, uint32_t *chunk_base)
{
    uint32_t c = 0;
    for (uint32_t b = 0; b < nb; b++) {
        chunk_base[b] = c;
        c += (blk[b].n + kBz2MtfChunk - 1) / kBz2MtfChunk;
    }
    chunk_base[nb] = c;
}

struct Chunk {
    uint32_t block, lo, hi; /* bwt[lo, hi), absolute */
    bool last;              /* the block's last chunk */
};

__device__ __forceinline__ Chunk chunk_of(const Bz2Block *blk, uint32_t nb, const uint32_t *chunk_base, uint32_t c)
{
    uint32_t lo = 0, hi = nb - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (chunk_base[mid] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    const Bz2Block &b = blk[lo];
    uint32_t a = b.rle_off + (c - chunk_base[lo]) * kBz2MtfChunk;
    return Chunk{ lo, a, min32(a + kBz2MtfChunk, b.rle_off + b.n), c + 1 == chunk_base[lo + 1] };
}

/* The block's seq[] (byte -> index among used bytes) into the warp's shared table. */
__device__ __forceinline__ void warp_seq(const Bz2Block &b, uint8_t *seq)
{
    const unsigned lane = threadIdx.x & 31;
    int before = 0;
    for (int w = 0; w < (int)(lane / 4); w++)
        before += __popc(b.in_use[w]);
    uint32_t word = b.in_use[lane / 4];
    before += __popc(word & ((1u << (8 * (lane % 4))) - 1));
    for (int k = 0; k < 8; k++) {
        int v = 8 * (int)lane + k;
        if (word >> (v & 31) & 1)
            seq[v] = (uint8_t)before++;
    }
    __syncwarp();
}

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHigh = 0x8080808080808080ull;

/* One MTF step of the warp's list (lane l holds entries 8l..8l+7 in w,
 * entry 8l lowest): v moves to the front; returns its old index. */
__device__ __forceinline__ uint32_t warp_mtf(uint64_t &w, uint32_t v)
{
    const unsigned lane = threadIdx.x & 31;
    uint64_t x = w ^ (v * kOnes);
    uint64_t hit = (x - kOnes) & ~x & kHigh; /* exact below the first match; one match in the list */
    unsigned ball = __ballot_sync(kFull, hit != 0);
    unsigned owner = __ffs(ball) - 1;
    uint32_t pos = hit ? (uint32_t)(__ffsll((long long)hit) - 1) >> 3 : 0;
    pos = __shfl_sync(kFull, pos, owner);
    uint32_t j = 8 * owner + pos;
    if (j == 0)
        return 0;
    uint64_t top = __shfl_up_sync(kFull, w >> 56, 1);
    uint64_t carry = lane == 0 ? (uint64_t)v : top;
    uint64_t shifted = (w << 8) | carry;
    if (lane < owner)
        w = shifted;
    else if (lane == owner) {
        uint64_t keep = ~0ull << (8 * pos) << 8;
        w = (w & keep) | (shifted & ~keep);
    }
    return j;
}

/* 2. One warp per chunk: its symbols by last use (latest first), which is
 * the front of the list any MTF over the chunk leaves. */
__global__ void __launch_bounds__(32 * kBz2MtfWarps)
    chunk_fronts(const uint8_t *bwt, const Bz2Block *blk, uint32_t nb, const uint32_t *chunk_base, uint8_t *lists,
                 uint16_t *front)
{
    __shared__ uint8_t seq_all[kBz2MtfWarps][256];
    __shared__ uint32_t last_all[kBz2MtfWarps][256];
    const unsigned lane = threadIdx.x & 31, wid = threadIdx.x / 32;
    const uint32_t c = blockIdx.x * kBz2MtfWarps + wid;
    if (c >= chunk_base[nb])
        return;
    Chunk ch = chunk_of(blk, nb, chunk_base, c);
    uint8_t *seq = seq_all[wid];
    uint32_t *last = last_all[wid]; /* 1 + the last position of each symbol, 0: unused */
    warp_seq(blk[ch.block], seq);
    for (int k = 0; k < 8; k++)
        last[8 * lane + k] = 0;
    __syncwarp();
    for (uint32_t i = ch.lo + lane; i < ch.hi; i += 32)
        atomicMax(&last[seq[bwt[i]]], i - ch.lo + 1);
    __syncwarp();
    uint8_t *mine = lists + (uint64_t)c * 256;
    int d = 0;
    for (int k = 0; k < 8; k++) {
        int v = 8 * (int)lane + k;
        uint32_t lv = last[v];
        if (!lv)
            continue;
        d++;
        int rank = 0; /* symbols used later come first */
        for (int u = 0; u < 256; u++)
            rank += last[u] > lv;
        mine[rank] = (uint8_t)v;
    }
    d = __reduce_add_sync(kFull, d);
    if (lane == 0)
        front[c] = (uint16_t)d;
}

/* 4. One warp per chunk: the MTF indices from the chunk's start list. */
__global__ void __launch_bounds__(32 * kBz2MtfWarps)
    mtf_chunks(const uint8_t *bwt, const Bz2Block *blk, uint32_t nb, const uint32_t *chunk_base,
               const uint8_t *lists, uint8_t *idx)
{
    __shared__ uint8_t seq_all[kBz2MtfWarps][256];
    const unsigned lane = threadIdx.x & 31, wid = threadIdx.x / 32;
    const uint32_t c = blockIdx.x * kBz2MtfWarps + wid;
    if (c >= chunk_base[nb])
        return;
    Chunk ch = chunk_of(blk, nb, chunk_base, c);
    uint8_t *seq = seq_all[wid];
    warp_seq(blk[ch.block], seq);
    uint64_t w = *reinterpret_cast<const uint64_t *>(lists + (uint64_t)c * 256 + 8 * lane);
    for (uint32_t base = ch.lo; base < ch.hi; base += 32) {
        uint32_t i = base + lane;
        uint32_t mine_v = i < ch.hi ? seq[bwt[i]] : 0;
        uint32_t n = min32(32, ch.hi - base);
        uint32_t out = 0;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t j = warp_mtf(w, __shfl_sync(kFull, mine_v, k));
            if (lane == k)
                out = j;
        }
        if (i < ch.hi)
            idx[i] = (uint8_t)out;
    }
}

/* 3. One warp per block: each chunk's start list, in place of its front:
 * the front, then the previous start list without the front's symbols. */
__global__ void __launch_bounds__(32 * kBz2MtfWarps)
    chain_lists(uint32_t nb, const uint32_t *chunk_base, uint8_t *lists, const uint16_t *front)
{
    __shared__ uint8_t buf_all[kBz2MtfWarps][2][256];
    __shared__ uint32_t seen_all[kBz2MtfWarps][8];
    const unsigned lane = threadIdx.x & 31, wid = threadIdx.x / 32;
    const uint32_t b = blockIdx.x * kBz2MtfWarps + wid;
    if (b >= nb)
        return;
    uint8_t *cur = buf_all[wid][0], *nxt = buf_all[wid][1];
    uint32_t *seen = seen_all[wid];
    for (int k = 0; k < 8; k++)
        cur[8 * lane + k] = (uint8_t)(8 * lane + k);
    for (uint32_t c = chunk_base[b]; c < chunk_base[b + 1]; c++) {
        uint8_t *l = lists + (uint64_t)c * 256;
        const int d = front[c];
        if (lane < 8)
            seen[lane] = 0;
        __syncwarp();
        for (int i = lane; i < d; i += 32) {
            nxt[i] = l[i];
            atomicOr(&seen[l[i] >> 5], 1u << (l[i] & 31));
        }
        __syncwarp();
        uint8_t mine[8];
        int kept = 0;
        for (int k = 0; k < 8; k++) {
            mine[k] = cur[8 * lane + k];
            kept += !(seen[mine[k] >> 5] >> (mine[k] & 31) & 1);
        }
        int incl = kept; /* warp inclusive scan of kept */
        for (int o = 1; o < 32; o *= 2) {
            int t = __shfl_up_sync(kFull, incl, o);
            if ((int)lane >= o)
                incl += t;
        }
        int at = d + incl - kept;
        for (int k = 0; k < 8; k++)
            if (!(seen[mine[k] >> 5] >> (mine[k] & 31) & 1))
                nxt[at++] = mine[k];
        __syncwarp();
        for (int k = 0; k < 8; k++)
            l[8 * lane + k] = mine[k]; /* after the front was read (the syncwarp above) */
        __syncwarp();
        uint8_t *t = cur;
        cur = nxt;
        nxt = t;
    }
}

/* RUNA/RUNB digits of a zero run of r (bijective base 2). */
__device__ __forceinline__ uint32_t run_digits(uint32_t r)
{
    return r ? 31 - __clz(r + 1) : 0;
}

/* What pass 5 learns of a chunk. */
struct ChunkRle {
    uint32_t lead;    /* zeros before its first non-zero index (all, if none) */
    uint32_t trail;   /* zeros after its last non-zero index */
    uint32_t count;   /* symbols with no zeros carried in (first run's digits from lead alone) */
    uint32_t nonzero; /* it has a non-zero index */
    uint32_t carry;   /* pass 6: zeros carried in */
    uint32_t sym_off; /* pass 6: its first symbol, block-relative */
};

/* 5 (kEmit false) and 7 (true): RLE2 of one chunk per warp, 32 indices a step. */
template <bool kEmit>
__global__ void __launch_bounds__(32 * kBz2MtfWarps)
    rle2_chunks(const uint8_t *idx, const Bz2Block *blk, uint32_t nb, const uint32_t *chunk_base, ChunkRle *cr,
                uint16_t *sym_all)
{
    const unsigned lane = threadIdx.x & 31;
    const uint32_t c = blockIdx.x * kBz2MtfWarps + threadIdx.x / 32;
    if (c >= chunk_base[nb])
        return;
    Chunk ch = chunk_of(blk, nb, chunk_base, c);
    const Bz2Block &b = blk[ch.block];
    uint16_t *sym = sym_all + b.rle_off + ch.block;
    uint32_t carry = kEmit ? cr[c].carry : 0; /* zeros since the last non-zero index */
    uint32_t o = kEmit ? cr[c].sym_off : 0;
    uint32_t lead = 0;
    bool any = false;
    for (uint32_t base = ch.lo; base < ch.hi; base += 32) {
        uint32_t i = base + lane;
        uint32_t n = min32(32, ch.hi - base);
        uint32_t j = i < ch.hi ? idx[i] : 0;
        unsigned nz = __ballot_sync(kFull, j != 0);
        unsigned below = nz & ((1u << lane) - 1);
        uint32_t zeros = below ? lane - (31 - __clz(below)) - 1 : lane + carry;
        uint32_t e = j ? run_digits(zeros) + 1 : 0;
        uint32_t incl = e; /* warp inclusive scan of e */
        for (int d = 1; d < 32; d *= 2) {
            uint32_t t = __shfl_up_sync(kFull, incl, d);
            if ((int)lane >= d)
                incl += t;
        }
        uint32_t total = __shfl_sync(kFull, incl, 31);
        if (kEmit && j) {
            uint32_t at = o + incl - e;
            for (uint32_t r = zeros; r;) {
                uint32_t dgt = (r & 1) ? 0u : 1u;
                sym[at++] = (uint16_t)dgt;
                r = (r - 1 - dgt) >> 1;
            }
            sym[at] = (uint16_t)(j + 1);
        }
        if (!any && nz)
            lead += __ffs(nz) - 1;
        else if (!any)
            lead += n;
        any = any || nz;
        o += total;
        carry = nz ? n - 1 - (31 - __clz(nz)) : carry + n;
    }
    if (!kEmit) {
        if (lane == 0)
            cr[c] = ChunkRle{ lead, any ? carry : 0, o, any ? 1u : 0u, 0, 0 };
        return;
    }
    if (ch.last && lane == 0) { /* the block's last zero run, then EOB */
        for (uint32_t r = carry; r;) {
            uint32_t dgt = (r & 1) ? 0u : 1u;
            sym[o++] = (uint16_t)dgt;
            r = (r - 1 - dgt) >> 1;
        }
        int n_in_use = 0;
        for (int w = 0; w < 8; w++)
            n_in_use += __popc(b.in_use[w]);
        sym[o] = (uint16_t)(n_in_use + 1);
    }
}

/* 6. One thread per block: zeros carried into each chunk, symbol offsets, the block's symbol count. */
__global__ void rle2_chain(Bz2Block *blk, uint32_t nb, const uint32_t *chunk_base, ChunkRle *cr)
{
    uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb)
        return;
    uint32_t carry = 0, off = 0;
    for (uint32_t c = chunk_base[b]; c < chunk_base[b + 1]; c++) {
        ChunkRle &r = cr[c];
        r.carry = carry;
        r.sym_off = off;
        if (r.nonzero) {
            off += r.count - run_digits(r.lead) + run_digits(carry + r.lead);
            carry = r.trail;
        } else {
            carry += r.lead;
        }
    }
    int n_in_use = 0;
    for (int w = 0; w < 8; w++)
        n_in_use += __popc(blk[b].in_use[w]);
    blk[b].n_sym = off + run_digits(carry) + 1;
    blk[b].alpha = (uint32_t)n_in_use + 2;
}

unsigned grid_for(uint64_t n, unsigned per)
{
    return (unsigned)((n + per - 1) / per);
}

static_assert(sizeof(ChunkRle) <= kBz2ChunkRleBytes, "Bz2Scratch::mtf_rle entries");

} // namespace

int bz2_mtf(uint32_t nb, Bz2Scratch &s, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    symbol_map<<<nb, kBz2Threads, 0, st>>>(s.bwt, s.blk);
    GC_CUDA_LAUNCHED("symbol_map");
    bz2_prof(st, "symbol_map", nb);
    chunk_bases<<<1, 1, 0, st>>>(s.blk, nb, s.chunk_base);
    GC_CUDA_LAUNCHED("chunk_bases");
    const uint64_t max_chunks = s.rle_cap / kBz2MtfChunk + s.max_blocks;
    const unsigned g = grid_for(max_chunks, kBz2MtfWarps), t = 32 * kBz2MtfWarps;
    ChunkRle *cr = reinterpret_cast<ChunkRle *>(s.mtf_rle);
    chunk_fronts<<<g, t, 0, st>>>(s.bwt, s.blk, nb, s.chunk_base, s.mtf_lists, s.mtf_front);
    GC_CUDA_LAUNCHED("chunk_fronts");
    bz2_prof(st, "chunk_fronts", nb);
    chain_lists<<<grid_for(nb, kBz2MtfWarps), t, 0, st>>>(nb, s.chunk_base, s.mtf_lists, s.mtf_front);
    GC_CUDA_LAUNCHED("chain_lists");
    bz2_prof(st, "chain_lists", nb);
    mtf_chunks<<<g, t, 0, st>>>(s.bwt, s.blk, nb, s.chunk_base, s.mtf_lists, s.rle);
    GC_CUDA_LAUNCHED("mtf_chunks");
    bz2_prof(st, "mtf_chunks", nb);
    rle2_chunks<false><<<g, t, 0, st>>>(s.rle, s.blk, nb, s.chunk_base, cr, s.sym);
    GC_CUDA_LAUNCHED("rle2_chunks<count>");
    bz2_prof(st, "rle2_chunks<count>", nb);
    rle2_chain<<<grid_for(nb, 64), 64, 0, st>>>(s.blk, nb, s.chunk_base, cr);
    GC_CUDA_LAUNCHED("rle2_chain");
    bz2_prof(st, "rle2_chain", nb);
    rle2_chunks<true><<<g, t, 0, st>>>(s.rle, s.blk, nb, s.chunk_base, cr, s.sym);
    GC_CUDA_LAUNCHED("rle2_chunks<emit>");
    bz2_prof(st, "rle2_chunks<emit>", nb);
    return GC_OK;
}

} // namespace gcgpu
