/*
 * crc32c_device.cu - the constant tables of the device CRC32C (built once on
 * the host per context and uploaded; see crc32c_device.cuh for the method).
 */
#include "crc32c_device.cuh"

namespace gcgpu {

namespace {

/* x^(8n) mod P for any signed n (reflected), from the powers already built */
uint32_t xpow8_signed(const CrcTables *t, int64_t n)
{
    const uint32_t *pw = n >= 0 ? t->xp8 : t->xi8;
    uint64_t m = (uint64_t)(n >= 0 ? n : -n);
    uint32_t p = 0x80000000u; /* 1 */
    for (int k = 0; m; k++, m >>= 1)
        if (m & 1)
            p = gf2_mul(pw[k], p);
    return p;
}

/* The tables of warp_crc (see CrcTables::mb, mr and crc32c_device.cuh). */
void mma_tables_build(CrcTables *t)
{
    constexpr int kRow = 256; /* bytes of data in one row of the A fragment: 4 lanes' segments */
    uint32_t bit_crc[kRow][8]; /* raw CRC, at the row's end, of one bit set at (byte, bit); 8 KiB of
                                  stack, not static: contexts may build their tables on several threads */
    for (int pos = 0; pos < kRow; pos++)
        for (int b = 0; b < 8; b++) {
            uint32_t c = t->t8[0][1u << b];
            for (int z = pos + 1; z < kRow; z++)
                c = t->t8[0][c & 255] ^ (c >> 8);
            bit_crc[pos][b] = c;
        }
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                for (int r = 0; r < 2; r++) {
                    /* b_r meets a0 (r = 0) or a2 (r = 1) of row g: words 4s, 4s + 2 */
                    const int seg = l & 3, out_bit = 8 * j + (l >> 2), byte = 16 * s + 8 * r;
                    uint32_t m = 0;
                    for (int i = 0; i < 32; i++)
                        m |= ((bit_crc[kSeg * seg + byte + i / 8][i % 8] >> out_bit) & 1u) << i;
                    t->mb[2 * s + j / 2][l][2 * (j & 1) + r] = m;
                }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, tg = l & 3;
            /* row g + 8h (words 4s + h, 4s + 2 + h) ends 256 (g + 1) + 4 h bytes into the warp's 2 KiB */
            const uint32_t to_end = xpow8_signed(t, (int64_t)kSeg * 32 - kRow * (g + 1) - 4 * h);
            for (int p = 0; p < 2; p++)
                for (uint32_t v = 0; v < 16; v++) {
                    uint32_t bits = 0;
                    for (int q = 0; q < 4; q++) /* bit q of v: CRC bit 8 (2p + q/2) + 2 tg + q%2 */
                        bits |= ((v >> q) & 1u) << (8 * (2 * p + q / 2) + 2 * tg + q % 2);
                    t->mr[2 * h + p][v][l] = gf2_mul(to_end, bits);
                }
        }
}

} // namespace

void crc_tables_build(CrcTables *t)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
        t->t8[0][i] = c;
    }
    for (int s = 1; s < 8; s++)
        for (int i = 0; i < 256; i++)
            t->t8[s][i] = (t->t8[s - 1][i] >> 8) ^ t->t8[0][t->t8[s - 1][i] & 255];
    /* reflected: bit 31 - e stands for x^e */
    t->xp8[0] = 0x00800000u;              /* x^8 */
    uint32_t xinv = 0x05EC76F1u;          /* x^-1: x^31 + (P - 1 - x^32) / x */
    uint32_t xi = 0x80000000u;
    for (int i = 0; i < 8; i++)
        xi = gf2_mul(xinv, xi);
    t->xi8[0] = xi;                       /* x^-8 */
    for (int k = 1; k < 32; k++) {
        t->xp8[k] = gf2_mul(t->xp8[k - 1], t->xp8[k - 1]);
        t->xi8[k] = gf2_mul(t->xi8[k - 1], t->xi8[k - 1]);
    }
    for (int th = 0; th < kThreads; th++)
        t->kseg[th] = xpow8_signed(t, (int64_t)kSeg * (kThreads - 1 - th));
    uint32_t span_pow[kSpanShifts]; /* x^(8*2048*m) */
    for (int m = 0; m < kSpanShifts; m++)
        span_pow[m] = xpow8_signed(t, (int64_t)kSpan * m);
    for (int n = 0; n < 8; n++)
        for (uint32_t v = 0; v < 16; v++) {
            for (int w = 0; w < kThreads / 32; w++)
                t->wm[w][n][v] = gf2_mul(t->kseg[32 * w + 31], v << (4 * n));
            for (int m = 0; m < kSpanShifts; m++)
                t->xsp[m][n][v] = gf2_mul(span_pow[m], v << (4 * n));
            for (int k = 0; k < kPowNibbleBits; k++) {
                t->xpn[k][n][v] = gf2_mul(t->xp8[k], v << (4 * n));
                t->xin[k][n][v] = gf2_mul(t->xi8[k], v << (4 * n));
            }
        }
    mma_tables_build(t);
}

} // namespace gcgpu
