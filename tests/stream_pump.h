/*
 * stream_pump.h - feed a stream in random pieces and collect its output
 * (stream_pump.c), for the stream test suites.
 */
#ifndef GC_TEST_STREAM_PUMP_H
#define GC_TEST_STREAM_PUMP_H

#include <stddef.h>
#include <stdint.h>

#include "gpucomp.h"

/* xorshift64: the next value of *state (never 0). */
uint64_t next_rand(uint64_t *state);

/* 1..max, skewed towards small values half the time (many tiny pieces, some big ones). */
size_t rand_size(uint64_t *state, size_t max);

/* Output collected from a stream. */
typedef struct sink {
    uint8_t *buf;
    size_t len, cap;
} sink;

void sink_add(sink *k, const void *p, size_t n);

/*
 * Feed in[0..len) into s in random pieces of at most max_in bytes, reading
 * into random-sized buffers of at most max_out bytes, then GPUCOMP_END.
 * Returns the stream's status; what came out is in *k either way.
 */
int pump(gpucomp_stream *s, const uint8_t *in, size_t len, uint64_t seed, size_t max_in, size_t max_out, sink *k);

/* A whole stream: open on c, pump, check the counters, free. Returns its status. */
int stream_all(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const uint8_t *in, size_t len,
               uint64_t seed, size_t max_in, size_t max_out, sink *k);

#endif
