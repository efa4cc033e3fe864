/*
 * bench-gen.c - deterministic synthetic corpora for scripts/bench-corpora.sh
 * (compiled on the fly there with cc -O2; no library but libc).
 *
 *   bench-gen KIND BYTES > OUT
 *
 * KIND (every byte a function of KIND and BYTES only: a fixed-seed splitmix64):
 *   voxels     sparse 512^3 byte volumes like the seed renderer's (Salsa, the
 *              NChilada visualiser: galaxies rendered as grayscale points in a
 *              512-cubed volume of one byte per voxel, about 128 MB that RLE
 *              packs to about 3 MB): per volume, 64 clusters (galaxies) with
 *              gaussian-distributed points (about 900k points per volume),
 *              each a short run of 1-4 voxels along x whose gray value falls
 *              off from the cluster's brightness, on a zero background; volume
 *              i has seed i, volumes are concatenated, the last cut to BYTES
 *   int32      a sorted timestamp column, little-endian int32: each value held
 *              for a run of 1-16 rows, then increased by 1-1000
 *   float32    a sensor column, little-endian float32: a random walk quantised
 *              to 0.01, each reading held for a run of 1-64 samples
 *   zeros      all zero bytes
 *   period2    "ab" repeated
 *   record1k   one 1 KiB random block repeated
 *   fibonacci  the Fibonacci word over {a, b} (s(n) = s(n-1) s(n-2))
 *   random     uniformly random bytes
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t st;

static uint64_t next(void)
{
    uint64_t z = (st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unif(void)
{
    return (double)(next() >> 11) / 9007199254740992.0;
}

static double gauss(void) /* Box-Muller, one of the pair */
{
    double u = unif(), v = unif();
    if (u < 1e-300)
        u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static size_t left;

static int emit(const void *p, size_t n)
{
    if (n > left)
        n = left;
    if (n && fwrite(p, 1, n, stdout) != n)
        exit(1);
    left -= n;
    return left > 0;
}

#define N 512

static void voxels(void)
{
    size_t vol = (size_t)N * N * N;
    uint8_t *v = malloc(vol);
    if (!v) {
        perror("malloc");
        exit(1);
    }
    for (uint64_t i = 0; left > 0; i++) {
        st = 0x5eed0000ull + i;
        memset(v, 0, vol);
        for (int c = 0; c < 64; c++) {
            double cx = 40 + unif() * (N - 80), cy = 40 + unif() * (N - 80), cz = 40 + unif() * (N - 80);
            double sigma = 4 + unif() * 28;
            double bright = 80 + unif() * 175;
            int points = 2000 + (int)(unif() * 26000);
            for (int p = 0; p < points; p++) {
                double gx = gauss(), gy = gauss(), gz = gauss();
                long x = lround(cx + gx * sigma), y = lround(cy + gy * sigma), z = lround(cz + gz * sigma);
                double r2 = gx * gx + gy * gy + gz * gz;
                int val = (int)(bright * exp(-r2 / 4.0)) + 1 + (int)(next() % 24);
                int run = 1 + (int)(next() % 4);
                for (int k = 0; k < run; k++, x++) {
                    if (x < 0 || y < 0 || z < 0 || x >= N || y >= N || z >= N)
                        continue;
                    uint8_t *d = &v[((size_t)z * N + (size_t)y) * N + (size_t)x];
                    int s = *d + (val > 255 ? 255 : val);
                    *d = (uint8_t)(s > 255 ? 255 : s);
                }
            }
        }
        emit(v, vol);
    }
    free(v);
}

static void int32col(void)
{
    int32_t buf[4096];
    int32_t t = 1700000000;
    st = 0x1e3201;
    while (left > 0) {
        size_t n = 0;
        while (n < 4096) {
            int run = 1 + (int)(next() % 16);
            for (int k = 0; k < run && n < 4096; k++)
                buf[n++] = t;
            t += 1 + (int32_t)(next() % 1000);
        }
        emit(buf, sizeof buf);
    }
}

static void float32col(void)
{
    float buf[4096];
    double x = 20.0;
    st = 0xf10a7;
    while (left > 0) {
        size_t n = 0;
        while (n < 4096) {
            int run = 1 + (int)(next() % 64);
            float q = (float)(round(x * 100.0) / 100.0);
            for (int k = 0; k < run && n < 4096; k++)
                buf[n++] = q;
            x += gauss() * 0.05;
        }
        emit(buf, sizeof buf);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench-gen voxels|int32|float32|zeros|period2|record1k|fibonacci|random BYTES\n");
        return 2;
    }
    const char *k = argv[1];
    left = (size_t)strtoull(argv[2], NULL, 10);
    static uint8_t b[1 << 16];
    if (strcmp(k, "voxels") == 0)
        voxels();
    else if (strcmp(k, "int32") == 0)
        int32col();
    else if (strcmp(k, "float32") == 0)
        float32col();
    else if (strcmp(k, "zeros") == 0) {
        while (emit(b, sizeof b))
            ;
    } else if (strcmp(k, "period2") == 0) {
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = i & 1 ? 'b' : 'a';
        while (emit(b, sizeof b))
            ;
    } else if (strcmp(k, "record1k") == 0) {
        st = 0x1c0de;
        for (size_t i = 0; i < 1024; i++)
            b[i] = (uint8_t)next();
        for (size_t i = 1024; i < sizeof b; i++)
            b[i] = b[i % 1024];
        while (emit(b, sizeof b))
            ;
    } else if (strcmp(k, "fibonacci") == 0) {
        /* S(1) = "a", S(2) = "ab", S(n+1) = S(n) S(n-1); S(n-1) is a prefix of S(n), so each
         * step appends the first |S(n-1)| bytes of the string to itself */
        char *t = malloc(left + 2);
        if (!t)
            return 1;
        size_t ls = 1, lt = 2;
        t[0] = 'a', t[1] = 'b';
        while (lt < left) {
            size_t add = ls < left - lt ? ls : left - lt;
            memcpy(t + lt, t, add);
            ls = lt;
            lt += add;
        }
        emit(t, lt);
        free(t);
    } else if (strcmp(k, "random") == 0) {
        st = 0x7a2d0;
        while (left > 0) {
            for (size_t i = 0; i < sizeof b; i += 8) {
                uint64_t r = next();
                memcpy(b + i, &r, 8);
            }
            emit(b, sizeof b);
        }
    } else {
        fprintf(stderr, "bench-gen: unknown kind %s\n", k);
        return 2;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
