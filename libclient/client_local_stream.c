/*
 * client_local_stream.c - a stream run in this process on the CPU engine
 * (gpucomp.h, "Streams", for a client with no daemon to use): the input is
 * cut into parts by the rules the daemon's streams use (bzip2.h and rle.h,
 * "a stream's parts"), each part runs on every core (the engine's threads),
 * and its output is handed out before the next part is made. So the output
 * is the daemon's stream output byte for byte, and memory stays at about
 * one part's input and one part's output whatever the input's length:
 *
 *   bzip2 compress   parts of 32 MiB cut at a block start, their streams
 *                    joined into one (bz2_join_*): bzip2's own bytes;
 *   bzip2 decompress a window of 32 MiB of input decoded as far as its
 *                    whole blocks go (bz2_decompress_part_into), at most
 *                    LOCAL_OUT_SOFT of output at a time;
 *   rle compress     one frame per part of 32 MiB (rle_stream_part_bytes);
 *   rle decompress   frame by frame, each whole: a frame is as large as its
 *                    writer made it (the daemon's and ours hold 32 MiB of
 *                    input; an old whole-buffer run's, a whole file).
 *
 * The caller drives it (client_stream.c): nothing runs between calls.
 */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

#include "bzip2.h"
#include "rle.h"

/* A bzip2 decode stops at the first block boundary past this much output (a block of zeros
 * expands ~45000 times): its output buffer is this plus one block's most. */
#define LOCAL_OUT_SOFT ((size_t)32 << 20)
/* A bzip2 compress part that has found no block start yet takes input in steps of this. */
#define LOCAL_STEP ((size_t)1 << 20)

struct client_local_stream {
    bool decompress;
    gpucomp_codec codec;
    int level;           /* bzip2 compress: 1..9 */
    rle_options rle;     /* rle compress: resolved */
    uint64_t max_output; /* decompress: 0 = none */
    /* input not yet in a part: in[0..in_len), which begins at input offset in_base */
    uint8_t *in;
    size_t in_len, in_cap;
    uint64_t in_base;
    /* output made and not yet handed out: out[out_pos..out_len) of out_cap */
    uint8_t *out;
    size_t out_len, out_pos, out_cap;
    uint64_t taken, made, delivered, parts;
    bool done;
    int status;
    bool garbage;
    uint64_t garbage_at;
    bz2_rle1_walk walk; /* bzip2 compress: the cut's walk over in */
    bz2_joiner join;    /* bzip2 compress */
    bz2_dstate ds;      /* bzip2 decompress */
};

int client_local_stream_open(bool decompress, const gpucomp_options *o, client_local_stream **out, gc_error *err)
{
    *out = NULL;
    if (o->codec != GPUCOMP_CODEC_RLE && o->codec != GPUCOMP_CODEC_BZIP2)
        return gc_fail(err, GC_E_INVALID, "unknown codec %d", (int)o->codec);
    if (o->level < 0 || o->level > 9)
        return gc_fail(err, GC_E_INVALID, "level %d is out of range (1..9, or 0 for the default)", o->level);
    client_local_stream *l = calloc(1, sizeof *l);
    if (!l)
        return gc_fail(err, GC_E_NOMEM, "cannot allocate a stream");
    l->decompress = decompress;
    l->codec = o->codec;
    l->level = o->level ? o->level : 9;
    l->join.level = l->level;
    l->max_output = decompress ? o->max_output : 0;
    l->ds.out_soft = LOCAL_OUT_SOFT;
    rle_options want = { .width = o->element_width, .chunk_size = o->chunk_size, .threads = 0 };
    int rc = o->codec == GPUCOMP_CODEC_RLE && !decompress ? rle_options_resolve(&want, &l->rle, err) : GC_OK;
    if (rc != GC_OK) {
        free(l);
        return rc;
    }
    *out = l;
    return GC_OK;
}

void client_local_stream_free(client_local_stream *l)
{
    if (!l)
        return;
    free(l->in);
    free(l->out);
    free(l);
}

/* ---- buffers --------------------------------------------------------------- */

/* The input buffer, never NULL: the engine's calls take no NULL source, even for no bytes. */
static const uint8_t *in_bytes(const client_local_stream *l)
{
    static const uint8_t none[1];
    return l->in ? l->in : none;
}

/* An output buffer of at least n bytes (its old bytes are not kept). */
static int out_room(client_local_stream *l, size_t n, gc_error *err)
{
    if (n <= l->out_cap && l->out)
        return GC_OK;
    free(l->out);
    l->out_cap = 0;
    if (!(l->out = malloc(n ? n : 1)))
        return gc_fail(err, GC_E_NOMEM, "out of memory (%zu bytes for a stream part's output)", n);
    l->out_cap = n ? n : 1;
    return GC_OK;
}

/* A part's output made into a buffer of the codec's own: it becomes the output buffer. */
static void out_adopt(client_local_stream *l, uint8_t *buf, size_t len, size_t cap)
{
    free(l->out);
    l->out = buf;
    l->out_cap = cap;
    l->out_len = len;
    l->out_pos = 0;
}

/* The first n bytes of the input went into a part. */
static void consume(client_local_stream *l, size_t n)
{
    if (n < l->in_len) /* else nothing moves (and in may be NULL) */
        memmove(l->in, l->in + n, l->in_len - n);
    l->in_len -= n;
    l->in_base += n;
}

/* How much input the codec wants before it cuts its next part. */
static uint64_t in_target(const client_local_stream *l)
{
    if (l->codec == GPUCOMP_CODEC_BZIP2 && l->decompress)
        return BZ2_STREAM_DECOMPRESS_PART;
    if (l->codec == GPUCOMP_CODEC_BZIP2) /* no block start yet: a little more at a time */
        return l->in_len < BZ2_STREAM_COMPRESS_PART ? BZ2_STREAM_COMPRESS_PART : l->in_len + LOCAL_STEP;
    if (!l->decompress)
        return rle_stream_part_bytes(&l->rle);
    uint64_t index_end, len, original; /* rle decompress: the frame at in[0], whole */
    rle_frame_extent(l->in, l->in_len, &index_end, &len, &original);
    return len ? len : index_end > RLE_HEADER_FIXED ? index_end : RLE_HEADER_FIXED;
}

/* Copy the caller's input into in, up to what the codec wants (the buffer grows only as input comes). */
static int take_input(client_local_stream *l, gpucomp_inbuf *in, gc_error *err)
{
    uint64_t target = in_target(l);
    size_t give = in->size - in->pos;
    size_t want = target > l->in_len ? (size_t)(target - l->in_len < give ? target - l->in_len : give) : 0;
    if (want == 0)
        return GC_OK;
    if (l->in_len + want > l->in_cap) {
        size_t cap = l->in_cap ? l->in_cap : LOCAL_STEP;
        while (cap < l->in_len + want)
            cap = cap > SIZE_MAX / 2 ? l->in_len + want : cap * 2;
        uint8_t *p = realloc(l->in, cap);
        if (!p)
            return gc_fail(err, GC_E_NOMEM, "out of memory (%zu bytes of stream input)", cap);
        l->in = p;
        l->in_cap = cap;
    }
    memcpy(l->in + l->in_len, (const uint8_t *)in->src + in->pos, want);
    l->in_len += want;
    in->pos += want;
    l->taken += want;
    return GC_OK;
}

/* ---- the codecs' parts ------------------------------------------------------ */

/* One bzip2 compress part of n bytes: its stream's blocks joined to the output so far. */
static int bz2_part(client_local_stream *l, size_t n, gc_error *err)
{
    bz2_options opt = { .level = l->level, .threads = 0, .job = NULL };
    uint8_t *buf = NULL;
    size_t len = 0;
    uint32_t blocks = 0;
    int rc = bz2_compress_counted(in_bytes(l), n, &opt, &buf, &len, &blocks, err);
    bz2_joint jt;
    if (rc == GC_OK && (rc = bz2_join_next(&l->join, buf, len, blocks, &jt, err)) != GC_OK)
        rc = gc_fail(err, GC_E_INTERNAL, "bzip2 stream part: %s", err->msg);
    if (rc != GC_OK) {
        free(buf);
        return rc;
    }
    out_adopt(l, buf, bz2_join_place(&jt, buf), len);
    consume(l, n);
    return GC_OK;
}

static int bz2_compress_step(client_local_stream *l, bool final, bool flush, bool *made, gc_error *err)
{
    if (final && l->in_len == 0 && l->join.started) { /* the end marker and combined CRC */
        int rc = out_room(l, 16, err);
        if (rc == GC_OK) {
            l->out_len = bz2_join_finish(&l->join, l->out);
            l->out_pos = 0;
            l->done = *made = true;
        }
        return rc;
    }
    size_t n = bz2_stream_cut_compress(&l->walk, l->in, l->in_len, final, flush, l->level);
    if (n == 0 && !(final && l->in_len == 0)) /* a stream of no input still has its one empty part */
        return GC_OK;
    *made = true;
    return bz2_part(l, n, err);
}

static int over_limit(const client_local_stream *l, size_t more, gc_error *err)
{
    if (l->max_output && l->made + more > l->max_output)
        return gc_fail(err, GC_E_LIMIT, "the stream's output passed the limit of %llu bytes",
                       (unsigned long long)l->max_output);
    return GC_OK;
}

/* As many whole blocks of the window as LOCAL_OUT_SOFT of output allows; more = 0 at the end. */
static int bz2_decompress_step(client_local_stream *l, bool final, bool flush, bool *made, gc_error *err)
{
    if (!final && !flush && l->in_len < BZ2_STREAM_DECOMPRESS_PART)
        return GC_OK;
    int rc = out_room(l, LOCAL_OUT_SOFT + BZ2_MAX_BLOCK_OUTPUT, err);
    size_t n = 0, used = 0;
    unsigned bit = l->ds.bit;
    if (rc == GC_OK)
        rc = bz2_decompress_part_into(in_bytes(l), l->in_len, !final, &l->ds, 0, l->out, l->out_cap, 0, NULL, &n,
                                      &used, err);
    if (rc == GC_OK)
        rc = over_limit(l, n, err);
    if (rc != GC_OK)
        return rc;
    l->out_len = n;
    l->out_pos = 0;
    *made = n || used || l->ds.bit != bit || l->ds.garbage || final;
    if (l->ds.garbage) {
        l->garbage = l->done = true;
        l->garbage_at = l->in_base + l->ds.garbage_at;
    }
    consume(l, used);
    if (final && !l->ds.soft_stopped)
        l->done = true;
    return GC_OK;
}

static int rle_compress_step(client_local_stream *l, bool final, bool flush, bool *made, gc_error *err)
{
    size_t part = rle_stream_part_bytes(&l->rle);
    size_t n = l->in_len >= part ? part : final || flush ? l->in_len : 0;
    if (n == 0 && !final)
        return GC_OK;
    *made = true;
    if (!rle_stream_part_frames(n, l->parts)) {
        l->done = true;
        return GC_OK;
    }
    size_t cap = rle_compress_bound(n, &l->rle);
    int rc =
        cap == 0 || cap == SIZE_MAX ? gc_fail(err, GC_E_LIMIT, "input too large for rle") : out_room(l, cap, err);
    if (rc == GC_OK)
        rc = rle_compress(in_bytes(l), n, &l->rle, l->out, l->out_cap, &l->out_len, err);
    if (rc != GC_OK)
        return rc;
    l->out_pos = 0;
    l->parts++;
    consume(l, n);
    l->done = final && l->in_len == 0 && n < part; /* a last part of exactly `part` bytes: one more, empty */
    return GC_OK;
}

/* One whole frame at in[0] (or, where none begins, the bytes there: the engine says what is wrong). */
static int rle_decompress_step(client_local_stream *l, bool final, bool flush, bool *made, gc_error *err)
{
    (void)flush; /* a frame cannot end early */
    uint64_t index_end, len, original;
    rle_frame_extent(l->in, l->in_len, &index_end, &len, &original);
    bool frame = l->in_len < 4 || memcmp(l->in, RLE_MAGIC, 4) == 0;
    size_t n = !frame ? l->in_len : len && len <= l->in_len ? (size_t)len : final ? l->in_len : 0;
    if (final && l->in_len == 0 && l->parts) {
        l->done = *made = true;
        return GC_OK;
    }
    if (n == 0 && !final)
        return GC_OK;
    *made = true;
    size_t size = frame && len && len <= l->in_len && original < SIZE_MAX ? (size_t)original : 0;
    int rc = over_limit(l, size, err);
    if (rc == GC_OK)
        rc = out_room(l, size, err);
    if (rc == GC_OK)
        rc = rle_decompress(in_bytes(l), n, 0, l->out, l->out_cap, &l->out_len, err);
    if (rc != GC_OK)
        return rc;
    l->out_pos = 0;
    l->parts++;
    consume(l, n);
    return GC_OK;
}

/* The next part, made only once the last one's output is all handed out; *made: anything moved. */
static int step(client_local_stream *l, bool final, bool flush, bool *made, gc_error *err)
{
    *made = false;
    l->out_len = l->out_pos = 0;
    if (l->codec == GPUCOMP_CODEC_BZIP2 && l->decompress)
        return bz2_decompress_step(l, final, flush, made, err);
    if (l->codec == GPUCOMP_CODEC_BZIP2)
        return bz2_compress_step(l, final, flush, made, err);
    if (l->decompress)
        return rle_decompress_step(l, final, flush, made, err);
    return rle_compress_step(l, final, flush, made, err);
}

/* ---- the caller's side ------------------------------------------------------- */

static void hand_out(client_local_stream *l, gpucomp_outbuf *out)
{
    size_t n = l->out_len - l->out_pos, room = out->size - out->pos;
    n = n < room ? n : room;
    if (n == 0)
        return;
    memcpy((uint8_t *)out->dst + out->pos, l->out + l->out_pos, n);
    out->pos += n;
    l->out_pos += n;
    l->delivered += n;
}

static int fail(client_local_stream *l, int rc)
{
    l->status = rc;
    l->done = true;
    l->out_len = l->out_pos = 0; /* output of a part that failed is not handed out */
    return rc;
}

int client_local_stream_run(client_local_stream *l, gpucomp_inbuf *in, gpucomp_outbuf *out, gpucomp_end_op op,
                            size_t *pending, gc_error *err)
{
    if (l->status != GC_OK)
        return l->status;
    for (;;) {
        hand_out(l, out);
        if (l->out_pos < l->out_len) /* the caller's buffer is full */
            break;
        if (l->done) {
            in->pos = in->size; /* a complete stream ignores the rest (trailing garbage) */
            break;
        }
        int rc = take_input(l, in, err);
        bool all = in->pos == in->size, made = false;
        if (rc == GC_OK)
            rc = step(l, all && op == GPUCOMP_END, all && op == GPUCOMP_FLUSH, &made, err);
        if (rc != GC_OK)
            return fail(l, rc);
        if (made)
            l->made += l->out_len;
        else if (in->pos == in->size || in_target(l) <= l->in_len)
            break; /* wants more input than the caller has given */
    }
    size_t left = l->out_len - l->out_pos;
    if (pending)
        *pending = left ? left : op == GPUCOMP_END && !l->done ? 1 : 0;
    return GC_OK;
}

uint64_t client_local_stream_bytes_in(const client_local_stream *l)
{
    return l->taken;
}

uint64_t client_local_stream_bytes_out(const client_local_stream *l)
{
    return l->delivered;
}

int client_local_stream_trailing_garbage(const client_local_stream *l, uint64_t *offset)
{
    bool yes = l->done && l->status == GC_OK && l->garbage && l->out_pos == l->out_len;
    if (offset)
        *offset = yes ? l->garbage_at : 0;
    return yes;
}
