/*
 * bzc_file_write.c - libbz2's writing FILE calls: BZ2_bzWriteOpen,
 * BZ2_bzWrite, BZ2_bzWriteClose and BZ2_bzWriteClose64, with libbz2 1.0.8's
 * argument checks and bzerror codes (docs/BZIP2.md, "libbz2
 * compatibility"), on the shim's own stream compressor: its output goes to
 * the FILE through the handle's buffer, BZ_MAX_UNUSED bytes at a time.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>

#include "bzc_file.h"

BZFILE *BZ2_bzWriteOpen(int *bzerror, FILE *f, int blockSize100k, int verbosity, int workFactor)
{
    bzc_seterr(bzerror, NULL, BZ_OK);
    if (!f || blockSize100k < 1 || blockSize100k > 9 || workFactor < 0 || workFactor > 250 || verbosity < 0 ||
        verbosity > 4) {
        bzc_seterr(bzerror, NULL, BZ_PARAM_ERROR);
        return NULL;
    }
    bzc_file *b = bzc_file_new(f, bzerror);
    if (!b)
        return NULL;
    b->writing = 1;
    int rc = BZ2_bzCompressInit(&b->strm, blockSize100k, verbosity, workFactor);
    if (rc != BZ_OK) {
        bzc_seterr(bzerror, NULL, rc);
        free(b);
        return NULL;
    }
    return b;
}

/* One BZ2_bzCompress call with the handle's buffer as its room, and what it
 * made written out: the call's code, or BZ_IO_ERROR. */
static int step(bzc_file *b, int action)
{
    b->strm.next_out = b->buf;
    b->strm.avail_out = sizeof b->buf;
    int rc = BZ2_bzCompress(&b->strm, action);
    if (rc != BZ_RUN_OK && rc != BZ_FINISH_OK && rc != BZ_STREAM_END)
        return rc;
    size_t n = sizeof b->buf - b->strm.avail_out;
    if (n && (fwrite(b->buf, 1, n, b->handle) != n || ferror(b->handle)))
        return BZ_IO_ERROR;
    return rc;
}

void BZ2_bzWrite(int *bzerror, BZFILE *handle, void *buf, int len)
{
    bzc_file *b = handle;
    bzc_seterr(bzerror, b, BZ_OK);
    if (!b || !buf || len < 0) {
        bzc_seterr(bzerror, b, BZ_PARAM_ERROR);
        return;
    }
    if (!b->writing) {
        bzc_seterr(bzerror, b, BZ_SEQUENCE_ERROR);
        return;
    }
    if (ferror(b->handle)) {
        bzc_seterr(bzerror, b, BZ_IO_ERROR);
        return;
    }
    if (len == 0)
        return;
    b->strm.next_in = buf;
    b->strm.avail_in = (unsigned)len;
    int rc;
    do
        rc = step(b, BZ_RUN);
    while (rc == BZ_RUN_OK && b->strm.avail_in);
    bzc_seterr(bzerror, b, rc == BZ_RUN_OK ? BZ_OK : rc);
}

void BZ2_bzWriteClose(int *bzerror, BZFILE *handle, int abandon, unsigned *nbytes_in, unsigned *nbytes_out)
{
    BZ2_bzWriteClose64(bzerror, handle, abandon, nbytes_in, NULL, nbytes_out, NULL);
}

static void put(unsigned *p, unsigned v)
{
    if (p)
        *p = v;
}

void BZ2_bzWriteClose64(int *bzerror, BZFILE *handle, int abandon, unsigned *nbytes_in_lo32,
                        unsigned *nbytes_in_hi32, unsigned *nbytes_out_lo32, unsigned *nbytes_out_hi32)
{
    bzc_file *b = handle;
    if (!b) {
        bzc_seterr(bzerror, b, BZ_OK);
        return;
    }
    /* last_err is kept until here: a handle whose last call failed is
     * closed without its end, as abandoned */
    int rc = !b->writing ? BZ_SEQUENCE_ERROR : ferror(b->handle) ? BZ_IO_ERROR : BZ_OK;
    if (rc != BZ_OK) {
        bzc_seterr(bzerror, b, rc);
        return;
    }
    put(nbytes_in_lo32, 0);
    put(nbytes_in_hi32, 0);
    put(nbytes_out_lo32, 0);
    put(nbytes_out_hi32, 0);
    if (!abandon && b->last_err == BZ_OK) {
        do
            rc = step(b, BZ_FINISH);
        while (rc == BZ_FINISH_OK);
        if (rc != BZ_STREAM_END) {
            bzc_seterr(bzerror, b, rc);
            return;
        }
    }
    if (!abandon && !ferror(b->handle) && (fflush(b->handle), ferror(b->handle))) {
        bzc_seterr(bzerror, b, BZ_IO_ERROR);
        return;
    }
    put(nbytes_in_lo32, b->strm.total_in_lo32);
    put(nbytes_in_hi32, b->strm.total_in_hi32);
    put(nbytes_out_lo32, b->strm.total_out_lo32);
    put(nbytes_out_hi32, b->strm.total_out_hi32);
    bzc_seterr(bzerror, b, BZ_OK);
    bzc_write_release(b);
}

bzc_file *bzc_file_new(FILE *f, int *bzerror)
{
    if (ferror(f)) {
        bzc_seterr(bzerror, NULL, BZ_IO_ERROR);
        return NULL;
    }
    bzc_file *b = calloc(1, sizeof *b);
    if (!b) {
        bzc_seterr(bzerror, NULL, BZ_MEM_ERROR);
        return NULL;
    }
    bzc_seterr(bzerror, b, BZ_OK);
    b->handle = f;
    return b;
}

void bzc_write_release(bzc_file *f)
{
    BZ2_bzCompressEnd(&f->strm);
    free(f);
}
