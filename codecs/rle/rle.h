/*
 * rle.h - the `rle` codec (PARLE run-length frames), CPU backend.
 *
 * Frame format: docs/FORMAT.md. The CUDA backend produces byte-identical
 * frames; this file is the reference it is tested against.
 * All functions are thread-safe (no shared state).
 */
#ifndef GC_RLE_H
#define GC_RLE_H

#include <stddef.h>
#include <stdint.h>

#include "gc_status.h"
#include "rle_format.h" /* the frame layout: RLE_MAGIC, RLE_HEADER_FIXED, RLE_CHUNK_HEADER, ... */

#ifdef __cplusplus
extern "C" {
#endif

#define RLE_DEFAULT_CHUNK_SIZE (1u << 20)
#define RLE_MIN_CHUNK_SIZE 64u
#define RLE_MAX_CHUNK_SIZE (1u << 26)

typedef struct rle_options {
    unsigned width;      /* element width: 1, 2, 4 or 8 (0 = 1) */
    uint32_t chunk_size; /* bytes per chunk (0 = RLE_DEFAULT_CHUNK_SIZE) */
    unsigned threads;    /* chunks encoded/decoded in parallel (0 = all CPUs, 1 = caller only) */
} rle_options;

/*
 * Parsed and validated frame header (see rle_frame_parse): every field is a
 * copy, so it stays valid when the frame's bytes change. The chunk index
 * (chunk_count little-endian u32 record sizes at frame offset 32) is not
 * kept: take a private copy with rle_frame_index_copy.
 */
typedef struct rle_frame_info {
    unsigned width;
    unsigned tail_len;
    uint32_t chunk_size;
    uint64_t original_size;
    uint32_t chunk_count;
    size_t header_size; /* bytes up to and including header_crc */
    uint8_t tail[8];    /* the frame's tail field (tail_len bytes used) */
} rle_frame_info;

/* Validate options and fill defaults; GC_E_INVALID with a message if bad. */
int rle_options_resolve(const rle_options *in, rle_options *out, gc_error *err);

/*
 * Largest frame rle_compress can produce for src_len bytes (never overflows
 * for valid options: SIZE_MAX if the true bound would). 0 for invalid options.
 */
size_t rle_compress_bound(size_t src_len, const rle_options *opt);

/*
 * Compress src into dst (capacity dst_cap, at least rle_compress_bound()).
 * Returns GC_OK and the frame length in *dst_len, or an error code.
 */
int rle_compress(const uint8_t *src, size_t src_len, const rle_options *opt, uint8_t *dst, size_t dst_cap,
                 size_t *dst_len, gc_error *err);

/*
 * Parse and validate a frame's header, index and header CRC against the
 * bytes present (src_len). Does not decode chunks.
 *
 * The frame may be memory another process keeps writing (a client's memfd):
 * the checks hold for the bytes as they were read. Never size or place
 * anything by a second read of the index; use rle_frame_index_copy.
 */
int rle_frame_parse(const uint8_t *src, size_t src_len, rle_frame_info *info, gc_error *err);

/*
 * Copy the chunk index of the frame that rle_frame_parse(src, src_len, info)
 * accepted into index[0..info->chunk_count) (the caller's memory), reading it
 * once, and validate the copy: header CRC, every entry at least a record
 * header, the entries adding up to the src_len - header_size bytes present.
 * Record sizes and offsets must come from this copy only. GC_E_CRC, _CORRUPT
 * or _TRUNCATED when the frame changed since rle_frame_parse.
 */
int rle_frame_index_copy(const uint8_t *src, size_t src_len, const rle_frame_info *info, uint32_t *index,
                         gc_error *err);

/*
 * rle_frame_parse for a frame that may be followed by more bytes (the next
 * frame of a stream): the same checks and messages, except that the chunk
 * records may end before src_len; *frame_len is where they end (header_size
 * plus the sum of the index entries). Reads src[0..*frame_len) at most.
 */
int rle_frame_parse_prefix(const uint8_t *src, size_t src_len, rle_frame_info *info, size_t *frame_len,
                           gc_error *err);

/*
 * The output size of an rle stream: one or more frames back to back
 * (docs/FORMAT.md, "Concatenated frames"). Walks the frames' headers and
 * indexes, each validated as rle_frame_parse does (chunks are not decoded),
 * and returns the sum of their original sizes in *size and the number of
 * frames in *frames (may be NULL). Errors after the first frame name it
 * ("rle: frame 2: ..."); bytes after a frame that do not start with the
 * magic are GC_E_CORRUPT (trailing bytes), a frame cut short GC_E_TRUNCATED;
 * GC_E_LIMIT if the sum overflows 64 bits. An empty src is GC_E_TRUNCATED.
 */
int rle_stream_decoded_size(const uint8_t *src, size_t src_len, uint64_t *size, size_t *frames, gc_error *err);

/*
 * Decompress one or more frames back to back (docs/FORMAT.md, "Concatenated
 * frames") into dst (capacity dst_cap, which must hold the sum of their
 * original sizes: rle_stream_decoded_size, or rle_frame_parse's
 * original_size for a single frame), their outputs concatenated in order.
 * Validates everything (docs/FORMAT.md, "Decoder checks"), every frame's
 * header before any output is written; GC_E_LIMIT if dst_cap is too small.
 * A single frame's errors are as they always were; a later frame's name it
 * ("rle: frame 2: ..."). src may change while this runs, and src and dst may
 * overlap (even be the same memory): the result is then an error or garbage,
 * never an access outside src[0..src_len) and dst[0..dst_cap) (see rle.c).
 */
int rle_decompress(const uint8_t *src, size_t src_len, unsigned threads, uint8_t *dst, size_t dst_cap,
                   size_t *dst_len, gc_error *err);

/* --- a stream's parts: the rules every streamed side shares (the daemon's
 * streams, the client library's local streams), so both give the same bytes */

/* Input per compress part, one frame each: the most whole chunks of opt (resolved) that fit in
 * 32 MiB, at least one chunk. An empty part after others writes no frame (rle_stream_part_frames). */
size_t rle_stream_part_bytes(const rle_options *opt);

/* Whether a stream's compress part of len bytes, its seq-th (0 first), writes a frame: an empty one
 * only says the input ended on a part boundary (which may be known before or after the last part is
 * cut), so only a stream of no input at all gets an (empty) frame. */
static inline int rle_stream_part_frames(uint64_t len, uint64_t seq)
{
    return len > 0 || seq == 0;
}

/*
 * The extent of the frame at p (avail bytes of the input from it), from its
 * fixed header and index, validating nothing (the decoder does): *index_end,
 * its header up to the header CRC's end (0 while the fixed header is not all
 * in avail); *len, that plus the records the index adds up (0 while the
 * index is not all in avail); *original, its declared original size (0 with
 * *index_end). Reads the header and index once.
 */
void rle_frame_extent(const uint8_t *p, size_t avail, uint64_t *index_end, uint64_t *len, uint64_t *original);

/* --- chunk level, for the batcher and the GPU backend's CPU fallback ----- */

/* Bytes of the largest record one chunk of chunk_len bytes can produce. */
size_t rle_chunk_bound(size_t chunk_len);

/*
 * Encode one chunk (chunk_len a multiple of width) into a record; returns its
 * size. record holds at least rle_chunk_bound(chunk_len) bytes.
 */
size_t rle_encode_chunk(const uint8_t *chunk, size_t chunk_len, unsigned width, uint8_t *record);

/* Decode and verify one record of record_len bytes into exactly chunk_len bytes. */
int rle_decode_chunk(const uint8_t *record, size_t record_len, unsigned width, uint8_t *chunk, size_t chunk_len,
                     gc_error *err);

#ifdef __cplusplus
}
#endif

#endif
