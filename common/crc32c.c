/*
 * crc32c.c - CRC32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Two implementations, picked once at first use:
 *  - x86-64 with SSE4.2: the crc32 instruction on three interleaved streams.
 *    One stream is bound by the instruction's 3-cycle latency; three
 *    independent streams keep the unit busy every cycle, and their partial
 *    CRCs are merged with "shift through n zero bytes" tables (linearity of
 *    CRCs: crc(A||B) = shift(crc(A), |B|) ^ crc_from_zero(B)).
 *  - anything else: slicing-by-8 tables.
 * All state is written once under pthread_once and read-only afterwards.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC32C_HAVE_SSE42 1
#include <nmmintrin.h>
#endif

#define CRC32C_POLY 0x82F63B78u

/* Three-stream block lengths: long blocks for bulk data, short ones for what
 * is left; both multiples of 8 so every stream stays word-aligned. */
#define CRC32C_LONG 8192u
#define CRC32C_SHORT 256u

typedef uint32_t (*crc32c_fn)(uint32_t reg, const uint8_t *p, size_t len);

static uint32_t slice_table[8][256];
static crc32c_fn crc32c_impl;
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v; /* the targets we build for are little-endian */
}

static void init_slice_table(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t reg = b;
        for (int k = 0; k < 8; k++)
            reg = (reg >> 1) ^ (CRC32C_POLY & (0u - (reg & 1u)));
        slice_table[0][b] = reg;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int t = 1; t < 8; t++)
            slice_table[t][b] = (slice_table[t - 1][b] >> 8) ^ slice_table[0][slice_table[t - 1][b] & 0xFF];
}

/* Raw register update (no pre/post inversion), portable slicing-by-8. */
static uint32_t crc32c_sw(uint32_t reg, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        uint64_t v = load_le64(p) ^ reg;
        reg = slice_table[7][v & 0xFF] ^ slice_table[6][(v >> 8) & 0xFF] ^ slice_table[5][(v >> 16) & 0xFF] ^
              slice_table[4][(v >> 24) & 0xFF] ^ slice_table[3][(v >> 32) & 0xFF] ^
              slice_table[2][(v >> 40) & 0xFF] ^ slice_table[1][(v >> 48) & 0xFF] ^ slice_table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        reg = slice_table[0][(reg ^ *p++) & 0xFF] ^ (reg >> 8);
    return reg;
}

#ifdef CRC32C_HAVE_SSE42

/* shift_long[k][b]: register after feeding CRC32C_LONG zero bytes to a
 * register holding byte value b at byte position k (and zeros elsewhere). */
static uint32_t shift_long[4][256];
static uint32_t shift_short[4][256];

static void init_shift_table(uint32_t table[4][256], size_t zero_bytes)
{
    uint32_t bit_image[32];
    static const uint8_t zeros[CRC32C_LONG];
    for (int j = 0; j < 32; j++)
        bit_image[j] = crc32c_sw(1u << j, zeros, zero_bytes);
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1u << bit))
                    v ^= bit_image[8 * k + bit];
            table[k][b] = v;
        }
}

static inline uint32_t shift_reg(uint32_t table[4][256], uint32_t reg)
{
    return table[0][reg & 0xFF] ^ table[1][(reg >> 8) & 0xFF] ^ table[2][(reg >> 16) & 0xFF] ^ table[3][reg >> 24];
}

/* Consume as many 3*block-byte groups as fit, three streams at a time. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_3way(uint32_t reg, const uint8_t **pp, size_t *lenp,
                                                                 size_t block, uint32_t table[4][256])
{
    const uint8_t *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * block) {
        uint64_t c0 = reg, c1 = 0, c2 = 0;
        for (size_t i = 0; i < block; i += 8) {
            c0 = _mm_crc32_u64(c0, load_le64(p + i));
            c1 = _mm_crc32_u64(c1, load_le64(p + block + i));
            c2 = _mm_crc32_u64(c2, load_le64(p + 2 * block + i));
        }
        reg = shift_reg(table, (uint32_t)c0) ^ (uint32_t)c1;
        reg = shift_reg(table, reg) ^ (uint32_t)c2;
        p += 3 * block;
        len -= 3 * block;
    }
    *pp = p;
    *lenp = len;
    return reg;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t reg, const uint8_t *p, size_t len)
{
    reg = crc32c_hw_3way(reg, &p, &len, CRC32C_LONG, shift_long);
    reg = crc32c_hw_3way(reg, &p, &len, CRC32C_SHORT, shift_short);
    uint64_t c = reg;
    for (; len >= 8; p += 8, len -= 8)
        c = _mm_crc32_u64(c, load_le64(p));
    reg = (uint32_t)c;
    for (; len > 0; p++, len--)
        reg = _mm_crc32_u8(reg, *p);
    return reg;
}

#endif /* CRC32C_HAVE_SSE42 */

static void crc32c_init(void)
{
    init_slice_table();
    crc32c_impl = crc32c_sw;
#ifdef CRC32C_HAVE_SSE42
    if (__builtin_cpu_supports("sse4.2")) {
        init_shift_table(shift_long, CRC32C_LONG);
        init_shift_table(shift_short, CRC32C_SHORT);
        crc32c_impl = crc32c_hw;
    }
#endif
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc32c_once, crc32c_init);
    return ~crc32c_impl(~crc, data, len);
}

uint32_t crc32c_update_portable(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc32c_once, crc32c_init);
    return ~crc32c_sw(~crc, data, len);
}
