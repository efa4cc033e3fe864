/*
 * gc_job.h - what the caller of a long codec call may ask of it while it
 * runs: stop early (its client has gone), approve each growth of the
 * memory it holds (the daemon's memory budget), and hear how much of the
 * output is final (so it can be sent on before the call returns). A NULL
 * job asks nothing.
 */
#ifndef GC_JOB_H
#define GC_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct gc_job {
    const atomic_bool *cancel;                /* set by another thread: stop at the next block */
    bool (*may_grow)(void *ctx, size_t more); /* before holding `more` bytes more; false: stop */
    /* the output's first `final` bytes will not change or move (only calls that write
     * into a caller's buffer say so; from the calling thread, `final` ascending) */
    void (*progress)(void *ctx, size_t final);
    void *ctx;
} gc_job;

static inline bool gc_job_cancelled(const gc_job *j)
{
    return j && j->cancel && atomic_load_explicit(j->cancel, memory_order_relaxed);
}

static inline bool gc_job_may_grow(const gc_job *j, size_t more)
{
    return !j || !j->may_grow || j->may_grow(j->ctx, more);
}

static inline void gc_job_progress(const gc_job *j, size_t final)
{
    if (j && j->progress)
        j->progress(j->ctx, final);
}

#endif
