/*
 * bz2_dec_huff.cuh - what the Huffman stage's kernels share (not seen by C
 * code): a candidate's canonical tables as the walk (bz2_dec_huff.cu)
 * builds them and the segment passes (bz2_dec_seg.cu) read them, and the
 * lookup of one code.
 *
 * The stage runs in three steps so that a block is not one long serial
 * walk: the walk (one CTA per candidate) reads the header and tables and
 * only finds where each symbol group starts, a group at a time
 * (bz2_dec_chase.cuh); the segment passes (one
 * thread per segment of kDecSegGroups groups) decode the symbols, runs and
 * inverse MTF of their segment in parallel; a scan between them carries
 * the MTF list from segment to segment (the list a segment ends with is a
 * permutation of the one it starts with, so each segment first runs from
 * the identity list).
 */
#ifndef GC_BZ2_DEC_HUFF_CUH
#define GC_BZ2_DEC_HUFF_CUH

#include "bz2_dec.cuh"

namespace gcgpu {

constexpr int kDecLut = 1 << kDecLutBits;

/* One candidate's tables. */
struct HuffTab {
    uint16_t lut[BZ2_MAX_GROUPS][kDecLut];          /* sym << 5 | len, 0 = longer code or none */
    uint16_t sorted[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA]; /* symbols by (length, symbol) */
    int32_t first[BZ2_MAX_GROUPS][BZ2_MAX_CODE_LEN_DEC + 1];
    int32_t count[BZ2_MAX_GROUPS][BZ2_MAX_CODE_LEN_DEC + 1];
    int32_t index[BZ2_MAX_GROUPS][BZ2_MAX_CODE_LEN_DEC + 1];
    uint32_t limit[BZ2_MAX_GROUPS][BZ2_MAX_CODE_LEN_DEC + 1]; /* (first + count) << (20 - length) */
    uint8_t seq[256]; /* the symbol map: used bytes in order (the first MTF list) */
};

/* The code of table t at the front of v (20 bits) from the first-level
 * table alone: sym << 8 | length, or 0 for a longer code or none. */
__device__ __forceinline__ uint32_t huff_code_fast(const HuffTab &s, int t, uint32_t v)
{
    uint32_t e = s.lut[t][v >> (BZ2_MAX_CODE_LEN_DEC - kDecLutBits)];
    return (e >> 5) << 8 | (e & 31);
}

/* The same for a code longer than the first-level table: 0 if the bits
 * match no code. Canonical codes of length l, left-aligned to 20 bits, are
 * the values from limit[l - 1] up to limit[l], and the limits never fall
 * (oversubscribed lengths included), so v's length is one more than the
 * number of limits at or below it; the first-level table has answered for
 * every v below limit[kDecLutBits]. */
__device__ __forceinline__ uint32_t huff_code_slow(const HuffTab &s, int t, uint32_t v)
{
    int l = kDecLutBits + 1;
#pragma unroll
    for (int k = kDecLutBits + 1; k <= BZ2_MAX_CODE_LEN_DEC; k++)
        l += v >= s.limit[t][k];
    if (l > BZ2_MAX_CODE_LEN_DEC)
        return 0;
    int32_t c = (int32_t)(v >> (BZ2_MAX_CODE_LEN_DEC - l));
    return (uint32_t)s.sorted[t][s.index[t][l] + c - s.first[t][l]] << 8 | (uint32_t)l;
}

__device__ __forceinline__ uint32_t huff_code_at(const HuffTab &s, int t, uint32_t v)
{
    uint32_t code = huff_code_fast(s, t, v);
    return code ? code : huff_code_slow(s, t, v);
}

/* Big-endian word k of an input of len bytes (4-byte aligned); bytes past
 * its end read as zeros. */
__device__ __forceinline__ uint32_t huff_load_word(const uint8_t *p, uint64_t len, uint64_t k)
{
    uint64_t b = k * 4;
    if (b + 4 <= len)
        return __byte_perm(__ldg(reinterpret_cast<const uint32_t *>(p) + k), 0, 0x0123);
    uint32_t v = 0;
    for (int j = 0; j < 4; j++)
        v = v << 8 | (b + j < len ? p[b + j] : 0u);
    return v;
}

/* MSB-first reader for one thread: a 64-bit window and the word after it
 * loaded a step early, so a refill never waits for memory. */
struct HuffBits {
    const uint8_t *p;
    uint64_t len;
    uint64_t pos, base, win;
    uint32_t nxt;

    __device__ void seek(uint64_t bit)
    {
        pos = bit;
        base = bit & ~31ull;
        win = (uint64_t)huff_load_word(p, len, base / 32) << 32 | huff_load_word(p, len, base / 32 + 1);
        nxt = huff_load_word(p, len, base / 32 + 2);
    }
    /* the next n (1..32) bits; pos may be at most 20 bits past the last peek */
    __device__ uint32_t peek(int n)
    {
        if (pos - base >= 32) {
            base += 32;
            win = win << 32 | nxt;
            nxt = huff_load_word(p, len, base / 32 + 2);
            /* a lone reader's next word a step ahead is not enough to hide
             * the memory's latency: ask for the bytes further on early */
            uint64_t ahead = (base / 32 + kDecPrefetchWords) * 4;
            if (ahead < len && (ahead & 127) < 4)
                asm volatile("prefetch.global.L1 [%0];" ::"l"(p + ahead));
        }
        return (uint32_t)((win << (pos - base)) >> (64 - n));
    }
};

/* Table of symbol group g (selectors two per byte). */
__device__ __forceinline__ int huff_table_of(const uint8_t *sel, uint32_t g)
{
    return (sel[g / 2] >> (4 * (g & 1))) & 15;
}

/* Copy n bytes (a multiple of 4, both 4-byte aligned) with a group of
 * threads: lane `me` of `width`. */
__device__ __forceinline__ void huff_copy_words(void *dst, const void *src, size_t n, int me, int width)
{
    uint32_t *d = static_cast<uint32_t *>(dst);
    const uint32_t *s = static_cast<const uint32_t *>(src);
    for (size_t k = (size_t)me; k < n / 4; k += (size_t)width)
        d[k] = s[k];
}

} // namespace gcgpu

#endif
