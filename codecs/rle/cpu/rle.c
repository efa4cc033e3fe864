/*
 * rle.c - the `rle` codec, CPU backend (the reference for docs/FORMAT.md):
 * whole frames, their chunks coded in parallel on gc_parallel_for, and
 * streams of frames back to back (what rle_decompress takes: docs/FORMAT.md,
 * "Concatenated frames"). The chunk coders are rle_encode_chunk.c and
 * rle_decode_chunk.c, the frame header and index rle_frame.c (rle_internal.h).
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"
#include "rle_internal.h"

/* ---- whole frames --------------------------------------------------------- */

/* Bytes of chunk i of a body of body_len bytes. */
static size_t chunk_len_at(uint64_t body_len, uint32_t chunk_size, size_t i)
{
    uint64_t start = (uint64_t)i * chunk_size;
    uint64_t left = body_len - start;
    return (size_t)(left < chunk_size ? left : chunk_size);
}

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
    size_t size = rle_encode_chunk(job->src + i * (size_t)job->opt.chunk_size, len, job->opt.width, record);
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

int rle_compress(const uint8_t *src, size_t src_len, const rle_options *opt, uint8_t *dst, size_t dst_cap,
                 size_t *dst_len, gc_error *err)
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
        return gc_fail(err, GC_E_LIMIT, "rle: %zu bytes of input is too large for one frame", src_len);
    if (dst_cap < bound)
        return gc_fail(err, GC_E_LIMIT, "rle: output buffer of %zu bytes is below rle_compress_bound() = %zu",
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
    int rc = rle_decode_record(job->records + job->offsets[i], job->offsets[i + 1] - job->offsets[i], info->width,
                               job->dst + i * (size_t)info->chunk_size,
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
static int decode_chunks(const uint8_t *src, size_t src_len, const rle_frame_info *info, unsigned threads,
                         uint8_t *dst, gc_error *err)
{
    size_t n = info->chunk_count;
    uint32_t *index = malloc(n ? n * sizeof *index : 1);
    uint64_t *offsets = malloc((n + 1) * sizeof *offsets);
    if (!index || !offsets) {
        free(index);
        free(offsets);
        return gc_fail(err, GC_E_NOMEM, "rle: no memory for a %u-chunk index", (unsigned)info->chunk_count);
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
    decode_job job = { .records = src + info->header_size, .offsets = offsets, .info = info, .dst = dst };
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
static int parse_nth(const uint8_t *src, size_t src_len, size_t frame, rle_frame_info *info, size_t *frame_len,
                     gc_error *err)
{
    if (frame > 1 && memcmp(src, RLE_MAGIC, src_len < 4 ? src_len : 4) != 0)
        return gc_fail(err, GC_E_CORRUPT,
                       "rle: frame %zu: %zu trailing byte%s after frame %zu %s not an rle frame "
                       "(bad magic)",
                       frame, src_len, src_len == 1 ? "" : "s", frame - 1, src_len == 1 ? "is" : "are");
    int rc = rle_frame_parse_prefix(src, src_len, info, frame_len, err);
    return rc == GC_OK ? rc : name_frame(err, frame, rc);
}

int rle_stream_decoded_size(const uint8_t *src, size_t src_len, uint64_t *size, size_t *frames, gc_error *err)
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
            return gc_fail(err, GC_E_LIMIT,
                           "rle: frame %zu: the frames decode to more than 2^64 "
                           "bytes",
                           n);
        off += frame_len;
    } while (off < src_len);
    *size = total;
    if (frames)
        *frames = n;
    return GC_OK;
}

/* Decode the one frame src[0..frame_len) that rle_frame_parse_prefix described in *info. */
static int decode_frame(const uint8_t *src, size_t frame_len, const rle_frame_info *info, unsigned threads,
                        uint8_t *dst, gc_error *err)
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
int rle_decompress(const uint8_t *src, size_t src_len, unsigned threads, uint8_t *dst, size_t dst_cap,
                   size_t *dst_len, gc_error *err)
{
    uint64_t total;
    size_t frames;
    int rc = rle_stream_decoded_size(src, src_len, &total, &frames, err);
    if (rc != GC_OK)
        return rc;
    if (total > dst_cap) {
        if (frames == 1)
            return gc_fail(err, GC_E_LIMIT, "rle: frame decodes to %llu bytes, output buffer holds %zu",
                           (unsigned long long)total, dst_cap);
        return gc_fail(err, GC_E_LIMIT, "rle: %zu frames decode to %llu bytes, output buffer holds %zu", frames,
                       (unsigned long long)total, dst_cap);
    }
    size_t off = 0, out = 0;
    for (size_t n = 1; off < src_len || n == 1; n++) {
        rle_frame_info info;
        size_t frame_len;
        rc = parse_nth(src + off, src_len - off, n, &info, &frame_len, err);
        if (rc != GC_OK)
            return rc;
        if (info.original_size > dst_cap - out)
            return name_frame(err, n,
                              gc_fail(err, GC_E_LIMIT,
                                      "rle: frame decodes to %llu bytes, output buffer "
                                      "has %zu left",
                                      (unsigned long long)info.original_size, dst_cap - out));
        rc = decode_frame(src + off, frame_len, &info, threads, dst ? dst + out : dst, err);
        if (rc != GC_OK)
            return name_frame(err, n, rc);
        off += frame_len;
        out += (size_t)info.original_size;
    }
    *dst_len = out;
    return GC_OK;
}
