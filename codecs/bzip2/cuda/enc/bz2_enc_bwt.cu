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
 *    more by the rank of i + h within the block, and doubles h, so the work
 *    follows the unresolved count. A block's rotations hold one range of
 *    sorted positions (the block is the first key's top field), so a place
 *    within the block (20 bits) orders a group. CUB's segmented sort does a
 *    small group in a warp's registers but gives each large one a CTA of its
 *    own, costly per rotation; radix passes over (the group's ordinal, that
 *    place) cost the same for every rotation, and the key is as short as the
 *    round allows, since passes follow its bits. So a round with few
 *    rotations in large groups is segmented; one with many splits: the large
 *    groups gathered apart and sorted by radix passes, the small ones
 *    segmented, the large results scattered back into the same keys; one
 *    with nearly all (or more than the split's space holds) goes by radix
 *    passes whole. Equal keys may change order: the tie rule never matters
 *    after step 1 (no two rotations of a root are equal).
 *    The first round of a piece with blocks that nearly repeat (a step, see
 *    bz2_enc_bwt_chain.cu) is a chain round: their groups ordered by how far
 *    each rotation's chain follows its group's successors and where it
 *    leaves them, which settles a periodic block whose length the period
 *    does not divide at once; other blocks' groups double as in any round.
 * 4. The last column and origPtr per block, expanded by n/p.
 * The host reads counts each round (the next sort's size and group count,
 * and CUB's segment classes), so this waits.
 */
#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <vector>

#include "bz2_enc_bwt.cuh"

namespace gcgpu {

namespace {

constexpr int kMaxDivisors = 320; /* a number below 2^20 has at most 240 */

int bits_for(uint64_t v) /* bits to hold 0..v */
{
    int b = 1;
    while (b < 64 && (v >> b))
        b++;
    return b;
}

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

/* One thread: the blocks' places in the sort space; counts[0] = its size, counts[1] the longest
 * root, counts[2] the blocks with a step, whose (sort_off, period) go to stepped[]. */
__global__ void sort_offsets(Bz2Block *blk, uint32_t nb, uint32_t *counts, uint32_t *stepped)
{
    uint32_t o = 0, maxp = 0, k = 0;
    for (uint32_t b = 0; b < nb; b++) {
        blk[b].sort_off = o;
        if (blk[b].step) {
            stepped[2 * k] = o;
            stepped[2 * k + 1] = blk[b].period;
            k++;
        }
        o += blk[b].period;
        maxp = max(maxp, blk[b].period);
    }
    counts[0] = o;
    counts[1] = maxp;
    counts[2] = k;
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

/* Where groups begin after the first sort: wherever the key changes. */
struct FirstStarts {
    const uint64_t *key;
    __device__ __forceinline__ bool operator()(uint32_t t) const
    {
        return t == 0 || key[t] != key[t - 1];
    }
};

/* After a round's segmented sort: where a sorted group began (its list entry says so), or its key changes. */
struct RoundStarts {
    const uint32_t *u, *key;
    __device__ __forceinline__ bool operator()(uint32_t t) const
    {
        return (u[t] & kGroupStart) || t == 0 || key[t] != key[t - 1];
    }
};

/* A sort's t-th key's list entry: u's t-th position (t itself for the first sort, u NULL). */
__device__ __forceinline__ uint32_t position_of(const uint32_t *u, uint32_t t)
{
    return u ? u[t] & kPosition : t;
}

/* t's group has two or more members (starts: where groups begin among the n keys). */
template <class Starts>
__device__ __forceinline__ bool unresolved(const Starts &starts, uint32_t n, uint32_t t)
{
    return !(starts(t) && (t + 1 == n || starts(t + 1)));
}

/* A settle's scan element: t, the start of t's group (the latest head so far), and how many
 * entries up to t stay unresolved. */
struct SettleItem {
    uint32_t t, head, kept;
};

template <class Starts>
struct SettleAt {
    Starts starts;
    uint32_t n;
    __device__ __forceinline__ SettleItem operator()(uint32_t t) const
    {
        return SettleItem{ t, starts(t) ? t : 0u, unresolved(starts, n, t) ? 1u : 0u };
    }
};

struct SettleJoin { /* associative: the later t, the larger start, the kept summed */
    __device__ __forceinline__ SettleItem operator()(const SettleItem &a, const SettleItem &b) const
    {
        return SettleItem{ b.t, max(a.head, b.head), a.kept + b.kept };
    }
};

/* The scan's output: the sorted positions back into sa, group starts into isa (no array of
 * starts kept), and an unresolved entry into the next list at its place, with kGroupStart set
 * where its group begins; the last writes the list's length. */
template <class Starts>
struct WriteSettled {
    Starts starts;
    uint32_t n;
    const uint32_t *u, *val;
    uint32_t *sa, *isa, *u_next, *n_next;
    __device__ __forceinline__ uint32_t operator()(const SettleItem &x) const
    {
        const uint32_t v = val[x.t], pos = position_of(u, x.t);
        sa[pos] = v;
        isa[v] = position_of(u, x.head);
        if (unresolved(starts, n, x.t))
            u_next[x.kept - 1] = pos | (starts(x.t) ? kGroupStart : 0u);
        if (x.t + 1 == n)
            *n_next = x.kept;
        return 0;
    }
};

struct StartsGroup {
    __device__ __forceinline__ uint32_t operator()(uint32_t e) const
    {
        return e >> 31;
    }
};

/* A group's end in the list: the next group's start, the list's end for the last. */
struct SegmentEnd {
    const uint32_t *begin;
    uint32_t groups, n;
    __device__ __forceinline__ uint32_t operator()(uint32_t k) const
    {
        return k + 1 < groups ? begin[k + 1] : n;
    }
};

/* The rank of i + h within the block's root, for the list's t-th entry; g = the rotation (its sort index). */
__device__ __forceinline__ uint32_t rank_ahead(const uint32_t *u, uint32_t t, const uint32_t *sa,
                                               const uint32_t *isa, const Bz2Block *blk, uint32_t nb, uint64_t h,
                                               uint32_t &g)
{
    g = sa[u[t] & kPosition];
    return rank_at(isa, blk[block_of_sort(blk, nb, g)], g, h);
}

/* A radix round's keys: (ordinal of t's group, 1-based in gid; the rank ahead). */
__global__ void round_keys_by_group(const uint32_t *u, uint32_t nu, const uint32_t *gid, const uint32_t *sa,
                                    const uint32_t *isa, const Bz2Block *blk, uint32_t nb, uint64_t h, int pbits,
                                    uint64_t *key, uint32_t *val)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nu)
        return;
    uint32_t g;
    uint32_t r = rank_ahead(u, t, sa, isa, blk, nb, h, g);
    key[t] = ((uint64_t)(gid[t] - 1) << pbits) | r;
    val[t] = g;
}

/* A segmented round's keys: the rank ahead alone (the group is the segment). */
__global__ void round_keys_in_group(const uint32_t *u, uint32_t nu, const uint32_t *sa, const uint32_t *isa,
                                    const Bz2Block *blk, uint32_t nb, uint64_t h, uint32_t *key, uint32_t *val)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nu)
        return;
    uint32_t g;
    key[t] = rank_ahead(u, t, sa, isa, blk, nb, h, g);
    val[t] = g;
}

/* Group k's members, from the groups' starts (ng of them, in a list of n entries). */
__device__ __forceinline__ uint32_t group_size(const uint32_t *begin, uint32_t ng, uint32_t n, uint32_t k)
{
    return (k + 1 < ng ? begin[k + 1] : n) - begin[k];
}

/* The members of group k when it is large (more than kBz2SegmentLarge), else 0; 0 past the groups. */
struct LargeMembers {
    const uint32_t *begin;
    const uint32_t *groups;
    uint32_t n;
    __device__ __forceinline__ uint32_t operator()(uint32_t k) const
    {
        uint32_t ng = *groups;
        if (k >= ng)
            return 0;
        uint32_t size = group_size(begin, ng, n, k);
        return size > kBz2SegmentLarge ? size : 0;
    }
};

/* (members, 1) for a large group k, else (0, 0): summed, the rotations and the groups that are large. */
struct LargeCount {
    LargeMembers members;
    __device__ __forceinline__ uint2 operator()(uint32_t k) const
    {
        const uint32_t m = members(k);
        return make_uint2(m, m ? 1u : 0u);
    }
};

struct SumPairs {
    __device__ __forceinline__ uint2 operator()(const uint2 &a, const uint2 &b) const
    {
        return make_uint2(a.x + b.x, a.y + b.y);
    }
};

/* A small group k (of ng): one CUB's segmented sort keeps in a warp. */
struct SmallGroup {
    const uint32_t *begin;
    uint32_t ng, n;
    __device__ __forceinline__ bool operator()(uint32_t k) const
    {
        return group_size(begin, ng, n, k) <= kBz2SegmentLarge;
    }
};

/* List entry t sits in a large group (gid: its 1-based group ordinal). */
struct InLargeGroup {
    const uint32_t *gid, *begin;
    uint32_t ng, n;
    __device__ __forceinline__ bool operator()(uint32_t t) const
    {
        return group_size(begin, ng, n, gid[t] - 1) > kBz2SegmentLarge;
    }
};

/* The start and end of the j-th group of a list of group indices. */
struct IndexedStart {
    const uint32_t *index, *begin;
    __device__ __forceinline__ uint32_t operator()(uint32_t j) const
    {
        return begin[index[j]];
    }
};

struct IndexedEnd {
    const uint32_t *index;
    SegmentEnd end;
    __device__ __forceinline__ uint32_t operator()(uint32_t j) const
    {
        return end(index[j]);
    }
};

/* The large groups' entries (at list positions at[j]) as radix keys (group ordinal, rank ahead). */
__global__ void gather_large(const uint32_t *at, uint32_t m, const uint32_t *gid, const uint32_t *key,
                             const uint32_t *val, int pbits, uint64_t *lkey, uint32_t *lval)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m)
        return;
    uint32_t t = at[j];
    lkey[j] = ((uint64_t)(gid[t] - 1) << pbits) | key[t];
    lval[j] = val[t];
}

/* The sorted large entries back to their list positions (a group's positions ascending, as its keys). */
__global__ void scatter_large(const uint32_t *at, uint32_t m, const uint64_t *lkey, const uint32_t *lval,
                              uint32_t pmask, uint32_t *key, uint32_t *val)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m)
        return;
    uint32_t t = at[j];
    key[t] = (uint32_t)(lkey[j] & pmask);
    val[t] = lval[j];
}

/*
 * After a sort of n keys (the first sort: u NULL; a round: u the list it sorted): ranks into sa
 * and isa, and the entries still unresolved into u_next, their count into *n_next (device).
 */
template <class Starts>
int settle_sort(Starts group_starts, const uint32_t *val, const uint32_t *u, uint32_t n, Bz2Scratch &s,
                uint32_t *u_next, uint32_t *n_next, cudaStream_t st, gc_error *err)
{
    thrust::counting_iterator<uint32_t> idx(0);
    auto items = thrust::make_transform_iterator(idx, SettleAt<Starts>{ group_starts, n });
    auto out = thrust::make_transform_output_iterator(
        thrust::make_discard_iterator(),
        WriteSettled<Starts>{ group_starts, n, u, val, s.sa, s.isa, u_next, n_next });
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceScan::InclusiveScan(s.cub_tmp, tmp, items, out, SettleJoin{}, (int)n, st));
    return GC_OK;
}

/* A round's list: its groups, and how many of them and of its entries are large. */
struct RoundShape {
    uint32_t groups, large_members, large_groups;
};

/* Each group's first entry into ulist1 (the segments' starts), and the round's shape read back (a
 * list's groups have two or more members: at most nu / 2 of them). */
int round_groups(const uint32_t *u, uint32_t nu, Bz2Scratch &s, cudaStream_t st, RoundShape *shape, gc_error *err)
{
    thrust::counting_iterator<uint32_t> idx(0);
    auto starts = thrust::make_transform_iterator(u, StartsGroup{});
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceSelect::Flagged(s.cub_tmp, tmp, idx, starts, s.ulist1, s.counts + 3, (int)nu, st));
    auto large = thrust::make_transform_iterator(idx, LargeCount{ LargeMembers{ s.ulist1, s.counts + 3, nu } });
    tmp = s.cub_bytes; /* counts[4], counts[5]: the large groups' rotations, and their number */
    GC_CUDA(cub::DeviceReduce::Reduce(s.cub_tmp, tmp, large, reinterpret_cast<uint2 *>(s.counts + 4),
                                      (int)(nu / 2 + 1), SumPairs{}, make_uint2(0, 0), st));
    uint32_t hc[3];
    GC_CUDA(cudaMemcpyAsync(hc, s.counts + 3, sizeof hc, cudaMemcpyDeviceToHost, st));
    GC_CUDA(cudaStreamSynchronize(st));
    *shape = RoundShape{ hc[0], hc[1], hc[2] };
    return GC_OK;
}

/* Each list entry's group ordinal, 1-based, into gid. */
int group_ordinals(const uint32_t *u, uint32_t nu, uint32_t *gid, Bz2Scratch &s, cudaStream_t st, gc_error *err)
{
    auto starts = thrust::make_transform_iterator(u, StartsGroup{});
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceScan::InclusiveSum(s.cub_tmp, tmp, starts, gid, (int)nu, st));
    return GC_OK;
}

/* Radix passes over a round's keys in key0 and val0 (`bits` of them), then the settle. */
int sort_round_keys(const uint32_t *u, uint32_t nu, int bits, const char *what, Bz2Scratch &s, uint32_t *u_next,
                    cudaStream_t st, gc_error *err)
{
    cub::DoubleBuffer<uint64_t> rk(s.key0, s.key1);
    cub::DoubleBuffer<uint32_t> rv(s.val0, s.val1);
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceRadixSort::SortPairs(s.cub_tmp, tmp, rk, rv, (int)nu, 0, bits, st));
    bz2_prof(st, what, nu);
    return settle_sort(FirstStarts{ rk.Current() }, rv.Current(), u, nu, s, u_next, s.counts + 2, st, err);
}

/* A round of every group at once: radix passes over (group ordinal, rank ahead). */
int round_by_radix(const uint32_t *u, uint32_t nu, uint32_t groups, uint64_t h, uint32_t maxp, uint32_t nb,
                   Bz2Scratch &s, uint32_t *u_next, cudaStream_t st, gc_error *err)
{
    int rc = group_ordinals(u, nu, s.ulist1, s, st, err);
    if (rc != GC_OK)
        return rc;
    const int pbits = bits_for(maxp - 1);
    round_keys_by_group<<<bwt_grid(nu), kBz2Threads, 0, st>>>(u, nu, s.ulist1, s.sa, s.isa, s.blk, nb, h, pbits,
                                                              s.key0, s.val0);
    GC_CUDA_LAUNCHED("round_keys_by_group");
    return sort_round_keys(u, nu, bits_for(groups - 1) + pbits, "round_sort_radix", s, u_next, st, err);
}

/* A chain round (bz2_enc_bwt_chain.cu): radix passes over (group ordinal, chain or rank ahead). */
int round_by_chains(const uint32_t *u, uint32_t nu, uint32_t groups, const Bz2ChainRound &r, uint32_t nb,
                    Bz2Scratch &s, uint32_t *u_next, cudaStream_t st, gc_error *err)
{
    int rc = group_ordinals(u, nu, s.ulist1, s, st, err);
    if (rc == GC_OK) /* the links live in key1 until the keys are made */
        rc = bz2_chain_keys(u, nu, s.ulist1, nb, r, s, s.key1, s.key0, s.val0, st, err);
    if (rc != GC_OK)
        return rc;
    bz2_prof(st, "round_chain_links", r.end - r.first);
    return sort_round_keys(u, nu, bits_for(groups - 1) + chain_key_bits(r.pbits), "round_sort_chain", s, u_next,
                           st, err);
}

/*
 * Whether the round at depth h can be the chain round of the blocks with a step (stepped: each
 * one's (sort_off, period)), and its shape: not when the key would not fit 64 bits.
 */
bool chain_round(const std::vector<uint32_t> &stepped, uint64_t h, uint32_t groups, int pbits, Bz2ChainRound *r)
{
    *r = Bz2ChainRound{ h, UINT32_MAX, 0, pbits };
    for (size_t k = 0; k + 1 < stepped.size(); k += 2) {
        r->first = std::min(r->first, stepped[k]);
        r->end = std::max(r->end, stepped[k] + stepped[k + 1]);
    }
    return r->first < r->end && bits_for(groups - 1) + chain_key_bits(pbits) <= 64;
}

/* A round of each group on its own (ulist1 holds their starts): CUB's segmented sort of the rank ahead. */
int round_by_segments(const uint32_t *u, uint32_t nu, uint32_t groups, uint64_t h, uint32_t nb, Bz2Scratch &s,
                      uint32_t *u_next, cudaStream_t st, gc_error *err)
{
    cub::DoubleBuffer<uint32_t> rk(reinterpret_cast<uint32_t *>(s.key0), reinterpret_cast<uint32_t *>(s.key1));
    cub::DoubleBuffer<uint32_t> rv(s.val0, s.val1);
    round_keys_in_group<<<bwt_grid(nu), kBz2Threads, 0, st>>>(u, nu, s.sa, s.isa, s.blk, nb, h, rk.Current(),
                                                              rv.Current());
    GC_CUDA_LAUNCHED("round_keys_in_group");
    thrust::counting_iterator<uint32_t> idx(0);
    auto ends = thrust::make_transform_iterator(idx, SegmentEnd{ s.ulist1, groups, nu });
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceSegmentedSort::SortPairs(s.cub_tmp, tmp, rk, rv, (int)nu, (int)groups, s.ulist1, ends, st));
    bz2_prof(st, "round_sort_segments", nu);
    return settle_sort(RoundStarts{ u, rk.Current() }, rv.Current(), u, nu, s, u_next, s.counts + 2, st, err);
}

/*
 * The entries a split round keeps in the halves of key0 and key1 that a round's 32-bit keys
 * leave free, and in u_next until the settle writes it: the large entries' radix keys (two
 * buffers), their values (two) and their list positions.
 */
struct SplitSpace {
    uint64_t *lkey0, *lkey1;
    uint32_t *lval0, *lval1, *at;
};

uint64_t split_half(const Bz2Scratch &s) /* where the upper halves the split round uses begin */
{
    return (s.rle_cap + 1) / 2;
}

uint64_t split_cap(const Bz2Scratch &s) /* large entries a split round holds */
{
    return s.rle_cap / 2 * 2 / 3;
}

SplitSpace split_space(const Bz2Scratch &s, uint32_t *u_next, uint32_t m)
{
    const uint64_t half = split_half(s);
    return SplitSpace{ s.key0 + half, s.key1 + half, u_next, u_next + half,
                       reinterpret_cast<uint32_t *>(s.key0 + half + m) };
}

/*
 * A round whose large groups go by radix passes over (group ordinal, rank ahead), gathered
 * apart, and whose small groups by CUB's segmented sort, in the same keys: each kind where it
 * is cheap. ulist1 holds the groups' starts; the small ones' indices go to its second half.
 */
int round_split(const uint32_t *u, uint32_t nu, const RoundShape &shape, uint64_t h, uint32_t maxp, uint32_t nb,
                Bz2Scratch &s, uint32_t *u_next, cudaStream_t st, gc_error *err)
{
    const uint32_t m = shape.large_members, groups = shape.groups;
    const uint32_t n_small = groups - shape.large_groups;
    const int pbits = bits_for(maxp - 1);
    SplitSpace sp = split_space(s, u_next, m);
    uint32_t *gid = reinterpret_cast<uint32_t *>(s.key1); /* until the segmented sort writes key1 */
    cub::DoubleBuffer<uint32_t> rk(reinterpret_cast<uint32_t *>(s.key0), gid);
    cub::DoubleBuffer<uint32_t> rv(s.val0, s.val1);
    round_keys_in_group<<<bwt_grid(nu), kBz2Threads, 0, st>>>(u, nu, s.sa, s.isa, s.blk, nb, h, rk.Current(),
                                                              rv.Current());
    GC_CUDA_LAUNCHED("round_keys_in_group");
    /* the large entries: their positions, their radix keys, sorted */
    int rc = group_ordinals(u, nu, gid, s, st, err);
    if (rc != GC_OK)
        return rc;
    thrust::counting_iterator<uint32_t> idx(0);
    size_t tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceSelect::If(s.cub_tmp, tmp, idx, sp.at, s.counts + 6, (int)nu,
                                  InLargeGroup{ gid, s.ulist1, groups, nu }, st));
    gather_large<<<bwt_grid(m), kBz2Threads, 0, st>>>(sp.at, m, gid, rk.Current(), rv.Current(), pbits, sp.lkey0,
                                                      sp.lval0);
    GC_CUDA_LAUNCHED("gather_large");
    cub::DoubleBuffer<uint64_t> lk(sp.lkey0, sp.lkey1);
    cub::DoubleBuffer<uint32_t> lv(sp.lval0, sp.lval1);
    tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceRadixSort::SortPairs(s.cub_tmp, tmp, lk, lv, (int)m, 0, bits_for(groups - 1) + pbits, st));
    /* the small groups, each on its own */
    uint32_t *small = s.ulist1 + split_half(s);
    tmp = s.cub_bytes;
    GC_CUDA(cub::DeviceSelect::If(s.cub_tmp, tmp, idx, small, s.counts + 7, (int)groups,
                                  SmallGroup{ s.ulist1, groups, nu }, st));
    auto begins = thrust::make_transform_iterator(idx, IndexedStart{ small, s.ulist1 });
    auto ends = thrust::make_transform_iterator(idx, IndexedEnd{ small, SegmentEnd{ s.ulist1, groups, nu } });
    if (n_small) {
        tmp = s.cub_bytes;
        GC_CUDA(
            cub::DeviceSegmentedSort::SortPairs(s.cub_tmp, tmp, rk, rv, (int)nu, (int)n_small, begins, ends, st));
    }
    scatter_large<<<bwt_grid(m), kBz2Threads, 0, st>>>(sp.at, m, lk.Current(), lv.Current(), (1u << pbits) - 1,
                                                       rk.Current(), rv.Current());
    GC_CUDA_LAUNCHED("scatter_large");
    bz2_prof(st, "round_sort_split", nu);
    return settle_sort(RoundStarts{ u, rk.Current() }, rv.Current(), u, nu, s, u_next, s.counts + 2, st, err);
}

/* Last column, expanded by n / period, and origPtr. */
__global__ void last_column(const uint8_t *rle, Bz2Block *blk, uint32_t nb, uint64_t total, const uint32_t *sa,
                            uint8_t *bwt)
{
    uint64_t o = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= total)
        return;
    Bz2Block &b = blk[block_at<&Bz2Block::rle_off>(blk, nb, o)];
    uint32_t local = (uint32_t)(o - b.rle_off), k = b.n / b.period;
    uint32_t r = local / k;
    uint32_t i = sa[b.sort_off + r] - b.sort_off;
    bwt[o] = rle[b.rle_off + (i == 0 ? b.period - 1 : i - 1)];
    if (i == 0 && local % k == k - 1) /* the last of rotation 0's k equals (docs/BZIP2.md 4) */
        b.orig = r * k + k - 1;
}

} // namespace

size_t bz2_bwt_cub_bytes(uint64_t rle_cap)
{
    const int n = (int)rle_cap;
    size_t need = 0, b = 0;
    thrust::counting_iterator<uint32_t> idx(0);
    auto first_items = thrust::make_transform_iterator(idx, SettleAt<FirstStarts>{});
    auto first_out =
        thrust::make_transform_output_iterator(thrust::make_discard_iterator(), WriteSettled<FirstStarts>{});
    cub::DeviceScan::InclusiveScan(nullptr, b, first_items, first_out, SettleJoin{}, n);
    need = std::max(need, b);
    auto round_items = thrust::make_transform_iterator(idx, SettleAt<RoundStarts>{});
    auto round_out =
        thrust::make_transform_output_iterator(thrust::make_discard_iterator(), WriteSettled<RoundStarts>{});
    cub::DeviceScan::InclusiveScan(nullptr, b, round_items, round_out, SettleJoin{}, n);
    need = std::max(need, b);
    auto list_starts = thrust::make_transform_iterator((const uint32_t *)nullptr, StartsGroup{});
    cub::DeviceSelect::Flagged(nullptr, b, idx, list_starts, (uint32_t *)nullptr, (uint32_t *)nullptr, n);
    need = std::max(need, b);
    cub::DeviceScan::InclusiveSum(nullptr, b, list_starts, (uint32_t *)nullptr, n);
    need = std::max(need, b);
    auto large = thrust::make_transform_iterator(idx, LargeCount{});
    cub::DeviceReduce::Reduce(nullptr, b, large, (uint2 *)nullptr, n / 2 + 1, SumPairs{}, make_uint2(0, 0));
    need = std::max(need, b);
    cub::DoubleBuffer<uint64_t> kb(nullptr, nullptr);
    cub::DoubleBuffer<uint32_t> vb(nullptr, nullptr);
    cub::DeviceRadixSort::SortPairs(nullptr, b, kb, vb, n, 0, 64);
    need = std::max(need, b);
    /* a round's groups have two or more members each */
    const int max_groups = n / 2 + 1;
    cub::DoubleBuffer<uint32_t> rk(nullptr, nullptr);
    auto ends = thrust::make_transform_iterator(idx, SegmentEnd{});
    cub::DeviceSegmentedSort::SortPairs(nullptr, b, rk, vb, n, max_groups, (const uint32_t *)nullptr, ends);
    need = std::max(need, b);
    /* a split round's own calls */
    cub::DeviceSelect::If(nullptr, b, idx, (uint32_t *)nullptr, (uint32_t *)nullptr, n, InLargeGroup{});
    need = std::max(need, b);
    cub::DeviceSelect::If(nullptr, b, idx, (uint32_t *)nullptr, (uint32_t *)nullptr, max_groups, SmallGroup{});
    need = std::max(need, b);
    auto begins = thrust::make_transform_iterator(idx, IndexedStart{});
    auto indexed_ends = thrust::make_transform_iterator(idx, IndexedEnd{});
    cub::DeviceSegmentedSort::SortPairs(nullptr, b, rk, vb, n, max_groups, begins, indexed_ends);
    return std::max(need, b);
}

int bz2_bwt(uint32_t nb, uint64_t rle_total, Bz2Scratch &s, cudaStream_t st, gc_error *err)
{
    if (nb == 0)
        return GC_OK;
    find_periods<<<nb, kBz2Threads, 0, st>>>(s.rle, s.blk);
    GC_CUDA_LAUNCHED("find_periods");
    bz2_prof(st, "find_periods", nb);
    int rc = bz2_find_steps(nb, s, st, err);
    if (rc != GC_OK)
        return rc;
    bz2_prof(st, "find_steps", nb);
    sort_offsets<<<1, 1, 0, st>>>(s.blk, nb, s.counts, s.ulist2);
    GC_CUDA_LAUNCHED("sort_offsets");
    uint32_t hc[3];
    GC_CUDA(cudaMemcpyAsync(hc, s.counts, sizeof hc, cudaMemcpyDeviceToHost, st));
    GC_CUDA(cudaStreamSynchronize(st));
    const uint32_t ns = hc[0], maxp = hc[1];
    std::vector<uint32_t> stepped(2 * (size_t)hc[2]);
    if (hc[2]) {
        GC_CUDA(cudaMemcpyAsync(stepped.data(), s.ulist2, stepped.size() * 4, cudaMemcpyDeviceToHost, st));
        GC_CUDA(cudaStreamSynchronize(st));
    }
    if (ns) {
        /* the block's bits, then as much of the rotation as fills the radix passes that kBz2KeyBytes
         * needs: a part of a byte more still splits groups for free (h counts the whole bytes only) */
        const int bbits = nb > 1 ? bits_for(nb - 1) : 0;
        const int kbits = std::min(64, (8 * kBz2KeyBytes + bbits + 7) / 8 * 8), tbits = kbits - bbits;
        first_keys<<<bwt_grid(ns), kBz2Threads, 0, st>>>(s.rle, s.blk, nb, ns, tbits, s.key0, s.val0);
        GC_CUDA_LAUNCHED("first_keys");
        cub::DoubleBuffer<uint64_t> kb(s.key0, s.key1);
        cub::DoubleBuffer<uint32_t> vb(s.val0, s.val1);
        size_t tmp = s.cub_bytes;
        GC_CUDA(cub::DeviceRadixSort::SortPairs(s.cub_tmp, tmp, kb, vb, (int)ns, 0, kbits, st));
        bz2_prof(st, "first_sort", ns);
        rc = settle_sort(FirstStarts{ kb.Current() }, vb.Current(), nullptr, ns, s, s.ulist0, s.counts + 2, st,
                         err);
        if (rc != GC_OK)
            return rc;
        bz2_prof(st, "first_ranks", ns);
        uint32_t nu = 0;
        GC_CUDA(cudaMemcpyAsync(&nu, s.counts + 2, 4, cudaMemcpyDeviceToHost, st));
        GC_CUDA(cudaStreamSynchronize(st));
        uint32_t *u = s.ulist0, *u_next = s.ulist2;
        bool chained = false; /* the blocks with a step have had their chain round */
        for (uint64_t h = tbits / 8; nu > 0 && h < maxp; h *= 2) {
            RoundShape shape;
            rc = round_groups(u, nu, s, st, &shape, err);
            if (rc != GC_OK)
                return rc;
            bz2_prof(st, "round_groups", shape.groups);
            bz2_prof(st, "round_large", shape.large_members);
            const uint64_t share = (uint64_t)shape.large_members * 256;
            Bz2ChainRound chain;
            if (!chained && chain_round(stepped, h, shape.groups, bits_for(maxp - 1), &chain)) {
                rc = round_by_chains(u, nu, shape.groups, chain, nb, s, u_next, st, err);
                chained = true;
            } else if (share <= (uint64_t)nu * kBz2SegmentShare)
                rc = round_by_segments(u, nu, shape.groups, h, nb, s, u_next, st, err);
            else if (share <= (uint64_t)nu * kBz2SplitShare && shape.large_members <= split_cap(s))
                rc = round_split(u, nu, shape, h, maxp, nb, s, u_next, st, err);
            else
                rc = round_by_radix(u, nu, shape.groups, h, maxp, nb, s, u_next, st, err);
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
    last_column<<<bwt_grid(rle_total), kBz2Threads, 0, st>>>(s.rle, s.blk, nb, rle_total, s.sa, s.bwt);
    GC_CUDA_LAUNCHED("last_column");
    bz2_prof(st, "last_column", rle_total);
    return GC_OK;
}

} // namespace gcgpu
