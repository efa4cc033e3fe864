/*
 * bz2_resume.h - a streamed bzip2 decode's state (bzip2.h bz2_dstate) to and
 * from the GPU job's copy of it (gpu.h gc_gpu_bz2_resume, a separate type
 * because the CUDA side cannot include bzip2.h). One conversion, for the
 * codec and the emulated device alike.
 */
#ifndef GCD_BZ2_RESUME_H
#define GCD_BZ2_RESUME_H

#include "bzip2.h"
#include "gpu.h"

static inline gc_gpu_bz2_resume gcd_bz2_resume_of(const bz2_dstate *d)
{
    return (gc_gpu_bz2_resume){ .bit = d->bit, .in_stream = d->in_stream, .level = d->level,
                                .combined = d->combined, .stream_no = d->stream_no, .block_no = d->block_no,
                                .garbage = d->garbage, .garbage_at = d->garbage_at, .seen_any = d->seen_any };
}

static inline bz2_dstate gcd_bz2_dstate_of(const gc_gpu_bz2_resume *p)
{
    return (bz2_dstate){ .bit = p->bit, .in_stream = p->in_stream, .level = p->level, .combined = p->combined,
                         .stream_no = p->stream_no, .block_no = p->block_no, .garbage = p->garbage,
                         .garbage_at = p->garbage_at, .seen_any = p->seen_any };
}

#endif
