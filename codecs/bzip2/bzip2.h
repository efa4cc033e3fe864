/*
 * bzip2.h - the `bzip2` codec, CPU backend: standard bzip2 streams.
 *
 * Output is read by any bunzip2; input may be any valid .bz2 (several
 * concatenated streams included). The exact choices that decide the output
 * bytes are in docs/BZIP2.md: the CUDA backend implements that document.
 * All functions are thread-safe (no shared state).
 */
#ifndef GC_BZIP2_H
#define GC_BZIP2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bz2_format.h"
#include "gc_job.h"
#include "gc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bz2_options {
    int level;         /* 1..9: block size level*100k (0 = 9) */
    unsigned threads;  /* blocks compressed/decompressed in parallel (0 = all CPUs) */
    const gc_job *job; /* cancellation (GC_E_IO "cancelled"); NULL: none */
} bz2_options;

/* Largest stream bz2_compress can produce for src_len bytes. */
size_t bz2_compress_bound(size_t src_len, int level);

/*
 * Compress src into one standard bzip2 stream, malloc'd into *dst (free()).
 * The output is identical for every thread count.
 */
int bz2_compress(const uint8_t *src, size_t src_len, const bz2_options *opt, uint8_t **dst, size_t *dst_len,
                 gc_error *err);

/*
 * Decompress one or more concatenated bzip2 streams, malloc'd into *dst.
 * max_output bounds the decompressed size (0 = no limit; exceeding it is
 * GC_E_LIMIT). Corrupt input: GC_E_CORRUPT / GC_E_TRUNCATED / GC_E_CRC with
 * a message naming the block and the problem.
 */
int bz2_decompress(const uint8_t *src, size_t src_len, size_t max_output, unsigned threads, uint8_t **dst,
                   size_t *dst_len, gc_error *err);

/*
 * bz2_decompress under a job: cancellation is checked between blocks
 * (GC_E_IO), and the output buffer grows only as job->may_grow allows
 * (GC_E_LIMIT otherwise).
 */
int bz2_decompress_job(const uint8_t *src, size_t src_len, size_t max_output, unsigned threads, const gc_job *job,
                       uint8_t **dst, size_t *dst_len, gc_error *err);

/*
 * bz2_compress, also telling how many blocks the stream holds (*blocks may be
 * NULL): what bz2_combine_parts needs to splice streams of consecutive parts.
 */
int bz2_compress_counted(const uint8_t *src, size_t src_len, const bz2_options *opt, uint8_t **dst,
                         size_t *dst_len, uint32_t *blocks, gc_error *err);

/*
 * Where to cut a compress stream's part: src[0..n) begins at a block start of
 * the stream (its start, or a cut made here). Walking from block start *from
 * (0 at first), the first block start at or past min that src shows for
 * certain, or 0 if src ends first; *from is left at the last block start the
 * walk passed below it, where a call with more of the same src may resume.
 * limit: bz2_block_limit(level). A part cut there has the whole input's blocks.
 */
size_t bz2_rle1_next_start(const uint8_t *src, size_t n, size_t *from, size_t min, size_t limit);

/*
 * The same cut found as the input arrives, each byte walked once: src[0..n)
 * is what has arrived so far (each call sees the same bytes and more), w
 * the walk's place (zeroed at a block start, src's first byte), `end` set
 * once src is all there is. Returns the first block start at or past min,
 * or 0 until the input shows one for certain. A call walks the bytes that
 * arrived since the last one (and at most 259 bytes before them), so a
 * caller on an event loop pays per call for what that call received.
 */
typedef struct bz2_rle1_walk {
    size_t start; /* the block the walk is in begins here */
    size_t pos;   /* a unit start of that block up to which it is walked */
    size_t used;  /* RLE1 bytes of its units before pos */
} bz2_rle1_walk;
size_t bz2_rle1_walk_to(const uint8_t *src, size_t n, bool end, bz2_rle1_walk *w, size_t min, size_t limit);

/*
 * What a walk over src[0..n) can add up instead of walking, made ahead on
 * another thread (a file stream part's read): RLE1 bytes by position per
 * tile of BZ2_RLE1_TILE bytes, BZ2_RLE1_UNCOUNTED where a run may reach
 * 255 bytes (and for the first tile, whose first bytes look back past
 * src). NULL: out of memory. free() it.
 */
#define BZ2_RLE1_TILE ((size_t)16 << 10)
#define BZ2_RLE1_UNCOUNTED UINT32_MAX
typedef struct bz2_rle1_tiles {
    size_t count; /* whole tiles of src */
    uint32_t sum[];
} bz2_rle1_tiles;
bz2_rle1_tiles *bz2_rle1_scan(const uint8_t *src, size_t n);

/*
 * The last block start of src[0..n) past 0 that is certain whatever bytes
 * follow n, src[0] being a block start; 0 if none. A part of a stream
 * whose input goes on past n ends there: the bytes after it, less than a
 * block's input, begin the next part. t (NULL: none) is bz2_rle1_scan of
 * src + at: the walk adds its tiles up where it can.
 */
size_t bz2_rle1_last_start(const uint8_t *src, size_t n, size_t limit, const bz2_rle1_tiles *t, size_t at);

/* ---- splicing the streams of consecutive parts (docs/BZIP2.md, "Streaming") ----
 *
 * A part that begins at a block start plans the whole input's blocks, so
 * compressing an input in parts cut at block starts (bz2_rle1_next_start; the
 * last part ends at the input's end) and concatenating the parts' blocks
 * gives exactly bz2_compress of the whole:
 *   "BZh"+level, body of part 1, body of part 2, ..., end marker, combined CRC
 * where each body is located by bz2_stream_body and the combined CRC is
 * folded with bz2_combine_parts. bz2_splice does the bit-level concatenation.
 */

/*
 * The blocks of one complete stream made by our encoder (any backend): they
 * occupy bits [32, 32 + *body_bits) of s (bit 0 = the MSB of s[0]); *combined
 * gets its stored combined CRC. The header must be "BZh1".."BZh9"; the
 * end-of-stream marker is found from the end (0..7 zero padding bits; the
 * 48-bit magic is not periodic with any period 1..7, so it cannot match at
 * two of those offsets). Blocks are not decoded. GC_OK, or GC_E_CORRUPT if s
 * is not such a stream (GC_E_INVALID for NULL arguments).
 */
int bz2_stream_body(const uint8_t *s, size_t len, uint64_t *body_bits, uint32_t *combined, gc_error *err);

/* bz2_combine_parts (bz2_format.h) folds the combined CRCs. */

/*
 * A bit string being built into a caller's byte buffers: everything appended
 * so far has been written out as whole bytes except the last nacc (0..7)
 * bits, which wait in acc LEFT-aligned: the first pending bit is acc's bit 7
 * (0x80), the next 0x40, ...; the bits of acc below them are zero.
 * Zero-initialise (= the empty string, byte aligned).
 */
typedef struct bz2_splicer {
    uint8_t acc;   /* pending bits, left-aligned (MSB first), unused low bits 0 */
    unsigned nacc; /* 0..7 pending bits */
    uint64_t bits; /* bits appended in all (written + pending) */
} bz2_splicer;

/* Append the first nbits bits of src (MSB of src[0] first) to the string:
 * writes the bytes that become whole to out and returns their count
 * ((nacc + nbits) / 8). out must hold nbits / 8 + 1 bytes. Bits of src past
 * nbits are ignored. Word-at-a-time for every shift (0..7). out may overlap
 * src if it does not begin after it (out <= src): each output byte is
 * written only after the source bytes under it were read, so a part's
 * stream is spliced inside its own buffer, over its header. */
size_t bz2_splice(bz2_splicer *sp, const uint8_t *src, uint64_t nbits, uint8_t *out);
/* The state bz2_splice would leave after appending those bits, reading only
 * the last few of them and writing nothing: whoever keeps the order learns
 * where the next piece begins before this one is spliced. */
void bz2_splice_skip(bz2_splicer *sp, const uint8_t *src, uint64_t nbits);
/* Append a stream header "BZh"+level (level 1..9); out must hold 5 bytes. */
size_t bz2_splice_header(bz2_splicer *sp, int level, uint8_t *out);
/* Append the end-of-stream magic and the combined CRC, then zero bits to the
 * next byte boundary: writes and returns 10 or 11 bytes (out must hold 11);
 * afterwards the splicer is byte aligned (nacc 0), ready for another stream. */
size_t bz2_splice_finish(bz2_splicer *sp, uint32_t combined, uint8_t *out);

/* ---- a stream's parts: the rules every streamed side shares (the daemon's
 * streams, the client library's local streams), so both give the same bytes ---- */

/* Compress parts: at least this much input, cut at the first block start after it (so their
 * blocks are the whole input's, bzip2's); a block may span up to ~46 MB of runs, so a part that
 * finds no block start within twice this ends there (still one valid stream, not bzip2's blocks). */
#define BZ2_STREAM_COMPRESS_PART ((size_t)32 << 20)
/* Decompress parts: at least this much input, cut at the first magic after it; at most twice it. */
#define BZ2_STREAM_DECOMPRESS_PART ((size_t)32 << 20)

/*
 * Where a compress part of a stream at level `level` ends, buf[0..avail)
 * being what has arrived from the part's start (a block start) and w the
 * walk over it so far (zeroed for a new part; zeroed again here when a cut
 * is made): from BZ2_STREAM_COMPRESS_PART bytes on, up to the next block
 * start; once that much is there and the next start is not yet, up to the
 * last start the walk passed; at most twice that. final: buf is all the
 * input left; flush: end the part (and a block) where the input ends.
 * Returns the part's length, or 0 to wait for more input.
 */
size_t bz2_stream_cut_compress(bz2_rle1_walk *w, const uint8_t *buf, size_t avail, bool final, bool flush,
                               int level);

/* Joining the streams of a stream's parts, in order, into one (bz2_splice). Zero-initialise, set level. */
typedef struct bz2_joiner {
    int level;         /* the stream header's level (1..9) */
    bz2_splicer sp;    /* the output as a bit string */
    bool started;      /* the header is out */
    uint32_t combined; /* the combined CRC so far */
} bz2_joiner;

/* Where one part's blocks join the output (bz2_join_next), for bz2_join_place. */
typedef struct bz2_joint {
    bz2_splicer from;   /* the bits of the output before the part still pending */
    bool header;        /* the part is the first: the stream header goes before it */
    int level;          /* that header's level */
    uint64_t body_bits; /* the part's blocks: bits [32, 32 + body_bits) of its stream */
    size_t bytes;       /* whole output bytes bz2_join_place writes */
} bz2_joint;

/*
 * The next part's stream part[0..len) (made by bz2_compress_counted, `blocks`
 * blocks): where its blocks join the output, in *jt, and j moved past them.
 * Reads only where its body ends and its last bits, so whoever keeps the
 * order learns where the part after it joins before this one is placed.
 * GC_E_CORRUPT (err) if part is not one of our streams.
 */
int bz2_join_next(bz2_joiner *j, const uint8_t *part, size_t len, uint32_t blocks, bz2_joint *jt, gc_error *err);

/* Splice the part's blocks in place, over its own stream: jt->bytes whole bytes from part[0]. */
size_t bz2_join_place(const bz2_joint *jt, uint8_t *part);

/* The end-of-stream marker and combined CRC after the last part: out holds 16 bytes; 0 if no part joined. */
size_t bz2_join_finish(bz2_joiner *j, uint8_t *out);

/* ---- streaming (partial) decompression ---- */

/* A decoder rejects a block longer than BZ2_MAX_BLOCK_COMPRESSED bytes (bz2_format.h). */
/* Progress bound of bz2_decompress_part: with more != 0 and at least this
 * many bytes of src (counting from src[0], where decoding resumes at bit
 * st->bit), a call either consumes something (*used > 0 or st->bit moves)
 * or fails, since every piece (header 4 bytes, end marker + CRC 11 bytes,
 * block <= BZ2_MAX_BLOCK_COMPRESSED) then lies inside src. A caller keeping a
 * window of unconsumed input needs this much room plus its next piece. */
#define BZ2_PART_PROGRESS_BYTES ((size_t)4 << 20)

/* Where a streamed decode stands between two calls. Zero-initialise before the first. */
typedef struct bz2_dstate {
    unsigned bit;        /* 0..7: decoding resumes at this bit of the next call's src[0] */
    int in_stream;       /* inside a stream (its header read) */
    int level;           /* that stream's level */
    uint32_t combined;   /* its combined CRC so far */
    unsigned stream_no;  /* streams begun so far (messages say "stream N") */
    unsigned block_no;   /* blocks decoded in the current stream */
    int garbage;         /* set: trailing garbage found after stream stream_no; nothing more is decoded */
    uint64_t garbage_at; /* ... at this byte of that call's src */
    int seen_any;        /* any input at all (empty input is GC_E_TRUNCATED at the end) */
    /* Set by the caller, not the decoder: a call stops at the first block
     * boundary where its output has reached out_soft bytes (0: never), even
     * with more == 0; *used says where. Bounds one call's output whatever the
     * ratio (a stream of zeros expands ~45000 times). */
    size_t out_soft;
    /* Set by bz2_dstate_at_magic, not by a resumed decode: the call begins
     * at a block or end marker of a "head" stream whose header lies in input
     * it does not see. The head stream's blocks are checked against level 9
     * and its end-of-stream CRC is recorded, not checked: bz2_dstate_follow
     * checks both once the input before is decoded. Cleared at its end. */
    int head;
    uint32_t head_max_nblock; /* longest block of the head stream */
    int head_ended;           /* its end marker was decoded: */
    uint32_t head_blocks;     /* ... after this many blocks */
    uint32_t head_combined;   /* ... whose combined CRC is this */
    uint32_t head_stored;     /* ... and the CRC it stores */
    int soft_stopped;         /* out: the call stopped at out_soft */
} bz2_dstate;

/*
 * Decode the whole blocks (and stream headers and end markers) at the start
 * of src, from bit st->bit of src[0].
 *
 * more != 0: more input follows, so src ending inside a header, a block, an
 * end marker or its CRC, or inside a "B"/"BZ"/"BZh" that may start the next
 * stream, is not an error: decoding stops before that piece, *used gets the
 * bytes wholly consumed and st->bit the bit within src[*used] where the next
 * call resumes (the caller keeps src[*used..len) and appends the next input).
 * (st->out_soft may stop a call early at a block boundary, more or not.)
 * more == 0: src is the rest of the input; ending early is GC_E_TRUNCATED
 * exactly as bz2_decompress says it.
 *
 * Output is malloc'd into *dst (free(); non-NULL on GC_OK, maybe empty).
 * Errors and messages are exactly those bz2_decompress gives for the same
 * whole input, with the same stream and block numbers (bz2_decompress IS
 * this function with more = 0 and one call). Trailing garbage (decided
 * exactly as bz2_decompress decides it) is NOT an error here: st->garbage is
 * set, st->garbage_at is its byte offset in this call's src, the output up
 * to it is returned with GC_OK and *used = len (the garbage is dropped);
 * later calls return GC_OK with no output and consume everything.
 * max_output bounds THIS call's output (0 = none; exceeding it is
 * GC_E_LIMIT, as in bz2_decompress). job: cancellation and may_grow, as in
 * bz2_decompress_job. threads: as bz2_decompress. Progress: see
 * BZ2_PART_PROGRESS_BYTES. After an error st is not meaningful.
 */
int bz2_decompress_part(const uint8_t *src, size_t len, int more, bz2_dstate *st, size_t max_output,
                        unsigned threads, const gc_job *job, uint8_t **dst, size_t *dst_len, size_t *used,
                        gc_error *err);

/* ---- decoding a stream's parts in parallel (docs/BZIP2.md, "Parallel decoding") ----
 *
 * A part of the input may be decoded before the input in front of it: it
 * begins at a bit where a block or end-of-stream magic occurs (found by
 * bz2_find_part_start), decoded from bz2_dstate_at_magic with more != 0
 * (or more = 0 for the input's last part). If its input ends at the bit where
 * the next part begins, the decode stops exactly there when that bit is a
 * real piece boundary. Once the input in front is decoded, the part counts
 * only if that decode stopped at the part's first bit, in a stream, and
 * bz2_dstate_follow agrees; otherwise (a chance match of the magic inside
 * compressed data) its output is dropped and the input is decoded again from
 * where the decode in front stopped, with that exact state.
 */

/* The first bit at or after byte from of buf[0..len) where a block or
 * end-of-stream magic begins, all 48 bits of it inside buf: GC_OK and
 * *bit, or GC_E_TRUNCATED if there is none. */
int bz2_find_part_start(const uint8_t *buf, size_t len, size_t from, uint64_t *bit);

/* The state a part found by bz2_find_part_start starts from: its magic at
 * bit `bit` (0..7) of the part's first byte. */
void bz2_dstate_at_magic(bz2_dstate *st, unsigned bit);

/*
 * Whether a part decoded from bz2_dstate_at_magic, which stopped in state
 * part, continues the decode that stopped in state prev at the part's first
 * bit: prev is inside a stream, not after trailing garbage, the head
 * stream's blocks fit prev's level and, if the head stream ended in the
 * part, its stored CRC is the one of all its blocks. If so, *prev becomes
 * the exact state where the part stopped (stream and block numbers
 * counted from prev's), its bit and out_soft those of part. If not, prev
 * is unchanged and the part's input must be decoded again from prev.
 */
bool bz2_dstate_follow(bz2_dstate *prev, const bz2_dstate *part);

/* The most one block can decode to: 900000 bytes of RLE1 runs, 5 bytes
 * ("aaaa" and a count of 255) becoming 259. */
#define BZ2_MAX_BLOCK_OUTPUT ((size_t)900000 / 5 * 259)

/*
 * bz2_decompress_part into the caller's buffer dst[0..dst_cap), which the
 * call never moves or frees, success or not: after each block it accepts,
 * job->progress hears how many bytes of dst are final, so the caller may
 * send them on while the call decodes the rest. Growth is charged to
 * job->may_grow block by block (the bytes written, not dst_cap). A block
 * that would pass dst_cap fails GC_E_LIMIT; with st->out_soft set, a
 * dst_cap of out_soft + BZ2_MAX_BLOCK_OUTPUT (or max_output, if less)
 * never does. Otherwise exactly bz2_decompress_part.
 */
int bz2_decompress_part_into(const uint8_t *src, size_t len, int more, bz2_dstate *st, size_t max_output,
                             uint8_t *dst, size_t dst_cap, unsigned threads, const gc_job *job, size_t *dst_len,
                             size_t *used, gc_error *err);

#ifdef __cplusplus
}
#endif

#endif
