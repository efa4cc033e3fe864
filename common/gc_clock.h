/*
 * gc_clock.h - the one monotonic clock: nanoseconds since an arbitrary start
 * (CLOCK_MONOTONIC), for timeouts, rate limits and measured durations.
 * Header-only and plain C, so C11 code and CUDA host code both include it.
 * A duration in other units is a division at the caller: gc_now_ns() / 1e9.
 */
#ifndef GC_CLOCK_H
#define GC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t gc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
