/*
 * cli_output.h - gpucomp's output files, written so that a failure (full
 * disk, daemon error, Ctrl-C) never leaves a partial output behind and never
 * costs the input: data goes to a temporary file next to the output, which
 * is renamed over the output name only when complete. The input is removed
 * by the caller, after the rename.
 */
#ifndef GPUCOMP_CLI_OUTPUT_H
#define GPUCOMP_CLI_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

typedef struct cli_output {
    const char *final; /* the output name (not owned) */
    char *tmp;         /* the temporary file, in final's directory */
    int fd;
} cli_output;

/*
 * Remove the current temporary file if SIGINT, SIGTERM or SIGHUP ends the
 * program (signals the shell ignores, as under nohup, stay ignored).
 */
void cli_output_install_signals(void);

/* Create the temporary file for final (mode 0600 until metadata is copied). Returns 0 or an errno. */
int cli_output_open(cli_output *o, const char *final);

/*
 * Give the output the input's owner (where permitted), mode and times.
 * Returns 0, or the errno of a mode or time that could not be set.
 */
int cli_output_copy_meta(cli_output *o, const struct stat *st);

/*
 * Close and rename onto the final name: replacing an existing file only if
 * replace, else failing with EEXIST, atomically (no window in which another
 * file at that name gets clobbered). Returns 0 or an errno; on failure call
 * cli_output_abort.
 */
int cli_output_commit(cli_output *o, bool replace);

/* Close and remove the temporary file (after a failure; harmless after commit). */
void cli_output_abort(cli_output *o);

/* write() all of buf, retrying on EINTR and short writes. Returns 0 or an errno. */
int cli_write_all(int fd, const void *buf, size_t len);

#endif
