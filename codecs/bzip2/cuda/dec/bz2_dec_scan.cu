/*
 * bz2_dec_scan.cu - the decoder's block candidates: every bit offset where
 * the 48-bit block magic starts. One thread per input byte tests the eight
 * offsets that start in it; hits are rare (blocks, and the odd false
 * positive inside compressed data), so they are appended with an atomic and
 * sorted afterwards with CUB.
 */
#include <cub/cub.cuh>

#include "bz2_dec.cuh"

namespace gcgpu {
namespace {

__device__ __forceinline__ uint32_t byte_at(const uint8_t *p, uint64_t len, uint64_t i)
{
    return i < len ? p[i] : 0u;
}

__global__ void scan_magic(const uint8_t *in, uint64_t len, uint64_t *cand, uint32_t cap, uint32_t *n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < len;
         i += (uint64_t)gridDim.x * blockDim.x) {
        /* byte i + 2 lies inside the magic for every shift: a cheap filter */
        uint32_t b2 = byte_at(in, len, i + 2);
        bool maybe = false;
        for (int s = 0; s < 8; s++)
            maybe |= b2 == (uint32_t)((BZ2_BLOCK_MAGIC >> (24 + s)) & 0xff);
        if (!maybe)
            continue;
        uint64_t w = 0;
        for (int k = 0; k < 8; k++)
            w = w << 8 | byte_at(in, len, i + k);
        for (int s = 0; s < 8; s++) {
            uint64_t bit = i * 8 + s;
            if (bit + 48 <= len * 8 && ((w >> (16 - s)) & 0xffffffffffffull) == BZ2_BLOCK_MAGIC) {
                uint32_t k = atomicAdd(n, 1u);
                if (k < cap)
                    cand[k] = bit;
            }
        }
    }
}

} // namespace

int bz2_dec_scan_tmp(uint32_t cand_cap, size_t *bytes, gc_error *err)
{
    *bytes = 0;
    GC_CUDA(cub::DeviceRadixSort::SortKeys(nullptr, *bytes, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                           (int)cand_cap, 0, 64));
    return GC_OK;
}

int bz2_dec_scan(const uint8_t *d_in, uint64_t len, DecScratch &s, uint64_t *out, uint32_t cap, cudaStream_t st,
                 uint32_t *n, gc_error *err)
{
    *n = 0;
    cap = cap < s.cand_cap ? cap : s.cand_cap;
    if (len == 0)
        return GC_OK;
    GC_CUDA(cudaMemsetAsync(s.n_cand, 0, sizeof(uint32_t), st));
    int grid = 0;
    int rc = resident_grid(scan_magic, 0, (len + kDecThreads - 1) / kDecThreads, &grid, err);
    if (rc != GC_OK)
        return rc;
    scan_magic<<<grid, kDecThreads, 0, st>>>(d_in, len, s.cand_tmp, cap, s.n_cand);
    GC_CUDA_LAUNCHED("scan_magic");
    uint32_t found = 0;
    GC_CUDA(cudaMemcpyAsync(&found, s.n_cand, sizeof found, cudaMemcpyDeviceToHost, st));
    GC_CUDA(cudaStreamSynchronize(st));
    if (found > cap)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: more than %u block candidates", cap);
    int bits = 64 - __builtin_clzll(len * 8);
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceRadixSort::SortKeys(s.cub_tmp, tmp, s.cand_tmp, out, (int)found, 0, bits, st));
    *n = found;
    return GC_OK;
}

} // namespace gcgpu
