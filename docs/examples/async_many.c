/*
 * async_many.c - many requests in flight on one connection: submit N
 * compressions, wait on gpucomp_async_fd with poll() (as an event loop
 * would), decompress each result from its callback, check every round trip.
 *
 *     cc async_many.c -o async_many $(pkg-config --cflags --libs gpucomp-client)
 *     ./async_many [N]
 *
 * Exits 0 when all N inputs came back intact, 1 (with a message) otherwise.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpucomp.h>

typedef struct job {
    gpucomp_client *c;
    unsigned char *data;
    size_t len;
    int done; /* 1: verified, -1: failed */
} job;

static int finished, failed;

static void fail(job *j, const char *what, const char *msg)
{
    fprintf(stderr, "async_many: %zu-byte input: %s: %s\n", j->len, what, msg);
    j->done = -1;
    finished++;
    failed++;
}

static void decompressed(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    job *j = arg;
    (void)id;
    if (status != GPUCOMP_OK)
        fail(j, "decompress", *msg ? msg : gpucomp_strerror(status));
    else if (out_len != j->len || memcmp(out, j->data, out_len) != 0)
        fail(j, "round trip", "the output differs from the input");
    else {
        j->done = 1;
        finished++;
    }
}

static void compressed(void *arg, uint64_t id, int status, const char *msg, const void *out, size_t out_len)
{
    job *j = arg;
    (void)id;
    if (status != GPUCOMP_OK) {
        fail(j, "compress", *msg ? msg : gpucomp_strerror(status));
        return;
    }
    /* out is valid only during the callback: gpucomp_submit copies it. */
    int rc = gpucomp_submit(j->c, GPUCOMP_DECOMPRESS, NULL, out, out_len, decompressed, j, NULL);
    if (rc != GPUCOMP_OK)
        fail(j, "submit", gpucomp_last_error(j->c));
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
    if (n < 1 || n > 100000) {
        fprintf(stderr, "usage: async_many [N (1..100000)]\n");
        return 2;
    }
    job *jobs = calloc((size_t)n, sizeof *jobs);
    if (!jobs) {
        fprintf(stderr, "async_many: out of memory\n");
        return 1;
    }
    gpucomp_client *c = NULL;
    if (gpucomp_connect(NULL, &c) != GPUCOMP_OK) {
        fprintf(stderr, "async_many: connect: %s\n", gpucomp_connect_error());
        free(jobs);
        return 1;
    }
    int status = 0;
    long submitted = 0;
    for (long i = 0; i < n; i++) {
        job *j = &jobs[i];
        j->c = c;
        j->len = (size_t)(i * 7919) % (200 << 10); /* 0 to 200 KiB: both transports */
        j->data = malloc(j->len ? j->len : 1);
        if (!j->data) {
            fprintf(stderr, "async_many: out of memory\n");
            status = 1;
            break;
        }
        for (size_t k = 0; k < j->len; k++) /* compressible, not trivial */
            j->data[k] = (unsigned char)("gpucompd async "[(k / 3 + (size_t)i) % 15] ^ (k % 97 == 0));
        if (gpucomp_submit(c, GPUCOMP_COMPRESS, NULL, j->data, j->len, compressed, j, NULL) != GPUCOMP_OK) {
            fprintf(stderr, "async_many: submit: %s\n", gpucomp_last_error(c));
            status = 1;
            break;
        }
        submitted++;
        /* Read answers as they come: the daemon stops reading a client that never does. */
        if (gpucomp_async_poll(c, 0) < 0) {
            fprintf(stderr, "async_many: %s\n", gpucomp_last_error(c));
            status = 1;
            break;
        }
    }
    while (status == 0 && gpucomp_async_pending(c) > 0) {
        struct pollfd p = { .fd = gpucomp_async_fd(c), .events = POLLIN };
        if (p.fd < 0 || (poll(&p, 1, -1) < 0 && errno != EINTR)) {
            fprintf(stderr, "async_many: the connection is gone: %s\n", gpucomp_last_error(c));
            status = 1;
            break;
        }
        if (gpucomp_async_poll(c, 0) < 0) {
            fprintf(stderr, "async_many: %s\n", gpucomp_last_error(c));
            status = 1;
        }
    }
    if (status == 0 && (failed || finished != submitted)) {
        fprintf(stderr, "async_many: %d of %ld round trips failed\n", failed + (int)(submitted - finished), n);
        status = 1;
    }
    if (status == 0)
        printf("async_many: %ld round trips verified\n", n);
    gpucomp_close(c); /* drops whatever is still outstanding, without callbacks */
    for (long i = 0; i < n; i++)
        free(jobs[i].data);
    free(jobs);
    return status;
}
