/*
 * bzc_internal.h - libgpucomp-bz2's private helpers: the pieces of libbz2's
 * behaviour that several of its calls share. bzlib.h (libbz2-dev) declares
 * the exported functions, so the compiler checks that every one has
 * libbz2's exact signature.
 */
#ifndef GC_BZC_INTERNAL_H
#define GC_BZC_INTERNAL_H

#include <bzlib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A stream call's state, zeroed: from the caller's bzalloc when it set one
 * (libbz2's callers size their allocators for the state alone), else malloc. */
static inline void *bzc_state_alloc(bz_stream *strm, size_t size)
{
    void *s = strm->bzalloc ? strm->bzalloc(strm->opaque, (int)size, 1) : malloc(size);
    if (s)
        memset(s, 0, size);
    return s;
}

/* Free a state and the two buffers it owns; the stream has no state after. */
static inline void bzc_state_free(bz_stream *strm, void *state, void *in, void *out)
{
    free(in);
    free(out);
    if (strm->bzfree)
        strm->bzfree(strm->opaque, state);
    else
        free(state);
    strm->state = NULL;
}

/* Inputs from this many bytes go to gpucompd; smaller ones run in this
 * process, where a connection and a round trip would cost more than the
 * work. $GPUCOMP_BZ2_THRESHOLD (a size, gc_parse_size's syntax) overrides it. */
#define BZC_DAEMON_THRESHOLD ((size_t)256 << 10)

/*
 * Decode the FIRST bzip2 stream of src[0..len) into dst[0..cap), as libbz2's
 * decompressor does when it is given all of src and cap bytes of room at
 * once: BZ_OK with *out_len set when the stream ended inside dst (bytes after
 * it are ignored), else libbz2's verdict: BZ_OUTBUFF_FULL, BZ_UNEXPECTED_EOF,
 * BZ_DATA_ERROR_MAGIC, BZ_DATA_ERROR or BZ_MEM_ERROR (dst then holds
 * unspecified bytes, as libbz2's would).
 */
int bzc_decode_first(const uint8_t *src, size_t len, uint8_t *dst, size_t cap, size_t *out_len);

/* Walk results besides libbz2's codes (which are all 4 or less): the input
 * ended before a verdict; a block or end-of-stream magic was read. */
enum { BZC_NEED_INPUT = 100, BZC_BLOCK, BZC_EOS };

/* The stream header "BZh1".."BZh9" at src[0], judged byte by byte as libbz2
 * reads it: BZ_OK and *level, BZ_DATA_ERROR_MAGIC or BZC_NEED_INPUT. */
int bzc_read_header(const uint8_t *src, size_t len, int *level);

/* Which magic begins at bit pos (bit 0 = MSB of src[0]): BZC_BLOCK, BZC_EOS,
 * BZ_DATA_ERROR on a wrong byte, BZC_NEED_INPUT when src ends first. */
int bzc_which_magic(const uint8_t *src, size_t len, uint64_t pos);

/* The 32 bits at bit pos of src; pos + 32 <= len * 8. */
uint32_t bzc_read32(const uint8_t *src, uint64_t pos);

/* Compress src into one bzip2 stream in dst[0..cap): through gpucompd from
 * bzc_daemon_threshold() bytes (in process when it does not answer), in
 * process below. A gpucomp status. */
int bzc_compress_into(const char *src, size_t len, int level, char *dst, size_t cap, size_t *out_len);

/* The input size from which a call goes to gpucompd (read once per process). */
size_t bzc_daemon_threshold(void);

#endif
