/*
 * bz2_dec_seg.cu - the Huffman stage's segment passes (bz2_dec_huff.cuh
 * says how the stage is split): one thread per segment of kDecSegGroups
 * symbol groups decodes its codes, RUNA/RUNB runs and inverse MTF.
 *
 *   count  from the identity MTF list: the bytes the segment writes and the
 *          list it ends with, a permutation of the one it starts with;
 *   scan   one warp per candidate composes the permutations from the symbol
 *          map on: each segment's true first list and output offset;
 *   write  again from the true list, the bytes at their offsets;
 *   settle one thread per candidate: the first error by symbol among the
 *          walk's and the passes', and the column's length.
 *
 * A run belongs to the segment of its first digit: a segment whose range
 * ends inside a run decodes on into the next until the run ends; one that
 * starts inside a run (the walk marks it) skips those digits.
 */
#include "bz2_dec_huff.cuh"

namespace gcgpu {
namespace {

constexpr uint32_t kSegSymbols = kDecSegGroups * BZ2_GROUP_SIZE;
constexpr uint64_t kRunOn = 1ull << 63; /* seg_bit: a run goes on into the segment */

/* One thread's MTF list in shared memory, four entries a word (entry 4w + k
 * in bits 8k .. 8k + 7 of word w); a thread's words are kDecSegThreads
 * apart, so threads touching the same word index hit different banks. */
struct SegList {
    uint32_t *w;

    __device__ uint32_t get(int k) const
    {
        return w[k * kDecSegThreads];
    }
    __device__ void set(int k, uint32_t v)
    {
        w[k * kDecSegThreads] = v;
    }
    __device__ void identity()
    {
        for (int k = 0; k < 64; k++)
            set(k, (uint32_t)(4 * k) * 0x01010101u + 0x03020100u);
    }
    __device__ void load(const uint8_t *src)
    {
        for (int k = 0; k < 64; k++)
            set(k, reinterpret_cast<const uint32_t *>(src)[k]);
    }
    __device__ void store(uint8_t *dst) const
    {
        for (int k = 0; k < 64; k++)
            reinterpret_cast<uint32_t *>(dst)[k] = get(k);
    }
    __device__ uint8_t front() const
    {
        return (uint8_t)get(0);
    }
    /* entry j, moved to the front */
    __device__ uint32_t take(uint32_t j)
    {
        int wj = (int)(j >> 2), bj = (int)(j & 3);
        uint32_t wv = get(wj);
        uint32_t v = (wv >> (8 * bj)) & 0xffu;
        uint32_t carry = wj ? get(wj - 1) >> 24 : v;
        uint32_t keep = bj == 3 ? 0u : ~0u << (8 * (bj + 1));
        set(wj, (wv & keep) | ((wv << 8 | carry) & ~keep));
        for (int k = wj - 1; k > 0; k--)
            set(k, get(k) << 8 | get(k - 1) >> 24);
        if (wj > 0)
            set(0, get(0) << 8 | v);
        return v;
    }
};

__device__ void fill_run(uint8_t *d, uint8_t b, uint32_t n)
{
    for (; n && ((uintptr_t)d & 15); n--)
        *d++ = b;
    uint32_t x = b * 0x01010101u;
    for (; n >= 16; n -= 16, d += 16)
        *reinterpret_cast<uint4 *>(d) = make_uint4(x, x, x, x);
    for (; n; n--)
        *d++ = b;
}

__device__ void report(unsigned long long *key, uint32_t sym, uint32_t e)
{
    atomicMin(key, (unsigned long long)sym << 8 | e);
}

/* What one segment's thread decodes. */
struct Segment {
    uint32_t lo, hi; /* its symbols */
    uint32_t n_sym;  /* the candidate's: never decode past them */
    uint32_t eob;
    bool run_on; /* it starts inside a run of the segment before */
};

/* Decode seg from rd with list; with kWrite the bytes go to col + off
 * (never at or past BZ2_MAX_BLOCK). The checks and their order are the
 * CPU engine's; errors go to key. Returns the bytes the segment writes. */
template <bool kWrite>
__device__ uint32_t decode_segment(const HuffTab &tab, const uint8_t *sel, HuffBits &rd, SegList &list,
                                   const Segment &seg, uint8_t *col, uint32_t off, unsigned long long *key)
{
    uint32_t count = 0, run = 0, weight = 1;
    bool skipping = seg.run_on;
    int t = 0;
    for (uint32_t i = seg.lo; i < seg.n_sym; i++) {
        if (i >= seg.hi && run == 0)
            break;
        if (i == seg.lo || i % BZ2_GROUP_SIZE == 0)
            t = huff_table_of(sel, i / BZ2_GROUP_SIZE);
        uint32_t code = huff_code_at(tab, t, rd.peek(BZ2_MAX_CODE_LEN_DEC));
        rd.pos += code & 0xff;
        uint32_t sym = code >> 8;
        if (sym <= 1) {
            if (skipping)
                continue;
            run += weight << sym;
            weight <<= 1;
            if (run > BZ2_MAX_BLOCK) {
                report(key, i, kDecRunLong);
                break;
            }
            continue;
        }
        skipping = false;
        if (run) {
            if (off + count + run > BZ2_MAX_BLOCK) {
                report(key, i, kDecBlockLong);
                break;
            }
            if (kWrite)
                fill_run(col + off + count, list.front(), run);
            count += run;
            run = 0;
            weight = 1;
        }
        if (i >= seg.hi || sym == seg.eob)
            break;
        uint32_t v = list.take(sym - 1);
        if (off + count >= BZ2_MAX_BLOCK) {
            report(key, i, kDecBlockLong);
            break;
        }
        if (kWrite)
            col[off + count] = (uint8_t)v;
        count++;
    }
    return count;
}

struct PassArgs {
    const DecInput *jobs;
    const uint32_t *cand_job;
    const uint8_t *sels;
    const HuffTab *tabs;
    const DecHuffWalk *walks;
    const uint64_t *seg_bit;
    uint32_t *seg_count;
    const uint32_t *seg_off;
    uint8_t *seg_list;
    uint8_t *cols;
    unsigned long long *err_key;
};

/* count (kWrite false) or write: one thread per segment, blockIdx.y the candidate. */
template <bool kWrite>
__global__ void __launch_bounds__(kDecSegThreads) seg_pass(PassArgs a)
{
    __shared__ HuffTab tab;
    __shared__ uint32_t words[64 * kDecSegThreads];
    uint32_t ci = blockIdx.y;
    const DecHuffWalk w = a.walks[ci];
    uint32_t sg = blockIdx.x * kDecSegThreads + threadIdx.x;
    if (blockIdx.x * kDecSegThreads >= w.n_seg)
        return; /* the whole CTA */
    huff_copy_words(&tab, a.tabs + ci, sizeof(HuffTab), (int)threadIdx.x, kDecSegThreads);
    __syncthreads();
    if (sg >= w.n_seg)
        return;
    uint64_t k = (uint64_t)ci * kDecMaxSegs + sg;
    SegList list{ words + threadIdx.x };
    if (kWrite)
        list.load(a.seg_list + k * 256);
    else
        list.identity();
    const DecInput job = a.jobs[a.cand_job[ci]];
    HuffBits rd{ job.in, job.len, 0, 0, 0, 0 };
    uint64_t b = a.seg_bit[k];
    rd.seek(b & ~kRunOn);
    Segment seg{ sg * kSegSymbols, min((sg + 1) * kSegSymbols, w.n_sym), w.n_sym, w.eob, (b & kRunOn) != 0 };
    const uint8_t *sel = a.sels + (uint64_t)ci * kDecSelBytes;
    if (kWrite) {
        decode_segment<true>(tab, sel, rd, list, seg, a.cols + (uint64_t)ci * BZ2_MAX_BLOCK, a.seg_off[k],
                             a.err_key + ci);
    } else {
        a.seg_count[k] = decode_segment<false>(tab, sel, rd, list, seg, nullptr, 0, a.err_key + ci);
        list.store(a.seg_list + k * 256);
    }
}

/* One warp per candidate: each segment's first list and offset, in place
 * of its permutation; the column's length. */
__global__ void __launch_bounds__(32) seg_scan(const HuffTab *tabs, DecHuffWalk *walks, const uint32_t *seg_count,
                                               uint32_t *seg_off, uint8_t *seg_list)
{
    __shared__ uint8_t cur[256];
    uint32_t ci = blockIdx.x;
    int lane = (int)threadIdx.x;
    uint32_t n_seg = walks[ci].n_seg;
    uint64_t base = (uint64_t)ci * kDecMaxSegs;
    for (int k = lane; k < 256; k += 32)
        cur[k] = tabs[ci].seq[k];
    __syncwarp();
    uint32_t off = 0;
    uint2 next = n_seg ? reinterpret_cast<const uint2 *>(seg_list + base * 256)[lane] : uint2{};
    for (uint32_t sg = 0; sg < n_seg; sg++) {
        uint2 perm = next;
        uint8_t *slot = seg_list + (base + sg) * 256;
        if (sg + 1 < n_seg)
            next = reinterpret_cast<const uint2 *>(slot + 256)[lane];
        reinterpret_cast<uint2 *>(slot)[lane] = reinterpret_cast<const uint2 *>(cur)[lane];
        if (lane == 0)
            seg_off[base + sg] = off;
        off += seg_count[base + sg];
        uint32_t lo = 0, hi = 0;
        for (int k = 0; k < 4; k++) {
            lo |= (uint32_t)cur[(perm.x >> (8 * k)) & 0xff] << (8 * k);
            hi |= (uint32_t)cur[(perm.y >> (8 * k)) & 0xff] << (8 * k);
        }
        __syncwarp();
        reinterpret_cast<uint2 *>(cur)[lane] = uint2{ lo, hi };
        __syncwarp();
    }
    if (lane == 0)
        walks[ci].total = off;
}

/* One thread per candidate: the first error by symbol wins; one at or
 * after the first symbol that ends past the input is truncation, as the
 * CPU engine calls it. */
__global__ void seg_settle(const DecHuffWalk *walks, const unsigned long long *err_key, DecCand *res, uint32_t n)
{
    uint32_t ci = blockIdx.x * blockDim.x + threadIdx.x;
    if (ci >= n)
        return;
    const DecHuffWalk w = walks[ci];
    if (w.n_seg == 0)
        return; /* the walk's verdict stands */
    uint32_t e = w.status;
    unsigned long long key = err_key[ci];
    if (key != ~0ull) {
        e = (uint32_t)(key & 0xff);
        if (w.overrun_at <= (uint32_t)(key >> 8))
            e = kDecTruncated;
    } else if (e == kDecOk && w.overrun_at != UINT32_MAX) {
        e = kDecTruncated;
    }
    DecCand &c = res[ci];
    if (e == kDecOk && c.orig >= w.total)
        e = kDecOrigPtr;
    c.status = e;
    c.n = e == kDecOk ? w.total : 0;
}

} // namespace

int bz2_dec_segments(const DecInput *jobs, const uint32_t *cand_job, uint32_t n, DecScratch &s, cudaStream_t st,
                     gc_error *err)
{
    PassArgs a{ jobs,        cand_job,  s.sel,      s.tabs, s.hw,     s.seg_bit,
                s.seg_count, s.seg_off, s.seg_list, s.cols, s.err_key };
    dim3 grid((kDecMaxSegs + kDecSegThreads - 1) / kDecSegThreads, n);
    seg_pass<false><<<grid, kDecSegThreads, 0, st>>>(a);
    GC_CUDA_LAUNCHED("seg_pass count");
    bz2_prof(st, "dec_seg_count", n);
    seg_scan<<<n, 32, 0, st>>>(s.tabs, s.hw, s.seg_count, s.seg_off, s.seg_list);
    GC_CUDA_LAUNCHED("seg_scan");
    bz2_prof(st, "dec_seg_scan", n);
    seg_pass<true><<<grid, kDecSegThreads, 0, st>>>(a);
    GC_CUDA_LAUNCHED("seg_pass write");
    bz2_prof(st, "dec_seg_write", n);
    seg_settle<<<(n + kDecThreads - 1) / kDecThreads, kDecThreads, 0, st>>>(s.hw, s.err_key, s.res, n);
    GC_CUDA_LAUNCHED("seg_settle");
    bz2_prof(st, "dec_seg_settle", n);
    return GC_OK;
}

} // namespace gcgpu
