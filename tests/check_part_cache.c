/*
 * check_part_cache.c - freed part buffers kept for reuse (daemon/mem/part_cache.h):
 * reused by the same user only, only for a request of about their size,
 * within the cache's bounds, and all given back on drop.
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "part_cache.h"

#define MIB ((size_t)1 << 20)

static void setup(void)
{
    gcd_part_cache_set_limit(1024 * MIB);
    gcd_part_cache_drop();
}

static void teardown(void)
{
    gcd_part_cache_drop();
}

START_TEST(test_same_user_reuses)
{
    unsigned long long before = gcd_part_cache_get_stats().reused;
    uint8_t *p = gcd_part_cache_alloc(1000, 32 * MIB);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xa5, 32 * MIB);
    gcd_part_cache_free(1000, p);
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 1);
    uint8_t *q = gcd_part_cache_alloc(1000, 32 * MIB - 4096);
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(gcd_part_cache_get_stats().reused, before + 1);
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 0);
    ck_assert_uint_eq(gcd_part_cache_get_stats().bytes, 0);
    gcd_part_cache_free(1000, q);
}
END_TEST

START_TEST(test_other_user_never_gets_it)
{
    uint8_t *p = gcd_part_cache_alloc(1000, 32 * MIB);
    ck_assert_ptr_nonnull(p);
    gcd_part_cache_free(1000, p);
    uint8_t *q = gcd_part_cache_alloc(1001, 32 * MIB); /* p is still kept: q cannot be at p */
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_ne(q, p);
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 1);
    gcd_part_cache_free(1001, q);
}
END_TEST

START_TEST(test_only_about_its_size)
{
    uint8_t *p = gcd_part_cache_alloc(7, 32 * MIB);
    gcd_part_cache_free(7, p);
    uint8_t *small = gcd_part_cache_alloc(7, 16 * MIB); /* would hold twice what it was charged */
    uint8_t *big = gcd_part_cache_alloc(7, 35 * MIB);   /* too small */
    ck_assert_ptr_ne(small, p);
    ck_assert_ptr_ne(big, p);
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 1);
    free(small);
    free(big);
}
END_TEST

START_TEST(test_output_bound_takes_an_input_block)
{
    uint8_t *in = gcd_part_cache_alloc(7, 32 * MIB);
    gcd_part_cache_free(7, in);
    uint8_t *out = gcd_part_cache_alloc(7, 32 * MIB + 65536); /* a bound a little over its input */
    ck_assert_ptr_eq(out, in);
    gcd_part_cache_free(7, out);
    ck_assert_ptr_eq(gcd_part_cache_alloc(7, 32 * MIB), in); /* and back */
    gcd_part_cache_free(7, in);
}
END_TEST

START_TEST(test_small_blocks_not_kept)
{
    gcd_part_cache_free(7, malloc(4096));
    gcd_part_cache_free(7, NULL);
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 0);
    void *z = gcd_part_cache_alloc(7, 0); /* still a block, as malloc(1) */
    ck_assert_ptr_nonnull(z);
    gcd_part_cache_free(7, z);
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 0);
}
END_TEST

START_TEST(test_bytes_bounded_oldest_first)
{
    gcd_part_cache_set_limit(100 * MIB);
    for (uid_t u = 1; u <= 4; u++)
        gcd_part_cache_free(u, gcd_part_cache_alloc(u, 32 * MIB));
    gcd_part_cache_stats st = gcd_part_cache_get_stats();
    ck_assert_uint_eq(st.buffers, 3);
    ck_assert_uint_le(st.bytes, 100 * MIB);
    void *first = gcd_part_cache_alloc(1, 32 * MIB); /* the oldest, user 1's, went */
    ck_assert_uint_eq(gcd_part_cache_get_stats().reused, st.reused);
    void *last = gcd_part_cache_alloc(4, 32 * MIB);
    ck_assert_uint_eq(gcd_part_cache_get_stats().reused, st.reused + 1);
    free(first);
    free(last);
    gcd_part_cache_free(5, malloc(200 * MIB)); /* larger than the whole limit: freed at once */
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 2);
}
END_TEST

START_TEST(test_count_bounded)
{
    for (int i = 0; i < GCD_PART_CACHE_MAX_BUFFERS + 8; i++)
        gcd_part_cache_free((uid_t)(100 + i), gcd_part_cache_alloc((uid_t)(100 + i), MIB));
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, GCD_PART_CACHE_MAX_BUFFERS);
}
END_TEST

START_TEST(test_drop_and_zero_limit_keep_nothing)
{
    for (uid_t u = 1; u <= 3; u++)
        gcd_part_cache_free(u, gcd_part_cache_alloc(u, 2 * MIB));
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 3);
    gcd_part_cache_drop();
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 0);
    ck_assert_uint_eq(gcd_part_cache_get_stats().bytes, 0);
    gcd_part_cache_set_limit(0);
    gcd_part_cache_free(1, gcd_part_cache_alloc(1, 2 * MIB));
    ck_assert_uint_eq(gcd_part_cache_get_stats().buffers, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("part_cache");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_same_user_reuses);
    tcase_add_test(tc, test_other_user_never_gets_it);
    tcase_add_test(tc, test_only_about_its_size);
    tcase_add_test(tc, test_output_bound_takes_an_input_block);
    tcase_add_test(tc, test_small_blocks_not_kept);
    tcase_add_test(tc, test_bytes_bounded_oldest_first);
    tcase_add_test(tc, test_count_bounded);
    tcase_add_test(tc, test_drop_and_zero_limit_keep_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
