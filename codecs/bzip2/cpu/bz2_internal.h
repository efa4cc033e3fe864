/*
 * bz2_internal.h - pieces of the bzip2 CPU codec shared between its files
 * (and the unit tests). Not a public API: bzip2.h is.
 *
 * Pipeline, compression:   input -> RLE1 (bz2_rle1.c) -> BWT (bz2_bwt.c)
 *   -> MTF/RLE2 (bz2_mtf.c) -> Huffman tables (bz2_huffman.c)
 *   -> block bits (bz2_block_emit.c) -> stream framing (bz2_stream.c);
 *   bz2_block_encode.c runs one block through it.
 * Decompression: bz2_stream.c finds blocks, bz2_block_decode.c decodes one
 * to its BWT column, bz2_block_invert.c turns that into bytes.
 * The per-block stages and what crosses between them: bz2_stages.h.
 * docs/BZIP2.md describes every choice that decides the output bytes.
 */
#ifndef GC_BZ2_INTERNAL_H
#define GC_BZ2_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bz2_bitio.h"
#include "bzip2.h"
#include "gc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format's constants, limits and table rules: bz2_format.h (via bzip2.h). */

/* ---- bz2_crc.c: the bzip2 CRC-32 (poly 0x04c11db7, MSB first) ---- */
/* crc starts at 0xffffffff; the final value is ~crc. */
uint32_t bz2_crc_update(uint32_t crc, const uint8_t *p, size_t n);
static inline uint32_t bz2_crc(const uint8_t *p, size_t n)
{
    return ~bz2_crc_update(0xffffffffu, p, n);
}

/* ---- bz2_rle1.c: the initial run-length stage and block splitting ---- */
/* Split src into blocks as bzip2 does (docs/BZIP2.md, section 3): each ends
 * after the unit that brings its RLE1 output to limit or beyond (so it holds
 * up to limit + BZ2_BLOCK_OVERSHOOT bytes). One walk, which adds up tiles
 * that up to threads threads counted first (0: every CPU). Returns the number of blocks and a malloc'd array of n+1 input
 * offsets in *starts (block i is src[starts[i] .. starts[i+1])); 0 blocks for
 * empty input. Returns (size_t)-1 when out of memory. src may change while
 * this runs (a client's memory): the plan is then garbage but stays inside
 * its array, and bz2_encode_block checks each block's size again. */
size_t bz2_rle1_plan(const uint8_t *src, size_t n, size_t limit, unsigned threads, size_t **starts);
/* RLE1-encode src[0..n) (one block's input) into dst; returns bytes written.
 * dst must hold n + n / 4 + 1 bytes. */
size_t bz2_rle1_encode(const uint8_t *src, size_t n, uint8_t *dst);

/* ---- bz2_bwt.c: sorting cyclic rotations ---- */
/* Writes the last column of the sorted rotations of blk[0..n) to out and
 * returns the rank of rotation 0 (origPtr); -1 when out of memory. */
int32_t bz2_bwt(const uint8_t *blk, int32_t n, uint8_t *out);
/* Work counter for tests/benchmarks: how many blocks had tied LMS
 * substrings and so needed the rotation sort's stage 2 (process-wide,
 * relaxed). */
unsigned long bz2_bwt_fallback_count(void);

/* ---- bz2_mtf.c: move-to-front + zero-run (RUNA/RUNB) coding ---- */
/* bwt[0..n) -> symbols (n + 1 entries suffice). seq[] maps each used byte
 * to its index in the symbol map (in_use ordered); n_in_use is their
 * count. freq[] (BZ2_MAX_ALPHA) receives symbol counts. Returns the number
 * of symbols written including EOB (= n_in_use + 1). */
size_t bz2_mtf_encode(const uint8_t *bwt, size_t n, const uint8_t seq[256], int n_in_use, uint16_t *sym,
                      uint32_t *freq);

/* ---- bz2_huffman.c: code lengths, canonical codes, table choice ---- */
/* Huffman code lengths for freq[0..alpha), every symbol gets a code,
 * no length exceeds max_len. See docs/BZIP2.md for the exact rules. */
void bz2_code_lengths(const uint32_t *freq, int alpha, int max_len, uint8_t *len);
/* Canonical codes: by length, then by symbol. */
void bz2_canonical_codes(const uint8_t *len, int alpha, uint32_t *code);
/* Number of tables for a count of MTF symbols (2..6). */
int bz2_table_count(size_t n_sym);
/* Choose n_groups tables and one selector per 50 symbols. */
void bz2_choose_tables(const uint16_t *sym, size_t n_sym, const uint32_t *freq, int alpha, int n_groups,
                       uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA], uint8_t *selectors);

/* ---- bz2_ibwt.c: inverse BWT ---- */
/* Spare bytes past the block that bz2_inverse_bwt may use as scratch. */
#define BZ2_IBWT_SLACK (160u * 4096u)
/* ll[0..n) (the last column, byte counts in counts[]) becomes the block's
 * bytes, starting from row orig (< n). ll_cap: ll's size; with at least
 * n + BZ2_IBWT_SLACK the faster parallel chase is used. Returns 0, or -1
 * when out of memory. */
int bz2_inverse_bwt(uint8_t *ll, size_t ll_cap, uint32_t n, uint32_t orig, const uint32_t counts[256]);

/* ---- bz2_stream.c: extra entry point for tests ---- */
#define BZ2_ENC_RANDOMISE 1u /* test hook: write a randomised block */
/* bz2_compress with encoder flags (BZ2_ENC_*): lets tests build streams no
 * normal compression writes (randomised blocks). */
int bz2_compress_ex(const uint8_t *src, size_t src_len, const bz2_options *opt, unsigned flags, uint8_t **dst,
                    size_t *dst_len, gc_error *err);

#ifdef __cplusplus
}
#endif

#endif
