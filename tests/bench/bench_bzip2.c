/*
 * bench_bzip2.c - the bzip2 CPU engine in-process: a driver for
 * scripts/bench_bzip2_cpu.sh, scripts/cpu-scaling-bench.sh and scripts/bench.sh,
 * and for manual interop checks. Built by `make` (noinst: tests/bench/bench_bzip2).
 *   bench_bzip2 -c [-l L] [-t T] < in > out.bz2     compress
 *   bench_bzip2 -d [-t T] < in.bz2 > out            decompress
 *   bench_bzip2 -b [-l L] [-t T] [-r R] [-m] FILE   time both directions:
 *       prints "<compress MB/s> <decompress MB/s> <compressed bytes>"
 *   bench_bzip2 -b [-l L] -T LIST [-r R] [-m] FILE  the same for each thread count in
 *       LIST (commas or spaces: -T 1,2,4,8), one line each, the count first:
 *       "<threads> <compress MB/s> <decompress MB/s> <compressed bytes>"
 * MB = 10^6 bytes of uncompressed data; best of R runs (default 3), or their
 * median with -m. Every run's output is decoded and compared with the input,
 * outside the timed part. T = 0 is every CPU (the engine's default).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bzip2.h"
#include "gc_clock.h"

static void usage(void)
{
    fprintf(stderr, "usage: bench_bzip2 -c [-l L] [-t T] < in > out.bz2\n"
                    "       bench_bzip2 -d [-t T] < in.bz2 > out\n"
                    "       bench_bzip2 -b [-l L] [-t T | -T LIST] [-r R] [-m] FILE\n");
}

static uint8_t *read_all(FILE *f, size_t *len)
{
    size_t cap = 1 << 20, n = 0;
    uint8_t *b = malloc(cap);
    if (!b)
        return NULL;
    for (;;) {
        if (n == cap) {
            uint8_t *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    if (ferror(f)) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

static double now(void)
{
    return (double)gc_now_ns() / 1e9;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* best (the least) or median of n times, sorting t */
static double pick(double *t, int n, int median)
{
    qsort(t, (size_t)n, sizeof *t, compare_double);
    if (!median)
        return t[0];
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Times R round trips of in[0..n) at `threads`; prints one line (with the count first when
 * `label`). 0 on success. */
static int bench(const uint8_t *in, size_t n, int level, unsigned threads, int reps, int median, int label)
{
    double *tc = calloc((size_t)reps, sizeof *tc), *td = calloc((size_t)reps, sizeof *td);
    if (!tc || !td) {
        fprintf(stderr, "bench_bzip2: out of memory\n");
        free(tc), free(td);
        return 1;
    }
    bz2_options o = { .level = level, .threads = threads };
    gc_error err = { 0 };
    size_t clen = 0;
    for (int r = 0; r < reps; r++) {
        uint8_t *out, *back;
        size_t bl;
        double t0 = now();
        if (bz2_compress(in, n, &o, &out, &clen, &err)) {
            fprintf(stderr, "bench_bzip2: compress: %s\n", err.msg);
            free(tc), free(td);
            return 1;
        }
        double t1 = now();
        if (bz2_decompress(out, clen, 0, threads, &back, &bl, &err)) {
            fprintf(stderr, "bench_bzip2: decompress: %s\n", err.msg);
            free(out), free(tc), free(td);
            return 1;
        }
        double t2 = now();
        if (bl != n || memcmp(back, in, n)) {
            fprintf(stderr, "bench_bzip2: round trip mismatch\n");
            free(out), free(back), free(tc), free(td);
            return 1;
        }
        free(back);
        free(out);
        tc[r] = t1 - t0;
        td[r] = t2 - t1;
    }
    double c = pick(tc, reps, median), d = pick(td, reps, median);
    if (label)
        printf("%u ", threads);
    printf("%.2f %.2f %zu\n", (double)n / c / 1e6, (double)n / d / 1e6, clen);
    fflush(stdout);
    free(tc), free(td);
    return 0;
}

/* "1,2 4" -> counts; returns how many (0: a bad list) */
static int parse_list(const char *s, unsigned *counts, int max)
{
    int k = 0;
    while (*s) {
        if (*s == ',' || *s == ' ') {
            s++;
            continue;
        }
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 4096 || k == max)
            return 0;
        counts[k++] = (unsigned)v;
        s = end;
    }
    return k;
}

int main(int argc, char **argv)
{
    int mode = 0, level = 9, reps = 3, median = 0, opt, nlist = 0;
    unsigned threads = 1, list[64];
    while ((opt = getopt(argc, argv, "cdbl:t:T:r:m")) != -1) {
        switch (opt) {
        case 'c':
        case 'd':
        case 'b': mode = opt; break;
        case 'l': level = atoi(optarg); break;
        case 't': threads = (unsigned)atoi(optarg); break;
        case 'T':
            if ((nlist = parse_list(optarg, list, 64)) == 0) {
                fprintf(stderr, "bench_bzip2: -T wants thread counts, as 1,2,4\n");
                return 2;
            }
            break;
        case 'r': reps = atoi(optarg); break;
        case 'm': median = 1; break;
        default: usage(); return 2;
        }
    }
    if (reps < 1 || level < 1 || level > 9) {
        usage();
        return 2;
    }
    gc_error err = { 0 };
    size_t n, m;
    uint8_t *in, *out;
    if (mode == 'c' || mode == 'd') {
        bz2_options o = { .level = level, .threads = threads };
        if (!(in = read_all(stdin, &n))) {
            fprintf(stderr, "bench_bzip2: reading stdin failed\n");
            return 1;
        }
        int rc = mode == 'c' ? bz2_compress(in, n, &o, &out, &m, &err)
                             : bz2_decompress(in, n, 0, threads, &out, &m, &err);
        if (rc) {
            fprintf(stderr, "error %d: %s\n", rc, err.msg);
            return 1;
        }
        if (fwrite(out, 1, m, stdout) != m || fflush(stdout) != 0) {
            perror("bench_bzip2: stdout");
            return 1;
        }
        free(in), free(out);
        return 0;
    }
    if (mode != 'b' || optind >= argc) {
        usage();
        return 2;
    }
    FILE *f = fopen(argv[optind], "rb");
    if (!f) {
        perror(argv[optind]);
        return 1;
    }
    in = read_all(f, &n);
    fclose(f);
    if (!in) {
        fprintf(stderr, "bench_bzip2: reading %s failed\n", argv[optind]);
        return 1;
    }
    int rc = 0;
    if (nlist == 0)
        rc = bench(in, n, level, threads, reps, median, 0);
    for (int i = 0; i < nlist && rc == 0; i++)
        rc = bench(in, n, level, list[i], reps, median, 1);
    free(in);
    return rc;
}
