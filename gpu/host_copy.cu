/*
 * host_copy.cu - the staging copy pool of the batch pipeline (host_copy.cuh).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "host_copy.cuh"
#include "pipeline_policy.cuh"

namespace gcgpu {

namespace {

void copy_bytes(uint8_t *d, const uint8_t *s, size_t n, bool nt)
{
#if defined(__x86_64__)
    if (nt && n >= kCopyNtMin) {
        /* streaming stores: the destination (a pinned staging buffer the DMA
         * engine reads next, or the caller's output) is not read back by this
         * core, so skip the read-for-ownership and keep the caches clean */
        size_t head = (16 - ((uintptr_t)d & 15)) & 15;
        memcpy(d, s, head);
        d += head;
        s += head;
        n -= head;
        size_t nv = n / 64;
        for (size_t i = 0; i < nv; i++) {
            __m128i a = _mm_loadu_si128((const __m128i *)s);
            __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
            _mm_stream_si128((__m128i *)d, a);
            _mm_stream_si128((__m128i *)(d + 16), b);
            _mm_stream_si128((__m128i *)(d + 32), c);
            _mm_stream_si128((__m128i *)(d + 48), e);
            d += 64;
            s += 64;
        }
        memcpy(d, s, n % 64);
        _mm_sfence(); /* the streamed bytes are visible before the task says done */
        return;
    }
#else
    (void)nt;
#endif
    memcpy(d, s, n);
}

} // namespace

struct CopyPool {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work queued or stop */
    CopyTask *q[kCopyMaxQueue];
    size_t qhead = 0, qlen = 0;
    size_t busy = 0; /* stripes being copied */
    bool stop = false;
    bool nt = false;
    unsigned nthreads = 0;
    pthread_t th[64];
};

namespace {

/* Take one stripe (pool mutex held); false when none. */
bool take(CopyPool *p, CopyTask **t, size_t *i)
{
    while (p->qlen) {
        CopyTask *h = p->q[p->qhead];
        if (h->next < h->nstripes) {
            *t = h;
            *i = h->next++;
            if (h->next == h->nstripes) {
                p->qhead = (p->qhead + 1) % kCopyMaxQueue;
                p->qlen--;
            }
            p->busy++;
            return true;
        }
        p->qhead = (p->qhead + 1) % kCopyMaxQueue;
        p->qlen--;
    }
    return false;
}

void run_stripe(CopyPool *p, CopyTask *t, size_t i)
{
    size_t off = i * t->stripe;
    size_t n = t->len - off < t->stripe ? t->len - off : t->stripe;
    copy_bytes(t->dst + off, t->src + off, n, p->nt);
    __atomic_fetch_add(&t->done, 1, __ATOMIC_RELEASE);
}

void *worker(void *arg)
{
    CopyPool *p = (CopyPool *)arg;
    pthread_setname_np(pthread_self(), "gc-copy"); /* top -H and /proc tell the threads apart */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        CopyTask *t;
        size_t i;
        if (take(p, &t, &i)) {
            pthread_mutex_unlock(&p->mu);
            run_stripe(p, t, i);
            pthread_mutex_lock(&p->mu);
            p->busy--;
            continue;
        }
        if (p->stop)
            break;
        pthread_cond_wait(&p->cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return nullptr;
}

} // namespace

CopyPool *copy_pool_create(unsigned threads, bool nt)
{
    CopyPool *p = new (std::nothrow) CopyPool();
    if (!p)
        return nullptr;
    pthread_mutex_init(&p->mu, nullptr);
    pthread_cond_init(&p->cv, nullptr);
    p->nt = nt;
    if (threads > 64)
        threads = 64;
    /* workers take no signals: the daemon's own threads handle them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&p->th[p->nthreads], nullptr, worker, p) != 0)
            break;
        p->nthreads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return p;
}

unsigned copy_pool_threads(const CopyPool *p)
{
    return p ? p->nthreads : 0;
}

void copy_pool_destroy(CopyPool *p)
{
    if (!p)
        return;
    copy_pool_cancel(p);
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->th[i], nullptr);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    delete p;
}

void copy_pool_submit(CopyPool *p, CopyTask *t, uint8_t *dst, const uint8_t *src, size_t len)
{
    t->dst = dst;
    t->src = src;
    t->len = len;
    t->stripe = kCopyStripe;
    t->nstripes = (len + kCopyStripe - 1) / kCopyStripe;
    t->next = 0;
    t->done = 0;
    if (!p || len <= kCopyInline || (p->nthreads == 0 && len <= kCopyStripe)) {
        if (len)
            copy_bytes(dst, src, len, p && p->nt);
        t->next = t->nstripes;
        __atomic_store_n(&t->done, t->nstripes, __ATOMIC_RELEASE);
        return;
    }
    pthread_mutex_lock(&p->mu);
    while (p->qlen == kCopyMaxQueue) { /* cannot happen with the pipeline's few slots; help to make room */
        CopyTask *h;
        size_t i;
        if (take(p, &h, &i)) {
            pthread_mutex_unlock(&p->mu);
            run_stripe(p, h, i);
            pthread_mutex_lock(&p->mu);
            p->busy--;
        }
    }
    p->q[(p->qhead + p->qlen) % kCopyMaxQueue] = t;
    p->qlen++;
    if (t->nstripes > 1)
        pthread_cond_broadcast(&p->cv);
    else
        pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

bool copy_task_done(const CopyTask *t)
{
    return __atomic_load_n(&t->done, __ATOMIC_ACQUIRE) == t->nstripes;
}

bool copy_pool_help(CopyPool *p)
{
    if (!p)
        return false;
    CopyTask *t;
    size_t i;
    pthread_mutex_lock(&p->mu);
    bool got = take(p, &t, &i);
    pthread_mutex_unlock(&p->mu);
    if (!got)
        return false;
    run_stripe(p, t, i);
    pthread_mutex_lock(&p->mu);
    p->busy--;
    pthread_mutex_unlock(&p->mu);
    return true;
}

void copy_pool_cancel(CopyPool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    while (p->qlen) {
        CopyTask *h = p->q[p->qhead];
        size_t left = h->nstripes - h->next;
        h->next = h->nstripes;
        __atomic_fetch_add(&h->done, left, __ATOMIC_RELEASE);
        p->qhead = (p->qhead + 1) % kCopyMaxQueue;
        p->qlen--;
    }
    while (p->busy) {
        pthread_mutex_unlock(&p->mu);
        sched_yield();
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
}

void copy_task_wait(CopyPool *p, CopyTask *t)
{
    while (!copy_task_done(t))
        if (!copy_pool_help(p))
            sched_yield();
}

} // namespace gcgpu
