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

size_t bz2_mtf_encode(const uint8_t *bwt, size_t n, const uint8_t seq[256], int n_in_use,
                      uint16_t *sym, uint32_t *freq)
{
    uint8_t list[256];
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
        /* Shift the list right until v is found, then put v in front. */
        uint8_t carry = list[0];
        unsigned j = 1;
        uint8_t cur = list[1];
        list[1] = carry;
        while (cur != v) {
            j++;
            carry = cur;
            cur = list[j];
            list[j] = carry;
        }
        list[0] = v;
        sym[o++] = (uint16_t)(j + 1);
        freq[j + 1]++;
    }
    if (zrun)
        o = put_zero_run(zrun, sym, o, freq);
    sym[o++] = (uint16_t)(n_in_use + 1);
    freq[n_in_use + 1]++;
    return o;
}
