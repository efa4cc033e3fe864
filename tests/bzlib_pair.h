/*
 * bzlib_pair.h - one libbz2-compatible library's calls, looked up by name in
 * a dlopen'ed copy (RTLD_LOCAL, so each library's calls to its own BZ2_*
 * names stay inside it): the bz2compat tests load Debian's libbz2 and
 * libgpucomp-bz2 side by side and give both the same arguments.
 */
#ifndef GC_TESTS_BZLIB_PAIR_H
#define GC_TESTS_BZLIB_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <bzlib.h>

typedef struct bzlib {
    void *handle;
    const char *(*version)(void);
    int (*b2b_compress)(char *, unsigned *, char *, unsigned, int, int, int);
    int (*b2b_decompress)(char *, unsigned *, char *, unsigned, int, int);
    int (*c_init)(bz_stream *, int, int, int);
    int (*c_step)(bz_stream *, int);
    int (*c_end)(bz_stream *);
    int (*d_init)(bz_stream *, int, int);
    int (*d_step)(bz_stream *);
    int (*d_end)(bz_stream *);
    /* the FILE calls */
    BZFILE *(*read_open)(int *, FILE *, int, int, void *, int);
    int (*read)(int *, BZFILE *, void *, int);
    void (*read_unused)(int *, BZFILE *, void **, int *);
    void (*read_close)(int *, BZFILE *);
    BZFILE *(*write_open)(int *, FILE *, int, int, int);
    void (*write)(int *, BZFILE *, void *, int);
    void (*write_close)(int *, BZFILE *, int, unsigned *, unsigned *);
    void (*write_close64)(int *, BZFILE *, int, unsigned *, unsigned *, unsigned *, unsigned *);
    /* the bzopen family */
    BZFILE *(*zopen)(const char *, const char *);
    BZFILE *(*zdopen)(int, const char *);
    int (*zread)(BZFILE *, void *, int);
    int (*zwrite)(BZFILE *, void *, int);
    int (*zflush)(BZFILE *);
    void (*zclose)(BZFILE *);
    const char *(*zerror)(BZFILE *, int *);
} bzlib;

/* dlopen path and look every call up; a check assertion fails on a missing one. */
void bzlib_load(bzlib *b, const char *path);

/* The bit where the k-th (from 0) block magic of the bzip2 stream z begins
 * (UINT64_MAX: it has no such block), so a test can damage that block's
 * stored CRC, 48 bits further. */
uint64_t bzlib_block_bit(const uint8_t *z, size_t zlen, unsigned k);

#endif
