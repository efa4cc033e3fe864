/* fd_payload.c - memfd transport, daemon side (see fd_payload.h). */
#include "fd_payload.h"

#include "fd_map_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/*
 * Only plain shmem memfds are mapped (docs/SECURITY.md, "Client memory"):
 * sealed against shrinking, a shmem page the daemon touches always exists,
 * so the daemon cannot take SIGBUS. A hugetlbfs memfd can be sealed too but
 * faults with SIGBUS when the huge page pool is empty: refused, like any
 * file that is not a sealable memfd.
 */
static int seal_shrink(int fd, const char *which, gc_error *err)
{
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0)
        return gc_fail(err, GC_E_INVALID, "%s descriptor: cannot stat its file system: %s", which,
                       strerror(errno));
    if (fs.f_type != TMPFS_MAGIC)
        return gc_fail(err, GC_E_INVALID,
                       "%s descriptor is not a sealable memfd (file system 0x%lx%s): pass a memfd made "
                       "with MFD_ALLOW_SEALING",
                       which, (unsigned long)fs.f_type,
                       fs.f_type == HUGETLBFS_MAGIC ? ", hugetlbfs: can fault with SIGBUS" : "");
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
        return gc_fail(err, GC_E_INVALID,
                       "%s descriptor cannot be sealed (%s): pass a memfd made with MFD_ALLOW_SEALING", which,
                       strerror(errno));
    return GC_OK;
}

/* Input and output must be different files: the engine writes output while it reads input. */
static int check_distinct(int in_fd, int out_fd, gc_error *err)
{
    struct stat a, b;
    if (fstat(in_fd, &a) != 0 || fstat(out_fd, &b) != 0)
        return gc_fail(err, GC_E_INVALID, "cannot stat a passed descriptor: %s", strerror(errno));
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return gc_fail(err, GC_E_INVALID,
                       "input and output descriptors name the same file: pass two different memfds");
    return GC_OK;
}

int gcd_fd_payload_map_input(int in_fd, int out_fd, uint64_t size, const void *owner, struct gcd_fd_map **map,
                             gc_error *err)
{
    struct stat st;
    int rc = check_distinct(in_fd, out_fd, err);
    if (rc == GC_OK)
        rc = seal_shrink(in_fd, "input", err);
    if (rc != GC_OK)
        return rc;
    if (fstat(in_fd, &st) != 0 || (uint64_t)st.st_size < size)
        return gc_fail(err, GC_E_INVALID, "input memfd holds %lld bytes, request says %llu", (long long)st.st_size,
                       (unsigned long long)size);
    if (size > 0 && !(*map = gcd_fd_map_acquire(in_fd, size, false, owner, err)))
        return err->code;
    return GC_OK;
}

/*
 * The output memfd is sealed against shrinking before it is sized and
 * mapped, then its size is checked again: a client that truncates it in
 * between gets an error, never a SIGBUS in the daemon.
 */
static int size_output_memfd(int fd, size_t size, gc_error *err)
{
    int rc = seal_shrink(fd, "output", err);
    if (rc != GC_OK)
        return rc;
    struct stat st;
    if (fstat(fd, &st) != 0 || ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) != 0))
        return gc_fail(err, GC_E_INVALID, "cannot size the output memfd to %zu bytes: %s", size, strerror(errno));
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < size)
        return gc_fail(err, GC_E_INVALID, "the output memfd holds %lld bytes, %zu needed", (long long)st.st_size,
                       size);
    return GC_OK;
}

int gcd_fd_payload_map_output(int out_fd, size_t size, const void *owner, struct gcd_fd_map **map, gc_error *err)
{
    int rc = size_output_memfd(out_fd, size, err);
    if (rc != GC_OK || size == 0)
        return rc;
    if (!(*map = gcd_fd_map_acquire(out_fd, size, true, owner, err)))
        return err->code;
    return GC_OK;
}

int gcd_fd_payload_register(int fd, bool unregister, uint64_t size, const void *owner, bool *pinned, gc_error *err)
{
    *pinned = false;
    if (unregister)
        return gcd_fd_map_unregister(fd, owner, err);
    int rc = seal_shrink(fd, "registered", err);
    if (rc != GC_OK)
        return rc;
    if (size > SIZE_MAX)
        return gc_fail(err, GC_E_LIMIT, "cannot register %llu bytes", (unsigned long long)size);
    return gcd_fd_map_register(fd, (size_t)size, owner, pinned, err);
}
