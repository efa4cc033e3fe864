/*
 * bz2_dec_chase.cuh - the Huffman stage's walk, one symbol group at a time
 * by a whole CTA (included by bz2_dec_huff.cu, whose kernel runs it after
 * the block's tables): where each group of 50 codes ends, which tells
 * where the next begins, and so where every segment of the passes starts.
 *
 * A group's codes form a chain (each begins where the one before ends), so
 * one thread following them pays one dependent lookup per code. The CTA
 * (one warp or several: the walk's policy) instead looks up the code at
 * every bit of a window past the group's start (where it would end, were
 * a code to begin there), then doubles:
 * where 2, 4 and 8 codes from each bit end. Six jumps of 8 and one code
 * reach the group's 50th code, and the lookups are independent, so a
 * group costs a few shared-memory latencies instead of 50. A group whose codes
 * include EOB or a code that matches nothing, or that lies too close to
 * the input's end, is walked code by code (walk_codes), with the checks
 * and their order of the CPU engine (bz2_block_decode.c).
 *
 * A block's walk is a chain of groups, so a lone block's time is the sum
 * of its groups' latencies: where few blocks are walked at once, more
 * threads per group shorten each (the launcher chooses, bz2_dec_huff.cu).
 */
#ifndef GC_BZ2_DEC_CHASE_CUH
#define GC_BZ2_DEC_CHASE_CUH

#include "bz2_dec_huff.cuh"

namespace gcgpu {
namespace {

/* A group's 50 codes span at most 50 x 20 bits: one window always holds them. */
constexpr uint32_t kChaseMax = 1024;
static_assert(BZ2_GROUP_SIZE * BZ2_MAX_CODE_LEN_DEC <= kChaseMax, "a group fits the largest window");
/* Levels of doubling: where 1, 2, 4 and 8 codes from a bit end; the chase
 * then jumps 8 codes six times and one code to the group's last. */
constexpr int kChaseLevels = 4;
constexpr uint32_t kChaseJumps = 6;
static_assert(BZ2_GROUP_SIZE - 1 == kChaseJumps * (1u << (kChaseLevels - 1)) + 1, "the jumps reach the last code");
/* Entries (bits from the window's start), and what is not a bit: a chain
 * that leaves the window, and one that meets EOB or no code. */
constexpr uint16_t kChaseOut = 0x7ffe, kChaseStop = 0x7fff;
constexpr uint16_t kChaseRun = 0x8000; /* level 0: the code here is a run digit */
/* Window bits a thread handles together (independent lookups in flight). */
constexpr int kChaseUnroll = 4;

struct ChaseSmem {
    uint32_t words[65]; /* the window's input: enough for kChaseMax bits from any bit of a word */
    uint16_t to[kChaseLevels][kChaseMax];
};

/* The 20 bits from bit `bit % 32` of the 64-bit big-endian pair hi, lo. */
__device__ __forceinline__ uint32_t chase_take(uint32_t hi, uint32_t lo, uint32_t bit)
{
    uint64_t v = (uint64_t)hi << 32 | lo;
    return (uint32_t)((v << (bit & 31)) >> (64 - BZ2_MAX_CODE_LEN_DEC));
}

/* The 20 bits at bit `bit` of the input (zeros past its end). */
__device__ __forceinline__ uint32_t chase_bits(const DecInput &job, uint64_t bit)
{
    uint64_t w = bit / 32;
    return chase_take(huff_load_word(job.in, job.len, w), huff_load_word(job.in, job.len, w + 1), (uint32_t)bit);
}

/* The threads of one walk wait for each other: a warp's, or the CTA's. */
template <int kThreads>
__device__ __forceinline__ void chase_sync()
{
    if (kThreads == 32)
        __syncwarp();
    else
        __syncthreads();
}

/* Where a group walk stands (bits from the symbols' first bit). */
struct ChasePos {
    uint32_t pos;  /* next bit */
    uint32_t last; /* 1 if the last code was a run digit */
};

/* Level 0 at window bit x: where the code there ends, or why not. */
__device__ __forceinline__ uint16_t chase_code(const ChaseSmem &c, uint32_t off, uint32_t x, const HuffTab &tab,
                                               int t, uint32_t eob, uint32_t w)
{
    uint32_t bit = off + x, i = bit / 32;
    uint32_t code = huff_code_at(tab, t, chase_take(c.words[i], c.words[i + 1], bit));
    uint32_t sym = code >> 8, to = x + (code & 31);
    uint16_t e = code == 0 || sym == eob ? kChaseStop : to >= w ? kChaseOut : (uint16_t)to;
    return (uint16_t)(e | (code && sym <= 1 ? kChaseRun : 0));
}

/*
 * The walk's kThreads threads (thread `me`): the end of the group of table
 * t that starts at p.pos, taking its codes from a window of w bits (a
 * multiple of 32 * kChaseUnroll, at most kChaseMax). Returns kChaseOut if
 * they leave it, kChaseStop if they meet EOB or bits that match no code;
 * otherwise moves p past the group. Every thread returns the same.
 */
template <int kThreads>
__device__ uint32_t chase_group(const DecInput &job, uint64_t start, ChasePos &p, const HuffTab &tab, int t,
                                uint32_t eob, uint32_t w, ChaseSmem &c, int me)
{
    constexpr uint32_t step = kThreads * kChaseUnroll;
    /* windows are whole multiples of a warp's step; a wider step may overrun one */
    constexpr bool kGuard = step > 32 * kChaseUnroll;
    constexpr int kLoads = (65 + kThreads - 1) / kThreads;
    uint64_t first = start + p.pos;
    uint32_t word[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; j++) /* all in flight before the first is stored */
        word[j] = me + j * kThreads < 65 ? huff_load_word(job.in, job.len, first / 32 + me + j * kThreads) : 0;
#pragma unroll
    for (int j = 0; j < kLoads; j++)
        if (me + j * kThreads < 65)
            c.words[me + j * kThreads] = word[j];
    chase_sync<kThreads>();
    uint32_t off = (uint32_t)(first & 31);
    for (uint32_t x0 = (uint32_t)me; x0 < w; x0 += step) {
        uint16_t e[kChaseUnroll];
#pragma unroll
        for (int u = 0; u < kChaseUnroll; u++)
            e[u] = !kGuard || x0 + kThreads * u < w ? chase_code(c, off, x0 + kThreads * u, tab, t, eob, w) : 0;
#pragma unroll
        for (int u = 0; u < kChaseUnroll; u++)
            if (!kGuard || x0 + kThreads * u < w)
                c.to[0][x0 + kThreads * u] = e[u];
    }
    chase_sync<kThreads>();
    for (int k = 1; k < kChaseLevels; k++) {
        for (uint32_t x0 = (uint32_t)me; x0 < w; x0 += step) {
            uint32_t a[kChaseUnroll];
#pragma unroll
            for (int u = 0; u < kChaseUnroll; u++)
                a[u] = !kGuard || x0 + kThreads * u < w ? c.to[k - 1][x0 + kThreads * u] & ~kChaseRun : kChaseOut;
#pragma unroll
            for (int u = 0; u < kChaseUnroll; u++)
                a[u] = a[u] >= kChaseOut ? a[u] : c.to[k - 1][a[u]] & ~kChaseRun;
#pragma unroll
            for (int u = 0; u < kChaseUnroll; u++)
                if (!kGuard || x0 + kThreads * u < w)
                    c.to[k][x0 + kThreads * u] = (uint16_t)a[u];
        }
        chase_sync<kThreads>();
    }
    uint32_t q = 0;
    for (uint32_t j = 0; j < kChaseJumps && q < kChaseOut; j++)
        q = c.to[kChaseLevels - 1][q];
    if (q < kChaseOut)
        q = c.to[0][q] & ~kChaseRun; /* the group's last code starts here */
    uint32_t e = q < kChaseOut ? c.to[0][q] : q;
    chase_sync<kThreads>(); /* every thread has read the window before the next is written */
    if ((e & ~kChaseRun) >= kChaseOut)
        return e & ~kChaseRun;
    p.pos += e & ~kChaseRun;
    p.last = e >> 15;
    return 0;
}

/* What walking a group code by code found. */
struct CodesEnd {
    uint32_t e;     /* kDecOk: EOB; kDecBadCode; kChaseStop: the group ended normally */
    uint32_t taken; /* symbols of the block before the stop (EOB: through it) */
};

/*
 * The group of table t from p code by code (every thread the same): its
 * first `done` symbols were taken before it. Notes in *overrun_at the
 * first code to end past end_rel, as the CPU engine reports truncation.
 */
__device__ CodesEnd walk_codes(const DecInput &job, uint64_t start, ChasePos &p, const HuffTab &tab, int t,
                               uint32_t eob, uint32_t done, uint32_t end_rel, uint32_t *overrun_at)
{
    for (uint32_t i = 0; i < BZ2_GROUP_SIZE; i++) {
        uint32_t code = huff_code_at(tab, t, chase_bits(job, start + p.pos));
        uint32_t taken = done + i;
        if (code == 0)
            return CodesEnd{ kDecBadCode, taken };
        p.pos += code & 31;
        if (*overrun_at == UINT32_MAX && p.pos > end_rel)
            *overrun_at = taken;
        uint32_t sym = code >> 8;
        p.last = sym <= 1;
        if (sym == eob)
            return CodesEnd{ kDecOk, taken + 1 };
    }
    return CodesEnd{ kChaseStop, done + BZ2_GROUP_SIZE };
}

/* The next window: half as long again as the last group, in whole steps
 * of a warp's unrolled lookups. */
__device__ __forceinline__ uint32_t chase_window(uint32_t last_len)
{
    constexpr uint32_t step = 32 * kChaseUnroll;
    uint32_t w = (last_len + last_len / 2 + step - 1) / step * step;
    return min(max(w, step), kChaseMax);
}

} // namespace
} // namespace gcgpu

#endif
