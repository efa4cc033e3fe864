/*
 * bzlib_pair.c - looking a libbz2-compatible library's calls up by name
 * (bzlib_pair.h), and finding a block in a stream to damage.
 */
#include <dlfcn.h>

#include <check.h>

#include "bzlib_pair.h"

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    ck_assert_msg(p != NULL, "%s: %s", name, dlerror());
    return p;
}

/* Assign a looked-up call to a function pointer of whatever type it has
 * (ISO C has no cast from void * to a function pointer; POSIX dlsym
 * promises the representation is the same). */
#define LOOK(field, name) *(void **)&b->field = sym(b->handle, name)

void bzlib_load(bzlib *b, const char *path)
{
    b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(b->handle != NULL, "dlopen %s: %s", path, dlerror());
    LOOK(version, "BZ2_bzlibVersion");
    LOOK(b2b_compress, "BZ2_bzBuffToBuffCompress");
    LOOK(b2b_decompress, "BZ2_bzBuffToBuffDecompress");
    LOOK(c_init, "BZ2_bzCompressInit");
    LOOK(c_step, "BZ2_bzCompress");
    LOOK(c_end, "BZ2_bzCompressEnd");
    LOOK(d_init, "BZ2_bzDecompressInit");
    LOOK(d_step, "BZ2_bzDecompress");
    LOOK(d_end, "BZ2_bzDecompressEnd");
    LOOK(read_open, "BZ2_bzReadOpen");
    LOOK(read, "BZ2_bzRead");
    LOOK(read_unused, "BZ2_bzReadGetUnused");
    LOOK(read_close, "BZ2_bzReadClose");
    LOOK(write_open, "BZ2_bzWriteOpen");
    LOOK(write, "BZ2_bzWrite");
    LOOK(write_close, "BZ2_bzWriteClose");
    LOOK(write_close64, "BZ2_bzWriteClose64");
    LOOK(zopen, "BZ2_bzopen");
    LOOK(zdopen, "BZ2_bzdopen");
    LOOK(zread, "BZ2_bzread");
    LOOK(zwrite, "BZ2_bzwrite");
    LOOK(zflush, "BZ2_bzflush");
    LOOK(zclose, "BZ2_bzclose");
    LOOK(zerror, "BZ2_bzerror");
}

uint64_t bzlib_block_bit(const uint8_t *z, size_t zlen, unsigned k)
{
    uint64_t win = 0;
    for (uint64_t bit = 0; bit < (uint64_t)zlen * 8; bit++) {
        win = (win << 1 | ((z[bit / 8] >> (7 - bit % 8)) & 1)) & 0xffffffffffffULL;
        if (bit >= 32 + 47 && win == 0x314159265359ULL && k-- == 0)
            return bit - 47;
    }
    return UINT64_MAX;
}
