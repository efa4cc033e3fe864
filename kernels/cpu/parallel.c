/* parallel.c - fork-join parallel for; see parallel.h for why it is this simple. */
#include "parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct parallel_job {
    atomic_size_t next;
    size_t n_items;
    gc_item_fn fn;
    void *ctx;
} parallel_job;

unsigned gc_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

static void *parallel_worker(void *arg)
{
    parallel_job *job = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->n_items)
            break;
        job->fn(job->ctx, i);
    }
    return NULL;
}

void gc_parallel_for(size_t n_items, unsigned max_threads, gc_item_fn fn, void *ctx)
{
    parallel_job job = { .n_items = n_items, .fn = fn, .ctx = ctx };
    atomic_init(&job.next, 0);
    if (max_threads == 0)
        max_threads = gc_cpu_count();
    size_t extra = n_items < max_threads ? n_items : max_threads;
    extra = extra > 0 ? extra - 1 : 0; /* the caller is one of the threads */

    pthread_t *tids = extra ? calloc(extra, sizeof *tids) : NULL;
    size_t started = 0;
    for (; tids && started < extra; started++)
        if (pthread_create(&tids[started], NULL, parallel_worker, &job) != 0)
            break;
    parallel_worker(&job);
    for (size_t t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    free(tids);
}
