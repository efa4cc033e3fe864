/* scratch.c - per-thread stage buffers (see scratch.h). */
#include "scratch.h"

#include <stdlib.h>

static _Thread_local struct {
    void *p;
    size_t cap;
} slots[GC_SCRATCH_SLOTS];
static _Thread_local bool held;

void *gc_scratch(gc_scratch_slot slot, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (slots[slot].cap < bytes) {
        free(slots[slot].p); /* contents need not survive: no realloc copy */
        slots[slot].p = malloc(bytes);
        slots[slot].cap = slots[slot].p ? bytes : 0;
        held = true;
    }
    return slots[slot].p;
}

bool gc_scratch_held(void)
{
    return held;
}

void gc_scratch_release(void)
{
    for (int s = 0; s < GC_SCRATCH_SLOTS; s++) {
        free(slots[s].p);
        slots[s].p = NULL;
        slots[s].cap = 0;
    }
    held = false;
}
