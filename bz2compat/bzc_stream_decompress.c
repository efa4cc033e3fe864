/*
 * bzc_stream_decompress.c - libbz2's stream decompressor:
 * BZ2_bzDecompressInit, BZ2_bzDecompress and BZ2_bzDecompressEnd, decoding
 * the first stream in libbz2's reading order (bzc_decode.c's pieces) as
 * input arrives (docs/BZIP2.md, "libbz2 compatibility").
 *
 * Input is buffered from the start of the block being read; a block is
 * decoded whole (bz2_decode_block) and its output handed out as avail_out
 * allows. Retrying a block on every small piece of input would cost its
 * size each time, so a retry waits until the buffered input has doubled,
 * or for a call that brings nothing or a large piece (then the caller has
 * offered all it has for now), and once an end-of-stream magic appears in
 * the buffer: from then on every call
 * tries, so the stream's end is found in the call that brings it and the
 * bytes after it are left in avail_in, as libbz2 leaves them. A block whose
 * CRC is wrong is kept (BZ2_KEEP_BAD_CRC): libbz2 hands out its bytes and
 * reports BZ_DATA_ERROR in the call that hands out the last of them.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bz2_format.h"
#include "bz2_stages.h"
#include "bzc_internal.h"

/* A call that takes at least this much input tries an incomplete block at its end. */
#define BZC_TRY_PIECE ((size_t)65536)

typedef struct bzc_dstate {
    bz_stream *strm;
    uint8_t *in; /* input from the byte holding bit pos */
    size_t in_len, in_cap;
    uint64_t pos; /* next bit to read */
    int level;    /* 0: header not read yet */
    uint32_t combined;
    uint8_t *out; /* decoded bytes not yet handed out */
    size_t out_len, out_off;
    int verdict;   /* an error to report once out is drained; BZ_STREAM_END: ended */
    size_t try_at; /* retry a block when in_len reaches this */
    size_t scanned;
    uint64_t win;
    int eos_seen;
} bzc_dstate;

static bzc_dstate *dstate_of(bz_stream *strm)
{
    bzc_dstate *s = strm ? strm->state : NULL;
    return s && s->strm == strm ? s : NULL;
}

static void scan_eos(bzc_dstate *s)
{
    for (; s->scanned < s->in_len && !s->eos_seen; s->scanned++) {
        s->win = s->win << 8 | s->in[s->scanned];
        for (unsigned k = 0; k < 8 && s->scanned >= 6; k++)
            if (((s->win >> k) & 0xffffffffffffULL) == BZ2_EOS_MAGIC)
                s->eos_seen = 1;
    }
}

/* Drop the input before the byte holding bit pos. */
static void compact(bzc_dstate *s)
{
    size_t drop = (size_t)(s->pos / 8);
    memmove(s->in, s->in + drop, s->in_len - drop);
    s->in_len -= drop;
    s->pos -= (uint64_t)drop * 8;
    s->scanned = 0;
    s->win = 0;
    s->eos_seen = 0;
    s->try_at = 0;
    scan_eos(s);
}

static int block(bzc_dstate *s)
{
    if (!s->eos_seen && s->in_len < s->try_at)
        return BZC_NEED_INPUT;
    bz2_dblock r;
    bz2_decode_block_flags(s->in, s->in_len, s->pos, 0, BZ2_KEEP_BAD_CRC, &r);
    if (r.status == GC_E_TRUNCATED) {
        free(r.out);
        s->try_at = s->in_len * 2;
        return BZC_NEED_INPUT;
    }
    int rc = r.status == GC_OK ? BZ_OK : r.status == GC_E_NOMEM ? BZ_MEM_ERROR : BZ_DATA_ERROR;
    /* libbz2 rejects a block over its level while decoding it, before any
     * output; a wrong CRC only once the block's bytes are all out */
    bool sound = r.nblock <= (uint32_t)s->level * 100000u;
    if (!sound)
        rc = BZ_DATA_ERROR;
    free(s->out);
    s->out = r.out;
    s->out_off = 0;
    s->out_len = rc == BZ_OK || (r.status == GC_E_CRC && sound) ? r.out_len : 0;
    if (r.status == GC_E_CRC && sound)
        s->pos = r.end_bit; /* libbz2 read the whole block */
    if (rc != BZ_OK)
        return rc;
    s->combined = bz2_combine_crc(s->combined, r.stored_crc);
    s->pos = r.end_bit;
    compact(s);
    return BZ_OK;
}

/* One step on the buffered input: BZ_OK (progress), BZC_NEED_INPUT,
 * BZ_STREAM_END or a verdict. */
static int step(bzc_dstate *s)
{
    if (!s->level) {
        int rc = bzc_read_header(s->in, s->in_len, &s->level);
        if (rc == BZ_OK)
            s->pos = 32;
        return rc;
    }
    int m = bzc_which_magic(s->in, s->in_len, s->pos);
    if (m == BZC_BLOCK)
        return block(s);
    if (m != BZC_EOS)
        return m;
    if (s->pos + 80 > (uint64_t)s->in_len * 8)
        return BZC_NEED_INPUT;
    return bzc_read32(s->in, s->pos + 48) == s->combined ? BZ_STREAM_END : BZ_DATA_ERROR;
}

/* Take more input: at most as much again as is buffered, so one huge
 * avail_in never makes the buffer larger than twice a block. */
static int take(bzc_dstate *s, bz_stream *strm, size_t *took)
{
    size_t n = s->in_len > 65536 ? s->in_len : 65536;
    n = n < strm->avail_in ? n : strm->avail_in;
    if (s->in_len + n > s->in_cap) {
        size_t cap = s->in_len + n;
        uint8_t *p = realloc(s->in, cap);
        if (!p)
            return BZ_MEM_ERROR;
        s->in = p;
        s->in_cap = cap;
    }
    memcpy(s->in + s->in_len, strm->next_in, n);
    s->in_len += n;
    strm->next_in += n;
    strm->avail_in -= (unsigned)n;
    *took = n;
    scan_eos(s);
    return BZ_OK;
}

static void give(bzc_dstate *s, bz_stream *strm)
{
    size_t n = s->out_len - s->out_off;
    n = n < strm->avail_out ? n : strm->avail_out;
    if (n)
        memcpy(strm->next_out, s->out + s->out_off, n);
    strm->next_out += n;
    strm->avail_out -= (unsigned)n;
    uint64_t t = ((uint64_t)strm->total_out_hi32 << 32 | strm->total_out_lo32) + n;
    strm->total_out_lo32 = (unsigned)t;
    strm->total_out_hi32 = (unsigned)(t >> 32);
    s->out_off += n;
}

/* Return to avail_in the bytes from `keep` on that this call brought (at
 * most *took: earlier calls' are no longer the caller's), as libbz2 leaves
 * unread what lies past the piece it stopped after. */
static void untake(bzc_dstate *s, bz_stream *strm, size_t *took, size_t keep)
{
    size_t extra = s->in_len > keep ? s->in_len - keep : 0;
    extra = extra < *took ? extra : *took;
    strm->next_in -= extra;
    strm->avail_in += (unsigned)extra;
    s->in_len -= extra;
    *took -= extra;
    s->scanned = 0;
    s->win = 0;
    s->eos_seen = 0;
    scan_eos(s);
}

static void count_in(bz_stream *strm, size_t n)
{
    uint64_t t = ((uint64_t)strm->total_in_hi32 << 32 | strm->total_in_lo32) + n;
    strm->total_in_lo32 = (unsigned)t;
    strm->total_in_hi32 = (unsigned)(t >> 32);
}

int BZ2_bzDecompressInit(bz_stream *strm, int verbosity, int small)
{
    if (!strm || (small != 0 && small != 1) || verbosity < 0 || verbosity > 4)
        return BZ_PARAM_ERROR;
    bzc_dstate *s = bzc_state_alloc(strm, sizeof *s);
    if (!s)
        return BZ_MEM_ERROR;
    s->strm = strm;
    strm->state = s;
    strm->total_in_lo32 = strm->total_in_hi32 = strm->total_out_lo32 = strm->total_out_hi32 = 0;
    return BZ_OK;
}

int BZ2_bzDecompress(bz_stream *strm)
{
    bzc_dstate *s = dstate_of(strm);
    if (!s)
        return BZ_PARAM_ERROR;
    if (s->verdict == BZ_STREAM_END)
        return BZ_SEQUENCE_ERROR;
    size_t took = 0;
    bool forced = false; /* this call tried an incomplete block already */
    int rc;
    for (;;) {
        give(s, strm);
        if (s->out_off < s->out_len)
            break;
        if (s->verdict) {
            rc = s->verdict;
            goto out;
        }
        rc = step(s);
        if (rc == BZ_OK) {
            if (s->out_len) /* a block's output waits: read no further yet */
                untake(s, strm, &took, (size_t)((s->pos + 7) / 8));
            continue;
        }
        if (rc == BZ_STREAM_END) {
            untake(s, strm, &took, (size_t)((s->pos + 80 + 7) / 8));
            s->verdict = BZ_STREAM_END;
            goto out;
        }
        if (rc != BZC_NEED_INPUT) {
            if (s->out_len) /* a block whose CRC is wrong: its bytes come first */
                untake(s, strm, &took, (size_t)((s->pos + 7) / 8));
            s->verdict = rc;
            continue;
        }
        if (!strm->avail_in) {
            /* Nothing more is offered now: a call that brought nothing (the caller
             * asks for what it has) or a large piece tries the block however little
             * the buffer grew, so all decodable output comes out as libbz2 gives
             * it; small pieces keep to the doubling rule. */
            if ((took == 0 || took >= BZC_TRY_PIECE) && s->try_at > s->in_len && !forced) {
                forced = true;
                s->try_at = 0;
                continue;
            }
            break;
        }
        size_t n = 0;
        if (take(s, strm, &n) != BZ_OK) {
            rc = BZ_MEM_ERROR;
            goto out;
        }
        took += n;
    }
    rc = BZ_OK;
out:
    count_in(strm, took);
    return rc;
}

int BZ2_bzDecompressEnd(bz_stream *strm)
{
    bzc_dstate *s = dstate_of(strm);
    if (!s)
        return BZ_PARAM_ERROR;
    bzc_state_free(strm, s, s->in, s->out);
    return BZ_OK;
}
