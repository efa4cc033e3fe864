/*
 * bzc_buffer.c - libbz2's one-shot calls: BZ2_bzBuffToBuffCompress,
 * BZ2_bzBuffToBuffDecompress and BZ2_bzlibVersion, with libbz2's argument
 * checks and return codes (docs/BZIP2.md, "libbz2 compatibility").
 *
 * Compression of inputs from bzc_daemon_threshold() bytes goes to gpucompd
 * through a client from gpucomp_open, which runs the work in this process
 * when there is no daemon or it refuses; smaller inputs run here outright.
 * Decompression always runs here: libbz2 decodes only the first stream of
 * the buffer and judges its errors in reading order, which a daemon request
 * (every stream, one verdict) cannot tell.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>

#include "bzc_internal.h"
#include "gpucomp.h"
#include "size_parse.h"

size_t bzc_daemon_threshold(void)
{
    static size_t cached; /* 0: not read yet; races only store the same value */
    size_t t = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (t)
        return t;
    uint64_t v;
    const char *env = getenv("GPUCOMP_BZ2_THRESHOLD");
    t = env && gc_parse_size(env, SIZE_MAX, &v) ? (size_t)v : BZC_DAEMON_THRESHOLD;
    t = t ? t : 1;
    __atomic_store_n(&cached, t, __ATOMIC_RELAXED);
    return t;
}

int bzc_compress_into(const char *src, size_t len, int level, char *dst, size_t cap, size_t *out_len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = level;
    gpucomp_client *c = NULL;
    if (len >= bzc_daemon_threshold() && gpucomp_open(NULL, &c) != GPUCOMP_OK)
        c = NULL; /* out of memory for a client: try in process */
    int rc = gpucomp_compress_into(c, &o, src, len, dst, cap, out_len);
    gpucomp_close(c);
    return rc;
}

int BZ2_bzBuffToBuffCompress(char *dest, unsigned int *destLen, char *source, unsigned int sourceLen,
                             int blockSize100k, int verbosity, int workFactor)
{
    if (!dest || !destLen || !source || blockSize100k < 1 || blockSize100k > 9 || verbosity < 0 || verbosity > 4 ||
        workFactor < 0 || workFactor > 250)
        return BZ_PARAM_ERROR;
    size_t out_len = 0;
    int rc = bzc_compress_into(source, sourceLen, blockSize100k, dest, *destLen, &out_len);
    if (rc == GPUCOMP_E_TOO_SMALL)
        return BZ_OUTBUFF_FULL;
    if (rc != GPUCOMP_OK) /* neither the daemon nor this process could: out of resources */
        return BZ_MEM_ERROR;
    *destLen = (unsigned int)out_len;
    return BZ_OK;
}

int BZ2_bzBuffToBuffDecompress(char *dest, unsigned int *destLen, char *source, unsigned int sourceLen, int small,
                               int verbosity)
{
    if (!dest || !destLen || !source || (small != 0 && small != 1) || verbosity < 0 || verbosity > 4)
        return BZ_PARAM_ERROR;
    size_t out_len = 0;
    int rc = bzc_decode_first((const uint8_t *)source, sourceLen, (uint8_t *)dest, *destLen, &out_len);
    if (rc == BZ_OK)
        *destLen = (unsigned int)out_len;
    return rc;
}

const char *BZ2_bzlibVersion(void)
{
    /* libbz2's own string first: programs that parse it read "1.0.8" */
    return "1.0.8, 13-Jul-2019 (gpucomp " PACKAGE_VERSION ")";
}
