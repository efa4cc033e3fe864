/*
 * check_memory.c - memory goes back when clients leave: a 64-client soak of
 * whole requests and streams against a real gpucompd, then its private
 * memory (Private_Dirty of /proc/PID/smaps_rollup) must come back within
 * 50 MB of what it was before the soak, within 10 s of the last client
 * leaving (daemon/mem/trim.h).
 *
 * GPUCOMP_SOAK_SECONDS sets the soak's length (default 12; scripts/soak.sh
 * runs the long one and prints the numbers). Under AddressSanitizer the
 * daemon's heap is ASan's (a quarantine of freed blocks, its own release
 * policy): the soak runs and every answer is checked, the bound is not.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "gpucomp.h"

#define CLIENTS 64
#define MB 1000000L
#define SLACK_KB (50 * MB / 1000) /* the bound: 50 MB over the baseline */
#define SETTLE_S 10               /* ... within this long after the soak */

#if defined(__SANITIZE_ADDRESS__)
#define CHECK_BOUND 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_BOUND 0
#endif
#endif
#ifndef CHECK_BOUND
#define CHECK_BOUND 1
#endif

static test_daemon dut;

static void teardown(void)
{
    test_daemon_cleanup(&dut);
}

/* The daemon's private memory, kB. */
static long private_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Private_Dirty: %ld kB", &kb) == 1)
            break;
    fclose(f);
    ck_assert_int_ge(kb, 0);
    return kb;
}

typedef struct soaker {
    pthread_t thread;
    int index;
    double until;
    const uint8_t *data; /* shared input, SOAK_INPUT bytes */
    unsigned requests;
    char failure[256]; /* empty: every answer was right */
} soaker;

#define SOAK_INPUT (6u << 20)

static atomic_long peak_kb;

/* A stream of one direction over in, fed in 64 KiB pieces; the output malloc'd into *out. */
static int stream_one(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const uint8_t *in,
                      size_t len, uint8_t **out, size_t *out_len)
{
    gpucomp_stream *s = NULL;
    int rc = gpucomp_stream_open(c, dir, o, &s);
    if (rc != GPUCOMP_OK)
        return rc;
    size_t cap = len * 2 + 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t off = 0;
    while (rc == GPUCOMP_OK) {
        size_t piece = len - off < 65536 ? len - off : 65536;
        gpucomp_inbuf ib = { in + off, piece, 0 };
        gpucomp_end_op op = off + piece == len ? GPUCOMP_END : GPUCOMP_CONTINUE;
        size_t pending = 0;
        do {
            if (cap - n < 65536)
                buf = realloc(buf, cap *= 2);
            gpucomp_outbuf ob = { buf + n, cap - n, 0 };
            rc = gpucomp_stream_run(s, &ib, &ob, op, &pending);
            n += ob.pos;
        } while (rc == GPUCOMP_OK && (ib.pos < ib.size || (op == GPUCOMP_END && pending)));
        off += piece;
        if (op == GPUCOMP_END)
            break;
    }
    gpucomp_stream_free(s);
    *out = buf;
    *out_len = n;
    return rc;
}

/* One round of client i: whole requests (rle large, bzip2 small) and rle/bzip2 streams, all checked. */
static void soak_round(soaker *k, gpucomp_client *c, unsigned round)
{
    gpucomp_options rle, bz;
    gpucomp_options_init(&rle, GPUCOMP_CODEC_RLE);
    gpucomp_options_init(&bz, GPUCOMP_CODEC_BZIP2);
    bz.level = 1;
    size_t off = ((size_t)k->index * 7919u + round * 104729u) % (SOAK_INPUT / 2);
    bool use_bzip2 = (round + (unsigned)k->index) % 4 == 0;
    const gpucomp_options *o = use_bzip2 ? &bz : &rle;
    size_t len = use_bzip2 ? (256u << 10) + off % 65536 : (2u << 20) + off % (1u << 20);
    const uint8_t *in = k->data + off;
    uint8_t *packed = NULL, *plain = NULL;
    size_t packed_len = 0, plain_len = 0;
    int rc;
    if (round % 2) {
        rc = stream_one(c, GPUCOMP_COMPRESS, o, in, len, &packed, &packed_len);
        if (rc == GPUCOMP_OK)
            rc = stream_one(c, GPUCOMP_DECOMPRESS, o, packed, packed_len, &plain, &plain_len);
    } else {
        void *p = NULL, *q = NULL;
        rc = gpucomp_compress(c, o, in, len, &p, &packed_len);
        if (rc == GPUCOMP_OK)
            rc = gpucomp_decompress(c, o, p, packed_len, &q, &plain_len);
        packed = p ? malloc(1) : NULL; /* one free below for both shapes */
        plain = q ? malloc(plain_len ? plain_len : 1) : NULL;
        if (q && plain)
            memcpy(plain, q, plain_len);
        gpucomp_free(p);
        gpucomp_free(q);
    }
    if (rc != GPUCOMP_OK)
        snprintf(k->failure, sizeof k->failure, "client %d round %u (%s): %s", k->index, round,
                 round % 2 ? "stream" : "request", gpucomp_last_error(c));
    else if (plain_len != len || memcmp(plain, in, len) != 0)
        snprintf(k->failure, sizeof k->failure, "client %d round %u: the round trip differs", k->index, round);
    free(packed);
    free(plain);
    k->requests += 2;
}

static void *soak_main(void *arg)
{
    soaker *k = arg;
    gpucomp_client *c = NULL;
    if (gpucomp_connect(dut.socket_path, &c) != GPUCOMP_OK) {
        snprintf(k->failure, sizeof k->failure, "client %d: connect: %s", k->index, gpucomp_connect_error());
        return NULL;
    }
    for (unsigned round = 0; test_now_s() < k->until && !k->failure[0]; round++)
        soak_round(k, c, round);
    gpucomp_close(c);
    return NULL;
}

static double soak_seconds(void)
{
    const char *env = getenv("GPUCOMP_SOAK_SECONDS");
    double s = env ? atof(env) : 12;
    return s > 0 ? s : 12;
}

START_TEST(test_memory_back_after_soak)
{
    test_daemon_start(&dut, NULL);
    double seconds = soak_seconds();
    uint8_t *data = malloc(SOAK_INPUT);
    fill_test_data(data, SOAK_INPUT, 1, 42);
    long base = private_kb(dut.pid);
    atomic_store(&peak_kb, base);
    static soaker k[CLIENTS];
    memset(k, 0, sizeof k);
    double until = test_now_s() + seconds;
    for (int i = 0; i < CLIENTS; i++) {
        k[i] = (soaker){ .index = i, .until = until, .data = data };
        ck_assert_int_eq(pthread_create(&k[i].thread, NULL, soak_main, &k[i]), 0);
    }
    while (test_now_s() < until) {
        long kb = private_kb(dut.pid);
        if (kb > atomic_load(&peak_kb))
            atomic_store(&peak_kb, kb);
        usleep(200 * 1000);
    }
    unsigned requests = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(k[i].thread, NULL);
        ck_assert_msg(!k[i].failure[0], "%s", k[i].failure);
        requests += k[i].requests;
    }
    double end = test_now_s();
    long after = private_kb(dut.pid);
    while (after > base + SLACK_KB && test_now_s() < end + SETTLE_S) {
        usleep(250 * 1000);
        after = private_kb(dut.pid);
    }
    fprintf(stderr,
            "soak: %d clients, %.0f s, %u requests; daemon private memory kB: baseline %ld, peak %ld, "
            "%.1f s after the end %ld\n",
            CLIENTS, seconds, requests, base, atomic_load(&peak_kb), test_now_s() - end, after);
    if (CHECK_BOUND)
        ck_assert_msg(after <= base + SLACK_KB,
                      "private memory %ld kB, %ld kB over the baseline %ld kB, %d s after "
                      "the soak",
                      after, after - base, base, SETTLE_S);
    free(data);
    ck_assert_int_eq(test_daemon_stop(&dut), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("soak");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, soak_seconds() + 120); /* the soak, the settling, sanitizers' slowness */
    tcase_add_test(tc, test_memory_back_after_soak);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
