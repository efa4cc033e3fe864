/* conn.c - one client connection (see conn.h). */
#include "conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "budget.h"
#include "dispatch.h"
#include "fd_map_cache.h"
#include "fd_payload.h"
#include "fdpass.h"
#include "log.h"
#include "response.h"
#include "stats.h"
#include "wire.h"

/* A client may assemble at most this many requests at once. */
#define MAX_ASSEMBLING 64
/* Stop reading from a client whose unread responses exceed this. */
#define OUTPUT_HIGH_WATER (64u << 20)
/* Bytes taken off the socket per read: large enough for 16 MiB frames in few calls. */
#define READ_CHUNK (1u << 20)

static void conn_free_if_idle(gcd_conn *c)
{
    if (c->state == GCD_CONN_CLOSED && c->in_flight == 0) {
        /* Mappings and registrations end here, not at close: a registration
         * still running when the connection closed is in the cache only now. */
        gcd_fd_map_cache_drop_owner(c);
        free(c);
    }
}

/* ---- request assembly ------------------------------------------------- */

static gcd_request *find_assembling(gcd_conn *c, uint64_t id)
{
    for (gcd_request *r = c->assembling; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

static void unlink_assembling(gcd_conn *c, gcd_request *r)
{
    for (gcd_request **p = &c->assembling; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            c->n_assembling--;
            return;
        }
}

static void drop_request(gcd_conn *c, gcd_request *r)
{
    unlink_assembling(c, r);
    gcd_budget_release(c->server, r->reserved);
    gcd_request_free(r);
}

/*
 * Refuse a request: answer with the error and free what was assembled. If
 * more frames of it are coming, a tombstone stays to swallow them, so the
 * client gets exactly one answer per id.
 */
static void refuse(gcd_conn *c, gcd_request *r, const gc_error *err, bool more_frames)
{
    gcd_send_error(c, r->id, err->code, "%s", err->msg);
    c->server->counters.requests_failed++;
    if (!more_frames) {
        drop_request(c, r);
        return;
    }
    gcd_budget_release(c->server, r->reserved);
    r->reserved = 0;
    free(r->input);
    r->input = NULL;
    r->refused = true;
}

/* Descriptors a request frame carries: two for a codec request over memfds, one to (un)register. */
static unsigned fds_carried(const Gpucomp__Request *m)
{
    if (!m->payload_in_fd)
        return 0;
    return gcd_op_is_registration(m->op) ? 1 : 2;
}

/*
 * Take the descriptors that came with a payload_in_fd frame off the queue
 * at once, whatever becomes of the request: left behind, they would be
 * handed to the connection's next fd request, which would then read another
 * request's data. -1 where fewer arrived.
 */
static void claim_fds(gcd_conn *c, int fds[2], unsigned want)
{
    unsigned n = c->n_fds < want ? c->n_fds : want;
    fds[0] = n > 0 ? c->fds[0] : -1;
    fds[1] = n > 1 ? c->fds[1] : -1;
    c->n_fds -= n;
    memmove(c->fds, c->fds + n, c->n_fds * sizeof c->fds[0]);
}

static void close_fds(const int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Map the descriptors start_request gave the request. */
static int attach_fds(gcd_request *r, gc_error *err)
{
    if (r->in_fd < 0 || r->out_fd < 0)
        return gc_fail(err, GC_E_PROTOCOL,
                       "request %llu: payload_in_fd set but fewer than 2 descriptors arrived",
                       (unsigned long long)r->id);
    return gcd_fd_payload_attach(r, r->in_fd, r->out_fd, err);
}

/* OP_REGISTER/OP_UNREGISTER: one descriptor, no payload; the worker does the (slow) mapping. */
static int admit_registration(gcd_request *r, bool payload_in_fd, gc_error *err)
{
    if (!payload_in_fd || r->in_fd < 0)
        return gc_fail(err, GC_E_PROTOCOL, "request %llu: a registration carries one memfd (payload_in_fd)",
                       (unsigned long long)r->id);
    r->received = r->total_size;
    return GC_OK;
}

static int admit(gcd_conn *c, gcd_request *r, bool payload_in_fd, gc_error *err)
{
    const gcd_config *cfg = &c->server->cfg;
    if (gcd_request_is_registration(r))
        return admit_registration(r, payload_in_fd, err);
    int rc = gcd_engine_check(r, err);
    if (rc != GC_OK)
        return rc;
    if (r->total_size > cfg->max_request || r->total_size > cfg->memory_budget)
        return gc_fail(err, GC_E_LIMIT, "request of %llu bytes exceeds the daemon's limit of %llu",
                       (unsigned long long)r->total_size,
                       (unsigned long long)(cfg->max_request < cfg->memory_budget ? cfg->max_request
                                                                                 : cfg->memory_budget));
    if (c->n_assembling > MAX_ASSEMBLING)
        return gc_fail(err, GC_E_LIMIT, "more than %d requests in assembly on one connection",
                       MAX_ASSEMBLING);
    if (r->max_output == 0 || r->max_output > cfg->max_output)
        r->max_output = cfg->max_output;
    if (payload_in_fd)
        return attach_fds(r, err);
    r->input = malloc(r->total_size ? r->total_size : 1);
    if (!r->input)
        return gc_fail(err, GC_E_NOMEM, "cannot allocate %llu bytes for the request",
                       (unsigned long long)r->total_size);
    r->reserved = r->total_size;
    gcd_budget_charge(c->server, r->reserved);
    return GC_OK;
}

/* First frame of an id: answer PING/STATS at once, else start assembling. */
static gcd_request *start_request(gcd_conn *c, const Gpucomp__Request *m)
{
    int fds[2] = { -1, -1 };
    claim_fds(c, fds, fds_carried(m));
    if (m->op == GPUCOMP__OP__OP_PING || m->op == GPUCOMP__OP__OP_STATS) {
        close_fds(fds);
        if (m->op == GPUCOMP__OP__OP_PING)
            gcd_send_pong(c, m->id);
        else
            gcd_send_stats(c, m->id);
        return NULL;
    }
    gcd_request *r = gcd_request_new(c, m);
    if (!r) {
        close_fds(fds);
        gcd_send_error(c, m->id, GC_E_NOMEM, "out of memory");
        return NULL;
    }
    r->in_fd = fds[0]; /* from here on gcd_request_free closes them */
    r->out_fd = fds[1];
    r->next = c->assembling;
    c->assembling = r;
    c->n_assembling++;
    gc_error err = { 0 };
    if (m->payload_in_fd && (!m->last || m->payload.len)) {
        gc_fail(&err, GC_E_PROTOCOL, "request %llu: a payload_in_fd request is one frame without payload",
                (unsigned long long)m->id);
        refuse(c, r, &err, !m->last);
        return NULL;
    }
    if (admit(c, r, m->payload_in_fd, &err) != GC_OK) {
        refuse(c, r, &err, !m->last);
        return NULL;
    }
    return r;
}

static void submit(gcd_conn *c, gcd_request *r)
{
    unlink_assembling(c, r);
    c->in_flight++;
    gcd_dispatch_submit(c->server, r);
}

static void handle_request(gcd_conn *c, const Gpucomp__Request *m)
{
    if (m->id == 0) {
        gcd_send_error(c, 0, GC_E_PROTOCOL, "request id 0 is reserved");
        return;
    }
    gcd_request *r = find_assembling(c, m->id);
    if (!r && !(r = start_request(c, m)))
        return;
    if (r->refused) {
        if (m->last)
            drop_request(c, r);
        return;
    }
    gc_error err = { 0 };
    if (m->payload.len > r->total_size - r->received) {
        gc_fail(&err, GC_E_PROTOCOL, "request %llu: payload exceeds its total_size of %llu bytes",
                (unsigned long long)r->id, (unsigned long long)r->total_size);
        refuse(c, r, &err, !m->last);
        return;
    }
    if (m->payload.len)
        memcpy(r->input + r->received, m->payload.data, m->payload.len);
    r->received += m->payload.len;
    if (!m->last)
        return;
    if (!gcd_request_complete(r)) {
        gc_fail(&err, GC_E_PROTOCOL, "request %llu ended after %llu of %llu bytes",
                (unsigned long long)r->id, (unsigned long long)r->received,
                (unsigned long long)r->total_size);
        refuse(c, r, &err, false);
        return;
    }
    submit(c, r);
}

/* ---- frames in -------------------------------------------------------- */

/* Stop reading; the connection closes once its output is flushed (process_input/on_write). */
static void close_after_flush(gcd_conn *c)
{
    c->state = GCD_CONN_CLOSING;
    event_del(c->read_event);
}

static void handle_hello(gcd_conn *c, const Gpucomp__Frame *f)
{
    if (f->body_case != GPUCOMP__FRAME__BODY_HELLO) {
        gcd_send_welcome(c, GC_E_PROTOCOL, "expected a Hello frame first");
        close_after_flush(c);
        return;
    }
    if (f->hello->protocol_version != GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT) {
        char msg[128];
        snprintf(msg, sizeof msg, "protocol version %u not supported (this daemon speaks %d)",
                 f->hello->protocol_version, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
        gcd_send_welcome(c, GC_E_UNSUPPORTED, msg);
        close_after_flush(c);
        return;
    }
    gcd_send_welcome(c, GC_OK, "");
    c->state = GCD_CONN_SERVING;
}

static void handle_frame(gcd_conn *c, const Gpucomp__Frame *f)
{
    if (c->state == GCD_CONN_AWAIT_HELLO)
        handle_hello(c, f);
    else if (f->body_case == GPUCOMP__FRAME__BODY_REQUEST)
        handle_request(c, f->request);
    else
        gcd_send_error(c, 0, GC_E_PROTOCOL, "unexpected frame type %d after the handshake",
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
        gcd_send_error(c, 0, GC_E_LIMIT, "frame of %u bytes exceeds the limit of %u",
                       body, c->server->cfg.max_frame);
        close_after_flush(c);
        return false;
    }
    if (evbuffer_get_length(in) < GC_WIRE_HEADER_SIZE + (size_t)body)
        return false;
    evbuffer_drain(in, GC_WIRE_HEADER_SIZE);
    gc_error err = { 0 };
    Gpucomp__Frame *f = gc_wire_unpack(evbuffer_pullup(in, body), body, &err);
    evbuffer_drain(in, body);
    if (!f) {
        gcd_send_error(c, 0, err.code, "%s", err.msg);
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
    while (c->state <= GCD_CONN_SERVING && read_one_frame(c, c->in))
        ;
    if (c->state == GCD_CONN_CLOSING &&
        evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        gcd_conn_close(c);
    else
        gcd_conn_update_reading(c);
}

/* Read what the socket has, with any descriptors attached, then parse frames. */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    gcd_conn *c = arg;
    struct evbuffer_iovec vec;
    if (evbuffer_reserve_space(c->in, READ_CHUNK, &vec, 1) != 1) {
        gcd_log(LOG_ERR, "out of memory reading a connection: closing it");
        gcd_conn_close(c);
        return;
    }
    bool overflow = false;
    ssize_t n = gc_fdpass_recv(fd, vec.iov_base, vec.iov_len, c->fds, &c->n_fds,
                               GCD_CONN_MAX_FDS, &overflow);
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
    if (overflow) {
        gcd_send_error(c, 0, GC_E_PROTOCOL, "more than %d unclaimed file descriptors", GCD_CONN_MAX_FDS);
        close_after_flush(c);
    }
    process_input(c);
}

/* ---- output and lifetime ------------------------------------------------ */

static void on_write(struct bufferevent *bev, void *arg)
{
    gcd_conn *c = arg;
    if (c->state == GCD_CONN_CLOSING) {
        gcd_conn_close(c);
        return;
    }
    if (c->paused_for_output) {
        c->paused_for_output = false;
        process_input(c); /* frames may be waiting in the input buffer */
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    gcd_conn *c = arg;
    if (what & BEV_EVENT_ERROR)
        gcd_log(LOG_DEBUG, "connection error: %s",
                evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        gcd_conn_close(c);
}

void gcd_conn_update_reading(gcd_conn *c)
{
    if (c->state > GCD_CONN_SERVING)
        return;
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) > OUTPUT_HIGH_WATER)
        c->paused_for_output = true;
    bool read = !c->server->reading_paused && !c->paused_for_output && !c->server->shutting_down;
    if (read)
        event_add(c->read_event, NULL);
    else
        event_del(c->read_event);
}

void gcd_conn_accept(gcd_server *s, evutil_socket_t fd)
{
    gcd_conn *c = calloc(1, sizeof *c);
    if (c) {
        c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
        c->read_event = event_new(s->base, fd, EV_READ | EV_PERSIST, on_readable, c);
        c->in = evbuffer_new();
    }
    if (!c || !c->bev || !c->read_event || !c->in) {
        gcd_log(LOG_ERR, "out of memory accepting a connection");
        if (c && c->bev)
            bufferevent_free(c->bev); /* closes fd */
        else
            evutil_closesocket(fd);
        if (c && c->read_event)
            event_free(c->read_event);
        if (c && c->in)
            evbuffer_free(c->in);
        free(c);
        return;
    }
    c->server = s;
    c->state = GCD_CONN_AWAIT_HELLO;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    bufferevent_setcb(c->bev, NULL, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_WRITE);
    gcd_conn_update_reading(c);
}

void gcd_conn_stop_reading(gcd_conn *c)
{
    if (c->state <= GCD_CONN_SERVING)
        event_del(c->read_event);
}

void gcd_conn_close(gcd_conn *c)
{
    if (c->state == GCD_CONN_CLOSED)
        return;
    gcd_server *s = c->server;
    while (c->assembling)
        drop_request(c, c->assembling);
    for (unsigned i = 0; i < c->n_fds; i++)
        close(c->fds[i]);
    c->n_fds = 0;
    event_free(c->read_event);
    c->read_event = NULL;
    evbuffer_free(c->in);
    c->in = NULL;
    bufferevent_free(c->bev);
    c->bev = NULL;
    c->state = GCD_CONN_CLOSED;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    conn_free_if_idle(c); /* or, with requests in flight, when the last one is done */
}

void gcd_conn_request_done(gcd_request *r, void *server)
{
    gcd_server *s = server;
    gcd_conn *c = r->conn;
    c->in_flight--;
    s->requests_in_flight--;
    gcd_stats_count(s, r);
    if (c->state == GCD_CONN_SERVING) {
        gcd_send_result(c, r);
        gcd_conn_update_reading(c);
    }
    gcd_budget_release(s, r->reserved);
    gcd_request_free(r);
    conn_free_if_idle(c);
}
