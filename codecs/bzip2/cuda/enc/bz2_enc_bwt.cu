/*
 * bz2_enc_bwt.cu - the BWT of every block of a piece at once: the cyclic
 * rotations of all blocks sorted together (docs/BZIP2.md section 4).
 *
 * 1. Each block's primitive root: the smallest period p dividing n with
 *    s = u^(n/p). Only u's p rotations are sorted; the column of s is u's
 *    with every byte repeated n/p times (so all-equal and periodic blocks
 *    cost the sort of their root; origPtr is the last of rotation 0's equals).
 * 2. One CUB radix sort of (block, the rotation's first bits) over all blocks.
 * 3. Prefix doubling on what is unresolved: rank = sorted position of the
 *    group head; each round sorts only the elements of groups of two or
 *    more by (rank[i], rank[i + h]) and doubles h, so the work follows the
 *    unresolved count. The key is as short as the round allows, since radix
 *    passes follow its bits: rank[i] as the group's ordinal among the
 *    unresolved groups, rank[i + h] as its place within the block (a block's
 *    rotations hold one range of sorted positions, the block being the first
 *    key's top field). Every sort is stable and the first one sees positions
 *    in order, so equal keys keep index order throughout (the tie rule
 *    never matters after step 1, but it costs nothing to keep).
 * 4. The last column and origPtr per block, expanded by n/p.
 * The host reads one count per round (the next sort's size), so this waits.
 */
#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "bz2_gpu.cuh"

namespace gcgpu {

namespace {

constexpr int kMaxDivisors = 320; /* a number below 2^20 has at most 240 */

/* One block per CTA: the smallest period p | n (p < n) with s[i] == s[i + p] for all i, else n. */
__global__ void find_periods(const uint8_t *rle, Bz2Block *blk)
{
    __shared__ uint32_t divs[kMaxDivisors];
    __shared__ int ndiv;
    __shared__ uint32_t found;
    Bz2Block &b = blk[blockIdx.x];
    const uint32_t n = b.n;
    const uint8_t *s = rle + b.rle_off;
    if (threadIdx.x == 0) {
        int lo = 0, hi = kMaxDivisors - 1; /* small divisors up from 0, their partners down from the end */
        for (uint32_t d = 1; (uint64_t)d * d <= n; d++)
            if (n % d == 0) {
                divs[lo++] = d;
                if (d != n / d && d != 1)
                    divs[hi--] = n / d;
            }
        for (int k = hi + 1; k < kMaxDivisors; k++) /* the partners ascending after the small ones */
            divs[lo++] = divs[k];
        ndiv = lo;
        found = n;
    }
    __syncthreads();
    for (int di = 0; di < ndiv; di++) {
        uint32_t p = divs[di];
        if (p >= n)
            break;
        int bad = 0;
        for (uint32_t base = 0; base < n - p; base += blockDim.x * 4) {
            for (uint32_t j = 0; j < 4; j++) {
                uint32_t i = base + threadIdx.x * 4 + j;
                if (i < n - p && s[i] != s[i + p])
                    bad = 1;
            }
            if (__syncthreads_or(bad))
                break;
        }
        if (!__syncthreads_or(bad)) {
            if (threadIdx.x == 0)
                found = p;
            break;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0)
        b.period = found;
}

/* One thread: the blocks' places in the sort space; counts[0] = its size. */
__global__ void sort_offsets(Bz2Block *blk, uint32_t nb, uint32_t *counts)
{
    uint32_t o = 0, maxp = 0;
    for (uint32_t b = 0; b < nb; b++) {
        blk[b].sort_off = o;
        o += blk[b].period;
        maxp = max(maxp, blk[b].period);
    }
    counts[0] = o;
    counts[1] = maxp;
}

__device__ __forceinline__ uint32_t block_of_sort(const Bz2Block *blk, uint32_t nb, uint32_t g)
{
    uint32_t lo = 0, hi = nb - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (blk[mid].sort_off <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The block index above the rotation's first tbits bits. */
__global__ void first_keys(const uint8_t *rle, const Bz2Block *blk, uint32_t nb, uint32_t ns, int tbits,
                           uint64_t *key, uint32_t *val)
{
    uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= ns)
        return;
    uint32_t bi = block_of_sort(blk, nb, g);
    const Bz2Block &b = blk[bi];
    const uint8_t *s = rle + b.rle_off;
    uint32_t p = b.period, i = g - b.sort_off;
    uint64_t text = 0;
    for (int j = 0; j < 8; j++) {
        text = (text << 8) | s[i];
        i = i + 1 == p ? 0 : i + 1;
    }
    key[g] = tbits == 64 ? text : ((uint64_t)bi << tbits) | (text >> (64 - tbits));
    val[g] = g;
}

/* An unresolved list entry: a sorted position, with kGroupStart set where a group begins. */
constexpr uint32_t kGroupStart = 1u << 31;
constexpr uint32_t kPosition = kGroupStart - 1;

__device__ __forceinline__ bool starts_group(const uint64_t *key, uint32_t t)
{
    return t == 0 || key[t] != key[t - 1];
}

/* A sort's t-th key's list entry: u's t-th position (t itself for the first sort, u NULL). */
__device__ __forceinline__ uint32_t position_of(const uint32_t *u, uint32_t t)
{
    return u ? u[t] & kPosition : t;
}

/* (t, the index of t's group's first key): a scan by LatestHead gives each t its group's start. */
struct GroupStartAt {
    const uint64_t *key;
    __device__ __forceinline__ uint2 operator()(uint32_t t) const
    {
        return make_uint2(t, starts_group(key, t) ? t : 0u);
    }
};

struct LatestHead { /* associative: the later t, the larger start */
    __device__ __forceinline__ uint2 operator()(uint2 a, uint2 b) const
    {
        return make_uint2(b.x, max(a.y, b.y));
    }
};

/* The scan's output: the sorted positions back into sa, group starts into isa (no array of starts kept). */
struct WriteRanks {
    const uint32_t *u, *val;
    uint32_t *sa, *isa;
    __device__ __forceinline__ uint32_t operator()(uint2 x) const
    {
        uint32_t v = val[x.x];
        sa[position_of(u, x.x)] = v;
        isa[v] = position_of(u, x.y);
        return 0;
    }
};

struct Unresolved { /* t's group has two or more members */
    const uint64_t *key;
    uint32_t n;
    __device__ __forceinline__ bool operator()(uint32_t t) const
    {
        return !(starts_group(key, t) && (t + 1 == n || key[t + 1] != key[t]));
    }
};

struct ListEntry { /* t's entry in the next unresolved list */
    const uint32_t *u;
    const uint64_t *key;
    __device__ __forceinline__ uint32_t operator()(uint32_t t) const
    {
        return position_of(u, t) | (starts_group(key, t) ? kGroupStart : 0u);
    }
};

struct StartsGroup {
    __device__ __forceinline__ uint32_t operator()(uint32_t e) const
    {
        return e >> 31;
    }
};

/* A round's keys: (ordinal of i's group, 1-based in gid; rank of i + h within the block's root). */
__global__ void round_keys(const uint32_t *u, uint32_t nu, const uint32_t *gid, const uint32_t *sa,
                           const uint32_t *isa, const Bz2Block *blk, uint32_t nb, uint64_t h, int pbits,
                           uint64_t *key, uint32_t *val)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nu)
        return;
    uint32_t g = sa[u[t] & kPosition];
    const Bz2Block &b = blk[block_of_sort(blk, nb, g)];
    uint32_t i = g - b.sort_off;
    uint32_t i2 = (uint32_t)((i + h % b.period) % b.period);
    key[t] = ((uint64_t)(gid[t] - 1) << pbits) | (isa[b.sort_off + i2] - b.sort_off);
    val[t] = g;
}

/*
 * After a sort of n keys (the first sort: u NULL; a round: u the list it sorted): ranks into sa
 * and isa, and the entries still unresolved into u_next, their count into *n_next (device).
 */
int settle_sort(const uint64_t *key, const uint32_t *val, const uint32_t *u, uint32_t n, Bz2Scratch &s,
                uint32_t *u_next, uint32_t *n_next, cudaStream_t st, gc_error *err)
{
    thrust::counting_iterator<uint32_t> idx(0);
    auto starts = thrust::make_transform_iterator(idx, GroupStartAt{ key });
    auto ranks =
        thrust::make_transform_output_iterator(thrust::make_discard_iterator(), WriteRanks{ u, val, s.sa, s.isa });
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceScan::InclusiveScan(s.cub_tmp, tmp, starts, ranks, LatestHead{}, (int)n, st));
    auto entries = thrust::make_transform_iterator(idx, ListEntry{ u, key });
    auto keep = thrust::make_transform_iterator(idx, Unresolved{ key, n });
    tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceSelect::Flagged(s.cub_tmp, tmp, entries, keep, u_next, n_next, (int)n, st));
    return GC_OK;
}

/* Last column, expanded by n / period, and origPtr. */
__global__ void last_column(const uint8_t *rle, Bz2Block *blk, uint32_t nb, uint64_t total, const uint32_t *sa,
                            uint8_t *bwt)
{
    uint64_t o = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= total)
        return;
    uint32_t lo = 0, hi = nb - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (blk[mid].rle_off <= o)
            lo = mid;
        else
            hi = mid - 1;
    }
    Bz2Block &b = blk[lo];
    uint32_t local = (uint32_t)(o - b.rle_off), k = b.n / b.period;
    uint32_t r = local / k;
    uint32_t i = sa[b.sort_off + r] - b.sort_off;
    bwt[o] = rle[b.rle_off + (i == 0 ? b.period - 1 : i - 1)];
    if (i == 0 && local % k == k - 1) /* the last of rotation 0's k equals (docs/BZIP2.md 4) */
        b.orig = r * k + k - 1;
}

int bits_for(uint64_t v) /* bits to hold 0..v */
{
    int b = 1;
    while (b < 64 && (v >> b))
        b++;
    return b;
}

unsigned grid_for(uint64_t n)
{
    return (unsigned)((n + kBz2Threads - 1) / kBz2Threads);
}

} // namespace

size_t bz2_bwt_cub_bytes(uint64_t rle_cap)
{
    const int n = (int)rle_cap;
    size_t need = 0, b = 0;
    thrust::counting_iterator<uint32_t> idx(0);
    auto starts = thrust::make_transform_iterator(idx, GroupStartAt{ nullptr });
    auto ranks = thrust::make_transform_output_iterator(thrust::make_discard_iterator(), WriteRanks{});
    cub::DeviceScan::InclusiveScan(nullptr, b, starts, ranks, LatestHead{}, n);
    need = std::max(need, b);
    auto entries = thrust::make_transform_iterator(idx, ListEntry{});
    auto keep = thrust::make_transform_iterator(idx, Unresolved{});
    cub::DeviceSelect::Flagged(nullptr, b, entries, keep, (uint32_t *)nullptr, (uint32_t *)nullptr, n);
    need = std::max(need, b);
    auto list_starts = thrust::make_transform_iterator((const uint32_t *)nullptr, StartsGroup{});
    cub::DeviceScan::InclusiveSum(nullptr, b, list_starts, (uint32_t *)nullptr, n);
    need = std::max(need, b);
    cub::DoubleBuffer<uint64_t> kb(nullptr, nullptr);
    cub::DoubleBuffer<uint32_t> vb(nullptr, nullptr);
    cub::DeviceRadixSort::SortPairs(nullptr, b, kb, vb, n, 0, 64);
    return std::max(need, b);
}

int bz2_bwt(uint32_t nb, uint64_t rle_total, Bz2Scratch &s, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    find_periods<<<nb, kBz2Threads, 0, st>>>(s.rle, s.blk);
    GC_CUDA_LAUNCHED("find_periods");
    bz2_prof(st, "find_periods", nb);
    sort_offsets<<<1, 1, 0, st>>>(s.blk, nb, s.counts);
    GC_CUDA_LAUNCHED("sort_offsets");
    uint32_t hc[2];
    GC_CUDA(cudaMemcpyAsync(hc, s.counts, sizeof hc, cudaMemcpyDeviceToHost, st));
    GC_CUDA(cudaStreamSynchronize(st));
    const uint32_t ns = hc[0], maxp = hc[1];
    if (ns) {
        /* the block's bits, then as much of the rotation as fills the radix passes that kBz2KeyBytes
         * needs: a part of a byte more still splits groups for free (h counts the whole bytes only) */
        const int bbits = nb > 1 ? bits_for(nb - 1) : 0;
        const int kbits = std::min(64, (8 * kBz2KeyBytes + bbits + 7) / 8 * 8), tbits = kbits - bbits;
        first_keys<<<grid_for(ns), kBz2Threads, 0, st>>>(s.rle, s.blk, nb, ns, tbits, s.key0, s.val0);
        GC_CUDA_LAUNCHED("first_keys");
        cub::DoubleBuffer<uint64_t> kb(s.key0, s.key1);
        cub::DoubleBuffer<uint32_t> vb(s.val0, s.val1);
        size_t tmp = s.cub_bytes;
        GC_CUDA(cub::DeviceRadixSort::SortPairs(s.cub_tmp, tmp, kb, vb, (int)ns, 0, kbits, st));
        bz2_prof(st, "first_sort", ns);
        int rc = settle_sort(kb.Current(), vb.Current(), nullptr, ns, s, s.ulist0, s.counts + 2, st, err);
        if (rc != GC_OK)
            return rc;
        bz2_prof(st, "first_ranks", ns);
        uint32_t nu = 0;
        GC_CUDA(cudaMemcpyAsync(&nu, s.counts + 2, 4, cudaMemcpyDeviceToHost, st));
        GC_CUDA(cudaStreamSynchronize(st));
        const int pbits = bits_for(maxp - 1);
        uint32_t *u = s.ulist0, *u_next = s.ulist2;
        for (uint64_t h = tbits / 8; nu > 0 && h < maxp; h *= 2) {
            /* each entry's group ordinal into ulist1, and their count */
            auto starts = thrust::make_transform_iterator(u, StartsGroup{});
            tmp = s.cub_bytes;
            GC_CUDA(cub::DeviceScan::InclusiveSum(s.cub_tmp, tmp, starts, s.ulist1, (int)nu, st));
            uint32_t groups = 0;
            GC_CUDA(cudaMemcpyAsync(&groups, s.ulist1 + nu - 1, 4, cudaMemcpyDeviceToHost, st));
            GC_CUDA(cudaStreamSynchronize(st));
            cub::DoubleBuffer<uint64_t> rk(s.key0, s.key1);
            cub::DoubleBuffer<uint32_t> rv(s.val0, s.val1);
            round_keys<<<grid_for(nu), kBz2Threads, 0, st>>>(u, nu, s.ulist1, s.sa, s.isa, s.blk, nb, h, pbits,
                                                             rk.Current(), rv.Current());
            GC_CUDA_LAUNCHED("round_keys");
            tmp = s.cub_bytes;
            GC_CUDA(cub::DeviceRadixSort::SortPairs(s.cub_tmp, tmp, rk, rv, (int)nu, 0,
                                                    bits_for(groups - 1) + pbits, st));
            bz2_prof(st, "round_sort", nu);
            rc = settle_sort(rk.Current(), rv.Current(), u, nu, s, u_next, s.counts + 2, st, err);
            if (rc != GC_OK)
                return rc;
            bz2_prof(st, "round_settle", nu);
            GC_CUDA(cudaMemcpyAsync(&nu, s.counts + 2, 4, cudaMemcpyDeviceToHost, st));
            GC_CUDA(cudaStreamSynchronize(st));
            uint32_t *x = u;
            u = u_next;
            u_next = x;
        }
    }
    last_column<<<grid_for(rle_total), kBz2Threads, 0, st>>>(s.rle, s.blk, nb, rle_total, s.sa, s.bwt);
    GC_CUDA_LAUNCHED("last_column");
    bz2_prof(st, "last_column", rle_total);
    return GC_OK;
}

} // namespace gcgpu
