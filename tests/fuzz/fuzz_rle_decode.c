/*
 * fuzz_rle_decode.c - libFuzzer target for the rle frame decoder.
 *
 * Any input must parse and decode without crashing or touching memory out
 * of bounds. When a frame decodes, its output is re-encoded with the frame's
 * own options and decoded again: that must give the same bytes back.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Ikernels -Ikernels/cpu \
 *   tests/fuzz/fuzz_rle_decode.c kernels/cpu/rle.c kernels/cpu/crc32c.c \
 *   kernels/gc_status.c kernels/cpu/parallel.c -lpthread -o fuzz_rle
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
    rle_frame_info info;
    gc_error err;
    if (rle_frame_parse(data, size, &info, &err) != GC_OK || info.original_size > FUZZ_MAX_OUTPUT)
        return;
    size_t cap = (size_t)info.original_size, out_len;
    uint8_t *out = malloc(cap ? cap : 1);
    if (!out)
        abort();
    if (rle_decompress(data, size, 1, out, cap, &out_len, &err) == GC_OK) {
        if (out_len != cap)
            abort();
        check_reencodes(out, out_len, &info);
    }
    free(out);
}

/*
 * Mutated inputs almost never keep a valid header CRC, which would stop the
 * fuzzer at the header. Decoding a second copy with the CRC recomputed lets
 * it reach the index and chunk record checks (chunk CRCs are checked after
 * the expansion they protect, so those paths run regardless).
 */
static void decode_resealed(const uint8_t *data, size_t size)
{
    if (size < RLE_HEADER_FIXED)
        return;
    uint32_t chunk_count;
    memcpy(&chunk_count, data + 20, 4);
    uint64_t crc_at = RLE_HEADER_FIXED + 4 * (uint64_t)chunk_count;
    if (crc_at + 4 > size)
        return;
    uint8_t *copy = malloc(size);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    uint32_t crc = crc32c(copy, (size_t)crc_at);
    memcpy(copy + crc_at, &crc, 4);
    decode_one(copy, size);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_one(data, size);
    decode_resealed(data, size);
    return 0;
}
