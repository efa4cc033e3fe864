/*
 * gpu_test_util.cuh - what the bzip2 GPU suites share (test_gpu_bzip2.cu,
 * test_gpu_bzip2_dec.cu): message formatting, a clock, and the seeded
 * generators of their data classes, so both suites test the same bytes.
 */
#ifndef GC_GPU_TEST_UTIL_CUH
#define GC_GPU_TEST_UTIL_CUH

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <string>

static inline std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static inline std::string fmt(const char *f, ...)
{
    char buf[1536];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64: the suites' data are functions of their seeds. */
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1)
    {
    }
    uint64_t next()
    {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    size_t below(size_t n)
    {
        return n ? (size_t)(next() % n) : 0;
    }
};

/* Uniform random bytes. */
static inline void gen_random(uint8_t *p, size_t n, uint64_t seed)
{
    Rng r(seed);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = r.next();
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++)
        p[i] = (uint8_t)r.next();
}

static const char *const g_words[] = {
    "the",     "of",       "and",         "to",         "in",          "a",     "is",     "that",    "for",
    "it",      "as",       "was",         "with",       "be",          "by",    "on",     "not",     "he",
    "this",    "are",      "or",          "his",        "from",        "at",    "which",  "but",     "have",
    "an",      "had",      "they",        "you",        "were",        "their", "one",    "all",     "we",
    "can",     "her",      "has",         "there",      "been",        "if",    "more",   "when",    "will",
    "would",   "who",      "so",          "no",         "compression", "block", "stream", "sorting", "rotation",
    "Huffman", "selector", "segment",     "def",        "return",      "self",  "import", "None",    "0x1f",
    "1999",    "42",       "accommodate", "bookkeeper", "Mississippi", "aaaa",  "zzzzzz", "\t",      "    "
};

/* Text-like: words, punctuation, short and long lines, some indentation. */
static inline void gen_text(uint8_t *p, size_t n, uint64_t seed)
{
    Rng r(seed);
    const size_t nw = sizeof g_words / sizeof g_words[0];
    size_t i = 0, col = 0;
    while (i < n) {
        const char *w = g_words[r.below(nw) % (r.next() & 1 ? nw : 20)];
        for (size_t k = 0; w[k] && i < n; k++)
            p[i++] = (uint8_t)w[k];
        col += strlen(w);
        if (i >= n)
            break;
        uint64_t x = r.next() % 100;
        p[i++] = x < 6 ? ',' : x < 9 ? '.' : (col > 60 + r.below(30)) ? '\n' : ' ';
        if (p[i - 1] == '\n')
            col = 0;
    }
}

#endif
