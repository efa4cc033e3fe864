/* size_parse.c - the one parser of byte counts (rules in size_parse.h). */
#include "size_parse.h"

#include <ctype.h>
#include <stddef.h>

/* log2 of the multiplier a unit stands for, or -1 if unit is not one. */
static int unit_shift(const char *unit)
{
    static const char letters[] = "kmgt"; /* 2^10, 2^20, 2^30, 2^40 */
    int c = tolower((unsigned char)unit[0]);
    if (c == '\0')
        return 0;
    if (c == 'b')
        return unit[1] == '\0' ? 0 : -1;
    int shift = -1;
    for (size_t i = 0; letters[i]; i++)
        if (c == letters[i])
            shift = 10 * (int)(i + 1);
    if (shift < 0)
        return -1;
    unit++;
    if (tolower((unsigned char)*unit) == 'i')
        unit++;
    if (tolower((unsigned char)*unit) == 'b')
        unit++;
    return *unit == '\0' ? shift : -1;
}

bool gc_parse_size(const char *s, uint64_t max, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned digit = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    int shift = unit_shift(s);
    if (shift < 0 || v > (max >> shift))
        return false;
    *out = v << shift;
    return true;
}
