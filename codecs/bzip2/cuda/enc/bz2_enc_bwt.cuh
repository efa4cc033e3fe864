/*
 * bz2_enc_bwt.cuh - what the rotation sort's files share (bz2_enc_bwt.cu runs
 * the sort, bz2_enc_bwt_chain.cu its chain rounds): the sort space's layout,
 * the unresolved list's entries, and the rank ahead of a rotation.
 */
#ifndef GC_BZ2_ENC_BWT_CUH
#define GC_BZ2_ENC_BWT_CUH

#include "bz2_gpu.cuh"

namespace gcgpu {

static inline unsigned bwt_grid(uint64_t n)
{
    return (unsigned)((n + kBz2Threads - 1) / kBz2Threads);
}

/* An unresolved list entry: a sorted position, with kGroupStart set where a group begins. */
constexpr uint32_t kGroupStart = 1u << 31;
constexpr uint32_t kPosition = kGroupStart - 1;

/* The block whose rotations hold sort index g. */
static __device__ __forceinline__ uint32_t block_of_sort(const Bz2Block *blk, uint32_t nb, uint32_t g)
{
    return block_at<&Bz2Block::sort_off>(blk, nb, g);
}

/* The sort index h places after sort index g, within g's block b. */
static __device__ __forceinline__ uint32_t sort_ahead(const Bz2Block &b, uint32_t g, uint64_t h)
{
    return b.sort_off + (uint32_t)((g - b.sort_off + h % b.period) % b.period);
}

/* The rank within block b's root of the rotation h places after sort index g. */
static __device__ __forceinline__ uint32_t rank_at(const uint32_t *isa, const Bz2Block &b, uint32_t g, uint64_t h)
{
    return isa[sort_ahead(b, g, h)] - b.sort_off;
}

/*
 * A chain round (bz2_enc_bwt_chain.cu) at depth `depth`: the groups of blocks with a step are
 * ordered by their chains, every other group by the rank `depth` places ahead; afterwards every
 * group is sorted to twice the depth at least, as after any round.
 */
struct Bz2ChainRound {
    uint64_t depth;
    uint32_t first, end; /* the blocks with a step: [first, end) of the sort space */
    int pbits;           /* bits of a rank within a root */
};

/* Bits of a chain round's key below the group ordinal. */
static __host__ __device__ inline int chain_key_bits(int pbits)
{
    return 2 * pbits + 2;
}

/* Each block's repeat step into blk[].step (after the roots are known). */
int bz2_find_steps(uint32_t nb, Bz2Scratch &s, cudaStream_t st, gc_error *err);

/* A chain round's radix keys (group ordinal, then chain_key_bits) for the list's nu entries,
 * into key and val (gid: 1-based group ordinals; link: scratch over r's sort space). */
int bz2_chain_keys(const uint32_t *u, uint32_t nu, const uint32_t *gid, uint32_t nb, const Bz2ChainRound &r,
                   Bz2Scratch &s, uint64_t *link, uint64_t *key, uint32_t *val, cudaStream_t st, gc_error *err);

} // namespace gcgpu

#endif
