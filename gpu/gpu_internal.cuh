/*
 * gpu_internal.cuh - shared by the CUDA backend's translation units (not
 * installed, not seen by C code): error macro, the CRC tables
 * every CRC kernel gets by pointer, and the host launchers of the encoder
 * and decoder that rle_gpu.cu and gpu_resident.cu string together.
 */
#ifndef GC_GPU_INTERNAL_CUH
#define GC_GPU_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

#include "gpu.h"
#include "tile_policy.cuh"

/* Every CUDA call goes through this: a failure becomes GC_E_DEVICE with the
 * runtime's message in *err and the calling function returns it. Never exits. */
#define GC_CUDA(call)                                                                                        \
    do {                                                                                                     \
        cudaError_t gc_cuda_rc_ = (call);                                                                    \
        if (gc_cuda_rc_ != cudaSuccess)                                                                      \
            return gc_fail(err, GC_E_DEVICE, "cuda: %s: %s (%s:%d)", #call, cudaGetErrorString(gc_cuda_rc_), \
                           __FILE__, __LINE__);                                                              \
    } while (0)

/* After a kernel launch: launch-configuration errors surface here. */
#define GC_CUDA_LAUNCHED(name) GC_CUDA(cudaGetLastError())

namespace gcgpu {

/* Every lane of a warp, for the *_sync intrinsics. */
constexpr uint32_t kFull = 0xffffffffu;

/* A CUDA event owned by a scope: destroyed on every way out of it, the early
 * returns of GC_CUDA included. */
class CudaEvent {
  public:
    CudaEvent() = default;
    ~CudaEvent()
    {
        if (e_)
            cudaEventDestroy(e_);
    }
    CudaEvent(const CudaEvent &) = delete;
    CudaEvent &operator=(const CudaEvent &) = delete;
    cudaError_t create()
    {
        return cudaEventCreate(&e_);
    }
    cudaEvent_t get() const
    {
        return e_;
    }

  private:
    cudaEvent_t e_ = nullptr;
};

/*
 * The device CRC machinery (crc32c_device.cuh) is a function of a reflected
 * polynomial (bit 31 is x^0) and a block geometry (threads per block): its
 * tables are one CrcTablesT<Poly, Threads> object, built on the host
 * (crc_tables_build) and handed to the kernels by pointer. Both polynomials
 * below use init and final xor 0xFFFFFFFF.
 *
 * bzip2's CRC-32 is the same polynomial as kCrc32Poly written MSB-first
 * (0x04C11DB7, CRC-32/BZIP2: neither input nor output reflected), so
 *     bzip2_crc(M) = brev32(crc32(M with each byte's bits reversed))
 * and the machinery serves it without a second code path: the byte reversal
 * is a permutation of the data bits, which can be folded into the tensor-core
 * matrix (CrcTablesT::mb, built from bit_crc[byte][7 - bit] instead of
 * [bit]), leaving one __brev of the final CRC; the combining multiplies stay
 * reflected. The bzip2 encoder (bz2_enc_plan.cu) uses these CRC-32 tables'
 * slicing table on bit-reversed bytes and their shifts to combine tiles: a
 * block CRC is a small part of its time, so the tensor-core variant is not built.
 */
constexpr uint32_t kCrc32cPoly = 0x82F63B78u; /* CRC32C (Castagnoli): the rle codec's chunk and header CRC */
constexpr uint32_t kCrc32Poly = 0xEDB88320u;  /* CRC-32 (IEEE 802.3), zlib's crc32 */
/* CRCs are moved by up to 2^kPowNibbleBits - 1 bytes with nibble tables (a
 * chunk is at most 2^26 bytes); longer distances use the bit-serial multiply. */
constexpr int kPowNibbleBits = 28;
constexpr int kSpanShifts = 64; /* CrcTablesT::xsp */

/* Tables the kernels copy to shared memory or read directly, for one
 * polynomial and one block geometry: blocks of Threads threads, each owning a
 * kCell-byte cell, so windows of Threads * kCell bytes (warp_crc fixes the
 * cell and the warp's 2 KiB span; the thread count is free). */
template <uint32_t Poly, int Threads>
struct CrcTablesT {
    static_assert(Threads >= 32 && Threads <= 1024 && Threads % 32 == 0, "blocks of whole warps");
    static constexpr uint32_t kPoly = Poly;
    static constexpr int kThreads = Threads;
    static constexpr int kWarps = Threads / 32;
    static constexpr uint32_t kWin = (uint32_t)Threads * kCell; /* bytes of a block's window */

    uint32_t t8[8][256];     /* slicing-by-8 (building the others) */
    uint32_t xp8[32];        /* x^(8*2^k) mod P  (reflected) */
    uint32_t xi8[32];        /* x^(-8*2^k) mod P */
    uint32_t kcell[Threads]; /* x^(8*kCell*(Threads-1-t)): shift of thread t's cell to the window end */
    /* multiplications by constants, by nibbles (see mul_nibbles):
     * wm[w][n][v] = (v << 4n) * x^(8*2048*(kWarps-1-w)): warp w's CRC moved to the end of
     * its window (the constants kcell[32w + 31]);
     * xpn[k][n][v] = (v << 4n) * x^(8*2^k) and xin[k][n][v] = (v << 4n) * x^(-8*2^k):
     * a CRC moved on or back by 2^k bytes (see mul_xpow8) */
    uint32_t wm[kWarps][8][16];
    uint32_t xpn[kPowNibbleBits][8][16];
    uint32_t xin[kPowNibbleBits][8][16];
    /* xsp[m][n][v] = (v << 4n) * x^(8*2048*m): a CRC moved on by m spans of
     * 2 KiB, one nibble multiply (the decoder's warps, see expand_spans) */
    uint32_t xsp[kSpanShifts][8][16];
    /* tensor-core CRC (warp_crc in crc32c_device.cuh):
     * mb[2s + j/2][l][2(j&1) + r]: register b_r of lane l's B fragment for
     * k-step s and n-tile j (bit i: CRC bit 8j + l/4 of data bit i of word
     * 4s + 2r of cell l%4, 256-byte rows);
     * mr[2h + p][v][l]: the CRC bits that the 4-bit value v stands for in lane
     * l's part of row l/4 + 8h (bytes 2p, 2p + 1), moved to the warp's end. */
    uint32_t mb[8][32][4];
    uint32_t mr[4][16][32];
};

/* The rle codec's tables: CRC32C on the backend's block geometry (tile_policy.cuh). */
using CrcTables = CrcTablesT<kCrc32cPoly, kThreads>;
/* zlib's CRC-32 on the same geometry (tests; bzip2's CRC, see above). */
using Crc32Tables = CrcTablesT<kCrc32Poly, kThreads>;

/* Build the tables on the host (crc32c_device.cu; instantiated there for the
 * (polynomial, geometry) pairs the backend and its tests use). */
template <uint32_t Poly, int Threads>
void crc_tables_build(CrcTablesT<Poly, Threads> *t);

/* Per-tile summary written by the encoder's analysis pass. */
struct TileSum {
    uint32_t count;  /* run heads in the tile */
    int32_t first;   /* element index (chunk-relative) of the first head, or INT32_MAX */
    int32_t last;    /* ... of the last head, or -1 */
    uint32_t maxgap; /* longest run between two heads of the tile that cross cells */
    uint32_t crcw;   /* raw CRC (init 0, no xor) of the tile's bytes over its window */
    uint32_t spec;   /* 1: the analysis pass wrote the tile's bytes where an all-stored frame has them */
};

struct ChunkEnc {
    uint32_t runs;
    uint32_t crc;
    uint8_t mode, lw, pad0, pad1;
    uint32_t rec_size;
};

struct EncParams {
    const uint8_t *src; /* body (16-byte aligned) */
    uint64_t body_len;
    unsigned width;
    uint32_t chunk_size;
    uint64_t chunk_count;
    uint8_t *records;     /* where chunk records go (any alignment) */
    uint64_t records_cap; /* bytes writable at records */
    uint8_t *out_base;    /* 16-byte aligned base that `records` lies in */
    uint32_t *index;      /* chunk_count record sizes (4-byte aligned) */
};

/* Scratch bytes for an encode / decode of n bytes in chunks of chunk_size. */
size_t enc_scratch_bytes(uint64_t body_len, unsigned width, uint32_t chunk_size);
size_t dec_scratch_bytes(uint64_t body_len, unsigned width, uint32_t chunk_size);

/*
 * Encode the body into records + index on `stream` (asynchronous). After it,
 * scratch total (device) holds the bytes of records written.
 */
int enc_launch(const EncParams &p, const CrcTables *d_tab, void *scratch, size_t scratch_len, cudaStream_t stream,
               unsigned long long **d_total, gc_error *err);

/* Write the frame header (fixed part + tail; index already in place) and the
 * header CRC of a whole frame at d_frame; asynchronous. */
int enc_frame_header(uint8_t *d_frame, const uint8_t *d_src, uint64_t src_len, unsigned width, uint32_t chunk_size,
                     uint64_t chunk_count, const CrcTables *d_tab, void *scratch, size_t scratch_len,
                     cudaStream_t stream, gc_error *err);

struct DecParams {
    const uint8_t *records; /* chunk records back to back (any alignment) */
    uint64_t records_len;
    const uint32_t *index; /* device copy of the index entries (4-byte aligned) */
    unsigned width;
    uint32_t chunk_size;
    uint64_t chunk_count;
    uint64_t body_len; /* bytes of output (whole chunks) */
    uint8_t *out;      /* 16-byte aligned */
};

/*
 * Decode and verify; asynchronous. *d_status points to chunk_count status
 * words (0 = OK, else (gc_status << 8) | check) in device scratch.
 */
int dec_launch(const DecParams &p, const CrcTables *d_tab, void *scratch, size_t scratch_len, cudaStream_t stream,
               uint32_t **d_status, gc_error *err);

/* Turn a non-zero chunk status word into an error. */
int dec_status_error(uint32_t status, uint64_t chunk, gc_error *err);

/* Whether host address p is page-locked (cudaMallocHost, cudaHostRegister):
 * DMA can use it directly (gpu_context.cu). */
bool host_pinned(const void *p);

/* Make *buf (device memory) at least need bytes: it only grows, its bytes
 * are not kept; false (nothing held) when the device is out of memory
 * (gpu_context.cu). */
bool device_grow(uint8_t **buf, size_t *cap, size_t need);

/* SMs of the current device (cached per device); GC_E_DEVICE if the query fails. */
int device_sm_count(int *sms, gc_error *err);

/* Dynamic shared memory of the kernels that use it (see crc32c_device.cuh). */
extern __shared__ __align__(16) uint32_t dyn_smem[];

/*
 * Resident blocks of kThreads per SM of kernel `func` with dyn_smem bytes of
 * dynamic shared memory on the current device, after lifting the kernel's
 * limit to dyn_smem (needed above 48 KiB). Cached per (kernel, device,
 * bytes): the two runtime calls behind it cost microseconds of host time,
 * and the pipeline launches every kernel once per piece.
 */
int resident_blocks_per_sm(const void *func, size_t dyn_smem, int *per_sm, gc_error *err);

/*
 * Grid of a grid-stride kernel: as many blocks of kThreads as are resident at
 * once (occupancy API), capped by the work items. A larger grid leaves a
 * partial last wave idling SMs (Nsight Compute flagged up to a third of the
 * decoder's time for it).
 */
template <typename Kernel>
int resident_grid(Kernel kernel, size_t dyn_smem, uint64_t work, int *grid, gc_error *err)
{
    int per_sm = 0;
    int rc = resident_blocks_per_sm(reinterpret_cast<const void *>(kernel), dyn_smem, &per_sm, err);
    int sms = 0;
    if (rc == GC_OK)
        rc = device_sm_count(&sms, err);
    if (rc != GC_OK)
        return rc;
    uint64_t g = (uint64_t)per_sm * (uint64_t)sms;
    if (work < g)
        g = work;
    *grid = g < 1 ? 1 : (int)g;
    return GC_OK;
}

} // namespace gcgpu

#endif
