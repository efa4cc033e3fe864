/* conn.c - one client connection (see conn.h). */
#include "conn.h"

#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "assembly.h"
#include "budget.h"
#include "dispatch.h"
#include "fd_map_cache.h"
#include "gc_clock.h"
#include "fdpass.h"
#include "io_pool.h"
#include "log.h"
#include "response.h"
#include "stats.h"
#include "stream.h"
#include "wire.h"

/* Stop reading from a client with this many requests at the workers and lanes. */
#define MAX_IN_FLIGHT 256
/* Bytes taken off the socket per read: large enough for 16 MiB frames in few calls. */
#define READ_BYTES (1u << 20)
/* The send queue asked of the kernel for each connection. */
#define SOCKET_SEND_BUFFER (4 << 20)
/* Streams held back by unread answers go on once they drain to this (conn.h, stream.h). */
#define OUTPUT_LOW_WATER (16u << 20)
/* A closing connection whose client does not read its last answers is dropped after this. */
#define CLOSING_GRACE_NS (5ull * 1000000000u)

static void close_after_flush(gcd_conn *c);
static void unlink_waiter(gcd_conn *c);
static bool take_id(gcd_conn *c, uint64_t id);
static void refuse_id(gcd_conn *c, uint64_t id);

/* A closed connection's mappings, unmapped on an I/O thread (fd_map_cache.h). */
typedef struct unmap_task {
    gcd_io_task t;
    gcd_fd_map *maps;
} unmap_task;

static void unmap_work(gcd_io_task *t)
{
    unmap_task *u = t->ctx;
    gcd_fd_map_unmap_dropped(u->maps);
    u->maps = NULL;
}

static void unmap_done(gcd_io_task *t)
{
    unmap_task *u = t->ctx;
    gcd_fd_map_unmap_dropped(u->maps); /* the pool stopped before it ran */
    free(u);
}

static void unmap_off_loop(gcd_server *s, gcd_fd_map *maps)
{
    unmap_task *u = maps && s->io ? calloc(1, sizeof *u) : NULL;
    if (!u) {
        gcd_fd_map_unmap_dropped(maps);
        return;
    }
    u->maps = maps;
    u->t = (gcd_io_task){ .fd = -1, .work = unmap_work, .done = unmap_done, .ctx = u };
    gcd_io_pool_submit(s->io, &u->t);
}

static void conn_free_if_idle(gcd_conn *c)
{
    if (c->state == GCD_CONN_CLOSED && c->in_flight == 0 && c->streams.io == 0) {
        /* Mappings and registrations end here, not at close: a registration
         * still running when the connection closed is in the cache only now. */
        unmap_off_loop(c->server, gcd_fd_map_cache_drop_owner(c));
        free(c);
    }
}

/* ---- requests --------------------------------------------------------- */

/* Take the first n queued descriptors off the queue (their owner closes or keeps them). */
static void dequeue_fds(gcd_conn *c, unsigned n)
{
    c->n_fds -= n;
    memmove(c->fds, c->fds + n, c->n_fds * sizeof c->fds[0]);
    memmove(c->fd_owner, c->fd_owner + n, c->n_fds * sizeof c->fd_owner[0]);
}

/* Close the queued descriptors of frames before the one being handled: no frame claimed them. */
static void drop_stale_fds(gcd_conn *c)
{
    unsigned n = 0;
    while (n < c->n_fds && c->fd_owner[n] < c->frame_pos)
        close(c->fds[n++]);
    dequeue_fds(c, n);
}

/*
 * Take the descriptors that came with the frame being handled off the queue
 * at once, whatever becomes of the request: left behind, they would be
 * handed to the connection's next fd request, which would then read another
 * request's data. Only the frame's own: a frame naming descriptors it did
 * not carry gets -1 for them, never a later frame's. -1 where fewer arrived.
 */
static void claim_fds(gcd_conn *c, int fds[2], unsigned want)
{
    drop_stale_fds(c);
    unsigned n = 0;
    while (n < c->n_fds && n < want && c->fd_owner[n] == c->frame_pos)
        n++;
    fds[0] = n > 0 ? c->fds[0] : -1;
    fds[1] = n > 1 ? c->fds[1] : -1;
    for (unsigned i = 2; i < n; i++) /* a frame names at most two that it can use */
        close(c->fds[i]);
    dequeue_fds(c, n);
}

static void close_fds(const int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* A refused request is answered with its error and counted as failed. */
static void send_refusal(gcd_conn *c, uint64_t id, const gc_error *err)
{
    gcd_send_error(&c->out, id, err->code, "%s", err->msg);
    c->server->counters.requests_failed++;
}

/* A frame of a request (not a stream's): assembly.h decides, the connection answers. */
static void assemble(gcd_conn *c, const Gpucomp__Request *m)
{
    int fds[2];
    claim_fds(c, fds, gcd_assembly_fds_carried(m));
    gcd_request *done = NULL;
    gc_error err = { 0 };
    switch (gcd_assembly_frame(&c->assembly, m, fds, c->streams.n, &done, &err)) {
    case GCD_ASSEMBLY_TAKEN: break;
    case GCD_ASSEMBLY_COMPLETE: gcd_conn_submit(c, done); break;
    case GCD_ASSEMBLY_REFUSED: send_refusal(c, m->id, &err); break;
    case GCD_ASSEMBLY_NO_MEMORY: gcd_send_error(&c->out, m->id, GC_E_NOMEM, "out of memory"); break;
    case GCD_ASSEMBLY_PING: gcd_send_pong(&c->out, m->id); break;
    case GCD_ASSEMBLY_STATS: gcd_send_stats(&c->out, m->id, c->server); break;
    case GCD_ASSEMBLY_FULL: refuse_id(c, m->id); break;
    }
}

void gcd_conn_submit(gcd_conn *c, gcd_request *r)
{
    r->flight_prev = NULL;
    r->flight_next = c->flight;
    if (c->flight)
        c->flight->flight_prev = r;
    c->flight = r;
    c->in_flight++;
    c->server->requests_in_flight++;
    gcd_dispatch_submit(c->server, r);
}

static void unlink_flight(gcd_conn *c, gcd_request *r)
{
    if (r->flight_prev)
        r->flight_prev->flight_next = r->flight_next;
    else
        c->flight = r->flight_next;
    if (r->flight_next)
        r->flight_next->flight_prev = r->flight_prev;
    r->flight_prev = r->flight_next = NULL;
}

static void queue_waiter(gcd_conn *c)
{
    gcd_server *s = c->server;
    c->waiting_budget = true;
    c->wait_next = NULL;
    c->wait_prev = s->wait_tail;
    if (s->wait_tail)
        s->wait_tail->wait_next = c;
    else
        s->wait_head = c;
    s->wait_tail = c;
    if (!c->wait_since_ns)
        c->wait_since_ns = gc_now_ns();
}

/*
 * A socket request's input is charged when its first frame arrives. When
 * it does not fit now, the connection waits (its frame stays unread) until
 * memory is released; other connections go on. It does not wait where the
 * memory it waits for may be its own (assembly.h), nor past
 * request-timeout (gcd_conn_sweep sets wait_expired): then admit tries the
 * charge once and refuses the request with LIMIT if it still does not fit.
 * Returns false to wait (docs/SECURITY.md, "No wait without an end").
 */
static bool budget_admits(gcd_conn *c, const Gpucomp__Request *m)
{
    bool expired = c->wait_expired; /* only the frame that waited */
    c->wait_expired = false;
    if (!gcd_assembly_must_wait(&c->assembly, m, gcd_stream_find(&c->streams, m->id) != NULL, expired,
                                gcd_stream_awaits_input(&c->streams)))
        return true;
    queue_waiter(c);
    return false;
}

static void unlink_waiter(gcd_conn *c)
{
    gcd_server *s = c->server;
    if (c->wait_prev)
        c->wait_prev->wait_next = c->wait_next;
    else
        s->wait_head = c->wait_next;
    if (c->wait_next)
        c->wait_next->wait_prev = c->wait_prev;
    else
        s->wait_tail = c->wait_prev;
    c->wait_prev = c->wait_next = NULL;
    c->waiting_budget = false;
}

/* A payload_in_fd frame that starts no request still consumes its descriptors (docs/PROTOCOL.md). */
static void discard_fds(gcd_conn *c, const Gpucomp__Request *m)
{
    int fds[2];
    claim_fds(c, fds, gcd_assembly_fds_carried(m));
    close_fds(fds);
}

/*
 * OP_CANCEL: a request still arriving is answered CANCELLED at once; one at
 * the engines stops at its next block or chunk and is answered CANCELLED
 * when it comes back (or with its result, if it finished first); a stream
 * ends. An id that names nothing (answered already) is ignored.
 */
static void cancel_request(gcd_conn *c, uint64_t id)
{
    gcd_stream *st = gcd_stream_find(&c->streams, id);
    if (st) {
        gcd_stream_cancel(st);
        return;
    }
    gc_error err = { 0 };
    if (gcd_assembly_cancel(&c->assembly, id, &err)) {
        if (err.code != GC_OK)
            send_refusal(c, id, &err);
        return;
    }
    for (gcd_request *r = c->flight; r; r = r->flight_next)
        if (r->id == id && !r->stream) {
            r->client_cancelled = true;
            atomic_store_explicit(&r->cancelled, true, memory_order_relaxed);
            return;
        }
}

static void handle_request(gcd_conn *c, const Gpucomp__Request *m)
{
    if (m->id == 0) {
        discard_fds(c, m);
        gcd_send_error(&c->out, 0, GC_E_PROTOCOL, "request id 0 is reserved");
        return;
    }
    if (m->op == GPUCOMP__OP__OP_CANCEL) {
        discard_fds(c, m);
        cancel_request(c, m->id);
        return;
    }
    gcd_stream *st = gcd_stream_find(&c->streams, m->id);
    if (st || (m->stream && !gcd_assembly_has(&c->assembly, m->id))) {
        int fds[2];
        claim_fds(c, fds, gcd_assembly_fds_carried(m));
        if (st) {
            close_fds(fds); /* only a stream's first frame carries descriptors */
            gcd_stream_frame(st, m);
        } else if (take_id(c, m->id)) {
            gcd_stream_open(&c->streams, m, fds);
        } else {
            close_fds(fds);
        }
        return;
    }
    assemble(c, m);
}

/* ---- frames in -------------------------------------------------------- */

/*
 * Whether c may hold one more id (a request or stream starting); if not, id
 * is answered LIMIT and the connection closes (refuse_id). Refused requests
 * stay as tombstones and answered streams until their client's last frame:
 * counting both under one cap bounds what a client can make the daemon
 * remember, and the lookups per frame.
 */
static bool take_id(gcd_conn *c, uint64_t id)
{
    if (gcd_assembly_id_fits(&c->assembly, c->streams.n))
        return true;
    refuse_id(c, id);
    return false;
}

static void refuse_id(gcd_conn *c, uint64_t id)
{
    gcd_send_error(&c->out, id, GC_E_LIMIT,
                   "more than %d requests and streams in assembly or unfinished on one connection: closing it",
                   GCD_ASSEMBLY_MAX_IDS);
    close_after_flush(c);
}

/* Stop reading; the connection closes once its output is flushed (process_input/on_write). */
static void close_after_flush(gcd_conn *c)
{
    if (c->waiting_budget)
        unlink_waiter(c);
    c->state = GCD_CONN_CLOSING;
    c->closing_since_ns = gc_now_ns();
    event_del(c->read_event);
    event_add(c->hup_event, NULL); /* nothing more to send it if it left */
}

static void send_welcome(gcd_conn *c, gc_status status, const char *message)
{
    gcd_send_welcome(&c->out, status, message, GCD_STREAM_WINDOW, GCD_STREAM_MAX_PER_CONN);
}

static void handle_hello(gcd_conn *c, const Gpucomp__Frame *f)
{
    if (c->refused_peer) { /* logged (rate-limited) when it was accepted */
        char msg[192];
        snprintf(msg, sizeof msg, "uid %ld may not use this daemon: " GCD_PEER_REFUSAL,
                 c->peer_uid == (uid_t)-1 ? -1L : (long)c->peer_uid);
        send_welcome(c, GC_E_PERMISSION, msg);
        close_after_flush(c);
        return;
    }
    if (f->body_case != GPUCOMP__FRAME__BODY_HELLO) {
        send_welcome(c, GC_E_PROTOCOL, "expected a Hello frame first");
        close_after_flush(c);
        return;
    }
    if (f->hello->protocol_version != GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT) {
        char msg[128];
        snprintf(msg, sizeof msg, "protocol version %u not supported (this daemon speaks %d)",
                 f->hello->protocol_version, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
        send_welcome(c, GC_E_UNSUPPORTED, msg);
        close_after_flush(c);
        return;
    }
    send_welcome(c, GC_OK, "");
    c->state = GCD_CONN_SERVING;
}

static void handle_frame(gcd_conn *c, const Gpucomp__Frame *f)
{
    if (c->state == GCD_CONN_AWAIT_HELLO)
        handle_hello(c, f);
    else if (f->body_case == GPUCOMP__FRAME__BODY_REQUEST)
        handle_request(c, f->request);
    else
        gcd_send_error(&c->out, 0, GC_E_PROTOCOL, "unexpected frame type %d after the handshake",
                       (int)f->body_case);
}

/* Take one complete frame off the input; false when none is there yet. */
static bool read_one_frame(gcd_conn *c, struct evbuffer *in)
{
    uint8_t header[GC_WIRE_HEADER_SIZE];
    if (evbuffer_copyout(in, header, sizeof header) < (ev_ssize_t)sizeof header)
        return false;
    uint32_t body = gc_wire_body_len(header);
    if (body > c->server->cfg.max_frame) {
        gcd_send_error(&c->out, 0, GC_E_LIMIT, "frame of %u bytes exceeds the limit of %u", body,
                       c->server->cfg.max_frame);
        close_after_flush(c);
        return false;
    }
    if (evbuffer_get_length(in) < GC_WIRE_HEADER_SIZE + (size_t)body)
        return false;
    gc_error err = { 0 };
    uint8_t *frame = evbuffer_pullup(in, GC_WIRE_HEADER_SIZE + (ev_ssize_t)body);
    Gpucomp__Frame *f = frame ? gc_wire_unpack(frame + GC_WIRE_HEADER_SIZE, body, &err) : NULL;
    if (f && c->state == GCD_CONN_SERVING && f->body_case == GPUCOMP__FRAME__BODY_REQUEST &&
        !budget_admits(c, f->request)) {
        gc_wire_free(f); /* read again when memory is released */
        return false;
    }
    evbuffer_drain(in, GC_WIRE_HEADER_SIZE + (size_t)body);
    c->frame_pos = c->in_pos;
    c->in_pos += GC_WIRE_HEADER_SIZE + (size_t)body;
    c->frame_started_ns = 0;
    c->last_active_ns = gc_now_ns();
    if (!f) {
        gcd_send_error(&c->out, 0, frame ? err.code : GC_E_NOMEM, "%s", frame ? err.msg : "out of memory");
        if (c->state == GCD_CONN_AWAIT_HELLO)
            close_after_flush(c);
        return true;
    }
    handle_frame(c, f);
    gc_wire_free(f);
    return true;
}

static void process_input(gcd_conn *c)
{
    if (c->waiting_budget)
        unlink_waiter(c); /* read_one_frame queues it again if it still does not fit */
    while (c->state <= GCD_CONN_SERVING && read_one_frame(c, c->in))
        ;
    if (!c->waiting_budget)
        c->wait_since_ns = 0;
    if (evbuffer_get_length(c->in) == 0)
        c->frame_started_ns = 0;
    else if (!c->frame_started_ns && !c->waiting_budget)
        c->frame_started_ns = gc_now_ns();
    if (c->state == GCD_CONN_CLOSING && evbuffer_get_length(bufferevent_get_output(c->out.bev)) == 0)
        gcd_conn_close(c);
    else
        gcd_conn_update_reading(c);
}

/*
 * The stream offset of the frame that holds input byte `last` (c->in begins
 * at c->in_pos). Descriptors belong to the frame they were sent with, and
 * the kernel ends a read with the message that carried them, so the frame
 * holding a read's last byte is theirs: one read may join the tail of a
 * frame with the next frame and its descriptors, and the first must not
 * take them.
 */
static uint64_t frame_holding(const gcd_conn *c, uint64_t last)
{
    size_t have = evbuffer_get_length(c->in), at = 0, rel = (size_t)(last - c->in_pos);
    for (;;) {
        uint8_t header[GC_WIRE_HEADER_SIZE];
        struct evbuffer_ptr p;
        if (have - at < sizeof header || evbuffer_ptr_set(c->in, &p, at, EVBUFFER_PTR_SET) != 0 ||
            evbuffer_copyout_from(c->in, &p, header, sizeof header) != (ev_ssize_t)sizeof header)
            return c->in_pos + at; /* the frame starting here, its header not all read yet */
        size_t end = at + sizeof header + gc_wire_body_len(header);
        if (end > rel)
            return c->in_pos + at;
        at = end;
    }
}

/* Read what the socket has, with any descriptors attached (each owned by its frame), then parse frames. */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    gcd_conn *c = arg;
    struct evbuffer_iovec vec;
    if (evbuffer_reserve_space(c->in, READ_BYTES, &vec, 1) != 1) {
        gcd_log(LOG_ERR, "out of memory reading a connection: closing it");
        gcd_conn_close(c);
        return;
    }
    unsigned had_fds = c->n_fds;
    bool overflow = false;
    ssize_t n = gc_fdpass_recv(fd, vec.iov_base, vec.iov_len, c->fds, &c->n_fds, GCD_CONN_MAX_FDS, &overflow);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        if (n < 0)
            gcd_log(LOG_DEBUG, "connection read error: %s", strerror(errno));
        gcd_conn_close(c);
        return;
    }
    vec.iov_len = (size_t)n;
    evbuffer_commit_space(c->in, &vec, 1);
    if (c->n_fds > had_fds) {
        uint64_t owner = frame_holding(c, c->in_pos + evbuffer_get_length(c->in) - 1);
        for (unsigned i = had_fds; i < c->n_fds; i++)
            c->fd_owner[i] = owner;
    }
    if (overflow) {
        gcd_send_error(&c->out, 0, GC_E_PROTOCOL, "more than %d unclaimed file descriptors", GCD_CONN_MAX_FDS);
        close_after_flush(c);
    }
    process_input(c);
}

/* ---- output and lifetime ------------------------------------------------ */

static void on_write(struct bufferevent *bev, void *arg)
{
    gcd_conn *c = arg;
    if (c->state == GCD_CONN_CLOSING) { /* called from the low-water mark down: close once empty */
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            gcd_conn_close(c);
        return;
    }
    if (c->paused_for_output) {
        c->paused_for_output = false;
        process_input(c); /* frames may be waiting in the input buffer */
    }
    if (c->state == GCD_CONN_SERVING)
        gcd_stream_resume_all(&c->streams);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    gcd_conn *c = arg;
    if (what & BEV_EVENT_ERROR)
        gcd_log(LOG_DEBUG, "connection error: %s", evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        gcd_conn_close(c);
}

/* Answers queued on the socket are held memory until the kernel takes them. */
static void on_output_change(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    gcd_conn *c = arg;
    gcd_budget *b = c->server->budget;
    if (info->n_deleted || (info->n_added && info->orig_size == 0))
        c->output_moved_ns = gc_now_ns();
    if (info->n_added)
        gcd_budget_charge(b, c->peer_uid, info->n_added);
    if (info->n_deleted) {
        gcd_budget_release(b, c->peer_uid, info->n_deleted);
        gcd_conn_wake_waiters(c->server);
    }
}

void gcd_conn_update_reading(gcd_conn *c)
{
    if (c->state > GCD_CONN_SERVING)
        return;
    if (evbuffer_get_length(bufferevent_get_output(c->out.bev)) > GCD_OUTPUT_HIGH_WATER)
        c->paused_for_output = true;
    bool read =
        !c->waiting_budget && !c->paused_for_output && c->in_flight < MAX_IN_FLIGHT && !c->server->shutting_down;
    /* Not reading, the daemon would see the client's close only when it read
     * again: watch for it meanwhile, so a client that leaves frees at once
     * what its connection holds. */
    if (read) {
        event_del(c->hup_event);
        event_add(c->read_event, NULL);
    } else {
        event_del(c->read_event);
        event_add(c->hup_event, NULL);
    }
}

static void on_hup(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    gcd_log(LOG_DEBUG, "a client closed its connection while it was not read");
    gcd_conn_close(arg);
}

/* Queueing an answer failed: close without sending more. */
static void output_broken(gcd_output *o)
{
    gcd_conn *c = (gcd_conn *)((char *)o - offsetof(gcd_conn, out));
    c->state = GCD_CONN_CLOSING;
}

static bool serving(const gcd_conn *c)
{
    return c->state == GCD_CONN_SERVING;
}

static bool gone(const gcd_conn *c)
{
    return c->state == GCD_CONN_CLOSED;
}

gcd_conn *gcd_conn_accept(gcd_server *s, evutil_socket_t fd, uid_t uid, bool refused_peer)
{
    gcd_conn *c = calloc(1, sizeof *c);
    /* Answers leave in large pieces: a deep send queue saves a wake-up per
     * few hundred KiB (the kernel caps it at net.core.wmem_max). */
    int sndbuf = SOCKET_SEND_BUFFER;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (c) {
        c->out.bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
        c->read_event = event_new(s->base, fd, EV_READ | EV_PERSIST, on_readable, c);
        c->hup_event = event_new(s->base, fd, EV_CLOSED | EV_PERSIST, on_hup, c);
        c->in = evbuffer_new();
    }
    if (!c || !c->out.bev || !c->read_event || !c->hup_event || !c->in) {
        gcd_log(LOG_ERR, "out of memory accepting a connection");
        if (c && c->out.bev)
            bufferevent_free(c->out.bev); /* closes fd */
        else
            evutil_closesocket(fd);
        if (c && c->read_event)
            event_free(c->read_event);
        if (c && c->hup_event)
            event_free(c->hup_event);
        if (c && c->in)
            evbuffer_free(c->in);
        free(c);
        return NULL;
    }
    c->server = s;
    c->out.cfg = &s->cfg;
    c->out.broken = output_broken;
    c->streams = (gcd_stream_set){ .out = &c->out,
                                   .server = s,
                                   .uid = uid,
                                   .owner = c,
                                   .serving = serving,
                                   .gone = gone,
                                   .submit = gcd_conn_submit,
                                   .released = conn_free_if_idle };
    c->peer_uid = uid;
    c->refused_peer = refused_peer;
    gcd_assembly_init(&c->assembly, &s->cfg, s->budget, uid, c);
    c->state = GCD_CONN_AWAIT_HELLO;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    c->last_active_ns = gc_now_ns();
    c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->out.bev), on_output_change, c);
    bufferevent_setcb(c->out.bev, NULL, on_write, on_event, c);
    bufferevent_setwatermark(c->out.bev, EV_WRITE, OUTPUT_LOW_WATER, 0);
    bufferevent_enable(c->out.bev, EV_WRITE);
    gcd_conn_update_reading(c);
    return c;
}

void gcd_conn_stop_reading(gcd_conn *c)
{
    if (c->state <= GCD_CONN_SERVING) {
        event_del(c->read_event);
        event_add(c->hup_event, NULL);
    }
}

/* Whether closing c gives memory back now (a stream may: its buffer, if no part is out). */
static bool holds_memory(gcd_conn *c)
{
    if (gcd_assembly_holds_memory(&c->assembly))
        return true;
    return c->streams.list || evbuffer_get_length(bufferevent_get_output(c->out.bev)) > 0;
}

void gcd_conn_close(gcd_conn *c)
{
    if (c->state == GCD_CONN_CLOSED)
        return;
    gcd_server *s = c->server;
    /* Waking every waiter costs a parse of each one's frame: not for a close that frees
     * nothing, such as a waiter's own (many that leave at once would cost n^2). */
    bool frees = holds_memory(c);
    if (c->waiting_budget)
        unlink_waiter(c);
    gcd_assembly_clear(&c->assembly);
    c->state = GCD_CONN_CLOSED; /* streams see it: they free themselves as their parts return */
    gcd_stream_close_all(&c->streams);
    for (gcd_request *r = c->flight; r; r = r->flight_next) /* stop at the next chunk or block */
        atomic_store_explicit(&r->cancelled, true, memory_order_relaxed);
    struct evbuffer *out = bufferevent_get_output(c->out.bev);
    if (c->out_cb) {
        evbuffer_remove_cb_entry(out, c->out_cb);
        gcd_budget_release(s->budget, c->peer_uid, evbuffer_get_length(out));
        c->out_cb = NULL;
    }
    for (unsigned i = 0; i < c->n_fds; i++)
        close(c->fds[i]);
    c->n_fds = 0;
    event_free(c->read_event);
    c->read_event = NULL;
    event_free(c->hup_event);
    c->hup_event = NULL;
    evbuffer_free(c->in);
    c->in = NULL;
    bufferevent_free(c->out.bev);
    c->out.bev = NULL;
    c->state = GCD_CONN_CLOSED;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    conn_free_if_idle(c); /* or, with requests in flight, when the last one is done */
    if (s->conn_closed)
        s->conn_closed(s); /* a descriptor is free again */
    if (frees)
        gcd_conn_wake_waiters(s);
}

void gcd_conn_request_done(gcd_request *r, void *server)
{
    gcd_server *s = server;
    gcd_conn *c = r->conn;
    unlink_flight(c, r);
    c->in_flight--;
    s->requests_in_flight--;
    if (r->stream) {
        gcd_stream_part_done(r); /* counted when its stream ends */
        gcd_conn_wake_waiters(s);
        conn_free_if_idle(c);
        return;
    }
    if (r->client_cancelled && r->error.code != GC_OK)
        gc_fail(&r->error, GC_E_CANCELLED, "request %llu cancelled by the client", (unsigned long long)r->id);
    gcd_stats_count(s, r);
    if (c->state == GCD_CONN_SERVING) {
        c->last_active_ns = gc_now_ns();
        gcd_send_result(&c->out, r);
        gcd_conn_update_reading(c);
    }
    gcd_request_free(r); /* releases its charges */
    gcd_conn_wake_waiters(s);
    conn_free_if_idle(c);
}

void gcd_conn_request_progress(gcd_request *r, void *server)
{
    (void)server;
    if (r->stream)
        gcd_stream_part_progress(r);
}

static void wake_now(evutil_socket_t fd, short what, void *arg)
{
    gcd_server *s = arg;
    /* Each waiter reads its pending frame again; one that still does not fit queues itself at the tail. */
    gcd_conn *tail = s->wait_tail;
    while (s->wait_head) {
        gcd_conn *c = s->wait_head;
        bool last = c == tail;
        process_input(c);
        if (last)
            break;
    }
}

void gcd_conn_wake_waiters(gcd_server *s)
{
    if (!s->wait_head)
        return;
    if (!s->wake_event)
        s->wake_event = event_new(s->base, -1, 0, wake_now, s);
    if (s->wake_event)
        event_active(s->wake_event, EV_TIMEOUT, 1);
}

/* Why c has overstayed, or NULL. Time the daemon itself keeps it waiting does not count. */
static const char *overdue(const gcd_conn *c, uint64_t now, uint64_t request_ns, uint64_t idle_ns)
{
    if (c->state == GCD_CONN_CLOSING)
        return now - c->closing_since_ns > CLOSING_GRACE_NS ? "closing" : NULL;
    if (evbuffer_get_length(bufferevent_get_output(c->out.bev)) && now - c->output_moved_ns > request_ns)
        return "unread answers";
    if (c->waiting_budget || c->paused_for_output)
        return NULL; /* the wait has its own end (expire_waits) */
    if (c->state == GCD_CONN_AWAIT_HELLO && now - c->last_active_ns > request_ns)
        return "no Hello";
    if (c->frame_started_ns && now - c->frame_started_ns > request_ns)
        return "incomplete frame";
    if (c->assembly.started_ns && now - c->assembly.started_ns > request_ns)
        return "incomplete request";
    if (gcd_stream_overdue(&c->streams, now, request_ns))
        return "stream without input";
    bool idle = c->in_flight == 0 && !c->assembly.list && !c->streams.list && evbuffer_get_length(c->in) == 0 &&
                evbuffer_get_length(bufferevent_get_output(c->out.bev)) == 0;
    if (idle_ns && idle && now - c->last_active_ns > idle_ns)
        return "idle";
    return NULL;
}

/*
 * A request that has waited request-timeout for memory is admitted if it
 * fits now, else refused with LIMIT; its connection goes on. Run after the
 * overdue connections are closed, so what they held is free for it.
 */
static void expire_waits(gcd_server *s, uint64_t now, uint64_t request_ns)
{
    gcd_conn *next;
    for (gcd_conn *c = s->conns; c; c = next) {
        next = c->next;
        if (c->waiting_budget && now - c->wait_since_ns > request_ns) {
            c->wait_expired = true;
            process_input(c);
        }
    }
}

void gcd_conn_sweep(gcd_server *s, uint64_t now)
{
    uint64_t request_ns = s->cfg.request_timeout_ms * 1000000ull;
    uint64_t idle_ns = s->cfg.idle_timeout_ms * 1000000ull;
    gcd_conn *next;
    for (gcd_conn *c = s->conns; c; c = next) {
        next = c->next;
        const char *why = overdue(c, now, request_ns, idle_ns);
        if (!why)
            continue;
        if (c->state == GCD_CONN_CLOSING || strcmp(why, "unread answers") == 0) {
            if (c->state != GCD_CONN_CLOSING)
                gcd_log(LOG_INFO, "closing a connection of uid %u: its answers unread for %llu ms",
                        (unsigned)c->peer_uid, (unsigned long long)(request_ns / 1000000));
            gcd_conn_close(c);
            continue;
        }
        gcd_log(LOG_INFO, "closing a connection of uid %u: %s past its timeout", (unsigned)c->peer_uid, why);
        gcd_send_error(&c->out, 0, GC_E_LIMIT, "%s: timed out after %llu ms; closing the connection", why,
                       (unsigned long long)((strcmp(why, "idle") == 0 ? idle_ns : request_ns) / 1000000));
        close_after_flush(c);
    }
    expire_waits(s, now, request_ns);
}
