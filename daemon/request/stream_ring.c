/* stream_ring.c - a ring stream's ring (see stream_ring.h). */
#include "stream_ring.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/*
 * Only a plain shmem memfd: a pread or pwrite of it never blocks (a pipe, a
 * FUSE file could hold an I/O thread forever), and sealed against shrinking
 * and growing its size is a fact the frames can be checked against. Its
 * access is checked before sealing, which itself needs write access.
 */
static int ring_check(int fd, bool output, uint64_t min, uint64_t max, uint64_t *size, gc_error *err)
{
    const char *what = output ? "output ring" : "ring";
    struct statfs fs;
    struct stat st;
    if (fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        return gc_fail(err, GC_E_INVALID, "a stream's %s must be a memfd made with MFD_ALLOW_SEALING", what);
    int flags = fcntl(fd, F_GETFL);
    int wrong = output ? O_RDONLY : O_WRONLY;
    if (flags < 0 || (flags & O_ACCMODE) == wrong)
        return gc_fail(err, GC_E_INVALID, "a stream's %s must be open for %s", what,
                       output ? "writing" : "reading");
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
        return gc_fail(err, GC_E_INVALID,
                       "a stream's %s cannot be sealed (%s): pass a memfd made with "
                       "MFD_ALLOW_SEALING",
                       what, strerror(errno));
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < min || (uint64_t)st.st_size > max)
        return gc_fail(err, GC_E_INVALID, "a stream's %s must hold %llu to %llu bytes (it holds %lld)", what,
                       (unsigned long long)min, (unsigned long long)max, (long long)st.st_size);
    *size = (uint64_t)st.st_size;
    return GC_OK;
}

int gcd_stream_ring_check(int fd, uint64_t min, uint64_t max, uint64_t *size, gc_error *err)
{
    return ring_check(fd, false, min, max, size, err);
}

/* The same, for a ring the daemon writes: it must be open for writing (it is pwritten, never mapped). */
int gcd_stream_ring_check_output(int fd, uint64_t min, uint64_t max, uint64_t *size, gc_error *err)
{
    return ring_check(fd, true, min, max, size, err);
}

int gcd_stream_ring_check_frame(uint64_t size, uint64_t received, uint64_t consumed, uint64_t offset,
                                uint64_t length, gc_error *err)
{
    if (offset != received % size)
        return gc_fail(err, GC_E_INVALID,
                       "ring input at offset %llu, but the next byte of the stream goes at %llu of the ring",
                       (unsigned long long)offset, (unsigned long long)(received % size));
    if (length > size - offset)
        return gc_fail(err, GC_E_INVALID, "ring input of %llu bytes at offset %llu goes past the ring's %llu",
                       (unsigned long long)length, (unsigned long long)offset, (unsigned long long)size);
    if (received - consumed + length > size)
        return gc_fail(err, GC_E_INVALID,
                       "ring input of %llu bytes overwrites input not yet taken (%llu of the ring's %llu bytes "
                       "unread)",
                       (unsigned long long)length, (unsigned long long)(received - consumed),
                       (unsigned long long)size);
    return GC_OK;
}

static int read_all(int fd, uint8_t *buf, size_t len, uint64_t at)
{
    while (len) {
        ssize_t n = pread(fd, buf, len, (off_t)at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO; /* a sealed ring never ends early */
        buf += n;
        len -= (size_t)n;
        at += (uint64_t)n;
    }
    return 0;
}

int gcd_stream_ring_read(int fd, uint64_t size, uint64_t at, uint8_t *buf, size_t len)
{
    uint64_t from = at % size;
    size_t first = len < size - from ? len : (size_t)(size - from);
    int e = read_all(fd, buf, first, from);
    return e ? e : read_all(fd, buf + first, len - first, 0);
}
