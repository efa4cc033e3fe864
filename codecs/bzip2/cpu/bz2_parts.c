/*
 * bz2_parts.c - the rules of a stream's compress parts (bzip2.h, "a
 * stream's parts"; docs/BZIP2.md, "Streaming"): where a part ends, and how
 * the parts' streams join into one. The daemon's stream hooks
 * (codec_bzip2.c) and the client library's local streams
 * (libclient/client_local_stream.c) both call these, so a stream gives the
 * same bytes wherever it runs.
 */
#include "bzip2.h"

#include <string.h>

size_t bz2_stream_cut_compress(bz2_rle1_walk *w, const uint8_t *buf, size_t avail, bool final, bool flush,
                               int level)
{
    const size_t part = BZ2_STREAM_COMPRESS_PART;
    size_t at = bz2_rle1_walk_to(buf, avail, final, w, part, bz2_block_limit(level));
    if (!at && !final && !flush && avail >= part)
        at = w->start; /* certain: the walk stays 259 bytes behind what has arrived */
    size_t take = 0;
    if (at)
        take = at;
    else if (avail < part)
        take = final || flush ? avail : 0;
    else if (final || flush || avail >= 2 * part)
        take = avail < 2 * part ? avail : 2 * part;
    if (take)
        memset(w, 0, sizeof *w);
    return take;
}

int bz2_join_next(bz2_joiner *j, const uint8_t *part, size_t len, uint32_t blocks, bz2_joint *jt, gc_error *err)
{
    uint32_t combined;
    int rc = bz2_stream_body(part, len, &jt->body_bits, &combined, err);
    if (rc != GC_OK)
        return rc;
    jt->from = j->sp;
    jt->header = !j->started;
    jt->level = j->level;
    if (!j->started) {
        uint8_t header[5];
        bz2_splice_header(&j->sp, j->level, header);
    }
    j->started = true;
    /* the body starts at bit 32, after the 4-byte header: byte aligned */
    bz2_splice_skip(&j->sp, part + 4, jt->body_bits);
    j->combined = bz2_combine_parts(j->combined, blocks, combined);
    jt->bytes = (size_t)(((j->sp.bits - j->sp.nacc) - (jt->from.bits - jt->from.nacc)) / 8);
    return GC_OK;
}

/* bz2_splice works in place: the output never begins after the body, which starts at byte 4. */
size_t bz2_join_place(const bz2_joint *jt, uint8_t *part)
{
    bz2_splicer sp = jt->from;
    size_t n = jt->header ? bz2_splice_header(&sp, jt->level, part) : 0;
    return n + bz2_splice(&sp, part + 4, jt->body_bits, part + n);
}

size_t bz2_join_finish(bz2_joiner *j, uint8_t *out)
{
    return j->started ? bz2_splice_finish(&j->sp, j->combined, out) : 0;
}
