/*
 * rle_encode_chunk.c - the rle CPU backend's chunk encoder: one chunk of
 * elements into its record, RLE or stored (docs/FORMAT.md), whichever is
 * smaller.
 *
 * Speed: the encoder finds run boundaries 16 bytes at a time (SSE2 compare
 * of the data with itself shifted by one element, then movemask), counts
 * the runs before writing any (most incompressible chunks are proven stored
 * after half a chunk), then writes symbols and lengths in one more scan;
 * see encode_rle.
 *
 * Input that changes while we run (rle.c says why it may): the encoder never
 * writes more runs than count_runs counted (write_runs; a chunk that changed
 * in between is stored), and a stored chunk's CRC is of the copy it wrote.
 */
#include <string.h>

#include "rle_internal.h"

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
        0, 0x8080808080808080ull, 0x8000800080008000ull, 0, 0x8000000080000000ull, 0, 0, 0, 0x8000000000000000ull,
    };
    uint64_t hi = lane_top_bit[w];
    uint64_t x = load64(p) ^ load64(p + w);
    uint64_t nonzero = (((x & ~hi) + ~hi) | x) & hi;            /* top bit of each lane != 0 */
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
ALWAYS_INLINE int write_runs(const uint8_t *src, size_t nb, unsigned w, unsigned lw, uint8_t *syms, uint8_t *lens,
                             size_t runs, size_t *len_bits)
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
    if (chunk_len > 0 && chunk_len <= RLE_MAX_CHUNK_SIZE && valid_width(width) && chunk_len % width == 0)
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
