/*
 * check_parallel.c - the CPU codecs' thread pool (common/parallel.h)
 * and their per-thread stage buffers (scratch.h): every item runs exactly
 * once, nesting and concurrent callers finish, callers add no threads,
 * idle threads give their buffers back, open-ended works hand out only
 * what was allowed, a forked child gets a pool of its own, the CPU
 * count follows the affinity mask, and a parallel copy copies every byte
 * and nothing else.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "parallel.h"
#include "scratch.h"

typedef struct counts {
    _Atomic unsigned *hits;
    size_t n;
    unsigned threads;
} counts;

static void hit(void *ctx, size_t i)
{
    counts *c = ctx;
    atomic_fetch_add(&c->hits[i], 1);
}

static void check_each_once(size_t n, unsigned threads)
{
    counts c = { .hits = calloc(n ? n : 1, sizeof *c.hits), .n = n, .threads = threads };
    ck_assert_ptr_nonnull(c.hits);
    gc_parallel_for(n, threads, hit, &c);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(atomic_load(&c.hits[i]) == 1, "n %zu threads %u: item %zu ran %u times", n, threads, i,
                      atomic_load(&c.hits[i]));
    free(c.hits);
}

START_TEST(test_every_item_once)
{
    static const size_t sizes[] = { 0, 1, 2, 5, 1000, 100000 };
    static const unsigned threads[] = { 0, 1, 2, 3, 64 };
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
            check_each_once(sizes[s], threads[t]);
}
END_TEST

/* An item that itself runs a parallel for: the inner caller, a pool thread,
 * takes part, so this finishes even when every pool thread is inside an outer item. */
static void outer_item(void *ctx, size_t i)
{
    counts *c = ctx;
    counts inner = { .hits = c->hits + i * 100, .n = 100, .threads = 0 };
    gc_parallel_for(100, 0, hit, &inner);
}

START_TEST(test_nested)
{
    size_t outer = 4 * gc_cpu_count() + 3;
    counts c = { .hits = calloc(outer * 100, sizeof *c.hits) };
    ck_assert_ptr_nonnull(c.hits);
    gc_parallel_for(outer, 0, outer_item, &c);
    for (size_t i = 0; i < outer * 100; i++)
        ck_assert_uint_eq(atomic_load(&c.hits[i]), 1);
    free(c.hits);
}
END_TEST

static void *caller_thread(void *arg)
{
    for (int round = 0; round < 20; round++)
        check_each_once(2000 + (size_t)round, (unsigned)(uintptr_t)arg);
    return NULL;
}

START_TEST(test_concurrent_callers)
{
    pthread_t t[8];
    for (uintptr_t k = 0; k < 8; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, caller_thread, (void *)(k % 4)), 0);
    for (int k = 0; k < 8; k++)
        pthread_join(t[k], NULL);
}
END_TEST

/* Items running at once, and the most ever seen. */
static _Atomic unsigned running, most_running;

static void busy_item(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    unsigned now = atomic_fetch_add(&running, 1) + 1;
    unsigned seen = atomic_load(&most_running);
    while (now > seen && !atomic_compare_exchange_weak(&most_running, &seen, now))
        ;
    struct timespec ts = { 0, 200 * 1000 };
    nanosleep(&ts, NULL);
    atomic_fetch_sub(&running, 1);
}

static void *busy_caller(void *arg)
{
    (void)arg;
    for (int round = 0; round < 10; round++)
        gc_parallel_for(64, 0, busy_item, NULL);
    return NULL;
}

START_TEST(test_callers_add_no_threads)
{
    /* Eight callers at once (the daemon's workers): the pool's threads run
     * every item, so no more than the CPU count run at once. Callers that
     * ran items beside the pool made it CPUs + 8. */
    atomic_store(&running, 0);
    atomic_store(&most_running, 0);
    pthread_t t[8];
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, busy_caller, NULL), 0);
    for (int k = 0; k < 8; k++)
        pthread_join(t[k], NULL);
    ck_assert_uint_ge(atomic_load(&most_running), 1);
    ck_assert_msg(atomic_load(&most_running) <= gc_cpu_count(), "%u items ran at once on %u CPUs",
                  atomic_load(&most_running), gc_cpu_count());
}
END_TEST

static void take_scratch(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    uint8_t *a = gc_scratch(GC_SCRATCH_BZ2_COPY, 1u << 20);
    ck_assert_ptr_nonnull(a);
    a[0] = a[(1u << 20) - 1] = 1;
    ck_assert(gc_scratch(GC_SCRATCH_BZ2_COPY, 1000) == a); /* kept: no smaller buffer made */
}

static _Atomic unsigned held_seen;

static void see_held(void *ctx, size_t i)
{
    (void)ctx, (void)i;
    if (gc_scratch_held())
        atomic_fetch_add(&held_seen, 1);
    struct timespec ts = { 0, 500 * 1000 };
    nanosleep(&ts, NULL);
}

START_TEST(test_idle_threads_release_scratch)
{
    /* Threads keep their stage buffers from item to item, and give them back
     * once idle: after 1.5 s without work no pool thread holds any. */
    gc_parallel_for(256, 0, take_scratch, NULL);
    gc_scratch_release(); /* the caller's own, had it run items (one CPU) */
    struct timespec idle = { 1, 500 * 1000000 };
    nanosleep(&idle, NULL);
    atomic_store(&held_seen, 0);
    gc_parallel_for(256, 0, see_held, NULL);
    ck_assert_uint_eq(atomic_load(&held_seen), 0);
}
END_TEST

static void *scratch_then_exit(void *arg)
{
    (void)arg;
    uint8_t *a = gc_scratch(GC_SCRATCH_BZ2_SA, 3u << 20);
    ck_assert_ptr_nonnull(a);
    a[0] = 1;
    return NULL;
}

START_TEST(test_exiting_thread_frees_scratch)
{
    /* A thread that ends holding stage buffers (a daemon worker at shutdown)
     * frees them: they were lost before (LeakSanitizer in the daemon's
     * SIGTERM test). */
    size_t before = gc_scratch_total();
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, scratch_then_exit, NULL), 0);
    pthread_join(t, NULL);
    ck_assert_uint_eq(gc_scratch_total(), before);
}
END_TEST

START_TEST(test_work_runs_only_what_is_allowed)
{
    size_t n = 10000;
    counts c = { .hits = calloc(n, sizeof *c.hits), .n = n };
    ck_assert_ptr_nonnull(c.hits);
    gc_work w;
    gc_work_open(&w, 4, hit, &c);
    size_t taken = 0, i;
    for (size_t limit = 100; limit <= 5000; limit += 100) {
        gc_work_allow(&w, limit);
        gc_work_allow(&w, limit / 2); /* never lowers it */
        if (gc_work_take(&w, &i)) {
            ck_assert_uint_lt(i, limit);
            hit(&c, i);
            taken++;
        }
    }
    gc_work_close(&w);
    ck_assert(!gc_work_take(&w, &i)); /* closed: nothing more */
    size_t ran = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned h = atomic_load(&c.hits[k]);
        ck_assert_uint_le(h, 1);
        ck_assert_msg(k < 5000 || h == 0, "item %zu ran past the limit", k);
        ran += h;
    }
    ck_assert_uint_ge(ran, taken);
    free(c.hits);
}
END_TEST

START_TEST(test_one_thread_is_the_caller)
{
    /* max_threads 1: the caller runs everything, in order. */
    static size_t order[64];
    static size_t seen;
    seen = 0;
    gc_work w;
    gc_work_open(&w, 1, hit, NULL);
    gc_work_allow(&w, 64);
    size_t i;
    while (gc_work_take(&w, &i))
        order[seen++] = i;
    gc_work_close(&w);
    ck_assert_uint_eq(seen, 64);
    for (size_t k = 0; k < 64; k++)
        ck_assert_uint_eq(order[k], k);
}
END_TEST

/* Items that wait for each other: they finish only once every pool thread runs one (or after 10 s). */
typedef struct rendezvous {
    atomic_uint arrived;
    unsigned n;
} rendezvous;

static void meet(void *ctx, size_t i)
{
    (void)i;
    rendezvous *r = ctx;
    atomic_fetch_add(&r->arrived, 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (atomic_load(&r->arrived) < r->n && t.tv_sec - t0.tv_sec < 10);
}

START_TEST(test_fork_child_has_a_pool)
{
    check_each_once(1000, 0); /* the parent's pool is running */
    /* Fork only once every pool thread is past its start: a thread forked in the middle of its
     * start can leave a sanitizer runtime's allocator lock held in the child (GCC 12's ASan:
     * the child's new threads then wait on it forever). glibc's malloc is fork-safe anyway. */
    rendezvous r = { .n = gc_cpu_count() };
    gc_parallel_for(r.n, 0, meet, &r);
    ck_assert_uint_ge(atomic_load(&r.arrived), r.n);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        counts c = { .hits = calloc(5000, sizeof *c.hits) };
        gc_parallel_for(5000, 0, hit, &c);
        for (size_t i = 0; i < 5000; i++)
            if (atomic_load(&c.hits[i]) != 1)
                _exit(1);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* The first of p[0, n) that is not v, or n. */
static size_t first_not(const unsigned char *p, size_t n, unsigned char v)
{
    size_t i = 0;
    while (i < n && p[i] == v)
        i++;
    return i;
}

/* Lengths around the stripe (1 MiB) and the caller's own copy (two stripes), at odd offsets. */
START_TEST(test_parallel_copy_every_byte)
{
    static const size_t lens[] = { 0, 1, 4095, (1u << 20) - 1, 2u << 20, (2u << 20) + 1, (11u << 19) + 7 };
    static const unsigned threads[] = { 0, 1, 3 };
    size_t most = (11u << 19) + 7 + 64;
    unsigned char *src = malloc(most), *dst = malloc(most);
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(dst);
    for (size_t i = 0; i < most; i++)
        src[i] = (unsigned char)(i * 131 + (i >> 13));
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
        for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
            memset(dst, 0xa5, most);
            gc_parallel_copy(dst + 3, src + 5, lens[l], threads[t]);
            ck_assert_msg(memcmp(dst + 3, src + 5, lens[l]) == 0, "len %zu threads %u: bytes differ", lens[l],
                          threads[t]);
            ck_assert_uint_eq(first_not(dst, 3, 0xa5), 3);
            size_t tail = 3 + lens[l];
            ck_assert_msg(first_not(dst + tail, most - tail, 0xa5) == most - tail,
                          "len %zu threads %u: a byte past the copy written", lens[l], threads[t]);
        }
    free(src);
    free(dst);
}
END_TEST

START_TEST(test_cpu_count_follows_affinity)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET((int)sched_getcpu(), &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            _exit(2);
        _exit(gc_cpu_count() == 1 ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "gc_cpu_count ignored the affinity mask");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("parallel");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, test_every_item_once);
    tcase_add_test(tc, test_nested);
    tcase_add_test(tc, test_concurrent_callers);
    tcase_add_test(tc, test_callers_add_no_threads);
    tcase_add_test(tc, test_idle_threads_release_scratch);
    tcase_add_test(tc, test_exiting_thread_frees_scratch);
    tcase_add_test(tc, test_work_runs_only_what_is_allowed);
    tcase_add_test(tc, test_one_thread_is_the_caller);
    tcase_add_test(tc, test_fork_child_has_a_pool);
    tcase_add_test(tc, test_cpu_count_follows_affinity);
    tcase_add_test(tc, test_parallel_copy_every_byte);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
