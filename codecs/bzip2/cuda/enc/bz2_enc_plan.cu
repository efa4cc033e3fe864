/*
 * bz2_enc_plan.cu - the encoder's first stage on the device: blocks of a
 * piece (docs/BZIP2.md section 3), their RLE1 bytes and their CRCs. A piece
 * starts at a block start of the whole input, so its blocks are bzip2's.
 *
 * RLE1 units never cross a maximal run of equal bytes, and units are cut
 * every 255 bytes from a run's first byte; a unit start inside a run is a
 * multiple of 255 past it, so the rest of the run from there encodes to
 * rle1_size(rest) bytes whatever came before. So:
 * 1. the run starts and each run's size are found in parallel, with a
 *    prefix sum of the sizes (CUB);
 * 2. one warp walks the blocks in order (each block's end depends on where
 *    the one before ended): a block's end is found by a 32-way search of
 *    that prefix sum for the run where its limit falls, and the block takes
 *    that run's units up to the one that reaches the limit; a run cut after
 *    a unit is re-entered by the next block with the units before it
 *    skipped. A piece that does not end the input keeps only the blocks
 *    that end before its last byte (the run at its end may go on) and says
 *    how much of its input they cover;
 * 3. every thread writes 16 RLE1 bytes from the runs, and the block CRCs
 *    come from 4 KiB tiles on the shared CRC tables, moved to the block end
 *    and xored together.
 */
#include <cub/cub.cuh>
#include <cuda/functional>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "bz2_gpu.cuh"
#include "crc32c_device.cuh"

namespace gcgpu {

namespace {

/* RLE1 bytes of a run of m equal bytes entered at its first byte. */
__device__ __forceinline__ uint32_t rle1_size(uint32_t m)
{
    uint32_t q = m / 255, r = m % 255;
    return 5 * q + (r >= 4 ? 5 : r);
}

/* Input bytes of a run of m (entered at a unit start) a block with `room`
 * RLE1 bytes left takes: its units up to the one that fills the room. */
__device__ __forceinline__ uint32_t rle1_take(uint32_t m, uint32_t room)
{
    uint32_t q = m / 255, j = (room + 4) / 5; /* 255-byte units (5 RLE1 bytes each) that fill it */
    return j < q || (j == q && m % 255 != 0) ? 255 * j : m;
}

/* RLE1 byte u of a run of m bytes of value b. */
__device__ __forceinline__ uint8_t rle1_byte(uint32_t m, uint8_t b, uint32_t u)
{
    uint32_t q = m / 255;
    if (u < 5 * q)
        return u % 5 < 4 ? b : (uint8_t)251;
    uint32_t r = m % 255;
    u -= 5 * q;
    return (r >= 4 && u == 4) ? (uint8_t)(r - 4) : b;
}

struct RunHead {
    const uint8_t *src;
    __device__ __forceinline__ bool operator()(uint32_t i) const
    {
        return i == 0 || src[i] != src[i - 1];
    }
};

struct RunSize {
    const uint32_t *runs;
    const uint32_t *n_runs;
    __device__ __forceinline__ uint32_t operator()(uint32_t k) const
    {
        return k < *n_runs ? rle1_size(runs[k + 1] - runs[k]) : 0u;
    }
};

__global__ void close_runs(uint32_t *runs, const uint32_t *n_runs, uint32_t len)
{
    runs[*n_runs] = len;
}

/* Largest k in [lo, hi] with off[k] <= target (off increasing, off[lo] <= target): a 32-way search by one warp. */
__device__ uint32_t warp_search(const uint32_t *off, uint32_t lo, uint32_t hi, uint32_t target)
{
    const unsigned lane = threadIdx.x & 31;
    while (lo < hi) {
        uint32_t step = (hi - lo + 31) / 32;
        uint64_t p = (uint64_t)lo + (uint64_t)(lane + 1) * step;
        bool ok = p <= hi && off[p] <= target;
        uint32_t c = __popc(__ballot_sync(0xffffffffu, ok));
        uint32_t nlo = lo + c * step;
        hi = c == 32 ? hi : min(hi, lo + (c + 1) * step - 1);
        lo = nlo;
    }
    return lo;
}

/*
 * One warp: the piece's blocks in order into blk, RLE1 offsets assigned,
 * crc_acc zeroed; res gets the count, the RLE1 total and the input the
 * blocks cover. With `whole` false the block that ends at len is dropped
 * (its last run may go on past the piece), unless it is the only one: a
 * piece shorter than one block then ends a block where it ends (a valid
 * stream, not bzip2's blocks; the callers make pieces far longer).
 */
__global__ void plan_blocks(const uint32_t *runs, const uint32_t *off, const uint32_t *n_runs_p, uint32_t len,
                            uint32_t limit, bool whole, Bz2Block *blk, uint32_t max_blocks, uint32_t *crc_acc,
                            Bz2Result *res)
{
    const unsigned lane = threadIdx.x & 31;
    const uint32_t n_runs = *n_runs_p;
    uint32_t k = 0, skip = 0, nb = 0, rle = 0;
    while (k < n_runs) {
        Bz2Block b = {};
        b.run0 = k;
        b.skip0 = skip;
        b.in_start = runs[k] + skip;
        b.rle_off = rle;
        uint32_t m0 = runs[k + 1] - runs[k] - skip;
        uint32_t f0 = rle1_size(m0);
        uint32_t k2 = k, used = 0, t; /* the run the block ends in, RLE1 bytes before it, input taken of it */
        if (f0 >= limit) {            /* the block ends in its first run */
            t = skip + rle1_take(m0, limit);
        } else {
            uint32_t base = off[k + 1];
            uint32_t hi = (uint32_t)min64(n_runs, (uint64_t)k + 1 + limit);
            k2 = warp_search(off, k + 1, hi, base + (limit - 1 - f0)); /* last run it starts under the limit */
            used = f0 + (off[k2] - base);
            t = k2 < n_runs ? rle1_take(runs[k2 + 1] - runs[k2], limit - used) : 0;
        }
        uint32_t end = k2 < n_runs ? runs[k2] + t : len;
        b.in_len = end - b.in_start;
        b.n = k2 == k ? rle1_size(t - skip) : used + (k2 < n_runs ? rle1_size(t) : 0);
        if (end == len && !whole && nb > 0)
            break;
        if (nb >= max_blocks) { /* cannot happen (max_blocks bounds a piece's blocks) */
            if (lane == 0)
                res->status = GC_E_INTERNAL;
            return;
        }
        if (lane == 0) {
            blk[nb] = b;
            crc_acc[nb] = 0;
        }
        nb++;
        rle += b.n;
        if (end == len)
            break;
        bool run_done = end == runs[k2 + 1];
        k = run_done ? k2 + 1 : k2;
        skip = run_done ? 0 : t;
    }
    if (lane == 0) {
        res->blocks = nb;
        res->rle_bytes = rle;
        res->in_used = nb ? blk[nb - 1].in_start + blk[nb - 1].in_len : 0;
    }
}

/* RLE1 bytes [lo, hi) of block b, from its runs. */
__device__ void write_block_rle1(const uint8_t *src, const uint32_t *runs, const uint32_t *off, const Bz2Block &b,
                                 uint32_t lo, uint32_t hi, uint8_t *rle)
{
    uint32_t m0 = runs[b.run0 + 1] - runs[b.run0] - b.skip0;
    uint32_t f0 = rle1_size(m0);
    uint32_t k, start, m; /* the run holding lo, its first byte's local offset, its length here */
    if (lo < f0) {
        k = b.run0, start = 0, m = m0;
    } else {
        uint32_t base = off[b.run0 + 1];
        uint32_t lo_k = b.run0 + 1, hi_k = b.run0 + 1 + (lo - f0); /* a run is >= 1 RLE1 byte */
        uint32_t target = base + (lo - f0);
        while (lo_k < hi_k) {
            uint32_t mid = (uint32_t)(((uint64_t)lo_k + hi_k + 1) / 2);
            if (off[mid] <= target)
                lo_k = mid;
            else
                hi_k = mid - 1;
        }
        k = lo_k, start = f0 + off[k] - base, m = runs[k + 1] - runs[k];
    }
    for (uint32_t u = lo; u < hi; u++) {
        if (u - start >= rle1_size(m)) { /* the next run (whole: only a block's last run is cut) */
            start += rle1_size(m);
            k++;
            m = runs[k + 1] - runs[k];
        }
        rle[b.rle_off + u] = rle1_byte(m, src[runs[k]], u - start);
    }
}

/* kBz2RleBytesPerThread RLE1 bytes per thread, block by block. */
__global__ void write_rle1(const uint8_t *src, const uint32_t *runs, const uint32_t *off, const Bz2Block *blk,
                           uint32_t nb, uint64_t total, uint8_t *rle)
{
    uint64_t o = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * kBz2RleBytesPerThread;
    uint64_t e = min64(total, o + kBz2RleBytesPerThread);
    if (o >= e)
        return;
    for (uint32_t bi = block_at<&Bz2Block::rle_off>(blk, nb, o); o < e; bi++) {
        const Bz2Block &b = blk[bi];
        uint64_t be = min64(e, (uint64_t)b.rle_off + b.n);
        write_block_rle1(src, runs, off, b, (uint32_t)(o - b.rle_off), (uint32_t)(be - b.rle_off), rle);
        o = be;
    }
}

/* Byte v with its bits reversed: bzip2's MSB-first CRC is the reflected CRC-32 of such bytes, reversed. */
__device__ __forceinline__ uint32_t brev8(uint32_t v)
{
    return __brev(v) >> 24;
}

/* One 4 KiB tile per thread: the raw reflected CRC-32 of each block's part, moved to the block's end. */
__global__ void crc_tiles(const uint8_t *src, uint64_t len, const Bz2Block *blk, uint32_t nb, const Crc32Tables *t,
                          uint32_t *acc)
{
    uint64_t a = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * kBz2CrcTile;
    if (a >= len)
        return;
    uint64_t e = min64(len, a + kBz2CrcTile);
    uint32_t bi = block_at<&Bz2Block::in_start>(blk, nb, a);
    const uint32_t *t0 = t->t8[0];
    while (a < e && bi < nb) {
        const Bz2Block &b = blk[bi];
        uint64_t be = (uint64_t)b.in_start + b.in_len;
        uint64_t stop = min(e, be);
        uint32_t c = 0;
        for (uint64_t i = a; i < stop; i++)
            c = __ldg(&t0[(c ^ brev8(src[i])) & 0xff]) ^ (c >> 8);
        atomicXor(&acc[bi], mul_xpow8(t, c, be - stop));
        a = stop;
        bi++;
    }
}

__global__ void crc_finish(Bz2Block *blk, uint32_t nb, const Crc32Tables *t, const uint32_t *acc)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nb)
        return;
    blk[i].crc = __brev(acc[i] ^ mul_xpow8(t, 0xffffffffu, blk[i].in_len) ^ 0xffffffffu);
}

/* CRCs of blocks blk[0..nb) (in_start / in_len, ascending and back to back) of buf[0..len) into their crc; acc zeroed. */
int launch_crcs(const uint8_t *buf, uint64_t len, Bz2Block *blk, uint32_t nb, uint32_t *acc,
                const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err)
{
    uint64_t tiles = (len + kBz2CrcTile - 1) / kBz2CrcTile;
    crc_tiles<<<(unsigned)((tiles + kBz2Threads - 1) / kBz2Threads), kBz2Threads, 0, st>>>(buf, len, blk, nb,
                                                                                           d_tab32, acc);
    GC_CUDA_LAUNCHED("crc_tiles");
    crc_finish<<<(nb + kBz2Threads - 1) / kBz2Threads, kBz2Threads, 0, st>>>(blk, nb, d_tab32, acc);
    GC_CUDA_LAUNCHED("crc_finish");
    return GC_OK;
}

} // namespace

int bz2_plan(const uint8_t *d_src, uint64_t len, uint32_t limit, bool whole, Bz2Scratch &s, cudaStream_t st,
             uint32_t *blocks, uint64_t *rle_bytes, uint64_t *used, gc_error *err)
{
    size_t tmp = s.cub_bytes;
    thrust::counting_iterator<uint32_t> idx(0);
    GC_CUDA(cub::DeviceSelect::If(s.cub_tmp, tmp, idx, s.runs, s.n_runs, (int)len, RunHead{ d_src }, st));
    close_runs<<<1, 1, 0, st>>>(s.runs, s.n_runs, (uint32_t)len);
    GC_CUDA_LAUNCHED("close_runs");
    auto sizes = thrust::make_transform_iterator(idx, RunSize{ s.runs, s.n_runs });
    tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceScan::ExclusiveSum(s.cub_tmp, tmp, sizes, s.run_off, (int)len + 1, st));
    plan_blocks<<<1, 32, 0, st>>>(s.runs, s.run_off, s.n_runs, (uint32_t)len, limit, whole, s.blk, s.max_blocks,
                                  s.crc_acc, s.res);
    GC_CUDA_LAUNCHED("plan_blocks");
    bz2_prof(st, "plan_blocks", len);
    Bz2Result r;
    GC_CUDA(cudaMemcpyAsync(&r, s.res, sizeof r, cudaMemcpyDeviceToHost, st));
    GC_CUDA(cudaStreamSynchronize(st));
    if (r.status)
        return gc_fail(err, (gc_status)r.status, "gpu bzip2: the block planner overflowed its table");
    *blocks = r.blocks;
    *rle_bytes = r.rle_bytes;
    *used = r.in_used;
    return GC_OK;
}

int bz2_rle1_crc(const uint8_t *d_src, uint64_t len, uint32_t blocks, uint64_t rle_total, Bz2Scratch &s,
                 const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err)
{
    if (blocks == 0)
        return GC_OK;
    uint64_t threads = (rle_total + kBz2RleBytesPerThread - 1) / kBz2RleBytesPerThread;
    write_rle1<<<(unsigned)((threads + kBz2Threads - 1) / kBz2Threads), kBz2Threads, 0, st>>>(
        d_src, s.runs, s.run_off, s.blk, blocks, rle_total, s.rle);
    GC_CUDA_LAUNCHED("write_rle1");
    bz2_prof(st, "write_rle1", rle_total);
    /* the planner zeroed crc_acc */
    int rc = launch_crcs(d_src, len, s.blk, blocks, s.crc_acc, d_tab32, st, err);
    bz2_prof(st, "crc_finish", blocks);
    return rc;
}

int bz2_block_crcs(const uint8_t *buf, uint64_t len, Bz2Block *blk, uint32_t nb, uint32_t *acc,
                   const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    GC_CUDA(cudaMemsetAsync(acc, 0, (size_t)nb * sizeof *acc, st));
    return launch_crcs(buf, len, blk, nb, acc, d_tab32, st, err);
}

} // namespace gcgpu
