/*
 * bz2_enc_mtf.cu - symbol map, move-to-front and RLE2 of every block of a
 * piece (docs/BZIP2.md section 5).
 *
 * MTF is sequential in its list, but a chunk's list at its start is known
 * from the chunks before it without their indices: after any chunk the list
 * is the chunk's distinct symbols by last use, then the list it started
 * with minus those. So:
 *   1. per block, the used bytes (symbol map);
 *   2. per chunk (kBz2MtfChunk bytes, one thread): MTF from the identity,
 *      keeping the final list's front (the chunk's symbols by last use);
 *   3. per block, one thread chains those into each chunk's start list;
 *   4. per chunk: the real MTF indices from its start list;
 *   5. per block, one thread: zero runs as RUNA/RUNB, symbols, frequencies.
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
    uint32_t bm[8] = {0, 0, 0, 0, 0, 0, 0, 0};
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

/* The block's seq[] (byte -> index among used bytes) in shared or local memory. */
__device__ __forceinline__ int make_seq(const Bz2Block &b, uint8_t seq[256])
{
    int k = 0;
    for (int v = 0; v < 256; v++)
        if (b.in_use[v >> 5] >> (v & 31) & 1)
            seq[v] = (uint8_t)k++;
    return k;
}

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHigh = 0x8080808080808080ull;

/* Move v to the front of list (a word at a time, as the CPU engine); its old index. */
__device__ __forceinline__ uint32_t move_to_front(uint64_t *list, uint8_t v)
{
    uint64_t carry = v;
    for (uint32_t k = 0;; k++) {
        uint64_t w = list[k];
        uint64_t x = w ^ (v * kOnes);
        uint64_t hit = (x - kOnes) & ~x & kHigh;
        if (!hit) {
            list[k] = (w << 8) | carry;
            carry = w >> 56;
            continue;
        }
        uint32_t bpos = (uint32_t)(__ffsll((long long)hit) - 1) >> 3;
        uint64_t keep = ~0ull << (8 * bpos) << 8;
        list[k] = (w & keep) | (((w << 8) | carry) & ~keep);
        return 8 * k + bpos;
    }
}

struct Chunk {
    uint32_t block, lo, hi; /* bwt[lo, hi), absolute */
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
    return Chunk{lo, a, min(a + kBz2MtfChunk, b.rle_off + b.n)};
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

/* 2 and 4: MTF over one chunk from `start` (2: the identity; 4: the chained
 * list). Pass 2 stores the final list's front in lists[c] and its length in
 * front[c]; pass 4 stores the indices in idx. */
template <bool kFinal>
__global__ void mtf_chunks(const uint8_t *bwt, const Bz2Block *blk, uint32_t nb, const uint32_t *chunk_base,
                           uint8_t *lists, uint16_t *front, uint8_t *idx)
{
    uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= chunk_base[nb])
        return;
    Chunk ch = chunk_of(blk, nb, chunk_base, c);
    uint8_t seq[256];
    make_seq(blk[ch.block], seq);
    uint64_t list[33];
    uint8_t *l8 = reinterpret_cast<uint8_t *>(list);
    uint8_t *mine = lists + (uint64_t)c * 256;
    for (int i = 0; i < 256; i++)
        l8[i] = kFinal ? mine[i] : (uint8_t)i;
    list[32] = 0;
    if (kFinal) {
        for (uint32_t i = ch.lo; i < ch.hi; i++) {
            uint8_t v = seq[bwt[i]];
            idx[i] = l8[0] == v ? 0 : (uint8_t)move_to_front(list, v);
        }
    } else {
        uint32_t seen[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int d = 0;
        for (uint32_t i = ch.lo; i < ch.hi; i++) {
            uint8_t v = seq[bwt[i]];
            uint32_t bit = 1u << (v & 31);
            uint32_t w = v >> 5;
#pragma unroll
            for (int k = 0; k < 8; k++)
                if ((uint32_t)k == w && !(seen[k] & bit)) {
                    seen[k] |= bit;
                    d++;
                }
            if (l8[0] != v)
                move_to_front(list, v);
        }
        for (int i = 0; i < d; i++)
            mine[i] = l8[i];
        front[c] = (uint16_t)d;
    }
}

/* 3. One thread per block: each chunk's start list, in place of its front. */
__global__ void chain_lists(const Bz2Block *blk, uint32_t nb, const uint32_t *chunk_base, uint8_t *lists,
                            const uint16_t *front)
{
    uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb)
        return;
    uint8_t cur[256], nxt[256];
    for (int i = 0; i < 256; i++)
        cur[i] = (uint8_t)i;
    for (uint32_t c = chunk_base[b]; c < chunk_base[b + 1]; c++) {
        uint8_t *l = lists + (uint64_t)c * 256;
        int d = front[c];
        uint32_t seen[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < d; i++) {
            nxt[i] = l[i];
            seen[l[i] >> 5] |= 1u << (l[i] & 31);
        }
        int k = d;
        for (int i = 0; i < 256; i++)
            if (!(seen[cur[i] >> 5] >> (cur[i] & 31) & 1))
                nxt[k++] = cur[i];
        for (int i = 0; i < 256; i++) {
            l[i] = cur[i];
            cur[i] = nxt[i];
        }
    }
}

/* 5. One thread per block: RLE2 symbols, their count and frequencies. */
__global__ void rle2(const uint8_t *idx, Bz2Block *blk, uint32_t nb, uint16_t *sym_all, uint32_t *freq_all)
{
    uint32_t bi = blockIdx.x * blockDim.x + threadIdx.x;
    if (bi >= nb)
        return;
    Bz2Block &b = blk[bi];
    int n_in_use = 0;
    for (int w = 0; w < 8; w++)
        n_in_use += __popc(b.in_use[w]);
    uint16_t *sym = sym_all + b.rle_off + bi;
    uint32_t *freq = freq_all + (uint64_t)bi * kBz2MaxAlpha;
    for (int i = 0; i < kBz2MaxAlpha; i++)
        freq[i] = 0;
    const uint8_t *j = idx + b.rle_off;
    uint32_t o = 0, run = 0;
    for (uint32_t i = 0; i <= b.n; i++) {
        uint32_t v = i < b.n ? j[i] : 256u;
        if (v == 0) {
            run++;
            continue;
        }
        while (run) {
            uint32_t d = (run & 1) ? 0u : 1u; /* RUNA, RUNB */
            sym[o++] = (uint16_t)d;
            freq[d]++;
            run = (run - 1 - d) >> 1;
        }
        uint32_t s = v == 256u ? (uint32_t)n_in_use + 1 : v + 1;
        sym[o++] = (uint16_t)s;
        freq[s]++;
    }
    b.n_sym = o;
    b.alpha = (uint32_t)n_in_use + 2;
}

unsigned grid_for(uint64_t n) { return (unsigned)((n + kBz2Threads - 1) / kBz2Threads); }

} // namespace

int bz2_mtf(uint32_t nb, Bz2Scratch &s, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    symbol_map<<<nb, kBz2Threads, 0, st>>>(s.bwt, s.blk);
    GC_CUDA_LAUNCHED("symbol_map");
    chunk_bases<<<1, 1, 0, st>>>(s.blk, nb, s.chunk_base);
    GC_CUDA_LAUNCHED("chunk_bases");
    /* chunks: at most rle_cap / kBz2MtfChunk + blocks */
    uint64_t max_chunks = s.rle_cap / kBz2MtfChunk + s.max_blocks;
    mtf_chunks<false><<<(unsigned)((max_chunks + 63) / 64), 64, 0, st>>>(s.bwt, s.blk, nb, s.chunk_base, s.mtf_lists, s.mtf_front,
                                                          nullptr);
    GC_CUDA_LAUNCHED("mtf_chunks<front>");
    chain_lists<<<grid_for(nb), kBz2Threads, 0, st>>>(s.blk, nb, s.chunk_base, s.mtf_lists, s.mtf_front);
    GC_CUDA_LAUNCHED("chain_lists");
    mtf_chunks<true><<<(unsigned)((max_chunks + 63) / 64), 64, 0, st>>>(s.bwt, s.blk, nb, s.chunk_base, s.mtf_lists, s.mtf_front,
                                                         s.rle);
    GC_CUDA_LAUNCHED("mtf_chunks<final>");
    rle2<<<(nb + 63) / 64, 64, 0, st>>>(s.rle, s.blk, nb, s.sym, s.freq);
    GC_CUDA_LAUNCHED("rle2");
    return GC_OK;
}

} // namespace gcgpu
