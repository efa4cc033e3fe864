/*
 * bzc_file.h - the handle behind libbz2's FILE calls (BZ2_bzRead*,
 * BZ2_bzWrite*) and the bzopen family: one compressed FILE, a buffer of
 * BZ_MAX_UNUSED bytes between it and the shim's own stream calls (so a
 * reader's bytes after a stream's end lie in it, as BZ2_bzReadGetUnused
 * hands them out), and the last bzerror code, which BZ2_bzerror and
 * BZ2_bzread read back.
 */
#ifndef GC_BZC_FILE_H
#define GC_BZC_FILE_H

#include <stdio.h>

#include <bzlib.h>

typedef struct bzc_file {
    FILE *handle;
    char buf[BZ_MAX_UNUSED];
    int writing;
    int last_err;
    bz_stream strm;
} bzc_file;

/* libbz2 reports each outcome twice: to the caller's bzerror (when given)
 * and to the handle (when there is one yet). */
static inline void bzc_seterr(int *bzerror, bzc_file *f, int err)
{
    if (bzerror)
        *bzerror = err;
    if (f)
        f->last_err = err;
}

/* A new handle on f, or NULL with bzerror set (f already failed: IO_ERROR;
 * no memory: MEM_ERROR); the caller has checked its own arguments. */
bzc_file *bzc_file_new(FILE *f, int *bzerror);

/* Release a writing handle whatever its state (no output is written):
 * what bzclose needs once BZ2_bzWriteClose has given up on it. */
void bzc_write_release(bzc_file *f);

#endif
