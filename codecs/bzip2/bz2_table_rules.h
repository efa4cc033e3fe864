/*
 * bz2_table_rules.h - the table-choice rules that decide output bytes
 * (docs/BZIP2.md 6.1 and 6.4), written so that both backends can compile
 * them: as C by the CPU engine (bz2_huffman.c), and as host and device code
 * (BZ2_RULE) by a CUDA file. The CUDA encoder (codecs/bzip2/cuda/enc/bz2_enc_tables.cu)
 * still carries its own copy: moving it here waits for a GPU run of the
 * suite (docs/DECISIONS.md, GPU bzip2).
 */
#ifndef GC_BZ2_TABLE_RULES_H
#define GC_BZ2_TABLE_RULES_H

#include <stdint.h>

#ifdef __CUDACC__
#define BZ2_RULE static inline __host__ __device__
#else
#define BZ2_RULE static inline
#endif

#define BZ2_RULE_ALPHA 258 /* BZ2_MAX_ALPHA: RUNA, RUNB, 255 MTF values, EOB */

/* Number of tables for a count of MTF symbols (2..6), section 6.1. */
BZ2_RULE int bz2_rule_table_count(uint32_t n_sym)
{
    return n_sym < 200 ? 2 : n_sym < 600 ? 3 : n_sym < 1200 ? 4 : n_sym < 2400 ? 5 : 6;
}

/* Starting point, section 6.4: split the symbol values into n_groups
 * contiguous ranges of about equal remaining frequency; a table costs 0
 * inside its range and 15 outside, so the first assignment clusters groups
 * by symbol range. Range k (from symbol 0 up) belongs to table n_groups-1-k,
 * and odd ranges other than the first and last give back their last symbol
 * (the same heuristic as bzip2: it measurably lands in better local optima). */
BZ2_RULE void bz2_rule_initial_tables(const uint32_t *freq, int alpha, int n_groups, uint32_t n_sym,
                                      uint8_t (*len)[BZ2_RULE_ALPHA])
{
    uint32_t rem = n_sym;
    int gs = 0;
    for (int k = 0; k < n_groups; k++) {
        int left = n_groups - k;
        uint32_t target = rem / (uint32_t)left;
        int ge = gs;
        uint32_t acc = gs < alpha ? freq[gs] : 0;
        if (k == n_groups - 1) {
            ge = alpha - 1;
            acc = rem;
        } else {
            while (acc < target && ge + 1 < alpha - (left - 1)) {
                ge++;
                acc += freq[ge];
            }
            if (k % 2 == 1 && ge > gs) {
                acc -= freq[ge];
                ge--;
            }
        }
        uint8_t *l = len[n_groups - 1 - k];
        for (int v = 0; v < alpha; v++)
            l[v] = (v >= gs && v <= ge) ? 0 : 15;
        rem -= acc < rem ? acc : rem;
        gs = ge + 1;
    }
}

#endif
