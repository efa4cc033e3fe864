/*
 * bz2_mtf.c - move-to-front over the block's used bytes, with runs of
 * front hits (MTF index 0) coded as bijective base-2 numbers in RUNA (1)
 * and RUNB (2) digits, least significant digit first. Symbol values:
 * 0 RUNA, 1 RUNB, MTF index j >= 1 -> j + 1, EOB = n_in_use + 1.
 */
#include <string.h>

#include "bz2_internal.h"

/* Emit a run of `run` (>= 1) zeros as RUNA/RUNB digits. */
static size_t put_zero_run(uint32_t run, uint16_t *sym, size_t o, uint32_t *freq)
{
    while (run) {
        if (run & 1) {
            sym[o++] = BZ2_RUNA;
            freq[BZ2_RUNA]++;
            run = (run - 1) >> 1;
        } else {
            sym[o++] = BZ2_RUNB;
            freq[BZ2_RUNB]++;
            run = (run - 2) >> 1;
        }
    }
    return o;
}

#define BYTES_01 0x0101010101010101ull
#define BYTES_80 0x8080808080808080ull

/* Find v in the list, move it to the front and return its old index.
 * Binary data gives large indices, so the search-and-shift walks the list
 * a word (8 entries) at a time: each word is shifted up one byte with the
 * previous word's top byte carried in, until the word holding v, where
 * only the bytes up to v move. v is always present. */
static unsigned move_to_front(uint8_t *list, uint8_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t carry = v; /* v lands in list[0] */
    for (unsigned k = 0;; k += 8) {
        uint64_t w;
        memcpy(&w, list + k, 8);
        uint64_t x = w ^ (v * BYTES_01);
        /* lowest 0x80 marks the first zero byte (higher ones may be false) */
        uint64_t hit = (x - BYTES_01) & ~x & BYTES_80;
        if (!hit) {
            uint64_t nw = (w << 8) | carry;
            carry = w >> 56;
            memcpy(list + k, &nw, 8);
            continue;
        }
        unsigned b = (unsigned)__builtin_ctzll(hit) >> 3;
        uint64_t keep = ~0ull << (8 * b) << 8; /* bytes after v */
        w = (w & keep) | (((w << 8) | carry) & ~keep);
        memcpy(list + k, &w, 8);
        return k + b;
    }
#else
    uint8_t carry = v;
    unsigned j = 0;
    for (;; j++) {
        uint8_t cur = list[j];
        list[j] = carry;
        if (cur == v)
            return j;
        carry = cur;
    }
#endif
}

size_t bz2_mtf_encode(const uint8_t *bwt, size_t n, const uint8_t seq[256], int n_in_use, uint16_t *sym,
                      uint32_t *freq)
{
    uint8_t list[256 + 8] = { 0 }; /* padded for whole-word access */
    for (int i = 0; i < n_in_use; i++)
        list[i] = (uint8_t)i;
    memset(freq, 0, BZ2_MAX_ALPHA * sizeof *freq);
    size_t o = 0;
    uint32_t zrun = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t v = seq[bwt[i]];
        if (list[0] == v) {
            zrun++;
            continue;
        }
        if (zrun) {
            o = put_zero_run(zrun, sym, o, freq);
            zrun = 0;
        }
        unsigned j = move_to_front(list, v);
        sym[o++] = (uint16_t)(j + 1);
        freq[j + 1]++;
    }
    if (zrun)
        o = put_zero_run(zrun, sym, o, freq);
    sym[o++] = (uint16_t)(n_in_use + 1);
    freq[n_in_use + 1]++;
    return o;
}
