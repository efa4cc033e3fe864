/*
 * bench_bzip2.c - tiny driver for scripts/bench_bzip2_cpu.sh and manual
 * interop checks of the bzip2 CPU codec.
 *   bench_bzip2 -c [-l L] [-t T] < in > out.bz2     compress
 *   bench_bzip2 -d [-t T] < in.bz2 > out            decompress
 *   bench_bzip2 -b [-l L] [-t T] [-r R] FILE        time both directions:
 *       prints "<compress MB/s> <decompress MB/s> <compressed bytes>"
 *       (best of R runs, MB = 10^6 bytes of uncompressed data)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bzip2.h"
#include "gc_clock.h"

static uint8_t *read_all(FILE *f, size_t *len)
{
    size_t cap = 1 << 20, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (n == cap)
            b = realloc(b, cap *= 2);
        size_t r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    *len = n;
    return b;
}

static double now(void)
{
    return (double)gc_now_ns() / 1e9;
}

int main(int argc, char **argv)
{
    int mode = 0, level = 9, reps = 3, opt;
    unsigned threads = 1;
    while ((opt = getopt(argc, argv, "cdbl:t:r:")) != -1) {
        switch (opt) {
        case 'c': case 'd': case 'b': mode = opt; break;
        case 'l': level = atoi(optarg); break;
        case 't': threads = (unsigned)atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default: return 2;
        }
    }
    gc_error err;
    bz2_options o = { .level = level, .threads = threads };
    size_t n, m;
    uint8_t *in, *out;
    if (mode == 'c' || mode == 'd') {
        in = read_all(stdin, &n);
        int rc = mode == 'c' ? bz2_compress(in, n, &o, &out, &m, &err)
                             : bz2_decompress(in, n, 0, threads, &out, &m, &err);
        if (rc) {
            fprintf(stderr, "error %d: %s\n", rc, err.msg);
            return 1;
        }
        fwrite(out, 1, m, stdout);
        return 0;
    }
    if (mode != 'b' || optind >= argc)
        return 2;
    FILE *f = fopen(argv[optind], "rb");
    if (!f) {
        perror(argv[optind]);
        return 1;
    }
    in = read_all(f, &n);
    fclose(f);
    double best_c = 1e9, best_d = 1e9;
    size_t clen = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (bz2_compress(in, n, &o, &out, &clen, &err)) {
            fprintf(stderr, "compress: %s\n", err.msg);
            return 1;
        }
        double t1 = now();
        uint8_t *back;
        size_t bl;
        if (bz2_decompress(out, clen, 0, threads, &back, &bl, &err)) {
            fprintf(stderr, "decompress: %s\n", err.msg);
            return 1;
        }
        double t2 = now();
        if (bl != n || memcmp(back, in, n)) {
            fprintf(stderr, "round trip mismatch\n");
            return 1;
        }
        free(back);
        free(out);
        if (t1 - t0 < best_c) best_c = t1 - t0;
        if (t2 - t1 < best_d) best_d = t2 - t1;
    }
    printf("%.2f %.2f %zu\n", n / best_c / 1e6, n / best_d / 1e6, clen);
    return 0;
}
