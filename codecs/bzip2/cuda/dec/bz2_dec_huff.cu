/*
 * bz2_dec_huff.cu - the decoder's first stage: one warp per block candidate
 * reads the block header, selectors and code lengths, builds the canonical
 * tables in shared memory and decodes the Huffman symbols, RUNA/RUNB runs
 * and the inverse MTF into the candidate's column. The same checks as the
 * CPU engine's bz2_block_decode.c, in the same order.
 *
 * The bitstream is sequential, so every lane runs the same decode on the
 * same bits (warp-uniform control flow); the lanes share the work where it
 * is parallel: the MTF list lives in registers, eight entries per lane, so
 * taking entry j moves the list with two shuffles; runs are written by all
 * lanes; lookup tables are filled by all lanes.
 */
#include "bz2_dec.cuh"

namespace gcgpu {
namespace {

constexpr int kLut = 1 << kDecLutBits;
constexpr int kMaxSel = BZ2_MAX_SELECTORS;

/* One warp's tables (the selectors live in global memory, kDecSelBytes per
 * candidate: shared memory is what limits the warps an SM holds). */
struct HuffSmem {
    uint16_t lut[BZ2_MAX_GROUPS][kLut];             /* sym << 5 | len, 0 = longer code */
    uint16_t sorted[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA]; /* symbols by (length, symbol) */
    int32_t first[BZ2_MAX_GROUPS][BZ2_MAX_CODE_LEN_DEC + 1];
    int32_t count[BZ2_MAX_GROUPS][BZ2_MAX_CODE_LEN_DEC + 1];
    int32_t index[BZ2_MAX_GROUPS][BZ2_MAX_CODE_LEN_DEC + 1];
    uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    uint8_t seq[256]; /* the symbol map: used bytes in order */
};

/* MSB-first reader of the input; reads past the end give zero bits. Every
 * lane holds the same window; the words behind it are loaded by the whole
 * warp, 32 at a time and one such chunk ahead (lane l holds word cbase + l
 * of the current chunk in cur, of the next in nxt), so the decode loop
 * never waits for memory. The input is 4-byte aligned. */
struct BitIn {
    const uint8_t *p;
    uint64_t len;  /* bytes */
    uint64_t pos;  /* next bit */
    uint64_t base; /* bit of win's top bit, a multiple of 32 */
    uint64_t win;
    uint64_t cbase; /* first word of the current chunk */
    uint32_t cur, nxt;
    int lane;

    __device__ uint32_t load(uint64_t k) const
    {
        uint64_t b = k * 4;
        if (b + 4 <= len)
            return __byte_perm(__ldg(reinterpret_cast<const uint32_t *>(p) + k), 0, 0x0123);
        uint32_t v = 0;
        for (int j = 0; j < 4; j++)
            v = v << 8 | (b + j < len ? p[b + j] : 0u);
        return v;
    }
    /* big-endian word k of the input (warp-wide call) */
    __device__ uint32_t word(uint64_t k)
    {
        if (k < cbase || k >= cbase + 64) {
            cbase = k;
            cur = load(k + lane);
            nxt = load(k + 32 + lane);
        }
        if (k >= cbase + 32) {
            cbase += 32;
            cur = nxt;
            nxt = load(cbase + 32 + lane);
        }
        return __shfl_sync(0xffffffffu, cur, (int)(k - cbase));
    }
    __device__ void seek(uint64_t bit)
    {
        pos = bit;
        base = bit & ~31ull;
        uint32_t hi = word(base / 32);
        win = (uint64_t)hi << 32 | word(base / 32 + 1);
    }
    /* the next n (1..32) bits */
    __device__ uint32_t peek(int n)
    {
        if (pos - base >= 32) { /* n <= 32: one word ahead is always enough */
            base += 32;
            win = win << 32 | word(base / 32 + 1);
        }
        return (uint32_t)((win << (pos - base)) >> (64 - n));
    }
    __device__ uint32_t get(int n)
    {
        uint32_t v = peek(n);
        pos += (uint64_t)n;
        return v;
    }
    __device__ bool overrun() const
    {
        return pos > len * 8;
    }
};

/* Take entry j of the MTF list and move it to the front. Lane l holds
 * entries 8l .. 8l + 7 (entry 8l + k in bits 8k .. 8k + 7 of m). */
__device__ __forceinline__ uint32_t mtf_take(uint64_t &m, uint32_t j, int lane)
{
    uint32_t owner = j >> 3, sh = (j & 7) * 8;
    uint32_t v = (uint32_t)(__shfl_sync(kFull, m, (int)owner) >> sh) & 0xffu;
    uint64_t carry = __shfl_up_sync(kFull, m, 1) >> 56;
    if (lane == 0)
        carry = v;
    /* bytes that keep their place: all of them past the owner, those after
     * entry j in the owner, none before it (branch-free: no divergence) */
    uint64_t keep = (uint32_t)lane > owner ? ~0ull : (uint32_t)lane < owner ? 0 : sh == 56 ? 0 : ~0ull << (sh + 8);
    m = (m & keep) | ((m << 8 | carry) & ~keep);
    return v;
}

struct Header {
    uint32_t crc, rand, orig;
    int n_in_use, n_groups;
    uint32_t n_sel;
};

/* Symbol map: the used bytes in order into s.seq (zeros after them). */
__device__ uint32_t read_map(BitIn &br, HuffSmem &s, int lane, Header &h)
{
    uint32_t ranges = br.get(16);
    uint32_t used[16];
    int total = 0;
    for (int i = 0; i < 16; i++) {
        used[i] = (ranges & (0x8000u >> i)) ? br.get(16) : 0;
        total += __popc(used[i]);
    }
    for (int k = lane; k < 256; k += 32)
        s.seq[k] = 0;
    __syncwarp();
    int below = 0;
    for (int i = 0; i < 16; i++) {
        int j = lane & 15;
        if ((lane >> 4) == (i & 1) && (used[i] & (0x8000u >> j)))
            s.seq[below + __popc(j ? used[i] >> (16 - j) : 0)] = (uint8_t)(i * 16 + j);
        below += __popc(used[i]);
    }
    __syncwarp();
    h.n_in_use = total;
    if (br.overrun())
        return kDecTruncated;
    return total ? kDecOk : kDecEmptyMap;
}

__device__ uint32_t read_selectors(BitIn &br, uint8_t *sel, int lane, Header &h)
{
    h.n_groups = (int)br.get(3);
    if (h.n_groups < 2 || h.n_groups > BZ2_MAX_GROUPS)
        return kDecGroups;
    h.n_sel = br.get(15);
    if (h.n_sel < 1)
        return kDecNoSelectors;
    uint32_t list = 0x543210; /* MTF list of table numbers, a nibble each */
    uint32_t pair = 0;        /* two selectors a byte, lane 0 writes */
    for (uint32_t i = 0; i < h.n_sel; i++) {
        int j = 0;
        while (br.get(1)) {
            if (++j >= h.n_groups)
                return kDecSelector;
        }
        uint32_t v = (list >> (4 * j)) & 15;
        uint32_t low = (1u << (4 * j)) - 1; /* nibbles before j move up one */
        list = (list & ~((low << 4) | 15u)) | ((list & low) << 4) | v;
        pair |= v << (4 * (i & 1));
        if ((i & 1) && i < (uint32_t)kMaxSel) {
            if (lane == 0)
                sel[i / 2] = (uint8_t)pair;
            pair = 0;
        }
    }
    if (h.n_sel > (uint32_t)kMaxSel)
        h.n_sel = kMaxSel; /* extra selectors are read and ignored */
    else if (h.n_sel & 1 && lane == 0)
        sel[h.n_sel / 2] = (uint8_t)pair;
    __syncwarp();
    return br.overrun() ? kDecTruncated : kDecOk;
}

__device__ uint32_t read_lengths(BitIn &br, HuffSmem &s, int lane, const Header &h)
{
    int alpha = h.n_in_use + 2;
    for (int t = 0; t < h.n_groups; t++) {
        int curr = (int)br.get(5);
        for (int a = 0; a < alpha; a++) {
            for (;;) {
                if (curr < 1 || curr > BZ2_MAX_CODE_LEN_DEC)
                    return kDecCodeLen;
                if (!br.get(1))
                    break;
                curr += br.get(1) ? -1 : 1;
            }
            if (lane == 0)
                s.len[t][a] = (uint8_t)curr;
        }
    }
    __syncwarp();
    return br.overrun() ? kDecTruncated : kDecOk;
}

/* Canonical tables of table t, as the CPU engine (and bzip2) builds them:
 * codes by (length, symbol), counting up; a code that does not fit in its
 * length (oversubscribed lengths) is never matched, since the window at
 * length l is below 2^l; incomplete sets leave patterns without a code. */
__device__ void build_table(HuffSmem &s, int t, int alpha, int lane)
{
    if (lane == 0) {
        int32_t *count = s.count[t], *first = s.first[t], *index = s.index[t];
        for (int l = 0; l <= BZ2_MAX_CODE_LEN_DEC; l++)
            count[l] = 0;
        for (int a = 0; a < alpha; a++)
            count[s.len[t][a]]++;
        int32_t code = 0, idx = 0; /* first[] stays below 258 << 20 */
        int32_t next[BZ2_MAX_CODE_LEN_DEC + 1];
        for (int l = 1; l <= BZ2_MAX_CODE_LEN_DEC; l++) {
            first[l] = code;
            index[l] = idx;
            next[l] = idx;
            idx += count[l];
            code = (code + count[l]) << 1;
        }
        for (int a = 0; a < alpha; a++)
            s.sorted[t][next[s.len[t][a]]++] = (uint16_t)a;
    }
    __syncwarp();
    for (int x = lane; x < kLut; x += 32) {
        uint16_t e = 0;
        for (int l = 1; l <= kDecLutBits; l++) {
            int32_t c = x >> (kDecLutBits - l);
            if ((uint32_t)(c - s.first[t][l]) < (uint32_t)s.count[t][l]) {
                e = (uint16_t)(s.sorted[t][s.index[t][l] + c - s.first[t][l]] << 5 | l);
                break;
            }
        }
        s.lut[t][x] = e;
    }
    __syncwarp();
}

/* The code of table t at the front of v (20 bits): sym << 8 | length, or 0
 * if the bits match no code. */
__device__ __forceinline__ uint32_t code_at(const HuffSmem &s, int t, uint32_t v)
{
    uint32_t e = s.lut[t][v >> (BZ2_MAX_CODE_LEN_DEC - kDecLutBits)];
    if (e)
        return (e >> 5) << 8 | (e & 31);
    for (int l = kDecLutBits + 1; l <= BZ2_MAX_CODE_LEN_DEC; l++) {
        int32_t c = (int32_t)(v >> (BZ2_MAX_CODE_LEN_DEC - l));
        if ((uint32_t)(c - s.first[t][l]) < (uint32_t)s.count[t][l])
            return (uint32_t)s.sorted[t][s.index[t][l] + c - s.first[t][l]] << 8 | (uint32_t)l;
    }
    return 0;
}

/*
 * Huffman + MTF + zero runs into col; *n: the column's length.
 *
 * Codes are found a window at a time: lane i decodes the code that would
 * start i bits into the window, all at once; the walk from bit 0 then takes
 * the lanes' answers in turn (a shuffle per symbol instead of a table lookup
 * on the critical path), until the window or the selector group ends.
 * W0..W2 hold the 96 bits from wb (pos - wb < 32 at a window's start).
 */
__device__ uint32_t decode_symbols(BitIn &br, const HuffSmem &s, const uint8_t *sel, const Header &h, int lane,
                                   uint8_t *col, uint32_t *n_out)
{
    uint64_t m = 0; /* the MTF list, eight entries per lane */
    for (int k = 7; k >= 0; k--)
        m = m << 8 | s.seq[lane * 8 + k];
    uint32_t eob = (uint32_t)h.n_in_use + 1;
    uint32_t nblock = 0, run = 0, weight = 1, group = 0;
    int left = 0, t = 0;
    uint32_t next_pair = sel[0]; /* loaded a group early: off the decode's critical path */
    uint64_t pos = br.pos, wb = pos & ~31ull;
    uint32_t w0 = br.word(wb / 32), w1 = br.word(wb / 32 + 1), w2 = br.word(wb / 32 + 2);
    uint32_t e = kDecOk;
    bool end = false;
    while (!end && e == kDecOk) {
        br.pos = pos;
        if (left == 0) {
            if (group >= h.n_sel)
                return kDecMoreGroups;
            if (br.overrun())
                return kDecTruncated;
            t = (next_pair >> (4 * (group & 1))) & 15;
            group++;
            if (!(group & 1) && group < h.n_sel)
                next_pair = sel[group / 2];
            left = BZ2_GROUP_SIZE;
        }
        while (pos - wb >= 32) {
            wb += 32;
            w0 = w1;
            w1 = w2;
            w2 = br.word(wb / 32 + 2);
        }
        uint32_t o = (uint32_t)(pos - wb) + (uint32_t)lane;
        uint32_t bits = o < 32 ? __funnelshift_l(w1, w0, o) : __funnelshift_l(w2, w1, o - 32);
        uint32_t mine = code_at(s, t, bits >> (32 - BZ2_MAX_CODE_LEN_DEC));
        uint32_t c = 0;
        while (c < 32 && left > 0) {
            uint32_t code = __shfl_sync(kFull, mine, (int)c);
            uint32_t sym = code >> 8;
            if ((code & 0xff) == 0) {
                e = kDecBadCode;
                break;
            }
            c += code & 0xff;
            left--;
            if (sym <= 1) {
                run += weight << sym;
                weight <<= 1;
                if (run > BZ2_MAX_BLOCK) {
                    e = kDecRunLong;
                    break;
                }
                continue;
            }
            if (run) {
                if (nblock + run > BZ2_MAX_BLOCK) {
                    e = kDecBlockLong;
                    break;
                }
                uint8_t front = (uint8_t)__shfl_sync(kFull, (uint32_t)m, 0);
                for (uint32_t k = (uint32_t)lane; k < run; k += 32)
                    col[nblock + k] = front;
                nblock += run;
                run = 0;
                weight = 1;
            }
            if (sym == eob) {
                end = true;
                break;
            }
            uint32_t v = mtf_take(m, sym - 1, lane);
            if (nblock >= BZ2_MAX_BLOCK) {
                e = kDecBlockLong;
                break;
            }
            col[nblock] = (uint8_t)v; /* every lane the same byte: one store, no divergence */
            nblock++;
        }
        pos += c;
    }
    br.pos = pos;
    if (e != kDecOk)
        return e;
    if (br.overrun())
        return kDecTruncated;
    *n_out = nblock;
    return kDecOk;
}

__device__ uint32_t decode_candidate(BitIn &br, HuffSmem &s, uint8_t *sel, int lane, uint8_t *col, DecCand &c)
{
    Header h{};
    c.crc = br.get(32);
    c.rand = br.get(1);
    c.orig = br.get(24);
    uint32_t e = read_map(br, s, lane, h);
    if (!e)
        e = read_selectors(br, sel, lane, h);
    if (!e)
        e = read_lengths(br, s, lane, h);
    for (int t = 0; !e && t < h.n_groups; t++)
        build_table(s, t, h.n_in_use + 2, lane);
    if (!e)
        e = decode_symbols(br, s, sel, h, lane, col, &c.n);
    if (!e && c.orig >= c.n)
        e = kDecOrigPtr;
    return e;
}

__global__ void __launch_bounds__(32)
    huff_decode(const DecInput *jobs, const uint64_t *cand, const uint32_t *cand_job, uint32_t n, DecCand *res,
                uint8_t *cols, uint8_t *sels)
{
    __shared__ HuffSmem s;
    uint32_t ci = blockIdx.x;
    int lane = (int)threadIdx.x;
    if (ci >= n)
        return;
    const DecInput job = jobs[cand_job[ci]]; /* reads stay inside the candidate's own job */
    BitIn br{ job.in, job.len, 0, 0, 0, ~0ull, 0, 0, lane };
    br.seek(cand[ci] + 48);
    DecCand c{};
    uint32_t e =
        decode_candidate(br, s, sels + (uint64_t)ci * kDecSelBytes, lane, cols + (uint64_t)ci * BZ2_MAX_BLOCK, c);
    /* garbage read as zero bits past the end: call it what it is (as the CPU engine) */
    if (e && br.overrun())
        e = kDecTruncated;
    c.status = e;
    c.end_bit = br.pos;
    br.seek(br.pos);
    uint32_t w[4];
    for (int k = 0; k < 4; k++)
        w[k] = br.get(32);
    if (lane == 0) {
        for (int k = 0; k < 16; k++)
            c.tail[k] = (uint8_t)(w[k / 4] >> (24 - 8 * (k % 4)));
        res[ci] = c;
    }
}

} // namespace

int bz2_dec_huff(const DecInput *jobs, const uint64_t *cand, const uint32_t *cand_job, uint32_t n, DecScratch &s,
                 cudaStream_t st, gc_error *err)
{
    if (n == 0)
        return GC_OK;
    huff_decode<<<n, 32, 0, st>>>(jobs, cand, cand_job, n, s.res, s.cols, s.sel);
    GC_CUDA_LAUNCHED("huff_decode");
    return GC_OK;
}

} // namespace gcgpu
