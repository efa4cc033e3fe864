/*
 * rle_decode_chunk.c - the rle CPU backend's chunk decoder: one record back into
 * its chunk, every field and the chunk's CRC32C checked (docs/FORMAT.md). The
 * decoder writes each short run as one unconditional 16-byte store.
 *
 * Input that changes while we run (rle.c says why it may): each run length
 * is read once and the run bounded by the space left in its chunk
 * (expand_runs), so such a record gives an error or garbage output, never
 * an access outside the buffers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rle_internal.h"

#define NO_CHUNK SIZE_MAX /* chunk number when a record is decoded on its own */

/* A chunk-level error: "rle: chunk N: <check>". */
__attribute__((format(printf, 4, 5))) static int chunk_fail(gc_error *err, gc_status code, size_t chunk_no,
                                                            const char *fmt, ...)
{
    char what[GC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (chunk_no == NO_CHUNK)
        return gc_fail(err, code, "rle: chunk record: %s", what);
    return gc_fail(err, code, "rle: chunk %zu: %s", chunk_no, what);
}

ALWAYS_INLINE uint64_t sum_lengths(const uint8_t *lens, size_t runs, unsigned lw)
{
    uint64_t sum = runs; /* lengths are stored minus one */
    for (size_t r = 0; r < runs; r++)
        sum += load_n(lens + r * lw, lw);
    return sum;
}

static uint64_t sum_lengths_any(const uint8_t *lens, size_t runs, unsigned lw)
{
    switch (lw) {
    case 1: return sum_lengths(lens, runs, 1);
    case 2: return sum_lengths(lens, runs, 2);
    default: return sum_lengths(lens, runs, 4);
    }
}

/* Fill nb bytes (a multiple of w) with the broadcast element. */
ALWAYS_INLINE void fill_run(uint8_t *out, size_t nb, uint64_t pattern, unsigned w)
{
    if (w == 1) {
        memset(out, (int)(pattern & 0xFF), nb);
        return;
    }
    for (; nb >= 8; out += 8, nb -= 8)
        store64(out, pattern);
    memcpy(out, &pattern, nb);
}

/*
 * Expand the runs into out[0..out_len); returns the bytes of out left
 * unwritten, or SIZE_MAX if a run did not fit (nothing is written past
 * out_len). Each length is read once, into a local, and the run is bounded by
 * the space left before it is written: the lengths are the client's memory and
 * may change at any time, so no earlier check of them is relied on. Short runs
 * (the common case) are written as one unconditional 16 bytes when the chunk
 * has room for that, which is cheaper than an exact-length copy; the excess is
 * overwritten by the following runs.
 */
ALWAYS_INLINE size_t expand_runs(const uint8_t *syms, const uint8_t *lens, size_t runs, unsigned w, unsigned lw,
                                 uint8_t *out, size_t out_len)
{
    size_t left = out_len;
    for (size_t r = 0; r < runs; r++) {
        uint64_t pattern = broadcast(load_n(syms + r * w, w), w);
        size_t nb = ((size_t)load_n(lens + r * lw, lw) + 1) * w;
        if (nb > left)
            return SIZE_MAX;
        if (nb <= 16 && left >= 16) {
            uint64_t twice[2] = { pattern, pattern };
            memcpy(out, twice, sizeof twice); /* one 16-byte store */
        } else {
            fill_run(out, nb, pattern, w);
        }
        out += nb;
        left -= nb;
    }
    return left;
}

#define EXPAND_LW(W)                                                   \
    switch (lw) {                                                      \
    case 1: return expand_runs(syms, lens, runs, W, 1, out, out_len);  \
    case 2: return expand_runs(syms, lens, runs, W, 2, out, out_len);  \
    default: return expand_runs(syms, lens, runs, W, 4, out, out_len); \
    }

/* One specialised loop per (width, len_width) pair. */
static size_t expand_runs_any(const uint8_t *syms, const uint8_t *lens, size_t runs, unsigned w, unsigned lw,
                              uint8_t *out, size_t out_len)
{
    switch (w) {
    case 1: EXPAND_LW(1)
    case 2: EXPAND_LW(2)
    case 4: EXPAND_LW(4)
    default: EXPAND_LW(8)
    }
}
#undef EXPAND_LW

/* The decoders below return the CRC32C of what they wrote in *crc. */
static int decode_stored(const uint8_t *rec, size_t rec_len, uint8_t *out, size_t out_len, uint32_t *crc,
                         size_t chunk_no, gc_error *err)
{
    unsigned lw = rec[RLE_REC_LEN_WIDTH_OFFSET];
    uint32_t runs = load32(rec + RLE_REC_RUN_COUNT_OFFSET);
    if (lw != 0 || runs != 0)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no,
                          "stored record has len_width %u and run_count %u (both must be 0)", lw, (unsigned)runs);
    if (rec_len != RLE_CHUNK_HEADER + out_len)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no,
                          "stored record is %zu bytes, expected 12 + chunk length %zu", rec_len, out_len);
    *crc = copy_crc(out, rec + RLE_CHUNK_HEADER, out_len);
    return GC_OK;
}

static int decode_rle(const uint8_t *rec, size_t rec_len, unsigned w, uint8_t *out, size_t out_len, uint32_t *crc,
                      size_t chunk_no, gc_error *err)
{
    unsigned lw = rec[RLE_REC_LEN_WIDTH_OFFSET];
    uint32_t runs = load32(rec + RLE_REC_RUN_COUNT_OFFSET);
    if (lw != 1 && lw != 2 && lw != 4)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no, "len_width %u is not 1, 2 or 4", lw);
    uint64_t expect = RLE_CHUNK_HEADER + (uint64_t)runs * (w + lw);
    if (rec_len != expect)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no, "record is %zu bytes, run_count %u needs %llu", rec_len,
                          (unsigned)runs, (unsigned long long)expect);
    const uint8_t *syms = rec + RLE_CHUNK_HEADER;
    const uint8_t *lens = syms + (size_t)runs * w;
    if (expand_runs_any(syms, lens, runs, w, lw, out, out_len) != 0) {
        /* the sum only names the error; the expansion stopped at the chunk's end */
        uint64_t elems = sum_lengths_any(lens, runs, lw);
        if (elems == out_len / w)
            return chunk_fail(err, GC_E_CORRUPT, chunk_no, "run lengths changed while decoding");
        return chunk_fail(err, GC_E_CORRUPT, chunk_no, "run lengths sum to %llu elements, chunk holds %zu",
                          (unsigned long long)elems, out_len / w);
    }
    *crc = crc32c(out, out_len);
    return GC_OK;
}

int rle_decode_record(const uint8_t *rec, size_t rec_len, unsigned w, uint8_t *out, size_t out_len,
                      size_t chunk_no, gc_error *err)
{
    if (!valid_width(w))
        return chunk_fail(err, GC_E_INVALID, chunk_no, "element width %u is not 1, 2, 4 or 8", w);
    if (out_len % w != 0)
        return chunk_fail(err, GC_E_INVALID, chunk_no,
                          "chunk length %zu is not a whole number of %u-byte elements", out_len, w);
    if (rec_len < RLE_CHUNK_HEADER)
        return chunk_fail(err, GC_E_TRUNCATED, chunk_no, "record is %zu bytes, shorter than its 12-byte header",
                          rec_len);
    const uint8_t *reserved = rec + RLE_REC_RESERVED_OFFSET;
    if (reserved[0] != 0 || reserved[1] != 0)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no, "reserved bytes are 0x%02x%02x, not 0", reserved[1],
                          reserved[0]);
    int rc;
    uint32_t computed = 0;
    switch (rec[RLE_REC_MODE_OFFSET]) {
    case RLE_MODE_STORED: rc = decode_stored(rec, rec_len, out, out_len, &computed, chunk_no, err); break;
    case RLE_MODE_RLE: rc = decode_rle(rec, rec_len, w, out, out_len, &computed, chunk_no, err); break;
    default: return chunk_fail(err, GC_E_CORRUPT, chunk_no, "unknown mode %u", rec[RLE_REC_MODE_OFFSET]);
    }
    if (rc != GC_OK)
        return rc;
    uint32_t stored = load32(rec + RLE_REC_CRC_OFFSET);
    if (stored != computed)
        return chunk_fail(err, GC_E_CRC, chunk_no, "CRC32C mismatch (stored 0x%08x, computed 0x%08x)",
                          (unsigned)stored, (unsigned)computed);
    return GC_OK;
}

int rle_decode_chunk(const uint8_t *record, size_t record_len, unsigned width, uint8_t *chunk, size_t chunk_len,
                     gc_error *err)
{
    return rle_decode_record(record, record_len, width, chunk, chunk_len, NO_CHUNK, err);
}
