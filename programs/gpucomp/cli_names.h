/*
 * cli_names.h - what the gpucomp user types and what file names mean:
 * codec names, compressed-file suffixes, magic bytes (size arguments:
 * size_parse.h).
 *
 * Pure string functions: nothing here touches files or the daemon, so the
 * unit tests (tests/check_client.c) link this file directly.
 */
#ifndef GPUCOMP_CLI_NAMES_H
#define GPUCOMP_CLI_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpucomp.h"

/* "bzip2" or "rle". */
const char *cli_codec_name(gpucomp_codec codec);

/* Parse an -a argument ("bzip2", "bz2", "rle"); false if unknown. */
bool cli_parse_codec(const char *s, gpucomp_codec *out);

/* Suffix compression appends: ".bz2" or ".rle". */
const char *cli_codec_suffix(gpucomp_codec codec);

/*
 * The compressed-file suffix name ends with (".bz2", ".tbz2", ".tbz",
 * ".rle"), or NULL. Only a suffix after a non-empty base counts: ".bz2"
 * alone is a hidden file, not a compressed empty name.
 */
const char *cli_known_suffix(const char *name);

/* name + the codec's suffix (malloc'd; NULL when out of memory). */
char *cli_compressed_name(const char *name, gpucomp_codec codec);

/*
 * The name decompression writes: the suffix stripped (.tbz2 and .tbz become
 * .tar). NULL if name has no known suffix (or no memory); otherwise malloc'd,
 * and *codec is the codec the suffix implies.
 */
char *cli_decompressed_name(const char *name, gpucomp_codec *codec);

/*
 * What bzip2 1.0.8 does when called as argv0 (its basename; the rule is
 * bzip2's own): a name containing "unzip" decompresses ("bunzip2"), one
 * containing "zcat" or "z2cat" decompresses to standard output ("bzcat");
 * any other name compresses. Either case, as bzip2 matches "UNZIP" too.
 * Options given after still change this, as they do in bzip2.
 */
void cli_mode_from_name(const char *argv0, bool *decompress, bool *to_stdout);

/* Codec whose magic bytes start p ("BZh1".."BZh9", "GCRL"); false if neither. */
bool cli_codec_from_magic(const uint8_t *p, size_t len, gpucomp_codec *codec);

/*
 * Where a bzip2 stream may end before trailing garbage: the largest byte
 * offset e < before at which an end-of-stream marker (its 48-bit magic and
 * 32-bit CRC, then zero to seven bits of padding) ends and from which
 * p[e..len) is not the start of another stream ("BZh" and a level digit, or
 * a prefix of that at the end of the data): what bzip2 ignores with
 * "trailing garbage after EOF ignored". 0 if there is none. Call again with
 * before = the last answer for the next candidate (a marker's bit pattern
 * may occur by chance: the caller confirms a candidate by decoding p[0..e)).
 */
size_t cli_bzip2_stream_end_before(const uint8_t *p, size_t len, size_t before);

#endif
