/* bz2_spec.c - decoding candidate blocks ahead of the walk (bz2_spec.h). */
#include "bz2_spec.h"

#include <stdlib.h>

enum { SPEC_FREE, SPEC_RUNNING, SPEC_DONE, SPEC_DEAD };

static void decode_into(bz2_spec *s, size_t i)
{
    uint64_t pos = s->cand[i];
    bz2_dblock *r = &s->slot[i % s->window];
    bz2_decode_block(s->src, bz2_block_len_cap(s->len, pos), pos, s->max_out, r);
    atomic_fetch_add(&s->held, r->out_len);
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->state[i], SPEC_DONE);
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->lock);
}

/* Claim candidate i for decoding; false if someone else has it. */
static bool claim(bz2_spec *s, size_t i)
{
    unsigned char expect = SPEC_FREE;
    return atomic_compare_exchange_strong(&s->state[i], &expect, SPEC_RUNNING);
}

/* A pool item: decode candidate i unless the walk took it or too much
 * output is held (then the walk decodes it when it gets there). */
static void decode_ahead(void *ctx, size_t i)
{
    bz2_spec *s = ctx;
    if (atomic_load(&s->held) >= BZ2_SPEC_HELD_MAX || !claim(s, i))
        return;
    decode_into(s, i);
}

static void wait_done(bz2_spec *s, size_t i)
{
    if (atomic_load(&s->state[i]) == SPEC_DONE)
        return;
    pthread_mutex_lock(&s->lock);
    while (atomic_load(&s->state[i]) == SPEC_RUNNING)
        pthread_cond_wait(&s->done, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* Candidate i will not be used: no decode starts, a finished one is freed. */
static void release(bz2_spec *s, size_t i, bool used)
{
    unsigned char expect = SPEC_FREE;
    if (atomic_compare_exchange_strong(&s->state[i], &expect, SPEC_DEAD) || expect == SPEC_DEAD)
        return;
    wait_done(s, i);
    bz2_dblock *r = &s->slot[i % s->window];
    atomic_fetch_sub(&s->held, r->out_len);
    free(r->out);
    r->out = NULL;
    r->out_len = 0;
    atomic_store(&s->state[i], SPEC_DEAD);
    if (!used)
        s->wasted++;
}

/* Let the pool decode up to a window past the walk. */
static void run_ahead(bz2_spec *s)
{
    size_t ahead = s->speculate ? s->ahead : 1;
    size_t limit = s->floor + ahead < s->n_cand ? s->floor + ahead : s->n_cand;
    gc_work_allow(&s->work, limit);
}

int bz2_spec_open(bz2_spec *s, const uint8_t *src, size_t len, size_t max_out, const uint64_t *cand, size_t n_cand,
                  unsigned threads)
{
    *s = (bz2_spec){ .src = src, .len = len, .max_out = max_out, .cand = cand, .n_cand = n_cand };
    s->window = BZ2_SPEC_WINDOW_PER_THREAD * (size_t)(threads ? threads : 1);
    s->ahead = s->window;
    s->speculate = threads > 1;
    s->slot = calloc(s->window, sizeof *s->slot);
    s->state = calloc(n_cand ? n_cand : 1, sizeof *s->state);
    if (!s->slot || !s->state) {
        free(s->slot);
        free((void *)s->state);
        return -1;
    }
    atomic_init(&s->held, 0);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->done, NULL);
    gc_work_open(&s->work, threads, decode_ahead, s);
    run_ahead(s);
    return 0;
}

bz2_dblock *bz2_spec_get(bz2_spec *s, size_t ci)
{
    for (; s->floor < ci; s->floor++)
        release(s, s->floor, false);
    run_ahead(s);
    if (claim(s, ci)) {
        decode_into(s, ci);
        return &s->slot[ci % s->window];
    }
    /* A helper has it: decode the next ones meanwhile rather than wait, so
     * that the walk's thread is one of the decoders (with 2 threads the
     * only other one). */
    size_t next;
    while (atomic_load(&s->state[ci]) == SPEC_RUNNING && gc_work_take(&s->work, &next))
        decode_ahead(s, next);
    wait_done(s, ci);
    return &s->slot[ci % s->window];
}

void bz2_spec_consumed(bz2_spec *s, size_t ci)
{
    release(s, ci, true);
    s->floor = ci + 1;
    run_ahead(s);
}

void bz2_spec_stop(bz2_spec *s)
{
    s->speculate = false;
}

void bz2_spec_limit(bz2_spec *s, size_t n)
{
    s->ahead = n < 1 ? 1 : n < s->window ? n : s->window;
}

void bz2_spec_close(bz2_spec *s)
{
    gc_work_close(&s->work);
    size_t end = s->floor + s->window < s->n_cand ? s->floor + s->window : s->n_cand;
    for (size_t i = s->floor; i < end; i++)
        if (atomic_load(&s->state[i]) == SPEC_DONE)
            free(s->slot[i % s->window].out);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->lock);
    free(s->slot);
    free((void *)s->state);
}
