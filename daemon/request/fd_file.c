/* fd_file.c - checks on a file stream's descriptors (see fd_file.h). */
#include "fd_file.h"

#include <fcntl.h>
#include <sys/statfs.h>

int gcd_fd_file_check_fs(unsigned long f_type, const char *what, gc_error *err)
{
    if (f_type == GCD_FUSE_SUPER_MAGIC)
        return gc_fail(err, GC_E_INVALID,
                       "the %s is on a FUSE file system, which the daemon does not read or write "
                       "(a FUSE server could hold its threads forever): use a pipe",
                       what);
    return GC_OK;
}

/* The checks both descriptors pass: a regular file, not O_PATH, opened as want, not on FUSE. */
static int check_common(int fd, int want, const char *what, struct stat *st, gc_error *err)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0)
        return gc_fail(err, GC_E_INVALID, "the %s descriptor is not open", what);
    if (flags & O_PATH)
        return gc_fail(err, GC_E_INVALID, "the %s descriptor is an O_PATH descriptor, not an open file", what);
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))
        return gc_fail(err, GC_E_INVALID,
                       "the %s is not a regular file (a pipe, socket, device or directory): stream it in frames",
                       what);
    int mode = flags & O_ACCMODE;
    if (mode != O_RDWR && mode != want)
        return gc_fail(err, GC_E_INVALID, "the %s file is not open for %s", what,
                       want == O_RDONLY ? "reading" : "writing");
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0)
        return gc_fail(err, GC_E_INVALID, "cannot tell the file system of the %s", what);
    return gcd_fd_file_check_fs((unsigned long)fs.f_type, what, err);
}

int gcd_fd_file_check_input(int fd, uint64_t *size, gc_error *err)
{
    struct stat st;
    int rc = check_common(fd, O_RDONLY, "input", &st, err);
    if (rc != GC_OK)
        return rc;
    *size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return GC_OK;
}

int gcd_fd_file_check_output(int fd, int in_fd, gc_error *err)
{
    struct stat st, in;
    int rc = check_common(fd, O_WRONLY, "output", &st, err);
    if (rc != GC_OK)
        return rc;
    if (fcntl(fd, F_GETFL) & O_APPEND)
        return gc_fail(err, GC_E_INVALID,
                       "the output file is open with O_APPEND: its writes would not land "
                       "at their offsets");
    if (fstat(in_fd, &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
        return gc_fail(err, GC_E_INVALID, "input and output descriptors name the same file");
    return GC_OK;
}
