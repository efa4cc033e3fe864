/*
 * rle_format.h - the `rle` frame layout (docs/FORMAT.md) in one place, for C
 * (codecs/rle/cpu) and CUDA (codecs/rle/cuda, host and device code alike):
 * the sizes and offsets of the fixed header, the chunk index, the header CRC
 * and a chunk record's header, and the one function that writes the fixed
 * header. Header-only; rle.h includes it.
 */
#ifndef GC_RLE_FORMAT_H
#define GC_RLE_FORMAT_H

#include <stdint.h>

#include "gc_hd.h"

#define RLE_MAGIC "GCRL"
#define RLE_VERSION 1

/* ---- the fixed header: 32 bytes at the start of a frame ------------------- */
#define RLE_MAGIC_OFFSET 0u          /* 4 bytes, RLE_MAGIC */
#define RLE_VERSION_OFFSET 4u        /* 1 byte */
#define RLE_WIDTH_OFFSET 5u          /* 1 byte: element width 1, 2, 4 or 8 */
#define RLE_TAIL_LEN_OFFSET 6u       /* 1 byte: original_size % width */
#define RLE_RESERVED_OFFSET 7u       /* 1 byte, 0 */
#define RLE_CHUNK_SIZE_OFFSET 8u     /* 32-bit */
#define RLE_ORIGINAL_SIZE_OFFSET 12u /* 64-bit */
#define RLE_CHUNK_COUNT_OFFSET 20u   /* 32-bit */
#define RLE_TAIL_OFFSET 24u          /* RLE_TAIL_BYTES bytes, zero-padded */
#define RLE_TAIL_BYTES 8u
#define RLE_HEADER_FIXED 32u /* bytes before the chunk index */

/* ---- the chunk index and the header CRC ------------------------------------ */
#define RLE_INDEX_OFFSET RLE_HEADER_FIXED /* chunk_count 32-bit record sizes */
#define RLE_INDEX_ENTRY 4u
#define RLE_HEADER_CRC 4u /* CRC32C of everything before it, after the index */

/* ---- a chunk record's header: 12 bytes before its payload ------------------ */
#define RLE_REC_MODE_OFFSET 0u      /* 1 byte: RLE_MODE_* */
#define RLE_REC_LEN_WIDTH_OFFSET 1u /* 1 byte: 1, 2 or 4 (rle), 0 (stored) */
#define RLE_REC_RESERVED_OFFSET 2u  /* 2 bytes, 0 */
#define RLE_REC_RUN_COUNT_OFFSET 4u /* 32-bit */
#define RLE_REC_CRC_OFFSET 8u       /* 32-bit CRC32C of the chunk's original bytes */
#define RLE_CHUNK_HEADER 12u        /* bytes before a chunk record's payload */
#define RLE_MODE_STORED 0
#define RLE_MODE_RLE 1

/* Offset of the header CRC: the bytes it covers. */
static inline GC_HD uint64_t rle_header_crc_offset(uint64_t chunk_count)
{
    return RLE_INDEX_OFFSET + RLE_INDEX_ENTRY * chunk_count;
}

/* Bytes before the first chunk record: header, index and header CRC. */
static inline GC_HD uint64_t rle_header_size_for(uint64_t chunk_count)
{
    return rle_header_crc_offset(chunk_count) + RLE_HEADER_CRC;
}

/* n little-endian bytes of v at p (any alignment, any host). */
static inline GC_HD void rle_put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline GC_HD uint32_t rle_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/*
 * Write the fixed header (RLE_HEADER_FIXED bytes at f) of a frame of
 * original_size bytes: tail points at its last original_size % width bytes
 * (read only when there are any). The tail is read before anything is
 * written, so it may lie inside f[0..RLE_HEADER_FIXED). The index and the
 * header CRC are the caller's.
 */
static inline GC_HD void rle_header_write_fixed(uint8_t *f, unsigned width, uint32_t chunk_size,
                                                uint64_t original_size, uint32_t chunk_count, const uint8_t *tail)
{
    const unsigned tail_len = (unsigned)(original_size % width);
    uint8_t t[RLE_TAIL_BYTES] = { 0 };
    for (unsigned i = 0; i < tail_len; i++)
        t[i] = tail[i];
    for (unsigned i = 0; i < 4; i++)
        f[RLE_MAGIC_OFFSET + i] = (uint8_t)RLE_MAGIC[i];
    f[RLE_VERSION_OFFSET] = RLE_VERSION;
    f[RLE_WIDTH_OFFSET] = (uint8_t)width;
    f[RLE_TAIL_LEN_OFFSET] = (uint8_t)tail_len;
    f[RLE_RESERVED_OFFSET] = 0;
    rle_put_le(f + RLE_CHUNK_SIZE_OFFSET, chunk_size, 4);
    rle_put_le(f + RLE_ORIGINAL_SIZE_OFFSET, original_size, 8);
    rle_put_le(f + RLE_CHUNK_COUNT_OFFSET, chunk_count, 4);
    for (unsigned i = 0; i < RLE_TAIL_BYTES; i++)
        f[RLE_TAIL_OFFSET + i] = t[i];
}

#endif
