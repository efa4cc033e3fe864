/* bz2_bitio.c - the slow paths of the bit writer/reader (see bz2_bitio.h). */
#include "bz2_bitio.h"

#include <stdlib.h>

void bz2_bw_init(bz2_bitwriter *w, size_t initial_cap)
{
    memset(w, 0, sizeof *w);
    if (initial_cap < 64)
        initial_cap = 64;
    w->buf = malloc(initial_cap);
    if (w->buf)
        w->cap = initial_cap;
    else
        w->oom = 1;
}

void bz2_bw_free(bz2_bitwriter *w)
{
    free(w->buf);
    memset(w, 0, sizeof *w);
}

int bz2_bw_reserve(bz2_bitwriter *w, size_t bytes)
{
    if (w->oom)
        return -1;
    if (w->cap - w->len >= bytes)
        return 0;
    size_t cap = w->cap ? w->cap : 64;
    while (cap - w->len < bytes)
        cap *= 2;
    uint8_t *nb = realloc(w->buf, cap);
    if (!nb) {
        w->oom = 1;
        return -1;
    }
    w->buf = nb;
    w->cap = cap;
    return 0;
}

void bz2_bw_append(bz2_bitwriter *w, const uint8_t *src, uint64_t nbits)
{
    if (bz2_bw_reserve(w, (size_t)(nbits / 8) + 16) != 0)
        return;
    size_t whole = (size_t)(nbits / 8);
    if (w->nacc % 8 == 0) {
        /* Byte aligned: drain the accumulator and copy. */
        while (w->nacc) {
            w->buf[w->len++] = (uint8_t)(w->acc >> 56);
            w->acc <<= 8;
            w->nacc -= 8;
        }
        memcpy(w->buf + w->len, src, whole);
        w->len += whole;
    } else {
        for (size_t i = 0; i < whole; i++)
            bz2_bw_put(w, 8, src[i]);
    }
    unsigned rest = (unsigned)(nbits % 8);
    if (rest)
        bz2_bw_put(w, rest, (uint32_t)(src[whole] >> (8 - rest)));
}

void bz2_bw_flush(bz2_bitwriter *w)
{
    if (bz2_bw_reserve(w, 8) != 0)
        return;
    while (w->nacc > 0) {
        w->buf[w->len++] = (uint8_t)(w->acc >> 56);
        w->acc <<= 8;
        w->nacc = w->nacc >= 8 ? w->nacc - 8 : 0;
    }
    w->acc = 0;
}

void bz2_br_init(bz2_bitreader *r, const uint8_t *src, size_t len, uint64_t bit)
{
    r->src = src;
    r->len = len;
    r->buf = 0;
    r->nbuf = 0;
    r->pad = 0;
    if (bit >= (uint64_t)len * 8) {
        /* At or past the end: every bit reads as padding (an overrun). */
        r->next = len;
        r->pad = bit - (uint64_t)len * 8;
        return;
    }
    r->next = (size_t)(bit / 8);
    unsigned skip = (unsigned)(bit % 8);
    if (skip) {
        bz2_br_refill(r);
        bz2_br_skip(r, skip);
    }
}
