/*
 * bz2_dec.cuh - the bzip2 decoder on the device, shared by its stage files
 * (not seen by C code). A whole request is decoded from a device copy of
 * its input (bz2_dec.cu drives it):
 *
 *   scan   (bz2_dec_scan.cu)  every bit offset holding the 48-bit block
 *                             magic: the block candidates, ascending;
 *   huff   (bz2_dec_huff.cu)  one CTA per candidate: header, selectors,
 *                             code lengths, the walk to EOB; then
 *          (bz2_dec_seg.cu)   per segment of symbol groups: Huffman
 *                             symbols, RLE2 and the inverse MTF into the
 *                             candidate's column (bz2_dec_huff.cuh);
 *   walk   (bz2_dec_walk.cu, host) the stream framing from bit 0: which
 *                             candidates are the stream's blocks (a block
 *                             ends where the next begins), stream CRCs;
 *   ibwt   (bz2_dec_lf.cu)    per accepted block: a stable counting
 *                             sort of the column gives T;
 *          (bz2_dec_ibwt.cu)  splitter walks invert it in place (and
 *                             de-randomise);
 *   rle1   (bz2_dec_rle1.cu)  output sizes, then the expansion at the
 *                             blocks' output offsets and the block CRCs.
 *
 * Any problem on the stream (or one the device cannot prove absent) fails
 * the job with a status and a message naming stream and block; nothing is
 * ever returned from a stream that did not pass every check.
 */
#ifndef GC_BZ2_DEC_CUH
#define GC_BZ2_DEC_CUH

#include <stddef.h>
#include <stdint.h>

#include "bz2_dec_policy.cuh"
#include "bz2_dec_types.h"
#include "bz2_gpu.cuh"

struct gc_gpu_ctx;

namespace gcgpu {

/* T's tiles per column (bz2_dec_lf.cu), and the bit of a tt entry that marks a splitter row. */
constexpr uint32_t kDecLfTiles = (BZ2_MAX_BLOCK + kDecLfTile - 1) / kDecLfTile;
constexpr uint32_t kDecTtMark = 0x80000000u;
constexpr uint32_t kDecSelBytes = (BZ2_MAX_SELECTORS + 1) / 2; /* a candidate's selectors, two per byte */
/* Segments a candidate's symbols can span (bz2_dec_huff.cuh). */
constexpr uint32_t kDecMaxSegs = (BZ2_MAX_SELECTORS + kDecSegGroups - 1) / kDecSegGroups;

/* RLE1 chunks a block's column can hold (bz2_dec_rle1.cu). */
constexpr uint32_t kDecRle1Chunks = (BZ2_MAX_BLOCK + kDecRle1Chunk - 1) / kDecRle1Chunk;

struct HuffTab;

/* What the Huffman stage's walk found on one candidate, for its segment
 * passes (bz2_dec_huff.cuh says how the stage is split). */
struct DecHuffWalk {
    uint32_t status;     /* DecError of the walk: header, tables, codes, groups */
    uint32_t n_sym;      /* symbols the passes decode: through EOB, or up to the walk's error */
    uint32_t overrun_at; /* first symbol that ends past the input's end (UINT32_MAX: none) */
    uint32_t n_seg;      /* segments holding those symbols */
    uint32_t total;      /* the column's bytes, summed by the scan */
    uint32_t eob;        /* the EOB symbol (used bytes + 1) */
};

/* One accepted block through the inverse BWT and RLE1. */
struct DecBlk {
    uint32_t col; /* its column (wave-relative candidate index) */
    uint32_t n, orig, rand;
    uint32_t sp_off;  /* its splitters in the wave's splitter arrays */
    uint32_t nsp;     /* regular splitters + 1 (origPtr's) */
    uint32_t status;  /* DecError of the inverse stages */
    uint32_t out_len; /* bytes after RLE1 (<= 45.9 MB) */
    uint32_t period;  /* rows on origPtr's cycle: n, or a divisor-like d < n for a
                       * periodic block (the output repeats its first d bytes) */
    uint32_t pad;
};

/* One job's input on the device (a group of jobs decodes together). */
struct DecInput {
    const uint8_t *in; /* 4-byte aligned */
    uint64_t len;
};

/* Device memory of one decode, carved from the context's work buffer. */
struct DecScratch {
    uint8_t *in; /* the input (device copy), 16 bytes of zeros after it */
    uint64_t in_cap;
    uint64_t *cand; /* candidate bit offsets, sorted per job */
    uint64_t *cand_tmp;
    uint32_t *cand_job; /* each candidate's job */
    DecInput *jobs;     /* kDecMaxJobs */
    uint32_t cand_cap;
    uint32_t *n_cand;
    DecCand *res;        /* columns */
    uint8_t *cols;       /* columns x BZ2_MAX_BLOCK */
    uint8_t *sel;        /* columns x kDecSelBytes */
    HuffTab *tabs;       /* columns: the tables the walk built */
    DecHuffWalk *hw;     /* columns */
    uint64_t *seg_bit;   /* columns x kDecMaxSegs: a segment's first bit, bit 63 set if a run goes on into it */
    uint32_t *seg_count; /* columns x kDecMaxSegs: bytes a segment writes */
    uint32_t *seg_off;   /* columns x kDecMaxSegs: where it writes them in the column */
    uint8_t *seg_list;   /* columns x kDecMaxSegs x 256: a segment's MTF list (first its permutation) */
    unsigned long long *err_key;          /* columns: first error of the passes, symbol << 8 | DecError */
    DecBlk *blk;                          /* columns */
    uint32_t columns;                     /* candidates a wave holds (<= kDecMaxColumns) */
    uint32_t sort_cols;                   /* columns a sort wave spans (<= kDecSortColumns) */
    uint32_t *tt;                         /* sort_cols x BZ2_MAX_BLOCK: T << 8 | F, splitter rows marked */
    uint32_t *lf_hist;                    /* sort_cols x kDecLfTiles x 256: T's tile counters, then first rows */
    uint32_t *sp_next, *sp_len, *sp_dist; /* splitters of a sort wave */
    uint32_t sp_cap;
    uint32_t *r1_map;   /* columns x kDecRle1Chunks: a chunk's RLE1 state map */
    uint32_t *r1_size;  /* columns x kDecRle1Chunks x 5: its output bytes from each state */
    uint32_t *r1_state; /* columns x kDecRle1Chunks: its state, once the block is scanned */
    uint32_t *r1_off;   /* columns x kDecRle1Chunks: its output offset in the block */
    uint32_t *rand_map; /* bit k: byte k of a randomised block is flipped */
    uint8_t *out;       /* kDecRoundBytes: a round of output (host sinks; null for device output) */
    Bz2Block *crc_blk;  /* columns: a round's blocks for the CRC kernels */
    uint32_t *crc_acc;
    void *cub_tmp;
    size_t cub_bytes;
};

/* Scratch for a stream of in_len bytes; with copy_in it holds the input
 * too, with out_round a round of output for the host. The carve queries
 * CUB's temporary sizes (host only). */
int bz2_dec_scratch_bytes(uint64_t in_len, bool copy_in, bool out_round, size_t *bytes, gc_error *err);
int bz2_dec_carve(void *base, size_t len, uint64_t in_len, bool copy_in, bool out_round, DecScratch *s,
                  gc_error *err);

/* CUB temporary bytes of the scan's sort (cand_cap keys). */
int bz2_dec_scan_tmp(uint32_t cand_cap, size_t *bytes, gc_error *err);

/* scan: candidates of d_in[0..len) into out (ascending, device), their
 * count in *n (waits). More than cap: GC_E_LIMIT. */
int bz2_dec_scan(const uint8_t *d_in, uint64_t len, DecScratch &s, uint64_t *out, uint32_t cap, cudaStream_t st,
                 uint32_t *n, gc_error *err);
/* huff: candidates cand[0..n) (n <= s.columns; bit offsets in the input of
 * job cand_job[i] of jobs[]) into s.res / s.cols: the walk
 * (bz2_dec_huff.cu), then bz2_dec_segments (bz2_dec_seg.cu). */
int bz2_dec_huff(const DecInput *jobs, const uint64_t *cand, const uint32_t *cand_job, uint32_t n, DecScratch &s,
                 cudaStream_t st, gc_error *err);
int bz2_dec_segments(const DecInput *jobs, const uint32_t *cand_job, uint32_t n, DecScratch &s, cudaStream_t st,
                     gc_error *err);
/* lf: T of blocks blk[0..nb) (nb <= s.sort_cols) whose columns lie in
 * [col0, col0 + s.sort_cols), into s.tt (rows of column col at
 * (col - col0) x BZ2_MAX_BLOCK). */
int bz2_dec_lf(const DecBlk *d_blk, uint32_t nb, uint32_t col0, DecScratch &s, cudaStream_t st, gc_error *err);
/* ibwt: blocks blk[0..nb) whose columns lie in [col0, col0 + s.sort_cols),
 * splitters laid out by the caller (sp_off / nsp, total nsp_total); in
 * place in s.cols; DecBlk::status set on failure. */
int bz2_dec_ibwt(DecBlk *d_blk, uint32_t nb, uint32_t col0, uint32_t nsp_total, DecScratch &s, cudaStream_t st,
                 gc_error *err);
/* rle1 sizes of blk[0..nb): DecBlk::out_len / status. */
int bz2_dec_rle1_size(DecBlk *d_blk, uint32_t nb, DecScratch &s, cudaStream_t st, gc_error *err);
/* Expand blk[0..nb) to out + crc_blk[i].in_start and compute the CRCs into
 * crc_blk[i].crc (crc_blk on the device, in_start / in_len filled). */
int bz2_dec_rle1_expand(const DecBlk *d_blk, uint32_t nb, uint8_t *out, uint64_t out_len, DecScratch &s,
                        const Crc32Tables *d_tab32, cudaStream_t st, gc_error *err);

/* A batch's bzip2 decode jobs, whole (bz2_dec.cu; gpu_pipeline.cu hands
 * them over before cutting the other jobs into pieces), in groups that
 * share launches: a job's problems are its status; GC_E_DEVICE in err
 * fails the batch. Copy and kernel times (host clock) are added to st. */
int bz2_decode_jobs(gc_gpu_ctx *ctx, gc_gpu_job **jobs, size_t n, gc_gpu_batch_stats *st, gc_error *err);

} // namespace gcgpu

#endif
