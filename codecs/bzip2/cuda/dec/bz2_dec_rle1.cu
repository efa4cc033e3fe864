/*
 * bz2_dec_rle1.cu - the decoder's last stage: the initial run-length coding
 * undone (after four equal bytes the next byte is a repeat count of the
 * fourth). A block's column is cut into chunks of kDecRle1Chunk bytes, one
 * warp each, so that one block uses the whole device:
 *
 *   chunk scan  per chunk: its map of the five states (below) and the bytes
 *               it gives from each state it may start in;
 *   block scan  one warp per block composes the chunks' maps from state 0:
 *               each chunk's state and output offset, the block's output
 *               size, and the check that it does not end right after four
 *               equal bytes;
 *   expand      once the caller has placed every block, each chunk writes
 *               its bytes. The block CRCs are the encoder's kernels
 *               (bz2_block_crcs) over the output.
 *
 * A warp takes 128 bytes a step (4 per lane). The decoder's state before a
 * byte is r in 0..4: 0 fresh (after a count byte, or at the start), 1..4
 * the length of the run of equal literals so far; a byte seen in state 4 is
 * a count. Each byte is a map of the 5 states, so the state before every
 * byte is a scan of composed maps.
 */
#include "bz2_dec.cuh"

namespace gcgpu {
namespace {

constexpr uint32_t kIdentity = 0 | 1 << 3 | 2 << 6 | 3 << 9 | 4 << 12; /* 3 bits per state */

__device__ __forceinline__ uint32_t apply(uint32_t f, uint32_t r)
{
    return (f >> (3 * r)) & 7;
}
/* f after g */
__device__ __forceinline__ uint32_t compose(uint32_t f, uint32_t g)
{
    uint32_t h = 0;
    for (uint32_t r = 0; r < 5; r++)
        h |= apply(f, apply(g, r)) << (3 * r);
    return h;
}
/* The map of one byte: eq says it equals the byte before it. */
__device__ __forceinline__ uint32_t byte_map(bool eq)
{
    return eq ? (1 | 2 << 3 | 3 << 6 | 4 << 9 | 0 << 12) : (1 | 1 << 3 | 1 << 6 | 1 << 9 | 0 << 12);
}

/* One step of 128 bytes at column offset i (bytes before end only): this
 * lane's 4 bytes (k < m valid), the map of the step's bytes before this
 * lane's (applied to the state before the step: this lane's first state)
 * and the map of the whole step. prev: the byte before the step. */
struct Step {
    uint32_t bytes[4];
    uint32_t m;         /* valid bytes of this lane */
    uint32_t before;    /* map: state before the step -> before this lane's first byte */
    uint32_t whole;     /* map: state before the step -> after it (all lanes) */
    uint32_t last_byte; /* the step's last byte (all lanes) */
    uint32_t prev_byte; /* the byte before this lane's first byte */
};

__device__ __forceinline__ Step step(const uint8_t *col, uint32_t end, uint32_t i, uint32_t prev, int lane)
{
    Step s;
    uint32_t at = i + 4u * (uint32_t)lane;
    s.m = at >= end ? 0 : (end - at < 4 ? end - at : 4);
    uint32_t w = 0; /* columns and chunks are 16-byte aligned */
    if (s.m == 4)
        w = *reinterpret_cast<const uint32_t *>(col + at);
    else
        for (uint32_t k = 0; k < s.m; k++)
            w |= (uint32_t)col[at + k] << (8 * k);
    for (int k = 0; k < 4; k++)
        s.bytes[k] = (w >> (8 * k)) & 0xff;
    uint32_t up = __shfl_up_sync(kFull, s.bytes[3], 1);
    s.prev_byte = lane == 0 ? prev : up;
    uint32_t f = kIdentity;
    uint32_t pb = s.prev_byte;
    for (uint32_t k = 0; k < s.m; k++) {
        f = compose(byte_map(s.bytes[k] == pb), f);
        pb = s.bytes[k];
    }
    /* inclusive scan of maps: lane l gets map(l) after ... after map(0) */
    for (int d = 1; d < 32; d <<= 1) {
        uint32_t g = __shfl_up_sync(kFull, f, d);
        if (lane >= d)
            f = compose(f, g);
    }
    uint32_t up_map = __shfl_up_sync(kFull, f, 1);
    s.before = lane == 0 ? kIdentity : up_map;
    s.whole = __shfl_sync(kFull, f, 31);
    /* the last valid byte of the step */
    uint32_t has = __ballot_sync(kFull, s.m > 0);
    int last_lane = 31 - __clz(has);
    uint32_t lb = s.m ? s.bytes[s.m - 1] : 0;
    s.last_byte = __shfl_sync(kFull, lb, last_lane);
    return s;
}

/* The lane's bytes through the state machine: emit(offset, byte, count) per output run. */
template <typename Emit>
__device__ __forceinline__ uint32_t lane_bytes(const Step &s, uint32_t state_in, Emit emit, uint64_t at)
{
    uint32_t r = state_in, pb = s.prev_byte, produced = 0;
    for (uint32_t k = 0; k < s.m; k++) {
        uint32_t b = s.bytes[k];
        if (r == 4) {
            emit(at + produced, pb, b);
            produced += b;
            r = 0;
        } else {
            emit(at + produced, b, 1);
            produced += 1;
            r = (r != 0 && b == pb) ? r + 1 : 1;
        }
        pb = b;
    }
    return produced;
}

struct NoEmit {
    __device__ void operator()(uint64_t, uint32_t, uint32_t) const
    {
    }
};

struct ToOut {
    uint8_t *out;
    __device__ void operator()(uint64_t at, uint32_t b, uint32_t count) const
    {
        for (uint32_t k = 0; k < count; k++)
            out[at + k] = (uint8_t)b;
    }
};

__device__ __forceinline__ uint32_t warp_sum(uint32_t v)
{
    for (int d = 16; d; d >>= 1)
        v += __shfl_xor_sync(kFull, v, d);
    return v;
}

__device__ __forceinline__ uint32_t warp_exclusive(uint32_t v, int lane)
{
    uint32_t x = v;
    for (int d = 1; d < 32; d <<= 1) {
        uint32_t y = __shfl_up_sync(kFull, x, d);
        if (lane >= d)
            x += y;
    }
    return x - v;
}

/* Output bytes a lane's bytes give from state_in (a dry run of lane_bytes). */
__device__ __forceinline__ uint32_t lane_size(const Step &s, uint32_t state_in)
{
    return lane_bytes(s, state_in, NoEmit{}, 0);
}

/* Where a chunk lies: blockIdx.y the block, warps of blockIdx.x its chunks. */
struct Chunk {
    uint32_t blk, k; /* block, chunk of the block */
    uint32_t lo, hi; /* its column bytes */
    uint64_t slot;   /* its entry in the chunk arrays */
};

__device__ __forceinline__ bool chunk_of(const DecBlk *blk, Chunk &c)
{
    c.blk = blockIdx.y;
    c.k = blockIdx.x * kDecRle1Warps + threadIdx.x / 32;
    uint32_t n = blk[c.blk].n;
    c.lo = c.k * kDecRle1Chunk;
    c.hi = min(n, c.lo + kDecRle1Chunk);
    c.slot = (uint64_t)c.blk * kDecRle1Chunks + c.k;
    return blk[c.blk].status == kDecOk && c.lo < n;
}

/* Per chunk: its state map and its output bytes from each start state. */
__global__ void __launch_bounds__(32 * kDecRle1Warps)
    rle1_chunk_scan(const DecBlk *blk, const uint8_t *cols, uint32_t *maps, uint32_t *sizes)
{
    Chunk c;
    int lane = (int)(threadIdx.x % 32);
    if (!chunk_of(blk, c))
        return;
    const uint8_t *col = cols + (uint64_t)blk[c.blk].col * BZ2_MAX_BLOCK;
    uint32_t prev = c.lo ? col[c.lo - 1] : 0;
    uint32_t r[5] = { 0, 1, 2, 3, 4 }, got[5] = {};
    for (uint32_t at = c.lo; at < c.hi; at += 128) {
        Step s = step(col, c.hi, at, prev, lane);
        for (int q = 0; q < 5; q++) {
            got[q] += lane_size(s, apply(s.before, r[q]));
            r[q] = apply(s.whole, r[q]);
        }
        prev = s.last_byte;
    }
    uint32_t map = 0;
    for (int q = 0; q < 5; q++) {
        map |= r[q] << (3 * q);
        got[q] = warp_sum(got[q]);
    }
    if (lane == 0) {
        maps[c.slot] = map;
        for (int q = 0; q < 5; q++)
            sizes[c.slot * 5 + q] = got[q];
    }
}

/* One warp per block: each chunk's start state and output offset. */
__global__ void __launch_bounds__(32 * kDecRle1Warps)
    rle1_block_scan(DecBlk *blk, uint32_t nb, const uint32_t *maps, const uint32_t *sizes, uint32_t *states,
                    uint32_t *offs)
{
    uint32_t i = blockIdx.x * kDecRle1Warps + threadIdx.x / 32;
    int lane = (int)(threadIdx.x % 32);
    if (i >= nb || blk[i].status != kDecOk)
        return;
    uint32_t chunks = (blk[i].n + kDecRle1Chunk - 1) / kDecRle1Chunk;
    uint64_t base = (uint64_t)i * kDecRle1Chunks;
    uint32_t r = 0;
    uint64_t total = 0;
    for (uint32_t k0 = 0; k0 < chunks; k0 += 32) {
        uint32_t k = k0 + (uint32_t)lane;
        uint32_t f = k < chunks ? maps[base + k] : kIdentity;
        for (int d = 1; d < 32; d <<= 1) {
            uint32_t g = __shfl_up_sync(kFull, f, d);
            if (lane >= d)
                f = compose(f, g);
        }
        uint32_t up = __shfl_up_sync(kFull, f, 1);
        uint32_t state = lane == 0 ? r : apply(up, r);
        uint32_t got = k < chunks ? sizes[(base + k) * 5 + state] : 0;
        uint32_t before = warp_exclusive(got, lane);
        if (k < chunks) {
            states[base + k] = state;
            offs[base + k] = (uint32_t)total + before;
        }
        total += warp_sum(got);
        r = apply(__shfl_sync(kFull, f, 31), r);
    }
    if (lane == 0) {
        if (r == 4)
            blk[i].status = kDecRunEnd;
        else
            blk[i].out_len = (uint32_t)total;
    }
}

/* Per chunk: its bytes at the block's place plus the chunk's offset. */
__global__ void __launch_bounds__(32 * kDecRle1Warps)
    rle1_expand(const DecBlk *blk, const uint8_t *cols, const Bz2Block *place, const uint32_t *states,
                const uint32_t *offs, uint8_t *out)
{
    Chunk c;
    int lane = (int)(threadIdx.x % 32);
    if (!chunk_of(blk, c))
        return;
    const uint8_t *col = cols + (uint64_t)blk[c.blk].col * BZ2_MAX_BLOCK;
    uint8_t *o = out + place[c.blk].in_start + offs[c.slot];
    uint32_t prev = c.lo ? col[c.lo - 1] : 0, r = states[c.slot];
    uint64_t base = 0;
    for (uint32_t at = c.lo; at < c.hi; at += 128) {
        Step s = step(col, c.hi, at, prev, lane);
        uint32_t state_in = apply(s.before, r);
        uint32_t mine = lane_size(s, state_in);
        uint32_t before = warp_exclusive(mine, lane);
        lane_bytes(s, state_in, ToOut{ o }, base + before);
        base += warp_sum(mine);
        prev = s.last_byte;
        r = apply(s.whole, r);
    }
}

dim3 chunk_grid(uint32_t nb)
{
    return dim3((kDecRle1Chunks + kDecRle1Warps - 1) / kDecRle1Warps, nb);
}

unsigned ctas(uint32_t nb)
{
    return (nb + kDecRle1Warps - 1) / kDecRle1Warps;
}

} // namespace

int bz2_dec_rle1_size(DecBlk *d_blk, uint32_t nb, DecScratch &s, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    if (d_blk != s.blk || nb > s.columns)
        return gc_fail(err, GC_E_INTERNAL, "gpu bzip2: rle1 sizes of %u blocks (scratch for %u)", nb, s.columns);
    rle1_chunk_scan<<<chunk_grid(nb), 32 * kDecRle1Warps, 0, st>>>(d_blk, s.cols, s.r1_map, s.r1_size);
    GC_CUDA_LAUNCHED("rle1_chunk_scan");
    rle1_block_scan<<<ctas(nb), 32 * kDecRle1Warps, 0, st>>>(d_blk, nb, s.r1_map, s.r1_size, s.r1_state, s.r1_off);
    GC_CUDA_LAUNCHED("rle1_block_scan");
    return GC_OK;
}

int bz2_dec_rle1_expand(const DecBlk *d_blk, uint32_t nb, uint8_t *out, uint64_t out_len, DecScratch &s,
                        const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    /* the blocks' chunk entries are where bz2_dec_rle1_size left them */
    uint64_t first = (uint64_t)(d_blk - s.blk) * kDecRle1Chunks;
    bz2_prof(st, nullptr, 0);
    rle1_expand<<<chunk_grid(nb), 32 * kDecRle1Warps, 0, st>>>(d_blk, s.cols, s.crc_blk, s.r1_state + first,
                                                               s.r1_off + first, out);
    GC_CUDA_LAUNCHED("rle1_expand");
    bz2_prof(st, "dec_rle1_expand", nb);
    int rc = bz2_block_crcs(out, out_len, s.crc_blk, nb, s.crc_acc, d_tab32, st, err);
    bz2_prof(st, "dec_crc", nb);
    return rc;
}

} // namespace gcgpu
