/* fd_payload.c - memfd transport, daemon side (see fd_payload.h). */
#include "fd_payload.h"

#include "fd_map_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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
        r->in_map = gcd_fd_map_acquire(in_fd, r->total_size, false, r->conn, err);
        if (!r->in_map)
            return err->code;
        r->input = gcd_fd_map_addr(r->in_map);
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
    r->out_map = gcd_fd_map_acquire(r->out_fd, size, true, r->conn, err);
    if (!r->out_map)
        return err->code;
    r->output = gcd_fd_map_addr(r->out_map);
    return GC_OK;
}

int gcd_fd_payload_register(gcd_request *r)
{
    r->backend = GPUCOMP__BACKEND__BACKEND_CPU;
    if (r->op == GPUCOMP__OP__OP_UNREGISTER)
        return gcd_fd_map_unregister(r->in_fd, r->conn, &r->error);
    int rc = seal_shrink(r->in_fd, "registered", &r->error);
    if (rc != GC_OK)
        return rc;
    if (r->total_size > SIZE_MAX)
        return gc_fail(&r->error, GC_E_LIMIT, "cannot register %llu bytes",
                       (unsigned long long)r->total_size);
    bool pinned = false;
    rc = gcd_fd_map_register(r->in_fd, (size_t)r->total_size, r->conn, &pinned, &r->error);
    if (rc == GC_OK && pinned)
        r->backend = GPUCOMP__BACKEND__BACKEND_GPU;
    return rc;
}

void gcd_fd_payload_release(gcd_request *r)
{
    gcd_fd_map_release(r->in_map);
    r->in_map = NULL;
    if (r->input_mapped)
        r->input = NULL;
    if (r->out_map) {
        gcd_fd_map_release(r->out_map);
        r->out_map = NULL;
        r->output = NULL;
    }
    if (r->in_fd >= 0)
        close(r->in_fd);
    if (r->out_fd >= 0)
        close(r->out_fd);
    r->in_fd = r->out_fd = -1;
}
