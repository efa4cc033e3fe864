/* size_parse.c - byte counts with k/M/G suffixes (size_parse.h). */
#include "size_parse.h"

#include <errno.h>
#include <stdlib.h>

static unsigned suffix_shift(const char *s)
{
    if (*s == '\0')
        return 0;
    if (s[1] != '\0')
        return 64; /* "1MB", "2kk": not a size */
    switch (*s) {
    case 'k': case 'K': return 10;
    case 'm': case 'M': return 20;
    case 'g': case 'G': return 30;
    default: return 64;
    }
}

bool gc_parse_size(const char *s, uint64_t max, uint64_t *out)
{
    if (*s < '0' || *s > '9') /* strtoull would accept " -1" */
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = suffix_shift(end);
    if (errno || shift == 64 || v == 0 || v > (max >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}
