/*
 * bz2_oversub.c - crafts the stream of bz2_oversub.h from the format alone
 * (docs/BZIP2.md sections 2-7): a naive BWT of a short text over the bytes
 * a, b, c, a symbol map that also lists z (never used, so MTF index 3, the
 * symbol the first table cannot reach, never occurs), and two tables:
 *
 *   table 0 (every selector): RUNA 2, RUNB 2, MTF1 3, MTF2 3, MTF3 3, EOB 2
 *     canonical codes: RUNA 00, RUNB 01, EOB 10, MTF1 110, MTF2 111, and
 *     MTF3 would be 1000 in 3 bits: it does not fit, Kraft sum 9/8;
 *   table 1 (never selected): every length 1, Kraft sum 3.
 *
 * bzip2 1.0.8 (`bzip2 -d`, libbz2) decodes it to bz2_oversub_plain with
 * both CRCs right; so must every one of our decoders.
 */
#include "bz2_oversub.h"

#include <string.h>

const char bz2_oversub_plain[] = "abacabbcacbabbcaacabccbaab";

#define ALPHA 6 /* RUNA, RUNB, MTF 1..3, EOB: four bytes in the map */
#define MAXN 64

static const uint8_t map[4] = { 'a', 'b', 'c', 'z' };
static const int lens[2][ALPHA] = { { 2, 2, 3, 3, 3, 2 }, { 1, 1, 1, 1, 1, 1 } };

typedef struct bitw {
    uint8_t *p;
    size_t cap, bits;
} bitw;

static void put(bitw *w, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, w->bits++) {
        size_t byte = w->bits / 8;
        if (byte >= w->cap)
            continue; /* the caller sees bits > 8 * cap */
        if (w->bits % 8 == 0)
            w->p[byte] = 0;
        if ((v >> i) & 1)
            w->p[byte] |= (uint8_t)(0x80u >> (w->bits % 8));
    }
}

static uint32_t crc32_bz(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= (uint32_t)p[i] << 24;
        for (int k = 0; k < 8; k++)
            c = c & 0x80000000u ? c << 1 ^ 0x04c11db7u : c << 1;
    }
    return ~c;
}

/* Last column of the sorted rotations of s, and the row of s itself. */
static uint32_t bwt(const uint8_t *s, size_t n, uint8_t *last)
{
    size_t rot[MAXN];
    for (size_t i = 0; i < n; i++)
        rot[i] = i;
    for (size_t i = 1; i < n; i++) { /* insertion sort: n is tiny */
        for (size_t j = i; j > 0; j--) {
            int c = 0;
            for (size_t k = 0; k < n && !c; k++)
                c = (int)s[(rot[j - 1] + k) % n] - (int)s[(rot[j] + k) % n];
            if (c <= 0)
                break;
            size_t t = rot[j];
            rot[j] = rot[j - 1];
            rot[j - 1] = t;
        }
    }
    uint32_t orig = 0;
    for (size_t i = 0; i < n; i++) {
        last[i] = s[(rot[i] + n - 1) % n];
        if (rot[i] == 0)
            orig = (uint32_t)i;
    }
    return orig;
}

static size_t flush_run(size_t run, uint8_t *sym, size_t k)
{
    while (run) { /* bijective base 2: RUNA = 1, RUNB = 2 times the weight */
        run--;
        sym[k++] = (uint8_t)(run & 1);
        run /= 2;
    }
    return k;
}

/* MTF + zero runs of the last column, EOB included. */
static size_t symbols(const uint8_t *last, size_t n, uint8_t *sym)
{
    uint8_t list[4];
    memcpy(list, map, 4);
    size_t k = 0, run = 0;
    for (size_t i = 0; i < n; i++) {
        int j = 0;
        while (j < 3 && list[j] != last[i])
            j++; /* only a, b, c occur: z stays last */
        if (j == 0) {
            run++;
            continue;
        }
        k = flush_run(run, sym, k);
        run = 0;
        sym[k++] = (uint8_t)(j + 1);
        uint8_t v = list[j];
        memmove(list + 1, list, (size_t)j);
        list[0] = v;
    }
    k = flush_run(run, sym, k);
    sym[k++] = ALPHA - 1;
    return k;
}

/* Canonical codes as bzip2 assigns them: by (length, symbol), counting up. */
static void codes(const int *len, uint32_t *code)
{
    uint32_t vec = 0;
    for (int l = 1; l <= 20; l++) {
        for (int s = 0; s < ALPHA; s++)
            if (len[s] == l)
                code[s] = vec++;
        vec <<= 1;
    }
}

static void put_lengths(bitw *w, const int *len)
{
    int cur = len[0];
    put(w, (uint64_t)cur, 5);
    for (int s = 0; s < ALPHA; s++) {
        for (; cur < len[s]; cur++)
            put(w, 2, 2); /* 1 0: up */
        for (; cur > len[s]; cur--)
            put(w, 3, 2); /* 1 1: down */
        put(w, 0, 1);
    }
}

static size_t craft(uint8_t *dst, size_t cap, const int *len0, int *fits)
{
    const int *tab[2] = { len0, lens[1] };
    const uint8_t *plain = (const uint8_t *)bz2_oversub_plain;
    size_t n = strlen(bz2_oversub_plain);
    uint8_t last[MAXN], sym[2 * MAXN + 1];
    uint32_t orig = bwt(plain, n, last);
    size_t nsym = symbols(last, n, sym);
    uint32_t code[ALPHA];
    codes(len0, code);
    *fits = 1;
    for (size_t i = 0; i < nsym; i++)
        *fits &= !(code[sym[i]] >> len0[sym[i]]); /* else never decoded */
    uint32_t crc = crc32_bz(plain, n);
    bitw w = { dst, cap, 0 };
    put(&w, 0x425a6839u, 32); /* BZh9 */
    put(&w, 0x314159265359ull, 48);
    put(&w, crc, 32);
    put(&w, 0, 1);
    put(&w, orig, 24);
    put(&w, 0x8000u >> 6 | 0x8000u >> 7, 16);                /* ranges 0x60.. and 0x70.. */
    put(&w, 0x8000u >> 1 | 0x8000u >> 2 | 0x8000u >> 3, 16); /* a b c */
    put(&w, 0x8000u >> 10, 16);                              /* z */
    put(&w, 2, 3);
    size_t nsel = (nsym + 49) / 50;
    put(&w, nsel, 15);
    for (size_t i = 0; i < nsel; i++)
        put(&w, 0, 1); /* table 0 */
    for (int t = 0; t < 2; t++)
        put_lengths(&w, tab[t]);
    for (size_t i = 0; i < nsym; i++)
        put(&w, code[sym[i]], len0[sym[i]]); /* the low bits where it does not fit */
    put(&w, 0x177245385090ull, 48);
    put(&w, crc, 32); /* combined CRC of one block: its block CRC */
    if (w.bits % 8)
        put(&w, 0, 8 - (int)(w.bits % 8));
    return w.bits <= 8 * cap ? w.bits / 8 : 0;
}

size_t bz2_oversub_stream(uint8_t *dst, size_t cap)
{
    int fits;
    size_t n = craft(dst, cap, lens[0], &fits);
    return fits ? n : 0;
}

size_t bz2_oversub_stream_with(uint8_t *dst, size_t cap, const int *len0)
{
    int fits;
    return craft(dst, cap, len0, &fits);
}
