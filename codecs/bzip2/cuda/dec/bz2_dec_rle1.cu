/*
 * bz2_dec_rle1.cu - the decoder's last stage: the initial run-length coding
 * undone (after four equal bytes the next byte is a repeat count of the
 * fourth), twice per block: first the output size (and the check that the
 * block does not end right after four equal bytes), then, once the caller
 * has placed every block, the bytes. The block CRCs are the encoder's
 * kernels (bz2_block_crcs) over the output.
 *
 * One warp per block, 128 bytes a step (4 per lane). The decoder's state
 * before a byte is r in 0..4: 0 fresh (after a count byte, or at the
 * start), 1..4 the length of the run of equal literals so far; a byte seen
 * in state 4 is a count. Each byte is a map of the 5 states, so the state
 * before every byte of the step is a warp scan of composed maps.
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

/* One step of 128 bytes at column offset i: this lane's 4 bytes (k < m
 * valid), the state before its first byte, and the state after the step
 * (all lanes). prev: the byte before the step; r: the state before it. */
struct Step {
    uint32_t bytes[4];
    uint32_t m;         /* valid bytes of this lane */
    uint32_t state_in;  /* before this lane's first byte */
    uint32_t last_byte; /* the step's last byte (all lanes) */
    uint32_t state_out; /* after the step (all lanes) */
    uint32_t prev_byte; /* the byte before this lane's first byte */
};

__device__ __forceinline__ Step step(const uint8_t *col, uint32_t n, uint32_t i, uint32_t prev, uint32_t r,
                                     int lane)
{
    Step s;
    uint32_t at = i + 4u * (uint32_t)lane;
    s.m = at >= n ? 0 : (n - at < 4 ? n - at : 4);
    uint32_t w = 0; /* columns are 16-byte aligned */
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
    uint32_t before = __shfl_up_sync(kFull, f, 1);
    s.state_in = lane == 0 ? r : apply(before, r);
    s.state_out = apply(__shfl_sync(kFull, f, 31), r);
    /* the last valid byte of the step */
    uint32_t has = __ballot_sync(kFull, s.m > 0);
    int last_lane = 31 - __clz(has);
    uint32_t lb = s.m ? s.bytes[s.m - 1] : 0;
    s.last_byte = __shfl_sync(kFull, lb, last_lane);
    return s;
}

/* The lane's bytes through the state machine: emit(offset, byte, count) per output run. */
template <typename Emit>
__device__ __forceinline__ uint32_t lane_bytes(const Step &s, Emit emit, uint64_t at)
{
    uint32_t r = s.state_in, pb = s.prev_byte, produced = 0;
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

/* Output bytes a lane's bytes give (a dry run of lane_bytes). */
__device__ __forceinline__ uint32_t lane_size(const Step &s)
{
    return lane_bytes(s, NoEmit{}, 0);
}

__global__ void __launch_bounds__(32 * kDecRle1Warps) rle1_size(DecBlk *blk, uint32_t nb, const uint8_t *cols)
{
    uint32_t i = blockIdx.x * kDecRle1Warps + threadIdx.x / 32;
    int lane = (int)(threadIdx.x % 32);
    if (i >= nb || blk[i].status != kDecOk)
        return;
    const uint8_t *col = cols + (uint64_t)blk[i].col * BZ2_MAX_BLOCK;
    uint32_t n = blk[i].n, prev = 0, r = 0;
    uint64_t total = 0;
    for (uint32_t at = 0; at < n; at += 128) {
        Step s = step(col, n, at, prev, r, lane);
        total += warp_sum(lane_size(s));
        prev = s.last_byte;
        r = s.state_out;
    }
    if (lane == 0) {
        if (r == 4)
            blk[i].status = kDecRunEnd;
        else
            blk[i].out_len = (uint32_t)total;
    }
}

__global__ void __launch_bounds__(32 * kDecRle1Warps)
    rle1_expand(const DecBlk *blk, uint32_t nb, const uint8_t *cols, const Bz2Block *place, uint8_t *out)
{
    uint32_t i = blockIdx.x * kDecRle1Warps + threadIdx.x / 32;
    int lane = (int)(threadIdx.x % 32);
    if (i >= nb)
        return;
    const uint8_t *col = cols + (uint64_t)blk[i].col * BZ2_MAX_BLOCK;
    uint8_t *o = out + place[i].in_start;
    uint32_t n = blk[i].n, prev = 0, r = 0;
    uint64_t base = 0;
    for (uint32_t at = 0; at < n; at += 128) {
        Step s = step(col, n, at, prev, r, lane);
        uint32_t mine = lane_size(s);
        uint32_t before = warp_exclusive(mine, lane);
        lane_bytes(s, ToOut{ o }, base + before);
        base += warp_sum(mine);
        prev = s.last_byte;
        r = s.state_out;
    }
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
    rle1_size<<<ctas(nb), 32 * kDecRle1Warps, 0, st>>>(d_blk, nb, s.cols);
    GC_CUDA_LAUNCHED("rle1_size");
    return GC_OK;
}

int bz2_dec_rle1_expand(const DecBlk *d_blk, uint32_t nb, uint8_t *out, uint64_t out_len, DecScratch &s,
                        const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    bz2_prof(st, nullptr, 0);
    rle1_expand<<<ctas(nb), 32 * kDecRle1Warps, 0, st>>>(d_blk, nb, s.cols, s.crc_blk, out);
    GC_CUDA_LAUNCHED("rle1_expand");
    bz2_prof(st, "dec_rle1_expand", nb);
    int rc = bz2_block_crcs(out, out_len, s.crc_blk, nb, s.crc_acc, d_tab32, st, err);
    bz2_prof(st, "dec_crc", nb);
    return rc;
}

} // namespace gcgpu
