/*
 * fuzz_rle_decode.c - libFuzzer target for the rle frame decoder.
 *
 * Any input must parse and decode without crashing or touching memory out
 * of bounds. Input is one or more frames back to back (docs/FORMAT.md,
 * "Concatenated frames"). When it decodes, each frame's output is re-encoded
 * with that frame's own options and decoded again: that must give the same
 * bytes back, and the frames' outputs in order must be the whole output.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Icommon -Icodecs/rle -Icodecs/bzip2 -Icodecs/bzip2/cpu \
 *   tests/fuzz/fuzz_rle_decode.c codecs/rle/cpu/rle*.c common/crc32c.c \
 *   common/gc_status.c common/parallel.c -lpthread -o fuzz_rle
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "rle.h"

/* Frames claiming more than this are only parsed, so a 40-byte input cannot
 * make the fuzzer allocate gigabytes. */
#define FUZZ_MAX_OUTPUT (64u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reencodes(const uint8_t *out, size_t out_len, const rle_frame_info *info)
{
    rle_options opt = { info->width, info->chunk_size, 1 };
    size_t bound = rle_compress_bound(out_len, &opt), frame_len;
    uint8_t *frame = malloc(bound);
    uint8_t *back = malloc(out_len ? out_len : 1);
    gc_error err;
    size_t back_len;
    if (!frame || !back)
        abort();
    if (rle_compress(out, out_len, &opt, frame, bound, &frame_len, &err) != GC_OK)
        abort();
    if (rle_decompress(frame, frame_len, 1, back, out_len, &back_len, &err) != GC_OK)
        abort();
    if (back_len != out_len || (out_len && memcmp(back, out, out_len) != 0))
        abort();
    free(back);
    free(frame);
}

static void decode_one(const uint8_t *data, size_t size)
{
    gc_error err;
    uint64_t total;
    size_t frames;
    if (rle_stream_decoded_size(data, size, &total, &frames, &err) != GC_OK || total > FUZZ_MAX_OUTPUT)
        return;
    size_t cap = (size_t)total, out_len;
    uint8_t *out = malloc(cap ? cap : 1);
    if (!out)
        abort();
    if (rle_decompress(data, size, 1, out, cap, &out_len, &err) == GC_OK) {
        if (out_len != cap)
            abort();
        /* frame by frame: each decodes alone to its part of the output */
        size_t off = 0, at = 0, n = 0;
        while (off < size) {
            rle_frame_info info;
            size_t frame_len, part_len;
            if (rle_frame_parse_prefix(data + off, size - off, &info, &frame_len, &err) != GC_OK ||
                info.original_size > cap - at)
                abort();
            uint8_t *part = malloc(info.original_size ? (size_t)info.original_size : 1);
            if (!part)
                abort();
            if (rle_decompress(data + off, frame_len, 1, part, (size_t)info.original_size, &part_len, &err) !=
                    GC_OK ||
                part_len != info.original_size || (part_len && memcmp(part, out + at, part_len) != 0))
                abort();
            free(part);
            check_reencodes(out + at, part_len, &info);
            off += frame_len;
            at += part_len;
            n++;
        }
        if (at != out_len || n != frames)
            abort();
    }
    free(out);
}

/*
 * Mutated inputs almost never keep a valid header CRC, which would stop the
 * fuzzer at the header. Decoding a second copy with every frame's header CRC
 * recomputed (frames found by their index sums, as far as they go) lets it
 * reach the index and chunk record checks, and the frames after the first
 * (chunk CRCs are checked after the expansion they protect, so those paths
 * run regardless).
 */
static void decode_resealed(const uint8_t *data, size_t size)
{
    if (size < RLE_HEADER_FIXED)
        return;
    uint8_t *copy = malloc(size);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    uint64_t off = 0;
    while (size - off >= RLE_HEADER_FIXED) {
        uint8_t *f = copy + off;
        uint32_t chunk_count;
        memcpy(&chunk_count, f + 20, 4);
        uint64_t crc_at = RLE_HEADER_FIXED + 4 * (uint64_t)chunk_count;
        if (crc_at + 4 > size - off)
            break;
        uint32_t crc = crc32c(f, (size_t)crc_at);
        memcpy(f + crc_at, &crc, 4);
        uint64_t len = crc_at + 4;
        for (uint32_t i = 0; i < chunk_count; i++) {
            uint32_t entry;
            memcpy(&entry, f + RLE_HEADER_FIXED + 4 * (size_t)i, 4);
            len += entry;
        }
        if (len > size - off)
            break;
        off += len;
    }
    decode_one(copy, size);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_one(data, size);
    decode_resealed(data, size);
    return 0;
}
