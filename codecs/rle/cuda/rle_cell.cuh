/*
 * rle_cell.cuh - per-thread 64-byte cells: guarded loads, unaligned
 * loads by funnel shifts, and run-head masks for element widths 1/2/4/8.
 *
 * A cell is 16 little-endian words; element k of width W occupies bytes
 * [k*W, k*W+W). Head masks have bit k set when element k starts a run.
 */
#ifndef GC_RLE_CELL_CUH
#define GC_RLE_CELL_CUH

#include "gpu_internal.cuh"

namespace gcgpu {

__device__ __forceinline__ void vec_to_words(uint4 v, uint32_t *w)
{
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
}

/* 16 bytes at base+off (off 16-aligned, base 16-aligned); bytes at or past
 * `limit` or before 0 read as zero, and are never touched. */
__device__ __forceinline__ void load_vec_guarded(const uint8_t *base, int64_t off, int64_t limit, uint32_t *w)
{
    if (off >= 0 && off + 16 <= limit) {
        vec_to_words(__ldg(reinterpret_cast<const uint4 *>(base + off)), w);
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint32_t v = 0;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            int64_t p = off + 4 * i + b;
            if (p >= 0 && p < limit)
                v |= (uint32_t)base[p] << (8 * b);
        }
        w[i] = v;
    }
}

/* 64 bytes at an aligned offset (fast path when fully inside). */
__device__ __forceinline__ void load_cell(const uint8_t *base, int64_t off, int64_t limit, uint32_t w[16])
{
    if (off >= 0 && off + 64 <= limit) {
        const uint4 *p = reinterpret_cast<const uint4 *>(base + off);
        uint4 a = __ldg(p), b = __ldg(p + 1), c = __ldg(p + 2), d = __ldg(p + 3);
        vec_to_words(a, w);
        vec_to_words(b, w + 4);
        vec_to_words(c, w + 8);
        vec_to_words(d, w + 12);
    } else {
#pragma unroll
        for (int v = 0; v < 4; v++)
            load_vec_guarded(base, off + 16 * v, limit, w + 4 * v);
    }
}

template <int Q>
__device__ __forceinline__ void shift_words(const uint32_t a[20], uint32_t sh, uint32_t w[16])
{
#pragma unroll
    for (int i = 0; i < 16; i++)
        w[i] = __funnelshift_r(a[i + Q], a[i + Q + 1], sh);
}

/* 64 bytes at any byte offset `sp` of a 16-byte aligned buffer of `limit`
 * bytes: five aligned vector loads and a funnel shift. */
__device__ __forceinline__ void load_cell_unaligned(const uint8_t *base, int64_t sp, int64_t limit, uint32_t w[16])
{
    int64_t a0 = sp & ~(int64_t)15;
    uint32_t r = (uint32_t)(sp - a0);
    if (r == 0) {
        load_cell(base, a0, limit, w);
        return;
    }
    uint32_t a[20];
    load_cell(base, a0, limit, a);
    load_vec_guarded(base, a0 + 64, limit, a + 16);
    uint32_t sh = 8 * (r & 3);
    switch (r >> 2) {
    case 0: shift_words<0>(a, sh, w); break;
    case 1: shift_words<1>(a, sh, w); break;
    case 2: shift_words<2>(a, sh, w); break;
    default: shift_words<3>(a, sh, w); break;
    }
}

template <int Q, int NW>
__device__ __forceinline__ void shift_words_n(const uint32_t *a, uint32_t sh, uint32_t *w)
{
#pragma unroll
    for (int i = 0; i < NW; i++)
        w[i] = __funnelshift_r(a[i + Q], a[i + Q + 1], sh);
}

/* NW words (NW a multiple of 4) from byte offset sp of a 16-byte aligned
 * buffer of `limit` bytes, any alignment: aligned vector loads (all issued
 * before use) and a funnel shift; bytes at or past limit read as zero. */
template <int NW>
__device__ __forceinline__ void load_words_unaligned(const uint8_t *base, int64_t sp, int64_t limit, uint32_t *w)
{
    constexpr int NV = NW / 4 + 1;
    const int64_t a0 = sp & ~(int64_t)15;
    const uint32_t r = (uint32_t)(sp - a0), sh = 8 * (r & 3);
    uint32_t a[4 * NV + 4];
#pragma unroll
    for (int v = 0; v < NV; v++)
        load_vec_guarded(base, a0 + 16 * v, limit, a + 4 * v);
#pragma unroll
    for (int i = 4 * NV; i < 4 * NV + 4; i++)
        a[i] = 0;
    switch (r >> 2) {
    case 0: shift_words_n<0, NW>(a, sh, w); break;
    case 1: shift_words_n<1, NW>(a, sh, w); break;
    case 2: shift_words_n<2, NW>(a, sh, w); break;
    default: shift_words_n<3, NW>(a, sh, w); break;
    }
}

/* Bytes of a 64-byte cell for elements [k, k+1): helpers by width. */
template <int W>
struct Elem;
template <>
struct Elem<1> {
    static constexpr int N = 64;
};
template <>
struct Elem<2> {
    static constexpr int N = 32;
};
template <>
struct Elem<4> {
    static constexpr int N = 16;
};
template <>
struct Elem<8> {
    static constexpr int N = 8;
};

/*
 * Raw run-head mask: bit k set when element k differs from element k-1 (the
 * element before the cell is given by the word(s) just before it: pw for
 * W<8, (pw, pw2) = low, high word of the 8-byte element for W=8).
 */
template <int W>
__device__ __forceinline__ uint64_t head_mask(const uint32_t w[16], uint32_t pw, uint32_t pw2)
{
    uint64_t m = 0;
    if (W == 1) {
        /* Per word: bit 7 of each byte of t says "byte differs from the one
         * before it" (add-carry test, no per-byte compare), one multiply
         * gathers the four bits into a nibble, and the nibbles are laid into
         * two 32-bit halves by multiply-add. */
        uint32_t half[2] = { 0, 0 };
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t prev = i ? w[i - 1] : pw;
            uint32_t x = w[i] ^ __funnelshift_l(prev, w[i], 8);
            uint32_t t = (((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u;
            half[i >> 3] += ((t * 0x00204081u) >> 28) << (4 * (i & 7));
        }
        m = (uint64_t)half[0] | (uint64_t)half[1] << 32;
    } else if (W == 2) {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t prev = i ? w[i - 1] : pw;
            uint32_t sh = __funnelshift_l(prev, w[i], 16);
            uint32_t ne = __vcmpne2(w[i], sh);
            m |= (uint64_t)((ne & 1u) | ((ne >> 15) & 2u)) << (2 * i);
        }
    } else if (W == 4) {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t prev = i ? w[i - 1] : pw;
            m |= (uint64_t)(w[i] != prev) << i;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t plo = i ? w[2 * i - 2] : pw, phi = i ? w[2 * i - 1] : pw2;
            m |= (uint64_t)((w[2 * i] != plo) | (w[2 * i + 1] != phi)) << i;
        }
    }
    return m;
}

/* Bits [lo, hi) of a 64-bit mask (0 <= lo, hi <= 64). */
__device__ __forceinline__ uint64_t bit_range(int lo, int hi)
{
    if (hi <= lo)
        return 0;
    uint64_t up = hi >= 64 ? ~0ull : ((1ull << hi) - 1);
    uint64_t dn = lo >= 64 ? ~0ull : ((1ull << lo) - 1);
    return up & ~dn;
}

/* Store the 64 bytes of a cell at out+off (off 16-aligned) keeping only
 * bytes in [lo, hi) (offsets from out): whole vectors where possible, bytes at
 * the edges (a neighbouring tile owns the other bytes of an edge vector).
 * Off: int64_t, or int32_t where the caller's offsets are relative to a
 * nearby base (half the compares and selects). */
template <typename Off>
__device__ __forceinline__ void store_cell(uint8_t *out, Off off, Off lo, Off hi, const uint32_t w[16])
{
#pragma unroll
    for (int v = 0; v < 4; v++) {
        Off vo = off + 16 * v;
        if (vo >= lo && vo + 16 <= hi) {
            *reinterpret_cast<uint4 *>(out + vo) = make_uint4(w[4 * v], w[4 * v + 1], w[4 * v + 2], w[4 * v + 3]);
        } else if (vo + 16 > lo && vo < hi) {
#pragma unroll
            for (int b = 0; b < 16; b++) {
                Off p = vo + b;
                if (p >= lo && p < hi)
                    out[p] = (uint8_t)(w[4 * v + (b >> 2)] >> (8 * (b & 3)));
            }
        }
    }
}

/* #pragma unroll for __host__ __device__ code (the host compiler warns on it) */
#ifdef __CUDA_ARCH__
#define GC_HD_UNROLL _Pragma("unroll")
#else
#define GC_HD_UNROLL
#endif

/* ---- decoder: one thread's output cell from a run tile -------------------- */

__host__ __device__ __forceinline__ uint32_t popc64(uint64_t v)
{
#ifdef __CUDA_ARCH__
    return (uint32_t)__popcll(v);
#else
    return (uint32_t)__builtin_popcountll(v);
#endif
}

/* __byte_perm: byte n of the result is byte ((s >> 4n) & 7) of y:x. */
__host__ __device__ __forceinline__ uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    uint64_t in = (uint64_t)x | ((uint64_t)y << 32);
    uint32_t r = 0;
    for (int n = 0; n < 4; n++)
        r |= (uint32_t)((in >> (8 * ((s >> (4 * n)) & 7))) & 0xffu) << (8 * n);
    return r;
#endif
}

/* Slot of run i's start in the shared s_start array: one pad word per 32,
 * so that lanes probing power-of-two distances apart do not all hit one
 * bank. The decoder searches once per warp (all lanes the same slot) and
 * walks consecutive slots, which the padding neither helps nor hurts; the
 * span walk's tuning (docs/history/BENCHMARKS-2026-11.md) assumed it. */
__host__ __device__ __forceinline__ uint32_t start_slot(uint32_t i)
{
    return i + (i >> 5);
}

/* The run of element q: the last of runs 0..nr-1 with s_start[start_slot(r)] <= q
 * (s_start[start_slot(0)] <= q). */
__host__ __device__ __forceinline__ uint32_t run_of(const uint32_t *s_start, uint32_t nr, uint32_t q)
{
    uint32_t lo_r = 0, hi_r = nr;
    while (hi_r - lo_r > 1) {
        uint32_t mid = (lo_r + hi_r) >> 1;
        if (s_start[start_slot(mid)] <= q)
            lo_r = mid;
        else
            hi_r = mid;
    }
    return lo_r;
}

/*
 * Fill the 16 words of a cell from a run tile's symbols in shared memory.
 *   r0: the run of the cell's element klo;
 *   hm: bit k set when a run starts at element k (klo < k < khi);
 *   s_sym32: the runs' symbols, readable 4 bytes past the last one;
 *   [klo, khi): the cell's elements inside the tile's output (klo < khi).
 * Bytes of elements outside [klo, khi) come out zero (the CRC relies on it).
 * Work is per word, not per element: each word takes its symbols with one byte
 * permutation (widths 1, 2) or one shared load (4, 8), the run index being a
 * popcount of the head mask.
 */
template <int W>
__host__ __device__ __forceinline__ void expand_words(uint32_t r0, uint64_t hm, const uint32_t *s_sym32, int klo,
                                                      int khi, uint32_t w[16])
{
    constexpr int N = Elem<W>::N;
    if (hm == 0) { /* one run covers the cell's part */
        uint32_t v0, v1;
        if (W == 8) {
            v0 = s_sym32[2 * r0];
            v1 = s_sym32[2 * r0 + 1];
        } else if (W == 4) {
            v0 = v1 = s_sym32[r0];
        } else if (W == 2) {
            v0 = v1 = ((s_sym32[r0 >> 1] >> (16 * (r0 & 1))) & 0xffffu) * 0x10001u;
        } else {
            v0 = v1 = ((s_sym32[r0 >> 2] >> (8 * (r0 & 3))) & 0xffu) * 0x01010101u;
        }
        GC_HD_UNROLL
        for (int i = 0; i < 16; i += 2) {
            w[i] = v0;
            w[i + 1] = v1;
        }
    } else {
        GC_HD_UNROLL
        for (int i = 0; i < 16; i++) {
            if (W == 8) {
                if (i & 1)
                    continue; /* written with word i - 1 */
                const int e = i >> 1;
                uint32_t R = r0 + popc64(hm & ((2ull << e) - 1));
                w[i] = s_sym32[2 * R];
                w[i + 1] = s_sym32[2 * R + 1];
            } else if (W == 4) {
                uint32_t R = r0 + popc64(hm & ((2ull << i) - 1));
                w[i] = s_sym32[R];
            } else {
                constexpr int EPW = 4 / (W == 2 ? 2 : 1); /* elements per word */
                const int e0 = i * EPW;
                /* run of the word's first element, and the head bits of the others */
                uint32_t R = r0 + popc64(hm & ((2ull << e0) - 1));
                uint32_t nib = (uint32_t)(hm >> e0) & ((1u << EPW) - 1);
                uint32_t bo = R * (uint32_t)W;
                uint32_t x = s_sym32[bo >> 2], y = s_sym32[(bo >> 2) + 1];
                uint32_t sel = (bo & 3) * 0x1111u;
                if (W ==
                    1) /* nibble j = heads among elements 1..j of the word (bits 1..3 spread to nibbles 1..3, prefix-summed) */
                    sel += (((nib & 0xEu) * 0x249u) & 0x1110u) * 0x111u;
                else /* bytes 2, 3 from the next symbol when element 1 starts a run */
                    sel += 0x1010u + ((nib >> 1) & 1u) * 0x2200u;
                w[i] = byte_perm(x, y, sel);
            }
        }
    }
    if (klo > 0 || khi < N) {
        const int lob = klo * W, hib = khi * W;
        GC_HD_UNROLL
        for (int i = 0; i < 16; i++) {
            const int b = 4 * i;
            uint32_t keep = 0xffffffffu;
            if (lob > b)
                keep = lob >= b + 4 ? 0u : keep << (8 * (lob - b));
            if (hib < b + 4)
                keep &= hib <= b ? 0u : (0xffffffffu >> (8 * (b + 4 - hib)));
            w[i] &= keep;
        }
    }
}

} // namespace gcgpu

#endif
