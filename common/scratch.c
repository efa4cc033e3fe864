/* scratch.c - per-thread stage buffers (see scratch.h). */
#include "scratch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static _Thread_local struct {
    void *p;
    size_t cap;
} slots[GC_SCRATCH_SLOTS];
static _Thread_local bool held;

static atomic_size_t total; /* bytes held by every thread */

/* A thread that exits holding buffers frees them (pthread key destructor). */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_made;

static void on_thread_exit(void *unused)
{
    (void)unused;
    gc_scratch_release();
}

static void make_exit_key(void)
{
    exit_key_made = pthread_key_create(&exit_key, on_thread_exit) == 0;
}

static void mark_held(void)
{
    if (held)
        return;
    held = true;
    pthread_once(&exit_once, make_exit_key);
    if (exit_key_made)
        pthread_setspecific(exit_key, &held); /* any non-NULL value arms the destructor */
}

void *gc_scratch(gc_scratch_slot slot, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (slots[slot].cap < bytes) {
        free(slots[slot].p); /* contents need not survive: no realloc copy */
        atomic_fetch_sub(&total, slots[slot].cap);
        slots[slot].p = malloc(bytes);
        slots[slot].cap = slots[slot].p ? bytes : 0;
        atomic_fetch_add(&total, slots[slot].cap);
        mark_held();
    }
    return slots[slot].p;
}

bool gc_scratch_held(void)
{
    return held;
}

size_t gc_scratch_total(void)
{
    return atomic_load(&total);
}

void gc_scratch_release(void)
{
    for (int s = 0; s < GC_SCRATCH_SLOTS; s++) {
        free(slots[s].p);
        atomic_fetch_sub(&total, slots[s].cap);
        slots[s].p = NULL;
        slots[s].cap = 0;
    }
    if (held && exit_key_made)
        pthread_setspecific(exit_key, NULL);
    held = false;
}
