/*
 * check_io_pool.c - the file I/O threads (daemon/sched/io_pool.h): tasks
 * marked first run ahead of the queue and on a thread the others leave
 * free, so a chain every stream part waits on (settles, placements) never
 * waits for long reads to end; plain tasks still run several at once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "io_pool.h"
#include "parallel.h"

/* Plain tasks block in their work until released: they stand for long reads. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static atomic_uint started, finished;

static void blocking_work(gcd_io_task *t)
{
    (void)t;
    atomic_fetch_add(&started, 1);
    pthread_mutex_lock(&gate_lock);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
}

static void quick_work(gcd_io_task *t)
{
    (void)t;
    atomic_fetch_add(&started, 1);
}

static void open_gate(void)
{
    pthread_mutex_lock(&gate_lock);
    gate_open = true;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

/* done callbacks run on the loop: count, and stop the loop once `want` are back */
static unsigned want;
static struct event_base *base;

static void count_done(gcd_io_task *t)
{
    (void)t;
    if (atomic_fetch_add(&finished, 1) + 1 >= want)
        event_base_loopbreak(base);
}

/* Run the loop until `until` tasks are back or seconds pass. */
static void run_until(unsigned until, int seconds)
{
    want = until;
    struct timeval tv = { seconds, 0 };
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

static void setup(void)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    gate_open = false;
    atomic_store(&started, 0);
    atomic_store(&finished, 0);
}

static void teardown(void)
{
    event_base_free(base);
}

static gcd_io_task task(void (*work)(gcd_io_task *), bool first)
{
    return (gcd_io_task){ .fd = -1, .first = first, .work = work, .done = count_done };
}

/* Two threads, both busy with plain tasks before: the first task waited for them (a stream's settle chain stalled). */
START_TEST(first_task_runs_beside_long_plain_ones)
{
    gcd_io_pool *p = gcd_io_pool_start(base, 2);
    ck_assert_ptr_nonnull(p);
    gcd_io_task plain[3] = { task(blocking_work, false), task(blocking_work, false), task(blocking_work, false) };
    for (int i = 0; i < 3; i++)
        gcd_io_pool_submit(p, &plain[i]);
    while (atomic_load(&started) < 1)
        usleep(1000);
    gcd_io_task first = task(quick_work, true);
    gcd_io_pool_submit(p, &first);
    run_until(1, 10);
    ck_assert_msg(atomic_load(&finished) == 1, "the first task did not run while plain tasks held the threads");
    ck_assert_uint_eq(atomic_load(&started), 2); /* one plain, then the first task: the other plain ones wait */
    open_gate();
    run_until(4, 10);
    ck_assert_uint_eq(atomic_load(&finished), 4);
    gcd_io_pool_stop(p);
}
END_TEST

/* Plain tasks still use every thread but one, at once. */
START_TEST(plain_tasks_run_side_by_side)
{
    gcd_io_pool *p = gcd_io_pool_start(base, 4);
    ck_assert_ptr_nonnull(p);
    gcd_io_task plain[5];
    for (int i = 0; i < 5; i++) {
        plain[i] = task(blocking_work, false);
        gcd_io_pool_submit(p, &plain[i]);
    }
    for (int i = 0; i < 10000 && atomic_load(&started) < 3; i++)
        usleep(1000);
    ck_assert_uint_eq(atomic_load(&started), 3);
    usleep(100000);
    ck_assert_uint_eq(atomic_load(&started), 3); /* the fourth thread stays free */
    open_gate();
    run_until(5, 10);
    ck_assert_uint_eq(atomic_load(&finished), 5);
    gcd_io_pool_stop(p);
}
END_TEST

/* One thread: it takes plain tasks too (nothing to leave free). */
START_TEST(one_thread_runs_everything)
{
    gcd_io_pool *p = gcd_io_pool_start(base, 1);
    ck_assert_ptr_nonnull(p);
    gcd_io_task t[3] = { task(quick_work, false), task(quick_work, true), task(quick_work, false) };
    for (int i = 0; i < 3; i++)
        gcd_io_pool_submit(p, &t[i]);
    run_until(3, 10);
    ck_assert_uint_eq(atomic_load(&finished), 3);
    gcd_io_pool_stop(p);
}
END_TEST

START_TEST(default_size_is_one_thread_per_two_cpus_within_bounds)
{
    ck_assert_uint_eq(gcd_io_threads(3), 3); /* a configured count stands as it is */
    unsigned n = gcd_io_threads(0), half = gc_cpu_count() / 2;
    ck_assert_uint_ge(n, 8);
    ck_assert_uint_le(n, 64);
    ck_assert_uint_eq(n, half < 8 ? 8 : half > 64 ? 64 : half);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("io_pool");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, first_task_runs_beside_long_plain_ones);
    tcase_add_test(tc, plain_tasks_run_side_by_side);
    tcase_add_test(tc, one_thread_runs_everything);
    tcase_add_test(tc, default_size_is_one_thread_per_two_cpus_within_bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
