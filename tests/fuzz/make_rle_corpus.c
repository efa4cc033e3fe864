/*
 * make_rle_corpus.c - write the seed corpus for fuzz_rle_decode: a few small
 * valid frames covering every width, stored and rle records, every
 * len_width, several chunks and a tail.
 *
 * Build and run from the repository root:
 *   cc -std=c11 -O2 -pthread -Icommon -Icodecs/rle -Icodecs/bzip2 -Icodecs/bzip2/cpu tests/fuzz/make_rle_corpus.c \
 *     codecs/rle/cpu/rle*.c common/crc32c.c common/gc_status.c common/parallel.c \
 *     -o /tmp/make_rle_corpus && /tmp/make_rle_corpus tests/fuzz/corpus/rle
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rle.h"

#define MAX_INPUT 70000

typedef struct seed {
    const char *name;
    unsigned width;
    uint32_t chunk_size;
    size_t len;
    unsigned mean_run; /* 0: one run of the whole input */
} seed;

static const seed seeds[] = {
    { "empty", 1, 64, 0, 1 },
    { "one_byte", 1, 64, 1, 1 },
    { "w1_runs_3chunks", 1, 64, 150, 6 },
    { "w1_stored", 1, 128, 100, 1 },
    { "w2_runs_tail", 2, 64, 133, 5 },
    { "w4_runs_tail", 4, 256, 259, 4 },
    { "w8_runs", 8, 512, 512, 3 },
    { "w1_len_width2", 1, 4096, 4096, 0 },
    { "w1_len_width4", 1, 1u << 17, MAX_INPUT, 0 },
};

/* Deterministic runs: lengths cycle through 1 .. 2*mean-1, values change. */
static void fill(uint8_t *buf, const seed *s)
{
    if (s->mean_run == 0) {
        memset(buf, 'z', s->len);
        return;
    }
    size_t i = 0;
    for (unsigned run = 0; i < s->len; run++) {
        size_t elems = 1 + (run * 13u) % (2 * s->mean_run - 1);
        for (size_t b = 0; b < elems * s->width && i < s->len; b++)
            buf[i++] = (uint8_t)(run * 37u + b % s->width);
    }
}

static int write_seed(const char *dir, const seed *s, uint8_t *buf)
{
    rle_options opt = { s->width, s->chunk_size, 1 };
    size_t bound = rle_compress_bound(s->len, &opt), frame_len;
    uint8_t *frame = malloc(bound);
    gc_error err;
    fill(buf, s);
    if (!frame || rle_compress(buf, s->len, &opt, frame, bound, &frame_len, &err) != GC_OK) {
        fprintf(stderr, "%s: %s\n", s->name, frame ? err.msg : "out of memory");
        free(frame);
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.rle", dir, s->name);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(frame, 1, frame_len, f) != frame_len;
    if (f && fclose(f) != 0)
        bad = 1;
    if (bad)
        perror(path);
    free(frame);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    static uint8_t buf[MAX_INPUT];
    int failed = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        failed |= write_seed(argv[1], &seeds[i], buf);
    return failed;
}
