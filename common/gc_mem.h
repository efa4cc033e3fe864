/*
 * gc_mem.h - large buffers filled once and dropped (a stream part's input,
 * a decode's output): where the kernel allows it (transparent huge pages in
 * "madvise" mode) they are backed by huge pages, so filling one faults once
 * per huge page instead of once per 4 KiB page, which otherwise bounds how
 * fast a thread can read a file into it (docs/DECISIONS.md, "Huge pages for
 * part buffers").
 */
#ifndef GC_MEM_H
#define GC_MEM_H

#include <stddef.h>

/* Ask for huge pages over the whole huge pages inside [p, p + len) (best effort; small ranges: nothing). */
void gc_mem_advise_huge(void *p, size_t len);

/* malloc, advised as above; freed with free(). */
void *gc_big_malloc(size_t len);

#endif
