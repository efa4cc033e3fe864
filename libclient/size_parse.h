/*
 * size_parse.h - byte counts as people write them ("4096", "64k", "1M"):
 * shared by the gpucomp program's options and the library's environment
 * settings (compiled into both; the library exports only gpucomp_*).
 */
#ifndef GC_SIZE_PARSE_H
#define GC_SIZE_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Parse a byte count: decimal digits with an optional binary suffix
 * k/K (KiB), m/M (MiB) or g/G (GiB). false for anything else, 0, or more
 * than max.
 */
bool gc_parse_size(const char *s, uint64_t max, uint64_t *out);

#endif
