/*
 * client_request.c - one request on the wire: sent in frames, validated
 * reassembly of the response (docs/PROTOCOL.md, "Requests" and "Responses").
 *
 * The client has at most one request in flight, so any frame that is not
 * the next frame of that request's response is a protocol violation. After
 * one, the socket may sit in the middle of a frame or a response: the
 * connection is closed rather than guessed at. Only a complete error
 * response from the daemon leaves the connection usable.
 */
#include "client_internal.h"
#include "client_io.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

uint64_t client_take_id(gpucomp_client *c)
{
    uint64_t id = c->next_id++;
    if (c->next_id == 0) /* 0 names the connection itself */
        c->next_id = 1;
    return id;
}

/* The fields only a request's first frame carries. */
static void fill_first(Gpucomp__Request *r, const client_req *req)
{
    r->op = req->op;
    r->codec = req->codec;
    r->options = req->options;
    r->total_size = req->src_len;
    r->max_output = req->max_output;
}

/* The fragment [off, off+n) of req's input as a frame. */
static void fill_request(Gpucomp__Request *r, const client_req *req, uint64_t id, size_t off, size_t n)
{
    r->id = id;
    /* protobuf-c's payload is not const; packing only reads it. */
    r->payload.data = n ? (uint8_t *)(uintptr_t)(req->src + off) : NULL;
    r->payload.len = n;
    r->last = off + n == req->src_len;
    if (off == 0)
        fill_first(r, req);
}

/* memfd transport: one frame, no payload, the descriptors attached (two, or one to register). */
static int send_fd_request(gpucomp_client *c, const client_req *req, uint64_t id)
{
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = id;
    fill_first(&r, req);
    r.payload_in_fd = true;
    r.last = true;
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = &r;
    int fds[2] = { req->in_fd, req->out_fd };
    unsigned n_fds = client_req_is_registration(req) ? 1 : 2;
    return client_io_send_frame_fds_timed(c->fd, &f, c->max_frame, fds, n_fds, c->timeout_ms, &c->err);
}

static int send_request(gpucomp_client *c, const client_req *req, uint64_t id)
{
    if (req->via_fd)
        return send_fd_request(c, req, id);
    size_t fragment = gc_wire_max_payload(c->max_frame); /* > 0: max_frame >= GC_WIRE_MIN_MAX_FRAME */
    size_t off = 0;
    int rc;
    do {
        size_t n = req->src_len - off < fragment ? req->src_len - off : fragment;
        Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
        fill_request(&r, req, id, off, n);
        Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
        f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
        f.request = &r;
        rc = client_io_send_frame_timed(c->fd, &f, c->max_frame, true, c->timeout_ms, &c->err);
        off += n;
    } while (rc == GC_OK && off < req->src_len);
    return rc;
}

/* A Response with id 0: the daemon rejects the connection itself. */
static int connection_error(const Gpucomp__Response *r, gc_error *err)
{
    int code = r->status == GPUCOMP__STATUS__STATUS_OK ? GC_E_PROTOCOL : client_wire_status(r->status);
    return gc_fail(err, code, "gpucompd closed the connection: %s",
                   r->message && *r->message ? r->message : gc_status_str(code));
}

/* Read the next frame, which must belong to the response to id. */
static int recv_frame_for(gpucomp_client *c, uint64_t id, Gpucomp__Frame **out)
{
    int rc = client_io_recv_frame_timed(c->fd, c->max_frame, out, c->timeout_ms, &c->err);
    if (rc != GC_OK)
        return rc;
    const Gpucomp__Frame *f = *out;
    if (f->body_case != GPUCOMP__FRAME__BODY_RESPONSE)
        rc = gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd sent a %s frame where a Response was expected",
                     client_frame_kind(f));
    else if (f->response->id == 0)
        rc = connection_error(f->response, &c->err);
    else if (f->response->id != id)
        rc = gc_fail(&c->err, GC_E_PROTOCOL,
                     "gpucompd answered request id %llu, but the only request in flight is %llu",
                     (unsigned long long)f->response->id, (unsigned long long)id);
    if (rc != GC_OK) {
        gc_wire_free(*out);
        *out = NULL;
    }
    return rc;
}

/* An error response: complete (last) means the connection is still at a boundary. */
static int daemon_error(gpucomp_client *c, const Gpucomp__Response *r, bool *clean)
{
    *clean = r->last;
    return gc_fail(&c->err, client_wire_status(r->status), "%s",
                   r->message && *r->message ? r->message : gc_status_str(r->status));
}

/*
 * The daemon spoke or hung up before the whole request was sent: it is
 * refusing the request (too large, busy, malformed). Its reason beats our
 * "broken pipe". The connection is half a request in, so it is closed.
 */
static int early_answer(gpucomp_client *c, uint64_t id, int send_rc)
{
    if (send_rc != CLIENT_IO_INPUT_PENDING && send_rc != GC_E_IO) {
        client_disconnect(c);
        return send_rc;
    }
    gc_error send_err = c->err;
    /*
     * A write that failed with nothing to read (a time limit, a daemon that
     * vanished without a word) has no answer to wait for.
     */
    if (send_rc == GC_E_IO && !client_io_input_pending(c->fd)) {
        client_disconnect(c);
        return send_rc;
    }
    Gpucomp__Frame *f = NULL;
    bool at_boundary; /* irrelevant: the rest of the request was never sent */
    int rc = recv_frame_for(c, id, &f);
    if (rc == GC_OK && f->response->status != GPUCOMP__STATUS__STATUS_OK)
        rc = daemon_error(c, f->response, &at_boundary);
    else if (rc == GC_OK)
        rc = gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd answered request %llu before it was completely sent",
                     (unsigned long long)id);
    else if (rc == GC_E_IO && send_rc == GC_E_IO)
        c->err = send_err; /* nothing better to say than the write error */
    gc_wire_free(f);
    client_disconnect(c);
    return rc;
}

/* Output buffer being reassembled: grows with what actually arrives, never past total. */
typedef struct assembly {
    uint64_t total;
    size_t cap;
} assembly;

static int start_output(gpucomp_client *c, const client_req *req, const Gpucomp__Response *r, assembly *a,
                        client_reply *rep)
{
    if (req->max_output && r->total_size > req->max_output)
        return gc_fail(&c->err, GC_E_LIMIT, "gpucompd announced %llu bytes of output, over the limit of %llu",
                       (unsigned long long)r->total_size, (unsigned long long)req->max_output);
    if (r->total_size >= SIZE_MAX)
        return gc_fail(&c->err, GC_E_NOMEM,
                       "gpucompd announced %llu bytes of output, more than this process can hold",
                       (unsigned long long)r->total_size);
    a->total = r->total_size;
    /*
     * Start with one frame's worth, not total: a daemon that announces a
     * huge total and sends little must not make us allocate it.
     */
    a->cap = a->total < c->max_frame ? (size_t)a->total : c->max_frame;
    rep->buf = malloc(a->cap ? a->cap : 1);
    if (!rep->buf)
        return gc_fail(&c->err, GC_E_NOMEM, "cannot allocate %zu bytes for the response", a->cap);
    return GC_OK;
}

static int append_payload(gpucomp_client *c, const Gpucomp__Response *r, assembly *a, client_reply *rep)
{
    size_t n = r->payload.len;
    if (n > a->total - rep->len)
        return gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd sent more than the %llu bytes of output it announced",
                       (unsigned long long)a->total);
    if (rep->len + n > a->cap) {
        size_t cap = a->cap * 2 < a->total ? a->cap * 2 : (size_t)a->total;
        cap = cap < rep->len + n ? rep->len + n : cap;
        uint8_t *p = realloc(rep->buf, cap);
        if (!p)
            return gc_fail(&c->err, GC_E_NOMEM, "cannot grow the response buffer to %zu bytes", cap);
        rep->buf = p;
        a->cap = cap;
    }
    if (n)
        memcpy(rep->buf + rep->len, r->payload.data, n);
    rep->len += n;
    return GC_OK;
}

/* A read failing mid-response: say how far it got. */
static int truncated_response(gpucomp_client *c, int rc, const assembly *a, const client_reply *rep)
{
    gc_error cause = c->err;
    return gc_fail(&c->err, rc, "%s, after %zu of %llu response bytes", cause.msg, rep->len,
                   (unsigned long long)a->total);
}

/* Frames after the first, until last. */
static int recv_rest(gpucomp_client *c, uint64_t id, assembly *a, client_reply *rep, bool *clean)
{
    for (;;) {
        Gpucomp__Frame *f;
        int rc = recv_frame_for(c, id, &f);
        if (rc == GC_E_IO)
            return truncated_response(c, rc, a, rep);
        if (rc != GC_OK)
            return rc;
        const Gpucomp__Response *r = f->response;
        bool last = r->last;
        if (r->status != GPUCOMP__STATUS__STATUS_OK)
            rc = daemon_error(c, r, clean);
        else
            rc = append_payload(c, r, a, rep);
        gc_wire_free(f);
        if (rc != GC_OK || last)
            return rc;
    }
}

/*
 * The answer to a memfd request: one frame saying how many bytes the daemon
 * wrote into out_fd. The memfd must really hold them: the caller maps it.
 */
static int check_fd_reply(gpucomp_client *c, const client_req *req, const Gpucomp__Response *r, client_reply *rep)
{
    if (!r->payload_in_fd || r->payload.len || !r->last)
        return gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd answered a memfd request with an inline response");
    if (req->max_output && r->total_size > req->max_output)
        return gc_fail(&c->err, GC_E_LIMIT, "gpucompd announced %llu bytes of output, over the limit of %llu",
                       (unsigned long long)r->total_size, (unsigned long long)req->max_output);
    struct stat st;
    if (fstat(req->out_fd, &st) != 0)
        return gc_fail(&c->err, GC_E_IO, "cannot stat the output memfd: %s", strerror(errno));
    if ((uint64_t)st.st_size < r->total_size || r->total_size >= SIZE_MAX)
        return gc_fail(&c->err, GC_E_PROTOCOL,
                       "gpucompd announced %llu bytes of output, but the output memfd holds %lld",
                       (unsigned long long)r->total_size, (long long)st.st_size);
    rep->len = (size_t)r->total_size;
    return GC_OK;
}

/* The answer to a registration: one empty frame. */
static int check_registration_reply(gpucomp_client *c, const Gpucomp__Response *r)
{
    if (r->payload_in_fd || r->payload.len || r->total_size || !r->last)
        return gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd answered a registration with a payload");
    return GC_OK;
}

static int recv_response(gpucomp_client *c, const client_req *req, uint64_t id, client_reply *rep, bool *clean)
{
    int rc = recv_frame_for(c, id, &rep->head);
    if (rc == GC_E_IO) {
        gc_error cause = c->err;
        return gc_fail(&c->err, rc, "%s before answering the request", cause.msg);
    }
    if (rc != GC_OK)
        return rc;
    const Gpucomp__Response *r = rep->head->response;
    if (r->status != GPUCOMP__STATUS__STATUS_OK)
        return daemon_error(c, r, clean);
    rep->backend = r->backend;
    rep->engine_ns = r->engine_ns;
    if (client_req_is_registration(req))
        return check_registration_reply(c, r);
    if (req->via_fd)
        return check_fd_reply(c, req, r, rep);
    if (r->payload_in_fd)
        return gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd answered an inline request with payload_in_fd");
    assembly a;
    rc = start_output(c, req, r, &a, rep);
    if (rc == GC_OK)
        rc = append_payload(c, r, &a, rep);
    if (rc == GC_OK && !r->last)
        rc = recv_rest(c, id, &a, rep, clean);
    if (rc == GC_OK && rep->len != a.total)
        rc =
            gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd ended the response after %zu of the %llu bytes it announced",
                    rep->len, (unsigned long long)a.total);
    return rc;
}

int client_check_idle(gpucomp_client *c)
{
    if (c->stream)
        return gc_fail(&c->err, GC_E_IN_USE,
                       "this client is in use by its open stream: gpucomp_stream_free it "
                       "first, or use another client");
    if (atomic_load(&c->async_outstanding))
        return gc_fail(&c->err, GC_E_IN_USE,
                       "this client is in use by its outstanding asynchronous requests: "
                       "poll them to completion first, or use another client for blocking calls");
    return GC_OK;
}

/* The buffer calls that reconnect and resend (gpucomp_set_reconnect); registrations do not survive one. */
static bool may_reconnect(const gpucomp_client *c, const client_req *req)
{
    return c->reconnect && (req->op == GPUCOMP__OP__OP_COMPRESS || req->op == GPUCOMP__OP__OP_DECOMPRESS ||
                            req->op == GPUCOMP__OP__OP_PING || req->op == GPUCOMP__OP__OP_STATS);
}

/* Open c->path again; IO with both reasons on failure (the call fails as on a closed connection). */
static int reconnect(gpucomp_client *c, const char *why)
{
    gc_error cause;
    gc_error_clear(&cause);
    if (client_reopen(c, &cause) == GC_OK)
        return GC_OK;
    return gc_fail(&c->err, GC_E_IO, "%s, and reconnecting failed: %s", why, cause.msg);
}

/*
 * One attempt. *answered is set once a response frame for the request
 * arrived: from then on the request is not sent again.
 */
static int call_once(gpucomp_client *c, const client_req *req, client_reply *rep, bool *answered)
{
    *answered = false;
    uint64_t id = client_take_id(c);
    int rc = send_request(c, req, id);
    if (rc != GC_OK) {
        rc = early_answer(c, id, rc);
        *answered = rc != GC_E_IO;
        return rc;
    }
    bool clean = false;
    rc = recv_response(c, req, id, rep, &clean);
    *answered = rep->head != NULL || rc != GC_E_IO;
    if (rc != GC_OK) {
        client_reply_free(rep);
        if (!clean)
            client_disconnect(c);
    }
    return rc;
}

int client_call(gpucomp_client *c, const client_req *req, client_reply *rep)
{
    memset(rep, 0, sizeof *rep);
    gc_error_clear(&c->err);
    if (client_check_idle(c) != GC_OK)
        return c->err.code;
    bool retry = may_reconnect(c, req); /* once per call, whichever way it is spent */
    if (c->fd < 0 && !retry)
        return gc_fail(&c->err, GC_E_IO,
                       "the connection to gpucompd was closed after an earlier error; connect again");
    if (c->fd < 0) {
        retry = false;
        int rc = reconnect(c, "the connection to gpucompd was closed after an earlier error");
        if (rc != GC_OK)
            return rc;
    }
    if (c->max_request && req->src_len > c->max_request && !client_req_is_registration(req))
        return gc_fail(&c->err, GC_E_LIMIT, "%zu bytes of input is over gpucompd's request limit of %llu bytes",
                       req->src_len, (unsigned long long)c->max_request);
    bool answered;
    int rc = call_once(c, req, rep, &answered);
    /*
     * The connection broke before any answer (the daemon restarted): every
     * request is a pure function of its input, so send it again, once. Not
     * after a time limit: the caller asked not to wait longer.
     */
    if (rc == GC_E_IO && !answered && retry && !client_io_timed_out(&c->err)) {
        gc_error first = c->err;
        client_disconnect(c);
        if (reconnect(c, first.msg) != GC_OK)
            return GC_E_IO;
        gc_error_clear(&c->err);
        if (c->max_request && req->src_len > c->max_request && !client_req_is_registration(req))
            return gc_fail(&c->err, GC_E_LIMIT,
                           "%zu bytes of input is over gpucompd's request limit of %llu bytes", req->src_len,
                           (unsigned long long)c->max_request);
        rc = call_once(c, req, rep, &answered);
    }
    return rc;
}

void client_reply_free(client_reply *rep)
{
    free(rep->buf);
    gc_wire_free(rep->head);
    memset(rep, 0, sizeof *rep);
}
