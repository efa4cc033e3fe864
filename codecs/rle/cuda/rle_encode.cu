/*
 * rle_encode.cu - the rle encoder on the device (docs/FORMAT.md).
 *
 * The input is read whole once; the second pass reads only run symbols and
 * stored chunks that the first could not write in place:
 *   1. enc_analyze: per tile (<= 16 KiB of one chunk, one block), each warp
 *      summarises its 2 KiB on its own (no block barrier): run-head count,
 *      first/last head, longest run crossing thread cells, and the raw
 *      CRC32C, all from the same load; every thread keeps its cell's
 *      run-head mask for enc_emit (64/W bits per 64 bytes); incompressible
 *      2 KiB pieces are also written where an all-stored frame has them
 *      (spec_store), so random input is read only here.
 *   2. enc_chunks (one warp per chunk): folds the warp summaries into tiles
 *      and tiles into run count, longest run (-> len_width), stored/rle
 *      decision, record size and chunk CRC; gives every warp's 2 KiB its run
 *      base; writes the index entry.
 *   3. cub::DeviceScan over record sizes -> record offsets.
 *   4. enc_emit: per tile, the stored copy (16-byte stores, funnel-shifted
 *      from aligned loads; skipped where enc_analyze already wrote the bytes
 *      in place) or the symbols and run lengths of the tile's runs from the
 *      head masks (positions from a warp scan of head counts on the warp's
 *      base, written by each warp's lanes in turn, see emit_warp_runs; no
 *      block barrier); and the records' total size.
 * Thread roles: every block is 256 threads, each owning 64 contiguous bytes of
 * a 16 KiB window (see gpu_internal.cuh).
 */
#include <cub/device/device_scan.cuh>
#include <cuda/std/functional>

#include <algorithm>
#include <climits>

#include "crc32c_device.cuh"
#include "rle_encode_policy.cuh"
#include "rle_cell.cuh"

namespace gcgpu {

namespace {

struct EncK {
    const uint8_t *src;
    int64_t body_len;
    uint32_t cs, tl, tpc;
    uint64_t cc, ntiles;
    const CrcTables *tab;
    struct WarpSum *wsums; /* kWarps per tile, from enc_analyze */
    TileSum *tiles;
    uint32_t *warp_base; /* runs before each warp's 2 KiB in its chunk (kWarps per tile) */
    int32_t *warp_lastb; /* last head before each warp's 2 KiB in its chunk, or -1 */
    ChunkEnc *chunks;
    void *heads; /* every thread cell's run-head mask, from enc_analyze (HeadMask<W>) */
    uint32_t *index;
    const unsigned long long *rec_off;
    uint8_t *out_base;
    int64_t rec_start; /* records - out_base */
    bool spec;         /* speculative stored writes allowed (see spec_store) */
    unsigned long long *total;
};

struct Geo {
    uint64_t c;
    uint32_t j;
    int64_t cstart, cend, s, e, w0;
};

/* Tile ids fit 32 bits (2^32 tiles of 16 KiB would be 64 TiB): 32-bit
 * division here, not the 64-bit one, which is a long software routine. */
__device__ __forceinline__ Geo tile_geo(const EncK &k, uint32_t id)
{
    Geo g;
    g.c = id / k.tpc;
    g.j = id - (uint32_t)g.c * k.tpc;
    g.cstart = (int64_t)g.c * k.cs;
    g.cend = min(g.cstart + (int64_t)k.cs, k.body_len);
    g.s = g.cstart + (int64_t)g.j * k.tl;
    g.e = min(g.s + (int64_t)k.tl, g.cend);
    g.w0 = g.s & ~(int64_t)15;
    return g;
}

/* Ordered summary of run heads over a stretch of a chunk. */
struct HeadSum {
    uint32_t count;
    int32_t first, last;
    uint32_t maxgap;
};

__device__ __forceinline__ HeadSum hs_identity()
{
    return HeadSum{ 0, INT_MAX, -1, 0 };
}

/* a followed by b: not commutative, keep the order. */
__device__ __forceinline__ HeadSum hs_combine(const HeadSum &a, const HeadSum &b)
{
    if (a.count == 0)
        return b;
    if (b.count == 0)
        return a;
    HeadSum r;
    r.count = a.count + b.count;
    r.first = a.first;
    r.last = b.last;
    r.maxgap = max(max(a.maxgap, b.maxgap), (uint32_t)(b.first - a.last));
    return r;
}

/* Ordered warp reduction of the lanes' summaries (lane order = stretch
 * order); result in every lane. Only the gaps between a lane's first head and
 * the last head of the lanes before it are new; the rest are plain sums,
 * minima and maxima (one redux instruction each). */
__device__ __forceinline__ HeadSum hs_warp_reduce(HeadSum v)
{
    const int lane = threadIdx.x & 31;
    int32_t before = v.last; /* becomes: last head of lanes < this one */
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int32_t t = __shfl_up_sync(0xffffffffu, before, o);
        if (lane >= o)
            before = max(before, t);
    }
    before = __shfl_up_sync(0xffffffffu, before, 1);
    uint32_t gap = v.maxgap;
    if (lane > 0 && v.count && before >= 0)
        gap = max(gap, (uint32_t)(v.first - before));
    HeadSum r;
    r.count = __reduce_add_sync(0xffffffffu, v.count);
    r.first = __reduce_min_sync(0xffffffffu, v.first);
    r.last = __reduce_max_sync(0xffffffffu, v.last);
    r.maxgap = __reduce_max_sync(0xffffffffu, gap);
    return r;
}

/* One warp's 2 KiB of a tile, written by enc_analyze: warps summarise their
 * own bytes and never wait for each other; enc_chunks folds a tile's kWarps
 * summaries in order (fold_warps). */
struct WarpSum {
    HeadSum hs;
    uint32_t crc;  /* raw CRC of the warp's bytes, as if they ended its 2 KiB */
    uint32_t spec; /* 1: spec_store wrote them (or the warp holds no bytes) */
};

/* A cell's run-head mask (one bit per element), as enc_analyze hands it to
 * enc_emit: emit then neither reads the input cell again nor recomputes
 * the mask (it reads 64/W bits instead of 64 bytes). */
template <int W>
struct HeadMask;
template <>
struct HeadMask<1> {
    using T = unsigned long long;
};
template <>
struct HeadMask<2> {
    using T = uint32_t;
};
template <>
struct HeadMask<4> {
    using T = uint16_t;
};
template <>
struct HeadMask<8> {
    using T = uint8_t;
};

template <int W>
__device__ __forceinline__ typename HeadMask<W>::T *head_masks(const EncK &k)
{
    return static_cast<typename HeadMask<W>::T *>(k.heads);
}

/* Word(s) just before cell offset a (zero when a == 0): the previous
 * lane's last words (its cell is the 64 bytes before a); lane 0 loads
 * them. Called by whole warps. */
template <int W>
__device__ __forceinline__ void prev_words(const uint8_t *src, int64_t a, int64_t limit, const uint32_t w[16],
                                           uint32_t &pw, uint32_t &pw2)
{
    uint32_t p14 = __shfl_up_sync(0xffffffffu, w[14], 1), p15 = __shfl_up_sync(0xffffffffu, w[15], 1);
    if ((threadIdx.x & 31) == 0) {
        p14 = p15 = 0;
        if (a > 0 && a <= limit) {
            uint2 v = __ldg(reinterpret_cast<const uint2 *>(src + a - 8));
            p14 = v.x;
            p15 = v.y;
        }
    }
    pw = W == 8 ? p14 : p15;
    pw2 = p15;
}

/* A tile's geometry in 32 bits, from its window's start g.w0 (a tile lies
 * inside a chunk, under 2^26 bytes): 64-bit compares and selects per thread
 * cell were several percent of enc_analyze's instructions. */
struct TileRel {
    int32_t s, e; /* the tile's bytes [s, e) */
    int32_t w0c;  /* g.w0 - the chunk's start (-15..-1 when the chunk starts unaligned) */
};

__device__ __forceinline__ TileRel tile_rel(const Geo &g)
{
    return TileRel{ (int32_t)(g.s - g.w0), (int32_t)(g.e - g.w0), (int32_t)(g.w0 - g.cstart) };
}

/* Per-thread run heads of its cell (ar bytes into the tile's window, at a). */
template <int W>
__device__ __forceinline__ uint64_t cell_heads(const EncK &k, const TileRel &t, int64_t a, int32_t ar,
                                               const uint32_t w[16])
{
    uint32_t pw, pw2;
    prev_words<W>(k.src, a, k.body_len, w, pw, pw2);
    uint64_t hm = head_mask<W>(w, pw, pw2);
    const int32_t cr = -t.w0c - ar; /* the chunk's first byte, from the cell */
    if (cr >= 0 && cr < 64)
        hm |= 1ull << (cr / W);
    const int32_t lo = max(t.s - ar, 0), hi = min(t.e - ar, 64);
    const uint64_t vm = hi > lo ? bit_range(lo / W, hi / W) : 0;
    return hm & vm;
}

/* The 64 bytes Q words before w's end: p's last Q words, then w's first
 * 16 - Q (o), and w's last Q words, then zeros (t). Q is a compile-time
 * constant so that w stays in registers. */
template <int Q>
__device__ __forceinline__ void words_back(const uint32_t p[3], const uint32_t w[16], uint32_t o[16],
                                           uint32_t t[16])
{
#pragma unroll
    for (int i = 0; i < 16; i++) {
        o[i] = i < Q ? p[3 - Q + i] : w[i - Q];
        t[i] = i < Q ? w[16 - Q + i] : 0;
    }
}

/*
 * Speculative stored payload. Incompressible input ends up as stored records,
 * which emit would otherwise copy in a second read of the input. A warp whose 2 KiB
 * has too many runs to shrink (runs * (W + 1) >= bytes) writes its bytes
 * while they are in registers, where an all-stored frame has them: record c
 * at c * (RLE_CHUNK_HEADER + cs). emit skips the copy of a tile whose warps all did so if
 * its chunk is stored and really sits there (every chunk before it stored);
 * otherwise it copies as before and the speculative bytes are overwritten or
 * lie past the frame's end, inside the caller's buffer (records_cap covers
 * the all-stored layout). Destinations are 4-byte aligned (checked at
 * launch), so each thread's 64 bytes shift by whole words into 16-byte
 * aligned stores, taking the words before them from the previous lane.
 * Called by whole warps.
 */
__device__ __forceinline__ void spec_store(const EncK &k, const Geo &g, const TileRel &t, int64_t a, int32_t ar,
                                           const uint32_t w[16])
{
    /* where the window's first byte goes; offsets from there in 32 bits */
    uint8_t *const dw =
        k.out_base + k.rec_start + (int64_t)g.c * (RLE_CHUNK_HEADER + (int64_t)k.cs) + RLE_CHUNK_HEADER + t.w0c;
    const uint32_t q = (uint32_t)((uintptr_t)(dw + ar) & 15) >> 2; /* the same for the whole tile */
    uint32_t p[3];
    p[0] = __shfl_up_sync(0xffffffffu, w[13], 1);
    p[1] = __shfl_up_sync(0xffffffffu, w[14], 1);
    p[2] = __shfl_up_sync(0xffffffffu, w[15], 1);
    if ((threadIdx.x & 31) == 0) {
        uint32_t v[4] = { 0, 0, 0, 0 };
        load_vec_guarded(k.src, a - 16, k.body_len, v);
        p[0] = v[1];
        p[1] = v[2];
        p[2] = v[3];
    }
    uint32_t o[16], tail[16];
    switch (q) {
    case 0: words_back<0>(p, w, o, tail); break;
    case 1: words_back<1>(p, w, o, tail); break;
    case 2: words_back<2>(p, w, o, tail); break;
    default: words_back<3>(p, w, o, tail); break;
    }
    const int32_t d0 = ar - 4 * (int32_t)q;
    store_cell(dw, d0, t.s, t.e, o);
    if (q && ar < t.e && ar + 64 >= t.e) /* the tile's last bytes: no next lane writes them */
        store_cell(dw, d0 + 64, t.s, t.e, tail);
}

template <int W>
__global__ void __launch_bounds__(kThreads, GC_ENC_MINB) enc_analyze(EncK k)
{
    const CrcSmem cs = load_crc_smem(dyn_smem, k.tab); /* kCrcSmemBytes */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    for (uint32_t id = blockIdx.x; id < k.ntiles; id += gridDim.x) {
        const Geo g = tile_geo(k, id);
        const TileRel t = tile_rel(g);
        const int32_t ar = kCell * (int32_t)threadIdx.x;
        const int64_t a = g.w0 + ar;
        uint32_t w[16];
        load_cell(k.src, a, k.body_len, w);
        uint64_t heads = cell_heads<W>(k, t, a, ar, w);
        HeadSum hs = hs_identity();
        if (heads) {
            const int32_t pos0 = (t.w0c + ar) / W; /* exact: the chunk starts at a multiple of W */
            hs.count = __popcll(heads);
            hs.first = pos0 + __ffsll((long long)heads) - 1;
            hs.last = pos0 + 63 - __clzll((long long)heads);
        }
        hs = hs_warp_reduce(hs);
        uint32_t spec = 0;
        bool store = false;
        if (k.spec) {
            const int32_t wlo = max(t.s, kCell * 32 * warp), whi = min(t.e, kCell * 32 * (warp + 1));
            spec = whi <= wlo || (int32_t)hs.count * (W + 1) >= whi - wlo;
            store = spec && whi > wlo;
        }
        /* a speculatively stored warp's chunk is almost always stored: emit
         * recomputes its masks if not (the mask's last use comes first here,
         * so that it is not held in a register through spec_store) */
        if (!spec)
            head_masks<W>(k)[(uint64_t)id * kThreads + threadIdx.x] = (typename HeadMask<W>::T)heads;
        if (store)
            spec_store(k, g, t, a, ar, w);
        mask_cell_edges(w, t.s - ar, t.e - ar);
        uint32_t v = warp_crc(cs, w);
        v = __reduce_xor_sync(0xffffffffu, v); /* one redux, not five shuffles */
        if (lane == 0)
            k.wsums[(uint64_t)id * kWarps + warp] = WarpSum{ hs, v, spec };
    }
}

/*
 * A tile's summary from its warps', in order; wbase[w] / wlast[w]: runs and
 * last head (chunk-relative, -1: none) in the tile before warp w. The warp
 * CRCs move from their warp's end to the window's end by the constants
 * block_crc uses (CrcTables::wm).
 */
__device__ __forceinline__ TileSum fold_warps(const EncK &k, uint64_t tile, uint32_t wbase[kWarps],
                                              int32_t wlast[kWarps])
{
    HeadSum t = hs_identity();
    uint32_t crc = 0, spec = 1;
#pragma unroll
    for (int w = 0; w < kWarps; w++) {
        const WarpSum ws = k.wsums[tile * kWarps + w];
        wbase[w] = t.count;
        wlast[w] = t.last;
        t = hs_combine(t, ws.hs);
        if (ws.crc)
            crc ^= mul_nibbles(&k.tab->wm[w][0][0], ws.crc);
        spec &= ws.spec;
    }
    return TileSum{ t.count, t.first, t.last, t.maxgap, crc, spec };
}

/* One warp per chunk: combine the chunk's tiles. */
template <int W>
__global__ void __launch_bounds__(kThreads) enc_chunks(EncK k)
{
    const int lane = threadIdx.x & 31;
    const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x >> 5);
    for (uint64_t c = (uint64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); c < k.cc; c += warps) {
        int64_t cstart = (int64_t)c * k.cs;
        int64_t cend = min(cstart + (int64_t)k.cs, k.body_len);
        int64_t clen = cend - cstart;
        uint32_t nt = (uint32_t)((clen + k.tl - 1) / k.tl);
        uint64_t tid0 = c * k.tpc;
        int64_t ref = ((cstart + (int64_t)(nt - 1) * k.tl) & ~(int64_t)15) + kWin;
        uint32_t run_carry = 0;
        int32_t last_carry = -1;
        HeadSum agg = hs_identity();
        uint32_t acc = 0;
        for (uint32_t b = 0; b < nt; b += 32) {
            uint32_t j = b + lane;
            bool valid = j < nt;
            TileSum ts;
            uint32_t wbase[kWarps];
            int32_t wlast[kWarps];
            if (valid) {
                ts = fold_warps(k, tid0 + j, wbase, wlast);
                k.tiles[tid0 + j] = ts; /* enc_emit reads spec */
            } else {
                ts.count = 0;
                ts.first = INT_MAX;
                ts.last = -1;
                ts.maxgap = 0;
                ts.crcw = 0;
                ts.spec = 0;
            }
            uint32_t incl = ts.count;
            int32_t im = ts.last;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
                int32_t m = __shfl_up_sync(0xffffffffu, im, o);
                if (lane >= o) {
                    incl += v;
                    im = max(im, m);
                }
            }
            int32_t em = __shfl_up_sync(0xffffffffu, im, 1);
            if (lane == 0)
                em = -1;
            if (valid) {
                const uint32_t tbase = run_carry + incl - ts.count;
                const int32_t tlast = max(last_carry, em);
                const uint64_t w0 = (tid0 + j) * kWarps;
#pragma unroll
                for (int w = 0; w < kWarps; w++) {
                    k.warp_base[w0 + w] = tbase + wbase[w];
                    k.warp_lastb[w0 + w] = max(tlast, wlast[w]);
                }
            }
            HeadSum hs{ ts.count, ts.first, ts.last, ts.maxgap };
            hs = hs_warp_reduce(hs);
            agg = hs_combine(agg, hs);
            uint32_t contrib = 0;
            if (valid && ts.crcw) {
                int64_t wend = ((cstart + (int64_t)j * k.tl) & ~(int64_t)15) + kWin;
                contrib = mul_xpow8(k.tab, ts.crcw, (uint64_t)(ref - wend));
            }
            contrib = __reduce_xor_sync(0xffffffffu, contrib); /* one redux, not five shuffles */
            acc ^= contrib;
            run_carry += __shfl_sync(0xffffffffu, incl, 31);
            last_carry = max(last_carry, __shfl_sync(0xffffffffu, im, 31));
        }
        if (lane == 0) {
            uint64_t elems = (uint64_t)clen / W;
            uint64_t maxrun = max((uint64_t)agg.maxgap, elems - (uint64_t)agg.last);
            unsigned lw = maxrun - 1 <= 0xffu ? 1 : (maxrun - 1 <= 0xffffu ? 2 : 4);
            uint64_t rle_bytes = (uint64_t)agg.count * (W + lw);
            ChunkEnc ce;
            ce.runs = agg.count;
            ce.crc = crc_at_ref(k.tab, acc, (uint64_t)(ref - cend), (uint64_t)clen);
            ce.pad0 = ce.pad1 = 0;
            if (rle_bytes >= (uint64_t)clen) {
                ce.mode = RLE_MODE_STORED;
                ce.lw = 0;
                ce.rec_size = (uint32_t)(RLE_CHUNK_HEADER + clen);
            } else {
                ce.mode = RLE_MODE_RLE;
                ce.lw = (uint8_t)lw;
                ce.rec_size = (uint32_t)(RLE_CHUNK_HEADER + rle_bytes);
            }
            k.chunks[c] = ce;
            k.index[c] = ce.rec_size;
        }
    }
}

/* n little-endian bytes of v at p, any alignment (header fields, the odd
 * length outside emit's per-run loop; that loop uses put_bytes) */
__device__ __forceinline__ void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

template <int Q>
__device__ __forceinline__ uint4 shift_vec(const uint32_t a[8], uint32_t sh)
{
    return make_uint4(__funnelshift_r(a[Q], a[Q + 1], sh), __funnelshift_r(a[Q + 1], a[Q + 2], sh),
                      __funnelshift_r(a[Q + 2], a[Q + 3], sh), __funnelshift_r(a[Q + 3], a[Q + 4], sh));
}

/* The 16 source bytes at any offset sp: one or two aligned loads and a funnel
 * shift by sp % 16 (the same for a whole tile, so no divergence). */
__device__ __forceinline__ uint4 source_vec(const EncK &k, int64_t sp)
{
    int64_t a0 = sp & ~(int64_t)15;
    uint32_t r = (uint32_t)(sp - a0);
    uint32_t a[8];
    load_vec_guarded(k.src, a0, k.body_len, a);
    if (r == 0)
        return make_uint4(a[0], a[1], a[2], a[3]);
    load_vec_guarded(k.src, a0 + 16, k.body_len, a + 4);
    uint32_t sh = 8 * (r & 3);
    switch (r >> 2) {
    case 0: return shift_vec<0>(a, sh);
    case 1: return shift_vec<1>(a, sh);
    case 2: return shift_vec<2>(a, sh);
    default: return shift_vec<3>(a, sh);
    }
}

/* Stored record payload: copy src[s, e) (at most one tile) to
 * out_base[d0, d0 + e - s) with 16-byte aligned stores (coalesced across the
 * block). Every load of the thread is issued before its first store: one
 * vector at a time, the copy waited out a load latency per 16 bytes (Nsight
 * Compute: long-scoreboard stalls 12.5 cycles per instruction). */
__device__ __forceinline__ void stored_copy(const EncK &k, int64_t s, int64_t e, int64_t d0)
{
    constexpr int kVecs = kWin / (16 * kThreads) + 1; /* a tile plus the alignment slack */
    const int64_t d1 = d0 + (e - s), off = d0 - s;
    const int64_t v0 = (d0 & ~(int64_t)15) + 16 * (int64_t)threadIdx.x;
    uint4 o[kVecs];
#pragma unroll
    for (int i = 0; i < kVecs; i++) {
        int64_t v = v0 + 16 * kThreads * (int64_t)i;
        if (v >= d0 && v + 16 <= d1)
            o[i] = source_vec(k, v - off);
    }
#pragma unroll
    for (int i = 0; i < kVecs; i++) {
        int64_t v = v0 + 16 * kThreads * (int64_t)i;
        if (v >= d0 && v + 16 <= d1) {
            *reinterpret_cast<uint4 *>(k.out_base + v) = o[i];
        } else if (v < d1 && v + 16 > d0) {
            for (int64_t p = max(v, d0); p < min(v + 16, d1); p++)
                k.out_base[p] = k.src[p - off];
        }
    }
}

struct ScanPair {
    uint32_t count;
    int32_t last;
};

__device__ __forceinline__ ScanPair scan_op(const ScanPair &a, const ScanPair &b)
{
    return ScanPair{ a.count + b.count, max(a.last, b.last) };
}

/* Exclusive scan of the lanes' (head count, last head) in lane order, from seed. */
__device__ __forceinline__ ScanPair warp_scan_pairs(ScanPair mine, ScanPair seed)
{
    const int lane = threadIdx.x & 31;
    ScanPair incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        ScanPair t{ __shfl_up_sync(0xffffffffu, incl.count, o), __shfl_up_sync(0xffffffffu, incl.last, o) };
        if (lane >= o)
            incl = scan_op(t, incl);
    }
    ScanPair before{ __shfl_up_sync(0xffffffffu, incl.count, 1), __shfl_up_sync(0xffffffffu, incl.last, 1) };
    return lane ? scan_op(seed, before) : seed;
}

/* The W-byte element at p (W-aligned), read-only. */
template <int W>
__device__ __forceinline__ uint64_t load_symbol(const uint8_t *p)
{
    return W == 8   ? __ldg(reinterpret_cast<const unsigned long long *>(p))
           : W == 4 ? __ldg(reinterpret_cast<const uint32_t *>(p))
           : W == 2 ? __ldg(reinterpret_cast<const uint16_t *>(p))
                    : __ldg(p);
}

/* N little-endian bytes of v at p: one store when p is N-aligned (`aligned`,
 * warp-uniform), else byte by byte. */
template <int N>
__device__ __forceinline__ void put_bytes(uint8_t *p, uint64_t v, bool aligned)
{
    if (N == 1) {
        *p = (uint8_t)v;
    } else if (aligned) {
        if (N == 2)
            *reinterpret_cast<uint16_t *>(p) = (uint16_t)v;
        else if (N == 4)
            *reinterpret_cast<uint32_t *>(p) = (uint32_t)v;
        else
            *reinterpret_cast<unsigned long long *>(p) = v;
    } else {
#pragma unroll
        for (int i = 0; i < N; i++)
            p[i] = (uint8_t)(v >> (8 * i));
    }
}

/*
 * The symbols and lengths of a warp's runs, shared out evenly over its lanes.
 * Each lane lists its heads (tile-relative element positions) in the warp's
 * slice of shared memory; then lane l writes heads l, l + 32, ...: the
 * stores of one instruction go to consecutive runs, and every lane does the
 * same number of them. Each lane writing its own heads straight out cost one
 * loop turn per head of the lane with the most (a third more than the mean
 * on short runs) and scattered byte stores.
 *   wbase, wprev: runs before the warp in its chunk, and the chunk-relative
 *   position of the last head before it (-1: none); tw0: chunk-relative
 *   element index of the tile window's start. LW is the record's len_width:
 *   a compile-time width, and run offsets within the warp in 32 bits, keep
 *   the per-run loop short (it runs once per run: 128M times per GiB of
 *   short runs).
 */
template <int W, int LW>
__device__ __forceinline__ void emit_warp_runs(const EncK &k, const Geo &g, uint16_t *list, uint64_t heads,
                                               int32_t pos0, uint32_t mine_off, uint32_t wbase, uint32_t n_warp,
                                               int32_t wprev, int32_t tw0, uint8_t *sym, uint8_t *len)
{
    /* by 32-bit halves: a 64-bit find-first-set and clear cost twice the
     * instructions, once per head */
    uint16_t *out = list + mine_off;
    const int first = pos0 - tw0;
    for (uint32_t m = (uint32_t)heads; m; m &= m - 1)
        *out++ = (uint16_t)(first + __ffs((int)m) - 1);
    for (uint32_t m = (uint32_t)(heads >> 32); m; m &= m - 1)
        *out++ = (uint16_t)(first + 31 + __ffs((int)m));
    __syncwarp();
    const uint8_t *base = k.src + g.cstart;
    uint8_t *wsym = sym + (uint64_t)wbase * W;       /* the warp's first symbol */
    uint8_t *wlen = len + ((int64_t)wbase - 1) * LW; /* the length of the run before it */
    const bool sym_aligned = ((uintptr_t)wsym & (W - 1)) == 0;
    const bool len_aligned = ((uintptr_t)wlen & (LW - 1)) == 0;
    /* run j of the warp: its symbol v (at element pos) and the length of the run before it */
    auto put_run = [&](uint32_t j, int32_t pos, uint64_t v) {
        const int32_t prev = j ? tw0 + list[j - 1] : wprev;
        put_bytes<W>(wsym + j * W, v, sym_aligned);
        if (prev >= 0)
            put_bytes<LW>(wlen + j * LW, (uint32_t)(pos - prev - 1), len_aligned);
    };
    uint32_t j = threadIdx.x & 31;
    if (W > 2) {
        /* Wide elements: fewer, longer runs per 64 bytes, where the pipelined
         * loop below measured slower (docs/history/BENCHMARKS-2026-11.md). */
        for (; j < n_warp; j += 32) {
            const int32_t pos = tw0 + list[j];
            put_run(j, pos, load_symbol<W>(base + pos * W));
        }
    } else {
        /* Software-pipelined: the symbol of the lane's next run is loaded
         * before the current one is stored, so a store does not wait out a
         * whole load, the largest of enc_emit's stalls on short runs of
         * narrow elements (docs/history/BENCHMARKS-2026-11.md). */
        int32_t pos = j < n_warp ? tw0 + list[j] : 0;
        uint64_t v = j < n_warp ? load_symbol<W>(base + pos * W) : 0;
        while (j < n_warp) {
            const uint32_t jn = j + 32;
            const int32_t pos_next = jn < n_warp ? tw0 + list[jn] : 0;
            const uint64_t v_next = jn < n_warp ? load_symbol<W>(base + pos_next * W) : 0;
            put_run(j, pos, v);
            j = jn;
            pos = pos_next;
            v = v_next;
        }
    }
    __syncwarp(); /* the list is rewritten for the next tile */
}

template <int W>
__global__ void __launch_bounds__(kThreads, GC_EMIT_MINB) enc_emit(EncK k)
{
    __shared__ uint16_t heads_list[kThreads / 32][32 * Elem<W>::N];
    if (blockIdx.x == 0 && threadIdx.x == 0) /* the records' total size, known since the scan */
        *k.total = k.rec_off[k.cc - 1] + k.index[k.cc - 1];
    for (uint32_t id = blockIdx.x; id < k.ntiles; id += gridDim.x) {
        Geo g = tile_geo(k, id);
        ChunkEnc ce = k.chunks[g.c];
        int64_t rec = k.rec_start + (int64_t)k.rec_off[g.c];
        if (g.j == 0 && threadIdx.x == 0) {
            uint8_t *h = k.out_base + rec;
            h[RLE_REC_MODE_OFFSET] = ce.mode;
            h[RLE_REC_LEN_WIDTH_OFFSET] = ce.lw;
            h[RLE_REC_RESERVED_OFFSET] = 0;
            h[RLE_REC_RESERVED_OFFSET + 1] = 0;
            put_le(h + RLE_REC_RUN_COUNT_OFFSET, ce.mode != RLE_MODE_STORED ? ce.runs : 0, 4);
            put_le(h + RLE_REC_CRC_OFFSET, ce.crc, 4);
        }
        if (ce.mode == RLE_MODE_STORED) {
            const bool in_place =
                k.spec && k.tiles[id].spec &&
                k.rec_off[g.c] == (unsigned long long)g.c * (RLE_CHUNK_HEADER + (unsigned long long)k.cs);
            if (!in_place)
                stored_copy(k, g.s, g.e, rec + RLE_CHUNK_HEADER + (g.s - g.cstart));
            continue;
        }
        int64_t a = g.w0 + (int64_t)kCell * threadIdx.x;
        const uint64_t wi = (uint64_t)id * kWarps + (threadIdx.x >> 5);
        /* both loads at once: the mask is garbage where spec says so */
        uint64_t heads = head_masks<W>(k)[(uint64_t)id * kThreads + threadIdx.x];
        if (k.wsums[wi].spec) { /* enc_analyze kept no mask for this warp (see there) */
            uint32_t w[16];
            load_cell(k.src, a, k.body_len, w);
            heads = cell_heads<W>(k, tile_rel(g), a, (int32_t)(a - g.w0), w);
        }
        int32_t pos0 = (int32_t)((a - g.cstart) / W);
        ScanPair mine{ (uint32_t)__popcll(heads), heads ? pos0 + 63 - __clzll((long long)heads) : -1 };
        const ScanPair pre = warp_scan_pairs(mine, ScanPair{ k.warp_base[wi], k.warp_lastb[wi] });
        uint8_t *sym = k.out_base + rec + RLE_CHUNK_HEADER;
        uint8_t *len = sym + (uint64_t)ce.runs * W;
        const uint32_t wbase = __shfl_sync(0xffffffffu, pre.count, 0);
        const int32_t wprev = __shfl_sync(0xffffffffu, pre.last, 0);
        const uint32_t n_warp = __shfl_sync(0xffffffffu, pre.count + mine.count, 31) - wbase;
        const int32_t tw0 = (int32_t)((g.w0 - g.cstart) / W);
        /* Runs shorter than 16 bytes on average: nearly every line of the
         * input holds a symbol to load, and each turn of the run loop would
         * wait on memory for them; start bringing the lines in now. */
        if (n_warp * 16 > (uint32_t)kCell * 32 && a >= 0 && a < k.body_len)
            asm volatile("prefetch.L1 [%0];" ::"l"(k.src + a));
        uint16_t *list = heads_list[threadIdx.x >> 5];
        const uint32_t mine_off = pre.count - wbase;
        if (ce.lw == 1)
            emit_warp_runs<W, 1>(k, g, list, heads, pos0, mine_off, wbase, n_warp, wprev, tw0, sym, len);
        else if (ce.lw == 2)
            emit_warp_runs<W, 2>(k, g, list, heads, pos0, mine_off, wbase, n_warp, wprev, tw0, sym, len);
        else
            emit_warp_runs<W, 4>(k, g, list, heads, pos0, mine_off, wbase, n_warp, wprev, tw0, sym, len);
        /* the chunk's last element closes its last run (it lies in the chunk's last tile) */
        const int64_t le = g.cend - W;
        if (le >= a && le < a + 64 && le >= g.s && le < g.e) {
            const int32_t prev = mine.count ? mine.last : pre.last;
            put_le(len + (uint64_t)(pre.count + mine.count - 1) * ce.lw,
                   (uint32_t)((int32_t)((le - g.cstart) / W) - prev), ce.lw);
        }
    }
}

/* Header CRC: per-window raw CRCs, then one block combines them (crc_finish);
 * a header of one window (up to about 4000 chunks) gets its CRC here, one
 * launch fewer. */
__global__ void __launch_bounds__(kThreads)
    crc_windows(uint8_t *buf, int64_t len, const CrcTables *tab, uint32_t *part)
{
    __shared__ uint32_t red_words[64];
    BlockRed red{ red_words, 0 };
    const CrcSmem cs = load_crc_smem(dyn_smem, tab); /* kCrcSmemBytes */
    const uint32_t *wk = warp_shift_table(tab);
    __syncthreads();
    int64_t nwin = (len + kWin - 1) / kWin;
    for (int64_t wi = blockIdx.x; wi < nwin; wi += gridDim.x) {
        int64_t a = wi * kWin + (int64_t)kCell * threadIdx.x;
        uint32_t w[16];
        load_cell(buf, a, len, w);
        uint32_t c = window_crc(cs, w, red, wk);
        if (threadIdx.x == 0 && nwin == 1)
            *reinterpret_cast<uint32_t *>(buf + len) = crc_at_ref(tab, c, (uint64_t)(kWin - len), (uint64_t)len);
        else if (threadIdx.x == 0)
            part[wi] = c;
    }
}

__global__ void __launch_bounds__(kThreads)
    crc_finish(uint8_t *buf, int64_t len, const CrcTables *tab, const uint32_t *part)
{
    __shared__ uint32_t red_words[64];
    BlockRed red{ red_words, 0 };
    int64_t nwin = (len + kWin - 1) / kWin;
    int64_t ref = nwin * kWin;
    uint32_t acc = 0;
    for (int64_t i = threadIdx.x; i < nwin; i += blockDim.x)
        acc ^= mul_xpow8(tab, part[i], (uint64_t)(ref - (i + 1) * kWin));
    acc = block_xor(acc, red);
    if (threadIdx.x == 0) {
        uint32_t crc = crc_at_ref(tab, acc, (uint64_t)(ref - len), (uint64_t)len);
        *reinterpret_cast<uint32_t *>(buf + len) = crc;
    }
}

/* The fixed header of a device-resident frame (one thread; rle_format.h). */
__global__ void enc_header_fixed(uint8_t *f, const uint8_t *src, uint64_t src_len, unsigned width,
                                 uint32_t chunk_size, uint64_t cc)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    rle_header_write_fixed(f, width, chunk_size, src_len, (uint32_t)cc, src + src_len - src_len % width);
}

/* ---- host side ------------------------------------------------------------ */

size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

struct EncLayout {
    uint64_t cc, ntiles, nwin_hdr;
    uint32_t tl, tpc;
    size_t off_wsums, off_tiles, off_base, off_lastb, off_chunks, off_heads, off_recoff, off_part, off_total,
        off_cub, cub_bytes, total;
};

EncLayout enc_layout(uint64_t body_len, unsigned width, uint32_t cs)
{
    EncLayout L;
    L.cc = (body_len + cs - 1) / cs;
    L.tl = tile_len_for(cs);
    L.tpc = (cs + L.tl - 1) / L.tl;
    L.ntiles = 0;
    if (L.cc) {
        uint64_t last = body_len - (L.cc - 1) * cs;
        L.ntiles = (L.cc - 1) * L.tpc + (last + L.tl - 1) / L.tl;
    }
    L.nwin_hdr = (rle_header_crc_offset(L.cc) + kWin - 1) / kWin;
    size_t o = 0;
    L.off_wsums = o;
    o = align_up(o + L.ntiles * kWarps * sizeof(WarpSum), 256);
    L.off_tiles = o;
    o = align_up(o + L.ntiles * sizeof(TileSum), 256);
    L.off_base = o;
    o = align_up(o + L.ntiles * kWarps * 4, 256);
    L.off_lastb = o;
    o = align_up(o + L.ntiles * kWarps * 4, 256);
    L.off_chunks = o;
    o = align_up(o + L.cc * sizeof(ChunkEnc), 256);
    const size_t mask_bytes = width == 1 || width == 2 || width == 4 || width == 8 ? 8 / width : 8;
    L.off_heads = o;
    o = align_up(o + L.ntiles * kThreads * mask_bytes, 256); /* HeadMask<width> */
    L.off_recoff = o;
    o = align_up(o + L.cc * 8, 256);
    L.off_part = o;
    o = align_up(o + L.nwin_hdr * 4, 256);
    L.off_total = o;
    o = align_up(o + 8, 256);
    L.off_cub = o;
    /* cub's single-pass scan: a few words per 1-2K items; checked at run time */
    L.cub_bytes = align_up(64 * 1024 + L.cc * 2, 256);
    o += L.cub_bytes;
    L.total = o;
    return L;
}

} // namespace

size_t enc_scratch_bytes(uint64_t body_len, unsigned width, uint32_t chunk_size)
{
    return enc_layout(body_len, width, chunk_size).total;
}

template <int W>
static int enc_launch_w(const EncK &k, const EncLayout &L, uint8_t *scr, cudaStream_t st, gc_error *err)
{
    int grid_tiles = 0, grid_emit = 0;
    int rc = resident_grid(enc_analyze<W>, kCrcSmemBytes, k.ntiles, &grid_tiles, err);
    if (rc == GC_OK)
        rc = resident_grid(enc_emit<W>, 0, k.ntiles, &grid_emit, err);
    if (rc != GC_OK)
        return rc;
    enc_analyze<W><<<grid_tiles, kThreads, kCrcSmemBytes, st>>>(k);
    GC_CUDA_LAUNCHED("enc_analyze");
    int sms = 0;
    rc = device_sm_count(&sms, err);
    if (rc != GC_OK)
        return rc;
    int grid_chunks = (int)std::min<uint64_t>((k.cc + kWarps - 1) / kWarps, (uint64_t)sms * kEncChunkBlocksPerSm);
    if (grid_chunks < 1)
        grid_chunks = 1;
    enc_chunks<W><<<grid_chunks, kThreads, 0, st>>>(k);
    GC_CUDA_LAUNCHED("enc_chunks");
    size_t need = 0;
    GC_CUDA(cub::DeviceScan::ExclusiveScan(nullptr, need, k.index, (unsigned long long *)k.rec_off,
                                           ::cuda::std::plus<>{}, 0ull, (int64_t)k.cc, st));
    if (need > L.cub_bytes)
        return gc_fail(err, GC_E_INTERNAL, "gpu rle: scan needs %zu bytes of scratch, %zu reserved", need,
                       L.cub_bytes);
    size_t have = L.cub_bytes;
    GC_CUDA(cub::DeviceScan::ExclusiveScan(scr + L.off_cub, have, k.index, (unsigned long long *)k.rec_off,
                                           ::cuda::std::plus<>{}, 0ull, (int64_t)k.cc, st));
    enc_emit<W><<<grid_emit, kThreads, 0, st>>>(k);
    GC_CUDA_LAUNCHED("enc_emit");
    return GC_OK;
}

int enc_launch(const EncParams &p, const CrcTables *d_tab, void *scratch, size_t scratch_len, cudaStream_t stream,
               unsigned long long **d_total, gc_error *err)
{
    EncLayout L = enc_layout(p.body_len, p.width, p.chunk_size);
    if (scratch_len < L.total)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: encode needs %zu bytes of device scratch, %zu given", L.total,
                       scratch_len);
    if (L.ntiles > UINT32_MAX)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: %llu bytes is more than one encode takes",
                       (unsigned long long)p.body_len);
    if (((uintptr_t)p.src & 15) || ((uintptr_t)p.out_base & 15) || ((uintptr_t)p.index & 3))
        return gc_fail(err, GC_E_INVALID, "gpu rle: device buffers must be 16-byte aligned");
    uint8_t *scr = (uint8_t *)scratch;
    EncK k;
    k.src = p.src;
    k.body_len = (int64_t)p.body_len;
    k.cs = p.chunk_size;
    k.tl = L.tl;
    k.tpc = L.tpc;
    k.cc = L.cc;
    k.ntiles = L.ntiles;
    k.tab = d_tab;
    k.wsums = (WarpSum *)(scr + L.off_wsums);
    k.tiles = (TileSum *)(scr + L.off_tiles);
    k.warp_base = (uint32_t *)(scr + L.off_base);
    k.warp_lastb = (int32_t *)(scr + L.off_lastb);
    k.chunks = (ChunkEnc *)(scr + L.off_chunks);
    k.heads = scr + L.off_heads;
    k.index = p.index;
    k.rec_off = (unsigned long long *)(scr + L.off_recoff);
    k.out_base = p.out_base;
    k.rec_start = p.records - p.out_base;
    k.spec =
        p.records_cap >= p.body_len + RLE_CHUNK_HEADER * L.cc && p.chunk_size % 16 == 0 && k.rec_start % 4 == 0;
    k.total = (unsigned long long *)(scr + L.off_total);
    *d_total = k.total;
    if (L.cc == 0) {
        GC_CUDA(cudaMemsetAsync(k.total, 0, 8, stream));
        return GC_OK;
    }
    switch (p.width) {
    case 1: return enc_launch_w<1>(k, L, scr, stream, err);
    case 2: return enc_launch_w<2>(k, L, scr, stream, err);
    case 4: return enc_launch_w<4>(k, L, scr, stream, err);
    case 8: return enc_launch_w<8>(k, L, scr, stream, err);
    default: return gc_fail(err, GC_E_INVALID, "gpu rle: width %u is not 1, 2, 4 or 8", p.width);
    }
}

int enc_frame_header(uint8_t *d_frame, const uint8_t *d_src, uint64_t src_len, unsigned width, uint32_t chunk_size,
                     uint64_t chunk_count, const CrcTables *d_tab, void *scratch, size_t scratch_len,
                     cudaStream_t stream, gc_error *err)
{
    EncLayout L = enc_layout(src_len - src_len % width, width, chunk_size);
    if (scratch_len < L.total)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: header needs %zu bytes of scratch", L.total);
    uint32_t *part = (uint32_t *)((uint8_t *)scratch + L.off_part);
    enc_header_fixed<<<1, 32, 0, stream>>>(d_frame, d_src, src_len, width, chunk_size, chunk_count);
    GC_CUDA_LAUNCHED("enc_header_fixed");
    const int64_t hlen = (int64_t)rle_header_crc_offset(chunk_count), nwin = (hlen + kWin - 1) / kWin;
    int grid = 0;
    int rc = resident_grid(crc_windows, kCrcSmemBytes, (uint64_t)nwin, &grid, err);
    if (rc != GC_OK)
        return rc;
    crc_windows<<<grid, kThreads, kCrcSmemBytes, stream>>>(d_frame, hlen, d_tab, part);
    GC_CUDA_LAUNCHED("crc_windows");
    if (nwin > 1) { /* else crc_windows wrote the CRC */
        crc_finish<<<1, kThreads, 0, stream>>>(d_frame, hlen, d_tab, part);
        GC_CUDA_LAUNCHED("crc_finish");
    }
    return GC_OK;
}

} // namespace gcgpu
