/*
 * rle_internal.h - what the files of the rle CPU backend share (not a public
 * API: rle.h is): little-endian loads and stores of frame integers and
 * elements, the copy that checksums what it wrote, the width check, and the
 * one record decoder the frame driver calls per chunk.
 *
 *   rle_encode_chunk.c  one chunk into its record (rle_encode_chunk)
 *   rle_decode_chunk.c  one record back into its chunk (rle_decode_chunk)
 *   rle_frame.c         options, bounds, the frame header and its index
 *   rle.c               whole frames and streams of frames: the chunks in parallel
 */
#ifndef GC_RLE_INTERNAL_H
#define GC_RLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crc32c.h"
#include "rle.h"

/* Integers are copied to and from the frame with memcpy, and bit i of a
 * compare mask is byte i of the data: both need a little-endian host. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the rle CPU backend assumes a little-endian host"
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

ALWAYS_INLINE void store64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

ALWAYS_INLINE uint32_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

ALWAYS_INLINE void store32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

ALWAYS_INLINE uint16_t load16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One element (or run length) of w bytes as an integer; w is a constant
 * after inlining, so this is a single load. */
ALWAYS_INLINE uint64_t load_n(const uint8_t *p, unsigned w)
{
    switch (w) {
    case 1: return *p;
    case 2: return load16(p);
    case 4: return load32(p);
    default: return load64(p);
    }
}

ALWAYS_INLINE void store_n(uint8_t *p, uint64_t v, unsigned w)
{
    memcpy(p, &v, w);
}

/* The element repeated across a word: its period w divides 8, so storing it
 * at any element boundary writes whole copies of the element. */
ALWAYS_INLINE uint64_t broadcast(uint64_t elem, unsigned w)
{
    switch (w) {
    case 1: return elem * 0x0101010101010101ull;
    case 2: return elem * 0x0001000100010001ull;
    case 4: return elem * 0x0000000100000001ull;
    default: return elem;
    }
}

/* Copy n bytes and return the CRC32C of the copy, block by block so each
 * block is checksummed while it is still in L1. The CRC is of what was
 * written, not of a second read of src (which may change under us), and
 * memmove keeps src and dst in the same memory defined (garbage, no fault). */
static inline uint32_t copy_crc(uint8_t *dst, const uint8_t *src, size_t n)
{
    enum { BLOCK = 16384 };
    uint32_t crc = 0;
    for (size_t off = 0; off < n; off += BLOCK) {
        size_t len = n - off < BLOCK ? n - off : BLOCK;
        memmove(dst + off, src + off, len);
        crc = crc32c_update(crc, dst + off, len);
    }
    return crc;
}

static inline int valid_width(unsigned w)
{
    return w == 1 || w == 2 || w == 4 || w == 8;
}

static inline uint64_t div_ceil(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* Validate and decode one record (rle_decode_chunk.c); chunk_no only names the
 * chunk in errors (SIZE_MAX: a record decoded on its own). */
int rle_decode_record(const uint8_t *rec, size_t rec_len, unsigned w, uint8_t *out, size_t out_len,
                      size_t chunk_no, gc_error *err);

#endif
