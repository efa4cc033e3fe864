/*
 * rle.c - the `rle` codec, CPU backend: the reference for docs/FORMAT.md.
 *
 * Layout of this file: byte helpers, chunk encoder, chunk decoder, frame
 * header, then the whole-frame compress/decompress that run the chunk
 * coders on gc_parallel_for, then streams of frames back to back (what
 * rle_decompress takes: docs/FORMAT.md, "Concatenated frames").
 *
 * Speed: the encoder finds run boundaries 16 bytes at a time (SSE2 compare
 * of the data with itself shifted by one element, then movemask), counts
 * the runs before writing any (most incompressible chunks are proven stored
 * after half a chunk), then writes symbols and lengths in one more scan;
 * see encode_rle. The decoder writes each short run as one unconditional
 * 16-byte store.
 *
 * Input that changes while we run: the daemon runs these coders directly on
 * client memory (memfds mapped MAP_SHARED) that the client may keep writing,
 * and input and output may even be the same memory. Every byte that decides
 * control flow, a size or an offset is read once into private memory and
 * checked there, or bounded where it is used: the frame header is copied into
 * rle_frame_info; the chunk index is copied once (rle_frame_index_copy) and
 * record offsets and sizes come only from that copy; each run length is read
 * once and the run bounded by the space left in its chunk (expand_runs);
 * the encoder never writes more runs than count_runs counted (write_runs; a
 * chunk that changed in between is stored) and slides records by sizes kept
 * in a private array, never read back from the output's index. Such input
 * gives an error or garbage output, never an access outside the buffers.
 */
#include "rle.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "parallel.h"

/* Integers are copied to and from the frame with memcpy, and bit i of a
 * compare mask is byte i of the data: both need a little-endian host. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rle.c assumes a little-endian host"
#endif

#define NO_CHUNK SIZE_MAX  /* chunk number when a record is decoded on its own */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- byte helpers --------------------------------------------------------- */

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
static uint32_t copy_crc(uint8_t *dst, const uint8_t *src, size_t n)
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

static int valid_width(unsigned w)
{
    return w == 1 || w == 2 || w == 4 || w == 8;
}

/* ---- chunk encoder -------------------------------------------------------- */

/*
 * diff_bytes(p, w): which of the elements in the SCAN_STEP bytes at p differ
 * from the element after them. Bit i is set when byte i is the last byte of
 * such an element, so a run ends at byte i and the next starts at i + 1.
 * count_diffs(p, steps, w): how many elements differ from the next in
 * steps * SCAN_STEP bytes (steps <= COUNT_BLOCK).
 * Both read w bytes past their window. SSE2 is part of x86-64; elsewhere
 * the same questions are answered 8 bytes at a time with word arithmetic.
 */
#define COUNT_BLOCK 255u

#if defined(__SSE2__)
#include <emmintrin.h>
#define SCAN_STEP 16u

/* All-ones lanes where the element at p equals the one w bytes later. */
ALWAYS_INLINE __m128i equal_lanes(const uint8_t *p, unsigned w)
{
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + w));
    switch (w) {
    case 1: return _mm_cmpeq_epi8(a, b);
    case 2: return _mm_cmpeq_epi16(a, b);
    case 4: return _mm_cmpeq_epi32(a, b);
    default: { /* no 64-bit compare in SSE2: both 32-bit halves must match */
        __m128i eq = _mm_cmpeq_epi32(a, b);
        return _mm_and_si128(eq, _mm_shuffle_epi32(eq, _MM_SHUFFLE(2, 3, 0, 1)));
    }
    }
}

ALWAYS_INLINE uint32_t diff_bytes(const uint8_t *p, unsigned w)
{
    static const uint32_t last_byte_of_lane[9] = { 0, 0xFFFF, 0xAAAA, 0, 0x8888, 0, 0, 0, 0x8080 };
    return ~(uint32_t)_mm_movemask_epi8(equal_lanes(p, w)) & last_byte_of_lane[w];
}

/* Counts equal bytes in per-byte counters (subtracting the -1 of each
 * equal byte), which is why a block stops before they could wrap. */
ALWAYS_INLINE size_t count_diffs(const uint8_t *p, size_t steps, unsigned w)
{
    __m128i equal = _mm_setzero_si128();
    for (size_t k = 0; k < steps; k++)
        equal = _mm_sub_epi8(equal, equal_lanes(p + k * SCAN_STEP, w));
    __m128i sums = _mm_sad_epu8(equal, _mm_setzero_si128());
    size_t equal_bytes = (size_t)_mm_cvtsi128_si32(sums) + (size_t)_mm_extract_epi16(sums, 4);
    return (steps * SCAN_STEP - equal_bytes) / w;
}
#else
#define SCAN_STEP 8u

ALWAYS_INLINE uint32_t diff_bytes(const uint8_t *p, unsigned w)
{
    static const uint64_t lane_top_bit[9] = {
        0, 0x8080808080808080ull, 0x8000800080008000ull, 0, 0x8000000080000000ull,
        0, 0, 0, 0x8000000000000000ull,
    };
    uint64_t hi = lane_top_bit[w];
    uint64_t x = load64(p) ^ load64(p + w);
    uint64_t nonzero = (((x & ~hi) + ~hi) | x) & hi; /* top bit of each lane != 0 */
    return (uint32_t)((nonzero * 0x0002040810204081ull) >> 56); /* gather to bit per byte */
}

ALWAYS_INLINE size_t count_diffs(const uint8_t *p, size_t steps, unsigned w)
{
    size_t n = 0;
    for (size_t k = 0; k < steps; k++)
        n += (size_t)__builtin_popcount(diff_bytes(p + k * SCAN_STEP, w));
    return n;
}
#endif

/* Number of runs in nb > 0 bytes, or any number above limit once it is
 * certain to be above it (the chunk is then stored: no need to finish). */
ALWAYS_INLINE size_t count_runs(const uint8_t *src, size_t nb, unsigned w, size_t limit)
{
    size_t runs = 1, q = 0;
    while (q + w + SCAN_STEP <= nb && runs <= limit) {
        size_t steps = (nb - w - q) / SCAN_STEP;
        steps = steps < COUNT_BLOCK ? steps : COUNT_BLOCK;
        runs += count_diffs(src + q, steps, w);
        q += steps * SCAN_STEP;
    }
    for (; q + w < nb && runs <= limit; q += w)
        runs += load_n(src + q, w) != load_n(src + q + w, w);
    return runs;
}

/* Where write_runs puts runs: run r goes to syms[r] and lens[r]. */
typedef struct run_writer {
    const uint8_t *src;
    uint8_t *syms, *lens;
    size_t start;    /* byte offset where run r starts */
    size_t r;        /* index of the next run */
    size_t len_bits; /* OR of every length - 1: its width is the len_width */
} run_writer;

/* Write run r, ending at byte end (its symbol is its last element). */
ALWAYS_INLINE void put_run(run_writer *rw, size_t end, unsigned w, unsigned lw)
{
    size_t len = (end - rw->start) / w;
    memcpy(rw->syms + rw->r * w, rw->src + end - w, w);
    store_n(rw->lens + rw->r * lw, len - 1, lw);
    rw->len_bits |= len - 1;
    rw->start = end;
    rw->r++;
}

/*
 * diff_bytes for 64 bytes at once. Walking the run ends of a window ends in
 * a data-dependent loop exit that is often mispredicted; wide windows have
 * fewer of them per byte (twice the speed of 16-byte windows at mean run 8
 * on a recent Xeon).
 */
#define RUN_WINDOW 64u

ALWAYS_INLINE uint64_t diff_bytes64(const uint8_t *p, unsigned w)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < RUN_WINDOW; i += SCAN_STEP)
        m |= (uint64_t)diff_bytes(p + i, w) << i;
    return m;
}

/*
 * Write the symbol and length - 1 (in lw bytes, truncated if wider: the
 * caller checks *len_bits, the OR of all lengths - 1, and rewrites them) of
 * each of the `runs` runs count_runs found. This is a second read of the
 * chunk, which may have changed since (client memory): it never writes more
 * than `runs` runs, and returns -1 when the chunk no longer has exactly that
 * many (the caller then stores the chunk), else 0.
 *
 * A window ends at most RUN_WINDOW / w runs, so the check is one compare per
 * window until the last such windows, which check every run.
 */
ALWAYS_INLINE int write_runs(const uint8_t *src, size_t nb, unsigned w, unsigned lw,
                             uint8_t *syms, uint8_t *lens, size_t runs, size_t *len_bits)
{
    run_writer rw = { src, syms, lens, 0, 0, 0 };
    size_t q = 0;
    for (; q + w + RUN_WINDOW <= nb; q += RUN_WINDOW) {
        uint64_t m = diff_bytes64(src + q, w);
        if (rw.r + RUN_WINDOW / w < runs) {
            for (; m; m &= m - 1)
                put_run(&rw, q + (size_t)__builtin_ctzll(m) + 1, w, lw);
            continue;
        }
        for (; m; m &= m - 1) {
            if (rw.r + 1 >= runs) /* the last run is the one ending at nb */
                return -1;
            put_run(&rw, q + (size_t)__builtin_ctzll(m) + 1, w, lw);
        }
    }
    for (; q + w < nb; q += w) {
        if (load_n(src + q, w) != load_n(src + q + w, w)) {
            if (rw.r + 1 >= runs)
                return -1;
            put_run(&rw, q + w, w, lw);
        }
    }
    put_run(&rw, nb, w, lw); /* rw.r < runs here */
    *len_bits = rw.len_bits;
    return rw.r == runs ? 0 : -1;
}

/* Bytes needed by the widest length - 1, from the OR of them all. */
static unsigned len_width_for(size_t len_bits)
{
    if (len_bits <= UINT8_MAX)
        return 1;
    return len_bits <= UINT16_MAX ? 2 : 4;
}

/* Turn 2-byte lengths into 1-byte ones in place (each read is ahead of or
 * at the write). */
static void narrow_lengths(uint8_t *lens, size_t runs)
{
    for (size_t r = 0; r < runs; r++)
        lens[r] = lens[2 * r];
}

/*
 * Encode the rle payload and mode fields of a record; returns the record size,
 * or 0 when the chunk must be stored (rule 3). nb > 0.
 *
 * Counting the runs first is cheap (a compare and an add per SCAN_STEP
 * bytes), proves most incompressible chunks stored after reading half of
 * them, and fixes where the lengths start. The symbols are then written in
 * one scan with 2-byte lengths when the record would have room for them
 * (narrowed afterwards if 1 byte is enough), else 1-byte ones, so only
 * chunks with a run over 65536 elements need a second scan.
 */
ALWAYS_INLINE size_t encode_rle(const uint8_t *src, size_t nb, unsigned w, uint8_t *rec)
{
    size_t max_runs = (nb - 1) / (w + 1); /* most runs with runs*(w+1) < nb */
    size_t runs = count_runs(src, nb, w, max_runs);
    if (runs > max_runs)
        return 0;
    uint8_t *syms = rec + RLE_CHUNK_HEADER, *lens = syms + runs * w;
    unsigned written = runs * (w + 2) < nb ? 2 : 1;
    size_t len_bits = 0;
    if ((written == 2 ? write_runs(src, nb, w, 2, syms, lens, runs, &len_bits)
                      : write_runs(src, nb, w, 1, syms, lens, runs, &len_bits)) != 0)
        return 0; /* the chunk changed under us: store it */
    unsigned lw = len_width_for(len_bits);
    if (runs * (w + lw) >= nb)
        return 0;
    if (lw < written)
        narrow_lengths(lens, runs);
    else if (lw > written && /* lw is 4: had it been 2, written would be 2 too */
             write_runs(src, nb, w, 4, syms, lens, runs, &len_bits) != 0)
        return 0;
    rec[RLE_REC_MODE_OFFSET] = RLE_MODE_RLE;
    rec[RLE_REC_LEN_WIDTH_OFFSET] = (uint8_t)lw;
    store32(rec + RLE_REC_RUN_COUNT_OFFSET, (uint32_t)runs);
    return RLE_CHUNK_HEADER + runs * (w + lw);
}

static size_t encode_rle_any(const uint8_t *src, size_t nb, unsigned w, uint8_t *rec)
{
    switch (w) {
    case 1: return encode_rle(src, nb, 1, rec);
    case 2: return encode_rle(src, nb, 2, rec);
    case 4: return encode_rle(src, nb, 4, rec);
    default: return encode_rle(src, nb, 8, rec);
    }
}

size_t rle_chunk_bound(size_t chunk_len)
{
    return chunk_len > SIZE_MAX - RLE_CHUNK_HEADER ? SIZE_MAX : RLE_CHUNK_HEADER + chunk_len;
}

/*
 * Chunks the frame could not hold (invalid width, a length that is not a
 * multiple of it, or longer than RLE_MAX_CHUNK_SIZE so run_count might not
 * fit 32 bits) are stored, which is always a correct record.
 */
size_t rle_encode_chunk(const uint8_t *chunk, size_t chunk_len, unsigned width, uint8_t *record)
{
    size_t size = 0;
    uint32_t crc;
    if (chunk_len > 0 && chunk_len <= RLE_MAX_CHUNK_SIZE && valid_width(width) &&
        chunk_len % width == 0)
        size = encode_rle_any(chunk, chunk_len, width, record);
    if (size != 0) {
        crc = crc32c(chunk, chunk_len);
    } else {
        record[RLE_REC_MODE_OFFSET] = RLE_MODE_STORED;
        record[RLE_REC_LEN_WIDTH_OFFSET] = 0;
        store32(record + RLE_REC_RUN_COUNT_OFFSET, 0);
        crc = copy_crc(record + RLE_CHUNK_HEADER, chunk, chunk_len);
        size = RLE_CHUNK_HEADER + chunk_len;
    }
    record[RLE_REC_RESERVED_OFFSET] = 0;
    record[RLE_REC_RESERVED_OFFSET + 1] = 0;
    store32(record + RLE_REC_CRC_OFFSET, crc);
    return size;
}

/* ---- chunk decoder -------------------------------------------------------- */

/* A chunk-level error: "rle: chunk N: <check>". */
__attribute__((format(printf, 4, 5)))
static int chunk_fail(gc_error *err, gc_status code, size_t chunk_no, const char *fmt, ...)
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
ALWAYS_INLINE size_t expand_runs(const uint8_t *syms, const uint8_t *lens, size_t runs,
                                 unsigned w, unsigned lw, uint8_t *out, size_t out_len)
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

#define EXPAND_LW(W)                                                              \
    switch (lw) {                                                                 \
    case 1: return expand_runs(syms, lens, runs, W, 1, out, out_len);             \
    case 2: return expand_runs(syms, lens, runs, W, 2, out, out_len);             \
    default: return expand_runs(syms, lens, runs, W, 4, out, out_len);            \
    }

/* One specialised loop per (width, len_width) pair. */
static size_t expand_runs_any(const uint8_t *syms, const uint8_t *lens, size_t runs, unsigned w,
                              unsigned lw, uint8_t *out, size_t out_len)
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
static int decode_stored(const uint8_t *rec, size_t rec_len, uint8_t *out, size_t out_len,
                         uint32_t *crc, size_t chunk_no, gc_error *err)
{
    unsigned lw = rec[RLE_REC_LEN_WIDTH_OFFSET];
    uint32_t runs = load32(rec + RLE_REC_RUN_COUNT_OFFSET);
    if (lw != 0 || runs != 0)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no,
                          "stored record has len_width %u and run_count %u (both must be 0)",
                          lw, (unsigned)runs);
    if (rec_len != RLE_CHUNK_HEADER + out_len)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no,
                          "stored record is %zu bytes, expected 12 + chunk length %zu",
                          rec_len, out_len);
    *crc = copy_crc(out, rec + RLE_CHUNK_HEADER, out_len);
    return GC_OK;
}

static int decode_rle(const uint8_t *rec, size_t rec_len, unsigned w, uint8_t *out,
                      size_t out_len, uint32_t *crc, size_t chunk_no, gc_error *err)
{
    unsigned lw = rec[RLE_REC_LEN_WIDTH_OFFSET];
    uint32_t runs = load32(rec + RLE_REC_RUN_COUNT_OFFSET);
    if (lw != 1 && lw != 2 && lw != 4)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no, "len_width %u is not 1, 2 or 4", lw);
    uint64_t expect = RLE_CHUNK_HEADER + (uint64_t)runs * (w + lw);
    if (rec_len != expect)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no,
                          "record is %zu bytes, run_count %u needs %llu",
                          rec_len, (unsigned)runs, (unsigned long long)expect);
    const uint8_t *syms = rec + RLE_CHUNK_HEADER;
    const uint8_t *lens = syms + (size_t)runs * w;
    if (expand_runs_any(syms, lens, runs, w, lw, out, out_len) != 0) {
        /* the sum only names the error; the expansion stopped at the chunk's end */
        uint64_t elems = sum_lengths_any(lens, runs, lw);
        if (elems == out_len / w)
            return chunk_fail(err, GC_E_CORRUPT, chunk_no,
                              "run lengths changed while decoding");
        return chunk_fail(err, GC_E_CORRUPT, chunk_no,
                          "run lengths sum to %llu elements, chunk holds %zu",
                          (unsigned long long)elems, out_len / w);
    }
    *crc = crc32c(out, out_len);
    return GC_OK;
}

/* Validate and decode one record; chunk_no only names the chunk in errors. */
static int decode_record(const uint8_t *rec, size_t rec_len, unsigned w, uint8_t *out,
                         size_t out_len, size_t chunk_no, gc_error *err)
{
    if (!valid_width(w))
        return chunk_fail(err, GC_E_INVALID, chunk_no, "element width %u is not 1, 2, 4 or 8", w);
    if (out_len % w != 0)
        return chunk_fail(err, GC_E_INVALID, chunk_no,
                          "chunk length %zu is not a whole number of %u-byte elements",
                          out_len, w);
    if (rec_len < RLE_CHUNK_HEADER)
        return chunk_fail(err, GC_E_TRUNCATED, chunk_no,
                          "record is %zu bytes, shorter than its 12-byte header", rec_len);
    const uint8_t *reserved = rec + RLE_REC_RESERVED_OFFSET;
    if (reserved[0] != 0 || reserved[1] != 0)
        return chunk_fail(err, GC_E_CORRUPT, chunk_no, "reserved bytes are 0x%02x%02x, not 0",
                          reserved[1], reserved[0]);
    int rc;
    uint32_t computed = 0;
    switch (rec[RLE_REC_MODE_OFFSET]) {
    case RLE_MODE_STORED:
        rc = decode_stored(rec, rec_len, out, out_len, &computed, chunk_no, err);
        break;
    case RLE_MODE_RLE:
        rc = decode_rle(rec, rec_len, w, out, out_len, &computed, chunk_no, err);
        break;
    default: return chunk_fail(err, GC_E_CORRUPT, chunk_no, "unknown mode %u", rec[RLE_REC_MODE_OFFSET]);
    }
    if (rc != GC_OK)
        return rc;
    uint32_t stored = load32(rec + RLE_REC_CRC_OFFSET);
    if (stored != computed)
        return chunk_fail(err, GC_E_CRC, chunk_no,
                          "CRC32C mismatch (stored 0x%08x, computed 0x%08x)",
                          (unsigned)stored, (unsigned)computed);
    return GC_OK;
}

int rle_decode_chunk(const uint8_t *record, size_t record_len, unsigned width,
                     uint8_t *chunk, size_t chunk_len, gc_error *err)
{
    return decode_record(record, record_len, width, chunk, chunk_len, NO_CHUNK, err);
}

/* ---- options and frame header --------------------------------------------- */

int rle_options_resolve(const rle_options *in, rle_options *out, gc_error *err)
{
    rle_options o = in ? *in : (rle_options){ 0, 0, 0 };
    if (o.width == 0)
        o.width = 1;
    if (o.chunk_size == 0)
        o.chunk_size = RLE_DEFAULT_CHUNK_SIZE;
    if (!valid_width(o.width))
        return gc_fail(err, GC_E_INVALID, "rle: element width %u is not 1, 2, 4 or 8", o.width);
    if (o.chunk_size < RLE_MIN_CHUNK_SIZE || o.chunk_size > RLE_MAX_CHUNK_SIZE)
        return gc_fail(err, GC_E_INVALID, "rle: chunk size %u is outside [%u, %u]",
                       (unsigned)o.chunk_size, RLE_MIN_CHUNK_SIZE, RLE_MAX_CHUNK_SIZE);
    if (o.chunk_size % o.width != 0)
        return gc_fail(err, GC_E_INVALID,
                       "rle: chunk size %u is not a multiple of the element width %u",
                       (unsigned)o.chunk_size, o.width);
    *out = o;
    return GC_OK;
}

static uint64_t div_ceil(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

size_t rle_compress_bound(size_t src_len, const rle_options *opt)
{
    rle_options o;
    if (rle_options_resolve(opt, &o, NULL) != GC_OK)
        return 0;
    uint64_t chunks = div_ceil(src_len - src_len % o.width, o.chunk_size);
    /* header + index + crc + one record header per chunk + every byte stored */
    uint64_t fixed = rle_header_size_for(chunks) + RLE_CHUNK_HEADER * chunks;
    size_t bound;
    if (fixed > SIZE_MAX || __builtin_add_overflow((size_t)fixed, src_len, &bound))
        return SIZE_MAX;
    return bound;
}

/* Bytes of chunk i of a body of body_len bytes. */
static size_t chunk_len_at(uint64_t body_len, uint32_t chunk_size, size_t i)
{
    uint64_t start = (uint64_t)i * chunk_size;
    uint64_t left = body_len - start;
    return (size_t)(left < chunk_size ? left : chunk_size);
}

static int check_fixed_header(const uint8_t *src, rle_frame_info *info, gc_error *err)
{
    if (memcmp(src + RLE_MAGIC_OFFSET, RLE_MAGIC, 4) != 0)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: bad magic (not an rle frame)");
    if (src[RLE_VERSION_OFFSET] != RLE_VERSION)
        return gc_fail(err, GC_E_UNSUPPORTED, "rle: frame: version %u, only %u is supported",
                       src[RLE_VERSION_OFFSET], RLE_VERSION);
    info->width = src[RLE_WIDTH_OFFSET];
    info->tail_len = src[RLE_TAIL_LEN_OFFSET];
    info->chunk_size = load32(src + RLE_CHUNK_SIZE_OFFSET);
    info->original_size = load64(src + RLE_ORIGINAL_SIZE_OFFSET);
    info->chunk_count = load32(src + RLE_CHUNK_COUNT_OFFSET);
    memcpy(info->tail, src + RLE_TAIL_OFFSET, sizeof info->tail);
    if (!valid_width(info->width))
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: element width %u is not 1, 2, 4 or 8",
                       info->width);
    if (info->tail_len != info->original_size % info->width)
        return gc_fail(err, GC_E_CORRUPT,
                       "rle: frame: tail_len %u, expected original_size %% width = %u",
                       info->tail_len, (unsigned)(info->original_size % info->width));
    if (src[RLE_RESERVED_OFFSET] != 0)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: reserved byte is 0x%02x, not 0",
                       src[RLE_RESERVED_OFFSET]);
    if (info->chunk_size < RLE_MIN_CHUNK_SIZE || info->chunk_size > RLE_MAX_CHUNK_SIZE ||
        info->chunk_size % info->width != 0)
        return gc_fail(err, GC_E_CORRUPT,
                       "rle: frame: chunk_size %u is not a multiple of %u in [%u, %u]",
                       (unsigned)info->chunk_size, info->width, RLE_MIN_CHUNK_SIZE,
                       RLE_MAX_CHUNK_SIZE);
    uint64_t expect = div_ceil(info->original_size - info->tail_len, info->chunk_size);
    if (info->chunk_count != expect)
        return gc_fail(err, GC_E_CORRUPT,
                       "rle: frame: chunk_count %u, original_size %llu needs %llu",
                       (unsigned)info->chunk_count, (unsigned long long)info->original_size,
                       (unsigned long long)expect);
    return GC_OK;
}

/* Every index entry (read once each from index, which is either the frame or
 * a private copy) holds at least a record header; together they fill the rest
 * of the frame exactly, or, when records_used is not NULL (a frame that may
 * be followed by more frames), no more than the records_len bytes present:
 * *records_used gets their sum. */
static int check_index(const rle_frame_info *info, const uint8_t *index, size_t records_len,
                       size_t *records_used, gc_error *err)
{
    uint64_t total = 0; /* < 2^32 entries of < 2^32 each: cannot overflow */
    for (uint32_t i = 0; i < info->chunk_count; i++) {
        uint32_t size = load32(index + RLE_INDEX_ENTRY * (size_t)i);
        if (size < RLE_CHUNK_HEADER)
            return gc_fail(err, GC_E_CORRUPT,
                           "rle: chunk %u: index entry %u is shorter than a record header",
                           (unsigned)i, (unsigned)size);
        total += size;
    }
    if (total > records_len)
        return gc_fail(err, GC_E_TRUNCATED,
                       "rle: frame: index needs %llu bytes of chunk records, %zu present",
                       (unsigned long long)total, records_len);
    if (records_used) {
        *records_used = (size_t)total;
        return GC_OK;
    }
    if (total < records_len)
        return gc_fail(err, GC_E_CORRUPT, "rle: frame: %llu trailing bytes after the last chunk",
                       (unsigned long long)(records_len - total));
    return GC_OK;
}

/* rle_frame_parse, or with frame_len not NULL rle_frame_parse_prefix. */
static int parse_frame(const uint8_t *src, size_t src_len, rle_frame_info *info, size_t *frame_len,
                       gc_error *err)
{
    gc_error_clear(err);
    if (src_len < RLE_HEADER_FIXED)
        return gc_fail(err, GC_E_TRUNCATED, "rle: frame: %zu bytes, shorter than the header",
                       src_len);
    int rc = check_fixed_header(src, info, err);
    if (rc != GC_OK)
        return rc;
    uint64_t header_size = rle_header_size_for(info->chunk_count);
    if (header_size > src_len)
        return gc_fail(err, GC_E_TRUNCATED,
                       "rle: frame: header and index need %llu bytes, %zu present",
                       (unsigned long long)header_size, src_len);
    info->header_size = (size_t)header_size;
    uint32_t stored = load32(src + header_size - RLE_HEADER_CRC);
    uint32_t computed = crc32c(src, header_size - RLE_HEADER_CRC);
    if (stored != computed)
        return gc_fail(err, GC_E_CRC,
                       "rle: frame: header CRC32C mismatch (stored 0x%08x, computed 0x%08x)",
                       (unsigned)stored, (unsigned)computed);
    size_t records = 0;
    rc = check_index(info, src + RLE_HEADER_FIXED, src_len - info->header_size,
                     frame_len ? &records : NULL, err);
    if (rc == GC_OK && frame_len)
        *frame_len = info->header_size + records;
    return rc;
}

int rle_frame_parse(const uint8_t *src, size_t src_len, rle_frame_info *info, gc_error *err)
{
    return parse_frame(src, src_len, info, NULL, err);
}

int rle_frame_parse_prefix(const uint8_t *src, size_t src_len, rle_frame_info *info,
                           size_t *frame_len, gc_error *err)
{
    return parse_frame(src, src_len, info, frame_len, err);
}

int rle_frame_index_copy(const uint8_t *src, size_t src_len, const rle_frame_info *info,
                         uint32_t *index, gc_error *err)
{
    gc_error_clear(err);
    uint64_t header_size = rle_header_size_for(info->chunk_count);
    if (header_size != info->header_size || header_size > src_len)
        return gc_fail(err, GC_E_INVALID, "rle: frame: index copy with a frame info that does "
                                          "not describe this frame");
    size_t n = info->chunk_count;
    if (n)
        memcpy(index, src + RLE_INDEX_OFFSET, RLE_INDEX_ENTRY * n); /* the one read of the index */
    /* The header CRC again, over the copy: what is checked is what is used. */
    uint32_t computed = crc32c_update(crc32c(src, RLE_INDEX_OFFSET), index, RLE_INDEX_ENTRY * n);
    uint32_t stored = load32(src + header_size - RLE_HEADER_CRC);
    if (stored != computed)
        return gc_fail(err, GC_E_CRC,
                       "rle: frame: header CRC32C mismatch (stored 0x%08x, computed 0x%08x): "
                       "the frame changed while it was read",
                       (unsigned)stored, (unsigned)computed);
    return check_index(info, (const uint8_t *)index, src_len - info->header_size, NULL, err);
}

/* ---- whole frames --------------------------------------------------------- */

typedef struct encode_job {
    const uint8_t *src;
    uint64_t body_len;
    rle_options opt;
    uint8_t *records; /* first record; chunk i is encoded at slot i */
    uint8_t *index;   /* the frame's index: written, never read back */
    uint32_t *sizes;  /* parallel encode: record sizes (private memory) */
} encode_job;

/* Slot i starts where chunk i's record would be if every chunk were stored. */
static size_t slot_offset(const encode_job *job, size_t i)
{
    return i * rle_chunk_bound(job->opt.chunk_size);
}

static size_t encode_one(const encode_job *job, size_t i, uint8_t *record)
{
    size_t len = chunk_len_at(job->body_len, job->opt.chunk_size, i);
    size_t size = rle_encode_chunk(job->src + i * (size_t)job->opt.chunk_size, len,
                                   job->opt.width, record);
    store32(job->index + 4 * i, (uint32_t)size);
    return size;
}

static void encode_item(void *ctx, size_t i)
{
    const encode_job *job = ctx;
    job->sizes[i] = (uint32_t)encode_one(job, i, job->records + slot_offset(job, i));
}

/*
 * Chunks are encoded in parallel, each into its worst-case slot, then slid
 * down to close the gaps, so the output does not depend on the thread count.
 * Stored chunks fill their slot exactly, so incompressible data moves nothing.
 * The sizes come from a private array, never from the index in dst (the
 * client's memory). Without memory for that array, chunks are encoded in turn.
 */
static size_t encode_chunks(encode_job *job, size_t chunk_count)
{
    size_t out = 0;
    if (job->opt.threads != 1 && chunk_count >= 2)
        job->sizes = malloc(chunk_count * sizeof *job->sizes);
    if (!job->sizes) {
        for (size_t i = 0; i < chunk_count; i++)
            out += encode_one(job, i, job->records + out);
        return out;
    }
    gc_parallel_for(chunk_count, job->opt.threads, encode_item, job);
    for (size_t i = 0; i < chunk_count; i++) {
        size_t size = job->sizes[i], slot = slot_offset(job, i);
        if (slot != out)
            memmove(job->records + out, job->records + slot, size);
        out += size;
    }
    free(job->sizes);
    job->sizes = NULL;
    return out;
}

int rle_compress(const uint8_t *src, size_t src_len, const rle_options *opt,
                 uint8_t *dst, size_t dst_cap, size_t *dst_len, gc_error *err)
{
    gc_error_clear(err);
    rle_options o;
    int rc = rle_options_resolve(opt, &o, err);
    if (rc != GC_OK)
        return rc;
    unsigned tail_len = (unsigned)(src_len % o.width);
    uint64_t body_len = src_len - tail_len;
    uint64_t chunk_count = div_ceil(body_len, o.chunk_size);
    size_t bound = rle_compress_bound(src_len, &o);
    if (chunk_count > UINT32_MAX || bound == SIZE_MAX)
        return gc_fail(err, GC_E_LIMIT, "rle: %zu bytes of input is too large for one frame",
                       src_len);
    if (dst_cap < bound)
        return gc_fail(err, GC_E_LIMIT,
                       "rle: output buffer of %zu bytes is below rle_compress_bound() = %zu",
                       dst_cap, bound);
    /* src and dst may be the same memory: the tail is read before the header is written */
    rle_header_write_fixed(dst, o.width, o.chunk_size, src_len, (uint32_t)chunk_count,
                           tail_len ? src + src_len - tail_len : src);
    size_t header_size = (size_t)rle_header_size_for(chunk_count);
    encode_job job = { src, body_len, o, dst + header_size, dst + RLE_HEADER_FIXED, NULL };
    size_t records_len = encode_chunks(&job, (size_t)chunk_count);
    store32(dst + header_size - RLE_HEADER_CRC, crc32c(dst, header_size - RLE_HEADER_CRC));
    *dst_len = header_size + records_len;
    return GC_OK;
}

typedef struct decode_job {
    const uint8_t *records;
    const uint64_t *offsets; /* of each record and the end, from the private index copy */
    const rle_frame_info *info;
    uint8_t *dst;
    pthread_mutex_t lock;
    atomic_size_t first_bad; /* lowest failing chunk, or SIZE_MAX */
    gc_error err;            /* its error, under lock */
} decode_job;

static void decode_item(void *ctx, size_t i)
{
    decode_job *job = ctx;
    /* Chunks past a failed one need no decoding: only the first error is kept. */
    if (i > atomic_load_explicit(&job->first_bad, memory_order_relaxed))
        return;
    const rle_frame_info *info = job->info;
    uint64_t body_len = info->original_size - info->tail_len;
    gc_error err;
    int rc = decode_record(job->records + job->offsets[i], job->offsets[i + 1] - job->offsets[i],
                           info->width, job->dst + i * (size_t)info->chunk_size,
                           chunk_len_at(body_len, info->chunk_size, i), i, &err);
    if (rc == GC_OK)
        return;
    pthread_mutex_lock(&job->lock);
    if (i < atomic_load(&job->first_bad)) {
        atomic_store(&job->first_bad, i);
        job->err = err;
    }
    pthread_mutex_unlock(&job->lock);
}

/* Decode every chunk (in parallel); on failure report the lowest failing chunk.
 * Record sizes and offsets come only from a private copy of the index,
 * validated after it was made (rle_frame_index_copy). */
static int decode_chunks(const uint8_t *src, size_t src_len, const rle_frame_info *info,
                         unsigned threads, uint8_t *dst, gc_error *err)
{
    size_t n = info->chunk_count;
    uint32_t *index = malloc(n ? n * sizeof *index : 1);
    uint64_t *offsets = malloc((n + 1) * sizeof *offsets);
    if (!index || !offsets) {
        free(index);
        free(offsets);
        return gc_fail(err, GC_E_NOMEM, "rle: no memory for a %u-chunk index",
                       (unsigned)info->chunk_count);
    }
    int rc = rle_frame_index_copy(src, src_len, info, index, err);
    if (rc != GC_OK) {
        free(index);
        free(offsets);
        return rc;
    }
    offsets[0] = 0;
    for (size_t i = 0; i < n; i++)
        offsets[i + 1] = offsets[i] + index[i];
    free(index);
    decode_job job = { .records = src + info->header_size, .offsets = offsets,
                       .info = info, .dst = dst };
    pthread_mutex_init(&job.lock, NULL);
    atomic_init(&job.first_bad, SIZE_MAX);
    gc_parallel_for(info->chunk_count, threads, decode_item, &job);
    pthread_mutex_destroy(&job.lock);
    free(offsets);
    if (atomic_load(&job.first_bad) == SIZE_MAX)
        return GC_OK;
    if (err)
        *err = job.err;
    return job.err.code;
}

/* ---- streams: frames back to back (docs/FORMAT.md, "Concatenated frames") -- */

/*
 * Re-issue err (from frame number `frame`, counted from 1) named after its
 * frame: "rle: frame: X" and "rle: X" become "rle: frame N: X". Frame 1's
 * messages are left as they are, the single-frame decoder's own.
 */
static int name_frame(gc_error *err, size_t frame, int rc)
{
    if (!err || frame <= 1)
        return rc;
    const char *m = err->msg;
    if (strncmp(m, "rle: frame: ", 12) == 0)
        m += 12;
    else if (strncmp(m, "rle: ", 5) == 0)
        m += 5;
    char msg[GC_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", m);
    return gc_fail(err, (gc_status)rc, "rle: frame %zu: %s", frame, msg);
}

/*
 * Parse frame number `frame` (from 1) at src, of which src_len bytes are
 * present, it and any frames after it. After the first frame, bytes that do
 * not start with the magic are trailing garbage (GC_E_CORRUPT).
 */
static int parse_nth(const uint8_t *src, size_t src_len, size_t frame, rle_frame_info *info,
                     size_t *frame_len, gc_error *err)
{
    if (frame > 1 && memcmp(src, RLE_MAGIC, src_len < 4 ? src_len : 4) != 0)
        return gc_fail(err, GC_E_CORRUPT,
                       "rle: frame %zu: %zu trailing byte%s after frame %zu %s not an rle frame "
                       "(bad magic)", frame, src_len, src_len == 1 ? "" : "s", frame - 1,
                       src_len == 1 ? "is" : "are");
    int rc = parse_frame(src, src_len, info, frame_len, err);
    return rc == GC_OK ? rc : name_frame(err, frame, rc);
}

int rle_stream_decoded_size(const uint8_t *src, size_t src_len, uint64_t *size, size_t *frames,
                            gc_error *err)
{
    gc_error_clear(err);
    uint64_t total = 0;
    size_t off = 0, n = 0;
    do {
        rle_frame_info info;
        size_t frame_len;
        int rc = parse_nth(src + off, src_len - off, n + 1, &info, &frame_len, err);
        if (rc != GC_OK)
            return rc;
        n++;
        if (__builtin_add_overflow(total, info.original_size, &total))
            return gc_fail(err, GC_E_LIMIT, "rle: frame %zu: the frames decode to more than 2^64 "
                                            "bytes", n);
        off += frame_len;
    } while (off < src_len);
    *size = total;
    if (frames)
        *frames = n;
    return GC_OK;
}

/* Decode the one frame src[0..frame_len) that parse_frame described in *info. */
static int decode_frame(const uint8_t *src, size_t frame_len, const rle_frame_info *info,
                        unsigned threads, uint8_t *dst, gc_error *err)
{
    int rc = decode_chunks(src, frame_len, info, threads, dst, err);
    if (rc != GC_OK)
        return rc;
    size_t body_len = (size_t)(info->original_size - info->tail_len);
    if (info->tail_len)
        memcpy(dst + body_len, info->tail, info->tail_len);
    return GC_OK;
}

/*
 * One or more frames. Their sizes are summed first (rle_stream_decoded_size:
 * every header is checked before anything is written), then each frame is
 * parsed again as it is decoded, its output bounded by the room left: src
 * may change in between, and only what this pass reads decides where bytes go.
 */
int rle_decompress(const uint8_t *src, size_t src_len, unsigned threads,
                   uint8_t *dst, size_t dst_cap, size_t *dst_len, gc_error *err)
{
    uint64_t total;
    size_t frames;
    int rc = rle_stream_decoded_size(src, src_len, &total, &frames, err);
    if (rc != GC_OK)
        return rc;
    if (total > dst_cap) {
        if (frames == 1)
            return gc_fail(err, GC_E_LIMIT,
                           "rle: frame decodes to %llu bytes, output buffer holds %zu",
                           (unsigned long long)total, dst_cap);
        return gc_fail(err, GC_E_LIMIT, "rle: %zu frames decode to %llu bytes, output buffer holds %zu",
                       frames, (unsigned long long)total, dst_cap);
    }
    size_t off = 0, out = 0;
    for (size_t n = 1; off < src_len || n == 1; n++) {
        rle_frame_info info;
        size_t frame_len;
        rc = parse_nth(src + off, src_len - off, n, &info, &frame_len, err);
        if (rc != GC_OK)
            return rc;
        if (info.original_size > dst_cap - out)
            return name_frame(err, n, gc_fail(err, GC_E_LIMIT,
                                              "rle: frame decodes to %llu bytes, output buffer "
                                              "has %zu left", (unsigned long long)info.original_size,
                                              dst_cap - out));
        rc = decode_frame(src + off, frame_len, &info, threads, dst ? dst + out : dst, err);
        if (rc != GC_OK)
            return name_frame(err, n, rc);
        off += frame_len;
        out += (size_t)info.original_size;
    }
    *dst_len = out;
    return GC_OK;
}
