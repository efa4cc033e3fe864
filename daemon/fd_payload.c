/* fd_payload.c - memfd transport, daemon side (see fd_payload.h). */
#include "fd_payload.h"

#include "fd_map_cache.h"
#include "shared_output.h"

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
                       "%s descriptor cannot be sealed (%s): pass a memfd made with MFD_ALLOW_SEALING",
                       which, strerror(errno));
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

int gcd_fd_payload_attach(gcd_request *r, int in_fd, int out_fd, gc_error *err)
{
    r->in_fd = in_fd;
    r->out_fd = out_fd;
    struct stat st;
    int rc = check_distinct(in_fd, out_fd, err);
    if (rc == GC_OK)
        rc = seal_shrink(in_fd, "input", err);
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
    if (fstat(fd, &st) != 0 ||
        ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) != 0))
        return gc_fail(err, GC_E_INVALID, "cannot size the output memfd to %zu bytes: %s", size,
                       strerror(errno));
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < size)
        return gc_fail(err, GC_E_INVALID, "the output memfd holds %lld bytes, %zu needed",
                       (long long)st.st_size, size);
    return GC_OK;
}

int gcd_request_alloc_output(gcd_request *r, size_t size, gc_error *err)
{
    int rc = gcd_request_charge(r, size, "output", err);
    if (rc != GC_OK)
        return rc;
    r->output_charge += size;
    if (r->out_fd < 0) {
        r->output = malloc(size ? size : 1);
        return r->output ? GC_OK
                         : gc_fail(err, GC_E_NOMEM, "cannot allocate %zu bytes for the output", size);
    }
    rc = size_output_memfd(r->out_fd, size, err);
    if (rc != GC_OK || size == 0)
        return rc;
    r->out_map = gcd_fd_map_acquire(r->out_fd, size, true, r->conn, err);
    if (!r->out_map)
        return err->code;
    r->output = gcd_fd_map_addr(r->out_map);
    return GC_OK;
}

void gcd_request_drop_output(gcd_request *r)
{
    if (r->out_map) {
        gcd_fd_map_release(r->out_map);
        r->out_map = NULL;
    } else if (r->shared) {
        gcd_shared_output_unref(r->shared);
        r->shared = NULL;
    } else {
        free(r->output);
    }
    r->output = NULL;
    r->output_len = 0;
    gcd_request_uncharge(r, r->output_charge);
    r->output_charge = 0;
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
