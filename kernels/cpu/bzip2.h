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

#include <stddef.h>
#include <stdint.h>

#include "gc_job.h"
#include "gc_status.h"

typedef struct bz2_options {
    int level;        /* 1..9: block size level*100k (0 = 9) */
    unsigned threads; /* blocks compressed/decompressed in parallel (0 = all CPUs) */
    const gc_job *job; /* cancellation (GC_E_IO "cancelled"); NULL: none */
} bz2_options;

/* Largest stream bz2_compress can produce for src_len bytes. */
size_t bz2_compress_bound(size_t src_len, int level);

/*
 * Compress src into one standard bzip2 stream, malloc'd into *dst (free()).
 * The output is identical for every thread count.
 */
int bz2_compress(const uint8_t *src, size_t src_len, const bz2_options *opt,
                 uint8_t **dst, size_t *dst_len, gc_error *err);

/*
 * Decompress one or more concatenated bzip2 streams, malloc'd into *dst.
 * max_output bounds the decompressed size (0 = no limit; exceeding it is
 * GC_E_LIMIT). Corrupt input: GC_E_CORRUPT / GC_E_TRUNCATED / GC_E_CRC with
 * a message naming the block and the problem.
 */
int bz2_decompress(const uint8_t *src, size_t src_len, size_t max_output,
                   unsigned threads, uint8_t **dst, size_t *dst_len, gc_error *err);

/*
 * bz2_decompress under a job: cancellation is checked between blocks
 * (GC_E_IO), and the output buffer grows only as job->may_grow allows
 * (GC_E_LIMIT otherwise).
 */
int bz2_decompress_job(const uint8_t *src, size_t src_len, size_t max_output, unsigned threads,
                       const gc_job *job, uint8_t **dst, size_t *dst_len, gc_error *err);

#endif
