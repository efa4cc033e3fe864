/* gc_mem.c - see gc_mem.h. */
#include "gc_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

/* The huge page size of x86-64 and arm64 with 4 KiB pages; elsewhere the advice is only wasted. */
#define HUGE_PAGE ((uintptr_t)2 << 20)
/* Below this a buffer is not worth a system call. */
#define HUGE_FROM ((size_t)4 << 20)

void gc_mem_advise_huge(void *p, size_t len)
{
    if (!p || len < HUGE_FROM)
        return;
    uintptr_t from = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t to = ((uintptr_t)p + len) & ~(HUGE_PAGE - 1);
#ifdef MADV_HUGEPAGE
    if (to > from)
        (void)madvise((void *)from, to - from, MADV_HUGEPAGE);
#else
    (void)from, (void)to;
#endif
}

void *gc_big_malloc(size_t len)
{
    void *p = malloc(len);
    gc_mem_advise_huge(p, len);
    return p;
}
