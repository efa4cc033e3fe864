/*
 * fd_file.h - the checks a client's regular-file descriptor passes before a
 * file stream reads or writes it (docs/SECURITY.md, "Client files").
 *
 * The daemon uses only descriptors its client opened and passed, never a
 * path, so it reaches no file the client could not open itself. What it
 * refuses is what could make it misbehave: anything but a regular file (a
 * pipe or socket would block a thread, /dev/zero never ends), an O_PATH
 * descriptor, an input not open for reading, an output not open for writing
 * or open with O_APPEND (its writes would not land at their offsets), a
 * file on a FUSE mount (a server that never answers would hold an I/O
 * thread forever), and an output that is the input's own file.
 */
#ifndef GCD_FD_FILE_H
#define GCD_FD_FILE_H

#include <stdint.h>
#include <sys/stat.h>

#include "gc_status.h"

/* fstatfs's f_type of a FUSE mount (linux/magic.h). */
#define GCD_FUSE_SUPER_MAGIC 0x65735546UL

/* GC_OK, or INVALID with why, for a stream's input; *size gets its length now. */
int gcd_fd_file_check_input(int fd, uint64_t *size, gc_error *err);

/* The same for a stream's output file, given the input's descriptor. */
int gcd_fd_file_check_output(int fd, int in_fd, gc_error *err);

/* Whether a file system of this f_type is refused (FUSE); what names the descriptor in the message. */
int gcd_fd_file_check_fs(unsigned long f_type, const char *what, gc_error *err);

#endif
