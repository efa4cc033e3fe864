/*
 * check_local.c - the library without the daemon: gpucomp_open with no
 * daemon (requests in process, backend GPUCOMP_BACKEND_LOCAL), the fallback
 * when the daemon goes away, the _into calls with their "too small" status,
 * and gpucomp_compress_bound against real outputs. (A refusing daemon:
 * check_access.c.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "daemon_harness.h"
#include "gpucomp.h"

static test_daemon dut;

static void teardown(void)
{
    test_daemon_cleanup(&dut);
    memset(&dut, 0, sizeof dut);
}

static const char *no_daemon = "/nonexistent/gpucompd-check-local.sock";

static void opts(gpucomp_options *o, gpucomp_codec codec)
{
    gpucomp_options_init(o, codec);
}

/* Round trip through c (or in process when c is NULL) with the _into calls. */
static void round_trip_into(gpucomp_client *c, gpucomp_codec codec, const uint8_t *data, size_t len)
{
    gpucomp_options o;
    opts(&o, codec);
    size_t cap = gpucomp_compress_bound(&o, len);
    ck_assert_uint_gt(cap, 0);
    uint8_t *packed = malloc(cap), *unpacked = malloc(len ? len : 1);
    size_t packed_len = SIZE_MAX, unpacked_len = SIZE_MAX;
    int rc = gpucomp_compress_into(c, &o, data, len, packed, cap, &packed_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress_into %zu bytes: %s", len, gpucomp_last_error(c));
    ck_assert_uint_le(packed_len, cap);
    rc = gpucomp_decompress_into(c, &o, packed, packed_len, unpacked, len, &unpacked_len);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress_into: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(unpacked_len, len);
    ck_assert(len == 0 || memcmp(unpacked, data, len) == 0);
    free(packed);
    free(unpacked);
}

START_TEST(test_open_without_daemon)
{
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_open(no_daemon, &c), GPUCOMP_OK);
    ck_assert_ptr_nonnull(c);
    ck_assert_msg(strstr(gpucomp_last_error(c), no_daemon) != NULL, "why: %s", gpucomp_last_error(c));
    size_t len = 300000;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 2, 7);
    for (int codec = GPUCOMP_CODEC_RLE; codec <= GPUCOMP_CODEC_BZIP2; codec++) {
        gpucomp_options o;
        opts(&o, (gpucomp_codec)codec);
        void *packed = NULL, *unpacked = NULL;
        size_t packed_len = 0, unpacked_len = 0;
        ck_assert_int_eq(gpucomp_compress(c, &o, data, len, &packed, &packed_len), GPUCOMP_OK);
        ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_LOCAL);
        ck_assert_int_eq(gpucomp_decompress(c, &o, packed, packed_len, &unpacked, &unpacked_len), GPUCOMP_OK);
        ck_assert_uint_eq(unpacked_len, len);
        ck_assert(memcmp(unpacked, data, len) == 0);
        gpucomp_free(packed);
        gpucomp_free(unpacked);
        round_trip_into(c, (gpucomp_codec)codec, data, len);
        ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_LOCAL);
        round_trip_into(NULL, (gpucomp_codec)codec, data, len);
    }
    /* damaged input is still an error, with a message */
    gpucomp_options o;
    opts(&o, GPUCOMP_CODEC_BZIP2);
    void *out = NULL;
    size_t out_len = 0;
    ck_assert_int_eq(gpucomp_decompress(c, &o, "BZh9junkjunk", 12, &out, &out_len), GPUCOMP_E_CORRUPT);
    ck_assert_ptr_null(out);
    ck_assert_str_ne(gpucomp_last_error(c), "");
    /* what needs the daemon says so */
    ck_assert_int_ne(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
    free(data);
    /* gpucomp_connect keeps its meaning: no daemon is an error */
    ck_assert_int_eq(gpucomp_connect(no_daemon, &c), GPUCOMP_E_CONNECT);
    ck_assert_ptr_null(c);
}
END_TEST

/* In process, the bytes are the daemon's (the same CPU engine). */
START_TEST(test_local_output_is_the_daemons)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *d = NULL, *l = NULL;
    ck_assert_int_eq(gpucomp_open(dut.socket_path, &d), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_open(no_daemon, &l), GPUCOMP_OK);
    size_t len = 200000;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 1, 3);
    for (int codec = GPUCOMP_CODEC_RLE; codec <= GPUCOMP_CODEC_BZIP2; codec++) {
        gpucomp_options o;
        opts(&o, (gpucomp_codec)codec);
        void *a = NULL, *b = NULL;
        size_t a_len = 0, b_len = 0;
        ck_assert_int_eq(gpucomp_compress(d, &o, data, len, &a, &a_len), GPUCOMP_OK);
        ck_assert_int_eq(gpucomp_last_backend(d), GPUCOMP_BACKEND_CPU);
        ck_assert_int_eq(gpucomp_compress(l, &o, data, len, &b, &b_len), GPUCOMP_OK);
        ck_assert_int_eq(gpucomp_last_backend(l), GPUCOMP_BACKEND_LOCAL);
        ck_assert_uint_eq(a_len, b_len);
        ck_assert(memcmp(a, b, a_len) == 0);
        gpucomp_free(a);
        gpucomp_free(b);
    }
    gpucomp_close(d);
    gpucomp_close(l);
    free(data);
}
END_TEST

/*
 * The daemon goes away: a client from gpucomp_open goes on in process; one
 * from gpucomp_connect fails as before, unless its fallback is turned on,
 * and its _into calls fall back anyway.
 */
START_TEST(test_fallback_when_the_daemon_goes)
{
    test_daemon_start(&dut, NULL);
    gpucomp_client *opened = NULL, *connected = NULL, *switched = NULL;
    ck_assert_int_eq(gpucomp_open(dut.socket_path, &opened), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &connected), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &switched), GPUCOMP_OK);
    gpucomp_set_fallback(switched, 1);
    uint8_t data[5000];
    fill_test_data(data, sizeof data, 2, 1);
    void *out = NULL;
    size_t out_len = 0;
    ck_assert_int_eq(gpucomp_compress(opened, NULL, data, sizeof data, &out, &out_len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(opened), GPUCOMP_BACKEND_CPU);
    gpucomp_free(out);
    test_daemon_stop(&dut);

    ck_assert_int_eq(gpucomp_compress(opened, NULL, data, sizeof data, &out, &out_len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(opened), GPUCOMP_BACKEND_LOCAL);
    gpucomp_free(out);
    ck_assert_int_eq(gpucomp_compress(switched, NULL, data, sizeof data, &out, &out_len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(switched), GPUCOMP_BACKEND_LOCAL);
    gpucomp_free(out);
    int rc = gpucomp_compress(connected, NULL, data, sizeof data, &out, &out_len);
    ck_assert_msg(rc == GPUCOMP_E_IO || rc == GPUCOMP_E_CONNECT, "no daemon, no fallback: %d", rc);
    ck_assert_ptr_null(out);
    round_trip_into(connected, GPUCOMP_CODEC_BZIP2, data, sizeof data);
    ck_assert_int_eq(gpucomp_last_backend(connected), GPUCOMP_BACKEND_LOCAL);
    gpucomp_close(opened);
    gpucomp_close(connected);
    gpucomp_close(switched);
}
END_TEST

/* An output one byte larger than the buffer: GPUCOMP_E_TOO_SMALL, the size needed, dst untouched. */
START_TEST(test_into_too_small)
{
    size_t len = 10000;
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 0, 5);
    for (int codec = GPUCOMP_CODEC_RLE; codec <= GPUCOMP_CODEC_BZIP2; codec++) {
        gpucomp_options o;
        opts(&o, (gpucomp_codec)codec);
        size_t cap = gpucomp_compress_bound(&o, len), n = 0;
        uint8_t *packed = malloc(cap);
        ck_assert_int_eq(gpucomp_compress_into(NULL, &o, data, len, packed, cap, &n), GPUCOMP_OK);
        size_t need = n;
        uint8_t *small = malloc(need);
        memset(small, 0xA5, need);
        ck_assert_int_eq(gpucomp_compress_into(NULL, &o, data, len, small, need - 1, &n), GPUCOMP_E_TOO_SMALL);
        ck_assert_uint_eq(n, need);
        ck_assert_int_eq(small[0], 0xA5);
        ck_assert_ptr_nonnull(strstr(gpucomp_last_error(NULL), "buffer"));
        /* decompression: len - 1 bytes of room */
        uint8_t *back = malloc(len);
        memset(back, 0x5A, len);
        ck_assert_int_eq(gpucomp_decompress_into(NULL, &o, packed, need, back, len - 1, &n), GPUCOMP_E_TOO_SMALL);
        ck_assert_uint_eq(n, len);
        ck_assert_int_eq(back[0], 0x5A);
        ck_assert_int_eq(gpucomp_decompress_into(NULL, &o, packed, need, back, len, &n), GPUCOMP_OK);
        ck_assert(n == len && memcmp(back, data, len) == 0);
        /* zero room and a NULL buffer: fine for an empty output only */
        ck_assert_int_eq(gpucomp_decompress_into(NULL, &o, packed, need, NULL, 0, &n), GPUCOMP_E_TOO_SMALL);
        ck_assert_int_eq(gpucomp_compress_into(NULL, &o, data, len, NULL, 5, &n), GPUCOMP_E_INVALID);
        free(packed);
        free(small);
        free(back);
    }
    ck_assert_str_eq(gpucomp_strerror(GPUCOMP_E_TOO_SMALL), "output buffer too small");
    free(data);
}
END_TEST

/* bound >= output for random, empty, 1-byte and large inputs, both codecs, several settings. */
START_TEST(test_compress_bound)
{
    static const size_t sizes[] = { 0, 1, 2, 1000, 900001, 3u << 20 };
    size_t max = 3u << 20;
    uint8_t *data = malloc(max);
    for (int kind = 0; kind <= 1; kind++) {
        fill_test_data(data, max, kind, 11);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            for (int codec = GPUCOMP_CODEC_RLE; codec <= GPUCOMP_CODEC_BZIP2; codec++) {
                gpucomp_options o;
                opts(&o, (gpucomp_codec)codec);
                if (codec == GPUCOMP_CODEC_BZIP2)
                    o.level = 1; /* the most blocks, so the most block overhead */
                else
                    o.chunk_size = 4096; /* the most chunks */
                size_t bound = gpucomp_compress_bound(&o, sizes[i]);
                size_t out_len = 0; /* every output has a header: no room is too small, and says the size */
                ck_assert_int_eq(gpucomp_compress_into(NULL, &o, data, sizes[i], NULL, 0, &out_len),
                                 GPUCOMP_E_TOO_SMALL);
                ck_assert_uint_gt(out_len, 0);
                ck_assert_msg(out_len <= bound, "codec %d, %zu bytes (kind %d): output %zu > bound %zu", codec,
                              sizes[i], kind, out_len, bound);
            }
        }
    }
    gpucomp_options o;
    opts(&o, GPUCOMP_CODEC_BZIP2);
    ck_assert_uint_eq(gpucomp_compress_bound(&o, SIZE_MAX), 0);
    ck_assert_uint_eq(gpucomp_compress_bound(NULL, 100), gpucomp_compress_bound(&o, 100));
    o.codec = (gpucomp_codec)99;
    ck_assert_uint_eq(gpucomp_compress_bound(&o, 100), 0);
    free(data);
}
END_TEST

static Suite *local_suite(void)
{
    Suite *s = suite_create("local");
    TCase *tc = tcase_create("no-daemon");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_open_without_daemon);
    tcase_add_test(tc, test_local_output_is_the_daemons);
    tcase_add_test(tc, test_fallback_when_the_daemon_goes);
    tcase_add_test(tc, test_into_too_small);
    tcase_add_test(tc, test_compress_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(local_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
