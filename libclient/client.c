/*
 * client.c - the public API of libgpucomp-client (gpucomp.h): argument
 * checks, option translation and error bookkeeping. The wire work is in
 * client_connect.c and client_request.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "client_internal.h"
#include "client_async.h"
#include "fdpass.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.3.0"
#endif

/* The last gpucomp_*_into call with no client on this thread: its message (gpucomp_last_error(NULL)). */
static _Thread_local gc_error local_err;

/*
 * The same numbers travel as GPUCOMP_E_* (public), GC_E_* (internal) and
 * gpucomp.Status (wire), and the code passes them between the three
 * unconverted: make any drift a compile error.
 */
#define SAME_CODE(pub, internal, wire)                                         \
    _Static_assert((int)(pub) == (int)(internal) && (int)(pub) == (int)(wire), \
                   #pub " must equal " #internal " and " #wire)
SAME_CODE(GPUCOMP_OK, GC_OK, GPUCOMP__STATUS__STATUS_OK);
SAME_CODE(GPUCOMP_E_INVALID, GC_E_INVALID, GPUCOMP__STATUS__STATUS_INVALID);
SAME_CODE(GPUCOMP_E_CORRUPT, GC_E_CORRUPT, GPUCOMP__STATUS__STATUS_CORRUPT);
SAME_CODE(GPUCOMP_E_TRUNCATED, GC_E_TRUNCATED, GPUCOMP__STATUS__STATUS_TRUNCATED);
SAME_CODE(GPUCOMP_E_CRC, GC_E_CRC, GPUCOMP__STATUS__STATUS_CRC);
SAME_CODE(GPUCOMP_E_LIMIT, GC_E_LIMIT, GPUCOMP__STATUS__STATUS_LIMIT);
SAME_CODE(GPUCOMP_E_NOMEM, GC_E_NOMEM, GPUCOMP__STATUS__STATUS_NOMEM);
SAME_CODE(GPUCOMP_E_UNSUPPORTED, GC_E_UNSUPPORTED, GPUCOMP__STATUS__STATUS_UNSUPPORTED);
SAME_CODE(GPUCOMP_E_PROTOCOL, GC_E_PROTOCOL, GPUCOMP__STATUS__STATUS_PROTOCOL);
SAME_CODE(GPUCOMP_E_IO, GC_E_IO, GPUCOMP__STATUS__STATUS_IO);
SAME_CODE(GPUCOMP_E_CONNECT, GC_E_CONNECT, GPUCOMP__STATUS__STATUS_CONNECT);
SAME_CODE(GPUCOMP_E_BUSY, GC_E_BUSY, GPUCOMP__STATUS__STATUS_BUSY);
SAME_CODE(GPUCOMP_E_INTERNAL, GC_E_INTERNAL, GPUCOMP__STATUS__STATUS_INTERNAL);
SAME_CODE(GPUCOMP_E_DEVICE, GC_E_DEVICE, GPUCOMP__STATUS__STATUS_DEVICE);
SAME_CODE(GPUCOMP_E_PERMISSION, GC_E_PERMISSION, GPUCOMP__STATUS__STATUS_PERMISSION);
SAME_CODE(GPUCOMP_E_CANCELLED, GC_E_CANCELLED, GPUCOMP__STATUS__STATUS_CANCELLED);
SAME_CODE(GPUCOMP_E_IN_USE, GC_E_IN_USE, GPUCOMP__STATUS__STATUS_IN_USE);
SAME_CODE(GPUCOMP_E_TOO_SMALL, GC_E_TOO_SMALL, GPUCOMP__STATUS__STATUS_TOO_SMALL);
SAME_CODE(GPUCOMP_CODEC_RLE, GPUCOMP__CODEC__CODEC_RLE, GPUCOMP__CODEC__CODEC_RLE);
SAME_CODE(GPUCOMP_CODEC_BZIP2, GPUCOMP__CODEC__CODEC_BZIP2, GPUCOMP__CODEC__CODEC_BZIP2);
SAME_CODE(GPUCOMP_BACKEND_CPU, GPUCOMP__BACKEND__BACKEND_CPU, GPUCOMP__BACKEND__BACKEND_CPU);
SAME_CODE(GPUCOMP_BACKEND_GPU, GPUCOMP__BACKEND__BACKEND_GPU, GPUCOMP__BACKEND__BACKEND_GPU);

/* gpucomp_connect has no client to keep its error in. */
static _Thread_local gc_error connect_err;

void gpucomp_options_init(gpucomp_options *o, gpucomp_codec codec)
{
    if (o)
        *o = (gpucomp_options){
            .codec = codec, .level = 9, .element_width = 1, .chunk_size = 1u << 20, .max_output = 0
        };
}

int gpucomp_connect(const char *socket_path, gpucomp_client **out)
{
    if (!out)
        return gc_fail(&connect_err, GC_E_INVALID, "gpucomp_connect: out is NULL");
    return client_connect(gc_wire_socket_path(socket_path), false, out, &connect_err);
}

int gpucomp_open(const char *socket_path, gpucomp_client **out)
{
    if (!out)
        return gc_fail(&connect_err, GC_E_INVALID, "gpucomp_open: out is NULL");
    return client_connect(gc_wire_socket_path(socket_path), true, out, &connect_err);
}

int gpucomp_open_local(gpucomp_client **out)
{
    if (!out)
        return gc_fail(&connect_err, GC_E_INVALID, "gpucomp_open_local: out is NULL");
    return client_open_local(out, &connect_err);
}

void gpucomp_set_fallback(gpucomp_client *c, int on)
{
    if (c)
        c->fallback = on != 0;
}

const char *gpucomp_connect_error(void)
{
    return connect_err.msg;
}

void gpucomp_close(gpucomp_client *c)
{
    if (!c)
        return;
    client_async_destroy(c); /* before the socket closes: it holds the async locks */
    client_disconnect(c);
    client_release_staging(c);
    free(c);
}

void gpucomp_set_timeout(gpucomp_client *c, unsigned ms)
{
    if (c)
        c->timeout_ms = ms;
}

void gpucomp_set_reconnect(gpucomp_client *c, int on)
{
    if (c)
        c->reconnect = on != 0;
}

int client_wire_options(const gpucomp_options *o, Gpucomp__CodecOptions *w, gc_error *err)
{
    if (o->codec != GPUCOMP_CODEC_RLE && o->codec != GPUCOMP_CODEC_BZIP2)
        return gc_fail(err, GC_E_INVALID, "unknown codec %d", (int)o->codec);
    if (o->level < 0)
        return gc_fail(err, GC_E_INVALID, "level %d is out of range (1..9, or 0 for the default)", o->level);
    w->level = (uint32_t)o->level;
    w->element_width = o->element_width;
    w->chunk_size = o->chunk_size;
    return GC_OK;
}

static gpucomp_backend to_backend(Gpucomp__Backend b)
{
    return b == GPUCOMP__BACKEND__BACKEND_CPU || b == GPUCOMP__BACKEND__BACKEND_GPU ? (gpucomp_backend)b
                                                                                    : GPUCOMP_BACKEND_UNKNOWN;
}

/* The request fields every transform shares: op, codec, options, limit. */
static int prepare(gpucomp_client *c, Gpucomp__Op op, const gpucomp_options *o, Gpucomp__CodecOptions *wire,
                   client_req *req)
{
    gpucomp_options defaults;
    if (!o) { /* the one default codec, as in the gpucomp CLI (gpucomp.h) */
        gpucomp_options_init(&defaults, GPUCOMP_CODEC_BZIP2);
        o = &defaults;
    }
    int rc = client_wire_options(o, wire, &c->err);
    *req = (client_req){ .op = op,
                         .codec = (Gpucomp__Codec)o->codec,
                         .options = wire,
                         .max_output = op == GPUCOMP__OP__OP_DECOMPRESS ? o->max_output : 0 };
    return rc;
}

static void note_success(gpucomp_client *c, const client_reply *rep)
{
    c->last_backend = to_backend(rep->backend);
    c->last_engine_ns = rep->engine_ns;
}

/* The request in this process (client_local.c); o NULL: bzip2's defaults. */
static int run_local(gc_error *err, gpucomp_backend *backend, Gpucomp__Op op, const gpucomp_options *o,
                     const void *src, size_t src_len, void **dst, size_t *dst_len)
{
    gpucomp_options defaults;
    if (!o) {
        gpucomp_options_init(&defaults, GPUCOMP_CODEC_BZIP2);
        o = &defaults;
    }
    uint8_t *out = NULL;
    int rc = client_local_run(op == GPUCOMP__OP__OP_DECOMPRESS, o, src, src_len, &out, dst_len, err);
    *dst = out;
    if (rc == GC_OK)
        *backend = GPUCOMP_BACKEND_LOCAL;
    return rc;
}

static int transform_remote(gpucomp_client *c, Gpucomp__Op op, const gpucomp_options *o, const void *src,
                            size_t src_len, void **dst, size_t *dst_len)
{
    Gpucomp__CodecOptions wire = GPUCOMP__CODEC_OPTIONS__INIT;
    client_req req;
    int rc = prepare(c, op, o, &wire, &req);
    if (rc != GC_OK)
        return rc;
    req.src = src;
    req.src_len = src_len;
    client_reply rep;
    rc = CLIENT_STAGING_UNAVAILABLE;
    /* Not for a request that is going to be refused: copying it first would be wasted. */
    bool refused = (c->fd < 0 && !c->reconnect) || (c->max_request && src_len > c->max_request);
    if (src_len && src_len >= c->memfd_threshold && !refused)
        rc = client_call_staged(c, &req, src, &rep);
    if (rc == CLIENT_STAGING_UNAVAILABLE)
        rc = client_call(c, &req, &rep);
    if (rc == GC_OK) {
        *dst = rep.buf;
        *dst_len = rep.len;
        rep.buf = NULL;
        note_success(c, &rep);
    }
    client_reply_free(&rep);
    return rc;
}

/* Through the daemon; in this process when c has none (gpucomp_open), or, with fallback, when it cannot take it. */
static int transform_with(gpucomp_client *c, bool fallback, Gpucomp__Op op, const gpucomp_options *o,
                          const void *src, size_t src_len, void **dst, size_t *dst_len)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    if (dst)
        *dst = NULL;
    if (dst_len)
        *dst_len = 0;
    if (!dst || !dst_len || (!src && src_len))
        return gc_fail(&c->err, GC_E_INVALID, "NULL buffer argument");
    int rc = c->local_only ? GC_E_CONNECT : transform_remote(c, op, o, src, src_len, dst, dst_len);
    if (c->local_only || (fallback && client_daemon_unavailable(rc))) {
        rc = run_local(&c->err, &c->last_backend, op, o, src, src_len, dst, dst_len);
        c->last_engine_ns = 0;
    }
    return rc;
}

static int transform(gpucomp_client *c, Gpucomp__Op op, const gpucomp_options *o, const void *src, size_t src_len,
                     void **dst, size_t *dst_len)
{
    return transform_with(c, c && c->fallback, op, o, src, src_len, dst, dst_len);
}

static int transform_fd(gpucomp_client *c, Gpucomp__Op op, const gpucomp_options *o, int in_fd, size_t in_len,
                        int out_fd, size_t *out_len)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    if (out_len)
        *out_len = 0;
    if (!out_len || in_fd < 0 || out_fd < 0)
        return gc_fail(&c->err, GC_E_INVALID, "invalid descriptor or NULL out_len argument");
    Gpucomp__CodecOptions wire = GPUCOMP__CODEC_OPTIONS__INIT;
    client_req req;
    int rc = prepare(c, op, o, &wire, &req);
    if (rc != GC_OK)
        return rc;
    req.src_len = in_len;
    req.via_fd = true;
    req.in_fd = in_fd;
    req.out_fd = out_fd;
    client_reply rep;
    rc = client_call(c, &req, &rep);
    if (rc == GC_OK) {
        *out_len = rep.len;
        note_success(c, &rep);
    }
    client_reply_free(&rep);
    return rc;
}

int gpucomp_compress(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len, void **dst,
                     size_t *dst_len)
{
    return transform(c, GPUCOMP__OP__OP_COMPRESS, o, src, src_len, dst, dst_len);
}

int gpucomp_decompress(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len, void **dst,
                       size_t *dst_len)
{
    return transform(c, GPUCOMP__OP__OP_DECOMPRESS, o, src, src_len, dst, dst_len);
}

void gpucomp_free(void *buf)
{
    free(buf);
}

int gpucomp_compress_fd(gpucomp_client *c, const gpucomp_options *o, int in_fd, size_t in_len, int out_fd,
                        size_t *out_len)
{
    return transform_fd(c, GPUCOMP__OP__OP_COMPRESS, o, in_fd, in_len, out_fd, out_len);
}

int gpucomp_decompress_fd(gpucomp_client *c, const gpucomp_options *o, int in_fd, size_t in_len, int out_fd,
                          size_t *out_len)
{
    return transform_fd(c, GPUCOMP__OP__OP_DECOMPRESS, o, in_fd, in_len, out_fd, out_len);
}

int gpucomp_memfd_create(const char *name)
{
    return gc_memfd_create(name && *name ? name : "gpucomp");
}

/* OP_REGISTER / OP_UNREGISTER: one descriptor out, an empty answer back. */
static int registration(gpucomp_client *c, Gpucomp__Op op, int fd, size_t size, int *pinned)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    if (pinned)
        *pinned = 0;
    if (fd < 0)
        return gc_fail(&c->err, GC_E_INVALID, "invalid descriptor");
    if (op == GPUCOMP__OP__OP_REGISTER && size == 0)
        return gc_fail(&c->err, GC_E_INVALID, "cannot register 0 bytes");
    client_req req = { .op = op, .src_len = size, .via_fd = true, .in_fd = fd, .out_fd = -1 };
    client_reply rep;
    int rc = client_call(c, &req, &rep);
    if (rc == GC_OK && pinned)
        *pinned = rep.backend == GPUCOMP__BACKEND__BACKEND_GPU;
    client_reply_free(&rep);
    return rc;
}

int gpucomp_register_fd(gpucomp_client *c, int fd, size_t size, int *pinned)
{
    return registration(c, GPUCOMP__OP__OP_REGISTER, fd, size, pinned);
}

int gpucomp_unregister_fd(gpucomp_client *c, int fd)
{
    return registration(c, GPUCOMP__OP__OP_UNREGISTER, fd, 0, NULL);
}

int gpucomp_ping(gpucomp_client *c)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    client_req req = { .op = GPUCOMP__OP__OP_PING };
    client_reply rep;
    int rc = client_call(c, &req, &rep);
    client_reply_free(&rep);
    return rc;
}

/* The fields added since 0.2.0 sit in what was padding: the structs keep
 * their size and every older field its offset (the library's ABI). */
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(gpucomp_device_stats) == 192 && offsetof(gpucomp_device_stats, bytes_in_flight) == 184,
               "gpucomp_device_stats layout changed");
_Static_assert(sizeof(gpucomp_stats) == 3976 && offsetof(gpucomp_stats, devices) == 112 &&
                   offsetof(gpucomp_stats, routing) == 3204,
               "gpucomp_stats layout changed");
#endif

static void copy_lane(const Gpucomp__LaneStats *d, gpucomp_device_stats *out)
{
    *out = (gpucomp_device_stats){
        .batches = d->batches,
        .requests = d->requests,
        .bytes_in = d->bytes_in,
        .bytes_out = d->bytes_out,
        .h2d_ns = d->h2d_ns,
        .kernel_ns = d->kernel_ns,
        .d2h_ns = d->d2h_ns,
        .wall_ns = d->wall_ns,
        .fallbacks = d->fallbacks,
        .queue_depth = d->queue_depth,
        .retired = d->retired != 0,
        .requests_in_flight = d->requests_in_flight,
        .bytes_in_flight = d->bytes_in_flight,
        .gpu = d->gpu,
    };
    snprintf(out->name, sizeof out->name, "%s", d->name ? d->name : "");
}

static void copy_stats(const Gpucomp__Stats *s, gpucomp_stats *out)
{
    *out = (gpucomp_stats){
        .uptime_ms = s->uptime_ms,
        .connections = s->connections,
        .requests_ok = s->requests_ok,
        .requests_failed = s->requests_failed,
        .bytes_in = s->bytes_in,
        .bytes_out = s->bytes_out,
        .worker_threads = s->worker_threads,
        .queue_depth = s->queue_depth,
        .memory_in_use = s->memory_in_use,
        .memory_budget = s->memory_budget,
        .cpu_requests = s->cpu_requests,
        .gpu_requests = s->gpu_requests,
        .registered_bytes = s->registered_bytes,
        .register_limit = s->register_limit,
        .gpus = s->gpus,
        .gpu_by_load = s->gpu_by_load > UINT32_MAX ? UINT32_MAX : (uint32_t)s->gpu_by_load,
    };
    snprintf(out->backend, sizeof out->backend, "%s", s->backend ? s->backend : "");
    /* A daemon with more lanes than the struct holds: report the first ones. */
    size_t n = s->n_lanes < GPUCOMP_MAX_DEVICES ? s->n_lanes : GPUCOMP_MAX_DEVICES;
    for (size_t i = 0; i < n; i++)
        copy_lane(s->lanes[i], &out->devices[i]);
    out->gpu_devices = (uint32_t)n;
    size_t m = s->n_routing < GPUCOMP_MAX_CODECS ? s->n_routing : GPUCOMP_MAX_CODECS;
    for (size_t i = 0; i < m; i++)
        snprintf(out->routing[i], sizeof out->routing[i], "%s", s->routing[i] ? s->routing[i] : "");
    out->n_routing = (uint32_t)m;
}

int gpucomp_stats_get(gpucomp_client *c, gpucomp_stats *out)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    if (!out)
        return gc_fail(&c->err, GC_E_INVALID, "NULL stats argument");
    client_req req = { .op = GPUCOMP__OP__OP_STATS };
    client_reply rep;
    int rc = client_call(c, &req, &rep);
    if (rc == GC_OK && !rep.head->response->stats)
        rc = gc_fail(&c->err, GC_E_PROTOCOL, "gpucompd answered STATS without statistics");
    if (rc == GC_OK)
        copy_stats(rep.head->response->stats, out);
    client_reply_free(&rep);
    return rc;
}

gpucomp_backend gpucomp_last_backend(const gpucomp_client *c)
{
    return c ? c->last_backend : GPUCOMP_BACKEND_UNKNOWN;
}

const char *gpucomp_last_error(const gpucomp_client *c)
{
    return c ? c->err.msg : local_err.msg;
}

const char *gpucomp_strerror(int code)
{
    return gc_status_str(code);
}

const char *gpucomp_version(void)
{
    return PACKAGE_VERSION;
}

const char *gpucomp_server_version(const gpucomp_client *c)
{
    return c ? c->server_version : "";
}

uint64_t gpucomp_max_request_size(const gpucomp_client *c)
{
    return c ? c->max_request : 0;
}

uint64_t gpucomp_last_engine_ns(const gpucomp_client *c)
{
    return c ? c->last_engine_ns : 0;
}

/* Into the caller's buffer: the whole output is made, then copied if it fits. */
static int transform_into(gpucomp_client *c, Gpucomp__Op op, const gpucomp_options *o, const void *src,
                          size_t src_len, void *dst, size_t dst_capacity, size_t *dst_len)
{
    gc_error *err = c ? &c->err : &local_err;
    if (!dst_len || (!dst && dst_capacity))
        return gc_fail(err, GC_E_INVALID, "NULL buffer argument");
    *dst_len = 0;
    if (!src && src_len)
        return gc_fail(err, GC_E_INVALID, "NULL buffer argument");
    void *out = NULL;
    size_t out_len = 0;
    gpucomp_backend ignored;
    int rc = c ? transform_with(c, true, op, o, src, src_len, &out, &out_len)
               : run_local(err, &ignored, op, o, src, src_len, &out, &out_len);
    if (rc == GC_OK && out_len > dst_capacity)
        rc = gc_fail(err, GC_E_TOO_SMALL, "the output is %zu bytes, the buffer holds %zu", out_len, dst_capacity);
    if (rc == GC_OK && out_len)
        memcpy(dst, out, out_len);
    if (rc == GC_OK || rc == GC_E_TOO_SMALL)
        *dst_len = out_len; /* too small: the size it takes */
    free(out);
    return rc;
}

int gpucomp_compress_into(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len, void *dst,
                          size_t dst_capacity, size_t *dst_len)
{
    return transform_into(c, GPUCOMP__OP__OP_COMPRESS, o, src, src_len, dst, dst_capacity, dst_len);
}

int gpucomp_decompress_into(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len,
                            void *dst, size_t dst_capacity, size_t *dst_len)
{
    return transform_into(c, GPUCOMP__OP__OP_DECOMPRESS, o, src, src_len, dst, dst_capacity, dst_len);
}

size_t gpucomp_compress_bound(const gpucomp_options *o, size_t src_len)
{
    gpucomp_options defaults;
    if (!o) {
        gpucomp_options_init(&defaults, GPUCOMP_CODEC_BZIP2);
        o = &defaults;
    }
    return client_local_bound(o, src_len);
}
