/*
 * cli_local.c - gpucomp without gpucompd: the CPU codecs of
 * codecs/libgccodecs.la run in this process (--local, or the announced
 * fallback when no daemon answers). The same codec functions the daemon's
 * CPU workers call, with the same options, so the output bytes are the
 * daemon's (bzip2's and rle's outputs do not depend on the thread count).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bzip2.h"
#include "gc_clock.h"
#include "gc_status.h"
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
    *out = malloc(cap ? cap : 1);
    if (!*out)
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
    size_t cap = (size_t)size;
    *out = malloc(cap ? cap : 1);
    if (!*out)
        return gc_fail(err, GC_E_NOMEM, "out of memory (%zu bytes for the output)", cap);
    return rle_decompress(in, in_len, 0, *out, cap, out_len, err);
}

int cli_local_request(cli_session *s, bool decompress, const gpucomp_options *o, const uint8_t *in, size_t in_len,
                      cli_result *r)
{
    gc_error err;
    gc_error_clear(&err);
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc;
    uint64_t t0 = gc_now_ns();
    if (o->codec == GPUCOMP_CODEC_BZIP2 && !decompress) {
        bz2_options opt = { .level = o->level, .threads = 0, .job = NULL };
        rc = bz2_compress(in, in_len, &opt, &out, &out_len, &err);
    } else if (o->codec == GPUCOMP_CODEC_BZIP2) {
        rc = bz2_decompress(in, in_len, (size_t)o->max_output, 0, &out, &out_len, &err);
    } else if (o->codec == GPUCOMP_CODEC_RLE && !decompress) {
        rc = rle_compress_local(o, in, in_len, &out, &out_len, &err);
    } else if (o->codec == GPUCOMP_CODEC_RLE) {
        rc = rle_decompress_local(o, in, in_len, &out, &out_len, &err);
    } else {
        rc = gc_fail(&err, GC_E_UNSUPPORTED, "unknown codec %d", (int)o->codec);
    }
    r->seconds = (double)(gc_now_ns() - t0) / 1e9;
    /* gc_status and the library's codes are the same numbers (gpucomp.h, gc_status.h). */
    snprintf(s->local_error, sizeof s->local_error, "%s", rc == GC_OK ? "" : err.msg);
    if (rc != GC_OK) {
        free(out);
        return rc;
    }
    r->data = out; /* gpucomp_free() is free() */
    r->len = out_len;
    r->backend = GPUCOMP_BACKEND_CPU;
    return GPUCOMP_OK;
}
