/*
 * compress_file.c - compress (or with -d decompress) a file through gpucompd
 * with the buffer API: the whole file in memory, one request.
 *
 *     cc compress_file.c -o compress_file $(pkg-config --cflags --libs gpucomp-client)
 *     ./compress_file [-d] [-r] INPUT OUTPUT
 *
 * bzip2 (level 9) unless -r (rle). The daemon's socket is $GPUCOMP_SOCKET,
 * else /run/gpucompd/gpucompd.sock. Every failure is reported and ends the
 * program with status 1; OUTPUT is only written once the request succeeded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpucomp.h>

/* The whole of path in a malloc'd buffer, or NULL with a message printed. */
static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "compress_file: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *bigger = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    if (!buf)
        fprintf(stderr, "compress_file: %s: out of memory\n", path);
    else if (ferror(f)) {
        fprintf(stderr, "compress_file: %s: read error\n", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int write_all(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "compress_file: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t n = fwrite(buf, 1, len, f);
    int failed = n != len || fflush(f) != 0;
    int e = errno;
    if (fclose(f) != 0 && !failed) {
        failed = 1;
        e = errno;
    }
    if (failed)
        fprintf(stderr, "compress_file: %s: write error: %s\n", path, strerror(e));
    return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    int decompress = 0, rle = 0, i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (strcmp(argv[i], "-d") == 0)
            decompress = 1;
        else if (strcmp(argv[i], "-r") == 0)
            rle = 1;
        else
            break;
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: compress_file [-d] [-r] INPUT OUTPUT\n");
        return 2;
    }
    const char *in_path = argv[i], *out_path = argv[i + 1];

    size_t in_len = 0;
    void *in = read_all(in_path, &in_len);
    if (!in)
        return 1;

    gpucomp_client *c = NULL;
    if (gpucomp_connect(NULL, &c) != GPUCOMP_OK) {
        fprintf(stderr, "compress_file: connect: %s\n", gpucomp_connect_error());
        free(in);
        return 1;
    }
    gpucomp_options o;
    gpucomp_options_init(&o, rle ? GPUCOMP_CODEC_RLE : GPUCOMP_CODEC_BZIP2);
    void *out = NULL;
    size_t out_len = 0;
    int rc = decompress ? gpucomp_decompress(c, &o, in, in_len, &out, &out_len)
                        : gpucomp_compress(c, &o, in, in_len, &out, &out_len);
    int status = 0;
    if (rc != GPUCOMP_OK) {
        fprintf(stderr, "compress_file: %s: %s (%s)\n", in_path, gpucomp_last_error(c), gpucomp_strerror(rc));
        status = 1;
    } else if (write_all(out_path, out, out_len) != 0) {
        status = 1;
    } else {
        printf("%s: %zu bytes -> %s: %zu bytes\n", in_path, in_len, out_path, out_len);
    }
    gpucomp_free(out);
    gpucomp_close(c);
    free(in);
    return status;
}
