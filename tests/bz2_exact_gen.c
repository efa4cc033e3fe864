/*
 * bz2_exact_gen.c - deterministic inputs for tests/check_bzip2_exact.sh, which
 * compares our bzip2 output with bzip2 1.0.8's byte for byte. Each kind aims
 * at one of the rules that decide the bytes (docs/BZIP2.md):
 *   bz2_exact_gen random N        N pseudo-random bytes (tables of a flat alphabet)
 *   bz2_exact_gen text N          N bytes of word salad (typical tables, selectors)
 *   bz2_exact_gen runs N          runs of 1..600 equal bytes (RLE1 units, 255 caps)
 *   bz2_exact_gen period P N      a pattern of P bytes repeated (equal rotations)
 *   bz2_exact_gen edge L R        L bytes with no two equal neighbours (each one
 *                                 RLE1 byte), then a run of R bytes, then 1000 more
 *                                 such bytes: puts a run of R at RLE1 offset L
 * Written to standard output.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_rng.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next(void)
{
    return (uint32_t)(test_xorshift(&rng) >> 32);
}

/* n bytes, each different from the one before (prev: the byte before them,
 * or -1); none equal to avoid (or -1). */
static void distinct(size_t n, int prev, int avoid)
{
    for (size_t i = 0; i < n; i++) {
        int b;
        do
            b = (int)(next() & 0xff);
        while (b == prev || b == avoid);
        putchar(b);
        prev = b;
    }
}

static void text(size_t n)
{
    static const char *const words[] = { "the ",  "of ",   "compression ", "block ",   "sort ", "and ",
                                         "a ",    "to ",   "Burrows ",     "Wheeler ", "in ",   "is ",
                                         "that ", "for\n", "bytes ",       "table ",   "run ",  "Huffman, " };
    const size_t nw = sizeof words / sizeof *words;
    for (size_t o = 0; o < n;) {
        const char *w = words[next() % nw];
        for (; *w && o < n; w++, o++)
            putchar(*w);
    }
}

static void runs(size_t n)
{
    for (size_t o = 0; o < n;) {
        int b = (int)(next() % 4) + 'a';
        size_t r = next() % 8 == 0 ? 1 + next() % 600 : 1 + next() % 5;
        for (; r > 0 && o < n; r--, o++)
            putchar(b);
    }
}

static void period(size_t p, size_t n)
{
    char pat[256];
    for (size_t i = 0; i < p && i < sizeof pat; i++)
        pat[i] = (char)('a' + (next() % 3 == 0 ? 0 : (int)i % 26));
    pat[0] = 'z'; /* so that P is the pattern's least period for P < 27 */
    for (size_t o = 0; o < n; o++)
        putchar(pat[o % p]);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    size_t a = strtoull(argv[2], NULL, 10), b = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
    if (!strcmp(argv[1], "random"))
        for (size_t i = 0; i < a; i++)
            putchar((int)(next() & 0xff));
    else if (!strcmp(argv[1], "text"))
        text(a);
    else if (!strcmp(argv[1], "runs"))
        runs(a);
    else if (!strcmp(argv[1], "period") && a > 0 && a <= 256)
        period(a, b);
    else if (!strcmp(argv[1], "edge")) {
        distinct(a, -1, 'R');
        for (size_t i = 0; i < b; i++)
            putchar('R');
        distinct(1000, 'R', 'R');
    } else
        return 2;
    return fflush(stdout) ? 1 : 0;
}
