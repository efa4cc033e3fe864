/*
 * rle_segment.cuh - per-thread 64-byte segments: guarded loads, unaligned
 * loads by funnel shifts, and run-head masks for element widths 1/2/4/8.
 *
 * A segment is 16 little-endian words; element k of width W occupies bytes
 * [k*W, k*W+W). Head masks have bit k set when element k starts a run.
 */
#ifndef GC_RLE_SEGMENT_CUH
#define GC_RLE_SEGMENT_CUH

#include "gpu_internal.cuh"

namespace gcgpu {

__device__ __forceinline__ void vec_to_words(uint4 v, uint32_t *w)
{
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
}

/* 16 bytes at base+off (off 16-aligned, base 16-aligned); bytes at or past
 * `limit` or before 0 read as zero, and are never touched. */
__device__ __forceinline__ void load_vec_guarded(const uint8_t *base, int64_t off, int64_t limit,
                                                 uint32_t *w)
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
__device__ __forceinline__ void load_seg(const uint8_t *base, int64_t off, int64_t limit,
                                         uint32_t w[16])
{
    if (off >= 0 && off + 64 <= limit) {
        const uint4 *p = reinterpret_cast<const uint4 *>(base + off);
        uint4 a = __ldg(p), b = __ldg(p + 1), c = __ldg(p + 2), d = __ldg(p + 3);
        vec_to_words(a, w); vec_to_words(b, w + 4); vec_to_words(c, w + 8); vec_to_words(d, w + 12);
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
__device__ __forceinline__ void load_seg_unaligned(const uint8_t *base, int64_t sp, int64_t limit,
                                                   uint32_t w[16])
{
    int64_t a0 = sp & ~(int64_t)15;
    uint32_t r = (uint32_t)(sp - a0);
    if (r == 0) {
        load_seg(base, a0, limit, w);
        return;
    }
    uint32_t a[20];
    load_seg(base, a0, limit, a);
    load_vec_guarded(base, a0 + 64, limit, a + 16);
    uint32_t sh = 8 * (r & 3);
    switch (r >> 2) {
    case 0: shift_words<0>(a, sh, w); break;
    case 1: shift_words<1>(a, sh, w); break;
    case 2: shift_words<2>(a, sh, w); break;
    default: shift_words<3>(a, sh, w); break;
    }
}

/* Bytes of a 64-byte segment for elements [k, k+1): helpers by width. */
template <int W> struct Elem;
template <> struct Elem<1> { static constexpr int N = 64; };
template <> struct Elem<2> { static constexpr int N = 32; };
template <> struct Elem<4> { static constexpr int N = 16; };
template <> struct Elem<8> { static constexpr int N = 8; };

/*
 * Raw run-head mask: bit k set when element k differs from element k-1 (the
 * element before the segment is given by the word(s) just before it: pw for
 * W<8, (pw, pw2) = low, high word of the 8-byte element for W=8).
 */
template <int W>
__device__ __forceinline__ uint64_t head_mask(const uint32_t w[16], uint32_t pw, uint32_t pw2)
{
    uint64_t m = 0;
    if (W == 1) {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t prev = i ? w[i - 1] : pw;
            uint32_t sh = __funnelshift_l(prev, w[i], 8);
            uint32_t ne = __vcmpne4(w[i], sh) & 0x01010101u;
            m |= (uint64_t)((ne * 0x10204080u) >> 28) << (4 * i);
        }
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

/* Element k of the segment as a 64-bit value (k a compile-time constant after unrolling). */
template <int W>
__device__ __forceinline__ uint64_t elem_at(const uint32_t w[16], int k)
{
    if (W == 8)
        return (uint64_t)w[2 * k] | ((uint64_t)w[2 * k + 1] << 32);
    if (W == 4)
        return w[k];
    if (W == 2)
        return (w[k >> 1] >> (16 * (k & 1))) & 0xffffu;
    return (w[k >> 2] >> (8 * (k & 3))) & 0xffu;
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

/* Store the 64 bytes of a segment at out+off (off 16-aligned) keeping only
 * bytes in [lo, hi) (absolute offsets): whole vectors where possible, bytes at
 * the edges (a neighbouring tile owns the other bytes of an edge vector). */
__device__ __forceinline__ void store_seg(uint8_t *out, int64_t off, int64_t lo, int64_t hi,
                                          const uint32_t w[16])
{
#pragma unroll
    for (int v = 0; v < 4; v++) {
        int64_t vo = off + 16 * v;
        if (vo >= lo && vo + 16 <= hi) {
            *reinterpret_cast<uint4 *>(out + vo) = make_uint4(w[4 * v], w[4 * v + 1], w[4 * v + 2], w[4 * v + 3]);
        } else if (vo + 16 > lo && vo < hi) {
#pragma unroll
            for (int b = 0; b < 16; b++) {
                int64_t p = vo + b;
                if (p >= lo && p < hi)
                    out[p] = (uint8_t)(w[4 * v + (b >> 2)] >> (8 * (b & 3)));
            }
        }
    }
}

} // namespace gcgpu

#endif
