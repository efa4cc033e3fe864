/*
 * check_fair_queue.c - the queue the CPU workers and the lanes serve from
 * (daemon/sched/fair_queue.h): order within a connection, turns across users and
 * across one user's connections, fairness by bytes, and memory that goes
 * back as flows empty.
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "fair_queue.h"

#define MAX_REQS 4096

static gcd_request reqs[MAX_REQS];
static size_t n_reqs;

/* Fake connections: only their addresses matter to the queue. */
static char conns[16];

static gcd_request *req(uid_t uid, int conn, uint64_t size)
{
    ck_assert_uint_lt(n_reqs, MAX_REQS);
    gcd_request *r = &reqs[n_reqs];
    memset(r, 0, sizeof *r);
    r->id = n_reqs++;
    r->uid = uid;
    r->conn = (struct gcd_conn *)&conns[conn];
    r->total_size = size;
    return r;
}

static void setup(void)
{
    n_reqs = 0;
}

static void drain(gcd_fair_queue *q)
{
    while (gcd_fair_pop(q))
        ;
    ck_assert_uint_eq(q->count, 0);
    ck_assert_uint_eq(q->bytes, 0);
    ck_assert_uint_eq(q->flows, 0);
}

START_TEST(test_one_connection_is_fifo)
{
    gcd_fair_queue q;
    gcd_fair_init(&q);
    ck_assert_ptr_null(gcd_fair_pop(&q));
    ck_assert_ptr_null(gcd_fair_peek(&q));
    for (int i = 0; i < 100; i++)
        gcd_fair_push(&q, req(1000, 0, (uint64_t)(i * 7919 % 1000)));
    ck_assert_uint_eq(q.count, 100);
    for (uint64_t i = 0; i < 100; i++) {
        gcd_request *peeked = gcd_fair_peek(&q);
        gcd_request *r = gcd_fair_pop(&q);
        ck_assert_ptr_eq(peeked, r);
        ck_assert_uint_eq(r->id, i);
        ck_assert_ptr_null(r->next);
    }
    drain(&q);
}
END_TEST

/* A user's one request waits behind at most one request of a user with a thousand queued. */
START_TEST(test_newcomer_is_served_next)
{
    gcd_fair_queue q;
    gcd_fair_init(&q);
    for (int i = 0; i < 1000; i++)
        gcd_fair_push(&q, req(0, i % 8, 1u << 20));
    for (int i = 0; i < 300; i++) /* the flood has been served for a while */
        ck_assert_uint_eq(gcd_fair_pop(&q)->uid, 0);
    gcd_request *small = req(65534, 9, 256u << 10);
    gcd_fair_push(&q, small);
    gcd_request *first = gcd_fair_pop(&q), *second = gcd_fair_pop(&q);
    ck_assert_msg(first == small || second == small, "the newcomer was not served within two requests");
    drain(&q);
}
END_TEST

/* Users with requests of one size take turns. */
START_TEST(test_users_take_turns)
{
    gcd_fair_queue q;
    gcd_fair_init(&q);
    for (int i = 0; i < 50; i++)
        gcd_fair_push(&q, req(1, 0, 1000));
    for (int i = 0; i < 50; i++)
        gcd_fair_push(&q, req(2, 1, 1000));
    for (int i = 0; i < 50; i++)
        gcd_fair_push(&q, req(3, 2, 1000));
    for (int round = 0; round < 50; round++) {
        int seen[4] = { 0 };
        for (int k = 0; k < 3; k++)
            seen[gcd_fair_pop(&q)->uid]++;
        ck_assert_msg(seen[1] == 1 && seen[2] == 1 && seen[3] == 1, "round %d: %d %d %d", round, seen[1], seen[2],
                      seen[3]);
    }
    drain(&q);
}
END_TEST

/* By bytes: a user of few huge requests and one of many small ones get the same bytes. */
START_TEST(test_fair_by_bytes)
{
    gcd_fair_queue q;
    gcd_fair_init(&q);
    const uint64_t big = 1u << 20, small = 16u << 10;
    for (int i = 0; i < 16; i++)
        gcd_fair_push(&q, req(1, 0, big));
    for (int i = 0; i < 2000; i++)
        gcd_fair_push(&q, req(2, 1, small));
    uint64_t served[3] = { 0 };
    unsigned popped[3] = { 0 };
    while (popped[1] < 16) {
        gcd_request *r = gcd_fair_pop(&q);
        served[r->uid] += r->total_size + GCD_FAIR_REQUEST_COST;
        popped[r->uid]++;
        uint64_t gap = served[1] > served[2] ? served[1] - served[2] : served[2] - served[1];
        ck_assert_msg(gap <= big + GCD_FAIR_REQUEST_COST, "%llu bytes apart after %u and %u requests",
                      (unsigned long long)gap, popped[1], popped[2]);
    }
    /* Each was served about 16 MiB: the small requests' user some 16 MiB / 20 KiB of them. */
    ck_assert_uint_ge(popped[2], 16 * (big + GCD_FAIR_REQUEST_COST) / (small + GCD_FAIR_REQUEST_COST) - 52);
    drain(&q);
}
END_TEST

/* Within a user, its connections take turns: one connection's flood does not hold back another's. */
START_TEST(test_connections_of_one_user_take_turns)
{
    gcd_fair_queue q;
    gcd_fair_init(&q);
    for (int i = 0; i < 500; i++)
        gcd_fair_push(&q, req(7, 0, 1u << 20));
    for (int i = 0; i < 10; i++)
        gcd_fair_pop(&q);
    gcd_request *other = req(7, 1, 1u << 20);
    gcd_fair_push(&q, other);
    gcd_request *first = gcd_fair_pop(&q), *second = gcd_fair_pop(&q);
    ck_assert(first == other || second == other);
    /* And two busy connections alternate. */
    for (int i = 0; i < 20; i++)
        gcd_fair_push(&q, req(7, 1, 1u << 20));
    for (int i = 0; i < 20; i++) {
        gcd_request *a = gcd_fair_pop(&q), *b = gcd_fair_pop(&q);
        ck_assert_ptr_ne(a->conn, b->conn);
    }
    drain(&q);
}
END_TEST

/* A user served long ago comes back level with the others: idle time is no credit, past work no debt. */
START_TEST(test_returning_user_starts_level)
{
    gcd_fair_queue q;
    gcd_fair_init(&q);
    for (int i = 0; i < 100; i++)
        gcd_fair_push(&q, req(1, 0, 1u << 20));
    gcd_fair_push(&q, req(2, 1, 1u << 20));
    for (int i = 0; i < 50; i++)
        gcd_fair_pop(&q); /* user 2's one request went early; user 1 has been served since */
    for (int i = 0; i < 10; i++)
        gcd_fair_push(&q, req(2, 1, 1u << 20));
    /* User 2 does not get ten turns in a row for the time it waited, nor wait for user 1's debt. */
    int run = 0, longest = 0;
    for (int i = 0; i < 20; i++) {
        run = gcd_fair_pop(&q)->uid == 2 ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    ck_assert_int_le(longest, 2);
    drain(&q);
}
END_TEST

/* Nodes live only while their flow has requests; take_all empties the queue in fair order. */
START_TEST(test_memory_follows_the_requests)
{
    gcd_fair_queue q;
    gcd_fair_init(&q);
    for (int round = 0; round < 3; round++) {
        n_reqs = 0;
        for (int i = 0; i < 1000; i++) {
            gcd_fair_push(&q, req((uid_t)(i % 37), i % 16, (uint64_t)i));
            ck_assert_uint_le(q.flows, 2 * q.count);
        }
        ck_assert_uint_eq(q.count, 1000);
        ck_assert_uint_eq(q.bytes, 999u * 1000u / 2);
        for (int i = 0; i < 500; i++) {
            gcd_fair_pop(&q);
            ck_assert_uint_le(q.flows, 2 * q.count);
        }
        gcd_request *first = gcd_fair_peek(&q);
        gcd_request *all = gcd_fair_take_all(&q);
        ck_assert_ptr_eq(all, first);
        size_t n = 0;
        for (gcd_request *r = all; r; r = r->next)
            n++;
        ck_assert_uint_eq(n, 500);
        ck_assert_uint_eq(q.count, 0);
        ck_assert_uint_eq(q.flows, 0);
        ck_assert_ptr_null(q.users);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fair_queue");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_one_connection_is_fifo);
    tcase_add_test(tc, test_newcomer_is_served_next);
    tcase_add_test(tc, test_users_take_turns);
    tcase_add_test(tc, test_fair_by_bytes);
    tcase_add_test(tc, test_connections_of_one_user_take_turns);
    tcase_add_test(tc, test_returning_user_starts_level);
    tcase_add_test(tc, test_memory_follows_the_requests);
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
