/*
 * bz2_oversub.h - a bzip2 stream no encoder writes but bzip2 1.0.8 decodes:
 * its Huffman tables have oversubscribed code lengths (Kraft sum > 1), yet
 * every symbol the block uses has a code that fits its length, so bzip2's
 * canonical decode (docs/BZIP2.md, "Decoder acceptance rules") reads it and
 * both CRCs check. Built bit by bit (tests/bz2_oversub.c), for the CPU
 * suite, the daemon paths and the GPU suite alike.
 */
#ifndef GC_TEST_BZ2_OVERSUB_H
#define GC_TEST_BZ2_OVERSUB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the crafted stream decodes to (NUL-terminated for convenience; the
 * terminator is not part of it). */
extern const char bz2_oversub_plain[];

/* Writes the stream into dst (cap >= BZ2_OVERSUB_CAP); returns its length,
 * or 0 if the plain text needed a code the table cannot reach (a bug in the
 * helper, never the case for bz2_oversub_plain). */
#define BZ2_OVERSUB_CAP 256
size_t bz2_oversub_stream(uint8_t *dst, size_t cap);

/* The same block with table 0's six code lengths (RUNA, RUNB, MTF 1..3,
 * EOB; each 1..20) as given: a symbol whose code does not fit its length
 * is written as its code's low bits, so the stream is usually hostile.
 * Returns the length, 0 if cap is too small. */
size_t bz2_oversub_stream_with(uint8_t *dst, size_t cap, const int *len0);

#ifdef __cplusplus
}
#endif

#endif
