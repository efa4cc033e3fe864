/*
 * gc_job.h - what the caller of a long codec call may ask of it while it
 * runs: stop early (its client has gone), approve each growth of the
 * memory it holds (the daemon's memory budget), and hear how much of the
 * output is final (so it can be sent on before the call returns). A NULL
 * job asks nothing.
 */
#ifndef GC_JOB_H
#define GC_JOB_H

#include <stddef.h>

/*
 * The cancel flag's type, one type in C and C++ so that C++ (the CUDA
 * backend, its tests) includes the codecs' C headers as they are:
 * std::atomic<bool> is the C++ spelling of C11's atomic_bool, the same
 * size, alignment and lock-free representation (C++23 defines _Atomic(T)
 * as std::atomic<T> for exactly this).
 */
#ifdef __cplusplus
extern "C++" {
#include <atomic>
}
typedef std::atomic<bool> gc_atomic_bool;
#define GC_ATOMIC_LOAD_RELAXED(p) ((p)->load(std::memory_order_relaxed))
static_assert(sizeof(gc_atomic_bool) == sizeof(bool) && std::atomic<bool>::is_always_lock_free,
              "gc_atomic_bool: the representation C's atomic_bool has");
#else
#include <stdatomic.h>
#include <stdbool.h>
typedef atomic_bool gc_atomic_bool;
#define GC_ATOMIC_LOAD_RELAXED(p) atomic_load_explicit((p), memory_order_relaxed)
_Static_assert(sizeof(gc_atomic_bool) == sizeof(bool) && ATOMIC_BOOL_LOCK_FREE == 2,
               "gc_atomic_bool: the representation C++'s std::atomic<bool> has");
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_job {
    const gc_atomic_bool *cancel;             /* set by another thread: stop at the next block */
    bool (*may_grow)(void *ctx, size_t more); /* before holding `more` bytes more; false: stop */
    /* the output's first `final` bytes will not change or move (only calls that write
     * into a caller's buffer say so; from the calling thread, `final` ascending) */
    void (*progress)(void *ctx, size_t final);
    void *ctx;
} gc_job;

static inline bool gc_job_cancelled(const gc_job *j)
{
    return j && j->cancel && GC_ATOMIC_LOAD_RELAXED(j->cancel);
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

#ifdef __cplusplus
}
#endif

#endif
