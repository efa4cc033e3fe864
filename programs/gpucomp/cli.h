/*
 * cli.h - the gpucomp program: state shared by its parts.
 *
 *   cli.c         main: the order of things, exit status
 *   cli_args.c    command line, --help, --version
 *   cli_file.c    one FILE (or stdin): checks, names, read, write, cleanup
 *   cli_output.c  output through a temporary file, metadata, signals
 *   cli_daemon.c  the connection to gpucompd (or the library's in-process
 *                 client: --local, or no daemon answering), --ping, --stats, -v lines
 *   cli_progress.c  the progress line on a terminal
 *   cli_names.c   suffixes, codec names, magic bytes, sizes
 *
 * Exit status follows bzip2, where scripts test it: 0 success, 1 a problem
 * of the environment (missing file, directory, symbolic link or other file
 * skipped, output exists, no daemon or refused by it, bad usage), 2 corrupt or truncated
 * input, 3 an internal error (a bug, here or in the daemon). Over several
 * files the highest wins, as in bzip2.
 */
#ifndef GPUCOMP_CLI_H
#define GPUCOMP_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpucomp.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1    /* the environment: files, the daemon, usage */
#define CLI_EXIT_CORRUPT 2  /* corrupt or truncated input */
#define CLI_EXIT_INTERNAL 3 /* a bug */

typedef enum cli_mode { CLI_COMPRESS, CLI_DECOMPRESS, CLI_TEST } cli_mode;

#define CLI_REDUNDANT_BEST 1u /* --repetitive-best */
#define CLI_REDUNDANT_FAST 2u /* --repetitive-fast */

typedef struct cli_opts {
    cli_mode mode;
    gpucomp_options codec; /* codec, level, width, chunk size */
    bool codec_given;      /* -a on the command line */
    bool to_stdout;        /* -c */
    bool keep;             /* -k */
    bool force;            /* -f */
    int verbosity;         /* -1 quiet (-q), 0 normal, 1 verbose (-v) */
    int name_width;        /* -v: names padded to this, as bzip2 pads them */
    bool stats, ping;      /* --stats, --ping */
    bool json;             /* --json: --stats as one JSON object */
    bool local;            /* --local: the CPU codecs in this process, no daemon */
    bool no_fallback;      /* --no-fallback: no daemon is an error, not a local run */
    const char *socket;    /* --socket; NULL: $GPUCOMP_SOCKET or the default */
    unsigned redundant;    /* CLI_REDUNDANT_*: bzip2's no-op flags that it names */
    char **files;          /* operands; none means stdin */
    int n_files;
} cli_opts;

typedef struct cli_session {
    cli_opts opts;
    gpucomp_client *client; /* connected on first use */
    int status;             /* CLI_EXIT_* so far */
    bool fatal;             /* cannot go on (no daemon): skip remaining files */
    bool local;             /* client runs in this process (gpucomp_open_local) */
} cli_session;

/* cli_args.c: parse argv into s->opts; returns -1 to go on, else an exit status. */
int cli_parse_args(cli_session *s, int argc, char **argv);

/* cli_file.c: compress, decompress or test one operand ("-" is stdin). */
void cli_process(cli_session *s, const char *operand);

/* cli_daemon.c: everything that talks to gpucompd. */
typedef struct cli_result {
    uint8_t *data; /* gpucomp_free() it */
    size_t len;
    double seconds; /* wall time of the request */
    gpucomp_backend backend;
} cli_result;

/*
 * Connect unless connected (or running locally). No daemon answering
 * (GPUCOMP_E_CONNECT) switches to local runs, announced unless -q, except
 * with --no-fallback, --ping or --stats; a refusal (GPUCOMP_E_PERMISSION)
 * never does. On failure says why (a refusal with its remedy), sets
 * s->fatal, false.
 */
bool cli_connect(cli_session *s);

/* Connect, then check that size bytes fit in one request, before a file is read whole. */
bool cli_fits(cli_session *s, const char *name, uint64_t size);

/* One request; nothing reported. Returns GPUCOMP_OK or the library's code. */
int cli_request(cli_session *s, bool decompress, const gpucomp_options *o, const uint8_t *in, size_t in_len,
                cli_result *r);

/* The detailed message of the last failed request (daemon's or local). */
const char *cli_last_error(const cli_session *s);

/* Report the failed request rc for the file called name, with the exit status it implies. */
void cli_request_failed(cli_session *s, const char *name, int rc);

/* The exit status a library code implies: 2 for damaged input, 3 for bugs, else 1. */
int cli_exit_for(int rc);

/* cli_request, with a failure reported (naming the file). */
bool cli_run(cli_session *s, const char *name, bool decompress, const gpucomp_options *o, const uint8_t *in,
             size_t in_len, cli_result *r);

/* The -v line for a file that went through cli_run. */
void cli_report(const cli_session *s, const char *name, size_t in_len, const cli_result *r);

/* --ping and --stats; return an exit status. */
int cli_ping(cli_session *s);
int cli_stats(cli_session *s);

void cli_disconnect(cli_session *s);

/* "gpucomp: <message>" on stderr, and the exit status becomes at least 1. */
void cli_error(cli_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same with an exit status of at least status (CLI_EXIT_*). */
void cli_fail(cli_session *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "gpucomp: <message>" unless -q (a file skipped), and the exit status becomes at least 1. */
void cli_warn(cli_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "gpucomp: <message>" unless -q; the exit status is unchanged (bzip2's warnings). */
void cli_note(cli_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
