/*
 * cli_progress.h - gpucomp's progress line for long jobs: on a terminal
 * (stderr a TTY) and without -q only; nothing before a file has taken a
 * second, then redrawn four times a second at most, and erased when the file
 * is done, before any other message. One file at a time.
 *
 * A file streamed through gpucompd shows, as the stream moves, the input
 * bytes handed over, the time so far, the output bytes, the rate and (when
 * the size is known) the ETA. A whole-buffer request (--local, an older
 * daemon) shows bytes, rate and ETA while the input is read, then the bytes
 * handed over and the time so far while the request runs.
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

/* Streaming: in input bytes handed to the daemon so far, out output bytes back. */
void cli_progress_stream(uint64_t in, uint64_t out);

/* Stop and erase the line (harmless when none was begun). */
void cli_progress_end(void);

#endif
