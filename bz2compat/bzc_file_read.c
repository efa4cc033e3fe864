/*
 * bzc_file_read.c - libbz2's reading FILE calls: BZ2_bzReadOpen, BZ2_bzRead,
 * BZ2_bzReadGetUnused and BZ2_bzReadClose, with libbz2 1.0.8's argument
 * checks and bzerror codes (docs/BZIP2.md, "libbz2 compatibility"), on the
 * shim's own stream decompressor: the FILE is read BZ_MAX_UNUSED bytes at a
 * time into the handle's buffer, one stream per handle, and the bytes after
 * its end stay in the buffer for BZ2_bzReadGetUnused (bzip2 reads
 * concatenated streams by opening a new handle with them).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "bzc_file.h"

/* End of file, found as libbz2 finds it: by reading a byte and putting it back. */
static int at_eof(FILE *f)
{
    int c = fgetc(f);
    if (c == EOF)
        return 1;
    ungetc(c, f);
    return 0;
}

BZFILE *BZ2_bzReadOpen(int *bzerror, FILE *f, int verbosity, int small, void *unused, int nUnused)
{
    bzc_seterr(bzerror, NULL, BZ_OK);
    if (!f || (small != 0 && small != 1) || verbosity < 0 || verbosity > 4 || (!unused && nUnused != 0) ||
        (unused && (nUnused < 0 || nUnused > BZ_MAX_UNUSED))) {
        bzc_seterr(bzerror, NULL, BZ_PARAM_ERROR);
        return NULL;
    }
    bzc_file *b = bzc_file_new(f, bzerror);
    if (!b)
        return NULL;
    if (nUnused > 0)
        memcpy(b->buf, unused, (size_t)nUnused);
    int rc = BZ2_bzDecompressInit(&b->strm, verbosity, small);
    if (rc != BZ_OK) {
        bzc_seterr(bzerror, NULL, rc);
        free(b);
        return NULL;
    }
    b->strm.next_in = b->buf;
    b->strm.avail_in = (unsigned)nUnused;
    return b;
}

void BZ2_bzReadClose(int *bzerror, BZFILE *handle)
{
    bzc_file *b = handle;
    bzc_seterr(bzerror, b, BZ_OK);
    if (!b)
        return;
    if (b->writing) {
        bzc_seterr(bzerror, b, BZ_SEQUENCE_ERROR);
        return;
    }
    BZ2_bzDecompressEnd(&b->strm);
    free(b);
}

/* Refill the buffer from the FILE once the decompressor has taken all of it:
 * BZ_OK or BZ_IO_ERROR. */
static int refill(bzc_file *b)
{
    if (b->strm.avail_in || at_eof(b->handle))
        return BZ_OK;
    size_t n = fread(b->buf, 1, sizeof b->buf, b->handle);
    if (ferror(b->handle))
        return BZ_IO_ERROR;
    b->strm.next_in = b->buf;
    b->strm.avail_in = (unsigned)n;
    return BZ_OK;
}

int BZ2_bzRead(int *bzerror, BZFILE *handle, void *buf, int len)
{
    bzc_file *b = handle;
    bzc_seterr(bzerror, b, BZ_OK);
    if (!b || !buf || len < 0) {
        bzc_seterr(bzerror, b, BZ_PARAM_ERROR);
        return 0;
    }
    if (b->writing) {
        bzc_seterr(bzerror, b, BZ_SEQUENCE_ERROR);
        return 0;
    }
    if (len == 0)
        return 0;
    b->strm.next_out = buf;
    b->strm.avail_out = (unsigned)len;
    for (;;) {
        int rc = ferror(b->handle) ? BZ_IO_ERROR : refill(b);
        if (rc != BZ_OK) {
            bzc_seterr(bzerror, b, rc);
            return 0;
        }
        unsigned in_before = b->strm.avail_in, out_before = b->strm.avail_out;
        rc = BZ2_bzDecompress(&b->strm);
        if (rc != BZ_OK && rc != BZ_STREAM_END) {
            bzc_seterr(bzerror, b, rc);
            return 0;
        }
        /* At the end of the file with room left, libbz2 has decoded all it
         * can: the stream is cut short. This decompressor may still hold a
         * whole block it waits to try on more input, and tries it on a call
         * that brings none, so the verdict waits for a call that moved
         * nothing. */
        if (rc == BZ_OK && !b->strm.avail_in && b->strm.avail_out && at_eof(b->handle) && in_before == 0 &&
            out_before == b->strm.avail_out) {
            bzc_seterr(bzerror, b, BZ_UNEXPECTED_EOF);
            return 0;
        }
        if (rc == BZ_STREAM_END) {
            bzc_seterr(bzerror, b, BZ_STREAM_END);
            return len - (int)b->strm.avail_out;
        }
        if (b->strm.avail_out == 0)
            return len;
    }
}

void BZ2_bzReadGetUnused(int *bzerror, BZFILE *handle, void **unused, int *nUnused)
{
    bzc_file *b = handle;
    if (!b) {
        bzc_seterr(bzerror, b, BZ_PARAM_ERROR);
        return;
    }
    if (b->last_err != BZ_STREAM_END) {
        bzc_seterr(bzerror, b, BZ_SEQUENCE_ERROR);
        return;
    }
    if (!unused || !nUnused) {
        bzc_seterr(bzerror, b, BZ_PARAM_ERROR);
        return;
    }
    bzc_seterr(bzerror, b, BZ_OK);
    *nUnused = (int)b->strm.avail_in;
    *unused = b->strm.next_in;
}
