/*
 * client_async.c - asynchronous requests (gpucomp.h, "Asynchronous requests").
 *
 * Many requests share the connection: gpucomp_submit sends one whole request
 * and returns; gpucomp_async_poll reads responses as they come, in any
 * order, and runs each request's callback.
 *
 * Sending. gpucomp_submit writes the request's frames before it returns, so
 * "src is copied before return" holds with no copy at all for inline
 * requests (the bytes are in the socket); inputs of c->memfd_threshold bytes
 * and more are copied into a fresh memfd and travel as one frame with two
 * descriptors (a fresh output memfd per request too: requests in flight
 * must not share one). The write is a blocking one (bounded by
 * gpucomp_set_timeout when set) under send_mu, so the frames of two
 * requests never interleave. It blocks only while the daemon does not read,
 * and gpucompd stops reading a connection only while it has 256 requests in
 * flight or more than 64 MiB of answers the client has not read: a program
 * that submits a lot must call gpucomp_async_poll regularly (from another
 * thread, or between submissions), or its gpucomp_submit waits for answers
 * nobody reads.
 *
 * Locks. send_mu: one writer on the socket; mu: the table of outstanding
 * requests, c->fd and the id counter (always taken after send_mu, held
 * briefly); poll_mu: one poller at a time, so callbacks never run two at
 * once; callbacks run with only poll_mu held, so they may submit and cancel
 * (gpucomp_async_poll from a callback answers -GPUCOMP_E_IN_USE).
 *
 * A request is in the table from the moment its id is taken (under
 * send_mu, so a gpucomp_cancel that finds it sends its cancel after the
 * request) until its response's first frame arrives; async_outstanding
 * counts it until its callback has returned.
 *
 * Failures. A response that breaks the protocol (an id that is not
 * outstanding, interleaved responses, sizes that do not add up) or a
 * connection that ends leaves the byte stream unusable: every outstanding
 * request completes with GPUCOMP_E_IO (a connection-level error from the
 * daemon: with its status), the socket is closed and gpucomp_async_poll
 * returns -GPUCOMP_E_IO. Asynchronous requests are never resent. A
 * connection that ends while nothing is outstanding (the daemon restarted)
 * is noticed by gpucomp_async_poll too, which a readable descriptor
 * prompts: reported once, the socket closed (so the descriptor is no
 * longer readable); the next gpucomp_submit opens a new connection, as the
 * blocking calls do (gpucomp_set_reconnect), also when it finds the old
 * one hung up before any poll did.
 */
#include "client_async.h"
#include "client_io.h"
#include "fdpass.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct pending {
    uint64_t id;
    gpucomp_done_fn done;
    void *arg;
    uint64_t max_output; /* decompress: the caller's limit, 0 = none */
    int in_fd, out_fd;   /* memfd transport; -1 for an inline request */
    struct pending *next;
} pending;

struct client_async {
    pthread_mutex_t send_mu;
    pthread_mutex_t mu;
    pthread_mutex_t poll_mu;
    pending *table; /* outstanding requests whose answer has not begun (mu) */
    bool dead;      /* a write failed: the socket is shut down (mu) */
    /* The inline response being reassembled (poller only, poll_mu). */
    pending *cur;
    uint8_t *buf;
    size_t len, cap;
    uint64_t total;
};

/* Guards creating c->async (the first submissions may race). */
static pthread_mutex_t create_mu = PTHREAD_MUTEX_INITIALIZER;

/* The client whose callbacks this thread is running, to refuse a nested poll. */
static _Thread_local const gpucomp_client *polling_client;

static struct client_async *get_async(gpucomp_client *c, bool create)
{
    pthread_mutex_lock(&create_mu);
    struct client_async *a = c->async;
    if (!a && create) {
        a = calloc(1, sizeof *a);
        if (a) {
            pthread_mutex_init(&a->send_mu, NULL);
            pthread_mutex_init(&a->mu, NULL);
            pthread_mutex_init(&a->poll_mu, NULL);
            c->async = a;
        }
    }
    pthread_mutex_unlock(&create_mu);
    return a;
}

/* c->err under mu (the async calls may run on many threads; the message is the last one's). */
static int set_error(gpucomp_client *c, struct client_async *a, const gc_error *err)
{
    if (a)
        pthread_mutex_lock(&a->mu);
    c->err = *err;
    if (a)
        pthread_mutex_unlock(&a->mu);
    return err->code;
}

static void free_pending(pending *e)
{
    if (e->in_fd >= 0)
        close(e->in_fd);
    if (e->out_fd >= 0)
        close(e->out_fd);
    free(e);
}

/* Remove id from the table (mu held); NULL if it is not there. */
static pending *take_pending(struct client_async *a, uint64_t id)
{
    for (pending **p = &a->table; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            pending *e = *p;
            *p = e->next;
            e->next = NULL;
            return e;
        }
    }
    return NULL;
}

static bool has_pending(const struct client_async *a, uint64_t id)
{
    for (const pending *e = a->table; e; e = e->next)
        if (e->id == id)
            return true;
    return false;
}

/* ---- submitting ----------------------------------------------------------- */

/* The memfd transport for e: a fresh input memfd holding src, a fresh output memfd. False: use the socket. */
static bool stage_input(pending *e, const void *src, size_t len)
{
    e->in_fd = gpucomp_memfd_create("gpucomp-async-in");
    e->out_fd = gpucomp_memfd_create("gpucomp-async-out");
    if (e->in_fd >= 0 && e->out_fd >= 0 && client_memfd_fill(e->in_fd, src, len))
        return true;
    if (e->in_fd >= 0)
        close(e->in_fd);
    if (e->out_fd >= 0)
        close(e->out_fd);
    e->in_fd = e->out_fd = -1;
    return false;
}

/* The request's frames (send_mu held). */
static int send_frames(gpucomp_client *c, int fd, const Gpucomp__Request *first, const pending *e,
                       const uint8_t *src, size_t src_len, gc_error *err)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    if (e->in_fd >= 0) {
        Gpucomp__Request r = *first;
        r.payload_in_fd = true;
        r.last = true;
        f.request = &r;
        int fds[2] = { e->in_fd, e->out_fd };
        return client_io_send_frame_fds_timed(fd, &f, c->max_frame, fds, 2, c->timeout_ms, err);
    }
    size_t fragment = gc_wire_max_payload(c->max_frame);
    size_t off = 0;
    int rc;
    do {
        size_t n = src_len - off < fragment ? src_len - off : fragment;
        Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
        if (off == 0)
            r = *first;
        r.id = e->id;
        r.payload.data = n ? (uint8_t *)(uintptr_t)(src + off) : NULL;
        r.payload.len = n;
        r.last = off + n == src_len;
        f.request = &r;
        rc = client_io_send_frame_timed(fd, &f, c->max_frame, false, c->timeout_ms, err);
        off += n;
    } while (rc == GC_OK && off < src_len);
    return rc;
}

/* A write failed (send_mu held): nothing more can go out; the poller finds the end and fails the rest. */
static void mark_dead(gpucomp_client *c, struct client_async *a)
{
    pthread_mutex_lock(&a->mu);
    if (c->fd >= 0 && !a->dead)
        shutdown(c->fd, SHUT_RDWR);
    a->dead = true;
    pthread_mutex_unlock(&a->mu);
}

/* Nothing outstanding, and the socket readable: the daemon closed it or
 * sent a connection-level error (it sends nothing else unasked). */
static bool hung_up(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, 0) > 0;
}

/*
 * Before a submission (send_mu held): a connection that is gone is opened
 * again, as the blocking calls do (gpucomp_set_reconnect), once nothing is
 * outstanding on it (the poller still owes those requests their IO
 * completion). The poller must not be reading the socket meanwhile: poll_mu
 * is taken if free, or already held by this thread (a callback that
 * submits); otherwise the submission fails as on a closed connection.
 * GC_OK when there is nothing to do, or the new connection is up.
 */
static int reconnect_if_dead(gpucomp_client *c, struct client_async *a, gc_error *err)
{
    if (!c->reconnect || atomic_load(&c->async_outstanding) != 0)
        return GC_OK;
    bool mine = polling_client == c;
    if (!mine && pthread_mutex_trylock(&a->poll_mu) != 0)
        return GC_OK;
    int rc = GC_OK;
    pthread_mutex_lock(&a->mu);
    bool gone = c->fd < 0 || a->dead || (!a->cur && hung_up(c->fd));
    if (gone && !a->cur && atomic_load(&c->async_outstanding) == 0) {
        client_disconnect(c);
        pthread_mutex_unlock(&a->mu);
        gc_error cause;
        gc_error_clear(&cause);
        if (client_reopen(c, &cause) != GC_OK) /* clears a->dead on success */
            rc = gc_fail(err, GC_E_IO, "the connection to gpucompd was closed, and reconnecting failed: %s",
                         cause.msg);
    } else {
        pthread_mutex_unlock(&a->mu);
    }
    if (!mine)
        pthread_mutex_unlock(&a->poll_mu);
    return rc;
}

int gpucomp_submit(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const void *src,
                   size_t src_len, gpucomp_done_fn done, void *arg, uint64_t *id)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    if (id)
        *id = 0;
    gc_error err;
    gc_error_clear(&err);
    struct client_async *a = get_async(c, true);
    if (!a)
        return set_error(c, NULL, &(gc_error){ GC_E_NOMEM, "cannot allocate the asynchronous state" });
    if (!done || (!src && src_len))
        return set_error(c, a, &(gc_error){ GC_E_INVALID, "NULL callback or buffer argument" });
    if (dir != GPUCOMP_COMPRESS && dir != GPUCOMP_DECOMPRESS) {
        gc_fail(&err, GC_E_INVALID, "unknown direction %d", (int)dir);
        return set_error(c, a, &err);
    }
    if (c->stream)
        return set_error(c, a,
                         &(gc_error){ GC_E_IN_USE, "this client is in use by its open stream: "
                                                   "gpucomp_stream_free it first, or use another client" });
    gpucomp_options defaults;
    if (!o) {
        gpucomp_options_init(&defaults, GPUCOMP_CODEC_BZIP2);
        o = &defaults;
    }
    Gpucomp__CodecOptions wire = GPUCOMP__CODEC_OPTIONS__INIT;
    if (client_wire_options(o, &wire, &err) != GC_OK)
        return set_error(c, a, &err);
    if (c->max_request && src_len > c->max_request) {
        gc_fail(&err, GC_E_LIMIT, "%zu bytes of input is over gpucompd's request limit of %llu bytes", src_len,
                (unsigned long long)c->max_request);
        return set_error(c, a, &err);
    }
    pending *e = calloc(1, sizeof *e);
    if (!e)
        return set_error(c, a, &(gc_error){ GC_E_NOMEM, "cannot allocate a request" });
    e->done = done;
    e->arg = arg;
    e->in_fd = e->out_fd = -1;
    e->max_output = dir == GPUCOMP_DECOMPRESS ? o->max_output : 0;
    if (src_len && src_len >= c->memfd_threshold)
        stage_input(e, src, src_len); /* no memfds: the socket still works */

    Gpucomp__Request first = GPUCOMP__REQUEST__INIT;
    first.op = dir == GPUCOMP_COMPRESS ? GPUCOMP__OP__OP_COMPRESS : GPUCOMP__OP__OP_DECOMPRESS;
    first.codec = (Gpucomp__Codec)o->codec;
    first.options = &wire;
    first.total_size = src_len;
    first.max_output = e->max_output;

    pthread_mutex_lock(&a->send_mu);
    int rc = reconnect_if_dead(c, a, &err);
    pthread_mutex_lock(&a->mu);
    int fd = c->fd;
    if (rc != GC_OK || fd < 0 || a->dead) {
        pthread_mutex_unlock(&a->mu);
        pthread_mutex_unlock(&a->send_mu);
        free_pending(e);
        if (rc != GC_OK)
            return set_error(c, a, &err);
        return set_error(
            c, a,
            &(gc_error){ GC_E_IO, "the connection to gpucompd was closed after an earlier error; connect again" });
    }
    e->id = client_take_id(c);
    uint64_t my_id = e->id;
    first.id = my_id;
    e->next = a->table;
    a->table = e;
    atomic_fetch_add(&c->async_outstanding, 1u);
    pthread_mutex_unlock(&a->mu);

    rc = send_frames(c, fd, &first, e, src, src_len, &err);
    if (rc != GC_OK) {
        mark_dead(c, a);
        pthread_mutex_lock(&a->mu);
        pending *mine = take_pending(a, my_id);
        pthread_mutex_unlock(&a->mu);
        pthread_mutex_unlock(&a->send_mu);
        if (mine) {
            free_pending(mine);
            atomic_fetch_sub(&c->async_outstanding, 1u);
            if (rc != GC_E_IO && rc != GC_E_NOMEM && rc != GC_E_INTERNAL)
                rc = gc_fail(&err, GC_E_IO, "sending the request failed: %s", err.msg);
            return set_error(c, a, &err);
        }
        /* The daemon already answered it (a refusal): the poller completes it. */
    } else {
        pthread_mutex_unlock(&a->send_mu);
    }
    if (id)
        *id = my_id;
    return GPUCOMP_OK;
}

int gpucomp_cancel(gpucomp_client *c, uint64_t id)
{
    if (!c)
        return GPUCOMP_E_INVALID;
    struct client_async *a = get_async(c, false);
    gc_error err;
    gc_error_clear(&err);
    if (!a || id == 0) {
        gc_fail(&err, GC_E_INVALID, "request %llu is not outstanding on this client", (unsigned long long)id);
        return set_error(c, a, &err);
    }
    /* send_mu first: a request found in the table has all its frames sent. */
    pthread_mutex_lock(&a->send_mu);
    pthread_mutex_lock(&a->mu);
    bool found = has_pending(a, id);
    int fd = a->dead ? -1 : c->fd;
    pthread_mutex_unlock(&a->mu);
    int rc = GC_OK;
    if (!found) {
        rc = gc_fail(&err, GC_E_INVALID,
                     "request %llu is not outstanding on this client (or its answer is on the way)",
                     (unsigned long long)id);
    } else if (fd >= 0) {
        Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
        r.id = id;
        r.op = GPUCOMP__OP__OP_CANCEL;
        r.last = true;
        Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
        f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
        f.request = &r;
        rc = client_io_send_frame_timed(fd, &f, c->max_frame, false, c->timeout_ms, &err);
        if (rc != GC_OK)
            mark_dead(c, a);
    }
    /* fd < 0: the connection is gone, the poller completes the request with IO. */
    pthread_mutex_unlock(&a->send_mu);
    return rc == GC_OK ? GPUCOMP_OK : set_error(c, a, &err);
}

int gpucomp_async_fd(gpucomp_client *c)
{
    if (!c)
        return -1;
    struct client_async *a = get_async(c, false);
    if (!a)
        return c->fd;
    pthread_mutex_lock(&a->mu);
    int fd = c->fd;
    pthread_mutex_unlock(&a->mu);
    return fd;
}

unsigned gpucomp_async_pending(gpucomp_client *c)
{
    return c ? atomic_load(&c->async_outstanding) : 0;
}

/* ---- completing ----------------------------------------------------------- */

/* Run e's callback (no lock but poll_mu held) and forget it. */
static void complete(gpucomp_client *c, pending *e, int status, const char *msg, const void *out, size_t len,
                     int *ran)
{
    static const uint8_t empty[1];
    e->done(e->arg, e->id, status, msg ? msg : "", out ? out : (status == GPUCOMP_OK ? empty : NULL), len);
    free_pending(e);
    atomic_fetch_sub(&c->async_outstanding, 1u);
    (*ran)++;
}

static void drop_assembly(struct client_async *a)
{
    free(a->buf);
    a->buf = NULL;
    a->len = a->cap = 0;
    a->total = 0;
}

/*
 * The connection is finished: close it, complete everything outstanding
 * with status (and the request being reassembled too), msg saying why.
 */
static void fail_all(gpucomp_client *c, struct client_async *a, int fd, int status, const char *msg, int *ran)
{
    shutdown(fd, SHUT_RDWR); /* a submitter blocked in a write gives up send_mu */
    pthread_mutex_lock(&a->send_mu);
    pthread_mutex_lock(&a->mu);
    client_disconnect(c);
    pending *list = a->table;
    a->table = NULL;
    c->err.code = (gc_status)status;
    snprintf(c->err.msg, sizeof c->err.msg, "%s", msg);
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_unlock(&a->send_mu);
    if (a->cur) {
        pending *e = a->cur;
        a->cur = NULL;
        drop_assembly(a);
        complete(c, e, status, msg, NULL, 0, ran);
    }
    while (list) {
        pending *e = list;
        list = e->next;
        complete(c, e, status, msg, NULL, 0, ran);
    }
}

/*
 * A memfd request's answer: one frame saying how much the daemon wrote into
 * the output memfd, which must really hold it. The callback reads a
 * read-only mapping of it.
 */
static int finish_fd_response(gpucomp_client *c, pending *e, const Gpucomp__Response *r, gc_error *err, int *ran)
{
    if (!r->payload_in_fd || r->payload.len || !r->last)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd answered memfd request %llu with an inline response",
                       (unsigned long long)e->id);
    struct stat st;
    if (fstat(e->out_fd, &st) != 0)
        return gc_fail(err, GC_E_IO, "cannot stat the output memfd: %s", strerror(errno));
    if ((uint64_t)st.st_size < r->total_size || r->total_size >= SIZE_MAX)
        return gc_fail(err, GC_E_PROTOCOL,
                       "gpucompd announced %llu bytes of output, but the output memfd holds %lld",
                       (unsigned long long)r->total_size, (long long)st.st_size);
    size_t len = (size_t)r->total_size;
    if (e->max_output && len > e->max_output) {
        complete(c, e, GPUCOMP_E_LIMIT, "gpucompd produced more output than max_output allows", NULL, 0, ran);
        return GC_OK;
    }
    if (len == 0) {
        complete(c, e, GPUCOMP_OK, "", NULL, 0, ran);
        return GC_OK;
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, e->out_fd, 0);
    if (map == MAP_FAILED) {
        complete(c, e, GPUCOMP_E_NOMEM, "cannot map the output memfd", NULL, 0, ran);
        return GC_OK;
    }
    complete(c, e, GPUCOMP_OK, "", map, len, ran);
    munmap(map, len);
    return GC_OK;
}

static int append(struct client_async *a, const Gpucomp__Response *r, gc_error *err)
{
    size_t n = r->payload.len;
    if (n > a->total - a->len)
        return gc_fail(err, GC_E_PROTOCOL,
                       "gpucompd sent more than the %llu bytes of output it announced for request %llu",
                       (unsigned long long)a->total, (unsigned long long)a->cur->id);
    if (a->len + n > a->cap) {
        size_t cap = a->cap * 2 < a->total ? a->cap * 2 : (size_t)a->total;
        cap = cap < a->len + n ? a->len + n : cap;
        uint8_t *p = realloc(a->buf, cap);
        if (!p)
            return gc_fail(err, GC_E_NOMEM, "cannot grow a response buffer to %zu bytes", cap);
        a->buf = p;
        a->cap = cap;
    }
    if (n)
        memcpy(a->buf + a->len, r->payload.data, n);
    a->len += n;
    return GC_OK;
}

/* The current inline response after a frame: complete it on its last frame. */
static int maybe_finish_inline(gpucomp_client *c, struct client_async *a, const Gpucomp__Response *r,
                               gc_error *err, int *ran)
{
    if (!r->last)
        return GC_OK;
    if (a->len != a->total)
        return gc_fail(err, GC_E_PROTOCOL,
                       "gpucompd ended the response to request %llu after %zu of the %llu bytes it announced",
                       (unsigned long long)a->cur->id, a->len, (unsigned long long)a->total);
    pending *e = a->cur;
    a->cur = NULL;
    complete(c, e, GPUCOMP_OK, "", a->buf, a->len, ran);
    drop_assembly(a);
    return GC_OK;
}

/* One frame. GC_OK, or err says why the connection cannot go on (*conn_status: the status to fail with). */
static int handle_frame(gpucomp_client *c, struct client_async *a, const Gpucomp__Frame *f, gc_error *err,
                        int *conn_status, int *ran)
{
    *conn_status = GPUCOMP_E_IO;
    if (f->body_case != GPUCOMP__FRAME__BODY_RESPONSE)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd sent a %s frame where a Response was expected",
                       client_frame_kind(f));
    const Gpucomp__Response *r = f->response;
    const char *msg = r->message && *r->message ? r->message : gc_status_str(client_wire_status(r->status));
    if (r->id == 0) {
        *conn_status =
            r->status == GPUCOMP__STATUS__STATUS_OK ? GPUCOMP_E_PROTOCOL : client_wire_status(r->status);
        return gc_fail(err, *conn_status, "gpucompd closed the connection: %s", msg);
    }
    if (a->cur) { /* the next frame of the response being reassembled */
        if (r->id != a->cur->id)
            return gc_fail(err, GC_E_PROTOCOL,
                           "gpucompd interleaved the response to request %llu with one to %llu",
                           (unsigned long long)a->cur->id, (unsigned long long)r->id);
        if (r->status != GPUCOMP__STATUS__STATUS_OK) {
            if (!r->last)
                return gc_fail(err, GC_E_PROTOCOL, "gpucompd sent an error frame that is not last");
            pending *e = a->cur;
            a->cur = NULL;
            drop_assembly(a);
            complete(c, e, client_wire_status(r->status), msg, NULL, 0, ran);
            return GC_OK;
        }
        int rc = append(a, r, err);
        return rc == GC_OK ? maybe_finish_inline(c, a, r, err, ran) : rc;
    }
    pthread_mutex_lock(&a->mu);
    pending *e = take_pending(a, r->id);
    pthread_mutex_unlock(&a->mu);
    if (!e)
        return gc_fail(err, GC_E_PROTOCOL, "gpucompd answered request id %llu, which is not outstanding",
                       (unsigned long long)r->id);
    if (r->status != GPUCOMP__STATUS__STATUS_OK) {
        bool last = r->last;
        complete(c, e, client_wire_status(r->status), msg, NULL, 0, ran);
        return last ? GC_OK : gc_fail(err, GC_E_PROTOCOL, "gpucompd sent an error frame that is not last");
    }
    if (e->in_fd >= 0) {
        int rc = finish_fd_response(c, e, r, err, ran);
        if (rc != GC_OK)
            complete(c, e, GPUCOMP_E_IO, err->msg, NULL, 0, ran);
        return rc;
    }
    int rc = GC_OK;
    if (r->payload_in_fd)
        rc = gc_fail(err, GC_E_PROTOCOL, "gpucompd answered inline request %llu with payload_in_fd",
                     (unsigned long long)e->id);
    else if (e->max_output && r->total_size > e->max_output)
        rc = gc_fail(err, GC_E_LIMIT, "gpucompd announced %llu bytes of output, over the limit of %llu",
                     (unsigned long long)r->total_size, (unsigned long long)e->max_output);
    else if (r->total_size >= SIZE_MAX)
        rc = gc_fail(err, GC_E_NOMEM, "gpucompd announced %llu bytes of output, more than this process can hold",
                     (unsigned long long)r->total_size);
    if (rc != GC_OK) {
        complete(c, e, GPUCOMP_E_IO, err->msg, NULL, 0, ran);
        return rc;
    }
    /* Grow with what arrives: a huge announced total must not make us allocate it. */
    a->cur = e;
    a->total = r->total_size;
    a->len = 0;
    a->cap = a->total < c->max_frame ? (size_t)a->total : c->max_frame;
    a->buf = malloc(a->cap ? a->cap : 1);
    if (!a->buf)
        return gc_fail(err, GC_E_NOMEM, "cannot allocate %zu bytes for a response", a->cap);
    rc = append(a, r, err);
    return rc == GC_OK ? maybe_finish_inline(c, a, r, err, ran) : rc;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int poll_locked(gpucomp_client *c, struct client_async *a, int timeout_ms)
{
    int ran = 0;
    int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    for (;;) {
        pthread_mutex_lock(&a->mu);
        int fd = c->fd;
        pthread_mutex_unlock(&a->mu);
        if (fd < 0)
            return ran ? ran : -GPUCOMP_E_IO;
        /* Nothing to wait for, but still a look at the socket: readable
         * now means the daemon hung up (or closed the connection with an
         * error), which is reported here, once, and the socket closed, so
         * the caller's event loop does not find it readable forever. */
        bool idle = atomic_load(&c->async_outstanding) == 0 && !a->cur;
        int wait = 0;
        if (idle) {
            wait = 0;
        } else if (ran == 0 && timeout_ms < 0) {
            wait = -1;
        } else if (ran == 0 && timeout_ms > 0) {
            int64_t left = deadline - now_ms();
            wait = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
        }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int n = poll(&p, 1, wait);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            char msg[128];
            snprintf(msg, sizeof msg, "waiting on the gpucompd socket: %s", strerror(errno));
            fail_all(c, a, fd, GPUCOMP_E_IO, msg, &ran);
            return -GPUCOMP_E_IO;
        }
        if (n == 0 || (idle && ran))
            return ran; /* after callbacks, the hang-up waits for the next poll */
        /* A frame has begun to arrive: read it whole (bounded by gpucomp_set_timeout). */
        gc_error err;
        gc_error_clear(&err);
        Gpucomp__Frame *f = NULL;
        int conn_status = GPUCOMP_E_IO;
        int rc = client_io_recv_frame_timed(fd, c->max_frame, &f, c->timeout_ms, &err);
        if (rc == GC_OK)
            rc = handle_frame(c, a, f, &err, &conn_status, &ran);
        gc_wire_free(f);
        if (rc != GC_OK) {
            fail_all(c, a, fd, conn_status, err.msg, &ran);
            return -GPUCOMP_E_IO;
        }
    }
}

int gpucomp_async_poll(gpucomp_client *c, int timeout_ms)
{
    if (!c)
        return -GPUCOMP_E_INVALID;
    if (polling_client == c)
        return -GPUCOMP_E_IN_USE; /* from one of c's callbacks */
    struct client_async *a = get_async(c, false);
    if (!a)
        return c->fd < 0 ? -GPUCOMP_E_IO : 0;
    pthread_mutex_lock(&a->poll_mu);
    polling_client = c;
    int rc = poll_locked(c, a, timeout_ms);
    polling_client = NULL;
    pthread_mutex_unlock(&a->poll_mu);
    return rc;
}

void client_async_connection_reset(gpucomp_client *c)
{
    struct client_async *a = get_async(c, false);
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->dead = false;
    pthread_mutex_unlock(&a->mu);
}

void client_async_destroy(gpucomp_client *c)
{
    struct client_async *a = c->async;
    if (!a)
        return;
    while (a->table) {
        pending *e = a->table;
        a->table = e->next;
        free_pending(e);
    }
    if (a->cur)
        free_pending(a->cur);
    drop_assembly(a);
    pthread_mutex_destroy(&a->send_mu);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->poll_mu);
    free(a);
    c->async = NULL;
    atomic_store(&c->async_outstanding, 0u);
}
