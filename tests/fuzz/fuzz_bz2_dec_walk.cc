/*
 * fuzz_bz2_dec_walk.cc - libFuzzer target for the GPU bzip2 decoder's
 * framing walk (codecs/bzip2/cuda/dec/bz2_dec_walk.cu), which runs on the host.
 *
 * Every bit offset of the block magic is a candidate; the CPU engine's
 * first stage stands in for the device's (bz2_walk_model.c) and the walk
 * takes them in waves of three, as the driver does with thousands, so the
 * resumption between waves is exercised. Then the CPU engine decodes the
 * input: a stream it decodes, the walk must accept (or hand back with
 * GC_E_LIMIT, too many false candidates); and the walk never asks for a
 * wave it has already had. ASan and UBSan watch the walk's reads.
 *
 * Built and run by scripts/fuzz.sh (clang++, no CUDA needed).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "bz2_dec_walk.cuh"
extern "C" {
#include "bz2_walk_model.h"
int bz2_decompress(const uint8_t *src, size_t src_len, size_t max_output, unsigned threads, uint8_t **dst,
                   size_t *dst_len, gc_error *err);
}

using namespace gcgpu;

static const uint32_t kWave = 3;

static uint64_t bits_at(const uint8_t *p, size_t len, uint64_t bit, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++, bit++) {
        uint64_t byte = bit / 8;
        v = v << 1 | (byte < len ? (p[byte] >> (7 - bit % 8)) & 1u : 0u);
    }
    return v;
}

static DecCand candidate(const uint8_t *p, size_t len, uint64_t bit)
{
    bz2_walk_cand m;
    bz2_walk_model(p, len, bit, &m);
    DecCand c;
    memset(&c, 0, sizeof c);
    c.status = m.status == 0 ? kDecOk : m.status == 1 ? kDecTruncated : kDecBadCode;
    c.n = m.n;
    c.orig = m.orig;
    c.crc = m.crc;
    c.rand = m.rand;
    c.end_bit = m.end_bit;
    for (int k = 0; k < 16; k++)
        c.tail[k] = (uint8_t)bits_at(p, len, m.end_bit + 8u * (uint64_t)k, 8);
    return c;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    std::vector<uint64_t> cand;
    for (uint64_t bit = 0; bit + 48 <= (uint64_t)size * 8; bit++)
        if (bits_at(data, size, bit, 48) == BZ2_BLOCK_MAGIC)
            cand.push_back(bit);
    DecWalk w;
    w.len_bits = (uint64_t)size * 8;
    DecPeek peek = [&](uint64_t at, uint8_t out[16], gc_error *) {
        memset(out, 0, 16);
        for (uint64_t k = 0; k < 16 && at + k < size; k++)
            out[k] = data[at + k];
        return (int)GC_OK;
    };
    std::vector<DecAccepted> acc;
    std::vector<DecCand> res;
    gc_error err;
    int rc = GC_OK;
    uint32_t n = (uint32_t)cand.size(), c0 = 0;
    for (;;) {
        uint32_t c1 = c0 + kWave < n ? c0 + kWave : n, next = UINT32_MAX;
        res.clear();
        for (uint32_t i = c0; i < c1; i++)
            res.push_back(candidate(data, size, cand[i]));
        rc = bz2_dec_walk(w, cand.data(), n, c0, c1, res.data(), peek, acc, &next, &err);
        if (rc != GC_OK || w.done)
            break;
        if (next == UINT32_MAX || next < c1)
            abort(); /* the driver would fail the job as an internal error */
        c0 = next;
    }
    uint8_t *out = nullptr;
    size_t out_len = 0;
    gc_error cpu_err;
    int cpu = bz2_decompress(data, size, 16u << 20, 1, &out, &out_len, &cpu_err);
    free(out);
    if (cpu == GC_OK && rc != GC_OK && rc != GC_E_LIMIT)
        abort(); /* the walk refused a stream the CPU engine decodes */
    return 0;
}
