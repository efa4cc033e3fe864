/* client_io.c - blocking frame I/O on the client's socket (client_io.h). */
#include "client_io.h"

#include "fdpass.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SENT_NOTHING "gpucompd sent nothing for"
#define TOOK_NOTHING "gpucompd took nothing for"

bool client_io_input_pending(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP));
}

static bool input_pending(int fd)
{
    return client_io_input_pending(fd);
}

bool client_io_timed_out(const gc_error *err)
{
    return err->code == GC_E_IO && (strncmp(err->msg, SENT_NOTHING, strlen(SENT_NOTHING)) == 0 ||
                                    strncmp(err->msg, TOOK_NOTHING, strlen(TOOK_NOTHING)) == 0);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * poll() for events on fd for at most timeout_ms (0: forever), across
 * EINTR. Returns 1 with *revents set, 0 when the time ran out, or -1 with
 * errno set.
 */
static int poll_for(int fd, short events, unsigned timeout_ms, short *revents)
{
    int64_t deadline = timeout_ms ? now_ms() + timeout_ms : 0;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = events };
        int wait = -1;
        if (timeout_ms) {
            int64_t left = deadline - now_ms();
            wait = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
        }
        int n = poll(&p, 1, wait);
        if (n > 0) {
            *revents = p.revents;
            return 1;
        }
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/*
 * Block until fd can take more bytes, or until the daemon speaks when
 * stop_on_input is set. POLLERR/POLLHUP count as writable: the next send()
 * then reports the actual error.
 */
static int wait_writable(int fd, bool stop_on_input, unsigned timeout_ms, gc_error *err)
{
    short revents = 0;
    int n = poll_for(fd, POLLOUT | (stop_on_input ? POLLIN : 0), timeout_ms, &revents);
    if (n < 0)
        return gc_fail(err, GC_E_IO, "waiting on the gpucompd socket: %s", strerror(errno));
    if (n == 0)
        return gc_fail(err, GC_E_IO, TOOK_NOTHING " %u ms", timeout_ms);
    if (stop_on_input && (revents & POLLIN))
        return CLIENT_IO_INPUT_PENDING;
    return GC_OK;
}

/* Block until fd has bytes to read (or is closed), for at most timeout_ms (0: forever). */
static int wait_readable(int fd, unsigned timeout_ms, gc_error *err)
{
    if (!timeout_ms)
        return GC_OK; /* recv() blocks by itself */
    short revents = 0;
    int n = poll_for(fd, POLLIN, timeout_ms, &revents);
    if (n < 0)
        return gc_fail(err, GC_E_IO, "waiting on the gpucompd socket: %s", strerror(errno));
    if (n == 0)
        return gc_fail(err, GC_E_IO, SENT_NOTHING " %u ms", timeout_ms);
    return GC_OK;
}

static int write_failed(int e, gc_error *err)
{
    if (e == EPIPE || e == ECONNRESET)
        return gc_fail(err, GC_E_IO, "gpucompd closed the connection while a request was being sent");
    return gc_fail(err, GC_E_IO, "write to gpucompd failed: %s", strerror(e));
}

/*
 * Non-blocking sends with poll() in between, rather than one blocking
 * send(): a blocking send of a large frame would hang forever if the daemon
 * stops reading to refuse the request. MSG_NOSIGNAL turns a vanished daemon
 * into EPIPE instead of SIGPIPE.
 */
static int write_all(int fd, const uint8_t *buf, size_t len, bool stop_on_input, unsigned timeout_ms,
                     gc_error *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            done += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_writable(fd, stop_on_input, timeout_ms, err);
            if (rc != GC_OK)
                return rc;
        } else if (n < 0 && errno != EINTR) {
            return write_failed(errno, err);
        }
    }
    return GC_OK;
}

/* f serialized with its header into a new buffer of *size bytes. */
static int pack_frame(const Gpucomp__Frame *f, uint32_t max_body, uint8_t **buf, size_t *size, gc_error *err)
{
    *size = gc_wire_packed_size(f);
    if (*size - GC_WIRE_HEADER_SIZE > max_body)
        return gc_fail(err, GC_E_INTERNAL, "client built a %zu-byte frame, over the daemon's limit of %u", *size,
                       max_body);
    *buf = malloc(*size);
    if (!*buf)
        return gc_fail(err, GC_E_NOMEM, "cannot allocate a %zu-byte frame", *size);
    gc_wire_pack(f, *buf);
    return GC_OK;
}

int client_io_send_frame(int fd, const Gpucomp__Frame *f, uint32_t max_body, bool stop_on_input, gc_error *err)
{
    return client_io_send_frame_timed(fd, f, max_body, stop_on_input, 0, err);
}

int client_io_send_frame_timed(int fd, const Gpucomp__Frame *f, uint32_t max_body, bool stop_on_input,
                               unsigned timeout_ms, gc_error *err)
{
    if (stop_on_input && input_pending(fd))
        return CLIENT_IO_INPUT_PENDING;
    uint8_t *buf;
    size_t size;
    int rc = pack_frame(f, max_body, &buf, &size, err);
    if (rc != GC_OK)
        return rc;
    rc = write_all(fd, buf, size, stop_on_input, timeout_ms, err);
    free(buf);
    return rc;
}

int client_io_send_frame_fds(int fd, const Gpucomp__Frame *f, uint32_t max_body, const int *fds, unsigned n_fds,
                             gc_error *err)
{
    return client_io_send_frame_fds_timed(fd, f, max_body, fds, n_fds, 0, err);
}

/*
 * The frame is small (no payload): waiting until the socket takes bytes
 * bounds the wait well enough; gc_fdpass_send then writes it whole.
 */
int client_io_send_frame_fds_timed(int fd, const Gpucomp__Frame *f, uint32_t max_body, const int *fds,
                                   unsigned n_fds, unsigned timeout_ms, gc_error *err)
{
    uint8_t *buf;
    size_t size;
    int rc = pack_frame(f, max_body, &buf, &size, err);
    if (rc != GC_OK)
        return rc;
    if (timeout_ms && (rc = wait_writable(fd, false, timeout_ms, err)) != GC_OK) {
        free(buf);
        return rc;
    }
    rc = gc_fdpass_send(fd, buf, size, fds, n_fds, err);
    free(buf);
    return rc;
}

/* read_full's "the daemon closed the connection": the caller knows where. */
#define READ_EOF (-2)

/* Read exactly len bytes; *got says how many arrived when it fails. */
static int read_full(int fd, uint8_t *buf, size_t len, size_t *got, unsigned timeout_ms, gc_error *err)
{
    *got = 0;
    while (*got < len) {
        int rc = wait_readable(fd, timeout_ms, err);
        if (rc != GC_OK)
            return rc;
        ssize_t n = recv(fd, buf + *got, len - *got, 0);
        if (n > 0)
            *got += (size_t)n;
        else if (n == 0)
            return READ_EOF;
        else if (errno != EINTR)
            return gc_fail(err, GC_E_IO, "read from gpucompd failed: %s", strerror(errno));
    }
    return GC_OK;
}

static int read_header(int fd, uint32_t *body_len, unsigned timeout_ms, gc_error *err)
{
    uint8_t header[GC_WIRE_HEADER_SIZE];
    size_t got;
    int rc = read_full(fd, header, sizeof header, &got, timeout_ms, err);
    if (rc == READ_EOF && got == 0)
        return gc_fail(err, GC_E_IO, "gpucompd closed the connection");
    if (rc == READ_EOF)
        return gc_fail(err, GC_E_IO, "gpucompd closed the connection inside a frame header");
    if (rc != GC_OK)
        return rc;
    *body_len = gc_wire_body_len(header);
    return GC_OK;
}

int client_io_recv_frame(int fd, uint32_t max_body, Gpucomp__Frame **out, gc_error *err)
{
    return client_io_recv_frame_timed(fd, max_body, out, 0, err);
}

int client_io_recv_frame_timed(int fd, uint32_t max_body, Gpucomp__Frame **out, unsigned timeout_ms, gc_error *err)
{
    uint32_t len = 0;
    *out = NULL;
    int rc = read_header(fd, &len, timeout_ms, err);
    if (rc != GC_OK)
        return rc;
    /* Checked before malloc: the header is the daemon's claim, not a fact. */
    if (len > max_body)
        return gc_fail(err, GC_E_LIMIT, "gpucompd sent a %u-byte frame, over the limit of %u", len, max_body);
    uint8_t *body = malloc(len ? len : 1);
    if (!body)
        return gc_fail(err, GC_E_NOMEM, "cannot allocate %u bytes for a frame", len);
    size_t got;
    rc = read_full(fd, body, len, &got, timeout_ms, err);
    if (rc == READ_EOF)
        rc = gc_fail(err, GC_E_IO, "gpucompd closed the connection inside a frame (%zu of %u bytes)", got, len);
    if (rc == GC_OK) {
        *out = gc_wire_unpack(body, len, err);
        rc = *out ? GC_OK : GC_E_PROTOCOL;
    }
    free(body);
    return rc;
}
