/*
 * scratch.h - per-thread working buffers of the CPU codecs' stages, kept
 * from one block to the next.
 *
 * Why: a bzip2 block's stages need about ten bytes of scratch per input
 * byte. Allocated and freed per block, buffers that large are mapped and
 * unmapped each time (glibc serves them with mmap), so every block faulted
 * all its scratch pages in afresh (docs/DECISIONS.md has the cost). A
 * thread keeps its buffers while it works and gives them back once idle (a
 * pool thread after a second without work, parallel.c; a daemon worker
 * when its queue is empty) or when it exits.
 *
 * Each slot holds one buffer per thread: a call takes a slot for its own
 * duration, and nothing it calls takes the same slot.
 */
#ifndef GC_SCRATCH_H
#define GC_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>

typedef enum gc_scratch_slot {
    GC_SCRATCH_BZ2_COPY, /* bz2_encode_block: the block's input */
    GC_SCRATCH_BZ2_RLE1, /* bz2_encode_block: its RLE1 output */
    GC_SCRATCH_BZ2_BWT,  /* bz2_encode_block: the BWT column */
    GC_SCRATCH_BZ2_TEXT, /* bz2_bwt: the rotated text */
    GC_SCRATCH_BZ2_SA,   /* bz2_bwt: the suffix array */
    GC_SCRATCH_BZ2_SYM,  /* bz2_emit_block: the MTF symbols */
    GC_SCRATCH_SLOTS
} gc_scratch_slot;

/* This thread's buffer of slot, at least bytes long (contents undefined); NULL: out of memory. */
void *gc_scratch(gc_scratch_slot slot, size_t bytes);

/* Whether this thread holds any buffer. */
bool gc_scratch_held(void);

/* Free this thread's buffers (a thread that exits holding some frees them then). */
void gc_scratch_release(void);

/* Bytes of buffers held now by every thread together. */
size_t gc_scratch_total(void);

#endif
