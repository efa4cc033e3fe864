/*
 * client_file.c - whole regular files through gpucompd (gpucomp.h,
 * gpucomp_compress_file; docs/PROTOCOL.md, "File streams").
 *
 * The input's descriptor goes to the daemon, which reads the file on its I/O
 * threads, so the bytes never cross the socket; so does the output's when
 * the daemon can write it at final offsets (a regular file at offset 0, no
 * O_APPEND). Otherwise the output comes back in stream frames and is written
 * to out_fd here, at its current position. Either way it is a stream
 * (client_stream.c) that takes no input from us, run to its final frame.
 *
 * With no daemon (a client from gpucomp_open that found none, or whose
 * daemon cannot be reached when the call begins, with fallback on), the
 * file goes through a local stream instead (client_local_stream.c): read
 * here from offset 0 to its size, the output written to out_fd as it comes.
 */
#include "client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Output frames are handed out through a buffer of this size. */
#define FILE_OUT_BUFFER ((size_t)1 << 20)

/* Whether the daemon can write the output into fd itself, from offset 0. */
static bool passable_output(int fd)
{
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_APPEND) || (flags & O_ACCMODE) == O_RDONLY)
        return false;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    return lseek(fd, 0, SEEK_CUR) == 0;
}

/* All of p to fd, which may be non-blocking (a pipe the caller shares). */
static int write_all(int fd, const uint8_t *p, size_t n, gc_error *err)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            poll(&pfd, 1, -1);
            continue;
        }
        if (w <= 0)
            return gc_fail(err, GC_E_IO, "writing the output: %s", w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return GC_OK;
}

/* Run s to its final frame; output it sends back, if any, is written to out_fd from where it lies. */
static int run_to_end(gpucomp_stream *s, int out_fd, gc_error *err)
{
    int rc = GC_OK;
    for (;;) {
        gpucomp_inbuf in = { 0 };
        gpucomp_outbuf out = { 0 }; /* nothing copied: the output is written from its view */
        size_t pending = 0, n;
        rc = gpucomp_stream_run(s, &in, &out, GPUCOMP_END, &pending);
        const void *p;
        while (rc == GC_OK && (p = gpucomp_stream_output_view(s, &n)) != NULL) {
            rc = write_all(out_fd, p, n, err);
            gpucomp_stream_output_release(s, n);
        }
        if (rc != GC_OK || pending == 0)
            break;
    }
    return rc;
}

/* The daemon wrote [0, len) of out_fd: no older bytes after them, and the offset after them. */
static int settle_output(int fd, uint64_t len, gc_error *err)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > len && ftruncate(fd, (off_t)len) != 0)
        return gc_fail(err, GC_E_IO, "truncating the output file: %s", strerror(errno));
    if (lseek(fd, (off_t)len, SEEK_SET) < 0)
        return gc_fail(err, GC_E_IO, "moving to the end of the output file: %s", strerror(errno));
    return GC_OK;
}

/* in_fd's [0, size) through the local stream s, its output to out_fd. */
static int pump_local(gpucomp_stream *s, int in_fd, uint64_t size, int out_fd, gc_error *err)
{
    uint8_t *ibuf = malloc(FILE_OUT_BUFFER), *obuf = malloc(FILE_OUT_BUFFER);
    int rc = ibuf && obuf ? GC_OK : gc_fail(err, GC_E_NOMEM, "cannot allocate the file's buffers");
    uint64_t at = 0;
    size_t pending = 1;
    while (rc == GC_OK && pending) {
        size_t want = size - at < FILE_OUT_BUFFER ? (size_t)(size - at) : FILE_OUT_BUFFER;
        ssize_t got = want ? pread(in_fd, ibuf, want, (off_t)at) : 0;
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 || (want && got == 0)) {
            rc = gc_fail(err, GC_E_IO, "reading the input file at %llu of %llu bytes: %s", (unsigned long long)at,
                         (unsigned long long)size, got < 0 ? strerror(errno) : "it shrank");
            break;
        }
        at += (uint64_t)got;
        gpucomp_inbuf in = { ibuf, (size_t)got, 0 };
        gpucomp_end_op op = at == size ? GPUCOMP_END : GPUCOMP_CONTINUE;
        do {
            gpucomp_outbuf out = { obuf, FILE_OUT_BUFFER, 0 };
            rc = gpucomp_stream_run(s, &in, &out, op, &pending);
            if (rc == GC_OK && out.pos)
                rc = write_all(out_fd, obuf, out.pos, err);
        } while (rc == GC_OK && (in.pos < in.size || (op == GPUCOMP_END && pending)));
        if (op != GPUCOMP_END)
            pending = 1;
        if (gpucomp_stream_trailing_garbage(s, NULL))
            at = size; /* the rest is ignored, as the daemon ignores it */
    }
    free(ibuf);
    free(obuf);
    return rc;
}

/* What the finished stream s did. */
static void describe(const gpucomp_stream *s, gpucomp_file_result *res)
{
    res->bytes_in = gpucomp_stream_bytes_in(s);
    res->bytes_out = gpucomp_stream_bytes_out(s);
    res->backend = gpucomp_stream_backend(s);
    res->trailing_garbage = gpucomp_stream_trailing_garbage(s, &res->garbage_offset);
}

/* The file through a local stream: the daemon's file stream, done in this process. */
static int run_local(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, int in_fd, int out_fd,
                     uint64_t size, gpucomp_file_result *res)
{
    bool pass = passable_output(out_fd);
    gpucomp_stream *s;
    int rc = client_stream_open_local(c, dir, o, &s);
    if (rc != GC_OK)
        return rc;
    rc = pump_local(s, in_fd, size, out_fd, &c->err);
    gpucomp_file_result done;
    describe(s, &done);
    gpucomp_stream_free(s);
    if (rc == GC_OK && pass)
        rc = settle_output(out_fd, done.bytes_out, &c->err);
    if (rc == GC_OK)
        *res = done;
    return rc;
}

static int run_remote(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, int in_fd, int out_fd,
                      gpucomp_file_result *res);

static int run_file(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, int in_fd, int out_fd,
                    gpucomp_file_result *res)
{
    gpucomp_file_result ignored;
    if (!res)
        res = &ignored;
    memset(res, 0, sizeof *res);
    if (!c)
        return GPUCOMP_E_INVALID;
    gc_error_clear(&c->err);
    struct stat st;
    if (fstat(in_fd, &st) != 0 || !S_ISREG(st.st_mode))
        return gc_fail(&c->err, GC_E_INVALID, "the input is not a regular file: stream it (gpucomp_stream_open)");
    if (fcntl(out_fd, F_GETFL) < 0)
        return gc_fail(&c->err, GC_E_INVALID, "the output descriptor is not open");
    if (c->local_only)
        return run_local(c, dir, o, in_fd, out_fd, (uint64_t)st.st_size, res);
    int rc = run_remote(c, dir, o, in_fd, out_fd, res);
    /* Only a daemon that could not take the call at all: nothing was written yet. */
    if (rc != GC_OK && c->fallback && client_daemon_unavailable(rc) && res->bytes_out == 0 &&
        lseek(out_fd, 0, SEEK_CUR) == 0)
        rc = run_local(c, dir, o, in_fd, out_fd, (uint64_t)st.st_size, res);
    return rc;
}

static int run_remote(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, int in_fd, int out_fd,
                      gpucomp_file_result *res)
{
    if (!c->file_streams)
        return gc_fail(&c->err, GC_E_UNSUPPORTED, "gpucompd %s takes no file streams: stream the file instead",
                       *c->server_version ? c->server_version : "(version unknown)");
    bool pass = passable_output(out_fd);
    gpucomp_stream *s;
    int rc = client_stream_open_file(c, dir, o, in_fd, pass ? out_fd : -1, &s);
    if (rc != GC_OK)
        return rc;
    rc = run_to_end(s, out_fd, &c->err);
    gpucomp_file_result done;
    describe(s, &done);
    gc_error keep = c->err;
    gpucomp_stream_free(s);
    c->err = keep;
    if (rc == GC_OK && pass)
        rc = settle_output(out_fd, done.bytes_out, &c->err);
    if (rc == GC_OK)
        *res = done;
    return rc;
}

int gpucomp_compress_file(gpucomp_client *c, const gpucomp_options *o, int in_fd, int out_fd,
                          gpucomp_file_result *res)
{
    return run_file(c, GPUCOMP_COMPRESS, o, in_fd, out_fd, res);
}

int gpucomp_decompress_file(gpucomp_client *c, const gpucomp_options *o, int in_fd, int out_fd,
                            gpucomp_file_result *res)
{
    return run_file(c, GPUCOMP_DECOMPRESS, o, in_fd, out_fd, res);
}
