/*
 * bz2_bitio.h - MSB-first bit writer and bounds-checked bit reader.
 *
 * bzip2 is a pure bit stream: fields are written most significant bit
 * first and blocks are not byte aligned, so both sides work in bits.
 * The hot paths are inline; growth and bulk copies live in bz2_bitio.c.
 */
#ifndef GC_BZ2_BITIO_H
#define GC_BZ2_BITIO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- writer ---- */
typedef struct bz2_bitwriter {
    uint8_t *buf;
    size_t len; /* whole bytes in buf */
    size_t cap;
    uint64_t acc; /* pending bits, left-aligned at bit 63 */
    unsigned nacc;
    int oom; /* sticky: an allocation failed, the content is invalid */
} bz2_bitwriter;

void bz2_bw_init(bz2_bitwriter *w, size_t initial_cap);
void bz2_bw_free(bz2_bitwriter *w);
/* Make room for at least `bytes` more whole bytes (slow path). */
int bz2_bw_reserve(bz2_bitwriter *w, size_t bytes);
/* Append the first nbits bits of src (MSB first) to w. */
void bz2_bw_append(bz2_bitwriter *w, const uint8_t *src, uint64_t nbits);
/* Pad with zero bits to a byte boundary and move everything to buf. */
void bz2_bw_flush(bz2_bitwriter *w);

static inline uint64_t bz2_bw_bits(const bz2_bitwriter *w)
{
    return (uint64_t)w->len * 8 + w->nacc;
}

/* Write the low n bits of v (n <= 32). */
static inline void bz2_bw_put(bz2_bitwriter *w, unsigned n, uint32_t v)
{
    if (n == 0)
        return;
    w->acc |= (uint64_t)(v & (uint32_t)((1ull << n) - 1)) << (64 - w->nacc - n);
    w->nacc += n;
    if (w->nacc >= 32) {
        if (w->cap - w->len < 4 && bz2_bw_reserve(w, 4) != 0) {
            w->acc = 0; /* content already invalid (oom is sticky) */
            w->nacc = 0;
            return;
        }
        uint32_t top = (uint32_t)(w->acc >> 32);
        w->buf[w->len] = (uint8_t)(top >> 24);
        w->buf[w->len + 1] = (uint8_t)(top >> 16);
        w->buf[w->len + 2] = (uint8_t)(top >> 8);
        w->buf[w->len + 3] = (uint8_t)top;
        w->len += 4;
        w->acc <<= 32;
        w->nacc -= 32;
    }
}

/* ---- reader ---- */
typedef struct bz2_bitreader {
    const uint8_t *src;
    size_t len;    /* bytes in src */
    size_t next;   /* next byte to load into buf */
    uint64_t buf;  /* unread bits, left-aligned at bit 63 */
    unsigned nbuf; /* valid bits in buf (may include zero padding past end) */
    uint64_t pad;  /* zero bits appended past the end of src */
} bz2_bitreader;

/* Position the reader at bit offset `bit` of src[0..len). */
void bz2_br_init(bz2_bitreader *r, const uint8_t *src, size_t len, uint64_t bit);

static inline void bz2_br_refill(bz2_bitreader *r)
{
    if (r->nbuf > 56)
        return;
    if (r->len - r->next >= 8) {
        uint64_t v;
        memcpy(&v, r->src + r->next, 8);
        v = __builtin_bswap64(v);
        r->buf |= v >> r->nbuf;
        r->next += (63 - r->nbuf) >> 3;
        r->nbuf |= 56;
        return;
    }
    while (r->nbuf <= 56) {
        if (r->next < r->len) {
            r->buf |= (uint64_t)r->src[r->next++] << (56 - r->nbuf);
        } else {
            r->pad += 8; /* zeros past the end: caught by bz2_br_overrun */
        }
        r->nbuf += 8;
    }
}

/* Look at the next n (1..32) bits without consuming them. */
static inline uint32_t bz2_br_peek(bz2_bitreader *r, unsigned n)
{
    bz2_br_refill(r);
    return (uint32_t)(r->buf >> (64 - n));
}

static inline void bz2_br_skip(bz2_bitreader *r, unsigned n)
{
    r->buf <<= n;
    r->nbuf -= n;
}

static inline uint32_t bz2_br_get(bz2_bitreader *r, unsigned n)
{
    uint32_t v = bz2_br_peek(r, n);
    bz2_br_skip(r, n);
    return v;
}

/* Bit offset of the next unread bit (may exceed len*8 after an overrun). */
static inline uint64_t bz2_br_pos(const bz2_bitreader *r)
{
    return ((uint64_t)r->next * 8 + r->pad) - r->nbuf;
}

/* True once a read went past the end of the input. */
static inline int bz2_br_overrun(const bz2_bitreader *r)
{
    return bz2_br_pos(r) > (uint64_t)r->len * 8;
}

#ifdef __cplusplus
}
#endif

#endif
