/*
 * bench_bz2_cut.c - the speed of a bzip2 compress file stream's cuts alone,
 * with no engine: the bytes a cut costs per part, done the way each daemon
 * revision does it, one thread, so the number is the critical path of
 * cutting (the daemon's reads of later parts overlap on its I/O pool; the
 * walk is a chain, each part's starting where the last one's cut).
 *
 *   fixed: 32 MiB parts read into their own buffers, cut anywhere (before
 *          parts ended at bzip2's block starts);
 *   peek:  the span from each cut read 8 MiB more at a time, walked as it
 *          grows to the first block start from 32 MiB, then the part read
 *          again into its own buffer;
 *   tail:  each part reads the next 32 MiB behind the bytes the last one
 *          left, one walk finds its last block start, the bytes after it
 *          are copied in front of the next part's read (today's daemon);
 *   settle: tail as the daemon runs it now, the chain alone: the reads and
 *          their scans (bz2_rle1_scan) are on other threads, so not timed;
 *   walk:  the walk alone over the file in memory (bz2_rle1_plan).
 *
 * usage: bench_bz2_cut [-l LEVEL] [-r REPEATS] MODE FILE
 * Prints "MODE GB/s parts" (10^9 input bytes per second, best of REPEATS).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bz2_internal.h"
#include "bzip2.h"

#define PART ((size_t)32 << 20)
#define PEEK_STEP ((size_t)8 << 20)
#define HEAD ((size_t)4 << 20)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void read_at(int fd, uint8_t *buf, size_t len, size_t off)
{
    while (len) {
        ssize_t got = pread(fd, buf, len, (off_t)off);
        if (got <= 0) {
            perror("pread");
            exit(1);
        }
        buf += got;
        len -= (size_t)got;
        off += (size_t)got;
    }
}

static unsigned run_fixed(int fd, size_t size, size_t limit)
{
    (void)limit;
    unsigned parts = 0;
    for (size_t at = 0; at < size; at += PART, parts++) {
        size_t n = size - at < PART ? size - at : PART;
        uint8_t *p = malloc(n);
        read_at(fd, p, n, at);
        free(p);
    }
    return parts;
}

static unsigned run_peek(int fd, size_t size, size_t limit)
{
    unsigned parts = 0;
    uint8_t *span = malloc(2 * PART);
    for (size_t at = 0; at < size; parts++) {
        size_t left = size - at, see = left < 2 * PART ? left : 2 * PART, have = 0, take = 0;
        bz2_rle1_walk w = { 0 };
        while (!take) {
            size_t more = see - have < PEEK_STEP ? see - have : PEEK_STEP;
            read_at(fd, span + have, more, at + have);
            have += more;
            take = bz2_rle1_walk_to(span, have, have == left, &w, PART, limit);
            if (!take && have == see)
                take = have;
        }
        uint8_t *p = malloc(take);
        read_at(fd, p, take, at);
        free(p);
        at += take;
    }
    free(span);
    return parts;
}

static unsigned run_tail(int fd, size_t size, size_t limit)
{
    unsigned parts = 0;
    uint8_t *tail = NULL;
    size_t tail_len = 0;
    for (size_t read_at_ = 0; read_at_ < size || tail_len; parts++) {
        size_t n = size - read_at_ < PART ? size - read_at_ : PART;
        uint8_t *p = malloc(HEAD + n);
        read_at(fd, p + HEAD, n, read_at_);
        read_at_ += n;
        memcpy(p + HEAD - tail_len, tail, tail_len);
        uint8_t *part = p + HEAD - tail_len;
        size_t len = tail_len + n;
        size_t keep = read_at_ < size ? bz2_rle1_last_start(part, len, limit, NULL, 0) : len;
        if (!keep)
            keep = len;
        free(tail);
        tail_len = len - keep;
        tail = malloc(tail_len ? tail_len : 1);
        memcpy(tail, part + keep, tail_len);
        free(p);
    }
    free(tail);
    return parts;
}

static uint8_t *whole_file(int fd, size_t size)
{
    static uint8_t *all;
    if (!all) {
        all = malloc(size);
        read_at(fd, all, size, 0);
    }
    return all;
}

/*
 * The chain alone, as the daemon runs it: reads and their scans
 * (bz2_rle1_scan) happen on other threads, made once here and not timed
 * from the second run on; per part, the tail in front, the settle, the
 * tail out.
 */
static unsigned run_settle(int fd, size_t size, size_t limit)
{
    static bz2_rle1_tiles **scans;
    static uint8_t **reads;
    size_t nparts = (size + PART - 1) / PART;
    if (!scans) {
        uint8_t *all = whole_file(fd, size);
        scans = calloc(nparts, sizeof *scans);
        reads = calloc(nparts, sizeof *reads);
        for (size_t k = 0; k < nparts; k++) {
            size_t n = size - k * PART < PART ? size - k * PART : PART;
            reads[k] = malloc(HEAD + n);
            memcpy(reads[k] + HEAD, all + k * PART, n);
            scans[k] = bz2_rle1_scan(reads[k] + HEAD, n);
        }
    }
    unsigned parts = 0;
    uint8_t *tail = NULL;
    size_t tail_len = 0;
    for (size_t k = 0; k < nparts; k++, parts++) { /* the last part keeps all */
        size_t n = size - k * PART < PART ? size - k * PART : PART;
        uint8_t *part = reads[k] + HEAD - tail_len;
        memcpy(part, tail, tail_len);
        size_t len = tail_len + n;
        size_t keep = k + 1 < nparts ? bz2_rle1_last_start(part, len, limit, scans[k], tail_len) : len;
        if (!keep)
            keep = len;
        uint8_t *rest = malloc(len - keep ? len - keep : 1);
        memcpy(rest, part + keep, len - keep);
        free(tail);
        tail = rest;
        tail_len = len - keep;
    }
    free(tail);
    return parts;
}

static unsigned run_walk(int fd, size_t size, size_t limit)
{
    uint8_t *all = whole_file(fd, size);
    size_t *starts = NULL;
    size_t nb = bz2_rle1_plan(all, size, limit, 1, &starts);
    free(starts);
    return (unsigned)nb;
}

int main(int argc, char **argv)
{
    int level = 9, repeats = 3, c;
    while ((c = getopt(argc, argv, "l:r:")) != -1) {
        if (c == 'l')
            level = atoi(optarg);
        else if (c == 'r')
            repeats = atoi(optarg);
        else
            return 2;
    }
    if (argc - optind != 2) {
        fprintf(stderr, "usage: bench_bz2_cut [-l LEVEL] [-r REPEATS] fixed|peek|tail|settle|walk FILE\n");
        return 2;
    }
    const char *mode = argv[optind];
    unsigned (*run)(int, size_t, size_t) = !strcmp(mode, "fixed")    ? run_fixed
                                           : !strcmp(mode, "peek")   ? run_peek
                                           : !strcmp(mode, "tail")   ? run_tail
                                           : !strcmp(mode, "walk")   ? run_walk
                                           : !strcmp(mode, "settle") ? run_settle
                                                                     : NULL;
    int fd = open(argv[optind + 1], O_RDONLY);
    if (!run || fd < 0) {
        fprintf(stderr, "bench_bz2_cut: bad mode or file\n");
        return 2;
    }
    size_t size = (size_t)lseek(fd, 0, SEEK_END);
    double best = 1e30;
    unsigned parts = 0;
    for (int i = 0; i < repeats; i++) {
        double t0 = now();
        parts = run(fd, size, bz2_block_limit(level));
        double t = now() - t0;
        best = t < best ? t : best;
    }
    printf("%s %.2f %u\n", mode, size / best / 1e9, parts);
    close(fd);
    return 0;
}
