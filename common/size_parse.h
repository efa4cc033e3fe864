/*
 * size_parse.h - the one parser of byte counts, for everything that reads a
 * size from a person: the daemon's settings (--memory-budget=4GiB, and the
 * same keys in its config file), the gpucomp program's options (--chunk 64k)
 * and the library's environment (GPUCOMP_MEMFD_THRESHOLD=16k). Compiled into
 * the daemon, the library and the program (the library exports only
 * gpucomp_*, so this stays private to it).
 *
 * The rules:
 *   - one or more decimal digits: no sign, no blanks, no fraction, no hex;
 *   - then at most one unit, in any case:
 *       (none) or B          bytes
 *       K, Ki, KB or KiB     x 1024
 *       M, Mi, MB or MiB     x 1024^2
 *       G, Gi, GB or GiB     x 1024^3
 *       T, Ti, TB or TiB     x 1024^4
 *     Every unit is a power of 1024, "KB" included: these are memory sizes,
 *     and one letter has one meaning;
 *   - then nothing (trailing text, "1.5G", " 5", "4 G", "-1" are refused);
 *   - a value above max is refused, and so is one past 64 bits (never wrapped).
 * 0 is a size like any other: a caller for which 0 makes no sense refuses it.
 */
#ifndef GC_SIZE_PARSE_H
#define GC_SIZE_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* Parse s by the rules above into *out (untouched on failure); false if s is
 * not a size or is more than max. */
bool gc_parse_size(const char *s, uint64_t max, uint64_t *out);

#endif
