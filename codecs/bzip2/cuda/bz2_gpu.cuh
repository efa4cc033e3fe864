/*
 * bz2_gpu.cuh - the bzip2 encoder on the device, shared by its stage files
 * (not seen by C code). One *piece* is input that starts at a block start
 * (docs/BZIP2.md sections 3 and 11), encoded in two launches:
 *
 *   bz2_enc_blocks (bz2_enc.cu): plan + RLE1 + block CRC (bz2_enc_plan.cu),
 *       BWT (bz2_enc_bwt.cu), MTF/RLE2 (bz2_enc_mtf.cu), tables and the
 *       exact bit length of every block (bz2_enc_tables.cu); the piece's
 *       totals land in a Bz2Result the caller copies back;
 *   bz2_enc_pack (bz2_enc_pack.cu): once the caller knows the bit offset of
 *       the piece in its stream (mod 8), every block's bits into the output.
 *
 * Stream framing (header, end-of-stream marker, combined CRC) is the
 * caller's: a few bytes on the host (bz2_gpu.cu, gpu_resident.cu).
 */
#ifndef GC_BZ2_GPU_CUH
#define GC_BZ2_GPU_CUH

#include <stddef.h>
#include <stdint.h>

#include "bz2_format.h"
#include "bz2_policy.cuh"
#include "gpu_internal.cuh"

namespace gcgpu {

constexpr size_t kBz2ChunkRleBytes = 32;

/* One block of the piece, as the planner cut it. */
struct Bz2Block {
    uint32_t in_start, in_len; /* piece-relative input bytes */
    uint32_t rle_off, n;       /* RLE1 bytes: rle[rle_off .. + n) */
    uint32_t run0, skip0;      /* first run (index into the run list) and bytes of it in earlier blocks */
    uint32_t sort_off, period; /* BWT: rotations [sort_off, + period) of the sort space; period | n */
    uint32_t step;             /* BWT: the root's repeat step, 0 for none (bz2_enc_bwt_chain.cu) */
    uint32_t crc;              /* block CRC (docs/BZIP2.md section 2) */
    uint32_t orig;             /* origPtr */
    uint32_t n_sym;            /* MTF/RLE2 symbols with EOB */
    uint32_t alpha;            /* n_in_use + 2 */
    uint32_t groups;           /* nGroups */
    uint32_t in_use[8];        /* bit b: byte b used */
    uint64_t bits;             /* the whole block's bit length */
    uint64_t head_bits;        /* bits before the first symbol (magic .. code lengths) */
    uint64_t bit_off;          /* pack: offset in the piece's output (after the piece's bit0) */
};

/* The piece's totals, copied back to the host after bz2_enc_blocks. */
struct Bz2Result {
    uint32_t status; /* 0, or a gc_status: the piece cannot be encoded */
    uint32_t blocks;
    uint64_t bits;     /* sum of the blocks' bits */
    uint32_t combined; /* the blocks' CRCs folded as the stream's combined CRC, from 0 */
    uint32_t pad;
    uint64_t rle_bytes; /* RLE1 bytes of all blocks */
    uint64_t in_used;   /* input bytes the blocks cover (the piece's, or up to its last whole block) */
};

/* Device memory of one piece's encoder, carved from one scratch buffer. */
struct Bz2Scratch {
    uint64_t piece_cap; /* input bytes at most */
    uint64_t rle_cap;   /* RLE1 bytes at most */
    uint32_t max_blocks;
    uint64_t group_cap; /* selectors at most */
    Bz2Result *res;
    Bz2Block *blk;
    uint32_t *runs;    /* run starts, then the input length */
    uint32_t *run_off; /* RLE1 offset of each run in an unsplit segment encoding */
    uint32_t *n_runs;  /* device count */
    uint8_t *rle, *bwt;
    uint64_t *key0, *key1;
    uint32_t *val0, *val1;
    uint32_t *sa;                       /* sorted rotations (sort positions) */
    uint32_t *isa;                      /* rank of each sort position */
    uint32_t *ulist0, *ulist1, *ulist2; /* sorted positions of unresolved groups, and a temporary */
    uint32_t *chunk_base;               /* MTF chunks: first chunk of each block, then the total */
    uint8_t *mtf_lists;                 /* per chunk 256 bytes: its MTF list front, then its start list */
    uint16_t *mtf_front;                /* per chunk: entries of its front */
    uint8_t *mtf_rle;                   /* per chunk kBz2ChunkRleBytes: its RLE2 counts and offsets */
    uint32_t *counts;                   /* small device counters */
    uint32_t *crc_acc;                  /* per block: its tiles' CRCs moved to its end, xored */
    uint16_t *sym;
    uint8_t *sel;       /* selectors */
    uint8_t *sel_mtf;   /* their MTF indices */
    uint32_t *gbit_off; /* each group's first bit after its block's head_bits */
    uint8_t *lens;      /* per block BZ2_MAX_GROUPS x BZ2_MAX_ALPHA code lengths */
    uint32_t *codes;    /* per block BZ2_MAX_GROUPS x BZ2_MAX_ALPHA canonical codes */
    void *cub_tmp;
    size_t cub_bytes;
};

/* Block of a position: the last block whose field F (an offset the blocks hold ascending) is <= pos. */
template <uint32_t Bz2Block::*F>
__device__ __forceinline__ uint32_t block_at(const Bz2Block *blk, uint32_t nb, uint64_t pos)
{
    uint32_t lo = 0, hi = nb - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (blk[mid].*F <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__host__ __device__ __forceinline__ uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}
__host__ __device__ __forceinline__ uint32_t min32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* Group index base of block b (its selectors are sel[base .. + ceil(n_sym/50))). */
__host__ __device__ inline uint64_t bz2_group_base(const Bz2Block &b, uint32_t idx)
{
    return (uint64_t)(b.rle_off + idx) / BZ2_GROUP_SIZE + idx;
}

/* Scratch for pieces of piece_cap input bytes (bz2_enc.cu), in two parts:
 * the piece part (what bz2_enc_pack reads: blocks, symbols, selectors,
 * tables, about 3 bytes per input byte) lives from a piece's kernels to its
 * pack; the work part (the sort and the other stages' working memory, about
 * 65 bytes per input byte) is free again when bz2_enc_blocks returns, so one
 * serves every slot of a context. The carves fail (GC_E_LIMIT) when a part
 * is too small. */
size_t bz2_piece_bytes(uint64_t piece_cap);
size_t bz2_work_bytes(uint64_t piece_cap);
size_t bz2_scratch_bytes(uint64_t piece_cap); /* both parts, one buffer */
int bz2_scratch_carve2(void *piece, size_t piece_len, void *work, size_t work_len, uint64_t piece_cap,
                       Bz2Scratch *s, gc_error *err);
int bz2_scratch_carve(void *base, size_t len, uint64_t piece_cap, Bz2Scratch *s, gc_error *err); /* one buffer */

/* Everything up to the blocks' bit lengths, for d_src[0..len) at `level`
 * (d_src a block start of the input; `whole`: d_src + len is the input's
 * end, else only the blocks that end before it, h_res->in_used bytes);
 * waits for the device (the rotation sort sizes each round from the last).
 * s->res holds the totals when it returns GC_OK. */
int bz2_enc_blocks(const uint8_t *d_src, uint64_t len, bool whole, int level, Bz2Scratch &s,
                   const Crc32Tables *d_tab32, cudaStream_t st, Bz2Result *h_res, float *stage_ms, gc_error *err);
/* stage_ms (may be null): plan + RLE1 + CRC, BWT, MTF, tables, added to [0..3]. */
/* Write the piece's blocks at bits bit0 (0..31) + their offsets into d_out
 * (4-byte aligned), words [0, ceil((bit0 + bits) / 32)) zeroed first; with
 * fresh false and bit0 > 0, word 0 is kept (the bits before bit0 are an
 * earlier piece's, the rest of it zero). Asynchronous. */
int bz2_enc_pack(Bz2Scratch &s, uint32_t blocks, uint64_t bits, unsigned bit0, uint8_t *d_out, size_t out_cap,
                 bool fresh, cudaStream_t st, gc_error *err);

/* Tuning aid: with GC_BZ2_PROFILE set in the environment, wait for st and
 * print to stderr the milliseconds since the last mark with `what` (and
 * `n`, an item count); otherwise nothing (bz2_enc_prof.cu). */
void bz2_prof(cudaStream_t st, const char *what, uint64_t n);

/* Stage launchers (asynchronous unless they say otherwise). */
/* waits: the block count, the RLE1 total and the input they cover (whole: as bz2_enc_blocks) */
int bz2_plan(const uint8_t *d_src, uint64_t len, uint32_t limit, bool whole, Bz2Scratch &s, cudaStream_t st,
             uint32_t *blocks, uint64_t *rle_bytes, uint64_t *used, gc_error *err);
int bz2_rle1_crc(const uint8_t *d_src, uint64_t len, uint32_t blocks, uint64_t rle_total, Bz2Scratch &s,
                 const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err);
int bz2_bwt(uint32_t blocks, uint64_t rle_total, Bz2Scratch &s, cudaStream_t st, gc_error *err); /* waits */
size_t bz2_bwt_cub_bytes(uint64_t rle_cap); /* CUB temporary storage bz2_bwt needs at most */
/* The CRCs of blocks blk[0..nb) of buf[0..len) (in_start / in_len, back to
 * back from 0) into blk[i].crc; acc: nb words of scratch. The decoder checks
 * its output with these too. */
int bz2_block_crcs(const uint8_t *buf, uint64_t len, Bz2Block *blk, uint32_t nb, uint32_t *acc,
                   const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err);
int bz2_mtf(uint32_t blocks, Bz2Scratch &s, cudaStream_t st, gc_error *err);
int bz2_tables(uint32_t blocks, Bz2Scratch &s, cudaStream_t st, gc_error *err);

} // namespace gcgpu

#endif
