/* response.c - frames out (see response.h). */
#include "response.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "config.h"
#include "log.h"
#include "stats.h"
#include "wire.h"

/* Pack f straight into the output buffer: one copy of the payload, no temporary. */
size_t gcd_output_queued(const gcd_output *o)
{
    return evbuffer_get_length(bufferevent_get_output(o->bev));
}

static void queue_frame(gcd_output *o, const Gpucomp__Frame *f)
{
    struct evbuffer *out = bufferevent_get_output(o->bev);
    size_t size = gc_wire_packed_size(f);
    struct evbuffer_iovec vec;
    if (evbuffer_reserve_space(out, (ev_ssize_t)size, &vec, 1) != 1 || vec.iov_len < size) {
        gcd_log(LOG_ERR, "cannot reserve %zu bytes of output: closing connection", size);
        o->broken(o);
        return;
    }
    vec.iov_len = gc_wire_pack(f, vec.iov_base);
    evbuffer_commit_space(out, &vec, 1);
}

static void queue_response(gcd_output *o, Gpucomp__Response *resp)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_RESPONSE;
    f.response = resp;
    queue_frame(o, &f);
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* Protobuf tag of a length-delimited field. */
#define LEN_TAG(field) ((uint8_t)((field) << 3 | 2))

/*
 * The frame is written by hand around the payload, which protobuf allows:
 * fields may come in any order, so the payload field (Response.payload, 5)
 * follows the packed rest of the Response inside Frame.response (4). The
 * frame is the one gc_wire_pack would write but for the field order.
 */
bool gcd_send_response_ref(gcd_output *o, Gpucomp__Response *resp, const uint8_t *payload, size_t len,
                           gcd_payload_done_fn done, void *arg)
{
    resp->payload.data = NULL;
    resp->payload.len = 0;
    size_t meta = gpucomp__response__get_packed_size(resp);
    uint8_t head[GC_WIRE_HEADER_SIZE + 2 * 10 + 2 + 256];
    if (meta > 256) { /* cannot happen: a stream fragment has no message */
        done(payload, len, arg);
        return false;
    }
    uint8_t field[11];
    size_t field_len = 0;
    field[field_len++] = LEN_TAG(5);
    field_len += put_varint(field + field_len, len);
    uint64_t resp_len = meta + field_len + len;
    size_t h = GC_WIRE_HEADER_SIZE;
    head[h++] = LEN_TAG(4);
    h += put_varint(head + h, resp_len);
    uint64_t body = (h - GC_WIRE_HEADER_SIZE) + resp_len;
    for (int k = 0; k < 4; k++)
        head[k] = (uint8_t)(body >> (8 * k));
    h += gpucomp__response__pack(resp, head + h);
    memcpy(head + h, field, field_len);
    h += field_len;
    struct evbuffer *out = bufferevent_get_output(o->bev);
    if (evbuffer_add(out, head, h) != 0 ||
        (len && evbuffer_add_reference(out, payload, len, (evbuffer_ref_cleanup_cb)done, arg) != 0)) {
        gcd_log(LOG_ERR, "cannot queue %zu bytes of output: closing connection", len);
        o->broken(o);
        done(payload, len, arg);
        return false;
    }
    if (!len)
        done(payload, len, arg);
    return true;
}

void gcd_send_welcome(gcd_output *o, gc_status status, const char *message, uint64_t stream_window,
                      uint32_t max_streams)
{
    Gpucomp__Welcome w = GPUCOMP__WELCOME__INIT;
    w.protocol_version = GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
    w.status = (Gpucomp__Status)status;
    w.message = (char *)message;
    w.max_frame_size = o->cfg->max_frame;
    w.max_request_size = o->cfg->max_request;
    w.server_version = (char *)PACKAGE_VERSION;
    w.stream_window = stream_window;
    w.max_streams = max_streams;
    w.file_streams = stream_window > 0;
    w.stream_rings = stream_window > 0;
    w.stream_output_rings = stream_window > 0;
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_WELCOME;
    f.welcome = &w;
    queue_frame(o, &f);
}

void gcd_send_response(gcd_output *o, Gpucomp__Response *resp)
{
    queue_response(o, resp);
}

static void send_error_v(gcd_output *o, uint64_t id, gc_status status, bool stream, const char *fmt, va_list ap)
{
    char message[GC_ERROR_MSG_MAX + 64];
    vsnprintf(message, sizeof message, fmt, ap);
    gcd_log(LOG_DEBUG, "request %llu: %s: %s", (unsigned long long)id, gc_status_str(status), message);
    Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
    resp.id = id;
    resp.status = (Gpucomp__Status)status;
    resp.message = message;
    resp.stream = stream;
    resp.last = 1;
    queue_response(o, &resp);
}

void gcd_send_error(gcd_output *o, uint64_t id, gc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    send_error_v(o, id, status, false, fmt, ap);
    va_end(ap);
}

void gcd_send_error_frame(gcd_output *o, uint64_t id, gc_status status, bool stream, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    send_error_v(o, id, status, stream, fmt, ap);
    va_end(ap);
}

void gcd_send_result(gcd_output *o, const gcd_request *r)
{
    if (r->error.code != GC_OK) {
        gcd_send_error(o, r->id, r->error.code, "%s", r->error.msg);
        return;
    }
    if (r->out_fd >= 0) { /* the output is already in the client's memfd */
        Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
        resp.id = r->id;
        resp.total_size = r->output_len;
        resp.backend = r->backend;
        resp.engine_ns = r->engine_ns;
        resp.payload_in_fd = 1;
        resp.last = 1;
        queue_response(o, &resp);
        return;
    }
    size_t fragment = gc_wire_max_payload(o->cfg->max_frame);
    size_t sent = 0;
    do {
        size_t n = r->output_len - sent < fragment ? r->output_len - sent : fragment;
        Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
        resp.id = r->id;
        resp.status = GPUCOMP__STATUS__STATUS_OK;
        if (sent == 0) {
            resp.total_size = r->output_len;
            resp.backend = r->backend;
            resp.engine_ns = r->engine_ns;
        }
        resp.payload.data = r->output + sent;
        resp.payload.len = n;
        sent += n;
        resp.last = sent == r->output_len;
        queue_response(o, &resp);
    } while (sent < r->output_len);
}

void gcd_send_pong(gcd_output *o, uint64_t id)
{
    Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
    resp.id = id;
    resp.last = 1;
    queue_response(o, &resp);
}

void gcd_send_stats(gcd_output *o, uint64_t id, const struct gcd_server *s)
{
    gcd_stats_message msg;
    gcd_stats_fill(s, &msg);
    Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
    resp.id = id;
    resp.last = 1;
    resp.stats = &msg.stats;
    queue_response(o, &resp);
}
