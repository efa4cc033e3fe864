/*
 * client_memfd.c - the zero-copy transport (docs/PROTOCOL.md, "memfd
 * transport"): gpucomp_compress/gpucomp_decompress stage large buffers
 * through two memfds instead of the socket, so the payload crosses into the
 * daemon once (a write into the memfd, which the daemon maps) instead of
 * being packed into frames, copied through the socket and unpacked again.
 *
 * The two memfds are created on first use and kept by the client: the
 * daemon seals them against shrinking, which only stops them from getting
 * smaller, and reusing them means a steady stream of requests writes into
 * pages that already exist instead of allocating (and faulting in) fresh
 * ones every call. They hold as much memory as the largest request until
 * gpucomp_close().
 */
#include "client_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdpass.h"

bool client_memfd_fill(int fd, const uint8_t *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = pwrite(fd, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    return true;
}

/* The len bytes the daemon wrote into fd, in a buffer for gpucomp_free. */
static int drain_memfd(gpucomp_client *c, int fd, size_t len, uint8_t **out)
{
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return gc_fail(&c->err, GC_E_NOMEM, "cannot allocate %zu bytes for the output", len);
    size_t off = 0;
    while (off < len) {
        ssize_t n = pread(fd, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(buf);
            return gc_fail(&c->err, GC_E_IO, "reading the output memfd: %s",
                           n < 0 ? strerror(errno) : "shorter than announced");
        }
        off += (size_t)n;
    }
    *out = buf;
    return GC_OK;
}

/* The cached staging memfds, created on first use. */
static bool staging_fds(gpucomp_client *c)
{
    if (c->stage_in_fd < 0)
        c->stage_in_fd = gc_memfd_create("gpucomp-in");
    if (c->stage_out_fd < 0)
        c->stage_out_fd = gc_memfd_create("gpucomp-out");
    return c->stage_in_fd >= 0 && c->stage_out_fd >= 0;
}

void client_release_staging(gpucomp_client *c)
{
    if (c->stage_in_fd >= 0)
        close(c->stage_in_fd);
    if (c->stage_out_fd >= 0)
        close(c->stage_out_fd);
    c->stage_in_fd = c->stage_out_fd = -1;
}

int client_call_staged(gpucomp_client *c, client_req *req, const uint8_t *src, client_reply *rep)
{
    /* No memfds (old kernel, seccomp, tmpfs full): the socket path still works. */
    if (!staging_fds(c) || !client_memfd_fill(c->stage_in_fd, src, req->src_len)) {
        client_release_staging(c);
        return CLIENT_STAGING_UNAVAILABLE;
    }
    req->via_fd = true;
    req->in_fd = c->stage_in_fd;
    req->out_fd = c->stage_out_fd;
    int rc = client_call(c, req, rep);
    if (rc == GC_OK)
        rc = drain_memfd(c, c->stage_out_fd, rep->len, &rep->buf);
    return rc;
}
