/* cli_names.c - codec names, suffixes, magic bytes (cli_names.h). */
#include "cli_names.h"

#include <stdlib.h>
#include <string.h>

/* Suffixes decompression recognizes, and what each becomes. Longest
 * first where one ends another: "x.tbz2" must not match ".bz2". */
static const struct {
    const char *suffix;
    const char *replacement;
    gpucomp_codec codec;
} suffixes[] = {
    { ".tbz2", ".tar", GPUCOMP_CODEC_BZIP2 },
    { ".tbz", ".tar", GPUCOMP_CODEC_BZIP2 },
    { ".bz2", "", GPUCOMP_CODEC_BZIP2 },
    { ".rle", "", GPUCOMP_CODEC_RLE },
};

#define N_SUFFIXES (sizeof suffixes / sizeof suffixes[0])

const char *cli_codec_name(gpucomp_codec codec)
{
    return codec == GPUCOMP_CODEC_RLE ? "rle" : codec == GPUCOMP_CODEC_BZIP2 ? "bzip2" : "unknown";
}

bool cli_parse_codec(const char *s, gpucomp_codec *out)
{
    if (strcmp(s, "bzip2") == 0 || strcmp(s, "bz2") == 0)
        *out = GPUCOMP_CODEC_BZIP2;
    else if (strcmp(s, "rle") == 0)
        *out = GPUCOMP_CODEC_RLE;
    else
        return false;
    return true;
}

const char *cli_codec_suffix(gpucomp_codec codec)
{
    return codec == GPUCOMP_CODEC_RLE ? ".rle" : ".bz2";
}

/* Index into suffixes[] of name's suffix, or -1. */
static int suffix_index(const char *name)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t len = strlen(base);
    for (size_t i = 0; i < N_SUFFIXES; i++) {
        size_t n = strlen(suffixes[i].suffix);
        if (len > n && strcmp(base + len - n, suffixes[i].suffix) == 0)
            return (int)i;
    }
    return -1;
}

const char *cli_known_suffix(const char *name)
{
    int i = suffix_index(name);
    return i < 0 ? NULL : suffixes[i].suffix;
}

char *cli_compressed_name(const char *name, gpucomp_codec codec)
{
    const char *suffix = cli_codec_suffix(codec);
    size_t n = strlen(name), s = strlen(suffix);
    char *out = malloc(n + s + 1);
    if (out) {
        memcpy(out, name, n);
        memcpy(out + n, suffix, s + 1);
    }
    return out;
}

char *cli_decompressed_name(const char *name, gpucomp_codec *codec)
{
    int i = suffix_index(name);
    if (i < 0)
        return NULL;
    size_t keep = strlen(name) - strlen(suffixes[i].suffix);
    size_t r = strlen(suffixes[i].replacement);
    char *out = malloc(keep + r + 1);
    if (!out)
        return NULL;
    memcpy(out, name, keep);
    memcpy(out + keep, suffixes[i].replacement, r + 1);
    *codec = suffixes[i].codec;
    return out;
}

void cli_mode_from_name(const char *argv0, bool *decompress, bool *to_stdout)
{
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    bool cat = strstr(base, "z2cat") || strstr(base, "Z2CAT") || strstr(base, "zcat") || strstr(base, "ZCAT");
    *decompress = cat || strstr(base, "unzip") || strstr(base, "UNZIP");
    *to_stdout = cat;
}

bool cli_codec_from_magic(const uint8_t *p, size_t len, gpucomp_codec *codec)
{
    if (len >= 4 && memcmp(p, "BZh", 3) == 0 && p[3] >= '1' && p[3] <= '9') {
        *codec = GPUCOMP_CODEC_BZIP2;
        return true;
    }
    if (len >= 4 && memcmp(p, "GCRL", 4) == 0) {
        *codec = GPUCOMP_CODEC_RLE;
        return true;
    }
    return false;
}

/* Would bzip2 take p[at..len) (non-empty) for trailing garbage? A mismatch in "BZh[1-9]" says yes. */
static bool is_garbage(const uint8_t *p, size_t len, size_t at)
{
    static const char hdr[3] = { 'B', 'Z', 'h' };
    for (size_t i = 0; i < 4 && at + i < len; i++) {
        uint8_t c = p[at + i];
        if (i < 3 ? c != (uint8_t)hdr[i] : c < '1' || c > '9')
            return true;
    }
    return false; /* another stream, or the start of one cut short */
}

/* 48 bits from bit offset pos (most significant bit first); pos + 48 <= 8 * len. */
static uint64_t bits48_at(const uint8_t *p, uint64_t pos)
{
    uint64_t v = 0;
    size_t byte = (size_t)(pos / 8);
    unsigned shift = (unsigned)(pos % 8);
    for (int i = 0; i < 7; i++) /* 7 bytes hold any 48 bits that start within the first */
        v = v << 8 | p[byte + (size_t)i];
    return (v >> (8 - shift)) & 0xffffffffffffull;
}

size_t cli_bzip2_stream_end_before(const uint8_t *p, size_t len, size_t before)
{
    static const uint64_t eos_magic = 0x177245385090ull;
    enum { MARKER_BITS = 48 + 32, MIN_STREAM = 4 + 10 }; /* "BZh9" and the bare marker */
    if (before > len)
        before = len;
    for (size_t e = before; e-- > MIN_STREAM;) {
        if (e >= len || !is_garbage(p, len, e))
            continue;
        /* The marker ends in byte e-1: it starts 80 to 87 bits before bit 8e. */
        for (unsigned pad = 0; pad < 8; pad++) {
            uint64_t start = (uint64_t)e * 8 - MARKER_BITS - pad;
            if (start / 8 + 7 > len)
                continue; /* bits48_at reads 7 bytes */
            if (bits48_at(p, start) == eos_magic)
                return e;
        }
    }
    return 0;
}
