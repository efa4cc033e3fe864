/*
 * bzc_bzopen.c - libbz2's zlib-like calls: BZ2_bzopen, BZ2_bzdopen,
 * BZ2_bzread, BZ2_bzwrite, BZ2_bzflush, BZ2_bzclose and BZ2_bzerror, as
 * libbz2 1.0.8 builds them on its FILE calls (docs/BZIP2.md, "libbz2
 * compatibility"). Where libbz2 dereferences a NULL handle, these report
 * BZ_PARAM_ERROR instead.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ctype.h>
#include <stdlib.h>

#include "bzc_file.h"

/* The mode string as libbz2 reads it: 'r' or 'w' (the last one wins), 's'
 * for small, a digit for the block size (clamped to 1..9 when writing);
 * anything else is ignored. */
typedef struct open_mode {
    int writing, small, level;
} open_mode;

static open_mode parse_mode(const char *mode)
{
    open_mode m = { 0, 0, 9 };
    for (; *mode; mode++) {
        if (*mode == 'r')
            m.writing = 0;
        else if (*mode == 'w')
            m.writing = 1;
        else if (*mode == 's')
            m.small = 1;
        else if (isdigit((unsigned char)*mode))
            m.level = *mode - '0';
    }
    m.level = m.level < 1 ? 1 : m.level;
    return m;
}

/* A handle on fp, or NULL with fp closed (unless it is stdin or stdout). */
static BZFILE *open_on(FILE *fp, open_mode m)
{
    if (!fp)
        return NULL;
    int err;
    BZFILE *b =
        m.writing ? BZ2_bzWriteOpen(&err, fp, m.level, 0, 30) : BZ2_bzReadOpen(&err, fp, 0, m.small, NULL, 0);
    if (!b && fp != stdin && fp != stdout)
        fclose(fp);
    return b;
}

BZFILE *BZ2_bzopen(const char *path, const char *mode)
{
    if (!mode)
        return NULL;
    open_mode m = parse_mode(mode);
    if (!path || !*path)
        return open_on(m.writing ? stdout : stdin, m);
    return open_on(fopen(path, m.writing ? "wb" : "rb"), m);
}

BZFILE *BZ2_bzdopen(int fd, const char *mode)
{
    if (!mode)
        return NULL;
    open_mode m = parse_mode(mode);
    return open_on(fdopen(fd, m.writing ? "wb" : "rb"), m);
}

int BZ2_bzread(BZFILE *handle, void *buf, int len)
{
    bzc_file *b = handle;
    if (b && b->last_err == BZ_STREAM_END)
        return 0;
    int err;
    int n = BZ2_bzRead(&err, b, buf, len);
    return err == BZ_OK || err == BZ_STREAM_END ? n : -1;
}

int BZ2_bzwrite(BZFILE *handle, void *buf, int len)
{
    int err;
    BZ2_bzWrite(&err, handle, buf, len);
    return err == BZ_OK ? len : -1;
}

/* libbz2 flushes nothing here: the stream's bytes come out at bzclose. */
int BZ2_bzflush(BZFILE *handle)
{
    (void)handle;
    return 0;
}

void BZ2_bzclose(BZFILE *handle)
{
    bzc_file *b = handle;
    if (!b)
        return;
    FILE *fp = b->handle;
    int err;
    if (b->writing) {
        BZ2_bzWriteClose(&err, b, 0, NULL, NULL);
        if (err != BZ_OK)
            BZ2_bzWriteClose(&err, b, 1, NULL, NULL);
        /* libbz2 leaks a handle whose FILE has failed; nothing can use it again */
        if (err != BZ_OK)
            bzc_write_release(b);
    } else {
        BZ2_bzReadClose(&err, b);
    }
    if (fp != stdin && fp != stdout)
        fclose(fp);
}

static const char *const err_names[] = { "OK",           "SEQUENCE_ERROR",   "PARAM_ERROR", "MEM_ERROR",
                                         "DATA_ERROR",   "DATA_ERROR_MAGIC", "IO_ERROR",    "UNEXPECTED_EOF",
                                         "OUTBUFF_FULL", "CONFIG_ERROR" };

const char *BZ2_bzerror(BZFILE *handle, int *errnum)
{
    bzc_file *b = handle;
    int err = b ? b->last_err : BZ_PARAM_ERROR;
    err = err > 0 ? 0 : err; /* BZ_STREAM_END and the other progress codes read as OK */
    if (errnum)
        *errnum = err;
    return -err < (int)(sizeof err_names / sizeof *err_names) ? err_names[-err] : "???";
}
