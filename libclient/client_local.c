/*
 * client_local.c - requests run in this process: the codecs' CPU engine
 * (codecs/libgccodecs.la), for clients from gpucomp_open with no daemon to
 * use and for requests a daemon could not take (client.c decides when).
 * The same codec functions the daemon's CPU workers call, with the same
 * options, so the output is what a CPU daemon would send.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdint.h>
#include <stdlib.h>

#include "bzip2.h"
#include "client_internal.h"
#include "rle.h"

static int rle_compress_local(const gpucomp_options *o, const uint8_t *in, size_t in_len, uint8_t **out,
                              size_t *out_len, gc_error *err)
{
    rle_options want = { .width = o->element_width, .chunk_size = o->chunk_size, .threads = 0 }, opt;
    int rc = rle_options_resolve(&want, &opt, err);
    if (rc != GC_OK)
        return rc;
    size_t cap = rle_compress_bound(in_len, &opt);
    if (cap == 0 || cap == SIZE_MAX)
        return gc_fail(err, GC_E_LIMIT, "input too large for rle");
    if (!(*out = malloc(cap)))
        return gc_fail(err, GC_E_NOMEM, "out of memory (%zu bytes for the output)", cap);
    return rle_compress(in, in_len, &opt, *out, cap, out_len, err);
}

static int rle_decompress_local(const gpucomp_options *o, const uint8_t *in, size_t in_len, uint8_t **out,
                                size_t *out_len, gc_error *err)
{
    /* one or more frames back to back (docs/FORMAT.md, "Concatenated frames") */
    uint64_t size;
    int rc = rle_stream_decoded_size(in, in_len, &size, NULL, err);
    if (rc != GC_OK)
        return rc;
    if (o->max_output && size > o->max_output)
        return gc_fail(err, GC_E_LIMIT, "output of %llu bytes is over the limit of %llu", (unsigned long long)size,
                       (unsigned long long)o->max_output);
    if (size >= SIZE_MAX)
        return gc_fail(err, GC_E_LIMIT, "output of %llu bytes does not fit in memory", (unsigned long long)size);
    if (!(*out = malloc(size ? (size_t)size : 1)))
        return gc_fail(err, GC_E_NOMEM, "out of memory (%llu bytes for the output)", (unsigned long long)size);
    return rle_decompress(in, in_len, 0, *out, (size_t)size, out_len, err);
}

static int run(bool decompress, const gpucomp_options *o, const uint8_t *in, size_t in_len, uint8_t **out,
               size_t *out_len, gc_error *err)
{
    if (o->codec == GPUCOMP_CODEC_BZIP2 && !decompress) {
        bz2_options opt = { .level = o->level, .threads = 0, .job = NULL };
        return bz2_compress(in, in_len, &opt, out, out_len, err);
    }
    if (o->codec == GPUCOMP_CODEC_BZIP2)
        return bz2_decompress(in, in_len, (size_t)o->max_output, 0, out, out_len, err);
    if (o->codec == GPUCOMP_CODEC_RLE && !decompress)
        return rle_compress_local(o, in, in_len, out, out_len, err);
    if (o->codec == GPUCOMP_CODEC_RLE)
        return rle_decompress_local(o, in, in_len, out, out_len, err);
    return gc_fail(err, GC_E_INVALID, "unknown codec %d", (int)o->codec);
}

int client_local_run(bool decompress, const gpucomp_options *o, const uint8_t *in, size_t in_len, uint8_t **out,
                     size_t *out_len, gc_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (o->level < 0 || o->level > 9)
        return gc_fail(err, GC_E_INVALID, "level %d is out of range (1..9, or 0 for the default)", o->level);
    int rc = run(decompress, o, in ? in : (const uint8_t *)"", in_len, out, out_len, err);
    if (rc == GC_OK && !*out && !(*out = malloc(1))) /* never NULL on success, as the daemon's answers */
        rc = gc_fail(err, GC_E_NOMEM, "out of memory");
    if (rc != GC_OK) {
        free(*out);
        *out = NULL;
        *out_len = 0;
    }
    return rc;
}

size_t client_local_bound(const gpucomp_options *o, size_t len)
{
    if (o->codec == GPUCOMP_CODEC_BZIP2) /* its bound grows by about 17/8 per byte */
        return len > SIZE_MAX / 4 ? 0 : bz2_compress_bound(len, o->level);
    if (o->codec != GPUCOMP_CODEC_RLE)
        return 0;
    rle_options want = { .width = o->element_width, .chunk_size = o->chunk_size, .threads = 0 }, opt;
    if (rle_options_resolve(&want, &opt, NULL) != GC_OK)
        return 0;
    size_t b = rle_compress_bound(len, &opt);
    return b == SIZE_MAX ? 0 : b;
}
