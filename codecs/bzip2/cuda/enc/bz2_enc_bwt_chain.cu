/*
 * bz2_enc_bwt_chain.cu - the rotation sort's chain rounds: the groups of a
 * block that nearly repeats ordered in one round, where doubling takes one
 * round per bit of the repeats' length (docs/BZIP2.md section 4: periodic
 * blocks whose length the period does not divide, records repeated).
 *
 * Two rotations of one group share at least `depth` (h) bytes, so i against
 * j is i + h against j + h. Each group G names a successor: the group of
 * its first member's rotation h ahead. A member *follows* when its rotation
 * h ahead lies in G's successor, and then its chain goes on from there.
 * Members that followed k times sit in one group (the same path), so the
 * first step where a member does not follow orders it against all that still
 * do: it lands in a group X below or above the successor there. So:
 *   - members whose chain lands below come first, the sooner the earlier,
 *     then by X; those landing above come last, the sooner the later;
 *   - a member that follows for ever, or into a settled group, sits between
 *     them: at most one per group can (two would be equal rotations, which
 *     the root rule took out, or share that settled rotation).
 * Members with the same steps and X share (steps + 2) h bytes: the round is
 * a doubling round that also settles every long repeat at once. Chain
 * lengths come from pointer jumping over the blocks' sort space; a finite
 * chain visits each rotation once, so pbits passes reach every end.
 */
#include "bz2_enc_bwt.cuh"

namespace gcgpu {

namespace {

/* A link: bits 0-31 the rotation reached (sort index), 32-61 the steps to it; bit 63 set once that
 * is the chain's last rotation, bit 62 with it when the chain sits between (follows for ever or into
 * a settled group). */
constexpr uint64_t kEnd = 1ull << 63;
constexpr uint64_t kBetween = 1ull << 62;
constexpr uint64_t kStepsMask = 0x3fffffffull;

__device__ __forceinline__ bool probe_repeats(const uint8_t *s, uint32_t q)
{
    for (uint32_t j = 0; j < kBz2StepProbe; j++)
        if (s[q + j] != s[j])
            return false;
    return true;
}

/* The smallest candidate q >= from (at most last) where the root's first bytes repeat; UINT32_MAX if
 * none. Most blocks have none: each thread tries several q between barriers. */
__device__ uint32_t next_candidate(const uint8_t *s, uint32_t from, uint32_t last, uint32_t *first)
{
    constexpr uint32_t kPerThread = 8;
    if (threadIdx.x == 0)
        *first = UINT32_MAX;
    __syncthreads();
    for (uint32_t base = from; base <= last; base += blockDim.x * kPerThread) {
        bool hit = false;
        for (uint32_t k = 0; k < kPerThread && !hit; k++) {
            const uint32_t q = base + k * blockDim.x + threadIdx.x;
            if (q <= last && probe_repeats(s, q)) {
                atomicMin(first, q);
                hit = true;
            }
        }
        if (__syncthreads_or(hit))
            break;
    }
    return *first;
}

/* Whether s[i] != s[i + q] for at most `allowed` of i < L - q (stops counting past it). */
__device__ bool few_misses(const uint8_t *s, uint32_t L, uint32_t q, uint32_t allowed, uint32_t *misses)
{
    constexpr uint32_t kPerThread = 16;
    if (threadIdx.x == 0)
        *misses = 0;
    __syncthreads();
    for (uint32_t base = 0; base < L - q; base += blockDim.x * kPerThread) {
        uint32_t mine = 0;
        for (uint32_t k = 0; k < kPerThread; k++) {
            const uint32_t i = base + k * blockDim.x + threadIdx.x;
            if (i < L - q && s[i] != s[i + q])
                mine++;
        }
        if (mine)
            atomicAdd(misses, mine);
        __syncthreads();
        const uint32_t seen = *misses;
        __syncthreads(); /* every thread has read it before the next chunk adds */
        if (seen > allowed)
            return false;
    }
    return true;
}

/* One block per CTA: the root's step (the first of kBz2StepTries candidates with few misses), else 0. */
__global__ void find_steps(const uint8_t *rle, Bz2Block *blk)
{
    __shared__ uint32_t first, misses;
    Bz2Block &b = blk[blockIdx.x];
    const uint32_t L = b.period;
    const uint8_t *s = rle + b.rle_off;
    const uint32_t last = L > kBz2StepRepeats * kBz2StepProbe ? L / kBz2StepRepeats : 0;
    uint32_t step = 0, from = 1;
    for (int t = 0; t < kBz2StepTries && from <= last && !step; t++) {
        const uint32_t q = next_candidate(s, from, last, &first);
        if (q == UINT32_MAX)
            break;
        if (few_misses(s, L, q, L >> kBz2StepMissShift, &misses))
            step = q;
        from = q + 1;
    }
    if (threadIdx.x == 0)
        b.step = step;
}

/* Whether the group at sort position p (a group start) has two or more members. */
__device__ __forceinline__ bool grouped(const uint32_t *sa, const uint32_t *isa, const Bz2Block &b, uint32_t p)
{
    return p + 1 < b.sort_off + b.period && isa[sa[p + 1]] == p;
}

/* The group of the rotation h ahead of the first member of the group at sort position p. */
__device__ __forceinline__ uint32_t successor(const uint32_t *sa, const uint32_t *isa, const Bz2Block &b,
                                              uint32_t p, uint64_t h)
{
    return isa[sort_ahead(b, sa[p], h)];
}

/* The list's entries of blocks with a step: a link to the rotation h ahead when it follows into a
 * group still open, else the chain's end (here, no steps; in between if it follows into a settled
 * group). */
__global__ void chain_links(const uint32_t *u, uint32_t nu, const uint32_t *sa, const uint32_t *isa,
                            const Bz2Block *blk, uint32_t nb, Bz2ChainRound r, uint64_t *link)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nu)
        return;
    const uint32_t g = sa[u[t] & kPosition];
    const Bz2Block &b = blk[block_of_sort(blk, nb, g)];
    if (!b.step)
        return;
    const uint32_t next = sort_ahead(b, g, r.depth), x = isa[next];
    if (x != successor(sa, isa, b, isa[g], r.depth))
        link[g] = kEnd | g;
    else if (!grouped(sa, isa, b, x))
        link[g] = kEnd | kBetween | g;
    else
        link[g] = (1ull << 32) | next;
}

/* One pointer-jumping pass, in place: a link that has not reached its chain's end takes the one it
 * points at. A link read while another thread rewrites it is either value, each a true path, so
 * every pass at least doubles what it covers. */
__global__ void chain_jump(uint64_t *link, uint32_t first, uint32_t end)
{
    const uint32_t g = first + blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= end)
        return;
    const uint64_t a = link[g];
    if (a & kEnd)
        return;
    const uint64_t b = link[(uint32_t)a];
    const uint64_t steps = ((a >> 32) & kStepsMask) + ((b >> 32) & kStepsMask);
    link[g] = (b & (kEnd | kBetween)) | (steps << 32) | (uint32_t)b;
}

/* The round's radix keys: (group ordinal; for a chain, where it ends: below, between, above, with
 * its steps and landing group; else the rank ahead). */
__global__ void chain_keys(const uint32_t *u, uint32_t nu, const uint32_t *gid, const uint32_t *sa,
                           const uint32_t *isa, const Bz2Block *blk, uint32_t nb, Bz2ChainRound r,
                           const uint64_t *link, uint64_t *key, uint32_t *val)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nu)
        return;
    const uint32_t g = sa[u[t] & kPosition];
    const Bz2Block &b = blk[block_of_sort(blk, nb, g)];
    uint64_t field;
    if (!b.step) {
        field = rank_at(isa, b, g, r.depth);
    } else {
        const uint64_t a = link[g];
        if (!(a & kEnd) || (a & kBetween)) {
            field = 1ull << (2 * r.pbits);
        } else {
            const uint32_t last = (uint32_t)a, steps = (uint32_t)((a >> 32) & kStepsMask);
            const uint32_t x = isa[sort_ahead(b, last, r.depth)];
            const uint64_t most = (1ull << r.pbits) - 1;
            if (x < successor(sa, isa, b, isa[last], r.depth))
                field = ((uint64_t)steps << r.pbits) | (x - b.sort_off);
            else
                field = (2ull << (2 * r.pbits)) | ((most - steps) << r.pbits) | (x - b.sort_off);
        }
    }
    key[t] = ((uint64_t)(gid[t] - 1) << chain_key_bits(r.pbits)) | field;
    val[t] = g;
}

} // namespace

int bz2_find_steps(uint32_t nb, Bz2Scratch &s, cudaStream_t st, gc_error *err)
{
    find_steps<<<nb, kBz2Threads, 0, st>>>(s.rle, s.blk);
    GC_CUDA_LAUNCHED("find_steps");
    return GC_OK;
}

int bz2_chain_keys(const uint32_t *u, uint32_t nu, const uint32_t *gid, uint32_t nb, const Bz2ChainRound &r,
                   Bz2Scratch &s, uint64_t *link, uint64_t *key, uint32_t *val, cudaStream_t st, gc_error *err)
{
    /* rotations off the list read as ends: no link points at one */
    GC_CUDA(cudaMemsetAsync(link + r.first, 0xff, (size_t)(r.end - r.first) * sizeof *link, st));
    chain_links<<<bwt_grid(nu), kBz2Threads, 0, st>>>(u, nu, s.sa, s.isa, s.blk, nb, r, link);
    GC_CUDA_LAUNCHED("chain_links");
    /* a chain is shorter than its root, so pbits passes reach every exit */
    for (int k = 0; k < r.pbits; k++) {
        chain_jump<<<bwt_grid(r.end - r.first), kBz2Threads, 0, st>>>(link, r.first, r.end);
        GC_CUDA_LAUNCHED("chain_jump");
    }
    chain_keys<<<bwt_grid(nu), kBz2Threads, 0, st>>>(u, nu, gid, s.sa, s.isa, s.blk, nb, r, link, key, val);
    GC_CUDA_LAUNCHED("chain_keys");
    return GC_OK;
}

} // namespace gcgpu
