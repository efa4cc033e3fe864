/* client_connect.c - open the daemon's socket and check its Welcome. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "client_internal.h"
#include "client_async.h"
#include "client_io.h"
#include "size_parse.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.3.0"
#endif

/*
 * A connect() interrupted by a signal goes on in the background; retrying
 * it would fail with EALREADY, so wait for the outcome instead.
 */
static int finish_interrupted_connect(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    while (poll(&p, 1, -1) < 0)
        if (errno != EINTR)
            return errno;
    int e = 0;
    socklen_t len = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        return errno;
    return e;
}

static int open_socket(const char *path, int *fd_out, gc_error *err)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path)
        return gc_fail(err, GC_E_INVALID, "socket path is longer than %zu bytes: %s", sizeof sa.sun_path - 1,
                       path);
    memcpy(sa.sun_path, path, n + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return gc_fail(err, GC_E_CONNECT, "cannot create a socket: %s", strerror(errno));
    /* Streams send input in large pieces: a deep send queue saves a wake-up
     * per few hundred KiB (the kernel caps it at net.core.wmem_max). */
    int sndbuf = 4 << 20;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    int e = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : errno;
    if (e == EINTR)
        e = finish_interrupted_connect(fd);
    if (e) {
        close(fd);
        /* Something is there and this user may not use it: not "no daemon" (no fallback, gpucomp.h). */
        if (e == EACCES || e == EPERM)
            return gc_fail(err, GC_E_PERMISSION,
                           "permission denied by gpucompd at %s: %s (this user may "
                           "not open its socket)",
                           path, strerror(e));
        return gc_fail(err, GC_E_CONNECT, "cannot connect to gpucompd at %s: %s", path, strerror(e));
    }
    *fd_out = fd;
    return GC_OK;
}

static int send_hello(int fd, unsigned timeout_ms, gc_error *err)
{
    Gpucomp__Hello h = GPUCOMP__HELLO__INIT;
    h.protocol_version = GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
    h.client_name = (char *)"libgpucomp-client/" PACKAGE_VERSION;
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_HELLO;
    f.hello = &h;
    return client_io_send_frame_timed(fd, &f, GC_WIRE_MIN_MAX_FRAME, false, timeout_ms, err);
}

/* A daemon may refuse with a Welcome carrying an error or, before it has parsed Hello, a connection-level error. */
static int check_refusal(const Gpucomp__Frame *f, gc_error *err)
{
    Gpucomp__Status s = GPUCOMP__STATUS__STATUS_OK;
    const char *msg = "";
    if (f->body_case == GPUCOMP__FRAME__BODY_WELCOME) {
        s = f->welcome->status;
        msg = f->welcome->message;
    } else if (f->body_case == GPUCOMP__FRAME__BODY_RESPONSE && f->response->id == 0) {
        s = f->response->status;
        msg = f->response->message;
    }
    if (s == GPUCOMP__STATUS__STATUS_OK)
        return GC_OK;
    return gc_fail(err, client_wire_status(s), "gpucompd refused the connection: %s",
                   msg && *msg ? msg : gc_status_str(s));
}

static int check_welcome(gpucomp_client *c, const Gpucomp__Frame *f, gc_error *err)
{
    int rc = check_refusal(f, err);
    if (rc != GC_OK)
        return rc;
    if (f->body_case != GPUCOMP__FRAME__BODY_WELCOME)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd answered Hello with a %s frame instead of Welcome",
                       client_frame_kind(f));
    const Gpucomp__Welcome *w = f->welcome;
    if (w->protocol_version != GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT)
        return gc_fail(err, GC_E_UNSUPPORTED, "gpucompd speaks protocol version %u, this client speaks version %d",
                       w->protocol_version, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    if (w->max_frame_size < GC_WIRE_MIN_MAX_FRAME)
        return gc_fail(err, GC_E_PROTOCOL,
                       "gpucompd announced a max_frame_size of %u bytes, below the minimum of %u",
                       w->max_frame_size, GC_WIRE_MIN_MAX_FRAME);
    c->max_frame = w->max_frame_size;
    c->max_request = w->max_request_size;
    c->stream_window = w->stream_window;
    c->max_streams = w->max_streams;
    c->file_streams = w->file_streams;
    c->stream_rings = w->stream_rings;
    c->stream_output_rings = w->stream_output_rings;
    snprintf(c->server_version, sizeof c->server_version, "%s", w->server_version ? w->server_version : "");
    return GC_OK;
}

/*
 * The Welcome is read even if sending Hello failed: a daemon that refuses
 * (busy, shutting down) may answer and close before reading Hello, and its
 * reason beats "connection reset". A timeout (gpucomp_set_timeout, when
 * reconnecting) bounds both.
 */
static int handshake(gpucomp_client *c, unsigned timeout_ms, gc_error *err)
{
    gc_error send_err;
    gc_error_clear(&send_err);
    int send_rc = send_hello(c->fd, timeout_ms, &send_err);
    Gpucomp__Frame *f = NULL;
    int rc = send_rc != GC_OK && client_io_timed_out(&send_err)
                 ? GC_E_IO
                 : client_io_recv_frame_timed(c->fd, GC_WIRE_MIN_MAX_FRAME, &f, timeout_ms, err);
    if (rc != GC_OK && send_rc != GC_OK) {
        *err = send_err;
        return send_rc;
    }
    if (rc == GC_OK)
        rc = check_welcome(c, f, err);
    gc_wire_free(f);
    return rc;
}

/*
 * GPUCOMP_MEMFD_THRESHOLD from the environment when it holds a size (bytes,
 * or with a K, M, G or T unit, size_parse.h), the built-in default otherwise: lets a
 * deployment move the transport switch without rebuilding its programs.
 */
static size_t memfd_threshold_from_env(void)
{
    const char *v = getenv("GPUCOMP_MEMFD_THRESHOLD");
    uint64_t n;
    return v && gc_parse_size(v, SIZE_MAX, &n) ? (size_t)n : GPUCOMP_MEMFD_THRESHOLD;
}

/* Socket and handshake into c (c->path set, c->fd closed); c->fd is -1 again on failure. */
static int open_and_shake_hands(gpucomp_client *c, unsigned timeout_ms, gc_error *err)
{
    int rc = open_socket(c->path, &c->fd, err);
    if (rc != GC_OK) {
        c->fd = -1;
        return rc;
    }
    rc = handshake(c, timeout_ms, err);
    if (rc == GC_E_IO || rc == GC_E_LIMIT || rc == GC_E_NOMEM) {
        gc_error cause = *err; /* the bare socket error needs the context */
        gc_fail(err, rc, "no handshake with gpucompd at %s: %s", c->path, cause.msg);
    }
    if (rc != GC_OK) {
        close(c->fd);
        c->fd = -1;
    }
    return rc;
}

/* A daemon that is not there, or that refuses this user: what gpucomp_open serves in process. */
static bool unreachable(int rc)
{
    return rc == GC_E_CONNECT || rc == GC_E_PERMISSION;
}

/* A client with no connection yet; NULL (err) when out of memory. */
static gpucomp_client *client_new(gc_error *err)
{
    gpucomp_client *c = calloc(1, sizeof *c);
    if (!c) {
        gc_fail(err, GC_E_NOMEM, "cannot allocate a client");
        return NULL;
    }
    c->fd = -1;
    c->next_id = 1;
    c->stage_in_fd = c->stage_out_fd = -1;
    c->memfd_threshold = memfd_threshold_from_env();
    c->reconnect = true;
    atomic_init(&c->async_outstanding, 0u);
    return c;
}

int client_connect(const char *path, bool local_if_unreachable, gpucomp_client **out, gc_error *err)
{
    *out = NULL;
    gpucomp_client *c = client_new(err);
    if (!c)
        return GC_E_NOMEM;
    if (strlen(path) >= sizeof c->path) {
        free(c);
        return gc_fail(err, GC_E_INVALID, "socket path is longer than %zu bytes: %s", sizeof c->path - 1, path);
    }
    snprintf(c->path, sizeof c->path, "%s", path);
    int rc = open_and_shake_hands(c, 0, err);
    if (rc != GC_OK && local_if_unreachable && unreachable(rc)) {
        c->local_only = true; /* why stays in c->err for gpucomp_last_error */
        snprintf(c->err.msg, sizeof c->err.msg, "%s", err->msg);
        c->err.code = (gc_status)rc;
        rc = GC_OK;
    }
    if (rc != GC_OK) {
        free(c);
        return rc;
    }
    c->fallback = local_if_unreachable;
    *out = c;
    return GC_OK;
}

int client_open_local(gpucomp_client **out, gc_error *err)
{
    *out = client_new(err);
    if (!*out)
        return GC_E_NOMEM;
    (*out)->local_only = true;
    return GC_OK;
}

/*
 * The same client, a new connection: what the old one announced is
 * replaced by the new Welcome; request ids go on counting (ids need only be
 * unique per connection). The staging memfds are kept (only sealed against
 * shrinking); registrations are gone with the old connection.
 *
 * The handshake is bounded even with no timeout set: the call that
 * reconnects was not asking for a connection, and something that accepts
 * on the path but never answers Hello (a daemon frozen while starting, not
 * a gpucompd at all) must not hang it forever.
 */
#define REOPEN_HANDSHAKE_MS 2000u

int client_reopen(gpucomp_client *c, gc_error *err)
{
    client_disconnect(c);
    int rc = open_and_shake_hands(c, c->timeout_ms ? c->timeout_ms : REOPEN_HANDSHAKE_MS, err);
    if (rc == GC_OK)
        client_async_connection_reset(c);
    return rc;
}

void client_disconnect(gpucomp_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}
