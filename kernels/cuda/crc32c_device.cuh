/*
 * crc32c_device.cuh - parallel CRC32C on the device.
 *
 * CRC is linear over GF(2): with raw(M) the CRC register after M from a zero
 * start (no final xor),
 *     raw(A || B) = raw(A) * x^(8|B|) + raw(B)      (mod P)
 *     raw(0^k || M) = raw(M)                         (leading zeros are free)
 *     crc32c(M) = raw(M) + 0xFFFFFFFF * x^(8|M|) + 0xFFFFFFFF
 * so every thread computes raw() of its own 64 contiguous bytes with
 * lookup tables in shared memory (see seg_crc), multiplies it by the constant that
 * moves it to the end of the block's 16 KiB window, and the block
 * XOR-reduces. The multiply is split: the lane part (to the end of the
 * warp's 2 KiB) by nibble tables in shared memory, one bank per lane
 * (lane_shift: 8 conflict-free loads), the warp part by one nibble-table
 * multiply per warp done by warp 0 alone (block_crc). Bytes outside the data are zero in the
 * window: zeros before are free, zeros after are removed at the end with one
 * multiply by x^(-8k). Windows combine the same way at chunk level.
 * All polynomials are in the reflected representation: bit 31 is x^0.
 */
#ifndef GC_CRC32C_DEVICE_CUH
#define GC_CRC32C_DEVICE_CUH

#include "gpu_internal.cuh"

namespace gcgpu {

/* a * b mod P, reflected. Branch-free: 32 steps. */
__host__ __device__ __forceinline__ uint32_t gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < 32; i++) {
        p ^= (0u - ((a >> (31 - i)) & 1u)) & b;
        b = (b >> 1) ^ ((0u - (b & 1u)) & kPoly);
    }
    return p;
}

/* c times the constant whose nibble table is tab (tab[n*16 + v] = (v << 4n) *
 * constant, see CrcTables::wm): eight independent loads instead of gf2_mul's
 * 32 dependent steps, for the multiplications on a block's critical path. */
__device__ __forceinline__ uint32_t mul_nibbles(const uint32_t *tab, uint32_t c)
{
    uint32_t r = 0;
#pragma unroll
    for (int n = 0; n < 8; n++)
        r ^= __ldg(&tab[n * 16 + ((c >> (4 * n)) & 15u)]);
    return r;
}

/* c * x^(8n) from the nibble tables nib of x^(8*2^k) (bits k < kPowNibbleBits
 * of n) and the plain powers pow (higher bits): one table multiply per set
 * bit of n, eight independent loads each, where a bit-serial multiply per
 * set bit was 32 dependent steps. */
__device__ __forceinline__ uint32_t mul_xpow_from(const uint32_t (*nib)[8][16], const uint32_t *pow, uint32_t c,
                                                  uint64_t n)
{
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1)
            c = k < kPowNibbleBits ? mul_nibbles(&nib[k][0][0], c) : gf2_mul(__ldg(&pow[k]), c);
    return c;
}

/* c * x^(8n) mod P: c's CRC moved on by n bytes. */
__device__ __forceinline__ uint32_t mul_xpow8(const CrcTables *t, uint32_t c, uint64_t n)
{
    return mul_xpow_from(t->xpn, t->xp8, c, n);
}

/* c * x^(-8n) mod P: moved back by n bytes. */
__device__ __forceinline__ uint32_t mul_xinv8(const CrcTables *t, uint32_t c, uint64_t n)
{
    return mul_xpow_from(t->xin, t->xi8, c, n);
}

/*
 * The CRC32C of len bytes ending `past` bytes before the reference point ref,
 * from acc, the xor of the raw window CRCs each shifted to ref: shift back by
 * `past`, then apply the standard init/final xor for len bytes.
 */
__device__ __forceinline__ uint32_t crc_at_ref(const CrcTables *t, uint32_t acc, uint64_t past,
                                               uint64_t len)
{
    return mul_xinv8(t, acc, past) ^ mul_xpow8(t, 0xffffffffu, len) ^ 0xffffffffu;
}

/*
 * The per-segment CRC reads tables in shared memory, and that is what bounds
 * it: 32 lanes look up data-dependent entries at once, and lanes whose
 * entries differ but share a bank are served one after another.
 *
 * Default: slicing-by-8 (8 KiB, layout t*256 + b). Measured on an H200
 * (2026-11-22) against copies that spread its lookups over the banks:
 * slicing-by-4 with 8 interleaved copies (32 KiB) and slicing-by-8 with 4
 * copies were 0-12% slower, a per-lane copy of the byte table (conflict-free,
 * one dependent lookup per byte) 5-30% slower.
 *
 * GC_CRC_PIECES5=1: each 8 bytes cut into 13 pieces of 5 bits, each looked up
 * in a table of 32 words (1.6 KiB in all). A 32-word table has one entry per
 * bank, so a warp's lookups never conflict: 13 shared-memory wavefronts per
 * 8 bytes of a warp, against about 27 for slicing-by-8 (Nsight Compute: 3.4
 * per lookup), for 13 lookups instead of 8. H200, 2026-11-23: reading and
 * checksumming alone (bench_gpu_rle's ceiling) 1804 -> 2453 GB/s, but in the
 * codec, where the kernels have other work for the integer pipes, short runs
 * gained 1-3% and long runs lost 8-11% (docs/BENCHMARKS.md), so it is off.
 */
#ifndef GC_CRC_PIECES5
#define GC_CRC_PIECES5 0
#endif
#if GC_CRC_PIECES5
constexpr int kSliceWords = 13 * 32;
#else
constexpr int kSliceWords = 8 * 256;
#endif
constexpr int kLaneShiftWords = 8 * 16 * 32; /* 16 KiB, see lane_shift */
constexpr size_t kCrcSmemBytes = 4 * (kSliceWords + kLaneShiftWords);

struct CrcSmem {
    const uint32_t *slice; /* lookup tables of seg_crc */
    const uint32_t *shift; /* lane-shift tables */
};

/* Fill the CRC tables at smem (kCrcSmemBytes of dynamic shared memory; call
 * with all threads, then sync). */
__device__ __forceinline__ CrcSmem load_crc_smem(uint32_t *smem, const CrcTables *t)
{
#if GC_CRC_PIECES5
    const uint32_t *src = &t->t5[0][0];
#else
    const uint32_t *src = &t->t8[0][0];
#endif
    for (int i = threadIdx.x; i < kSliceWords; i += blockDim.x)
        smem[i] = __ldg(&src[i]);
    const uint32_t *g = &t->lm[0][0][0];
    for (int i = threadIdx.x; i < kLaneShiftWords; i += blockDim.x)
        smem[kSliceWords + i] = __ldg(&g[i]);
    return CrcSmem{smem, smem + kSliceWords};
}

/* raw CRC (zero start) of 64 bytes held as 16 little-endian words. */
__device__ __forceinline__ uint32_t seg_crc(const uint32_t *t, const uint32_t w[16])
{
    uint32_t crc = 0;
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
        uint32_t a = w[i] ^ crc, b = w[i + 1];
#if GC_CRC_PIECES5
        crc = t[0 * 32 + (a & 31)] ^ t[1 * 32 + ((a >> 5) & 31)] ^ t[2 * 32 + ((a >> 10) & 31)] ^
              t[3 * 32 + ((a >> 15) & 31)] ^ t[4 * 32 + ((a >> 20) & 31)] ^ t[5 * 32 + ((a >> 25) & 31)] ^
              t[6 * 32 + (__funnelshift_r(a, b, 30) & 31)] ^ t[7 * 32 + ((b >> 3) & 31)] ^
              t[8 * 32 + ((b >> 8) & 31)] ^ t[9 * 32 + ((b >> 13) & 31)] ^ t[10 * 32 + ((b >> 18) & 31)] ^
              t[11 * 32 + ((b >> 23) & 31)] ^ t[12 * 32 + (b >> 28)];
#else
        crc = t[1792 + (a & 255)] ^ t[1536 + ((a >> 8) & 255)] ^ t[1280 + ((a >> 16) & 255)] ^ t[1024 + (a >> 24)] ^
              t[768 + (b & 255)] ^ t[512 + ((b >> 8) & 255)] ^ t[256 + ((b >> 16) & 255)] ^ t[b >> 24];
#endif
    }
    return crc;
}

/* c * x^(8*64*(31-lane)): this thread's segment CRC moved to the end of its
 * warp's 2 KiB. lm is the shared copy of CrcTables::lm; lane l reads only
 * words = l mod 32, so the 8 loads are free of bank conflicts. */
__device__ __forceinline__ uint32_t lane_shift(const uint32_t *lm, uint32_t c)
{
    const uint32_t *p = lm + (threadIdx.x & 31);
    uint32_t r = 0;
#pragma unroll
    for (int n = 0; n < 8; n++)
        r ^= p[n * 512 + ((c >> (4 * n)) & 15u) * 32];
    return r;
}

/* Warp-part shift for lane i < 8 of warp 0: the nibble table of
 * x^(8*2048*(7-i)) (blocks are kThreads = 256 threads). */
__device__ __forceinline__ const uint32_t *warp_shift_table(const CrcTables *t)
{
    return &t->wm[threadIdx.x & 7][0][0];
}

/* Shared words for the block reductions below: two halves of 32 words used
 * by turns, so that a reduction need not wait at a block barrier for the
 * previous one's readers (warp 0, every thread in block_xor): they are done
 * with a half before they pass the next reduction's barrier, and only the one
 * after that writes it again. Every thread of the block makes the same calls. */
struct BlockRed {
    uint32_t *words; /* 64 words of shared memory */
    uint32_t turn;
};

/* XOR of v over each warp into half[warp] of rb's next half, returned for the
 * whole block to read: the first half of block_crc and block_xor. */
__device__ __forceinline__ const uint32_t *warp_xors_to_smem(uint32_t v, BlockRed &rb)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v ^= __shfl_xor_sync(0xffffffffu, v, o);
    uint32_t *half = rb.words + 32 * (rb.turn++ & 1);
    if ((threadIdx.x & 31) == 0)
        half[threadIdx.x >> 5] = v;
    __syncthreads();
    return half;
}

/* Raw CRC of the block's window from lane-shifted segment CRCs v (see
 * lane_shift); wk from warp_shift_table. Valid in warp 0 (thread 0 used).
 * Warp 0's part is short: the other warps wait for it at the next window's
 * barrier. */
__device__ __forceinline__ uint32_t block_crc(uint32_t v, BlockRed &rb, const uint32_t *wk)
{
    const uint32_t *red = warp_xors_to_smem(v, rb);
    uint32_t r = 0;
    if (threadIdx.x < 32) {
        if (threadIdx.x < (blockDim.x >> 5))
            r = mul_nibbles(wk, red[threadIdx.x]);
#pragma unroll
        for (int o = 16; o; o >>= 1)
            r ^= __shfl_xor_sync(0xffffffffu, r, o);
    }
    return r;
}

/* This thread's segment CRC moved to the end of its warp's 2 KiB (the input
 * of block_crc). */
__device__ __forceinline__ uint32_t seg_crc_shifted(const CrcSmem &cs, const uint32_t w[16])
{
    return lane_shift(cs.shift, seg_crc(cs.slice, w));
}

/* Raw CRC of the block's window, each thread holding its 64-byte segment in w
 * (bytes outside the data zeroed); wk from warp_shift_table. Valid in thread 0. */
__device__ __forceinline__ uint32_t window_crc(const CrcSmem &cs, const uint32_t w[16], BlockRed &rb,
                                               const uint32_t *wk)
{
    return block_crc(seg_crc_shifted(cs, w), rb, wk);
}

/* XOR of v over the block; valid in every thread. */
__device__ __forceinline__ uint32_t block_xor(uint32_t v, BlockRed &rb)
{
    const uint32_t *red = warp_xors_to_smem(v, rb);
    uint32_t r = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++)
        r ^= red[i];
    return r;
}

/* Zero the bytes of a 64-byte segment outside [lo, hi) (segment-relative, may be
 * <0 or >64). */
__device__ __forceinline__ void mask_seg(uint32_t w[16], int64_t lo, int64_t hi)
{
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int64_t b = 4 * i;
        uint32_t keep = 0xffffffffu;
        if (lo > b)
            keep = lo >= b + 4 ? 0u : keep << (8 * (lo - b));
        if (hi < b + 4)
            keep &= hi <= b ? 0u : keep & (0xffffffffu >> (8 * (b + 4 - hi)));
        w[i] &= keep;
    }
}

/* mask_seg with the common case (the whole segment is data) skipped: the
 * 16 guarded word masks cost ~3 instructions per byte when always run. */
__device__ __forceinline__ void mask_seg_edges(uint32_t w[16], int64_t lo, int64_t hi)
{
    if (lo > 0 || hi < 64)
        mask_seg(w, lo, hi);
}

} // namespace gcgpu

#endif
