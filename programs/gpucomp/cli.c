/*
 * cli.c - gpucomp: compress and decompress files through gpucompd, with the
 * command line of gzip and bzip2 (docs/man/gpucomp.1). This file is the
 * order of things; cli.h lists where each part lives.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_output.h"

static void vmessage(const char *fmt, va_list ap)
{
    fputs("gpucomp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static void raise_status(cli_session *s, int status)
{
    if (s->status < status)
        s->status = status;
}

void cli_error(cli_session *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    raise_status(s, CLI_EXIT_ERROR);
}

void cli_fail(cli_session *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    raise_status(s, status);
}

void cli_warn(cli_session *s, const char *fmt, ...)
{
    if (s->opts.verbosity >= 0) {
        va_list ap;
        va_start(ap, fmt);
        vmessage(fmt, ap);
        va_end(ap);
    }
    raise_status(s, CLI_EXIT_ERROR);
}

void cli_note(cli_session *s, const char *fmt, ...)
{
    if (s->opts.verbosity >= 0) {
        va_list ap;
        va_start(ap, fmt);
        vmessage(fmt, ap);
        va_end(ap);
    }
}

/* Compressed data on a terminal is garbage on the screen: refuse, as gzip does, unless -f. */
static bool refuse_terminal_output(cli_session *s)
{
    const cli_opts *o = &s->opts;
    bool uses_stdout = o->to_stdout || o->n_files == 0;
    for (int i = 0; i < o->n_files && !uses_stdout; i++)
        uses_stdout = strcmp(o->files[i], "-") == 0;
    if (o->mode != CLI_COMPRESS || o->force || !uses_stdout || !isatty(STDOUT_FILENO))
        return false;
    cli_error(s, "compressed data not written to a terminal. Use -f to force compression.\n"
                 "For help, type: gpucomp -h");
    return true;
}

int main(int argc, char **argv)
{
    cli_session s = { .status = CLI_EXIT_OK };
    int rc = cli_parse_args(&s, argc, argv);
    if (rc >= 0)
        return rc;
    if (s.opts.ping)
        cli_ping(&s);
    if (s.opts.stats && !s.fatal)
        cli_stats(&s);
    if (s.opts.ping || s.opts.stats) {
        cli_disconnect(&s);
        return s.status;
    }
    if (refuse_terminal_output(&s))
        return s.status;
    cli_output_install_signals();
    if (s.opts.n_files == 0)
        cli_process(&s, "-");
    for (int i = 0; i < s.opts.n_files && !s.fatal; i++)
        cli_process(&s, s.opts.files[i]);
    cli_disconnect(&s);
    return s.status;
}
