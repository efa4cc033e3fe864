/*
 * bz2_stages.h - the CPU engine's per-block stages of the bzip2 codec and
 * what crosses between them: each block is cut at its BWT column, in both
 * directions, so each half can be tested (and replaced) on its own
 * (tests/check_bzip2.c compares stage by stage). The CUDA backend does not
 * use these entry points: it runs the same stages of the format on the
 * device, every block of a piece at once (cuda/bz2_gpu.cuh, cuda/dec/
 * bz2_dec.cuh), and tests/gpu/test_gpu_bzip2_stages.cu compares its stages
 * with the CPU functions of bz2_internal.h. docs/BZIP2.md, "Stage
 * boundaries", lists the same contract.
 *
 *   encode:  slice -> RLE1 -> BWT ==[bz2_column]==> bz2_emit_block -> bits
 *   decode:  bits -> bz2_decode_column ==[bz2_column]==> bz2_invert_column
 *            -> bytes
 * bz2_encode_block and bz2_decode_block are the two compositions.
 */
#ifndef GC_BZ2_STAGES_H
#define GC_BZ2_STAGES_H

#include <stdarg.h>

#include "bz2_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One block between its BWT and its entropy coding, in both directions. */
typedef struct bz2_column {
    uint8_t *bwt;         /* last column of the sorted rotations, bwt[0..n) */
    size_t cap;           /* bytes at bwt (decoder: see BZ2_COLUMN_CAP) */
    uint32_t n;           /* block length in RLE1 bytes, <= BZ2_MAX_BLOCK */
    uint32_t orig;        /* origPtr: row of the rotation that starts at 0 */
    uint32_t crc;         /* block CRC over the block's original bytes */
    int randomised;       /* the block's randomised bit (0 or 1) */
    uint32_t counts[256]; /* decoder: occurrences of each byte in bwt[0..n) */
    uint64_t end_bit;     /* decoder: bit offset just after the block's EOB */
} bz2_column;

/* Column buffer size for decoding: the largest block plus the inverse
 * BWT's scratch (a smaller cap >= n works, with the slower single chase). */
#define BZ2_COLUMN_CAP (BZ2_MAX_BLOCK + BZ2_IBWT_SLACK)

/* ---- encoder ---- */
/* Compress one block (src = its slice of the original input) to w.
 * *crc receives the block CRC. The slice is read once, into private memory;
 * if its RLE1 output is over limit (the input changed since bz2_rle1_plan
 * sized the block) nothing is written and the result is GC_E_INVALID.
 * Returns GC_OK, GC_E_INVALID or GC_E_NOMEM. */
int bz2_encode_block(const uint8_t *src, size_t n, size_t limit, unsigned flags, bz2_bitwriter *w, uint32_t *crc);
/* The block emitter (bz2_block_emit.c): from the column's bwt, n, orig, crc
 * and randomised, append the whole block (magic .. last symbol, section 7
 * of docs/BZIP2.md) to w: symbol map, MTF/RLE2, table choice, selectors,
 * code lengths, symbols. Nothing depends on the level but n's limit, which
 * the caller enforces. Returns GC_OK, GC_E_INVALID (n not in
 * 1..BZ2_MAX_BLOCK or orig >= n; nothing written) or GC_E_NOMEM. */
int bz2_emit_block(const bz2_column *c, bz2_bitwriter *w);

/* ---- decoder ---- */
typedef struct bz2_dblock {
    int status;          /* GC_OK or an error code */
    char msg[112];       /* the problem, without stream/block prefix */
    uint64_t end_bit;    /* bit offset just after the block's EOB */
    uint32_t stored_crc; /* from the block header */
    uint32_t nblock;     /* BWT length (RLE1 bytes) */
    uint8_t *out;        /* malloc'd decoded bytes */
    size_t out_len;
    /* GC_E_CRC, or a block ending inside a run: the bytes libbz2 writes out
     * before it finds the fault (it delivers a block's bytes before it
     * checks them, so its verdict on such a block depends on whether they
     * fit the caller's room). 0 otherwise. */
    size_t bad_len;
} bz2_dblock;
/* Decode the block whose 48-bit magic starts at bit magic_bit of src.
 * Output beyond max_out bytes (0 = none) is GC_E_LIMIT. The block CRC is
 * verified. Never reads outside src[0..len). Composes the two stages. */
void bz2_decode_block(const uint8_t *src, size_t len, uint64_t magic_bit, size_t max_out, bz2_dblock *r);
/* Stage 1 (bz2_block_decode.c): header, selectors, code lengths, Huffman
 * symbols, RLE2 and inverse MTF into c->bwt (c->cap >= BZ2_MAX_BLOCK);
 * fills every other field of c. origPtr (and n = 0) are left to stage 2.
 * r is reset; an error sets its status and msg. Returns the status. */
int bz2_decode_column(const uint8_t *src, size_t len, uint64_t magic_bit, bz2_column *c, bz2_dblock *r);
/* Stage 2 (bz2_block_invert.c): resets r, records c's n, crc and end_bit, then
 * checks origPtr, inverts the BWT in place in c->bwt, de-randomises, undoes
 * RLE1 into r->out (bounded by max_out, 0 = none) and checks the CRC.
 * c->counts must be the histogram of bwt[0..n) (only its sum is checked).
 * Returns r->status. */
int bz2_invert_column(bz2_column *c, size_t max_out, bz2_dblock *r);
/* Flags of the _flags variants. BZ2_KEEP_BAD_CRC: a block whose CRC is
 * wrong keeps its decoded bytes in r->out (r->out_len, = r->bad_len) with
 * status GC_E_CRC. libbz2's stream calls hand those bytes out before their
 * BZ_DATA_ERROR, so the libbz2 shim (bz2compat/) asks for them; the daemon,
 * the CLI and the client library never do: they must never pass on a
 * failed block's bytes. Without the flag such a block has no output. */
enum { BZ2_KEEP_BAD_CRC = 1u };
void bz2_decode_block_flags(const uint8_t *src, size_t len, uint64_t magic_bit, size_t max_out, unsigned flags,
                            bz2_dblock *r);
int bz2_invert_column_flags(bz2_column *c, size_t max_out, unsigned flags, bz2_dblock *r);
/* Set r->status and r->msg (the formatted problem); return code. */
__attribute__((format(printf, 3, 0))) int bz2_dblock_vfail(bz2_dblock *r, int code, const char *fmt, va_list ap);
__attribute__((format(printf, 3, 4))) int bz2_dblock_fail(bz2_dblock *r, int code, const char *fmt, ...);

#ifdef __cplusplus
}
#endif

#endif
