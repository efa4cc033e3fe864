/* codec_rle.c - the rle codec's entry in the codec table (docs/FORMAT.md). */
#include "codec.h"

#include <stdlib.h>
#include <string.h>

#include "fd_payload.h"
#include "gpu.h"
#include "rle.h"
#include "rle_format.h"
#include "stream.h"

static rle_options options_of(const gcd_request *r, unsigned threads)
{
    return (rle_options){ .width = r->element_width, .chunk_size = r->chunk_size, .threads = threads };
}

static int check(const gcd_request *r, gc_error *err)
{
    if (r->op != GPUCOMP__OP__OP_COMPRESS)
        return GC_OK; /* a frame carries its own options */
    rle_options in = options_of(r, 1), out;
    return rle_options_resolve(&in, &out, err);
}

/*
 * Peek at the frame at p (avail bytes of the input from it): its length
 * (header, index and the records the index adds up) and its declared
 * original size. False when its header and index are not all there. A
 * length past avail only says so (the sum stops there). Reads every byte
 * once and validates nothing: the engine does (docs/FORMAT.md).
 */
static bool peek_frame(const uint8_t *p, uint64_t avail, uint64_t *len, uint64_t *original)
{
    uint64_t index_end;
    rle_frame_extent(p, (size_t)avail, &index_end, len, original);
    return *len != 0;
}

/*
 * An rle decompress moves the original size its headers declare
 * (docs/FORMAT.md): the sum over the frames back to back whose headers are
 * there, as far as they go.
 */
static uint64_t work_bytes(const gcd_request *r)
{
    uint64_t bytes = r->total_size, declared = 0, off = 0, len, original;
    if (r->op != GPUCOMP__OP__OP_DECOMPRESS || !r->input)
        return bytes;
    while (off < r->total_size && peek_frame(r->input + off, r->total_size - off, &len, &original)) {
        declared = declared + original < declared ? UINT64_MAX : declared + original;
        off += len; /* len >= a header: the walk ends */
    }
    return declared > bytes ? declared : bytes;
}

static int compress(gcd_request *r, unsigned threads)
{
    rle_options opt = options_of(r, threads);
    size_t cap = rle_compress_bound(r->total_size, &opt);
    int rc = gcd_request_alloc_output(r, cap, &r->error);
    if (rc != GC_OK)
        return rc;
    return rle_compress(r->input, r->total_size, &opt, r->output, cap, &r->output_len, &r->error);
}

/*
 * The output size the frames declare (one or more back to back:
 * docs/FORMAT.md, "Concatenated frames"), within the request's max_output;
 * an error in r->error.
 */
static int decoded_size(gcd_request *r, size_t *size)
{
    uint64_t total;
    size_t frames;
    int rc = rle_stream_decoded_size(r->input, r->total_size, &total, &frames, &r->error);
    if (rc != GC_OK)
        return rc;
    if (total > r->max_output) {
        if (frames == 1)
            return gc_fail(&r->error, GC_E_LIMIT,
                           "rle: frame would decompress to %llu bytes, over the limit of %llu",
                           (unsigned long long)total, (unsigned long long)r->max_output);
        return gc_fail(&r->error, GC_E_LIMIT,
                       "rle: %zu frames would decompress to %llu bytes, over the limit of %llu", frames,
                       (unsigned long long)total, (unsigned long long)r->max_output);
    }
    if (total > SIZE_MAX)
        return gc_fail(&r->error, GC_E_LIMIT, "rle: output of %llu bytes does not fit in memory",
                       (unsigned long long)total);
    *size = (size_t)total;
    return GC_OK;
}

static int decompress(gcd_request *r, unsigned threads)
{
    size_t size = 0;
    int rc = decoded_size(r, &size);
    if (rc == GC_OK)
        rc = gcd_request_alloc_output(r, size, &r->error);
    if (rc != GC_OK)
        return rc;
    return rle_decompress(r->input, r->total_size, threads, r->output, size, &r->output_len, &r->error);
}

static int run_cpu(gcd_request *r, unsigned threads)
{
    return r->op == GPUCOMP__OP__OP_COMPRESS ? compress(r, threads) : decompress(r, threads);
}

/*
 * Compress, and a decompress of exactly one frame: the GPU decoder takes one
 * frame per job, so input with more after its first frame (concatenated
 * frames, or trailing bytes) runs on the CPU engine (docs/DECISIONS.md, "rle
 * format"). A peek at the first frame's index: a frame the peek
 * cannot size (no input yet, a short header) goes as before, and the
 * engine's checks judge it.
 */
static bool gpu_takes(const gcd_request *r)
{
    if (r->op == GPUCOMP__OP__OP_COMPRESS)
        return true;
    if (r->op != GPUCOMP__OP__OP_DECOMPRESS)
        return false;
    uint64_t len, original;
    if (!r->input || !peek_frame(r->input, r->total_size, &len, &original))
        return true;
    return len >= r->total_size;
}

static int gpu_job(gcd_request *r, gc_gpu_job *job, size_t *out_cap)
{
    job->codec = GC_GPU_CODEC_RLE;
    if (r->op == GPUCOMP__OP__OP_COMPRESS) {
        job->op = GC_GPU_ENCODE;
        job->opt.rle = options_of(r, 1);
        *out_cap = rle_compress_bound(r->total_size, &job->opt.rle);
        return GC_OK;
    }
    job->op = GC_GPU_DECODE;
    return decoded_size(r, out_cap);
}

/* ---- streams: one frame per part (docs/FORMAT.md, "Concatenated frames") ---- */

typedef struct rle_stream {
    size_t part; /* compress: input bytes per frame */
} rle_stream;

static void *stream_open(const gcd_request *proto, gc_error *err)
{
    rle_stream *st = calloc(1, sizeof *st);
    if (!st) {
        gc_fail(err, GC_E_NOMEM, "out of memory");
        return NULL;
    }
    if (proto->op == GPUCOMP__OP__OP_COMPRESS) {
        rle_options in = options_of(proto, 1), opt;
        if (rle_options_resolve(&in, &opt, err) != GC_OK) {
            free(st);
            return NULL;
        }
        st->part = rle_stream_part_bytes(&opt);
    }
    return st;
}

/*
 * The length of the frame at buf from its header and index, or 0 while they
 * have not all arrived. Only a peek: the engine validates the frame (CRCs,
 * layout) when it decodes it, and a frame this peek misreads fails there.
 */
static int frame_length(const uint8_t *buf, size_t avail, uint64_t *len, gc_error *err)
{
    uint64_t index_end, total, original;
    rle_frame_extent(buf, avail, &index_end, &total, &original);
    uint64_t count = index_end ? (index_end - RLE_INDEX_OFFSET - RLE_HEADER_CRC) / RLE_INDEX_ENTRY : 0;
    *len = 0;
    if (index_end > GCD_STREAM_WINDOW)
        return gc_fail(err, GC_E_LIMIT,
                       "rle: a frame of %llu chunks has an index larger than a stream's "
                       "window of %llu bytes: decompress it with a whole-buffer request",
                       (unsigned long long)count, (unsigned long long)GCD_STREAM_WINDOW);
    if (total > GCD_STREAM_WINDOW)
        return gc_fail(err, GC_E_LIMIT,
                       "rle: a frame of %llu bytes is larger than a stream's window of %llu "
                       "bytes: decompress it with a whole-buffer request",
                       (unsigned long long)total, (unsigned long long)GCD_STREAM_WINDOW);
    *len = total;
    return GC_OK;
}

/*
 * Compress: parts of st->part bytes, the last one shorter. Decompress: one
 * whole frame per part; bytes that do not start a frame go to the engine as
 * they are, which says what is wrong with them.
 */
/* A compress cut counts bytes; only a decompress cut looks at them. */
static bool stream_cut_reads(const gcd_request *proto)
{
    return proto->op != GPUCOMP__OP__OP_COMPRESS;
}

static int stream_cut(void *state, const gcd_request *proto, const uint8_t *buf, size_t avail, bool final,
                      bool flush, size_t *take, gc_error *err)
{
    rle_stream *st = state;
    *take = 0;
    if (proto->op == GPUCOMP__OP__OP_COMPRESS) {
        *take = avail >= st->part ? st->part : final || flush ? avail : 0;
        return GC_OK;
    }
    /* Decompress: a flush cannot end a frame early; only whole frames go. */
    if (avail >= 4 && memcmp(buf, RLE_MAGIC, 4) != 0) {
        *take = avail;
        return GC_OK;
    }
    uint64_t len;
    int rc = frame_length(buf, avail, &len, err);
    if (rc != GC_OK)
        return rc;
    if (len && len <= avail)
        *take = (size_t)len;
    else if (final)
        *take = avail;
    return GC_OK;
}

/* A file's frame header and index are read with one small read, mostly: larger indexes take a second. */
#define STREAM_FIRST_PEEK ((size_t)4096)

/*
 * A file stream's cut: the same parts, but a decompress sees only a frame's
 * header and index (what frame_length reads), never the frame.
 */
static int stream_cut_file(void *state, const gcd_request *proto, const uint8_t *head, size_t head_at,
                           size_t head_len, size_t left, size_t *take, size_t *see_from, size_t *see_to,
                           gc_error *err)
{
    rle_stream *st = state;
    size_t most = left < GCD_STREAM_WINDOW ? left : (size_t)GCD_STREAM_WINDOW;
    (void)head_at; /* always 0: it asks to see the head only */
    *take = *see_from = *see_to = 0;
    if (proto->op == GPUCOMP__OP__OP_COMPRESS) {
        *take = left < st->part ? left : st->part;
        return GC_OK;
    }
    uint64_t len = 0;
    bool frame = head_len < 4 || memcmp(head, RLE_MAGIC, 4) == 0;
    int rc = frame ? frame_length(head, head_len, &len, err) : GC_OK;
    if (rc != GC_OK)
        return rc;
    if (!frame || head_len == left) /* not a frame, or cut short: the engine says what is wrong */
        *take = most;
    else if (len)
        *take = len < left ? (size_t)len : left;
    else { /* the index is known once the fixed header is: ask for all of it */
        size_t want = head_len < RLE_HEADER_FIXED
                          ? STREAM_FIRST_PEEK
                          : rle_header_size_for(rle_get_le32(head + RLE_CHUNK_COUNT_OFFSET));
        *see_to = want < left ? want : left;
    }
    return GC_OK;
}

/* An empty compress part after others adds no frame (rle_stream_part_frames says why). */
static int stream_emit(void *state, gcd_stream *s, gcd_request *part, gc_error *err)
{
    (void)state;
    (void)err;
    if (part->op == GPUCOMP__OP__OP_COMPRESS && !rle_stream_part_frames(part->total_size, part->part_seq))
        return GC_OK;
    gcd_stream_put_output(s, part);
    return GC_OK;
}

static const gcd_stream_ops stream_ops = {
    .open = stream_open,
    .cut = stream_cut,
    .cut_reads = stream_cut_reads,
    .cut_file = stream_cut_file,
    .emit = stream_emit,
};

const gcd_codec gcd_codec_rle = {
    .id = GPUCOMP__CODEC__CODEC_RLE,
    .name = "rle",
    .check = check,
    .work_bytes = work_bytes,
    .run_cpu = run_cpu,
    .gpu_takes = gpu_takes,
    .gpu_job = gpu_job,
    .stream = &stream_ops,
};
