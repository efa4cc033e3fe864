/*
 * client_memfd.c - the zero-copy transport (docs/PROTOCOL.md, "memfd
 * transport"): gpucomp_compress/gpucomp_decompress stage large buffers
 * through two memfds instead of the socket, so the payload crosses into the
 * daemon once (a write into the memfd, which the daemon maps) instead of
 * being packed into frames, copied through the socket and unpacked again.
 */
#include "client_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdpass.h"

/* Write all of buf at the start of a fresh memfd. */
static bool fill_memfd(int fd, const uint8_t *buf, size_t len)
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

int client_call_staged(gpucomp_client *c, client_req *req, const uint8_t *src, client_reply *rep)
{
    int in = gc_memfd_create("gpucomp-in");
    int out = in >= 0 ? gc_memfd_create("gpucomp-out") : -1;
    /* No memfds (old kernel, seccomp, tmpfs full): the socket path still works. */
    if (out < 0 || !fill_memfd(in, src, req->src_len)) {
        if (in >= 0)
            close(in);
        if (out >= 0)
            close(out);
        return CLIENT_STAGING_UNAVAILABLE;
    }
    req->via_fd = true;
    req->in_fd = in;
    req->out_fd = out;
    int rc = client_call(c, req, rep);
    if (rc == GC_OK)
        rc = drain_memfd(c, out, rep->len, &rep->buf);
    close(in);
    close(out);
    return rc;
}
