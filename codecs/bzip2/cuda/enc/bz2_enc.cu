/*
 * bz2_enc.cu - the bzip2 encoder's piece on the device: its scratch (sized
 * once per slot from the largest piece, carved into the stages' arrays) and
 * the order of the stages (bz2_gpu.cuh).
 */
#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "bz2_gpu.cuh"

namespace gcgpu {

namespace {

constexpr uint32_t kMinLimit = 1 * 100000 - 19; /* level 1: the most blocks */

struct Sizes {
    uint64_t piece, rle, blocks, groups, chunks;
};

Sizes sizes_for(uint64_t piece_cap)
{
    Sizes z;
    z.piece = piece_cap;
    z.rle = piece_cap + piece_cap / 4 + 64;
    /* every block but the last holds >= limit RLE1 bytes, >= limit * 4 / 5 input bytes */
    z.blocks = piece_cap / (kMinLimit / 2) + 3;
    z.groups = (z.rle + z.blocks) / BZ2_GROUP_SIZE + 2 * z.blocks + 2;
    z.chunks = z.rle / kBz2MtfChunk + z.blocks + 1;
    return z;
}

/* Type-identical stand-ins of the plan's CUB calls, for their temporary sizes (the BWT reports its own). */
struct AnyFlag {
    __device__ bool operator()(uint32_t) const
    {
        return true;
    }
};
struct AnyVal {
    __device__ uint32_t operator()(uint32_t) const
    {
        return 0;
    }
};

size_t cub_bytes_for(const Sizes &z)
{
    size_t need = 0, b = 0;
    thrust::counting_iterator<uint32_t> idx(0);
    int nr = (int)z.rle;
    cub::DeviceSelect::If(nullptr, b, idx, (uint32_t *)nullptr, (uint32_t *)nullptr, nr, AnyFlag{});
    need = std::max(need, b);
    auto vals = thrust::make_transform_iterator(idx, AnyVal{});
    cub::DeviceScan::ExclusiveSum(nullptr, b, vals, (uint32_t *)nullptr, nr + 1);
    need = std::max(need, b);
    need = std::max(need, bz2_bwt_cub_bytes(z.rle));
    /* the stages' functors differ from these stand-ins, not the iterator or
     * item types that decide the sizes; keep a margin all the same */
    return need + need / 8 + (1u << 20);
}

/* Carve n items of T from *p (256-byte aligned); false past end. */
template <class T>
bool take(uint8_t *&p, uint8_t *end, uint64_t n, T **out)
{
    uintptr_t a = ((uintptr_t)p + 255) & ~(uintptr_t)255;
    uint64_t bytes = n * sizeof(T);
    if (a + bytes > (uintptr_t)end || a < (uintptr_t)p)
        return false;
    *out = reinterpret_cast<T *>(a);
    p = reinterpret_cast<uint8_t *>(a + bytes);
    return true;
}

/* What a piece keeps from its kernels to its pack (bz2_enc_pack reads only these). */
bool carve_piece(uint8_t *p, uint8_t *end, const Sizes &z, Bz2Scratch *s)
{
    s->piece_cap = z.piece;
    s->rle_cap = z.rle;
    s->max_blocks = (uint32_t)z.blocks;
    s->group_cap = z.groups;
    return take(p, end, 1, &s->res) && take(p, end, z.blocks, &s->blk) &&
           take(p, end, z.rle + z.blocks, &s->sym) && take(p, end, z.groups, &s->sel) &&
           take(p, end, z.groups, &s->sel_mtf) && take(p, end, z.groups, &s->gbit_off) &&
           take(p, end, z.blocks * BZ2_MAX_GROUPS * BZ2_MAX_ALPHA, &s->lens) &&
           take(p, end, z.blocks * BZ2_MAX_GROUPS * BZ2_MAX_ALPHA, &s->codes);
}

/* The stages' working memory: free again once bz2_enc_blocks returns. */
bool carve_work(uint8_t *p, uint8_t *end, const Sizes &z, size_t cub, Bz2Scratch *s)
{
    uint8_t *tmp = nullptr;
    s->cub_bytes = cub;
    return take(p, end, z.piece + 2, &s->runs) && take(p, end, z.piece + 2, &s->run_off) &&
           take(p, end, 1, &s->n_runs) && take(p, end, z.rle, &s->rle) && take(p, end, z.rle, &s->bwt) &&
           take(p, end, z.rle, &s->key0) && take(p, end, z.rle, &s->key1) && take(p, end, z.rle, &s->val0) &&
           take(p, end, z.rle, &s->val1) && take(p, end, z.rle, &s->sa) && take(p, end, z.rle, &s->isa) &&
           take(p, end, z.rle, &s->ulist0) && take(p, end, z.rle, &s->ulist1) && take(p, end, z.rle, &s->ulist2) &&
           take(p, end, z.blocks + 1, &s->chunk_base) && take(p, end, z.chunks * 256, &s->mtf_lists) &&
           take(p, end, z.chunks, &s->mtf_front) && take(p, end, z.chunks * kBz2ChunkRleBytes, &s->mtf_rle) &&
           take(p, end, 16, &s->counts) && take(p, end, z.blocks, &s->crc_acc) && take(p, end, cub, &tmp) &&
           (s->cub_tmp = tmp, true);
}

/* Bytes a carve takes from a 4 KiB-aligned base (measured on a fake one). */
template <class F>
size_t carved_bytes(F carve_fn)
{
    uint8_t *base = reinterpret_cast<uint8_t *>((uintptr_t)1 << 12);
    uint8_t *end = reinterpret_cast<uint8_t *>(~(uintptr_t)0 >> 1);
    uint8_t *stop = nullptr;
    if (!carve_fn(base, end, &stop))
        return 0;
    return (size_t)(stop - base) + 4096;
}

} // namespace

size_t bz2_piece_bytes(uint64_t piece_cap)
{
    Sizes z = sizes_for(piece_cap);
    return carved_bytes([&](uint8_t *b, uint8_t *e, uint8_t **stop) {
        Bz2Scratch s;
        bool ok = carve_piece(b, e, z, &s);
        *stop = reinterpret_cast<uint8_t *>(s.codes + z.blocks * BZ2_MAX_GROUPS * BZ2_MAX_ALPHA);
        return ok;
    });
}

size_t bz2_work_bytes(uint64_t piece_cap)
{
    Sizes z = sizes_for(piece_cap);
    size_t cub = cub_bytes_for(z);
    return carved_bytes([&](uint8_t *b, uint8_t *e, uint8_t **stop) {
        Bz2Scratch s;
        bool ok = carve_work(b, e, z, cub, &s);
        *stop = static_cast<uint8_t *>(s.cub_tmp) + cub;
        return ok;
    });
}

size_t bz2_scratch_bytes(uint64_t piece_cap)
{
    return bz2_piece_bytes(piece_cap) + bz2_work_bytes(piece_cap);
}

int bz2_scratch_carve2(void *piece, size_t piece_len, void *work, size_t work_len, uint64_t piece_cap,
                       Bz2Scratch *s, gc_error *err)
{
    Sizes z = sizes_for(piece_cap);
    uint8_t *p = static_cast<uint8_t *>(piece), *w = static_cast<uint8_t *>(work);
    if (!carve_piece(p, p + piece_len, z, s) || !carve_work(w, w + work_len, z, cub_bytes_for(z), s))
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: %zu + %zu bytes of scratch do not hold a %llu-byte piece",
                       piece_len, work_len, (unsigned long long)piece_cap);
    return GC_OK;
}

int bz2_scratch_carve(void *base, size_t len, uint64_t piece_cap, Bz2Scratch *s, gc_error *err)
{
    size_t pb = bz2_piece_bytes(piece_cap);
    if (len < pb)
        return gc_fail(err, GC_E_LIMIT, "gpu bzip2: %zu bytes of scratch do not hold a %llu-byte piece", len,
                       (unsigned long long)piece_cap);
    return bz2_scratch_carve2(base, pb, static_cast<uint8_t *>(base) + pb, len - pb, piece_cap, s, err);
}

int bz2_enc_blocks(const uint8_t *d_src, uint64_t len, bool whole, int level, Bz2Scratch &s,
                   const Crc32Tables *d_tab32, cudaStream_t st, Bz2Result *h_res, float *stage_ms, gc_error *err)
{
    if (len > s.piece_cap)
        return gc_fail(err, GC_E_INTERNAL, "gpu bzip2: a piece of %llu bytes over the scratch's %llu",
                       (unsigned long long)len, (unsigned long long)s.piece_cap);
    CudaEvent ev[5];
    int rc = GC_OK;
    if (stage_ms)
        for (CudaEvent &e : ev)
            GC_CUDA(e.create());
    auto mark = [&](int i) { return stage_ms ? cudaEventRecord(ev[i].get(), st) : cudaSuccess; };
    uint32_t nb = 0;
    uint64_t rle_total = 0, used = 0;
    GC_CUDA(cudaMemsetAsync(s.res, 0, sizeof(Bz2Result), st));
    GC_CUDA(mark(0));
    bz2_prof(st, nullptr, 0);
    rc = bz2_plan(d_src, len, (uint32_t)(level * 100000 - 19), whole, s, st, &nb, &rle_total, &used, err);
    if (rc == GC_OK)
        rc = bz2_rle1_crc(d_src, used, nb, rle_total, s, d_tab32, st, err);
    if (rc == GC_OK && mark(1) != cudaSuccess)
        rc = gc_fail(err, GC_E_DEVICE, "cuda: cudaEventRecord failed");
    if (rc == GC_OK)
        rc = bz2_bwt(nb, rle_total, s, st, err);
    if (rc == GC_OK && mark(2) != cudaSuccess)
        rc = gc_fail(err, GC_E_DEVICE, "cuda: cudaEventRecord failed");
    if (rc == GC_OK)
        rc = bz2_mtf(nb, s, st, err);
    if (rc == GC_OK && mark(3) != cudaSuccess)
        rc = gc_fail(err, GC_E_DEVICE, "cuda: cudaEventRecord failed");
    if (rc == GC_OK)
        rc = bz2_tables(nb, s, st, err);
    if (rc == GC_OK && mark(4) != cudaSuccess)
        rc = gc_fail(err, GC_E_DEVICE, "cuda: cudaEventRecord failed");
    if (rc == GC_OK) {
        cudaError_t c = cudaMemcpyAsync(h_res, s.res, sizeof(Bz2Result), cudaMemcpyDeviceToHost, st);
        if (c == cudaSuccess)
            c = cudaStreamSynchronize(st);
        if (c != cudaSuccess)
            rc = gc_fail(err, GC_E_DEVICE, "cuda: piece results: %s", cudaGetErrorString(c));
    }
    if (rc == GC_OK && stage_ms)
        for (int i = 0; i < 4; i++) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, ev[i].get(), ev[i + 1].get()) == cudaSuccess)
                stage_ms[i] += ms;
        }
    if (rc == GC_OK && h_res->status)
        rc = gc_fail(err, (gc_status)h_res->status, "gpu bzip2: the piece failed on the device");
    return rc;
}

} // namespace gcgpu
