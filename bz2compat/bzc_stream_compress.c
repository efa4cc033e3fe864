/*
 * bzc_stream_compress.c - libbz2's stream compressor: BZ2_bzCompressInit,
 * BZ2_bzCompress and BZ2_bzCompressEnd with libbz2's action state machine
 * and return codes (docs/BZIP2.md, "libbz2 compatibility").
 *
 * Input is buffered. A session that ends before BZC_PART bytes and asks no
 * BZ_FLUSH is compressed whole at BZ_FINISH by bzc_compress_into (gpucompd
 * when it answers). Otherwise the buffered input is compressed in process as
 * a part whenever the buffer fills (up to its last block start, docs/BZIP2.md
 * section 3, so the parts' blocks are the whole input's, bzip2's; the rest
 * stays to start the next part) or a flush asks for it (all of it: a flush
 * ends a block, as libbz2's does), and the parts' blocks are spliced into one
 * stream (bz2_splice, the combined CRC folded
 * with the part's block count, which only the in-process encoder tells): the
 * memory held stays bounded and a flush makes everything given so far
 * decodable, as libbz2 promises.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "bz2_format.h"
#include "bzc_internal.h"
#include "bzip2.h"
#include "gpucomp.h"

/* Most input buffered before a part is compressed: more than one block's
 * input (at most BZ2_MAX_BLOCK_OUTPUT, long runs), so a full buffer always
 * holds a block start to cut at. */
#define BZC_PART ((size_t)48 << 20)

enum { M_IDLE, M_RUNNING, M_FLUSHING, M_FINISHING };

typedef struct bzc_cstate {
    bz_stream *strm;
    int level, mode;
    unsigned avail_in_expect; /* input a flush or finish still has to take */
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out; /* compressed bytes not yet handed out */
    size_t out_len, out_off, out_cap;
    int parted;   /* parts were spliced: the stream is built here */
    int finished; /* the end of the stream is in out */
    bz2_splicer sp;
    uint32_t combined;
} bzc_cstate;

static bzc_cstate *state_of(bz_stream *strm)
{
    bzc_cstate *s = strm ? strm->state : NULL;
    return s && s->strm == strm ? s : NULL;
}

static int out_append(bzc_cstate *s, const uint8_t *p, size_t n)
{
    if (s->out_len + n > s->out_cap) {
        size_t cap = s->out_len + n;
        uint8_t *o = realloc(s->out, cap);
        if (!o)
            return BZ_MEM_ERROR;
        s->out = o;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return BZ_OK;
}

/* Compress the first n bytes of the buffered input in process, splice
 * their blocks on, and keep the rest for the next part. */
static int part(bzc_cstate *s, size_t n)
{
    bz2_options o = { .level = s->level, .threads = 0, .job = NULL };
    uint8_t *z = NULL, hdr[5];
    size_t zl = 0;
    uint32_t blocks = 0, crc = 0;
    uint64_t bits = 0;
    gc_error err;
    if (bz2_compress_counted(s->in, n, &o, &z, &zl, &blocks, &err) != GC_OK ||
        bz2_stream_body(z, zl, &bits, &crc, &err) != GC_OK) {
        free(z);
        return BZ_MEM_ERROR;
    }
    int rc = BZ_OK;
    if (!s->parted)
        rc = out_append(s, hdr, bz2_splice_header(&s->sp, s->level, hdr));
    if (rc == BZ_OK)
        rc = out_append(s, z, bz2_splice(&s->sp, z + 4, bits, z));
    free(z);
    s->combined = bz2_combine_parts(s->combined, blocks, crc);
    s->parted = 1;
    memmove(s->in, s->in + n, s->in_len - n);
    s->in_len -= n;
    return rc;
}

/* A full buffer: a part up to the start of its last block, which may go on
 * past the buffer (the buffer starts at a block start, and a block's input
 * is shorter than the buffer, so that start is past 0). */
static int part_full(bzc_cstate *s)
{
    size_t from = 0;
    (void)bz2_rle1_next_start(s->in, s->in_len, &from, s->in_len, bz2_block_limit(s->level));
    return part(s, from ? from : s->in_len);
}

static int finish(bzc_cstate *s)
{
    s->finished = 1;
    if (s->parted) {
        uint8_t tail[11];
        int rc = s->in_len ? part(s, s->in_len) : BZ_OK;
        return rc == BZ_OK ? out_append(s, tail, bz2_splice_finish(&s->sp, s->combined, tail)) : rc;
    }
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = s->level;
    size_t cap = gpucomp_compress_bound(&o, s->in_len), n = 0;
    free(s->out);
    s->out = malloc(cap);
    s->out_cap = s->out ? cap : 0;
    if (!s->out ||
        bzc_compress_into((const char *)s->in, s->in_len, s->level, (char *)s->out, cap, &n) != GPUCOMP_OK)
        return BZ_MEM_ERROR;
    s->out_len = n;
    s->in_len = 0;
    return BZ_OK;
}

static void count(unsigned *lo, unsigned *hi, size_t n)
{
    uint64_t t = ((uint64_t)*hi << 32 | *lo) + n;
    *lo = (unsigned)t;
    *hi = (unsigned)(t >> 32);
}

static size_t drain(bzc_cstate *s, bz_stream *strm)
{
    size_t n = s->out_len - s->out_off;
    n = n < strm->avail_out ? n : strm->avail_out;
    if (n)
        memcpy(strm->next_out, s->out + s->out_off, n);
    strm->next_out += n;
    strm->avail_out -= (unsigned)n;
    count(&strm->total_out_lo32, &strm->total_out_hi32, n);
    s->out_off += n;
    if (s->out_off == s->out_len)
        s->out_off = s->out_len = 0;
    return n;
}

static int take_input(bzc_cstate *s, bz_stream *strm, size_t *took)
{
    size_t n = BZC_PART - s->in_len;
    n = n < strm->avail_in ? n : strm->avail_in;
    if (s->in_len + n > s->in_cap) {
        size_t cap = s->in_cap ? s->in_cap : 65536;
        while (cap < s->in_len + n)
            cap *= 2;
        cap = cap < BZC_PART ? cap : BZC_PART;
        uint8_t *p = realloc(s->in, cap);
        if (!p)
            return BZ_MEM_ERROR;
        s->in = p;
        s->in_cap = cap;
    }
    if (n)
        memcpy(s->in + s->in_len, strm->next_in, n);
    s->in_len += n;
    strm->next_in += n;
    strm->avail_in -= (unsigned)n;
    count(&strm->total_in_lo32, &strm->total_in_hi32, n);
    if (s->mode != M_RUNNING)
        s->avail_in_expect -= (unsigned)n;
    *took += n;
    return BZ_OK;
}

/* Move input in and output out as far as both buffers allow: BZ_OK with
 * *progress set, or BZ_MEM_ERROR. */
static int pump(bzc_cstate *s, bz_stream *strm, int *progress)
{
    size_t moved = 0;
    int rc = BZ_OK;
    for (;;) {
        moved += drain(s, strm);
        if (s->out_len || rc != BZ_OK)
            break;
        rc = take_input(s, strm, &moved);
        if (rc != BZ_OK)
            break;
        if (s->in_len == BZC_PART && strm->avail_in)
            rc = part_full(s);
        else if (strm->avail_in == 0 && s->mode == M_FLUSHING && s->in_len)
            rc = part(s, s->in_len);
        else if (strm->avail_in == 0 && s->mode == M_FINISHING && !s->finished)
            rc = finish(s);
        else
            break;
    }
    *progress = moved > 0;
    return rc;
}

int BZ2_bzCompressInit(bz_stream *strm, int blockSize100k, int verbosity, int workFactor)
{
    if (!strm || blockSize100k < 1 || blockSize100k > 9 || workFactor < 0 || workFactor > 250 || verbosity < 0 ||
        verbosity > 4)
        return BZ_PARAM_ERROR;
    /* Only the state comes from bzalloc: libbz2's callers size their
     * allocators for libbz2's state, not for our buffers. */
    bzc_cstate *s = bzc_state_alloc(strm, sizeof *s);
    if (!s)
        return BZ_MEM_ERROR;
    s->strm = strm;
    s->level = blockSize100k;
    s->mode = M_RUNNING;
    strm->state = s;
    strm->total_in_lo32 = strm->total_in_hi32 = strm->total_out_lo32 = strm->total_out_hi32 = 0;
    return BZ_OK;
}

/* The flush and finish states: their input is fixed when they begin. */
static int ending(bzc_cstate *s, bz_stream *strm, int action, int want, int mode_ok)
{
    if (action != want || s->avail_in_expect != strm->avail_in)
        return BZ_SEQUENCE_ERROR;
    int progress = 0;
    if (pump(s, strm, &progress) != BZ_OK)
        return BZ_MEM_ERROR;
    if (want == BZ_FINISH && !progress)
        return BZ_SEQUENCE_ERROR;
    if (s->avail_in_expect || s->out_len || (want == BZ_FLUSH ? s->in_len != 0 : !s->finished))
        return mode_ok;
    s->mode = want == BZ_FLUSH ? M_RUNNING : M_IDLE;
    return want == BZ_FLUSH ? BZ_RUN_OK : BZ_STREAM_END;
}

int BZ2_bzCompress(bz_stream *strm, int action)
{
    bzc_cstate *s = state_of(strm);
    if (!s)
        return BZ_PARAM_ERROR;
    if (s->mode == M_RUNNING) {
        if (action == BZ_RUN) {
            int progress = 0;
            if (pump(s, strm, &progress) != BZ_OK)
                return BZ_MEM_ERROR;
            return progress ? BZ_RUN_OK : BZ_PARAM_ERROR;
        }
        if (action != BZ_FLUSH && action != BZ_FINISH)
            return BZ_PARAM_ERROR;
        s->avail_in_expect = strm->avail_in;
        s->mode = action == BZ_FLUSH ? M_FLUSHING : M_FINISHING;
    }
    if (s->mode == M_FLUSHING)
        return ending(s, strm, action, BZ_FLUSH, BZ_FLUSH_OK);
    if (s->mode == M_FINISHING)
        return ending(s, strm, action, BZ_FINISH, BZ_FINISH_OK);
    return BZ_SEQUENCE_ERROR;
}

int BZ2_bzCompressEnd(bz_stream *strm)
{
    bzc_cstate *s = state_of(strm);
    if (!s)
        return BZ_PARAM_ERROR;
    bzc_state_free(strm, s, s->in, s->out);
    return BZ_OK;
}
