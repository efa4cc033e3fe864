/*
 * bz2_enc_tables.cu - symbol frequencies and Huffman tables of every block of a piece, exactly as
 * docs/BZIP2.md section 6 (and codecs/bzip2/cpu/bz2_huffman.c) define them, and
 * every block's exact bit length. One CTA per block: the assignment passes
 * are parallel over groups of 50 symbols (table frequencies by shared
 * atomics); the code lengths of each table are bzip2's heap construction
 * (bz2_rule_code_lengths, the CPU engine's very code), one thread per table:
 * its exact heap moves decide ties, so it is not split among threads.
 */
#include <cub/cub.cuh>

#include "bz2_gpu.cuh"

namespace gcgpu {

namespace {

constexpr int kIters = 4; /* refinement passes (docs/BZIP2.md 6.5) */

struct TablesSmem {
    uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    uint32_t tfreq[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    uint32_t freq[BZ2_MAX_ALPHA];
    unsigned long long data_bits;
    uint32_t len_bits[BZ2_MAX_GROUPS];
    uint32_t sel_bits;
};

/* Group g's cost with table lengths l. */
__device__ __forceinline__ uint32_t group_cost(const uint16_t *sym, uint32_t g, uint32_t n_sym, const uint8_t *l)
{
    uint32_t c = 0, hi = min(n_sym, (g + 1) * BZ2_GROUP_SIZE);
    for (uint32_t i = g * BZ2_GROUP_SIZE; i < hi; i++)
        c += l[sym[i]];
    return c;
}

/* The best table for group g (lowest index on ties) and its cost. */
__device__ __forceinline__ int best_table(const uint16_t *sym, uint32_t g, uint32_t n_sym, int ng,
                                          const uint8_t (*len)[BZ2_MAX_ALPHA], uint32_t *cost)
{
    uint32_t c[BZ2_MAX_GROUPS] = { 0, 0, 0, 0, 0, 0 };
    uint32_t hi = min(n_sym, (g + 1) * BZ2_GROUP_SIZE);
    for (uint32_t i = g * BZ2_GROUP_SIZE; i < hi; i++) {
        uint16_t v = sym[i];
#pragma unroll
        for (int t = 0; t < BZ2_MAX_GROUPS; t++)
            if (t < ng)
                c[t] += len[t][v];
    }
    int best = 0;
    for (int t = 1; t < ng; t++)
        if (c[t] < c[best])
            best = t;
    *cost = c[best];
    return best;
}

__global__ void __launch_bounds__(kBz2TableThreads)
    choose_tables(const uint16_t *sym_all, Bz2Block *blk, uint8_t *sel_all, uint8_t *sel_mtf_all,
                  uint32_t *gbit_off_all, uint8_t *lens_all, uint32_t *codes_all)
{
    __shared__ TablesSmem sm;
    __shared__ bz2_huff_room huff[BZ2_MAX_GROUPS];
    typedef cub::BlockScan<uint32_t, kBz2TableThreads> Scan;
    __shared__ typename Scan::TempStorage scan_tmp;
    const uint32_t bi = blockIdx.x;
    Bz2Block &b = blk[bi];
    const uint32_t n_sym = b.n_sym;
    const int alpha = (int)b.alpha, ng = bz2_rule_table_count(n_sym);
    const uint32_t n_sel = (n_sym + BZ2_GROUP_SIZE - 1) / BZ2_GROUP_SIZE;
    const uint16_t *sym = sym_all + b.rle_off + bi;
    const uint64_t gbase = bz2_group_base(b, bi);
    uint8_t *sel = sel_all + gbase;
    for (int i = threadIdx.x; i < BZ2_MAX_ALPHA; i += blockDim.x)
        sm.freq[i] = 0;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < n_sym; i += blockDim.x)
        atomicAdd(&sm.freq[sym[i]], 1u);
    __syncthreads();
    if (threadIdx.x == 0)
        bz2_rule_initial_tables(sm.freq, alpha, ng, n_sym, sm.len);
    __syncthreads();
    for (int it = 0; it < kIters; it++) {
        for (int i = threadIdx.x; i < BZ2_MAX_GROUPS * BZ2_MAX_ALPHA; i += blockDim.x)
            (&sm.tfreq[0][0])[i] = 0;
        __syncthreads();
        for (uint32_t g = threadIdx.x; g < n_sel; g += blockDim.x) {
            uint32_t cost;
            int t = best_table(sym, g, n_sym, ng, sm.len, &cost);
            if (it == kIters - 1) /* the selectors sent: the last pass's (docs/BZIP2.md 6.5) */
                sel[g] = (uint8_t)t;
            uint32_t hi = min(n_sym, (g + 1) * BZ2_GROUP_SIZE);
            for (uint32_t i = g * BZ2_GROUP_SIZE; i < hi; i++)
                atomicAdd(&sm.tfreq[t][sym[i]], 1u);
        }
        __syncthreads();
        const unsigned wid = threadIdx.x / 32;
        if (wid < (unsigned)ng && (threadIdx.x & 31) == 0)
            bz2_rule_code_lengths(&huff[wid], sm.tfreq[wid], alpha, BZ2_MAX_CODE_LEN_ENC, sm.len[wid]);
        __syncthreads();
    }
    /* the groups' bits with the final tables: contiguous groups per thread, so their offsets are
     * one block scan */
    const uint32_t per = (n_sel + blockDim.x - 1) / blockDim.x;
    const uint32_t g0 = min(n_sel, threadIdx.x * per), g1 = min(n_sel, g0 + per);
    uint32_t mine = 0;
    for (uint32_t g = g0; g < g1; g++)
        mine += group_cost(sym, g, n_sym, sm.len[sel[g]]);
    uint32_t before, total;
    Scan(scan_tmp).ExclusiveSum(mine, before, total);
    uint32_t *gbit_off = gbit_off_all + gbase;
    for (uint32_t g = g0; g < g1; g++) {
        gbit_off[g] = before;
        before += group_cost(sym, g, n_sym, sm.len[sel[g]]);
    }
    if (threadIdx.x == 0)
        sm.data_bits = total;
    __syncthreads();                  /* sel[] complete */
    if (threadIdx.x < (unsigned)ng) { /* this table's lengths, its bits and canonical codes */
        const uint8_t *l = sm.len[threadIdx.x];
        uint8_t *lo = lens_all + ((uint64_t)bi * BZ2_MAX_GROUPS + threadIdx.x) * BZ2_MAX_ALPHA;
        uint32_t *co = codes_all + ((uint64_t)bi * BZ2_MAX_GROUPS + threadIdx.x) * BZ2_MAX_ALPHA;
        uint32_t bits = 5;
        int curr = l[0];
        for (int s = 0; s < alpha; s++) {
            bits += 2 * (uint32_t)abs((int)l[s] - curr) + 1;
            curr = l[s];
            lo[s] = l[s];
        }
        sm.len_bits[threadIdx.x] = bits;
        uint32_t next = 0;
        for (int n = 1; n <= 20; n++) {
            for (int s = 0; s < alpha; s++)
                if (l[s] == n)
                    co[s] = next++;
            next <<= 1;
        }
    } else if (threadIdx.x == 32) { /* selectors, move-to-front coded; the list packed 4 bits an entry */
        uint32_t list = 0x543210u;
        uint32_t bits = 0;
        uint8_t *mtf = sel_mtf_all + gbase;
        for (uint32_t g = 0; g < n_sel; g++) {
            uint32_t v = sel[g], j = 0;
            while (((list >> (4 * j)) & 15u) != v)
                j++;
            uint32_t below = list & ((1u << (4 * j)) - 1); /* entries before v move up one */
            list = (list & ~((1u << (4 * j + 4)) - 1)) | (below << 4) | v;
            mtf[g] = (uint8_t)j;
            bits += j + 1;
        }
        sm.sel_bits = bits;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int ranges = 0;
        for (int r = 0; r < 16; r++)
            if ((b.in_use[r / 2] >> (16 * (r % 2))) & 0xffffu)
                ranges++;
        uint64_t head = 48 + 32 + 1 + 24 + 16 + 16 * (uint64_t)ranges + 3 + 15 + sm.sel_bits;
        for (int t = 0; t < ng; t++)
            head += sm.len_bits[t];
        b.groups = (uint32_t)ng;
        b.head_bits = head;
        b.bits = head + sm.data_bits;
    }
}

/* One thread: block offsets in the piece's bits, the totals, the combined CRC. */
__global__ void block_offsets(Bz2Block *blk, uint32_t nb, Bz2Result *res)
{
    uint64_t off = 0;
    uint32_t comb = 0;
    for (uint32_t b = 0; b < nb; b++) {
        blk[b].bit_off = off;
        off += blk[b].bits;
        comb = bz2_combine_crc(comb, blk[b].crc);
    }
    res->bits = off;
    res->combined = comb;
}

} // namespace

int bz2_tables(uint32_t nb, Bz2Scratch &s, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    choose_tables<<<nb, kBz2TableThreads, 0, st>>>(s.sym, s.blk, s.sel, s.sel_mtf, s.gbit_off, s.lens, s.codes);
    GC_CUDA_LAUNCHED("choose_tables");
    bz2_prof(st, "choose_tables", nb);
    block_offsets<<<1, 1, 0, st>>>(s.blk, nb, s.res);
    GC_CUDA_LAUNCHED("block_offsets");
    return GC_OK;
}

} // namespace gcgpu
