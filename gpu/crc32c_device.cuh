/*
 * crc32c_device.cuh - parallel CRC on the device: CRC32C for the rle codec,
 * and any other reflected CRC-32 (zlib's crc32) from the same code. Every
 * function takes the tables of one (polynomial, block geometry) pair,
 * CrcTablesT<Poly, Threads> (gpu_internal.cuh), and its constants from that type; the
 * examples below are for the rle geometry (256 threads, 16 KiB windows).
 *
 * CRC is linear over GF(2): with raw(M) the CRC register after M from a zero
 * start (no final xor),
 *     raw(A || B) = raw(A) * x^(8|B|) + raw(B)      (mod P)
 *     raw(0^k || M) = raw(M)                         (leading zeros are free)
 *     crc32c(M) = raw(M) + 0xFFFFFFFF * x^(8|M|) + 0xFFFFFFFF
 * so every warp computes raw() of its own 2 KiB moved to the end of that
 * 2 KiB (warp_crc, on the tensor cores),
 * and warp 0 moves the warps' CRCs to the end of the block's 16 KiB window
 * with one nibble-table multiply each and XOR-reduces them (block_crc).
 * Bytes outside the data are zero in the
 * window: zeros before are free, zeros after are removed at the end with one
 * multiply by x^(-8k). Windows combine the same way at chunk level. A warp
 * that checksums consecutive spans itself (the decoder's) needs no
 * multiply between them: the CRC so far, XORed into the next span's first
 * 4 bytes, comes out multiplied by x^(8|span|).
 * All polynomials are in the reflected representation: bit 31 is x^0.
 */
#ifndef GC_CRC32C_DEVICE_CUH
#define GC_CRC32C_DEVICE_CUH

#include "gpu_internal.cuh"

namespace gcgpu {

/* a * b mod Poly, reflected. Branch-free: 32 steps. */
template <uint32_t Poly>
__host__ __device__ __forceinline__ uint32_t gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < 32; i++) {
        p ^= (0u - ((a >> (31 - i)) & 1u)) & b;
        b = (b >> 1) ^ ((0u - (b & 1u)) & Poly);
    }
    return p;
}

/* c times the constant whose nibble table is tab (tab[n*16 + v] = (v << 4n) *
 * constant, see CrcTablesT::wm): eight independent loads instead of gf2_mul's
 * 32 dependent steps, for the multiplications on a block's critical path. */
__device__ __forceinline__ uint32_t mul_nibbles(const uint32_t *tab, uint32_t c)
{
    uint32_t r = 0;
#pragma unroll
    for (int n = 0; n < 8; n++)
        r ^= __ldg(&tab[n * 16 + ((c >> (4 * n)) & 15u)]);
    return r;
}

/* c * x^(8n) from the nibble tables nib of x^(8*2^k) (bits k < kPowNibbleBits
 * of n) and the plain powers pow (higher bits): one table multiply per set
 * bit of n, eight independent loads each, where a bit-serial multiply per
 * set bit takes 32 dependent steps. */
template <uint32_t Poly>
__device__ __forceinline__ uint32_t mul_xpow_from(const uint32_t (*nib)[8][16], const uint32_t *pow, uint32_t c,
                                                  uint64_t n)
{
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1)
            c = k < kPowNibbleBits ? mul_nibbles(&nib[k][0][0], c) : gf2_mul<Poly>(__ldg(&pow[k]), c);
    return c;
}

/* c * x^(8n) mod P: c's CRC moved on by n bytes. */
template <class Tab>
__device__ __forceinline__ uint32_t mul_xpow8(const Tab *t, uint32_t c, uint64_t n)
{
    return mul_xpow_from<Tab::kPoly>(t->xpn, t->xp8, c, n);
}

/* c * x^(-8n) mod P: moved back by n bytes. */
template <class Tab>
__device__ __forceinline__ uint32_t mul_xinv8(const Tab *t, uint32_t c, uint64_t n)
{
    return mul_xpow_from<Tab::kPoly>(t->xin, t->xi8, c, n);
}

/*
 * The CRC of len bytes ending `past` bytes before the reference point ref,
 * from acc, the xor of the raw window CRCs each shifted to ref: shift back by
 * `past`, then apply the standard init/final xor (0xFFFFFFFF) for len bytes.
 */
template <class Tab>
__device__ __forceinline__ uint32_t crc_at_ref(const Tab *t, uint32_t acc, uint64_t past, uint64_t len)
{
    return mul_xinv8(t, acc, past) ^ mul_xpow8(t, 0xffffffffu, len) ^ 0xffffffffu;
}

/*
 * The CRC of a warp's 2 KiB on the tensor cores (sm_80 or later, as the whole
 * backend). A CRC is linear over GF(2), so the raw CRC of 256 bytes is a
 * 32 x 2048 bit matrix times the data's bits, and mma.sync's b1
 * AND + popcount form computes exactly such products: the
 * parity (bit 0) of popc(row AND column) is the GF(2) dot product, and the
 * accumulator adds up k-steps, which keeps parities adding as XOR. The data
 * goes in as the A fragment unchanged (each lane's own words, see warp_crc),
 * the CRC matrix as the B fragment (CrcTablesT::mb), and every row's result is
 * moved to the warp's end through small per-lane tables (CrcTablesT::mr).
 * 16 tensor-core instructions and 12 shared loads per lane replace 72
 * data-dependent table lookups, and none of them conflicts in the banks:
 * lookup tables in shared memory (slicing-by-8 and its variants) are bound by
 * bank conflicts and reached less than half this speed (the measurements are
 * in docs/history/BENCHMARKS-2026-11.md).
 */
constexpr int kMmaBWords = 8 * 32 * 4;
constexpr int kMmaRWords = 4 * 16 * 32;
constexpr size_t kCrcSmemBytes = 4 * (kMmaBWords + kMmaRWords); /* 12 KiB */

struct CrcSmem {
    const uint4 *mb;    /* CrcTablesT::mb */
    const uint32_t *mr; /* CrcTablesT::mr */
};

/* Fill the CRC tables at smem (kCrcSmemBytes of dynamic shared memory; call
 * with all threads, then sync). */
template <class Tab>
__device__ __forceinline__ CrcSmem load_crc_smem(uint32_t *smem, const Tab *t)
{
    const uint32_t *b = &t->mb[0][0][0], *r = &t->mr[0][0][0];
    for (int i = threadIdx.x; i < kMmaBWords; i += blockDim.x)
        smem[i] = __ldg(&b[i]);
    for (int i = threadIdx.x; i < kMmaRWords; i += blockDim.x)
        smem[kMmaBWords + i] = __ldg(&r[i]);
    return CrcSmem{ reinterpret_cast<const uint4 *>(smem), smem + kMmaBWords };
}

/* c += A (16 x 256 bits) AND-popcount B (256 x 8 bits), the PTX fragment layouts */
__device__ __forceinline__ void mma_and_popc(int c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/*
 * This lane's share of the raw CRC of its warp's 2 KiB (lane l holding bytes
 * [64 l, 64 l + 64) as w), moved to the warp's end: the XOR over the warp's
 * lanes is the CRC. All 32 lanes must call it together.
 *
 * Fragments (PTX ISA, mma.m16n8k256 .b1; g = lane / 4, t = lane % 4): A row g
 * takes bits [32 t, 32 t + 32) from a0 and [128 + 32 t, ...) from a2 of lane
 * (g, t), row g + 8 the same from a1 and a3. With a0..a3 = words 4s..4s + 3
 * (one aligned register quad, as the cell's 16-byte loads left it: any
 * other order costs four register moves per mma), k-step s (0..3) puts bytes
 * 16s + {0..3, 8..11} of lanes 4g..4g+3's cells in row g and the same
 * bytes 4 later in row g + 8. Every row's bits then stand at the same place
 * of a 256-byte row, shifted by 4 bytes for rows g + 8, which is what
 * lets one B matrix (mb) serve all rows; n-tile j gives CRC bits 8j..8j+7 as
 * accumulator columns (c0, c1: row g, columns 2t, 2t + 1; c2, c3: row g + 8).
 * Each lane looks its 16 result bits up in mr, 4 at a time, already moved by
 * its row's distance to the warp's end.
 */
__device__ __forceinline__ uint32_t warp_crc(const CrcSmem &cs, const uint32_t w[16])
{
    const int lane = threadIdx.x & 31;
    int c[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0;
#pragma unroll
    for (int s = 0; s < 4; s++) {
        const uint4 b01 = cs.mb[(2 * s) * 32 + lane], b23 = cs.mb[(2 * s + 1) * 32 + lane];
        const uint32_t a0 = w[4 * s], a1 = w[4 * s + 1], a2 = w[4 * s + 2], a3 = w[4 * s + 3];
        mma_and_popc(c[0], a0, a1, a2, a3, b01.x, b01.y);
        mma_and_popc(c[1], a0, a1, a2, a3, b01.z, b01.w);
        mma_and_popc(c[2], a0, a1, a2, a3, b23.x, b23.y);
        mma_and_popc(c[3], a0, a1, a2, a3, b23.z, b23.w);
    }
    uint32_t r = 0;
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int p = 0; p < 2; p++) {
            const uint32_t v = (c[2 * p][2 * h] & 1) | (c[2 * p][2 * h + 1] & 1) << 1 |
                               (c[2 * p + 1][2 * h] & 1) << 2 | (c[2 * p + 1][2 * h + 1] & 1) << 3;
            r ^= cs.mr[((2 * h + p) * 16 + v) * 32 + lane];
        }
    return r;
}

/* Warp-part shift for lane i < Tab::kWarps of warp 0: the nibble table of
 * x^(8*2048*(kWarps-1-i)) (blocks of Tab::kThreads threads; 8 warps for rle). */
template <class Tab>
__device__ __forceinline__ const uint32_t *warp_shift_table(const Tab *t)
{
    return &t->wm[threadIdx.x % Tab::kWarps][0][0];
}

/* Shared words for the block reductions below: two halves of 32 words used
 * by turns, so that a reduction need not wait at a block barrier for the
 * previous one's readers (warp 0, every thread in block_xor): they are done
 * with a half before they pass the next reduction's barrier, and only the one
 * after that writes it again. Every thread of the block makes the same calls. */
struct BlockRed {
    uint32_t *words; /* 64 words of shared memory */
    uint32_t turn;
};

/* XOR of v over each warp into half[warp] of rb's next half, returned for the
 * whole block to read: the first half of block_crc and block_xor. */
__device__ __forceinline__ const uint32_t *warp_xors_to_smem(uint32_t v, BlockRed &rb)
{
    v = __reduce_xor_sync(0xffffffffu, v); /* one redux, not five shuffles */
    uint32_t *half = rb.words + 32 * (rb.turn++ & 1);
    if ((threadIdx.x & 31) == 0)
        half[threadIdx.x >> 5] = v;
    __syncthreads();
    return half;
}

/* Raw CRC of the block's window from the lanes' shares v of their warp's CRC
 * (see warp_crc); wk from warp_shift_table. Valid in warp 0 (thread 0 used).
 * Warp 0's part is short: the other warps wait for it at the next window's
 * barrier. */
__device__ __forceinline__ uint32_t block_crc(uint32_t v, BlockRed &rb, const uint32_t *wk)
{
    const uint32_t *red = warp_xors_to_smem(v, rb);
    uint32_t r = 0;
    if (threadIdx.x < 32) {
        if (threadIdx.x < (blockDim.x >> 5))
            r = mul_nibbles(wk, red[threadIdx.x]);
        r = __reduce_xor_sync(0xffffffffu, r); /* one redux, not five shuffles */
    }
    return r;
}

/* Raw CRC of the block's window, each thread holding its 64-byte cell in w
 * (bytes outside the data zeroed); wk from warp_shift_table. Valid in thread 0. */
__device__ __forceinline__ uint32_t window_crc(const CrcSmem &cs, const uint32_t w[16], BlockRed &rb,
                                               const uint32_t *wk)
{
    return block_crc(warp_crc(cs, w), rb, wk);
}

/* XOR of v over the block; valid in every thread. */
__device__ __forceinline__ uint32_t block_xor(uint32_t v, BlockRed &rb)
{
    const uint32_t *red = warp_xors_to_smem(v, rb);
    uint32_t r = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++)
        r ^= red[i];
    return r;
}

/* Zero the bytes of a 64-byte cell outside [lo, hi) (cell-relative, may be
 * <0 or >64; callers' tiles are far smaller than 2^31). */
__device__ __forceinline__ void mask_cell(uint32_t w[16], int32_t lo, int32_t hi)
{
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const int32_t b = 4 * i;
        uint32_t keep = 0xffffffffu;
        if (lo > b)
            keep = lo >= b + 4 ? 0u : keep << (8 * (lo - b));
        if (hi < b + 4)
            keep &= hi <= b ? 0u : keep & (0xffffffffu >> (8 * (b + 4 - hi)));
        w[i] &= keep;
    }
}

/* mask_cell with the common case (the whole cell is data) skipped: the
 * 16 guarded word masks cost ~3 instructions per byte when always run. */
__device__ __forceinline__ void mask_cell_edges(uint32_t w[16], int32_t lo, int32_t hi)
{
    if (lo > 0 || hi < 64)
        mask_cell(w, lo, hi);
}

/*
 * The CRC (init and final xor 0xFFFFFFFF) of len bytes at d_src (16-byte
 * aligned) into *d_crc, asynchronously on stream: a block per window of
 * Tab::kWin bytes, then one block combines them. scratch: at least
 * crc_scratch_bytes<Tab>(len) bytes of device memory. Instantiated in
 * crc32c_device.cu for CrcTables, Crc32Tables and CrcTablesT<kCrc32Poly, 128>.
 */
template <class Tab>
constexpr size_t crc_scratch_bytes(uint64_t len)
{
    return 4 * (size_t)((len + Tab::kWin - 1) / Tab::kWin);
}

template <class Tab>
int crc_launch(const Tab *d_tab, const uint8_t *d_src, uint64_t len, uint32_t *d_crc, void *scratch,
               size_t scratch_len, cudaStream_t stream, gc_error *err);

} // namespace gcgpu

#endif
