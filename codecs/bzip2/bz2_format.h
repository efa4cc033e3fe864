/*
 * bz2_format.h - the bzip2 stream format (docs/BZIP2.md) in one place, for C
 * (codecs/bzip2/cpu) and CUDA (codecs/bzip2/cuda, host and device code
 * alike): every constant and magic, the limits our decoders enforce, the
 * rules that decide which tables the encoders write, the stream header and
 * trailer writers and the combined CRC. Header-only; bzip2.h includes it.
 */
#ifndef GC_BZ2_FORMAT_H
#define GC_BZ2_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "gc_hd.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BZ2_BLOCK_MAGIC 0x314159265359ULL /* pi */
#define BZ2_EOS_MAGIC 0x177245385090ULL   /* sqrt(pi) */
#define BZ2_MAX_GROUPS 6
#define BZ2_MIN_GROUPS 2
#define BZ2_GROUP_SIZE 50
#define BZ2_MAX_ALPHA 258       /* RUNA, RUNB, 255 MTF values, EOB */
#define BZ2_MAX_SELECTORS 18002 /* 2 + 900000 / 50 */
#define BZ2_MAX_CODE_LEN_ENC 17 /* what we write (like bzip2) */
#define BZ2_MAX_CODE_LEN_DEC 20 /* what the format allows */
#define BZ2_MAX_BLOCK 900000u   /* largest block any stream may declare */
#define BZ2_RUNA 0
#define BZ2_RUNB 1

/* A stream: "BZh" + level, its blocks, then the end-of-stream magic and the
 * combined CRC, zero bits up to the next byte. */
#define BZ2_STREAM_MAGIC "BZh" /* then the level, '1'..'9' */
#define BZ2_STREAM_HEADER_BITS 32u
#define BZ2_STREAM_TRAILER_BITS 80u /* 48-bit magic + 32-bit combined CRC */

/* Blocks never cross a multiple of this many input bytes (docs/BZIP2.md,
 * section 3): segments are planned independently, so a GPU piece, a CPU
 * thread or a stream chunk of whole segments needs nothing from the others. */
#define BZ2_SEGMENT_BYTES ((size_t)32 << 20)

/* A decoder rejects a block whose bits run past this many bytes from the
 * byte holding the first bit of its magic (GC_E_CORRUPT "compressed block
 * exceeds ..."). No encoder comes near it: a block holds at most 900001
 * symbols of at most 20 bits plus < 40 KB of tables, under 2.3 MB. It bounds
 * what bz2_decompress_part must see to make progress. */
#define BZ2_MAX_BLOCK_COMPRESSED ((size_t)3 << 20)

/* ---- randomised blocks: the format's table (cpu/bz2_rand.c) ---- */
extern const uint16_t bz2_rnums[512];
/* Flip mask generator for randomised blocks (host code: the table is the
 * host's): call bz2_rand_next once per byte (in BWT-input order); it
 * returns the value (0 or 1) to xor in. */
typedef struct bz2_rand {
    int32_t to_go;
    int32_t tpos;
} bz2_rand;
static inline void bz2_rand_init(bz2_rand *r)
{
    r->to_go = 0;
    r->tpos = 0;
}
static inline uint8_t bz2_rand_next(bz2_rand *r)
{
    if (r->to_go == 0) {
        r->to_go = bz2_rnums[r->tpos];
        r->tpos = (r->tpos + 1) & 511;
    }
    r->to_go--;
    return r->to_go == 1;
}

/* bzip2's nblockMAX: a block is full once its RLE1 output reaches this; the
 * margin below level * 100000 keeps the overshoot within what decoders take. */
static inline GC_HD size_t bz2_block_limit(int level)
{
    return (size_t)level * 100000u - 19u;
}
/* A block ends after the RLE1 unit (at most 5 bytes) that reaches the limit,
 * so it may hold this many bytes more (docs/BZIP2.md, section 3). */
#define BZ2_BLOCK_OVERSHOOT 4u

/* ---- the combined CRC ---- */

/* A stream's combined CRC after one more block: rotl32(combined, 1) ^ block_crc. */
static inline GC_HD uint32_t bz2_combine_crc(uint32_t combined, uint32_t block_crc)
{
    return ((combined << 1) | (combined >> 31)) ^ block_crc;
}

/* Combined CRC of a stream whose blocks are those of a part (blocks blocks,
 * combined CRC part_combined) appended to blocks with combined CRC so_far:
 * rotl32(so_far, blocks mod 32) ^ part_combined. Start with so_far = 0. */
static inline GC_HD uint32_t bz2_combine_parts(uint32_t so_far, uint32_t blocks, uint32_t part_combined)
{
    unsigned r = blocks & 31u;
    uint32_t rot = r ? (so_far << r) | (so_far >> (32u - r)) : so_far;
    return rot ^ part_combined;
}

/* ---- stream framing ---- */

/* The stream header "BZh" + level (1..9) into h[0..4). */
static inline GC_HD void bz2_stream_header(uint8_t *h, int level)
{
    for (int i = 0; i < 3; i++)
        h[i] = (uint8_t)BZ2_STREAM_MAGIC[i];
    h[3] = (uint8_t)('0' + level);
}

/* The trailer (end-of-stream magic, then the combined CRC, MSB first) ORed
 * into d at bit pos (bit 0 = the MSB of d[0]): bits of d from pos on, up to
 * pos + BZ2_STREAM_TRAILER_BITS rounded up to a byte, must be zero. */
static inline GC_HD void bz2_stream_trailer(uint8_t *d, uint64_t pos, uint32_t combined)
{
    const uint64_t v[2] = { BZ2_EOS_MAGIC, combined };
    const int n[2] = { 48, 32 };
    for (int f = 0; f < 2; f++)
        for (int i = n[f] - 1; i >= 0; i--, pos++)
            if (v[f] >> i & 1)
                d[pos / 8] |= (uint8_t)(0x80u >> (pos % 8));
}

/* ---- table choice: the rules that decide output bytes (docs/BZIP2.md 6.1, 6.4) ---- */

/* Number of tables for a count of MTF symbols (2..6), section 6.1. */
static inline GC_HD int bz2_rule_table_count(uint32_t n_sym)
{
    return n_sym < 200 ? 2 : n_sym < 600 ? 3 : n_sym < 1200 ? 4 : n_sym < 2400 ? 5 : 6;
}

/* Starting point, section 6.4 (bzip2's rule): walk the symbol values from 0
 * up, cutting them into n_groups contiguous ranges, each taking symbols until
 * it holds at least its share of what is left (the remaining count divided by
 * the ranges still to cut). The ranges that are odd counting from the first,
 * other than the first and the last, give back their last symbol. Range k
 * belongs to table n_groups-1-k, which costs 0 inside it and 15 elsewhere, so
 * the first assignment clusters groups by symbol range. The last range may
 * stop short of the alphabet's end: the symbols after it cost 15 in every
 * table. */
static inline GC_HD void bz2_rule_initial_tables(const uint32_t *freq, int alpha, int n_groups, uint32_t n_sym,
                                                 uint8_t (*len)[BZ2_MAX_ALPHA])
{
    uint32_t rem = n_sym; /* never below what the ranges still to cut hold */
    int gs = 0;
    for (int left = n_groups; left > 0; left--) {
        uint32_t target = rem / (uint32_t)left, acc = 0;
        int ge = gs - 1;
        while (acc < target && ge < alpha - 1)
            acc += freq[++ge];
        int k = n_groups - left;
        if (ge > gs && k > 0 && left > 1 && k % 2 == 1)
            acc -= freq[ge--];
        uint8_t *l = len[left - 1];
        for (int v = 0; v < alpha; v++)
            l[v] = (v >= gs && v <= ge) ? 0 : 15;
        rem -= acc;
        gs = ge + 1;
    }
}

/* ---- code lengths: bzip2's Huffman construction (docs/BZIP2.md 6.2) ---- */

/* Room for bz2_rule_code_lengths: nodes 1..alpha are the leaves, then the
 * internal nodes; index 0 is unused. A node's key is its weight times 256
 * plus the height of its subtree, so among equal weights the shallower
 * subtree comes first. */
typedef struct bz2_huff_room {
    uint32_t key[2 * BZ2_MAX_ALPHA + 2];
    int16_t parent[2 * BZ2_MAX_ALPHA + 2];
    int16_t heap[BZ2_MAX_ALPHA + 2]; /* a binary min-heap by key, from heap[1] */
} bz2_huff_room;

/* Moves the entry at heap position z up while its key is below its parent's. */
static inline GC_HD void bz2_huff_up(bz2_huff_room *r, int z)
{
    int16_t node = r->heap[z];
    while (z > 1 && r->key[node] < r->key[r->heap[z >> 1]]) {
        r->heap[z] = r->heap[z >> 1];
        z >>= 1;
    }
    r->heap[z] = node;
}

/* Moves the entry at heap position 1 down: to the smaller child (the left one
 * unless the right one's key is smaller) while that child's key is not above
 * its own. The exact moves decide ties, and so the output. */
static inline GC_HD void bz2_huff_down(bz2_huff_room *r, int n_heap)
{
    int z = 1;
    int16_t node = r->heap[1];
    for (;;) {
        int c = 2 * z;
        if (c > n_heap)
            break;
        if (c < n_heap && r->key[r->heap[c + 1]] < r->key[r->heap[c]])
            c++;
        if (r->key[node] < r->key[r->heap[c]])
            break;
        r->heap[z] = r->heap[c];
        z = c;
    }
    r->heap[z] = node;
}

/* One Huffman tree over the leaf keys in r: code lengths into len; returns the
 * longest. Repeatedly takes the two smallest keys off the heap (each take
 * moves the last entry to the top and down) and pushes their parent, whose
 * key is the weights' sum with a height one above the higher child's. */
static inline GC_HD int bz2_huff_tree(bz2_huff_room *r, int alpha, uint8_t *len)
{
    int n_heap = 0, n_nodes = alpha;
    for (int i = 1; i <= alpha; i++) {
        r->parent[i] = -1;
        r->heap[++n_heap] = (int16_t)i;
        bz2_huff_up(r, n_heap);
    }
    while (n_heap > 1) {
        int16_t a = r->heap[1];
        r->heap[1] = r->heap[n_heap--];
        bz2_huff_down(r, n_heap);
        int16_t b = r->heap[1];
        r->heap[1] = r->heap[n_heap--];
        bz2_huff_down(r, n_heap);
        uint32_t ha = r->key[a] & 0xffu, hb = r->key[b] & 0xffu;
        n_nodes++;
        r->parent[a] = r->parent[b] = (int16_t)n_nodes;
        r->parent[n_nodes] = -1;
        r->key[n_nodes] = ((r->key[a] & ~0xffu) + (r->key[b] & ~0xffu)) | (1u + (ha > hb ? ha : hb));
        r->heap[++n_heap] = (int16_t)n_nodes;
        bz2_huff_up(r, n_heap);
    }
    int longest = 0;
    for (int i = 1; i <= alpha; i++) {
        int d = 0;
        for (int k = i; r->parent[k] >= 0; k = r->parent[k])
            d++;
        len[i - 1] = (uint8_t)d;
        longest = d > longest ? d : longest;
    }
    return longest;
}

/* Code lengths for freq[0..alpha), none over max_len (section 6.2): every
 * symbol weighs its count (an absent one 1); while a code is too long, every
 * weight w becomes 1 + w/2 and the tree is built again. */
static inline GC_HD void bz2_rule_code_lengths(bz2_huff_room *r, const uint32_t *freq, int alpha, int max_len,
                                               uint8_t *len)
{
    for (int i = 0; i < alpha; i++)
        r->key[i + 1] = (freq[i] ? freq[i] : 1u) << 8;
    while (bz2_huff_tree(r, alpha, len) > max_len)
        for (int i = 1; i <= alpha; i++)
            r->key[i] = (1u + (r->key[i] >> 8) / 2) << 8;
}

#ifdef __cplusplus
}
#endif

#endif
