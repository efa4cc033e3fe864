/*
 * bz2_crc.c - the bzip2 CRC-32: polynomial 0x04c11db7 processed MSB first
 * (the "big-endian" CRC-32, not the reflected zlib one), initial value and
 * final xor 0xffffffff. Slicing-by-4 tables, built once.
 */
#include <pthread.h>

#include "bz2_internal.h"

static uint32_t crc_tab[4][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i << 24;
        for (int k = 0; k < 8; k++)
            c = (c & 0x80000000u) ? (c << 1) ^ 0x04c11db7u : c << 1;
        crc_tab[0][i] = c;
    }
    /* tab[k][i]: CRC of byte i followed by k zero bytes. */
    for (int k = 1; k < 4; k++)
        for (int i = 0; i < 256; i++)
            crc_tab[k][i] = (crc_tab[k - 1][i] << 8) ^ crc_tab[0][crc_tab[k - 1][i] >> 24];
}

uint32_t bz2_crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
    pthread_once(&crc_once, crc_build);
    while (n >= 4) {
        crc ^= (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        crc = crc_tab[3][crc >> 24] ^ crc_tab[2][(crc >> 16) & 0xff] ^ crc_tab[1][(crc >> 8) & 0xff] ^
              crc_tab[0][crc & 0xff];
        p += 4;
        n -= 4;
    }
    while (n--)
        crc = (crc << 8) ^ crc_tab[0][(crc >> 24) ^ *p++];
    return crc;
}
