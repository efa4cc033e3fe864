/*
 * host_copy.cuh - a small persistent host thread pool for the batch pipeline's
 * staging copies (pageable caller memory <-> pinned staging buffers).
 *
 * One pool per gc_gpu_ctx (created in gc_gpu_open, joined in gc_gpu_close);
 * used only under the context's mutex, so one submitter at a time. A copy is
 * a CopyTask cut into stripes that the workers (and the submitting thread,
 * through copy_pool_help, while it has nothing else to do) take in FIFO order,
 * so the copies of several pipeline pieces run at once and each copy is spread
 * over several cores. Completion is polled (copy_task_done), never waited on
 * with a lock: the pipeline's host loop polls CUDA events the same way.
 * No CUDA calls here.
 */
#ifndef GC_HOST_COPY_CUH
#define GC_HOST_COPY_CUH

#include <stddef.h>
#include <stdint.h>

namespace gcgpu {

struct CopyTask {
    uint8_t *dst = nullptr;
    const uint8_t *src = nullptr;
    size_t len = 0;
    size_t stripe = 0;
    size_t nstripes = 0;
    size_t next = 0; /* next stripe to hand out (pool mutex) */
    size_t done = 0; /* stripes finished (atomic builtins) */
};

struct CopyPool;

/* threads = worker threads (0: copies run only on the submitter, in
 * copy_pool_help); nt = use non-temporal stores for large stripes (x86-64).
 * Returns nullptr only when out of memory; fewer threads than asked when
 * pthread_create fails (copy_pool_threads says how many). */
CopyPool *copy_pool_create(unsigned threads, bool nt);
/* Cancels what is queued, waits for the stripes in progress, joins. */
void copy_pool_destroy(CopyPool *p);
unsigned copy_pool_threads(const CopyPool *p);

/* Queue dst[0..len) = src[0..len). Small copies (and every copy of a pool
 * without threads below 256 KiB) run at once on the caller. t must stay
 * valid until copy_task_done(t). */
void copy_pool_submit(CopyPool *p, CopyTask *t, uint8_t *dst, const uint8_t *src, size_t len);
bool copy_task_done(const CopyTask *t);
/* Run one queued stripe on the calling thread; false when none is queued. */
bool copy_pool_help(CopyPool *p);
/* Drop the stripes not yet started (their tasks count as done, their bytes
 * are not copied), then help / wait until every stripe in progress is done. */
void copy_pool_cancel(CopyPool *p);
/* Help until t is done. */
void copy_task_wait(CopyPool *p, CopyTask *t);

} // namespace gcgpu

#endif
