/*
 * bz2_huffman.c - Huffman code lengths (limited to 17 bits), canonical code
 * values, and the choice of 2..6 coding tables with one selector per group
 * of 50 symbols. Every rule here decides output bytes: docs/BZIP2.md
 * ("Huffman tables") is the normative description.
 */
#include <string.h>

#include "bz2_internal.h"

/* bzip2's construction, written once for both backends (bz2_format.h). */
void bz2_code_lengths(const uint32_t *freq, int alpha, int max_len, uint8_t *len)
{
    bz2_huff_room room;
    bz2_rule_code_lengths(&room, freq, alpha, max_len, len);
}

void bz2_canonical_codes(const uint8_t *len, int alpha, uint32_t *code)
{
    uint32_t next = 0;
    for (int l = 1; l <= BZ2_MAX_CODE_LEN_DEC; l++) {
        for (int s = 0; s < alpha; s++)
            if (len[s] == l)
                code[s] = next++;
        next <<= 1;
    }
}

int bz2_table_count(size_t n_sym)
{
    return bz2_rule_table_count(n_sym > UINT32_MAX ? UINT32_MAX : (uint32_t)n_sym);
}

/* One pass: give each group of 50 symbols the table with the smallest
 * total code length (lowest table index on ties), and count each table's
 * symbol frequencies. Costs are summed as packed
 * 16-bit lanes (4 tables per 64-bit word; 50 * 20 < 65536). */
static void assign_groups(const uint16_t *sym, size_t n_sym, int alpha, int n_groups,
                          uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA], uint8_t *selectors,
                          uint32_t tfreq[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA])
{
    uint64_t pa[BZ2_MAX_ALPHA], pb[BZ2_MAX_ALPHA];
    for (int s = 0; s < alpha; s++) {
        uint64_t a = 0, b = 0;
        for (int t = 0; t < n_groups; t++) {
            if (t < 4)
                a |= (uint64_t)len[t][s] << (16 * t);
            else
                b |= (uint64_t)len[t][s] << (16 * (t - 4));
        }
        pa[s] = a;
        pb[s] = b;
    }
    size_t g = 0;
    for (size_t lo = 0; lo < n_sym; lo += BZ2_GROUP_SIZE, g++) {
        size_t hi = lo + BZ2_GROUP_SIZE < n_sym ? lo + BZ2_GROUP_SIZE : n_sym;
        uint64_t ca = 0, cb = 0;
        for (size_t i = lo; i < hi; i++) {
            ca += pa[sym[i]];
            cb += pb[sym[i]];
        }
        int best = 0;
        uint32_t bc = (uint32_t)(ca & 0xffff);
        for (int t = 1; t < n_groups; t++) {
            uint32_t c = (uint32_t)((t < 4 ? ca >> (16 * t) : cb >> (16 * (t - 4))) & 0xffff);
            if (c < bc) {
                bc = c;
                best = t;
            }
        }
        selectors[g] = (uint8_t)best;
        for (size_t i = lo; i < hi; i++)
            tfreq[best][sym[i]]++;
    }
}

#define BZ2_REFINE_ITERS 4

void bz2_choose_tables(const uint16_t *sym, size_t n_sym, const uint32_t *freq, int alpha, int n_groups,
                       uint8_t len[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA], uint8_t *selectors)
{
    uint32_t tfreq[BZ2_MAX_GROUPS][BZ2_MAX_ALPHA];
    bz2_rule_initial_tables(freq, alpha, n_groups, (uint32_t)n_sym, len); /* n_sym <= 900001 */
    /* The selectors sent are those of the last pass, which chose them with
     * the tables before it: the tables are rebuilt after it, as bzip2 does. */
    for (int it = 0; it < BZ2_REFINE_ITERS; it++) {
        memset(tfreq, 0, sizeof tfreq);
        assign_groups(sym, n_sym, alpha, n_groups, len, selectors, tfreq);
        for (int t = 0; t < n_groups; t++)
            bz2_code_lengths(tfreq[t], alpha, BZ2_MAX_CODE_LEN_ENC, len[t]);
    }
}
