/*
 * client_stream.c - streams: inputs of any length through gpucompd
 * (gpucomp.h, "Streams"; docs/PROTOCOL.md, "Streams" and "Cancelling").
 *
 * Unlike client_request.c, which writes a whole request and then reads a
 * whole response, a stream writes and reads at the same time: the daemon
 * stops taking input while its output to us is unread, so a client that
 * only wrote would wait forever. Everything here is therefore non-blocking
 * with poll() on both directions, and keeps at most:
 *
 *   - one packed Request frame being written (wbuf, at most max_frame), and
 *   - one received Response frame whose payload is being handed out (held),
 *
 * so a stream's memory is bounded whatever its length. Input is taken from
 * the caller's buffer only as far as the daemon's window allows (at most
 * consumed + stream_window bytes sent), so the daemon never has to refuse it.
 *
 * With a daemon that takes rings (Welcome's stream_rings), the input goes
 * into a ring instead: a sealable memfd of twice stream_window bytes (the
 * most the protocol allows; input may run that far past consumed), passed once
 * with the opening frame, which the daemon's I/O threads read. Each frame
 * then only names the bytes it adds (ring_offset, ring_length), so input
 * crosses neither the socket nor the daemon's event loop; the window rule
 * is what keeps us from writing over bytes the daemon has not read yet.
 *
 * With a daemon that writes output into rings (Welcome's stream_output_rings),
 * the output comes back the same way: a second memfd of stream_window bytes,
 * mapped read-only, which the daemon's I/O threads write; its frames only
 * name the bytes now there, and we return credit (output_consumed) as the
 * caller takes them, by a copy into its buffer or, through
 * gpucomp_stream_output_view, by writing them out of the ring itself. The
 * daemon never writes past our credit plus the ring's size, and every frame's
 * claim is checked against that before a byte of the ring is believed.
 *
 * A client with no daemon (gpucomp_open found none, or its daemon cannot be
 * reached when the stream opens and it falls back) runs the stream in this
 * process instead: client_local_stream.c does the work, this file only
 * dispatches to it.
 *
 * After anything that leaves the socket in an unknown state (an I/O error, a
 * malformed frame, a timeout) the connection is closed, as client_request.c
 * does; a stream the daemon ended with an error leaves it usable.
 */
#include "client_internal.h"
#include "client_io.h"
#include "fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

/* gpucomp_stream_free waits this long for a cancelled stream's final frame when no timeout is set. */
#define FREE_DRAIN_MS 10000

struct gpucomp_stream {
    gpucomp_client *c;
    uint64_t id;
    bool decompress;
    uint64_t max_output; /* decompress: 0 = no limit */
    /* input side */
    uint64_t sent;       /* input bytes taken from the caller into frames */
    uint64_t consumed;   /* the daemon's last `consumed` */
    uint64_t flushed_at; /* `sent` when the last flush mark was packed */
    bool last_sent;      /* a frame with last = true (or OP_CANCEL) is packed */
    bool ended;          /* the caller said GPUCOMP_END */
    uint8_t *wbuf;       /* the packed frame being written */
    size_t wcap, wlen, wpos;
    /* output side */
    uint8_t rhdr[GC_WIRE_HEADER_SIZE];
    size_t rhdr_got;
    uint8_t *rbody; /* the frame body being read (in rbuf), NULL between frames */
    uint8_t *rbuf;  /* kept from frame to frame: fresh pages per frame cost more than the copy */
    size_t rcap;
    uint32_t rlen;
    size_t rgot;
    Gpucomp__Frame *held; /* a received frame whose payload is being handed out */
    size_t held_pos;
    uint64_t received;  /* payload bytes received */
    uint64_t delivered; /* payload bytes handed to the caller */
    /* the end */
    bool final; /* the final frame arrived */
    int status; /* GPUCOMP_OK, or what ended the stream */
    bool trailing_garbage;
    uint64_t garbage_offset;
    gpucomp_backend backend;
    /* a file stream (client_file.c): the daemon reads the input file itself */
    bool file;
    bool file_out; /* and writes the output file: no payload comes back */
    /* a ring stream: input offset x is at ring[x % ring_size], the memfd ring_fd mapped */
    int ring_fd;
    uint8_t *ring;
    size_t ring_size;
    /* an output ring: output offset y is at oring[y % oring_size], the memfd oring_fd mapped read-only */
    int oring_fd;
    const uint8_t *oring;
    size_t oring_size;
    uint64_t credit_sent; /* the output_consumed last packed */
    bool cancel_sent;     /* OP_CANCEL is packed: an output ring's id is closed only by it */
    /* a stream run in this process (client_local_stream.c): nothing above is used */
    client_local_stream *local;
};

/* ---- sending ----------------------------------------------------------- */

/* Pack f into wbuf (empty on entry), reusing its memory. */
static int pack(gpucomp_stream *s, const Gpucomp__Frame *f)
{
    gpucomp_client *c = s->c;
    size_t size = gc_wire_packed_size(f);
    if (size - GC_WIRE_HEADER_SIZE > c->max_frame)
        return gc_fail(&c->err, GC_E_INTERNAL,
                       "client built a %zu-byte stream frame, over the daemon's limit of %u", size, c->max_frame);
    if (size > s->wcap) {
        uint8_t *p = realloc(s->wbuf, size);
        if (!p)
            return gc_fail(&c->err, GC_E_NOMEM, "cannot allocate a %zu-byte frame", size);
        s->wbuf = p;
        s->wcap = size;
    }
    gc_wire_pack(f, s->wbuf);
    s->wlen = size;
    s->wpos = 0;
    return GC_OK;
}

static int pack_request(gpucomp_stream *s, Gpucomp__Request *r)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = r;
    return pack(s, &f);
}

static bool writing(const gpucomp_stream *s)
{
    return s->wpos < s->wlen;
}

/* Input bytes the window (a ring stream: its ring) lets us send now. */
static uint64_t credit(const gpucomp_stream *s)
{
    uint64_t limit = s->consumed + (s->ring ? (uint64_t)s->ring_size : s->c->stream_window);
    if (limit < s->consumed) /* a huge window: no limit */
        return UINT64_MAX - s->sent;
    return limit > s->sent ? limit - s->sent : 0;
}

/*
 * Take the next frame's worth of input from in (as far as the window and the
 * frame size allow) into wbuf, with last/flush on the frame that takes the
 * caller's final byte. An empty frame carries a last or flush mark alone.
 */
static int pack_input(gpucomp_stream *s, gpucomp_inbuf *in, gpucomp_end_op op)
{
    if (writing(s) || s->last_sent || s->final)
        return GC_OK;
    size_t left = in->size - in->pos;
    uint64_t n = credit(s);
    size_t fragment = gc_wire_max_payload(s->c->max_frame);
    n = n < left ? n : left;
    if (s->ring) /* one frame names the bytes up to the ring's end at most */
        fragment = s->ring_size - (size_t)(s->sent % s->ring_size);
    n = n < fragment ? n : fragment;
    bool takes_all = n == left;
    bool last = takes_all && op == GPUCOMP_END;
    bool flush = takes_all && op == GPUCOMP_FLUSH && s->flushed_at != s->sent + n;
    if (n == 0 && !last && !flush)
        return GC_OK;
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = s->id;
    if (s->ring) {
        r.ring_offset = s->sent % s->ring_size;
        r.ring_length = n;
        const uint8_t *from = (const uint8_t *)in->src + in->pos;
        if (n && from != s->ring + r.ring_offset) /* else read there already (gpucomp_stream_input_space) */
            memcpy(s->ring + r.ring_offset, from, (size_t)n);
    } else { /* protobuf-c's payload is not const; packing only reads it. */
        r.payload.data = n ? (uint8_t *)(uintptr_t)((const uint8_t *)in->src + in->pos) : NULL;
        r.payload.len = (size_t)n;
    }
    r.last = last;
    r.flush = flush && !last; /* last already makes the daemon finish everything */
    if (s->oring)
        r.output_consumed = s->credit_sent = s->delivered;
    int rc = pack_request(s, &r);
    if (rc != GC_OK)
        return rc;
    in->pos += (size_t)n;
    s->sent += n;
    if (flush)
        s->flushed_at = s->sent;
    s->last_sent = last;
    return GC_OK;
}

/*
 * Credit for the output ring, in a frame of its own, once the caller has
 * taken an eighth of the ring or all there is (the daemon may be waiting for
 * it): with input still to send it rides on the input's frames.
 */
static int pack_credit(gpucomp_stream *s)
{
    uint64_t owed = s->delivered - s->credit_sent;
    if (!s->oring || writing(s) || s->cancel_sent || s->final || owed == 0)
        return GC_OK;
    if (owed < s->oring_size / 8 && s->delivered != s->received)
        return GC_OK;
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = s->id;
    r.output_consumed = s->credit_sent = s->delivered;
    return pack_request(s, &r);
}

/* The next frame to write: input (and its marks), else credit alone. */
static int pack_next(gpucomp_stream *s, gpucomp_inbuf *in, gpucomp_end_op op)
{
    int rc = pack_input(s, in, op);
    return rc == GC_OK ? pack_credit(s) : rc;
}

/* Whether the daemon still holds the stream's id: until our last frame, or (an output ring's) our cancel. */
static bool id_open(const gpucomp_stream *s)
{
    return s->oring ? !s->cancel_sent : !s->last_sent;
}

/* Ring bytes the caller may fill now: from the next input offset up to the window or the ring's end. */
static size_t ring_room(const gpucomp_stream *s)
{
    if (!s->ring || s->last_sent || s->final || s->status != GC_OK)
        return 0;
    uint64_t n = credit(s), to_end = s->ring_size - (size_t)(s->sent % s->ring_size);
    return (size_t)(n < to_end ? n : to_end);
}

void *gpucomp_stream_input_space(gpucomp_stream *s, size_t *len)
{
    /* a local stream has no ring (NULL): it copies what its next part needs */
    size_t n = s ? ring_room(s) : 0;
    if (len)
        *len = n;
    return n ? s->ring + s->sent % s->ring_size : NULL;
}

/*
 * Input inside the ring must be what gpucomp_stream_input_space offered:
 * anything else would be copied over itself or read past the mapping.
 */
static bool ring_input_ok(const gpucomp_stream *s, const gpucomp_inbuf *in)
{
    uintptr_t p = (uintptr_t)in->src + in->pos, ring = (uintptr_t)s->ring;
    size_t n = in->size - in->pos;
    if (!s->ring || n == 0 || p >= ring + s->ring_size || p + n <= ring)
        return true;
    return p == ring + s->sent % s->ring_size && n <= ring_room(s);
}

/* OP_CANCEL for the stream: the daemon stops its work and stops dropping its frames. */
static int pack_cancel(gpucomp_stream *s)
{
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = s->id;
    r.op = GPUCOMP__OP__OP_CANCEL;
    r.last = true;
    int rc = pack_request(s, &r);
    if (rc == GC_OK)
        s->last_sent = s->cancel_sent = true;
    return rc;
}

static int write_failed(gpucomp_stream *s, int e)
{
    if (e == EPIPE || e == ECONNRESET)
        return gc_fail(&s->c->err, GC_E_IO, "gpucompd closed the connection after %llu bytes of stream input",
                       (unsigned long long)s->sent);
    return gc_fail(&s->c->err, GC_E_IO, "write to gpucompd failed: %s", strerror(e));
}

/* Write what the socket takes now; *moved is set if anything went. */
static int try_write(gpucomp_stream *s, bool *moved)
{
    while (writing(s)) {
        ssize_t n = send(s->c->fd, s->wbuf + s->wpos, s->wlen - s->wpos, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            s->wpos += (size_t)n;
            *moved = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return GC_OK;
        } else if (n < 0 && errno != EINTR) {
            return write_failed(s, errno);
        }
    }
    return GC_OK;
}

/* ---- receiving --------------------------------------------------------- */

static int closed_early(gpucomp_stream *s)
{
    return gc_fail(&s->c->err, GC_E_IO, "gpucompd closed the connection after %llu bytes of output",
                   (unsigned long long)s->received);
}

/* recv() what is there into buf; 1 when it is full, 0 when the socket has no more now. */
static int read_into(gpucomp_stream *s, uint8_t *buf, size_t len, size_t *got)
{
    while (*got < len) {
        ssize_t n = recv(s->c->fd, buf + *got, len - *got, MSG_DONTWAIT);
        if (n > 0)
            *got += (size_t)n;
        else if (n == 0)
            return closed_early(s);
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        else if (errno != EINTR)
            return gc_fail(&s->c->err, GC_E_IO, "read from gpucompd failed: %s", strerror(errno));
    }
    return 1;
}

/*
 * Read as much of the next frame as has arrived. *out is the frame once it
 * is complete (NULL while it is not). The header's length is checked
 * before anything is allocated: it is the daemon's claim, not a fact.
 */
static int try_read_frame(gpucomp_stream *s, Gpucomp__Frame **out, bool *moved)
{
    *out = NULL;
    if (!s->rbody) {
        size_t before = s->rhdr_got;
        int rc = read_into(s, s->rhdr, sizeof s->rhdr, &s->rhdr_got);
        *moved |= s->rhdr_got != before;
        if (rc != 1)
            return rc;
        s->rlen = gc_wire_body_len(s->rhdr);
        if (s->rlen > s->c->max_frame)
            return gc_fail(&s->c->err, GC_E_LIMIT, "gpucompd sent a %u-byte frame, over the limit of %u", s->rlen,
                           s->c->max_frame);
        if (s->rcap < s->rlen || !s->rbuf) {
            uint8_t *nb = realloc(s->rbuf, s->rlen ? s->rlen : 1);
            if (!nb)
                return gc_fail(&s->c->err, GC_E_NOMEM, "cannot allocate %u bytes for a frame", s->rlen);
            s->rbuf = nb;
            s->rcap = s->rlen ? s->rlen : 1;
        }
        s->rbody = s->rbuf;
        s->rgot = 0;
    }
    size_t before = s->rgot;
    int rc = read_into(s, s->rbody, s->rlen, &s->rgot);
    *moved |= s->rgot != before;
    if (rc != 1)
        return rc;
    *out = gc_wire_unpack(s->rbody, s->rlen, &s->c->err);
    s->rbody = NULL;
    s->rhdr_got = 0;
    return *out ? GC_OK : GC_E_PROTOCOL;
}

/* Check the frame is an answer to this stream; id 0 is the daemon closing the connection. */
static int check_owner(gpucomp_stream *s, const Gpucomp__Frame *f)
{
    gc_error *err = &s->c->err;
    if (f->body_case != GPUCOMP__FRAME__BODY_RESPONSE)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd sent a %s frame where a Response was expected",
                       client_frame_kind(f));
    const Gpucomp__Response *r = f->response;
    if (r->id == 0) {
        int code = r->status == GPUCOMP__STATUS__STATUS_OK ? GC_E_PROTOCOL : client_wire_status(r->status);
        return gc_fail(err, code, "gpucompd closed the connection: %s",
                       r->message && *r->message ? r->message : gc_status_str(code));
    }
    if (r->id != s->id)
        return gc_fail(err, GC_E_PROTOCOL,
                       "gpucompd answered request id %llu, but the only stream in flight is %llu",
                       (unsigned long long)r->id, (unsigned long long)s->id);
    return GC_OK;
}

/* `consumed` never decreases and never passes what was sent. */
static int check_consumed(gpucomp_stream *s, const Gpucomp__Response *r)
{
    if (r->consumed < s->consumed || (r->consumed > s->sent && !s->file))
        return gc_fail(&s->c->err, GC_E_PROTOCOL,
                       "gpucompd said it consumed %llu bytes of the stream (before: %llu, sent: %llu)",
                       (unsigned long long)r->consumed, (unsigned long long)s->consumed,
                       (unsigned long long)s->sent);
    s->consumed = r->consumed;
    return GC_OK;
}

/* The final frame: the stream's status, and its totals checked against what came. */
static int take_final(gpucomp_stream *s, const Gpucomp__Response *r)
{
    s->final = true;
    if (r->status != GPUCOMP__STATUS__STATUS_OK) {
        s->status = client_wire_status(r->status);
        return gc_fail(&s->c->err, s->status, "%s",
                       r->message && *r->message ? r->message : gc_status_str(s->status));
    }
    if (s->file_out)
        s->received = s->delivered = r->total_size; /* in the output file */
    if (s->file)
        s->sent = r->consumed;
    if (r->total_size != s->received)
        return gc_fail(&s->c->err, GC_E_PROTOCOL,
                       "gpucompd ended the stream at %llu bytes of output, but sent %llu",
                       (unsigned long long)r->total_size, (unsigned long long)s->received);
    s->trailing_garbage = r->trailing_garbage;
    s->garbage_offset = r->garbage_offset;
    s->backend = r->backend == GPUCOMP__BACKEND__BACKEND_CPU || r->backend == GPUCOMP__BACKEND__BACKEND_GPU
                     ? (gpucomp_backend)r->backend
                     : GPUCOMP_BACKEND_UNKNOWN;
    s->c->last_backend = s->backend;
    s->c->last_engine_ns = r->engine_ns;
    return GC_OK;
}

/*
 * Output named in the ring must begin where the last ended, stay inside
 * the ring, and leave alone what the caller has not taken (the daemon may
 * write only up to the credit we returned plus the ring's size).
 */
static int check_ring_output(gpucomp_stream *s, const Gpucomp__Response *r)
{
    if (!r->ring_offset && !r->ring_length)
        return GC_OK;
    uint64_t size = s->oring_size, at = s->oring ? s->received % size : 0;
    if (!s->oring || r->ring_offset != at || r->ring_length > size - at ||
        s->received + r->ring_length > s->credit_sent + size)
        return gc_fail(&s->c->err, GC_E_PROTOCOL,
                       "gpucompd named %llu output bytes at offset %llu of a %llu-byte output ring (next byte at "
                       "%llu, %llu bytes free)",
                       (unsigned long long)r->ring_length, (unsigned long long)r->ring_offset,
                       (unsigned long long)size, (unsigned long long)at,
                       (unsigned long long)(s->oring ? s->credit_sent + size - s->received : 0));
    return GC_OK;
}

/*
 * Validate a frame of this stream and take its counters. An error frame is
 * accepted without stream = true: a daemon may refuse the opening frame
 * before it knows it is a stream.
 */
static int take_frame(gpucomp_stream *s, const Gpucomp__Response *r)
{
    gc_error *err = &s->c->err;
    if (r->status != GPUCOMP__STATUS__STATUS_OK && !r->last)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd sent an error in the middle of a stream");
    if (r->status != GPUCOMP__STATUS__STATUS_OK)
        return take_final(s, r);
    if (!r->stream || r->payload_in_fd)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd answered a stream with a non-stream Response");
    if ((s->file_out || s->oring) && r->payload.len)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd sent output in frames for a stream that writes a %s",
                       s->oring ? "ring" : "file");
    int rc = check_consumed(s, r);
    if (rc == GC_OK)
        rc = check_ring_output(s, r);
    if (rc != GC_OK)
        return rc;
    s->received += r->payload.len + r->ring_length;
    if (s->max_output && s->received > s->max_output)
        return gc_fail(err, GC_E_LIMIT, "the stream's output passed the limit of %llu bytes",
                       (unsigned long long)s->max_output);
    return r->last ? take_final(s, r) : GC_OK;
}

/* Output received and not yet handed out: a held frame's payload, or bytes in the output ring. */
static bool has_output(const gpucomp_stream *s)
{
    return s->held || s->received > s->delivered;
}

/* Read and take at most one frame (only while none is held: one frame's payload at a time). */
static int try_read(gpucomp_stream *s, bool *moved)
{
    if (has_output(s) || s->final) /* the ring's bytes before an error frame are handed out first */
        return GC_OK;
    Gpucomp__Frame *f;
    int rc = try_read_frame(s, &f, moved);
    if (rc != GC_OK || !f)
        return rc;
    rc = check_owner(s, f);
    if (rc == GC_OK)
        rc = take_frame(s, f->response);
    if (rc == GC_OK && f->response->payload.len) {
        s->held = f;
        s->held_pos = 0;
    } else {
        gc_wire_free(f); /* nothing to hand out of it (an output ring's output is in the ring) */
    }
    return rc;
}

static size_t held_left(const gpucomp_stream *s)
{
    return s->held ? s->held->response->payload.len - s->held_pos : 0;
}

/* The output ring's next bytes to hand out, up to its end: *len of them. */
static const uint8_t *ring_output(const gpucomp_stream *s, size_t *len)
{
    uint64_t left = s->oring ? s->received - s->delivered : 0;
    size_t at = left ? (size_t)(s->delivered % s->oring_size) : 0;
    *len = left < s->oring_size - at ? (size_t)left : s->oring_size - at;
    return left ? s->oring + at : NULL;
}

/* Copy the output ring's bytes into out (at most two pieces: the ring wraps). */
static void deliver_ring(gpucomp_stream *s, gpucomp_outbuf *out, bool *moved)
{
    size_t n;
    const uint8_t *p;
    while ((p = ring_output(s, &n)) && out->pos < out->size) {
        n = n < out->size - out->pos ? n : out->size - out->pos;
        memcpy((uint8_t *)out->dst + out->pos, p, n);
        out->pos += n;
        s->delivered += n;
        *moved = true;
    }
}

/* Hand the held frame's payload out; drop the frame once it is all out. */
static void deliver(gpucomp_stream *s, gpucomp_outbuf *out, bool *moved)
{
    if (s->oring) {
        deliver_ring(s, out, moved);
        return;
    }
    size_t n = held_left(s);
    size_t room = out->size - out->pos;
    n = n < room ? n : room;
    if (n) {
        memcpy((uint8_t *)out->dst + out->pos, s->held->response->payload.data + s->held_pos, n);
        out->pos += n;
        s->held_pos += n;
        s->delivered += n;
        *moved = true;
    }
    if (s->held && held_left(s) == 0) {
        gc_wire_free(s->held);
        s->held = NULL;
    }
}

/* ---- waiting ----------------------------------------------------------- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Wait until the socket can do one of events or deadline_ms (0: none)
 * passes. POLLERR/POLLHUP wake us too: the next send/recv says what failed.
 */
static int wait_socket(gpucomp_stream *s, short events, uint64_t deadline_ms)
{
    struct pollfd p = { .fd = s->c->fd, .events = events };
    for (;;) {
        int ms = -1;
        if (deadline_ms) {
            uint64_t now = now_ms();
            ms = now >= deadline_ms ? 0 : (int)(deadline_ms - now);
        }
        int n = poll(&p, 1, ms);
        if (n > 0)
            return GC_OK;
        if (n == 0)
            return gc_fail(&s->c->err, GC_E_IO, "timed out: gpucompd neither sent nor took anything for %u ms",
                           s->c->timeout_ms ? s->c->timeout_ms : FREE_DRAIN_MS);
        if (errno != EINTR)
            return gc_fail(&s->c->err, GC_E_IO, "waiting on the gpucompd socket: %s", strerror(errno));
    }
}

/* ---- the stream's life --------------------------------------------------- */

/* The opening frame: op, codec, options, stream = true, no payload; a file stream's descriptors (-1: none). */
static int send_open(gpucomp_stream *s, gpucomp_direction dir, const gpucomp_options *o, const int fds[2])
{
    Gpucomp__CodecOptions wire = GPUCOMP__CODEC_OPTIONS__INIT;
    int rc = client_wire_options(o, &wire, &s->c->err);
    if (rc != GC_OK)
        return rc;
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = s->id;
    r.op = dir == GPUCOMP_DECOMPRESS ? GPUCOMP__OP__OP_DECOMPRESS : GPUCOMP__OP__OP_COMPRESS;
    r.codec = (Gpucomp__Codec)o->codec;
    r.options = &wire;
    r.stream = true;
    r.max_output = s->max_output;
    r.input_fd = fds[0] >= 0;
    r.output_fd = fds[1] >= 0;
    r.last = r.input_fd; /* a file stream is all in its first frame */
    r.ring = s->ring != NULL;
    r.output_ring = s->oring != NULL;
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = &r;
    /* the input's descriptor first (a file or the ring), then the output's (a file or the output ring) */
    int pass[3];
    unsigned n = 0;
    if (r.input_fd)
        pass[n++] = fds[0];
    if (r.output_fd)
        pass[n++] = fds[1];
    if (r.ring)
        pass[n++] = s->ring_fd;
    if (r.output_ring)
        pass[n++] = s->oring_fd;
    /* Small, and the daemon reads it at once: a plain blocking send is enough. */
    if (n)
        return client_io_send_frame_fds(s->c->fd, &f, s->c->max_frame, pass, n, &s->c->err);
    return client_io_send_frame(s->c->fd, &f, s->c->max_frame, false, &s->c->err);
}

static int open_stream(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const int fds[2],
                       gpucomp_stream **out);

/* The largest ring we make: a daemon announcing a larger window gets frames. */
#define RING_MOST ((uint64_t)256 << 20)

/*
 * A ring of twice stream_window bytes, when the daemon takes rings: a part
 * is cut only once its input and a little more are there, so with a ring of
 * one window the next part's input could not start arriving until the
 * daemon had read the last one out, and parts went one at a time. Without
 * one (no memfd, no memory) the stream sends its input in frames, as to a
 * daemon that takes none.
 */
static void make_ring(gpucomp_stream *s)
{
    uint64_t size = s->c->stream_window <= RING_MOST / 2 ? 2 * s->c->stream_window : s->c->stream_window;
    s->ring_fd = -1;
    if (!s->c->stream_rings || s->file || size == 0 || size > RING_MOST)
        return;
    int fd = gc_memfd_create("gpucomp-ring");
    if (fd < 0)
        return;
    void *p =
        ftruncate(fd, (off_t)size) == 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        close(fd);
        return;
    }
    s->ring_fd = fd;
    s->ring = p;
    s->ring_size = (size_t)size;
}

static void drop_ring(gpucomp_stream *s)
{
    if (s->ring)
        munmap(s->ring, s->ring_size);
    if (s->ring_fd >= 0)
        close(s->ring_fd);
    s->ring = NULL;
    s->ring_fd = -1;
}

/*
 * The output ring's size: the daemon's writes run this far ahead of the
 * caller, several pieces at once, which is plenty to keep a pipe full; more
 * would only add to the memory a stream maps (its input ring is larger).
 */
#define ORING_SIZE ((uint64_t)32 << 20)

/*
 * An output ring, when the daemon writes into rings and the output is not a
 * file it writes itself. Without one the output comes in frames.
 */
static void make_oring(gpucomp_stream *s)
{
    uint64_t size = ORING_SIZE;
    s->oring_fd = -1;
    if (!s->c->stream_output_rings || s->file_out || size == 0 || size > RING_MOST)
        return;
    int fd = gc_memfd_create("gpucomp-output-ring");
    if (fd < 0)
        return;
    void *p = ftruncate(fd, (off_t)size) == 0 ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        close(fd);
        return;
    }
    s->oring_fd = fd;
    s->oring = p;
    s->oring_size = (size_t)size;
}

static void drop_oring(gpucomp_stream *s)
{
    if (s->oring)
        munmap((void *)(uintptr_t)s->oring, s->oring_size);
    if (s->oring_fd >= 0)
        close(s->oring_fd);
    s->oring = NULL;
    s->oring_fd = -1;
}

int gpucomp_stream_open(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, gpucomp_stream **out)
{
    const int none[2] = { -1, -1 };
    return open_stream(c, dir, o, none, out);
}

int client_stream_open_file(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, int in_fd,
                            int out_fd, gpucomp_stream **out)
{
    const int fds[2] = { in_fd, out_fd };
    return open_stream(c, dir, o, fds, out);
}

/* The checks every stream's opening makes; GC_OK to go on. */
static int check_open(gpucomp_client *c, gpucomp_direction dir, gpucomp_stream **out)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    if (!out)
        return gc_fail(&c->err, GC_E_INVALID, "gpucomp_stream_open: out is NULL");
    *out = NULL;
    gc_error_clear(&c->err);
    if (dir != GPUCOMP_COMPRESS && dir != GPUCOMP_DECOMPRESS)
        return gc_fail(&c->err, GC_E_INVALID, "unknown direction %d", (int)dir);
    return client_check_idle(c);
}

/* A stream of c in direction dir, nothing else set; NULL (c->err) when out of memory. */
static gpucomp_stream *new_stream(gpucomp_client *c, gpucomp_direction dir)
{
    gpucomp_stream *s = calloc(1, sizeof *s);
    if (!s) {
        gc_fail(&c->err, GC_E_NOMEM, "cannot allocate a stream");
        return NULL;
    }
    s->c = c;
    s->decompress = dir == GPUCOMP_DECOMPRESS;
    s->ring_fd = s->oring_fd = -1;
    return s;
}

/* o, or (NULL) bzip2 level 9 in *defaults. */
static const gpucomp_options *or_defaults(const gpucomp_options *o, gpucomp_options *defaults)
{
    if (o)
        return o;
    gpucomp_options_init(defaults, GPUCOMP_CODEC_BZIP2);
    return defaults;
}

static int open_local(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, gpucomp_stream **out)
{
    gpucomp_options defaults;
    gpucomp_stream *s = new_stream(c, dir);
    if (!s)
        return GC_E_NOMEM;
    int rc = client_local_stream_open(s->decompress, or_defaults(o, &defaults), &s->local, &c->err);
    if (rc != GC_OK) {
        free(s);
        return rc;
    }
    s->ring_fd = -1;
    s->backend = GPUCOMP_BACKEND_LOCAL;
    c->stream = s;
    *out = s;
    return GC_OK;
}

int client_stream_open_local(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o,
                             gpucomp_stream **out)
{
    int rc = check_open(c, dir, out);
    return rc == GC_OK ? open_local(c, dir, o, out) : rc;
}

static int open_remote(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const int fds[2],
                       gpucomp_stream **out);

/*
 * Through the daemon; in this process on a client that has none, or, with
 * fallback, when the daemon cannot take the stream (a file stream's caller,
 * client_file.c, decides that itself).
 */
static int open_stream(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const int fds[2],
                       gpucomp_stream **out)
{
    int rc = check_open(c, dir, out);
    if (rc != GC_OK)
        return rc;
    bool file = fds[0] >= 0;
    if (c->local_only && !file)
        return open_local(c, dir, o, out);
    rc = open_remote(c, dir, o, fds, out);
    if (rc != GC_OK && c->fallback && !file && client_daemon_unavailable(rc))
        return open_local(c, dir, o, out);
    return rc;
}

static int open_remote(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const int fds[2],
                       gpucomp_stream **out)
{
    if (c->fd < 0)
        return gc_fail(&c->err, GC_E_IO,
                       "the connection to gpucompd was closed after an earlier error; connect again");
    if (c->stream_window == 0)
        return gc_fail(&c->err, GC_E_UNSUPPORTED, "gpucompd %s has no streams (it announced no stream window)",
                       *c->server_version ? c->server_version : "(version unknown)");
    gpucomp_options defaults;
    o = or_defaults(o, &defaults);
    gpucomp_stream *s = new_stream(c, dir);
    if (!s)
        return GC_E_NOMEM;
    s->max_output = s->decompress ? o->max_output : 0;
    s->id = client_take_id(c);
    s->file = fds[0] >= 0;
    s->file_out = fds[1] >= 0;
    s->last_sent = s->ended = s->file;
    make_ring(s);
    make_oring(s);
    int rc = send_open(s, dir, o, fds);
    if (rc != GC_OK) {
        if (rc == GC_E_IO)
            client_disconnect(c);
        drop_ring(s);
        drop_oring(s);
        free(s);
        return rc;
    }
    c->stream = s;
    *out = s;
    return GPUCOMP_OK;
}

/* Finish writing the frame in wbuf, waiting for the socket as needed (the daemon reads a stream's frames). */
static int write_out(gpucomp_stream *s)
{
    uint64_t deadline = now_ms() + (s->c->timeout_ms ? s->c->timeout_ms : FREE_DRAIN_MS);
    bool moved = false;
    int rc = try_write(s, &moved);
    while (rc == GC_OK && writing(s)) {
        rc = wait_socket(s, POLLOUT, deadline);
        if (rc == GC_OK)
            rc = try_write(s, &moved);
    }
    return rc;
}

/*
 * The daemon ended the stream before our last frame (an error, or trailing
 * garbage): it drops the stream's frames until our last frame or a cancel,
 * so finish the frame on the wire and send OP_CANCEL.
 */
static int cancel_now(gpucomp_stream *s)
{
    int rc = write_out(s);
    if (rc == GC_OK && id_open(s)) {
        rc = pack_cancel(s);
        if (rc == GC_OK)
            rc = write_out(s);
    }
    return rc;
}

/*
 * The stream failed, on our side or the daemon's. A daemon error leaves the
 * connection at a frame boundary (once our frame is out and the stream is
 * cancelled); anything else leaves it in a state that cannot be trusted.
 */
static int fail_stream(gpucomp_stream *s, int rc)
{
    gc_error why = s->c->err;
    bool daemon_said = s->final && s->status == rc && rc != GC_OK;
    s->status = rc;
    s->final = true;
    if (!daemon_said || (s->c->fd >= 0 && cancel_now(s) != GC_OK))
        client_disconnect(s->c);
    s->c->err = why;
    return rc;
}

/*
 * Is what op asked for done? Nothing held, and END: the final frame came.
 * FLUSH: every input byte given so far went out (the last frame with the
 * flush mark) and the daemon says it has taken them all into parts; the
 * call then hands out whatever output has arrived and returns. The protocol
 * has no "flush done" answer, so output the daemon is still producing for
 * those parts can arrive after FLUSH reports 0 pending: that is all
 * GPUCOMP_FLUSH guarantees here (gpucomp.h promises a little more).
 */
static bool op_done(const gpucomp_stream *s, const gpucomp_inbuf *in, gpucomp_end_op op)
{
    if (has_output(s) || in->pos < in->size)
        return s->final && !has_output(s); /* a stream that ended takes no more input */
    if (op == GPUCOMP_END)
        return s->final;
    if (op == GPUCOMP_FLUSH)
        return s->final || (!writing(s) && s->consumed == s->sent);
    return true;
}

static size_t pending_of(const gpucomp_stream *s, const gpucomp_inbuf *in, gpucomp_end_op op)
{
    if (op_done(s, in, op))
        return 0;
    size_t n = held_left(s);
    return n ? n : 1;
}

/* One round of non-blocking work: hand out, pack, write, read, hand out. */
static int step(gpucomp_stream *s, gpucomp_inbuf *in, gpucomp_outbuf *out, gpucomp_end_op op, bool *moved)
{
    deliver(s, out, moved);
    int rc = pack_next(s, in, op);
    if (rc == GC_OK)
        rc = try_write(s, moved);
    if (rc == GC_OK && !writing(s))
        rc = pack_next(s, in, op);
    if (rc == GC_OK)
        rc = try_write(s, moved);
    if (rc == GC_OK)
        rc = try_read(s, moved);
    deliver(s, out, moved);
    return rc;
}

/* What to wait for; 0 when waiting cannot help (the caller must drain out first). */
static short wait_events(const gpucomp_stream *s, const gpucomp_outbuf *out)
{
    short ev = 0;
    if (writing(s))
        ev |= POLLOUT;
    if (!s->held && !s->final)
        ev |= POLLIN;
    if (has_output(s) && out->pos == out->size)
        return 0; /* never wait with output the caller has not taken: the daemon may be waiting on it */
    return ev;
}

static bool should_return(const gpucomp_stream *s, const gpucomp_inbuf *in, const gpucomp_outbuf *out,
                          gpucomp_end_op op, bool moved)
{
    if (op_done(s, in, op))
        return op != GPUCOMP_FLUSH || !moved || s->final; /* FLUSH: then take what is readable now */
    if (op == GPUCOMP_CONTINUE && in->pos == in->size)
        return true;
    return wait_events(s, out) == 0;
}

static int run(gpucomp_stream *s, gpucomp_inbuf *in, gpucomp_outbuf *out, gpucomp_end_op op)
{
    for (;;) {
        bool moved = false;
        int rc = step(s, in, out, op, &moved);
        if (rc != GC_OK)
            return fail_stream(s, rc);
        if (s->final && !s->held && id_open(s) && cancel_now(s) != GC_OK)
            return fail_stream(s, s->c->err.code);
        if (s->final && !s->held)
            in->pos = in->size; /* a complete stream ignores the rest (trailing garbage) */
        if (should_return(s, in, out, op, moved))
            return GC_OK;
        if (moved)
            continue; /* try again before sleeping: the other direction may be ready too */
        uint64_t deadline = s->c->timeout_ms ? now_ms() + s->c->timeout_ms : 0;
        rc = wait_socket(s, wait_events(s, out), deadline);
        if (rc != GC_OK) {
            client_disconnect(s->c);
            return fail_stream(s, rc);
        }
    }
}

/* A local stream's run: its status and end kept here as a daemon stream's are. */
static int run_local(gpucomp_stream *s, gpucomp_inbuf *in, gpucomp_outbuf *out, gpucomp_end_op op, size_t *pending)
{
    size_t left = 0;
    int rc = client_local_stream_run(s->local, in, out, op, &left, &s->c->err);
    if (rc != GC_OK) {
        s->status = rc;
        s->final = true;
        return rc;
    }
    if (op == GPUCOMP_END && in->pos == in->size)
        s->ended = true;
    s->final = op == GPUCOMP_END && left == 0;
    if (s->final) {
        s->c->last_backend = GPUCOMP_BACKEND_LOCAL;
        s->c->last_engine_ns = 0;
    }
    if (pending)
        *pending = left;
    return GC_OK;
}

int gpucomp_stream_run(gpucomp_stream *s, gpucomp_inbuf *in, gpucomp_outbuf *out, gpucomp_end_op op,
                       size_t *pending)
{
    if (pending)
        *pending = 0;
    if (!s)
        return GPUCOMP_E_INVALID;
    gc_error *err = &s->c->err;
    if (!in || !out || in->pos > in->size || out->pos > out->size || (!in->src && in->size) ||
        (!out->dst && out->size) || op < GPUCOMP_CONTINUE || op > GPUCOMP_END)
        return gc_fail(err, GC_E_INVALID, "gpucomp_stream_run: invalid buffer or end op");
    if (s->status != GC_OK)
        return s->status; /* the stream ended with an error; c->err still says why */
    if (!ring_input_ok(s, in))
        return gc_fail(err, GC_E_INVALID,
                       "gpucomp_stream_run: input inside the stream's ring other than what "
                       "gpucomp_stream_input_space offered");
    if (s->ended && (op != GPUCOMP_END || in->pos < in->size) && !s->final)
        return gc_fail(err, GC_E_INVALID, "gpucomp_stream_run: input after GPUCOMP_END");
    if (s->local)
        return run_local(s, in, out, op, pending);
    if (s->c->fd < 0)
        return fail_stream(s, gc_fail(err, GC_E_IO, "the connection to gpucompd is closed"));
    int rc = run(s, in, out, op);
    if (rc == GC_OK && op == GPUCOMP_END && in->pos == in->size)
        s->ended = true;
    if (rc == GC_OK && pending)
        *pending = pending_of(s, in, op);
    return rc;
}

uint64_t gpucomp_stream_bytes_in(const gpucomp_stream *s)
{
    return !s ? 0 : s->local ? client_local_stream_bytes_in(s->local) : s->sent;
}

uint64_t gpucomp_stream_bytes_out(const gpucomp_stream *s)
{
    return !s ? 0 : s->local ? client_local_stream_bytes_out(s->local) : s->delivered;
}

int gpucomp_stream_trailing_garbage(const gpucomp_stream *s, uint64_t *offset)
{
    if (s && s->local)
        return client_local_stream_trailing_garbage(s->local, offset);
    bool yes = s && s->final && s->status == GC_OK && s->trailing_garbage;
    if (offset)
        *offset = yes ? s->garbage_offset : 0;
    return yes;
}

/*
 * The output already received, in place: the output ring's next bytes (to
 * its end), or the held frame's payload. Writing them out of there is the
 * copy gpucomp_stream_run's output buffer would cost.
 */
const void *gpucomp_stream_output_view(gpucomp_stream *s, size_t *len)
{
    size_t n = 0;
    const uint8_t *p = NULL;
    if (s && !s->local && s->oring) {
        p = ring_output(s, &n);
    } else if (s && !s->local && s->held) {
        n = held_left(s);
        p = s->held->response->payload.data + s->held_pos;
    }
    if (len)
        *len = n;
    return n ? p : NULL;
}

int gpucomp_stream_output_release(gpucomp_stream *s, size_t n)
{
    size_t have = 0;
    if (!s)
        return GPUCOMP_E_INVALID;
    gpucomp_stream_output_view(s, &have);
    if (n > have)
        return gc_fail(&s->c->err, GC_E_INVALID,
                       "gpucomp_stream_output_release: %zu bytes, but the view holds %zu", n, have);
    s->delivered += n;
    if (!s->oring && s->held) {
        s->held_pos += n;
        if (held_left(s) == 0) {
            gc_wire_free(s->held);
            s->held = NULL;
        }
    }
    return GPUCOMP_OK;
}

gpucomp_backend gpucomp_stream_backend(const gpucomp_stream *s)
{
    return s ? s->backend : GPUCOMP_BACKEND_UNKNOWN;
}

/*
 * An unfinished stream: finish the frame being written, cancel the stream,
 * and read (and drop) its frames until the final one, so that the
 * connection is back at a boundary for the next call. Bounded in time.
 */
static int cancel_and_drain(gpucomp_stream *s)
{
    unsigned ms = s->c->timeout_ms ? s->c->timeout_ms : FREE_DRAIN_MS;
    uint64_t deadline = now_ms() + ms;
    s->max_output = 0; /* dropped output counts for nothing */
    int rc = GC_OK;
    while (rc == GC_OK && (id_open(s) || writing(s) || !s->final)) {
        bool moved = false;
        if (!writing(s) && id_open(s))
            rc = pack_cancel(s);
        if (rc == GC_OK)
            rc = try_write(s, &moved);
        if (rc == GC_OK)
            rc = try_read(s, &moved);
        /* The final frame's error (CANCELLED, or the stream's own) is the end we wait for. */
        if (rc != GC_OK && s->final && s->status == rc)
            rc = GC_OK;
        if (s->held) { /* dropped, not delivered */
            gc_wire_free(s->held);
            s->held = NULL;
            moved = true;
        }
        s->delivered = s->received; /* an output ring's too */
        short ev = (short)((writing(s) ? POLLOUT : 0) | (s->final ? 0 : POLLIN));
        if (rc == GC_OK && !moved && ev)
            rc = wait_socket(s, ev, deadline);
    }
    return rc;
}

void gpucomp_stream_free(gpucomp_stream *s)
{
    if (!s)
        return;
    gpucomp_client *c = s->c;
    bool unfinished = id_open(s) || !s->final || writing(s) || s->rbody || s->rhdr_got;
    if (s->local) { /* nothing to cancel: it runs only inside gpucomp_stream_run */
        client_local_stream_free(s->local);
    } else if (c->fd >= 0 && unfinished) {
        gc_error keep = c->err;
        if (cancel_and_drain(s) != GC_OK)
            client_disconnect(c);
        c->err = keep;
    }
    gc_wire_free(s->held);
    free(s->rbuf);
    free(s->wbuf);
    drop_ring(s);
    drop_oring(s);
    if (c->stream == s)
        c->stream = NULL;
    free(s);
}
