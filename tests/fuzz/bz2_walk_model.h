/*
 * bz2_walk_model.h - the CPU engine's first decoder stage standing in for
 * the GPU's Huffman stage (codecs/bzip2/cuda/dec/bz2_dec_huff.cu) in the framing
 * walk's fuzzer (fuzz_bz2_dec_walk.cc): both apply the checks of
 * codecs/bzip2/cpu/bz2_block_decode.c, so a candidate's verdict, length, origPtr,
 * CRC, randomised bit and end are the same.
 */
#ifndef GC_BZ2_WALK_MODEL_H
#define GC_BZ2_WALK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bz2_walk_cand {
    int status; /* 0 ok, 1 truncated, 2 any other problem */
    uint32_t n, orig, crc, rand;
    uint64_t end_bit;
} bz2_walk_cand;

/* The block candidate whose magic starts at bit `bit` of src[0..len). */
void bz2_walk_model(const uint8_t *src, size_t len, uint64_t bit, bz2_walk_cand *out);

#ifdef __cplusplus
}
#endif

#endif
