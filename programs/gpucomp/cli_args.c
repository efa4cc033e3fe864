/* cli_args.c - gpucomp's command line, --help and --version. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli.h"

#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_names.h"
#include "size_parse.h"
#include "wire.h" /* GC_WIRE_DEFAULT_SOCKET */

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

/* rle chunk sizes the format allows at most (docs/FORMAT.md); the daemon checks the rest. */
#define CLI_MAX_CHUNK (1u << 26)

enum {
    OPT_CHUNK = 256,
    OPT_SOCKET,
    OPT_STATS,
    OPT_PING,
    OPT_JSON,
    OPT_LOCAL,
    OPT_NO_FALLBACK,
    OPT_EXPONENTIAL,
    OPT_REPETITIVE_BEST,
    OPT_REPETITIVE_FAST
};

static const struct option long_options[] = {
    { "compress", no_argument, NULL, 'z' },
    { "decompress", no_argument, NULL, 'd' },
    { "uncompress", no_argument, NULL, 'd' },
    { "test", no_argument, NULL, 't' },
    { "stdout", no_argument, NULL, 'c' },
    { "to-stdout", no_argument, NULL, 'c' },
    { "keep", no_argument, NULL, 'k' },
    { "force", no_argument, NULL, 'f' },
    { "verbose", no_argument, NULL, 'v' },
    { "quiet", no_argument, NULL, 'q' },
    { "algorithm", required_argument, NULL, 'a' },
    { "fast", no_argument, NULL, '1' },
    { "best", no_argument, NULL, '9' },
    { "width", required_argument, NULL, 'w' },
    { "chunk-size", required_argument, NULL, OPT_CHUNK },
    { "socket", required_argument, NULL, OPT_SOCKET },
    { "stats", no_argument, NULL, OPT_STATS },
    { "ping", no_argument, NULL, OPT_PING },
    { "json", no_argument, NULL, OPT_JSON },
    { "local", no_argument, NULL, OPT_LOCAL },
    { "no-fallback", no_argument, NULL, OPT_NO_FALLBACK },
    { "small", no_argument, NULL, 's' },
    /* bzip2 1.0.8 takes these and ignores them; scripts written for it pass them */
    { "exponential", no_argument, NULL, OPT_EXPONENTIAL },
    { "repetitive-best", no_argument, NULL, OPT_REPETITIVE_BEST },
    { "repetitive-fast", no_argument, NULL, OPT_REPETITIVE_FAST },
    { "help", no_argument, NULL, 'h' },
    { "license", no_argument, NULL, 'L' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
};

/* Leading ':' so that a missing argument is told apart from an unknown option. */
static const char short_options[] = ":zdtckfvqsa:w:hLV123456789";

static void usage(FILE *f)
{
    fputs("Usage: gpucomp [OPTION]... [FILE]...\n"
          "Compress or decompress FILEs in place through the gpucompd daemon (bzip2\n"
          "format by default). With no FILE, or when FILE is -, read standard input\n"
          "and write standard output.\n"
          "\n"
          "  -z, --compress       compress (the default)\n"
          "  -d, --decompress     decompress FILE.bz2, .tbz2, .tbz or .rle\n"
          "  -t, --test           decompress and discard: check integrity\n"
          "  -c, --stdout         write to standard output, keep input files\n"
          "  -k, --keep           keep (don't delete) input files\n"
          "  -f, --force          overwrite existing output files; also compress\n"
          "                       links and files that already have a suffix, and\n"
          "                       read or write compressed data on a terminal\n"
          "  -v, --verbose        per file, bzip2's line (ratio, bits/byte, % saved,\n"
          "                       bytes in and out), then the backend: (cpu) or (gpu)\n"
          "  -q, --quiet          suppress warnings\n"
          "  -s, --small          accepted for bzip2's sake; changes nothing (the\n"
          "                       daemon decompresses)\n"
          "  -a, --algorithm=ALG  bzip2 (default, suffix .bz2) or rle (suffix .rle)\n"
          "  -1 ... -9            bzip2 block size 100k ... 900k (default -9)\n"
          "      --fast, --best   same as -1, -9\n"
          "      --exponential, --repetitive-best, --repetitive-fast\n"
          "                       accepted for bzip2's sake; change nothing\n"
          "  -w, --width=N        rle element width in bytes: 1, 2, 4 or 8 (default 1)\n"
          "      --chunk-size=N   rle chunk size in bytes; k, M suffixes (default 1M)\n"
          "      --socket=PATH    gpucompd's socket (default: $GPUCOMP_SOCKET, else\n"
          "                       " GC_WIRE_DEFAULT_SOCKET ")\n"
          "      --local          compress on this CPU, in this process; no daemon\n"
          "      --no-fallback    fail when no daemon answers (by default gpucomp\n"
          "                       says so and compresses on this CPU instead; a\n"
          "                       daemon that refuses this user is always an error)\n"
          "      --ping           check that gpucompd answers, then exit\n"
          "      --stats          print gpucompd's counters, then exit\n"
          "      --json           with --stats: the counters as one JSON object\n"
          "  -h, --help           display this help and exit\n"
          "  -L, --license        display version and licence information and exit\n"
          "  -V, --version        display version information and exit\n"
          "\n"
          "Decompression recognises the format from the data; -a matters only for data\n"
          "it does not recognise. FILE without a known suffix decompresses to FILE.out.\n"
          "Trailing garbage after the last bzip2 stream is ignored with a warning.\n"
          "Files and pipes stream through gpucompd in bounded memory, with no size\n"
          "limit; --local (and the CPU fallback when no daemon answers) holds each\n"
          "file in memory whole.\n"
          "Options in $BZIP2, then $BZIP (split at white space) come before the command\n"
          "line's, as in bzip2.\n"
          "\n"
          "Exit status, as bzip2's: 0 success, 1 environment problem (file missing or\n"
          "skipped, output exists, no daemon, refused by it, bad usage), 2 corrupt or\n"
          "truncated input, 3 internal error. Over several files the highest wins.\n",
          f);
}

static void version(void)
{
    printf("gpucomp (gpucompd) %s\nlibgpucomp-client %s\n", PACKAGE_VERSION, gpucomp_version());
}

static void license(void)
{
    version();
    fputs("\nThis program is distributed in the hope that it will be useful, but WITHOUT\n"
          "ANY WARRANTY. Its terms are those of the gpucompd distribution it came with.\n"
          "It writes and reads the bzip2 format of Julian Seward's bzip2.\n",
          stdout);
}

/* A usage error: message, hint, exit status 1. */
static int bad_usage(cli_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad_usage(cli_session *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpucomp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'gpucomp --help' for more information.\n", stderr);
    va_end(ap);
    s->status = CLI_EXIT_ERROR;
    return CLI_EXIT_ERROR;
}

/*
 * getopt's complaint, in our words. optopt is the offending character, or
 * for long options 0 (unknown) or the option's value: those are named from
 * argv, where getopt has just stepped past them.
 */
static int getopt_error(cli_session *s, int opt, char **argv)
{
    bool named_by_argv = optopt == 0 || optopt >= OPT_CHUNK;
    if (opt == ':' && named_by_argv)
        return bad_usage(s, "option '%s' requires an argument", argv[optind - 1]);
    if (opt == ':')
        return bad_usage(s, "option requires an argument -- '%c'", optopt);
    if (named_by_argv)
        return bad_usage(s, "unrecognized option '%s'", argv[optind - 1]);
    /* A known option letter refused: its long form was given "=value". */
    if (optopt != ':' && strchr(short_options + 1, optopt))
        return bad_usage(s, "option '%s' doesn't allow an argument", argv[optind - 1]);
    return bad_usage(s, "invalid option -- '%c'", optopt);
}

/* Codec settings as typed; 0 means "not given". */
typedef struct codec_args {
    gpucomp_codec codec;
    int level;
    unsigned width;
    uint32_t chunk;
} codec_args;

static int codec_option(cli_session *s, int opt, const char *arg, codec_args *ca)
{
    uint64_t v;
    switch (opt) {
    case 'a':
        if (!cli_parse_codec(arg, &ca->codec))
            return bad_usage(s, "unknown algorithm '%s' (use bzip2 or rle)", arg);
        s->opts.codec_given = true;
        return -1;
    case 'w':
        if (!gc_parse_size(arg, 8, &v) || v == 0 || (v & (v - 1)))
            return bad_usage(s, "invalid width '%s' (use 1, 2, 4 or 8)", arg);
        ca->width = (unsigned)v;
        return -1;
    case OPT_CHUNK:
        if (!gc_parse_size(arg, CLI_MAX_CHUNK, &v) || v == 0)
            return bad_usage(s, "invalid chunk size '%s' (bytes, with an optional K, M or KiB/MiB unit, 1 to 64M)",
                             arg);
        ca->chunk = (uint32_t)v;
        return -1;
    default: /* '1'..'9' */ ca->level = opt - '0'; return -1;
    }
}

/* One option; returns -1 to go on, else the exit status. */
static int one_option(cli_session *s, int opt, char **argv, codec_args *ca)
{
    cli_opts *o = &s->opts;
    switch (opt) {
    case 'z': o->mode = CLI_COMPRESS; return -1;
    case 'd': o->mode = CLI_DECOMPRESS; return -1;
    case 't': o->mode = CLI_TEST; return -1;
    case 'c': o->to_stdout = true; return -1;
    case 'k': o->keep = true; return -1;
    case 'f': o->force = true; return -1;
    case 'v': o->verbosity = 1; return -1;
    case 'q': o->verbosity = -1; return -1;
    case 's': return -1;             /* bzip2's low-memory decoder: the daemon decodes here */
    case OPT_EXPONENTIAL: return -1; /* bzip2's sorting effort: the output is the same */
    case OPT_REPETITIVE_BEST: o->redundant |= CLI_REDUNDANT_BEST; return -1;
    case OPT_REPETITIVE_FAST: o->redundant |= CLI_REDUNDANT_FAST; return -1;
    case OPT_SOCKET: o->socket = optarg; return -1;
    case OPT_STATS: o->stats = true; return -1;
    case OPT_PING: o->ping = true; return -1;
    case OPT_JSON: o->json = true; return -1;
    case OPT_LOCAL: o->local = true; return -1;
    case OPT_NO_FALLBACK: o->no_fallback = true; return -1;
    case 'h': usage(stdout); return CLI_EXIT_OK;
    case 'V': version(); return CLI_EXIT_OK;
    case 'L': license(); return CLI_EXIT_OK;
    case ':':
    case '?': return getopt_error(s, opt, argv);
    default: return codec_option(s, opt, optarg, ca);
    }
}

static void apply_codec_args(cli_opts *o, const codec_args *ca)
{
    gpucomp_options_init(&o->codec, ca->codec);
    if (ca->level)
        o->codec.level = ca->level;
    if (ca->width)
        o->codec.element_width = ca->width;
    if (ca->chunk)
        o->codec.chunk_size = ca->chunk;
}

/* Append the white-space separated words of $var to v (strdup'd); false when out of memory. */
static bool words_from_env(const char *var, char ***v, int *n)
{
    const char *p = getenv(var);
    while (p && *p) {
        while (*p && isspace((unsigned char)*p))
            p++;
        size_t len = 0;
        while (p[len] && !isspace((unsigned char)p[len]))
            len++;
        if (len == 0)
            break;
        char **nv = realloc(*v, (size_t)(*n + 2) * sizeof **v);
        if (!nv)
            return false;
        *v = nv;
        if (!((*v)[*n] = strndup(p, len)))
            return false;
        (*v)[++*n] = NULL;
        p += len;
    }
    return true;
}

/* The argv with $BZIP2/$BZIP words in it, and how many words: freed at exit. */
static char **env_argv;
static int env_words;

static void free_env_argv(void)
{
    for (int i = 1; i <= env_words; i++)
        free(env_argv[i]);
    free(env_argv);
}

/*
 * bzip2 reads options from $BZIP2, then $BZIP, before the command line's.
 * Returns argv with those words after argv[0] (argv itself when there are
 * none); the strings live until the program ends, as argv's do.
 */
static char **with_env_options(int *argc, char **argv)
{
    char **v = malloc(2 * sizeof *v);
    int n = 1;
    if (!v)
        return argv;
    v[0] = argv[0];
    v[1] = NULL;
    if (!words_from_env("BZIP2", &v, &n) || !words_from_env("BZIP", &v, &n) || n == 1) {
        free(v); /* out of memory, or nothing there: the command line alone (words leak, once) */
        return argv;
    }
    char **all = realloc(v, (size_t)(n + *argc) * sizeof *v);
    if (!all) {
        free(v);
        return argv;
    }
    for (int i = 1; i <= *argc; i++) /* and argv's NULL */
        all[n - 1 + i] = argv[i];
    *argc += n - 1;
    env_argv = all;
    env_words = n - 1;
    atexit(free_env_argv);
    return all;
}

/* bzip2 says these flags are redundant; so do we, after parsing, so that a later -q counts. */
static void note_redundant(cli_session *s)
{
    if (s->opts.redundant & CLI_REDUNDANT_BEST)
        cli_note(s, "--repetitive-best is redundant (ignored, as by bzip2 0.9.5 and later)");
    if (s->opts.redundant & CLI_REDUNDANT_FAST)
        cli_note(s, "--repetitive-fast is redundant (ignored, as by bzip2 0.9.5 and later)");
}

int cli_parse_args(cli_session *s, int argc, char **argv)
{
    codec_args ca = { .codec = GPUCOMP_CODEC_BZIP2 };
    bool decompress = false;
    if (argc > 0 && argv[0]) /* "bunzip2" and "bzcat" links: bzip2's defaults for the name */
        cli_mode_from_name(argv[0], &decompress, &s->opts.to_stdout);
    s->opts.mode = decompress ? CLI_DECOMPRESS : CLI_COMPRESS;
    argv = with_env_options(&argc, argv);
    opterr = 0; /* our messages say "gpucomp", not argv[0] */
    int opt;
    while ((opt = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        int rc = one_option(s, opt, argv, &ca);
        if (rc >= 0)
            return rc;
    }
    apply_codec_args(&s->opts, &ca);
    note_redundant(s);
    s->opts.files = argv + optind;
    s->opts.n_files = argc - optind;
    s->opts.name_width = 7; /* bzip2's: the width of "(stdin)" */
    for (int i = 0; i < s->opts.n_files; i++)
        if ((int)strlen(s->opts.files[i]) > s->opts.name_width)
            s->opts.name_width = (int)strlen(s->opts.files[i]);
    if (s->opts.json && !s->opts.stats)
        return bad_usage(s, "--json goes with --stats");
    if ((s->opts.ping || s->opts.stats) && s->opts.n_files > 0)
        return bad_usage(s, "%s takes no FILE", s->opts.ping ? "--ping" : "--stats");
    return -1;
}
