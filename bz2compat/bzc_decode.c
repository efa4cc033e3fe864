/*
 * bzc_decode.c - libbz2's verdict on one whole bzip2 stream in memory.
 *
 * libbz2 decodes exactly one stream per decompressor and judges the input in
 * the order it reads it: the "BZh" and level bytes one by one (a wrong one is
 * BZ_DATA_ERROR_MAGIC), then each block or end-of-stream magic byte by byte,
 * each block whole before any of its output, the block CRC once the block's
 * output is delivered, the combined CRC at the end marker. The input ending
 * before a verdict is "no progress" (BZ_OK with no output room left means
 * BZ_OUTBUFF_FULL to the buffer call, otherwise BZ_UNEXPECTED_EOF). The
 * blocks are decoded by the CPU engine (bz2_decode_block); this file only
 * walks the pieces between them in libbz2's order.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "bz2_format.h"
#include "bz2_stages.h"
#include "bzc_internal.h"

/* The 8 bits at bit pos of src (bit 0 = MSB of src[0]); pos + 8 <= len * 8. */
static unsigned byte_at(const uint8_t *src, uint64_t pos)
{
    size_t i = (size_t)(pos / 8);
    unsigned sh = (unsigned)(pos % 8);
    unsigned v = (unsigned)src[i] << 8 | (sh ? src[i + 1] : 0);
    return (v >> (8 - sh)) & 0xff;
}

/* Which magic begins at bit pos, judged byte by byte as libbz2 reads it:
 * BZC_BLOCK, BZC_EOS, BZ_DATA_ERROR on a wrong byte, BZC_NEED_INPUT
 * when the input ends first. A 48-bit magic is matched only whole. */
int bzc_which_magic(const uint8_t *src, size_t len, uint64_t pos)
{
    uint64_t bits = (uint64_t)len * 8;
    if (pos + 8 > bits)
        return BZC_NEED_INPUT;
    unsigned first = byte_at(src, pos);
    uint64_t magic = first == (BZ2_BLOCK_MAGIC >> 40) ? BZ2_BLOCK_MAGIC
                     : first == (BZ2_EOS_MAGIC >> 40) ? BZ2_EOS_MAGIC
                                                      : 0;
    if (!magic)
        return BZ_DATA_ERROR;
    for (unsigned k = 1; k < 6; k++) {
        if (pos + 8 * k + 8 > bits)
            return BZC_NEED_INPUT;
        if (byte_at(src, pos + 8 * k) != ((magic >> (40 - 8 * k)) & 0xff))
            return BZ_DATA_ERROR;
    }
    return magic == BZ2_BLOCK_MAGIC ? BZC_BLOCK : BZC_EOS;
}

uint32_t bzc_read32(const uint8_t *src, uint64_t pos)
{
    uint32_t v = 0;
    for (unsigned k = 0; k < 4; k++)
        v = v << 8 | byte_at(src, pos + 8 * k);
    return v;
}

/* The stream header: BZ_OK and *level, or a verdict. */
int bzc_read_header(const uint8_t *src, size_t len, int *level)
{
    static const char magic[3] = { 'B', 'Z', 'h' };
    for (size_t i = 0; i < 3; i++) {
        if (i >= len)
            return BZC_NEED_INPUT;
        if (src[i] != (uint8_t)magic[i])
            return BZ_DATA_ERROR_MAGIC;
    }
    if (len < 4)
        return BZC_NEED_INPUT;
    if (src[3] < '1' || src[3] > '9')
        return BZ_DATA_ERROR_MAGIC;
    *level = src[3] - '0';
    return BZ_OK;
}

/* One block at bit *pos: its output appended to dst (as much as fits),
 * *combined and *pos advanced. BZ_OK or a verdict. */
static int one_block(const uint8_t *src, size_t len, int level, uint64_t *pos, uint8_t *dst, size_t cap, size_t *n,
                     uint32_t *combined)
{
    bz2_dblock r;
    bz2_decode_block(src, len, *pos, 0, &r);
    int rc = r.status == GC_OK            ? BZ_OK
             : r.status == GC_E_TRUNCATED ? BZC_NEED_INPUT
             : r.status == GC_E_NOMEM     ? BZ_MEM_ERROR
                                          : BZ_DATA_ERROR;
    if (rc == BZ_OK && r.nblock > (uint32_t)level * 100000u)
        rc = BZ_DATA_ERROR;
    if (r.bad_len > cap - *n)
        rc = BZ_OUTBUFF_FULL; /* libbz2 fills the room before it finds the fault */
    if (rc == BZ_OK) {
        size_t room = cap - *n, take = r.out_len < room ? r.out_len : room;
        if (take)
            memcpy(dst + *n, r.out, take);
        *n += take;
        if (take < r.out_len)
            rc = BZ_OUTBUFF_FULL;
        *combined = bz2_combine_crc(*combined, r.stored_crc);
        *pos = r.end_bit;
    }
    free(r.out);
    return rc;
}

static int walk(const uint8_t *src, size_t len, uint8_t *dst, size_t cap, size_t *n)
{
    int level = 0;
    int rc = bzc_read_header(src, len, &level);
    if (rc != BZ_OK)
        return rc;
    uint64_t pos = 32;
    uint32_t combined = 0;
    for (;;) {
        int m = bzc_which_magic(src, len, pos);
        if (m != BZC_BLOCK && m != BZC_EOS)
            return m;
        if (m == BZC_EOS) {
            if (pos + 80 > (uint64_t)len * 8)
                return BZC_NEED_INPUT;
            return bzc_read32(src, pos + 48) == combined ? BZ_STREAM_END : BZ_DATA_ERROR;
        }
        if ((rc = one_block(src, len, level, &pos, dst, cap, n, &combined)) != BZ_OK)
            return rc;
    }
}

int bzc_decode_first(const uint8_t *src, size_t len, uint8_t *dst, size_t cap, size_t *out_len)
{
    size_t n = 0;
    int rc = walk(src, len, dst, cap, &n);
    if (rc == BZ_STREAM_END) {
        *out_len = n;
        return BZ_OK;
    }
    if (rc == BZC_NEED_INPUT)
        return n == cap ? BZ_OUTBUFF_FULL : BZ_UNEXPECTED_EOF;
    return rc;
}
