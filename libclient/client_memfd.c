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
 *
 * A client that keeps making large requests is a long-lived one: once the
 * memfds have served STAGING_REGISTER_AFTER requests they are registered
 * with the daemon (gpucomp_register_fd), which on a GPU host page-locks
 * them so that later requests go by DMA without the daemon's staging copy.
 * Page-locking costs about three staged copies of the same bytes, hence not
 * from the first request. Best effort: a daemon that cannot pin them (no
 * GPU, over its --register-limit) is not asked again.
 */
#include "client_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdpass.h"

/* Write all of buf at the start of the staging memfd. */
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
    c->stage_in_registered = c->stage_out_registered = 0;
}

#define STAGING_REGISTER_AFTER 2

/* Register fd if it grew past what is registered; false if the daemon will not pin it. */
static bool register_staging_fd(gpucomp_client *c, int fd, uint64_t *registered)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size <= *registered)
        return true;
    int pinned = 0;
    int rc = gpucomp_register_fd(c, fd, (size_t)st.st_size, &pinned);
    if (rc == GC_OK && pinned) {
        *registered = (uint64_t)st.st_size;
        return true;
    }
    if (rc == GC_OK) /* mapped but not pinned: the daemon caches its mapping anyway */
        gpucomp_unregister_fd(c, fd);
    return false;
}

static void register_staging(gpucomp_client *c)
{
    if (c->stage_register_off || ++c->staged_calls < STAGING_REGISTER_AFTER)
        return;
    gc_error keep = c->err; /* best effort: the caller's request succeeded */
    if (!register_staging_fd(c, c->stage_in_fd, &c->stage_in_registered) ||
        !register_staging_fd(c, c->stage_out_fd, &c->stage_out_registered))
        c->stage_register_off = true;
    c->err = keep;
}

static void unregister_staging(gpucomp_client *c)
{
    gc_error keep = c->err;
    if (c->stage_in_registered)
        gpucomp_unregister_fd(c, c->stage_in_fd);
    if (c->stage_out_registered)
        gpucomp_unregister_fd(c, c->stage_out_fd);
    c->err = keep;
}

int client_call_staged(gpucomp_client *c, client_req *req, const uint8_t *src, client_reply *rep)
{
    /* No memfds (old kernel, seccomp, tmpfs full): the socket path still works. */
    if (!staging_fds(c) || !fill_memfd(c->stage_in_fd, src, req->src_len)) {
        unregister_staging(c); /* else the daemon would keep the closed files pinned */
        client_release_staging(c);
        return CLIENT_STAGING_UNAVAILABLE;
    }
    req->via_fd = true;
    req->in_fd = c->stage_in_fd;
    req->out_fd = c->stage_out_fd;
    int rc = client_call(c, req, rep);
    if (rc == GC_OK)
        rc = drain_memfd(c, c->stage_out_fd, rep->len, &rep->buf);
    if (rc == GC_OK)
        register_staging(c);
    return rc;
}
