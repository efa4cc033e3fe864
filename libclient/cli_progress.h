/*
 * cli_progress.h - gpucomp's progress line for long jobs: on a terminal
 * (stderr a TTY) and without -q only; nothing before a file has taken a
 * second, then redrawn four times a second at most, and erased when the file
 * is done, before any other message. One file at a time.
 *
 * While the input is read the line shows bytes, rate and ETA; while the
 * request runs (one whole-buffer request: the daemon reports no progress
 * inside it) it shows the bytes handed over and the time so far.
 */
#ifndef GPUCOMP_CLI_PROGRESS_H
#define GPUCOMP_CLI_PROGRESS_H

#include <stdint.h>

#include "cli.h"

/* Start the line for the file called name; total is its size (0: unknown, a pipe). */
void cli_progress_begin(const cli_session *s, const char *name, uint64_t total);

/* n more input bytes read. */
void cli_progress_add(uint64_t n);

/* The input is read; the request runs now. */
void cli_progress_working(void);

/* Stop and erase the line (harmless when none was begun). */
void cli_progress_end(void);

#endif
