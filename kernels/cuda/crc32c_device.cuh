/*
 * crc32c_device.cuh - parallel CRC32C on the device.
 *
 * CRC is linear over GF(2): with raw(M) the CRC register after M from a zero
 * start (no final xor),
 *     raw(A || B) = raw(A) * x^(8|B|) + raw(B)      (mod P)
 *     raw(0^k || M) = raw(M)                         (leading zeros are free)
 *     crc32c(M) = raw(M) + 0xFFFFFFFF * x^(8|M|) + 0xFFFFFFFF
 * so every thread computes raw() of its own 64 contiguous bytes with
 * slicing-by-8 tables in shared memory, multiplies it by the constant that
 * moves it to the end of the block's 16 KiB window (one multiply per 64
 * bytes), and the block XOR-reduces. Bytes outside the data are zero in the
 * window: zeros before are free, zeros after are removed at the end with one
 * multiply by x^(-8k). Windows combine the same way at chunk level.
 * All polynomials are in the reflected representation: bit 31 is x^0.
 */
#ifndef GC_CRC32C_DEVICE_CUH
#define GC_CRC32C_DEVICE_CUH

#include "gpu_internal.cuh"

namespace gcgpu {

/* a * b mod P, reflected. Branch-free: 32 steps. */
__host__ __device__ __forceinline__ uint32_t gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < 32; i++) {
        p ^= (0u - ((a >> (31 - i)) & 1u)) & b;
        b = (b >> 1) ^ ((0u - (b & 1u)) & kPoly);
    }
    return p;
}

/* v, hidden from the optimiser: gf2_mul(k, x) with a loop-invariant k would
 * otherwise get its 32 bit masks hoisted out of the loop (32 live registers,
 * spilled under the kernels' register caps). */
__device__ __forceinline__ uint32_t opaque(uint32_t v)
{
    asm volatile("" : "+r"(v));
    return v;
}

/* x^(8n) mod P from the table of x^(8*2^k). */
__device__ __forceinline__ uint32_t xpow8(const CrcTables *t, uint64_t n)
{
    uint32_t p = 0x80000000u;
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1)
            p = gf2_mul(__ldg(&t->xp8[k]), p);
    return p;
}

/* x^(-8n) mod P. */
__device__ __forceinline__ uint32_t xinv8(const CrcTables *t, uint64_t n)
{
    uint32_t p = 0x80000000u;
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1)
            p = gf2_mul(__ldg(&t->xi8[k]), p);
    return p;
}

/* raw CRC (zero start) of 64 bytes held as 16 little-endian words. */
__device__ __forceinline__ uint32_t seg_crc(const uint32_t (*tb)[256], const uint32_t w[16])
{
    uint32_t crc = 0;
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
        uint32_t a = w[i] ^ crc, b = w[i + 1];
        crc = tb[7][a & 255] ^ tb[6][(a >> 8) & 255] ^ tb[5][(a >> 16) & 255] ^ tb[4][a >> 24] ^
              tb[3][b & 255] ^ tb[2][(b >> 8) & 255] ^ tb[1][(b >> 16) & 255] ^ tb[0][b >> 24];
    }
    return crc;
}

/* Copy the slicing tables into shared memory (call with all threads, then sync). */
__device__ __forceinline__ void load_tables(uint32_t (*s)[256], const CrcTables *t)
{
    for (int i = threadIdx.x; i < 8 * 256; i += blockDim.x)
        s[i >> 8][i & 255] = __ldg(&t->t8[i >> 8][i & 255]);
}

/* XOR of v over the block; valid in every thread. `red` is 32 words of shared memory. */
__device__ __forceinline__ uint32_t block_xor(uint32_t v, uint32_t *red)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v ^= __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* red may still be read from the previous call */
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    uint32_t r = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++)
        r ^= red[i];
    return r;
}

/* Zero the bytes of a 64-byte segment outside [lo, hi) (segment-relative, may be
 * <0 or >64). */
__device__ __forceinline__ void mask_seg(uint32_t w[16], int64_t lo, int64_t hi)
{
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int64_t b = 4 * i;
        uint32_t keep = 0xffffffffu;
        if (lo > b)
            keep = lo >= b + 4 ? 0u : keep << (8 * (lo - b));
        if (hi < b + 4)
            keep &= hi <= b ? 0u : keep & (0xffffffffu >> (8 * (b + 4 - hi)));
        w[i] &= keep;
    }
}

} // namespace gcgpu

#endif
