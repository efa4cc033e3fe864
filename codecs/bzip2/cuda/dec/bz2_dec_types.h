/*
 * bz2_dec_types.h - what the bzip2 decoder's device stages hand the host's
 * framing walk (bz2_dec_walk.cu): plain C++, no CUDA, so the walk also
 * builds for its fuzzer (tests/fuzz/fuzz_bz2_dec_walk.cc).
 */
#ifndef GC_BZ2_DEC_TYPES_H
#define GC_BZ2_DEC_TYPES_H

#include <stdint.h>

#include "bz2_format.h" /* the columns' stride is BZ2_MAX_BLOCK */
#include "gc_status.h"

namespace gcgpu {

/* What a kernel found wrong with a candidate or block (0 = nothing);
 * bz2_dec_error() words it. */
enum DecError : uint32_t {
    kDecOk = 0,
    kDecTruncated, /* the input ends inside the block */
    kDecEmptyMap,  /* symbol map is empty */
    kDecGroups,    /* number of Huffman tables not 2..6 */
    kDecNoSelectors,
    kDecSelector,   /* selector out of range */
    kDecCodeLen,    /* code length out of 1..20 */
    kDecMoreGroups, /* more symbol groups than selectors */
    kDecBadCode,    /* bits that match no code */
    kDecRunLong,    /* zero run exceeds the block size */
    kDecBlockLong,  /* block exceeds 900000 bytes */
    kDecOrigPtr,    /* origPtr out of range */
    kDecCycle,      /* the splitter chain from origPtr broke (cannot happen for a sorted T) */
    kDecRunEnd,     /* block ends inside a run (count byte missing) */
    kDecCrc,        /* block CRC mismatch */
    kDecErrorCount
};

/* One candidate after the Huffman stage (filled by bz2_dec_huff). */
struct DecCand {
    uint32_t status; /* DecError */
    uint32_t n;      /* BWT bytes in the column */
    uint32_t orig;   /* origPtr as stored */
    uint32_t crc;    /* stored block CRC */
    uint32_t rand;   /* randomised bit */
    uint32_t pad;
    uint64_t end_bit; /* just after the EOB symbol */
    uint8_t tail[16]; /* the 128 bits from end_bit on (framing that follows the block) */
};

/* A DecError in words, and the gc_status it fails a job with (bz2_dec_walk.cu). */
const char *bz2_dec_error(uint32_t e);
int bz2_dec_status(uint32_t e);

} // namespace gcgpu

#endif
