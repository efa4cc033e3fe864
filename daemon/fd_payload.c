/* fd_payload.c - memfd transport, daemon side (see fd_payload.h). */
#include "fd_payload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int seal_shrink(int fd, const char *which, gc_error *err)
{
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
        return gc_fail(err, GC_E_INVALID,
                       "%s descriptor cannot be sealed (%s): pass a memfd made with MFD_ALLOW_SEALING",
                       which, strerror(errno));
    return GC_OK;
}

/*
 * Mappings are populated up front (one bulk fault-in instead of a fault per
 * 4 KiB on the hot path) when their pages already exist: always for the
 * input, which the client wrote; for the output only when the client's
 * memfd is already that large (a reused buffer). A fresh output is mapped
 * lazily: it is sized for the worst case, and populating it would allocate
 * every page of that bound while only the bytes written are needed.
 */
static void *map_fd(int fd, size_t len, int prot, int populate)
{
    void *p = mmap(NULL, len, prot, MAP_SHARED | populate, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

int gcd_fd_payload_attach(gcd_request *r, int in_fd, int out_fd, gc_error *err)
{
    r->in_fd = in_fd;
    r->out_fd = out_fd;
    struct stat st;
    int rc = seal_shrink(in_fd, "input", err);
    if (rc != GC_OK)
        return rc;
    if (fstat(in_fd, &st) != 0 || (uint64_t)st.st_size < r->total_size)
        return gc_fail(err, GC_E_INVALID, "input memfd holds %lld bytes, request says %llu",
                       (long long)st.st_size, (unsigned long long)r->total_size);
    if (r->total_size > 0) {
        r->input = map_fd(in_fd, r->total_size, PROT_READ, MAP_POPULATE);
        if (!r->input)
            return gc_fail(err, GC_E_NOMEM, "cannot map the input memfd: %s", strerror(errno));
    }
    r->input_mapped = true;
    r->received = r->total_size;
    return GC_OK;
}

int gcd_request_alloc_output(gcd_request *r, size_t size, gc_error *err)
{
    if (r->out_fd < 0) {
        r->output = malloc(size ? size : 1);
        return r->output ? GC_OK
                         : gc_fail(err, GC_E_NOMEM, "cannot allocate %zu bytes for the output", size);
    }
    struct stat st;
    if (fstat(r->out_fd, &st) != 0 ||
        ((uint64_t)st.st_size < size && ftruncate(r->out_fd, (off_t)size) != 0))
        return gc_fail(err, GC_E_INVALID, "cannot size the output memfd to %zu bytes: %s", size,
                       strerror(errno));
    int rc = seal_shrink(r->out_fd, "output", err);
    if (rc != GC_OK || size == 0)
        return rc;
    bool reused = (uint64_t)st.st_size >= size && (uint64_t)st.st_blocks * 512 >= size;
    r->output = map_fd(r->out_fd, size, PROT_READ | PROT_WRITE, reused ? MAP_POPULATE : 0);
    if (!r->output)
        return gc_fail(err, GC_E_NOMEM, "cannot map the output memfd: %s", strerror(errno));
    r->output_mapped = size;
    return GC_OK;
}

void gcd_fd_payload_release(gcd_request *r)
{
    if (r->input_mapped && r->input && r->total_size)
        munmap(r->input, r->total_size);
    if (r->input_mapped)
        r->input = NULL;
    if (r->output_mapped) {
        munmap(r->output, r->output_mapped);
        r->output = NULL;
        r->output_mapped = 0;
    }
    if (r->in_fd >= 0)
        close(r->in_fd);
    if (r->out_fd >= 0)
        close(r->out_fd);
    r->in_fd = r->out_fd = -1;
}
