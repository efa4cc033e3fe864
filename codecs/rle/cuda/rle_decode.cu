/*
 * rle_decode.cu - the rle decoder on the device, validating as it goes.
 *
 * The host has already checked the frame header, header CRC and that the
 * index entries add up to the records present (rle_frame_parse or, for the
 * batch pipeline, rle_frame_index_copy: the index the device gets is that
 * validated host copy). dec_check still checks each record against the end
 * of the records (the device-resident API's index is a separate read of the
 * caller's device memory), and every load of record bytes is bounded by
 * rec_len, so no index makes a kernel read outside the records. Then:
 *   1. cub scan of the index -> record offsets.
 *   2. dec_check (thread per chunk): record header against the index and the
 *      chunk length; work items per chunk (stored: 16 KiB output tiles; rle:
 *      run tiles of 64-4096 runs, see run_tile_for). A bad chunk
 *      gets a status word and no items.
 *   3. cub scan of item counts, dec_map: item -> chunk.
 *   4. dec_sum (warp per rle item): sum of its run lengths.
 *   5. dec_cscan (warp per chunk): run-tile start positions; the lengths must
 *      add up to the chunk's element count, else the chunk fails here and is
 *      never expanded (so no write can leave the chunk's output range).
 *   6. dec_expand (block per item): stored tiles are copied with funnel-shifted
 *      aligned loads; run tiles scan their lengths into shared memory, and
 *      each warp expands its own contiguous 2 KiB spans of the item's output,
 *      each lane filling 64 bytes from the span's run starts (expand_spans).
 *      Both compute the raw CRC of what they write in the same pass.
 *   7. dec_ccrc (warp per chunk): combine item CRCs, compare with the record.
 */
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/std/functional>

#include <algorithm>

#include "crc32c_device.cuh"
#include "rle_decode_policy.cuh"
#include "rle_cell.cuh"

namespace gcgpu {

namespace {

enum Check : uint32_t {
    CK_SHORT = 1,
    CK_RESERVED,
    CK_MODE,
    CK_STORED_FIELDS,
    CK_STORED_SIZE,
    CK_LW,
    CK_RUNS,
    CK_RLE_SIZE,
    CK_SUM,
    CK_CRC,
    CK_PAST_END,
};

struct ChunkDec {
    uint32_t runs;
    uint32_t crc;
    uint8_t mode, lw, pad0, pad1;
    uint32_t tile; /* rle: runs per item (run_tile_for) */
};

/*
 * Runs per work item of an rle chunk (kRunTileMin .. dec_run_tile<W>()). An item is
 * expanded in 2 KiB spans shared evenly by the block's 8 warps (a window of
 * 16 KiB per turn of all warps) after a setup (its lengths scanned, its
 * symbols staged) that costs about a window, so:
 *   - items of whole windows: 2048 runs of mean 8 bytes came to 16 KiB plus a
 *     few bytes half the time, a second window pass for them; such chunks
 *     get items a little under a whole number of windows (8 warps x n spans);
 *   - items of at most kItemBytes: a few items of hundreds of KiB per block
 *     (long runs) left SMs idle at the end;
 *   - but not small items where runs are long (each item pays its setup,
 *     which a few runs of long runs do not repay);
 *   - and items of two windows rather than one where runs are short (widths
 *     1 and 2 take up to 4096 runs, halving the setups per window).
 * At most `cap` items per chunk (the scratch layout's bound). The
 * measurements are in docs/history/BENCHMARKS-2026-11.md.
 */
template <int W>
__device__ __forceinline__ uint32_t run_tile_for(uint32_t runs, int64_t clen, uint32_t cap)
{
    constexpr uint64_t kMax = dec_run_tile<W>();
    const uint64_t n = (uint64_t)clen, full = kMax * n / runs; /* bytes of a full item */
    uint64_t target = full >= kWin ? full / kWin * kWin - kItemSlack : full;
    if (target > kItemBytes)
        target = kItemBytes;
    uint64_t rt = target * runs / n, least = ((uint64_t)runs + cap - 1) / cap;
    if (rt < least)
        rt = least;
    if (rt < kRunTileMin)
        rt = kRunTileMin;
    return rt < kMax ? (uint32_t)rt : (uint32_t)kMax;
}

struct DecK {
    const uint8_t *rec;
    int64_t rec_len;
    const uint32_t *index;
    const unsigned long long *rec_off; /* includes rec_shift */
    unsigned long long rec_shift;
    uint32_t cs, tl;
    uint64_t cc;
    uint32_t item_cap; /* work items a chunk may have */
    int64_t body_len;
    uint8_t *out;
    const CrcTables *tab;
    ChunkDec *chunks;
    uint32_t *status;
    uint32_t *items;
    uint32_t *item_base;
    uint32_t *n_items;
    uint32_t *item_chunk;
    unsigned long long *item_sum;
    unsigned long long *item_start;
    uint32_t *item_crc;
    long long *item_wend;
};

__device__ __forceinline__ uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

template <int W>
__global__ void dec_check(DecK k)
{
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < k.cc;
         c += (uint64_t)gridDim.x * blockDim.x) {
        int64_t cstart = (int64_t)c * k.cs;
        int64_t clen = min(cstart + (int64_t)k.cs, k.body_len) - cstart;
        uint64_t elems = (uint64_t)clen / W;
        uint32_t isz = k.index[c];
        uint32_t st = 0, items = 0;
        ChunkDec cd{};
        if (isz < RLE_CHUNK_HEADER) {
            st = (GC_E_CORRUPT << 8) | CK_SHORT;
        } else if (k.rec_off[c] + isz > (unsigned long long)k.rec_len) {
            /* the host checked an index that adds up, but this one is a separate
             * read (device-resident frames): never read a header past the records */
            st = (GC_E_TRUNCATED << 8) | CK_PAST_END;
        } else {
            const uint8_t *h = k.rec + k.rec_off[c];
            cd.mode = h[RLE_REC_MODE_OFFSET];
            cd.lw = h[RLE_REC_LEN_WIDTH_OFFSET];
            cd.runs = (uint32_t)get_le(h + RLE_REC_RUN_COUNT_OFFSET, 4);
            cd.crc = (uint32_t)get_le(h + RLE_REC_CRC_OFFSET, 4);
            if (h[RLE_REC_RESERVED_OFFSET] || h[RLE_REC_RESERVED_OFFSET + 1]) {
                st = (GC_E_CORRUPT << 8) | CK_RESERVED;
            } else if (cd.mode == RLE_MODE_STORED) {
                if (cd.lw || cd.runs)
                    st = (GC_E_CORRUPT << 8) | CK_STORED_FIELDS;
                else if ((uint64_t)isz != RLE_CHUNK_HEADER + (uint64_t)clen)
                    st = (GC_E_CORRUPT << 8) | CK_STORED_SIZE;
                else
                    items = (uint32_t)((clen + k.tl - 1) / k.tl);
            } else if (cd.mode == RLE_MODE_RLE) {
                if (cd.lw != 1 && cd.lw != 2 && cd.lw != 4)
                    st = (GC_E_CORRUPT << 8) | CK_LW;
                else if (cd.runs == 0 || cd.runs > elems)
                    st = (GC_E_CORRUPT << 8) | CK_RUNS;
                else if ((uint64_t)isz != RLE_CHUNK_HEADER + (uint64_t)cd.runs * (W + cd.lw))
                    st = (GC_E_CORRUPT << 8) | CK_RLE_SIZE;
                else {
                    cd.tile = run_tile_for<W>(cd.runs, clen, k.item_cap);
                    items = (cd.runs + cd.tile - 1) / cd.tile;
                }
            } else {
                st = (GC_E_CORRUPT << 8) | CK_MODE;
            }
        }
        k.chunks[c] = cd;
        k.status[c] = st;
        k.items[c] = items;
    }
}

__global__ void dec_count(DecK k)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *k.n_items = k.cc ? k.item_base[k.cc - 1] + k.items[k.cc - 1] : 0;
}

/* warp per chunk */
__global__ void dec_map(DecK k)
{
    const int lane = threadIdx.x & 31;
    const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x >> 5);
    for (uint64_t c = (uint64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); c < k.cc; c += warps) {
        uint32_t n = k.items[c], b = k.item_base[c];
        for (uint32_t i = lane; i < n; i += 32)
            k.item_chunk[b + i] = (uint32_t)c;
    }
}

/* Sum of the stored lengths (each run length - 1) in a 64-byte cell. */
__device__ __forceinline__ unsigned long long cell_len_sum(const uint32_t w[16], unsigned lw)
{
    unsigned long long s = 0;
    if (lw == 1) {
        uint32_t t = 0;
#pragma unroll
        for (int i = 0; i < 16; i++)
            t = __dp4a(w[i], 0x01010101u, t);
        s = t;
    } else if (lw == 2) {
        uint32_t t = 0;
#pragma unroll
        for (int i = 0; i < 16; i++)
            t += (w[i] & 0xffffu) + (w[i] >> 16);
        s = t;
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++)
            s += w[i];
    }
    return s;
}

/* warp per rle item: the sum of its run lengths, read as 64-byte cells
 * (lane l takes cells l, l + 32, ...; the stored values are length - 1). */
template <int W>
__global__ void __launch_bounds__(kThreads) dec_sum(DecK k)
{
    const int lane = threadIdx.x & 31;
    const uint32_t n_items = *k.n_items;
    const uint32_t warps = gridDim.x * (blockDim.x >> 5);
    for (uint32_t id = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); id < n_items; id += warps) {
        uint32_t c = k.item_chunk[id];
        ChunkDec cd = k.chunks[c];
        if (cd.mode != RLE_MODE_RLE || k.status[c])
            continue;
        uint32_t r0 = (id - k.item_base[c]) * cd.tile;
        uint32_t nr = min(cd.tile, cd.runs - r0);
        int64_t lo = (int64_t)k.rec_off[c] + RLE_CHUNK_HEADER + (int64_t)cd.runs * W + (int64_t)r0 * cd.lw;
        int64_t hi = lo + (int64_t)nr * cd.lw;
        unsigned long long s = 0;
        for (int64_t p = lo + 64 * lane; p < hi; p += 64 * 32) {
            uint32_t w[16];
            load_cell_unaligned(k.rec, p, k.rec_len, w);
            mask_cell_edges(w, 0, (int32_t)min(hi - p, (int64_t)64));
            s += cell_len_sum(w, cd.lw);
        }
#pragma unroll
        for (int o = 16; o; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0)
            k.item_sum[id] = s + nr;
    }
}

/* warp per chunk: run-tile starts; the lengths must fill the chunk exactly */
template <int W>
__global__ void dec_cscan(DecK k)
{
    const int lane = threadIdx.x & 31;
    const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x >> 5);
    for (uint64_t c = (uint64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); c < k.cc; c += warps) {
        if (k.status[c] || k.chunks[c].mode != 1)
            continue;
        int64_t cstart = (int64_t)c * k.cs;
        uint64_t elems = (uint64_t)(min(cstart + (int64_t)k.cs, k.body_len) - cstart) / W;
        uint32_t n = k.items[c], b = k.item_base[c];
        unsigned long long carry = 0;
        for (uint32_t i0 = 0; i0 < n; i0 += 32) {
            uint32_t i = i0 + lane;
            unsigned long long v = i < n ? k.item_sum[b + i] : 0, incl = v;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                unsigned long long t = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o)
                    incl += t;
            }
            if (i < n)
                k.item_start[b + i] = carry + incl - v;
            carry += __shfl_sync(0xffffffffu, incl, 31);
        }
        if (lane == 0 && carry != elems)
            k.status[c] = (GC_E_CORRUPT << 8) | CK_SUM;
    }
}

/* A thread's N stored run lengths (length - 1) of lw bytes each from record
 * offset off: N * lw bytes by vector loads instead of a byte load each (the
 * tile set-up waits on them with the whole block). */
template <int N, int LW>
__device__ __forceinline__ void load_lengths_lw(const DecK &k, int64_t off, uint32_t len[N])
{
    constexpr int NW = (N * LW / 4 + 3) / 4 * 4; /* words loaded: a multiple of 4 */
    uint32_t t[NW];
    load_words_unaligned<NW>(k.rec, off, k.rec_len, t);
#pragma unroll
    for (int i = 0; i < N; i++)
        len[i] = LW == 4 ? t[i] : (t[i * LW / 4] >> (8 * ((i * LW) & 3))) & (LW == 1 ? 0xffu : 0xffffu);
}

template <int N>
__device__ __forceinline__ void load_tile_lengths(const DecK &k, int64_t off, unsigned lw, uint32_t len[N])
{
    if (lw == 1)
        load_lengths_lw<N, 1>(k, off, len);
    else if (lw == 2)
        load_lengths_lw<N, 2>(k, off, len);
    else
        load_lengths_lw<N, 4>(k, off, len);
}

/* Words of a warp's span head bits (bit d: a run starts at element d of the span). */
template <int W>
__host__ __device__ constexpr int span_head_words()
{
    return kSpan / W / 32;
}

/* This lane's 64/W bits of the span head bits (its cell's elements). */
template <int W>
__device__ __forceinline__ uint64_t lane_heads(const uint32_t *hb, int lane)
{
    if (W == 1)
        return *reinterpret_cast<const unsigned long long *>(hb + 2 * lane);
    if (W == 2)
        return hb[lane];
    if (W == 4)
        return (hb[lane >> 1] >> (16 * (lane & 1))) & 0xffffu;
    return (hb[lane >> 2] >> (8 * (lane & 3))) & 0xffu;
}

/* Exclusive sum of v over the lanes before this one. */
__device__ __forceinline__ uint32_t lanes_before(uint32_t v, int lane)
{
    uint32_t incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o)
            incl += t;
    }
    return incl - v;
}

/*
 * One warp's share of a run tile's expansion: the 2 KiB spans [c0, c1) of
 * the item's output, counted from ib (offsets in 32 bits from there; the
 * item's bytes are [lo_i, hi_i), ib_c = ib - the chunk's start). The spans
 * are contiguous so that each span starts in the run where the previous one
 * ended: one binary search per warp and item instead of one per cell and
 * window. A span's run starts are walked by the whole warp, each lane taking
 * kWalkRuns<W> consecutive runs and setting their bits in the warp's shared
 * head bits hb, which each lane reads back as its cell's head mask; the
 * heads of the lanes before it give the run of its first element. The warp's CRC runs on from span to span (the CRC so
 * far, XORed into a span's first word, comes out multiplied by x^(8*2048)),
 * so no block barrier is needed per window. Returns the raw CRC of the
 * spans at the end of span c1 - 1.
 */
template <int W>
__device__ __forceinline__ uint32_t expand_spans(const CrcSmem &cs, const uint32_t *s_start, uint32_t nr,
                                                 const uint32_t *s_sym32, uint32_t *hb, uint8_t *iout,
                                                 int32_t lo_i, int32_t hi_i, int32_t ib_c, int32_t c0, int32_t c1)
{
    const int lane = threadIdx.x & 31;
    /* the run of the first element: the item starts with run 0 */
    uint32_t rw = c0 == 0 ? 0 : run_of(s_start, nr, (uint32_t)((ib_c + kSpan * c0) / W));
    uint32_t crc = 0;
    for (int32_t c = c0; c < c1; c++) {
        const int32_t a0 = kSpan * c, a = a0 + kCell * lane;
        const uint32_t pc = (uint32_t)((ib_c + a0) / W);             /* the span's element 0 (exact: W | 16) */
        const uint32_t send = (uint32_t)(min(kSpan, hi_i - a0) / W); /* its elements inside the item */
        __syncwarp(); /* every lane has read the previous span's bits */
        for (int i = lane; i < span_head_words<W>(); i += 32)
            hb[i] = 0;
        __syncwarp();
        uint32_t nh = 0; /* runs starting in the span after rw's start */
        for (uint32_t rb = rw + 1;; rb += 32 * kWalkRuns<W>) {
            /* each lane kWalkRuns<W> consecutive runs; starts increase with the
             * run, and the sentinel at nr is the item's end */
            uint32_t d[kWalkRuns<W>];
#pragma unroll
            for (int i = 0; i < kWalkRuns<W>; i++)
                d[i] = s_start[start_slot(min(rb + kWalkRuns<W> * lane + i, nr))] - pc;
            uint32_t heads = 0, word = d[0] >> 5, bits = 0;
#pragma unroll
            for (int i = 0; i < kWalkRuns<W>; i++) {
                if (d[i] < send) {
                    heads++;
                    if (d[i] >> 5 != word) { /* the lane's runs reach into the next word */
                        atomicOr(&hb[word], bits);
                        word = d[i] >> 5;
                        bits = 0;
                    }
                    bits |= 1u << (d[i] & 31);
                }
            }
            if (bits)
                atomicOr(&hb[word], bits);
            nh += __reduce_add_sync(0xffffffffu, heads);
            if (!__all_sync(0xffffffffu, heads == kWalkRuns<W>))
                break;
        }
        __syncwarp();
        const uint64_t mine = lane_heads<W>(hb, lane);
        const uint32_t before = lanes_before(popc64(mine), lane);
        const int32_t lo = max(a, lo_i), hi = min(a + kCell, hi_i);
        uint32_t w[16] = {}; /* cells outside the item's output count as zeros */
        if (hi > lo) {
            const int klo = (lo - a) / W, khi = (hi - a) / W;
            const uint64_t at_lo = mine & (1ull << klo); /* a run starting at the first element */
            expand_words<W>(rw + before + (at_lo != 0), mine & ~at_lo, s_sym32, klo, khi, w);
            store_cell(iout, a, lo, hi, w);
        }
        if (lane == 0)
            w[0] ^= crc;
        crc = __reduce_xor_sync(0xffffffffu, warp_crc(cs, w)); /* all lanes: warp_crc is warp-wide */
        rw += nh;
    }
    return crc;
}

template <int W>
__global__ void __launch_bounds__(kThreads, GC_DEC_MINB) dec_expand(DecK k)
{
    constexpr int RT = dec_run_tile<W>();
    constexpr int IPT = RT / kThreads;
    using BlockScan = cub::BlockScan<uint32_t, kThreads>;
    __shared__ uint32_t red_words[64];
    BlockRed red{ red_words, 0 };
    __shared__ typename BlockScan::TempStorage scan_tmp;
    __shared__ uint32_t s_start[RT + 1 + RT / 32 + 1]; /* see start_slot */
    /* symbols, plus a word that expand_words may read past the last one */
    __shared__ __align__(16) uint32_t s_sym32[(RT * W + 16) / 4];
    __shared__ __align__(8) uint32_t s_heads[kWarps][span_head_words<W>()]; /* see expand_spans */
    __shared__ uint32_t s_wcrc[kWarps];
    const CrcSmem cs = load_crc_smem(dyn_smem, k.tab); /* kCrcSmemBytes */
    const uint32_t *wk = warp_shift_table(k.tab);
    __syncthreads();
    const uint32_t n_items = *k.n_items;
    for (uint32_t id = blockIdx.x; id < n_items; id += gridDim.x) {
        uint32_t c = k.item_chunk[id];
        if (k.status[c]) {
            if (threadIdx.x == 0) {
                k.item_crc[id] = 0;
                k.item_wend[id] = 0;
            }
            continue;
        }
        ChunkDec cd = k.chunks[c];
        int64_t ostart = (int64_t)c * k.cs;
        int64_t cend = min(ostart + (int64_t)k.cs, k.body_len);
        int64_t rec = (int64_t)k.rec_off[c];
        uint32_t kl = id - k.item_base[c];
        if (cd.mode == RLE_MODE_STORED) {
            int64_t s = ostart + (int64_t)kl * k.tl, e = min(s + (int64_t)k.tl, cend);
            int64_t w0 = s & ~(int64_t)15;
            int64_t a = w0 + (int64_t)kCell * threadIdx.x;
            uint32_t w[16];
            load_cell_unaligned(k.rec, rec + RLE_CHUNK_HEADER + (a - ostart), k.rec_len, w);
            mask_cell(w, (int32_t)(s - a), (int32_t)(e - a)); /* within a tile of a */
            uint32_t crc = window_crc(cs, w, red, wk);
            store_cell(k.out, a, s, e, w);
            if (threadIdx.x == 0) {
                k.item_crc[id] = crc;
                k.item_wend[id] = w0 + kWin;
            }
            continue;
        }
        /* run tile: lengths -> start positions in shared memory */
        uint32_t r0 = kl * cd.tile;
        uint32_t nr = min(cd.tile, cd.runs - r0);
        const int64_t syms = rec + RLE_CHUNK_HEADER + (int64_t)r0 * W;
        const int64_t lens = rec + RLE_CHUNK_HEADER + (int64_t)cd.runs * W + (int64_t)r0 * cd.lw;
        uint32_t len[IPT];
        load_tile_lengths<IPT>(k, lens + (int64_t)threadIdx.x * IPT * cd.lw, cd.lw, len);
#pragma unroll
        for (int i = 0; i < IPT; i++)
            len[i] = threadIdx.x * IPT + i < nr ? len[i] + 1 : 0;
        uint32_t base = (uint32_t)k.item_start[id];
        uint32_t total;
        BlockScan(scan_tmp).ExclusiveSum(len, len, total);
#pragma unroll
        for (int i = 0; i < IPT; i++)
            s_start[start_slot(threadIdx.x * IPT + i)] = base + len[i];
        if (threadIdx.x == 0 && nr == RT)
            s_start[start_slot(nr)] = base + total; /* sentinel (for nr < RT the scan wrote it) */
        for (uint32_t v = threadIdx.x; 16 * v < nr * W; v += kThreads) {
            uint32_t t[4];
            load_words_unaligned<4>(k.rec, syms + 16 * (int64_t)v, k.rec_len, t);
            reinterpret_cast<uint4 *>(s_sym32)[v] = make_uint4(t[0], t[1], t[2], t[3]);
        }
        __syncthreads();
        /* Expand the item's output [ob0, ob0 + total * W) in 2 KiB spans, each
         * warp its own run of them. Offsets are 32-bit, from ib (16-aligned):
         * an item lies inside its chunk (under 2^26 bytes). */
        const int64_t ob0 = ostart + (int64_t)base * W, ib = ob0 & ~(int64_t)15;
        const int32_t lo_i = (int32_t)(ob0 - ib), hi_i = lo_i + (int32_t)(total * W);
        const int32_t nspans = (hi_i + kSpan - 1) / kSpan, per_warp = (nspans + kWarps - 1) / kWarps;
        const int warp = threadIdx.x >> 5;
        const int32_t c0 = min(warp * per_warp, nspans), c1 = min(c0 + per_warp, nspans);
        uint32_t wcrc = 0;
        if (c0 < c1) {
            wcrc = expand_spans<W>(cs, s_start, nr, s_sym32, s_heads[warp], k.out + ib, lo_i, hi_i,
                                   (int32_t)(ib - ostart), c0, c1);
            /* to the item's end: one table multiply for the items of up to 64 spans */
            const int32_t m = nspans - c1;
            wcrc = m < kSpanShifts ? mul_nibbles(&k.tab->xsp[m][0][0], wcrc)
                                   : mul_xpow8(k.tab, wcrc, (uint64_t)kSpan * (uint64_t)m);
        }
        if ((threadIdx.x & 31) == 0)
            s_wcrc[warp] = wcrc;
        __syncthreads(); /* s_wcrc written; s_start / s_sym / scan_tmp free for the next item */
        if (threadIdx.x == 0) {
            uint32_t acc = 0;
#pragma unroll
            for (int w = 0; w < kWarps; w++)
                acc ^= s_wcrc[w];
            k.item_crc[id] = acc;
            k.item_wend[id] = ib + (int64_t)kSpan * nspans; /* the last span's end */
        }
    }
}

/* warp per chunk: combine item CRCs and compare with the record's */
__global__ void dec_ccrc(DecK k)
{
    const int lane = threadIdx.x & 31;
    const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x >> 5);
    for (uint64_t c = (uint64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); c < k.cc; c += warps) {
        if (k.status[c])
            continue;
        int64_t ostart = (int64_t)c * k.cs;
        int64_t cend = min(ostart + (int64_t)k.cs, k.body_len);
        uint32_t n = k.items[c], b = k.item_base[c];
        int64_t ref = k.item_wend[b + n - 1];
        uint32_t acc = 0;
        for (uint32_t i = lane; i < n; i += 32) {
            uint32_t cw = k.item_crc[b + i];
            if (cw)
                acc ^= mul_xpow8(k.tab, cw, (uint64_t)(ref - k.item_wend[b + i]));
        }
        acc = __reduce_xor_sync(0xffffffffu, acc); /* one redux, not five shuffles */
        if (lane == 0) {
            uint32_t crc = crc_at_ref(k.tab, acc, (uint64_t)(ref - cend), (uint64_t)(cend - ostart));
            if (crc != k.chunks[c].crc)
                k.status[c] = (GC_E_CRC << 8) | CK_CRC;
        }
    }
}

size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

struct DecLayout {
    uint64_t cc, max_items, per_chunk;
    uint32_t tl;
    size_t off_chunks, off_status, off_items, off_base, off_n, off_recoff, off_ichunk, off_isum, off_istart,
        off_icrc, off_iwend, off_cub, cub_bytes, total;
};

DecLayout dec_layout(uint64_t body_len, uint32_t cs)
{
    DecLayout L;
    L.cc = (body_len + cs - 1) / cs;
    L.tl = tile_len_for(cs);
    L.per_chunk = std::max<uint64_t>((cs + L.tl - 1) / L.tl, (cs + kRunTile - 1) / kRunTile);
    L.max_items = L.cc * L.per_chunk;
    size_t o = 0;
    L.off_chunks = o;
    o = align_up(o + L.cc * sizeof(ChunkDec), 256);
    L.off_status = o;
    o = align_up(o + L.cc * 4, 256);
    L.off_items = o;
    o = align_up(o + L.cc * 4, 256);
    L.off_base = o;
    o = align_up(o + L.cc * 4, 256);
    L.off_n = o;
    o = align_up(o + 4, 256);
    L.off_recoff = o;
    o = align_up(o + L.cc * 8, 256);
    L.off_ichunk = o;
    o = align_up(o + L.max_items * 4, 256);
    L.off_isum = o;
    o = align_up(o + L.max_items * 8, 256);
    L.off_istart = o;
    o = align_up(o + L.max_items * 8, 256);
    L.off_icrc = o;
    o = align_up(o + L.max_items * 4, 256);
    L.off_iwend = o;
    o = align_up(o + L.max_items * 8, 256);
    L.off_cub = o;
    L.cub_bytes = align_up(64 * 1024 + L.cc * 2, 256);
    L.total = o + L.cub_bytes;
    return L;
}

template <int W>
int dec_launch_w(const DecK &k, const DecLayout &L, uint8_t *scr, cudaStream_t st, gc_error *err)
{
    int sms = 0;
    int rc = device_sm_count(&sms, err);
    if (rc != GC_OK)
        return rc;
    constexpr int kWarpsPerBlock = kDecChunkThreads / 32;
    int g_thr = (int)std::min<uint64_t>((k.cc + kDecChunkThreads - 1) / kDecChunkThreads,
                                        (uint64_t)sms * kDecThreadBlocksPerSm);
    int g_warp =
        (int)std::min<uint64_t>((k.cc + kWarpsPerBlock - 1) / kWarpsPerBlock, (uint64_t)sms * kDecWarpBlocksPerSm);
    int g_sum = 0, g_expand = 0;
    rc = resident_grid(dec_sum<W>, 0, (L.max_items + 7) / 8, &g_sum, err);
    if (rc == GC_OK)
        rc = resident_grid(dec_expand<W>, kCrcSmemBytes, L.max_items, &g_expand, err);
    if (rc != GC_OK)
        return rc;
    size_t need = 0, have = L.cub_bytes;
    GC_CUDA(cub::DeviceScan::ExclusiveScan(nullptr, need, k.index, (unsigned long long *)k.rec_off,
                                           ::cuda::std::plus<>{}, 0ull, (int64_t)k.cc, st));
    size_t need2 = 0;
    GC_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, need2, k.items, k.item_base, (int64_t)k.cc, st));
    if (std::max(need, need2) > L.cub_bytes)
        return gc_fail(err, GC_E_INTERNAL, "gpu rle: scan needs %zu bytes of scratch, %zu reserved",
                       std::max(need, need2), L.cub_bytes);
    GC_CUDA(cub::DeviceScan::ExclusiveScan(scr + L.off_cub, have, k.index, (unsigned long long *)k.rec_off,
                                           ::cuda::std::plus<>{}, k.rec_shift, (int64_t)k.cc, st));
    dec_check<W><<<g_thr, kDecChunkThreads, 0, st>>>(k);
    GC_CUDA_LAUNCHED("dec_check");
    have = L.cub_bytes;
    GC_CUDA(cub::DeviceScan::ExclusiveSum(scr + L.off_cub, have, k.items, k.item_base, (int64_t)k.cc, st));
    dec_count<<<1, 32, 0, st>>>(k);
    GC_CUDA_LAUNCHED("dec_count");
    dec_map<<<g_warp, kDecChunkThreads, 0, st>>>(k);
    GC_CUDA_LAUNCHED("dec_map");
    dec_sum<W><<<g_sum, kThreads, 0, st>>>(k);
    GC_CUDA_LAUNCHED("dec_sum");
    dec_cscan<W><<<g_warp, kDecChunkThreads, 0, st>>>(k);
    GC_CUDA_LAUNCHED("dec_cscan");
    dec_expand<W><<<g_expand, kThreads, kCrcSmemBytes, st>>>(k);
    GC_CUDA_LAUNCHED("dec_expand");
    dec_ccrc<<<g_warp, kDecChunkThreads, 0, st>>>(k);
    GC_CUDA_LAUNCHED("dec_ccrc");
    return GC_OK;
}

} // namespace

size_t dec_scratch_bytes(uint64_t body_len, unsigned width, uint32_t chunk_size)
{
    (void)width;
    return dec_layout(body_len, chunk_size).total;
}

int dec_launch(const DecParams &p, const CrcTables *d_tab, void *scratch, size_t scratch_len, cudaStream_t stream,
               uint32_t **d_status, gc_error *err)
{
    DecLayout L = dec_layout(p.body_len, p.chunk_size);
    if (scratch_len < L.total)
        return gc_fail(err, GC_E_LIMIT, "gpu rle: decode needs %zu bytes of device scratch, %zu given", L.total,
                       scratch_len);
    if (((uintptr_t)p.out & 15) || ((uintptr_t)p.index & 3))
        return gc_fail(err, GC_E_INVALID, "gpu rle: device buffers must be 16-byte aligned");
    if (L.cc != p.chunk_count)
        return gc_fail(err, GC_E_INTERNAL, "gpu rle: chunk count mismatch");
    uint8_t *scr = (uint8_t *)scratch;
    DecK k;
    /* Records may start anywhere (after a frame header, say): kernels see the
     * 16-byte aligned address below them, and the offset scan starts at the gap. */
    k.rec = (const uint8_t *)((uintptr_t)p.records & ~(uintptr_t)15);
    k.rec_shift = (unsigned long long)(p.records - k.rec);
    k.rec_len = (int64_t)(p.records_len + k.rec_shift);
    k.index = p.index;
    k.rec_off = (const unsigned long long *)(scr + L.off_recoff);
    k.cs = p.chunk_size;
    k.tl = L.tl;
    k.cc = L.cc;
    k.item_cap = (uint32_t)L.per_chunk;
    k.body_len = (int64_t)p.body_len;
    k.out = p.out;
    k.tab = d_tab;
    k.chunks = (ChunkDec *)(scr + L.off_chunks);
    k.status = (uint32_t *)(scr + L.off_status);
    k.items = (uint32_t *)(scr + L.off_items);
    k.item_base = (uint32_t *)(scr + L.off_base);
    k.n_items = (uint32_t *)(scr + L.off_n);
    k.item_chunk = (uint32_t *)(scr + L.off_ichunk);
    k.item_sum = (unsigned long long *)(scr + L.off_isum);
    k.item_start = (unsigned long long *)(scr + L.off_istart);
    k.item_crc = (uint32_t *)(scr + L.off_icrc);
    k.item_wend = (long long *)(scr + L.off_iwend);
    *d_status = k.status;
    if (L.cc == 0)
        return GC_OK;
    switch (p.width) {
    case 1: return dec_launch_w<1>(k, L, scr, stream, err);
    case 2: return dec_launch_w<2>(k, L, scr, stream, err);
    case 4: return dec_launch_w<4>(k, L, scr, stream, err);
    case 8: return dec_launch_w<8>(k, L, scr, stream, err);
    default: return gc_fail(err, GC_E_INVALID, "gpu rle: width %u is not 1, 2, 4 or 8", p.width);
    }
}

int dec_status_error(uint32_t status, uint64_t chunk, gc_error *err)
{
    static const char *const what[] = {
        "",
        "index entry is shorter than a record header",
        "reserved bytes of the record header are not zero",
        "record mode is neither 0 (stored) nor 1 (rle)",
        "stored record has a non-zero len_width or run_count",
        "index entry does not match a stored record of the chunk's length",
        "len_width is not 1, 2 or 4",
        "run_count is 0 or larger than the chunk's element count",
        "index entry does not match 12 + run_count * (width + len_width)",
        "run lengths do not add up to the chunk's element count",
        "CRC32C of the decoded chunk does not match the record",
        "index entry places the record past the end of the records present",
    };
    uint32_t ck = status & 0xff;
    int code = (int)(status >> 8);
    if (code == 0)
        code = GC_E_INTERNAL;
    return gc_fail(err, (gc_status)code, "rle: chunk %llu: %s (GPU decoder)", (unsigned long long)chunk,
                   ck < sizeof what / sizeof what[0] ? what[ck] : "unknown check");
}

} // namespace gcgpu
