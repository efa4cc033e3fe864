/*
 * test_rng.h - the tests' pseudo-random numbers: xorshift64, so a test's
 * data are the same on every run and host. Each test keeps its own state
 * and takes the bits it wants from the word.
 */
#ifndef GC_TEST_RNG_H
#define GC_TEST_RNG_H

#include <stdint.h>

/* Advance *state and return it. */
static inline uint64_t test_xorshift(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

#endif
