/*
 * bz2_enc_pack.cu - every block's bits into the output at its bit offset
 * (docs/BZIP2.md section 7): one CTA writes a block's head (magic to
 * code lengths), one thread each group of 50 symbols, at offsets that
 * bz2_enc_tables.cu summed (prefix sums, as in PAVLE,
 * ../shared/seeds/002). Neighbours share boundary words, so every word is
 * ORed in atomically into zeroed memory.
 */
#include <cub/cub.cuh>

#include "bz2_gpu.cuh"

namespace gcgpu {

namespace {

/* MSB-first bits from bit `pos` of a zeroed buffer of 32-bit words (stream
 * byte 4w + k is byte k of word w in memory). */
struct BitSink {
    uint32_t *out;
    uint64_t w;   /* word being filled */
    uint64_t acc; /* pending bits, right-aligned */
    int nacc;

    __device__ BitSink(uint32_t *o, uint64_t pos) : out(o), w(pos >> 5), acc(0), nacc((int)(pos & 31))
    {
    }

    __device__ __forceinline__ void put(int n, uint32_t v)
    {
        acc = (acc << n) | v;
        nacc += n;
        if (nacc >= 32) {
            uint32_t word = (uint32_t)(acc >> (nacc - 32));
            atomicOr(&out[w++], __byte_perm(word, 0, 0x0123));
            nacc -= 32;
            acc &= (1ull << nacc) - 1;
        }
    }
    __device__ __forceinline__ void flush()
    {
        if (nacc > 0)
            atomicOr(&out[w], __byte_perm((uint32_t)(acc << (32 - nacc)), 0, 0x0123));
    }
};

/* Bits of table t's code lengths (docs/BZIP2.md section 7). */
__device__ uint32_t length_bits(const uint8_t *l, uint32_t alpha)
{
    uint32_t bits = 5;
    int curr = l[0];
    for (uint32_t s = 0; s < alpha; s++) {
        bits += 2 * (uint32_t)abs((int)l[s] - curr) + 1;
        curr = l[s];
    }
    return bits;
}

/* One CTA per block: its head, magic to code lengths. Thread 0 the fixed
 * fields, every thread a run of selectors (offsets by a block scan), one
 * thread per table its code lengths. */
__global__ void __launch_bounds__(kBz2Threads)
    pack_heads(const Bz2Block *blk, uint64_t bit0, const uint8_t *sel_mtf_all, const uint8_t *lens_all,
               uint32_t *out)
{
    typedef cub::BlockScan<uint32_t, kBz2Threads> Scan;
    __shared__ typename Scan::TempStorage scan_tmp;
    __shared__ uint32_t tbits[BZ2_MAX_GROUPS];
    const uint32_t bi = blockIdx.x;
    const Bz2Block &b = blk[bi];
    uint32_t ranges = 0, n_ranges = 0;
    for (int r = 0; r < 16; r++)
        if ((b.in_use[r / 2] >> (16 * (r % 2))) & 0xffffu) {
            ranges |= 0x8000u >> r;
            n_ranges++;
        }
    const uint64_t at = bit0 + b.bit_off;
    const uint32_t fixed = 48 + 32 + 1 + 24 + 16 + 16 * n_ranges + 3 + 15;
    const uint32_t n_sel = (b.n_sym + BZ2_GROUP_SIZE - 1) / BZ2_GROUP_SIZE;
    if (threadIdx.x == 0) {
        BitSink w(out, at);
        w.put(24, (uint32_t)(BZ2_BLOCK_MAGIC >> 24));
        w.put(24, (uint32_t)(BZ2_BLOCK_MAGIC & 0xffffff));
        w.put(32, b.crc);
        w.put(1, 0);
        w.put(24, b.orig);
        w.put(16, ranges);
        for (int r = 0; r < 16; r++) {
            if (!(ranges & (0x8000u >> r)))
                continue;
            uint32_t half = (b.in_use[r / 2] >> (16 * (r % 2))) & 0xffffu, bits = 0;
            for (int j = 0; j < 16; j++)
                if (half >> j & 1)
                    bits |= 0x8000u >> j;
            w.put(16, bits);
        }
        w.put(3, b.groups);
        w.put(15, n_sel);
        w.flush();
    }
    /* selectors: unary MTF indices */
    const uint8_t *mtf = sel_mtf_all + bz2_group_base(b, bi);
    const uint32_t per = (n_sel + blockDim.x - 1) / blockDim.x;
    const uint32_t g0 = min32(n_sel, threadIdx.x * per), g1 = min32(n_sel, g0 + per);
    uint32_t mine = 0;
    for (uint32_t g = g0; g < g1; g++)
        mine += mtf[g] + 1u;
    uint32_t before, sel_bits;
    Scan(scan_tmp).ExclusiveSum(mine, before, sel_bits);
    if (g0 < g1) {
        BitSink w(out, at + fixed + before);
        for (uint32_t g = g0; g < g1; g++)
            w.put(mtf[g] + 1, ((1u << mtf[g]) - 1) << 1);
        w.flush();
    }
    /* code lengths, one thread per table */
    const uint8_t *lens = lens_all + (uint64_t)bi * BZ2_MAX_GROUPS * BZ2_MAX_ALPHA;
    if (threadIdx.x < b.groups)
        tbits[threadIdx.x] = length_bits(lens + threadIdx.x * BZ2_MAX_ALPHA, b.alpha);
    __syncthreads();
    if (threadIdx.x < b.groups) {
        uint64_t pos = at + fixed + sel_bits;
        for (uint32_t t = 0; t < threadIdx.x; t++)
            pos += tbits[t];
        const uint8_t *l = lens + threadIdx.x * BZ2_MAX_ALPHA;
        BitSink w(out, pos);
        int curr = l[0];
        w.put(5, (uint32_t)curr);
        for (uint32_t s = 0; s < b.alpha; s++) {
            for (; curr < l[s]; curr++)
                w.put(2, 2);
            for (; curr > l[s]; curr--)
                w.put(2, 3);
            w.put(1, 0);
        }
        w.flush();
    }
}

/* Group slot G -> its block (the last whose group base is <= G). */
__device__ __forceinline__ uint32_t block_of_group(const Bz2Block *blk, uint32_t nb, uint64_t G)
{
    uint32_t lo = 0, hi = nb - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (bz2_group_base(blk[mid], mid) <= G)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__global__ void pack_groups(const Bz2Block *blk, uint32_t nb, uint64_t slots, uint64_t bit0,
                            const uint16_t *sym_all, const uint8_t *sel_all, const uint32_t *gbit_off_all,
                            const uint8_t *lens_all, const uint32_t *codes_all, uint32_t *out)
{
    uint64_t G = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (G >= slots)
        return;
    uint32_t bi = block_of_group(blk, nb, G);
    const Bz2Block &b = blk[bi];
    uint64_t g = G - bz2_group_base(b, bi);
    if (g * BZ2_GROUP_SIZE >= b.n_sym)
        return;
    uint32_t t = sel_all[G];
    const uint8_t *l = lens_all + ((uint64_t)bi * BZ2_MAX_GROUPS + t) * BZ2_MAX_ALPHA;
    const uint32_t *c = codes_all + ((uint64_t)bi * BZ2_MAX_GROUPS + t) * BZ2_MAX_ALPHA;
    const uint16_t *sym = sym_all + b.rle_off + bi;
    BitSink w(out, bit0 + b.bit_off + b.head_bits + gbit_off_all[G]);
    uint32_t hi = min32(b.n_sym, (uint32_t)(g + 1) * BZ2_GROUP_SIZE);
    for (uint32_t i = (uint32_t)g * BZ2_GROUP_SIZE; i < hi; i++)
        w.put(l[sym[i]], c[sym[i]]);
    w.flush();
}

} // namespace

int bz2_enc_pack(Bz2Scratch &s, uint32_t blocks, uint64_t bits, unsigned bit0, uint8_t *d_out, size_t out_cap,
                 bool fresh, cudaStream_t st, gc_error *err)
{
    uint64_t words = (bit0 + bits + 31) / 32;
    if (words * 4 > out_cap)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: %llu bits do not fit %zu bytes of output",
                       (unsigned long long)bits, out_cap);
    uint64_t w0 = fresh || bit0 == 0 ? 0 : 1; /* else word 0 holds the bits before bit0, zero after them */
    if (words > w0)
        GC_CUDA(cudaMemsetAsync(d_out + 4 * w0, 0, (words - w0) * 4, st));
    if (blocks == 0)
        return GC_OK;
    uint32_t *out = reinterpret_cast<uint32_t *>(d_out);
    pack_heads<<<blocks, kBz2Threads, 0, st>>>(s.blk, bit0, s.sel_mtf, s.lens, out);
    GC_CUDA_LAUNCHED("pack_heads");
    uint64_t slots = s.group_cap;
    pack_groups<<<(unsigned)((slots + kBz2Threads - 1) / kBz2Threads), kBz2Threads, 0, st>>>(
        s.blk, blocks, slots, bit0, s.sym, s.sel, s.gbit_off, s.lens, s.codes, out);
    GC_CUDA_LAUNCHED("pack_groups");
    bz2_prof(st, "pack_groups", blocks);
    return GC_OK;
}

} // namespace gcgpu
