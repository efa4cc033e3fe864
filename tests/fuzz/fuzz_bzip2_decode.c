/*
 * fuzz_bzip2_decode.c - libFuzzer target for the bzip2 decoder.
 *
 * Runs bz2_decompress (16 MiB output limit, one thread). Whenever it
 * succeeds, libbz2 (the oracle) must also decode the input - every
 * concatenated stream - to the same bytes. Our decoder may reject inputs
 * libbz2 accepts only past its bounds (docs/BZIP2.md, "Decoder acceptance
 * rules": blocks over 3 MiB compressed), never the other way round.
 *
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -Icommon -Icodecs/rle -Icodecs/bzip2 -Icodecs/bzip2/cpu \
 *   tests/fuzz/fuzz_bzip2_decode.c codecs/bzip2/cpu/bz2_*.c common/gc_status.c \
 *   common/parallel.c -lbz2 -lpthread -o /tmp/fuzz_bz2
 * /tmp/fuzz_bz2 -max_total_time=120 tests/fuzz/corpus/bzip2
 */
#include <bzlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bzip2.h"

#define MAX_OUT (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libbz2 over all concatenated streams; returns 0 and the bytes, or -1. */
static int oracle(const uint8_t *src, size_t n, uint8_t *out, size_t cap, size_t *out_len)
{
    size_t used = 0, len = 0;
    if (n == 0)
        return -1;
    while (used < n) {
        bz_stream s;
        memset(&s, 0, sizeof s);
        if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK)
            return -1;
        s.next_in = (char *)(uintptr_t)(src + used);
        s.avail_in = (unsigned)(n - used);
        int ret;
        do {
            s.next_out = (char *)out + len;
            s.avail_out = (unsigned)(cap - len);
            ret = BZ2_bzDecompress(&s);
            len = cap - s.avail_out;
        } while (ret == BZ_OK && s.avail_in > 0 && len < cap);
        used = n - s.avail_in;
        BZ2_bzDecompressEnd(&s);
        if (ret != BZ_STREAM_END)
            return -1;
    }
    *out_len = len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    gc_error err;
    int rc = bz2_decompress(data, size, MAX_OUT, 1, &out, &out_len, &err);
    if (rc != GC_OK) {
        if (rc != GC_E_CORRUPT && rc != GC_E_TRUNCATED && rc != GC_E_CRC && rc != GC_E_LIMIT)
            abort(); /* NOMEM/INTERNAL/... on a 16 MiB budget is a bug */
        return 0;
    }
    uint8_t *ref = malloc(MAX_OUT + 1);
    size_t ref_len = 0;
    if (!ref)
        abort();
    if (oracle(data, size, ref, MAX_OUT + 1, &ref_len) != 0)
        abort(); /* we accepted what libbz2 rejects */
    if (ref_len != out_len || memcmp(ref, out, out_len) != 0)
        abort(); /* different bytes */
    free(ref);
    free(out);
    return 0;
}
