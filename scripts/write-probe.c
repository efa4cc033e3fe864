/*
 * write-probe.c - how fast one file of a host takes page-cache writes, from
 * one or more threads: the physical reference for a decompress to one
 * output file (docs/BENCHMARKS.md, "The user's path").
 *
 *   cc -O2 -pthread -o write-probe scripts/write-probe.c
 *   write-probe FILE MIB THREADS pwrite|mmap
 *
 * Creates FILE (removed after), writes MIB MiB into it, each thread its own
 * contiguous share in 8 MiB slices, with pwrite or by copying into a
 * shared mapping of the file, and prints MB/s (10^6 bytes per second of wall
 * time, from open to the last write or munmap; no fsync: the page cache's
 * speed, as a user's `cp` sees it).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SLICE ((size_t)8 << 20)
#define SOURCE ((size_t)256 << 20) /* bytes written over and over, so memory holds them */

typedef struct probe {
    int fd;
    size_t total;
    unsigned threads;
    uint8_t *src, *map; /* map: NULL for pwrite */
} probe;

typedef struct share {
    const probe *p;
    unsigned k;
    int failed;
} share;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *write_share(void *arg)
{
    share *sh = arg;
    const probe *p = sh->p;
    size_t per = p->total / p->threads, from = per * sh->k, to = from + per;
    for (size_t at = from; at < to; at += SLICE) {
        size_t n = to - at < SLICE ? to - at : SLICE;
        const uint8_t *bytes = p->src + at % SOURCE;
        if (p->map)
            memcpy(p->map + at, bytes, n);
        else if (pwrite(p->fd, bytes, n, (off_t)at) != (ssize_t)n)
            sh->failed = 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "pwrite") != 0 && strcmp(argv[4], "mmap") != 0)) {
        fprintf(stderr, "usage: write-probe FILE MIB THREADS pwrite|mmap\n");
        return 2;
    }
    probe p = { .total = (size_t)atol(argv[2]) << 20, .threads = (unsigned)atoi(argv[3]) };
    if (p.threads < 1 || p.threads > 64 || p.total < SLICE) {
        fprintf(stderr, "write-probe: 1..64 threads, at least 8 MiB\n");
        return 2;
    }
    p.src = malloc(SOURCE);
    if (!p.src)
        return 1;
    for (size_t i = 0; i < SOURCE; i++)
        p.src[i] = (uint8_t)((i * 2654435761u) >> 13);
    unlink(argv[1]);
    double t0 = now_s();
    p.fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (p.fd < 0) {
        perror("write-probe: open");
        return 1;
    }
    if (strcmp(argv[4], "mmap") == 0) {
        if (ftruncate(p.fd, (off_t)p.total) != 0) {
            perror("write-probe: ftruncate");
            return 1;
        }
        p.map = mmap(NULL, p.total, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, 0);
        if (p.map == MAP_FAILED) {
            perror("write-probe: mmap");
            return 1;
        }
    }
    pthread_t th[64];
    share sh[64];
    for (unsigned k = 0; k < p.threads; k++) {
        sh[k] = (share){ &p, k, 0 };
        if (pthread_create(&th[k], NULL, write_share, &sh[k]) != 0)
            return 1;
    }
    int failed = 0;
    for (unsigned k = 0; k < p.threads; k++) {
        pthread_join(th[k], NULL);
        failed |= sh[k].failed;
    }
    if (p.map)
        munmap(p.map, p.total);
    double t1 = now_s();
    close(p.fd);
    unlink(argv[1]);
    if (failed) {
        fprintf(stderr, "write-probe: a write failed\n");
        return 1;
    }
    printf("%s, %u thread%s, %zu MiB: %.0f MB/s\n", argv[4], p.threads, p.threads == 1 ? "" : "s", p.total >> 20,
           (double)p.total / (t1 - t0) / 1e6);
    free(p.src);
    return 0;
}
