/*
 * bz2_dec_huff.cu - the decoder's first stage, its walk: one CTA per block
 * candidate. Its first warp reads the block header, selectors and code
 * lengths and builds the canonical tables (kept in global memory for the
 * segment passes of bz2_dec_seg.cu); then the whole CTA walks the codes to
 * EOB, noting where every segment starts. The checks are the CPU engine's
 * (bz2_block_decode.c); those on runs and block length are the passes',
 * and the first by symbol wins.
 *
 * The bitstream is sequential, so every thread runs the same walk on the
 * same bits (uniform control flow); the threads share the work where it
 * is parallel: each decodes the codes at its own bit offsets of a group's
 * window (bz2_dec_chase.cuh), and the first warp's lanes fill the tables.
 */
#include "bz2_dec_huff.cuh"
#include "bz2_dec_chase.cuh"
#include "gpu_internal.cuh"

namespace gcgpu {
namespace {

constexpr int kMaxSel = BZ2_MAX_SELECTORS;

/* One warp's tables as it builds them (the selectors live in global
 * memory, kDecSelBytes per candidate: shared memory is what limits the
 * warps an SM holds). */
struct HuffSmem {
    HuffTab tab;
    uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    ChaseSmem chase;
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
        return huff_load_word(p, len, k);
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
        s.tab.seq[k] = 0;
    __syncwarp();
    int below = 0;
    for (int i = 0; i < 16; i++) {
        int j = lane & 15;
        if ((lane >> 4) == (i & 1) && (used[i] & (0x8000u >> j)))
            s.tab.seq[below + __popc(j ? used[i] >> (16 - j) : 0)] = (uint8_t)(i * 16 + j);
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
        int32_t *count = s.tab.count[t], *first = s.tab.first[t], *index = s.tab.index[t];
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
            s.tab.limit[t][l] = (uint32_t)(code + count[l]) << (BZ2_MAX_CODE_LEN_DEC - l);
            code = (code + count[l]) << 1;
        }
        for (int a = 0; a < alpha; a++)
            s.tab.sorted[t][next[s.len[t][a]]++] = (uint16_t)a;
    }
    __syncwarp();
    for (int x = lane; x < kDecLut; x += 32) {
        uint16_t e = 0;
        for (int l = 1; l <= kDecLutBits; l++) {
            int32_t c = x >> (kDecLutBits - l);
            if ((uint32_t)(c - s.tab.first[t][l]) < (uint32_t)s.tab.count[t][l]) {
                e = (uint16_t)(s.tab.sorted[t][s.tab.index[t][l] + c - s.tab.first[t][l]] << 5 | l);
                break;
            }
        }
        s.tab.lut[t][x] = e;
    }
    __syncwarp();
}

/* Where the walk stopped (handed to the first warp's records). */
struct WalkEnd {
    uint64_t pos;
    uint32_t e, taken, overrun_at;
};

/*
 * The walk (every thread of the CTA, thread `me`): from the first symbol,
 * find where each segment's first group starts, checking every code, until
 * EOB. Symbols themselves are left to the segment passes; a group's end is
 * all the walk needs, which the threads find at once (bz2_dec_chase.cuh)
 * where they can.
 */
template <int kThreads>
__device__ WalkEnd walk_groups(const DecInput &job, uint64_t start, HuffSmem &s, const uint8_t *sel,
                               const Header &h, uint64_t *seg_bit, int me)
{
    uint32_t eob = (uint32_t)h.n_in_use + 1;
    uint32_t done = 0, overrun_at = UINT32_MAX;
    /* bits from start to the input's end */
    uint64_t avail = job.len * 8 > start ? job.len * 8 - start : 0;
    uint32_t end_rel = (uint32_t)min(avail, (uint64_t)UINT32_MAX);
    uint32_t next_pair = sel[0]; /* loaded a group early: off the walk's path */
    ChasePos p{ 0, 0 };
    uint32_t w = chase_window(0);
    for (uint32_t group = 0;; group++) {
        if (group >= h.n_sel)
            return WalkEnd{ start + p.pos, kDecMoreGroups, done, overrun_at };
        if (p.pos > end_rel)
            return WalkEnd{ start + p.pos, kDecTruncated, done, overrun_at };
        if (group % kDecSegGroups == 0 && me == 0)
            seg_bit[group / kDecSegGroups] = (start + p.pos) | (uint64_t)p.last << 63;
        int t = (next_pair >> (4 * (group & 1))) & 15;
        if ((group & 1) && group + 1 < h.n_sel)
            next_pair = sel[(group + 1) / 2];
        /* the bytes a few windows on, into L1 while this group is chased (one warp asks) */
        uint64_t ahead = (start + p.pos) / 8 + kDecChaseAhead * (uint64_t)(me + 1);
        if (me < 32 && ahead < job.len)
            asm volatile("prefetch.global.L1 [%0];" ::"l"(job.in + ahead));
        uint32_t from = p.pos, r = kChaseStop;
        if (p.pos + w <= end_rel)
            r = chase_group<kThreads>(job, start, p, s.tab, t, eob, w, s.chase, me);
        if (r == kChaseOut && p.pos + kChaseMax <= end_rel)
            r = chase_group<kThreads>(job, start, p, s.tab, t, eob, kChaseMax, s.chase, me);
        if (r) {
            CodesEnd c = walk_codes(job, start, p, s.tab, t, eob, done, end_rel, &overrun_at);
            if (c.e != kChaseStop)
                return WalkEnd{ start + p.pos, c.e, c.taken, overrun_at };
        }
        w = chase_window(p.pos - from);
        done += BZ2_GROUP_SIZE;
    }
}

/* The block's header up to its symbols (warp 0): CRC, origPtr, map,
 * selectors, lengths, and the tables built and copied out. */
__device__ uint32_t read_header(BitIn &br, HuffSmem &s, uint8_t *sel, int lane, HuffTab *tab, DecCand &c,
                                Header &h)
{
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
        huff_copy_words(tab, &s.tab, sizeof(HuffTab), lane, 32);
    return e;
}

/* What the walk kernel reads and fills, per candidate ci. */
struct WalkArgs {
    const DecInput *jobs;
    const uint64_t *cand;
    const uint32_t *cand_job;
    uint32_t n;
    DecCand *res;
    uint8_t *sels;      /* kDecSelBytes each */
    HuffTab *tabs;      /* one each */
    DecHuffWalk *walks; /* one each */
    uint64_t *seg_bits; /* kDecMaxSegs each */
    unsigned long long *err_key;
};

/* What warp 0 read of the header, for the CTA's walk. */
struct WalkStart {
    Header h;
    uint64_t pos;
    uint32_t e;
};

/*
 * One CTA per candidate: warp 0 reads the header (its bit reader is the
 * warp's), the CTA walks, warp 0 writes the records.
 */
template <int kThreads>
__global__ void __launch_bounds__(kThreads) huff_walk(WalkArgs a)
{
    static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
    __shared__ HuffSmem s;
    __shared__ WalkStart ws;
    uint32_t ci = blockIdx.x;
    int me = (int)threadIdx.x, lane = me & 31;
    if (ci >= a.n)
        return;
    const DecInput job = a.jobs[a.cand_job[ci]]; /* reads stay inside the candidate's own job */
    uint8_t *sel = a.sels + (uint64_t)ci * kDecSelBytes;
    BitIn br{ job.in, job.len, 0, 0, 0, ~0ull, 0, 0, lane };
    DecCand c{};
    if (me < 32) {
        br.seek(a.cand[ci] + 48);
        Header h{};
        uint32_t e = read_header(br, s, sel, lane, a.tabs + ci, c, h);
        if (lane == 0)
            ws = WalkStart{ h, br.pos, e };
    }
    chase_sync<kThreads>();
    const WalkStart at = ws; /* in registers: the walk reads it every group */
    uint32_t e = at.e;
    DecHuffWalk w{};
    if (!e) {
        WalkEnd r = walk_groups<kThreads>(job, at.pos, s, sel, at.h, a.seg_bits + (uint64_t)ci * kDecMaxSegs, me);
        br.pos = r.pos;
        w.eob = (uint32_t)at.h.n_in_use + 1;
        w.n_sym = r.taken;
        w.overrun_at = r.overrun_at;
        w.n_seg = (w.n_sym + kDecSegGroups * BZ2_GROUP_SIZE - 1) / (kDecSegGroups * BZ2_GROUP_SIZE);
        e = r.e;
    }
    if (me >= 32)
        return;
    /* garbage read as zero bits past the end: call it what it is (as the CPU engine) */
    if (e && br.overrun())
        e = kDecTruncated;
    w.status = e;
    c.status = e;
    c.end_bit = br.pos;
    br.seek(br.pos);
    uint32_t wd[4];
    for (int k = 0; k < 4; k++)
        wd[k] = br.get(32);
    if (lane == 0) {
        for (int k = 0; k < 16; k++)
            c.tail[k] = (uint8_t)(wd[k / 4] >> (24 - 8 * (k % 4)));
        a.res[ci] = c;
        a.walks[ci] = w;
        a.err_key[ci] = ~0ull;
    }
}

/* The walk's threads per candidate: more where too few candidates fill the SMs (a lone block's
 * time is its groups' latencies). */
int walk_threads(uint32_t n, int *threads, gc_error *err)
{
    int sms = 0;
    int rc = device_sm_count(&sms, err);
    if (rc == GC_OK)
        *threads = n < (uint32_t)sms * kDecWalkFewBelow ? kDecWalkFewThreads : kDecWalkThreads;
    return rc;
}

} // namespace

int bz2_dec_huff(const DecInput *jobs, const uint64_t *cand, const uint32_t *cand_job, uint32_t n, DecScratch &s,
                 cudaStream_t st, gc_error *err)
{
    if (n == 0)
        return GC_OK;
    bz2_prof(st, nullptr, 0);
    WalkArgs a{ jobs, cand, cand_job, n, s.res, s.sel, s.tabs, s.hw, s.seg_bit, s.err_key };
    int threads = kDecWalkThreads;
    int rc = walk_threads(n, &threads, err);
    if (rc != GC_OK)
        return rc;
    if (threads == kDecWalkFewThreads)
        huff_walk<kDecWalkFewThreads><<<n, kDecWalkFewThreads, 0, st>>>(a);
    else
        huff_walk<kDecWalkThreads><<<n, kDecWalkThreads, 0, st>>>(a);
    GC_CUDA_LAUNCHED("huff_walk");
    bz2_prof(st, "dec_huff_walk", n);
    return bz2_dec_segments(jobs, cand_job, n, s, st, err);
}

} // namespace gcgpu
