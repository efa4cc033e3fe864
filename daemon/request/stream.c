/* stream.c - stream sessions (see stream.h). */
#include "stream.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "codec.h"
#include "engine.h"
#include "fd_file.h"
#include "gc_clock.h"
#include "gc_mem.h"
#include "io_pool.h"
#include "log.h"
#include "response.h"
#include "server_state.h"
#include "shared_output.h"
#include "stream_ring.h"
#include "wire.h"

/* Output frames of a stream carry at most this: small enough that both ends
 * reuse heap memory for them instead of faulting in fresh pages per frame. */
#define STREAM_FRAGMENT ((size_t)1 << 20)
/* Past GCD_OUTPUT_HIGH_WATER (response.h) a stream takes no more parts, and none at all,
 * even with no part out, while this much is unread. */
#define STREAM_OUTPUT_MOST ((size_t)512 << 20)
/* A file stream takes no new part while this much of its output waits for the disk. */
#define STREAM_WRITE_MOST ((uint64_t)256 << 20)
/* A socket stream takes no new part while its parts' inputs, their outputs
 * (those at the engines counted at the largest part output seen) and its
 * connection's unread answers pass this: its reader's pace, not the depth,
 * bounds what one stream holds. */
#define STREAM_HELD_MOST ((uint64_t)512 << 20)
/* A written output buffer this large is let go of on a pool thread, not the loop. */
#define STREAM_RELEASE_OFF_LOOP ((size_t)8 << 20)
/* Slots for parts out: the most any stream may have (file streams; socket streams GCD_STREAM_DEPTH). */
#define STREAM_SLOTS (GCD_STREAM_DEPTH > 16 ? GCD_STREAM_DEPTH : 16)

struct gcd_stream {
    uint64_t id;
    gcd_stream_set *set; /* its connection's */
    gcd_request proto;   /* op, codec, options, max_output, uid: what every part copies */
    const gcd_stream_ops *ops;
    void *state; /* the codec's */
    /* input not yet in a part: buf[0..len) is the stream's input from offset base */
    uint8_t *buf;
    size_t len, cap;
    uint64_t charged; /* budget held for buf */
    uint64_t base;
    size_t peek_at;    /* a file stream: buf[0] is its input at base + peek_at (what its cut asked to see) */
    uint64_t received; /* input bytes the client sent */
    uint64_t consumed; /* input bytes taken into parts (told to the client) */
    uint64_t flush_at; /* a flush mark not yet cut at: input offset, 0 if none */
    bool input_ended;  /* the client's last frame came */
    bool final_out;    /* the part after which no input follows has gone out */
    bool client_done;  /* last frame or cancel: no more frames of this id */
    bool answered;     /* the final frame is sent (or the connection is gone): see answered() */
    bool garbage;      /* trailing garbage: the rest of the input is dropped */
    uint64_t garbage_offset;
    /* parts */
    uint64_t next_seq, emit_seq;
    unsigned in_flight;              /* parts being read or at the engines */
    unsigned depth;                  /* most parts out and not yet emitted (<= STREAM_SLOTS) */
    uint64_t part_out_most;          /* the largest output of a part back from the engines */
    gcd_request *out[STREAM_SLOTS];  /* being read or at the engines, by part_seq % STREAM_SLOTS */
    gcd_request *done[STREAM_SLOTS]; /* back from the engines, waiting for their turn */
    /* a file stream (docs/PROTOCOL.md, "File streams"): the input is in_fd's
     * bytes [0, in_size); its output goes to out_fd at out_total, or in frames (-1) */
    int in_fd, out_fd;
    uint64_t in_size;
    bool peeking;         /* a read of the bytes the codec's cut_file asked to see (into buf) is at the pool */
    bool drop_after_peek; /* the stream let go of buf while that read ran: peek_done frees it */
    /* a file stream its codec settles (gcd_stream_ops.settle): parts read span bytes each */
    size_t span;                /* 0: not one */
    uint64_t read_to;           /* the file's bytes before this are read, or being read, into parts */
    uint64_t settle_seq;        /* the next part to settle */
    bool settling;              /* its settle is at the pool */
    bool read_in[STREAM_SLOTS]; /* that part's read is back, by part_seq % STREAM_SLOTS */
    uint64_t submit_seq;        /* a stream not settled: the next part to go to the engines */
    uint8_t *rest;              /* what the last settled part left: the next part's first bytes */
    size_t rest_len;            /* (charged to the budget) */
    unsigned io;                /* reads and writes at the pool */
    uint64_t write_bytes;       /* output bytes at the pool (charged to the budget until written) */
    bool finishing;             /* the last output is out: the final frame waits for the writes */
    gcd_request *rerun;         /* the part its emit asked to run again (gcd_stream_rerun) */
    gcd_request *kept;          /* the part its emit placed (gcd_stream_put_placed): the placement frees it */
    /* placed outputs at the pool, in stream order (socket output is sent in that order) */
    struct stream_io *placing_head, *placing_tail;
    unsigned placing;
    gcd_request *parked; /* ... waiting, as new parts do, for unread answers to drain */
    /* a ring stream (docs/PROTOCOL.md, "Ring streams"): input offset x is at
     * x % ring_size of ring_fd, the client's memfd, until consumed passes it */
    int ring_fd;
    uint64_t ring_size;
    uint64_t ring_charged;      /* its input not yet taken (received - consumed), charged to the budget */
    bool reading[STREAM_SLOTS]; /* a ring stream's part whose read from the ring is at the pool */
    /* totals */
    uint64_t out_total, engine_ns;
    unsigned gpu_parts, cpu_parts;
    uint64_t waiting_since_ns; /* waiting for the client's input (or last frame) since (0: not waiting) */
    uint64_t opened_ns;        /* its timeline's zero (trace) */
    gcd_stream *next;          /* set->list */
};

static void pump(gcd_stream *s);
static void resubmit(gcd_stream *s, gcd_request *r);

static bool ring(const gcd_stream *s)
{
    return s->ring_fd >= 0;
}

/* A file or ring stream: its parts are read straight into their own buffers; buf holds only what the cut peeks at. */
static bool reads_parts(const gcd_stream *s)
{
    return s->in_fd >= 0 || ring(s);
}

/* ---- lifetime ---------------------------------------------------------- */

gcd_stream *gcd_stream_find(const gcd_stream_set *set, uint64_t id)
{
    for (gcd_stream *s = set->list; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

/* Free buf, or, while the pool reads into it, once that read is back (peek_done). */
static void drop_buffer(gcd_stream *s)
{
    s->drop_after_peek = s->peeking;
    if (s->peeking)
        return;
    free(s->buf);
    s->buf = NULL;
    s->len = s->cap = s->peek_at = 0;
    gcd_budget_release(s->set->server->budget, s->proto.uid, s->charged);
    s->charged = 0;
}

static void stream_free(gcd_stream *s)
{
    gcd_stream_set *set = s->set;
    for (gcd_stream **p = &set->list; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            set->n--;
            break;
        }
    for (unsigned i = 0; i < STREAM_SLOTS; i++)
        gcd_request_free(s->done[i]);
    gcd_request_free(s->parked);
    drop_buffer(s);
    free(s->rest);
    gcd_budget_release(s->set->server->budget, s->proto.uid, s->rest_len);
    if (s->in_fd >= 0)
        close(s->in_fd);
    if (s->out_fd >= 0)
        close(s->out_fd);
    if (ring(s))
        close(s->ring_fd);
    if (s->ring_charged)
        gcd_budget_release(set->server->budget, s->proto.uid, s->ring_charged);
    if (s->ops && s->ops->close && s->state)
        s->ops->close(s->state);
    else
        free(s->state);
    free(s);
}

/* Free s once nothing refers to it: its client has finished with the id, no part is out, no I/O runs. */
static void maybe_free(gcd_stream *s)
{
    bool gone = s->set->gone(s->set->owner);
    if (s->in_flight == 0 && s->io == 0 && (gone || (s->answered && s->client_done)))
        stream_free(s);
}

/* ---- answers ----------------------------------------------------------- */

/*
 * The final answer is sent: the stream no longer counts against
 * max_streams. Until its client's last frame it stays to swallow the
 * frames still coming (an id under the connection's cap), and that frame
 * must come within request-timeout.
 */
static void answered(gcd_stream *s)
{
    if (s->answered)
        return;
    s->answered = true;
    s->set->n_open--;
    if (!s->client_done)
        s->waiting_since_ns = gc_now_ns();
}

static bool can_send(const gcd_stream *s)
{
    return s->set->serving(s->set->owner) && !s->answered;
}

static void fragment_response(const gcd_stream *s, Gpucomp__Response *resp)
{
    *resp = (Gpucomp__Response)GPUCOMP__RESPONSE__INIT;
    resp->id = s->id;
    resp->stream = 1;
    resp->consumed = s->consumed;
}

static void send_fragment(gcd_stream *s, const uint8_t *data, size_t len)
{
    Gpucomp__Response resp;
    fragment_response(s, &resp);
    resp.payload.data = (uint8_t *)data;
    resp.payload.len = len;
    gcd_send_response(s->set->out, &resp);
}

/* Tell the client how much input was taken, so it may send more. */
static void send_credit(gcd_stream *s)
{
    if (can_send(s) && s->in_fd < 0) /* a file stream's client sends no more input */
        send_fragment(s, NULL, 0);
}

static void fail(gcd_stream *s, const gc_error *err);

/* Whether len more bytes may go out; if not, the stream has failed. */
static bool may_put(gcd_stream *s, size_t len)
{
    if (!can_send(s))
        return false;
    uint64_t max = s->proto.max_output;
    if (max && len > max - s->out_total) {
        gc_error err = { 0 };
        gc_fail(&err, GC_E_LIMIT, "the stream's output exceeds its max_output of %llu bytes",
                (unsigned long long)max);
        fail(s, &err);
        return false;
    }
    return true;
}

static void finish(gcd_stream *s);

/*
 * One event of a part's life at --log-level=debug (cut, submitted, back,
 * emitted, written), so a slow stream shows where its time went
 * (docs/ARCHITECTURE.md, "Streams").
 */
static void trace(const gcd_stream *s, const char *event, uint64_t seq, uint64_t a, uint64_t b)
{
    gcd_log(LOG_DEBUG, "stream %llu %.3f ms: %s %llu (%llu %llu)", (unsigned long long)s->id,
            (double)(gc_now_ns() - s->opened_ns) / 1e6, event, (unsigned long long)seq, (unsigned long long)a,
            (unsigned long long)b);
}

/* ---- file I/O (file streams; io_pool.h) --------------------------------- */

/* One transfer at the pool: a read into a part's input or into buf, a write of output, or a placement. */
typedef struct stream_io {
    gcd_io_task t;
    gcd_stream *s;
    gcd_request *part;         /* a part's read, or the part whose output is placed */
    gcd_shared_output *shared; /* a write: the buffer it writes from, one reference */
    gcd_stream_place_fn place; /* a placement: makes the part's output bytes on the pool thread */
    bool ready;                /* a placement back from the pool */
    struct stream_io *next;    /* the next placement in stream order */
    uint8_t *rest;             /* a settle: the bytes before the part's read, then those it leaves */
    size_t rest_len;
} stream_io;

static bool io_start(gcd_stream *s, stream_io *x, gc_error *err)
{
    gcd_io_pool *pool = s->set->server->io;
    if (!pool) {
        gc_fail(err, GC_E_IO, "the daemon is stopping");
        return false;
    }
    x->s = s;
    x->t.ctx = x;
    s->io++;
    s->set->io++;
    gcd_io_pool_submit(pool, &x->t);
    return true;
}

/* A transfer is back: free it; s may go now, and its connection with it. */
static void io_end(stream_io *x)
{
    gcd_stream *s = x->s;
    gcd_stream_set *set = s->set;
    free(x);
    s->io--;
    set->io--;
    maybe_free(s);
    if (set->io == 0 && set->gone(set->owner))
        set->released(set->owner);
}

static void io_error(gc_error *err, const gcd_io_task *t, const char *what)
{
    if (t->error)
        gc_fail(err, GC_E_IO, "%s the %s file at offset %llu: %s", t->write ? "writing" : "reading", what,
                (unsigned long long)t->offset, strerror(t->error));
    else
        gc_fail(err, GC_E_IO, "the input file shrank while it was read (%zu of %zu bytes at offset %llu)",
                t->moved, t->len, (unsigned long long)t->offset);
}

/* On a pool thread: a written output's reference, often its last (freeing a part's buffer unmaps it). */
static void release_work(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_shared_output_unref(x->shared);
    x->shared = NULL;
}

static void release_done(gcd_io_task *t)
{
    io_end(t->ctx);
}

/*
 * Let go of a reference to o after writing len bytes of it: a large
 * buffer's on a pool thread, so the loop (and the final frame) does not
 * wait while it is unmapped.
 */
static void release_written(gcd_stream *s, gcd_shared_output *o, size_t len)
{
    gc_error err = { 0 };
    stream_io *x = len >= STREAM_RELEASE_OFF_LOOP ? calloc(1, sizeof *x) : NULL;
    if (x) {
        x->shared = o;
        x->t = (gcd_io_task){ .fd = -1, .work = release_work, .done = release_done };
        if (io_start(s, x, &err))
            return;
        free(x);
    }
    gcd_shared_output_unref(o);
}

static void write_done(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_stream *s = x->s;
    gcd_budget_release(s->set->server->budget, s->proto.uid, t->len);
    s->write_bytes -= t->len;
    trace(s, "written at", t->offset, t->len, s->write_bytes);
    release_written(s, x->shared, t->len);
    if (!s->answered && (t->error || t->moved < t->len)) {
        gc_error err = { 0 };
        io_error(&err, t, "output");
        fail(s, &err);
    } else if (!s->answered && s->finishing) {
        finish(s); /* the final frame waited for the writes */
    } else if (!s->answered) {
        pump(s); /* the writes may have held it back */
    }
    io_end(x);
}

/*
 * Write len bytes at from (inside o's buffer; the caller gave this write one
 * reference to o) at the output's end. Until written they are charged as
 * answers queued on a socket are.
 */
static bool write_out(gcd_stream *s, gcd_shared_output *o, const uint8_t *from, size_t len)
{
    gc_error err = { 0 };
    stream_io *x = len ? calloc(1, sizeof *x) : NULL;
    if (!x) {
        gcd_shared_output_unref(o);
        if (len == 0)
            return true;
        gc_fail(&err, GC_E_NOMEM, "out of memory writing the output file");
        fail(s, &err);
        return false;
    }
    x->shared = o;
    x->t = (gcd_io_task){ .fd = s->out_fd,
                          .write = true,
                          .buf = (uint8_t *)from,
                          .len = len,
                          .offset = s->out_total,
                          .done = write_done };
    if (!io_start(s, x, &err)) {
        gcd_shared_output_unref(o);
        free(x);
        fail(s, &err);
        return false;
    }
    gcd_budget_charge(s->set->server->budget, s->proto.uid, len);
    s->write_bytes += len;
    s->out_total += len;
    return true;
}

/* A copy of data to the output file (small ones: headers, markers, spliced parts). */
static bool write_copy(gcd_stream *s, const void *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    gcd_shared_output *o = copy ? gcd_shared_output_wrap(copy) : NULL;
    if (!o) {
        gc_error err = { 0 };
        free(copy);
        gc_fail(&err, GC_E_NOMEM, "out of memory writing the output file");
        fail(s, &err);
        return false;
    }
    memcpy(copy, data, len);
    s->set->server->counters.stream_loop_copied += len;
    return write_out(s, o, copy, len);
}

static bool advance_consumed(gcd_stream *s);
static void try_settle(gcd_stream *s);

static void submit_in_order(gcd_stream *s);

static void read_done(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_stream *s = x->s;
    gcd_request *r = x->part;
    s->reading[r->part_seq % STREAM_SLOTS] = false;
    if (!s->answered && ring(s) && advance_consumed(s))
        send_credit(s); /* the client may write over what the pool has read */
    if (s->answered || !s->set->serving(s->set->owner) || t->error || t->moved < t->len) {
        gc_error err = { 0 };
        io_error(&err, t, "input");
        s->in_flight--;
        s->out[r->part_seq % STREAM_SLOTS] = NULL;
        gcd_request_free(r);
        if (!s->answered)
            fail(s, &err);
    } else if (s->span) {
        trace(s, "read", r->part_seq, r->received, s->in_flight);
        s->read_in[r->part_seq % STREAM_SLOTS] = true;
        try_settle(s);
    } else {
        trace(s, "read", r->part_seq, r->total_size, s->in_flight);
        s->read_in[r->part_seq % STREAM_SLOTS] = true;
        submit_in_order(s);
    }
    io_end(x);
}

/*
 * Parts read (read_in) go to the engines in stream order, whatever order
 * their reads come back in: output goes out in order, so a part that
 * overtook the ones before it would hold a lane while theirs waits.
 */
static void submit_in_order(gcd_stream *s)
{
    for (;;) {
        unsigned slot = (unsigned)(s->submit_seq % STREAM_SLOTS);
        gcd_request *r = s->out[slot];
        if (!r || r->part_seq != s->submit_seq || !s->read_in[slot])
            return;
        s->read_in[slot] = false;
        s->submit_seq++;
        s->set->submit(s->set->owner, r);
    }
}

/* On a pool thread: a ring stream's bytes out of its ring (t->offset is the input offset). */
static void ring_work(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    t->error = gcd_stream_ring_read(x->s->ring_fd, x->s->ring_size, t->offset, t->buf, t->len);
}

/* On the pool thread, after a settled part's read: what the codec can see in the read alone. */
static void scan_read(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    x->part->part_scan = x->s->ops->scan(&x->s->proto, t->buf, t->moved);
}

/* A file or ring stream's part goes to the engines once the pool has read its input. */
static void start_part(gcd_stream *s, gcd_request *r)
{
    gc_error err = { 0 };
    size_t len = s->span ? r->received : r->total_size; /* a settled part's read is its span */
    stream_io *x = reads_parts(s) && len ? calloc(1, sizeof *x) : NULL;
    if (!x && reads_parts(s) && len) {
        gc_fail(&err, GC_E_NOMEM, "out of memory reading the input file");
        x = NULL;
    } else if (x) {
        x->part = r;
        x->t = (gcd_io_task){
            .fd = s->in_fd, .buf = r->input, .len = len, .offset = r->part_offset, .done = read_done
        };
        if (ring(s))
            x->t.work = ring_work;
        if (s->span && s->ops->scan)
            x->t.after = scan_read;
        if (io_start(s, x, &err)) {
            s->reading[r->part_seq % STREAM_SLOTS] = ring(s);
            return;
        }
        free(x);
    } else if (s->span) {
        s->read_in[r->part_seq % STREAM_SLOTS] = true;
        try_settle(s);
        return;
    } else {
        s->read_in[r->part_seq % STREAM_SLOTS] = true; /* nothing to read */
        submit_in_order(s);
        return;
    }
    s->in_flight--;
    s->out[r->part_seq % STREAM_SLOTS] = NULL;
    gcd_request_free(r);
    fail(s, &err);
}

static bool reserve(gcd_stream *s, size_t more, gc_error *err);

/* ---- settled file streams (gcd_stream_ops.settle) ------------------------ */

/* Room in front of a part's read for the bytes the part before it leaves
 * (under a block's input, which is rarely more); more moves the part. */
#define SETTLE_ROOM ((size_t)4 << 20)

/*
 * On the pool: the bytes the last part left go in front of this part's
 * read, the codec says how many the part keeps, and a copy of the rest
 * goes with the task back to the loop (the part may be freed before the
 * next one settles).
 */
static void settle_work(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    const gcd_stream *s = x->s;
    gcd_request *r = x->part;
    size_t before = x->rest_len, len = before + (size_t)r->received;
    uint8_t *data = r->input - before;
    if (before > SETTLE_ROOM) {
        if (!(data = gc_big_malloc(len))) {
            t->error = ENOMEM;
            return;
        }
        memcpy(data + before, r->input, r->received);
        free(r->input_base);
        r->input_base = data;
    }
    if (before)
        memcpy(data, x->rest, before);
    free(x->rest);
    x->rest = NULL;
    size_t keep =
        r->part_final || r->part_flush ? len : s->ops->settle(&s->proto, data, len, r->part_scan, before);
    free(r->part_scan);
    r->part_scan = NULL;
    keep = keep < len ? keep : len;
    x->rest_len = len - keep;
    if (x->rest_len && !(x->rest = malloc(x->rest_len))) {
        t->error = ENOMEM;
        return;
    }
    if (x->rest_len)
        memcpy(x->rest, data + keep, x->rest_len);
    r->input = data;
    r->total_size = r->received = keep;
    r->part_offset -= before;
}

static void settle_done(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_stream *s = x->s;
    gcd_request *r = x->part;
    gcd_budget *b = s->set->server->budget;
    gc_error err = { 0 };
    unsigned slot = (unsigned)(r->part_seq % STREAM_SLOTS);
    s->settling = false;
    gcd_budget_release(b, s->proto.uid, t->len); /* the bytes it was given */
    if (t->len > SETTLE_ROOM && !t->error) {     /* the part moved to a larger buffer */
        gcd_budget_charge(b, s->proto.uid, t->len - SETTLE_ROOM);
        r->charged += t->len - SETTLE_ROOM;
        r->input_charge += t->len - SETTLE_ROOM;
    }
    if (t->error)
        gc_fail(&err, t->error == ENOMEM ? GC_E_NOMEM : GC_E_IO, "cutting a stream part: %s", strerror(t->error));
    else if (s->ops->prepare && !s->answered)
        s->ops->prepare(s->state, r, &err);
    if (!err.code && !s->answered && s->set->serving(s->set->owner)) {
        s->rest = x->rest;
        s->rest_len = x->rest_len;
        gcd_budget_charge(b, s->proto.uid, s->rest_len);
        s->settle_seq++;
        s->base = r->part_offset + r->total_size;
        if (!ring(s)) /* a ring's consumed moves as its reads come back (advance_consumed) */
            s->consumed = s->base;
        trace(s, "settled", r->part_seq, r->total_size, s->rest_len);
        s->set->submit(s->set->owner, r);
        try_settle(s);
        if (s->flush_at) /* a flush mark waited for this settle (flush_at_last_part) */
            pump(s);
    } else {
        free(x->rest);
        s->in_flight--;
        s->out[slot] = NULL;
        gcd_request_free(r);
        fail(s, &err);
    }
    io_end(x);
}

/* The next part in order, if its read is back and the one before it settled: to the pool to settle. */
static void try_settle(gcd_stream *s)
{
    unsigned slot = (unsigned)(s->settle_seq % STREAM_SLOTS);
    gcd_request *r = s->out[slot];
    if (s->settling || s->answered || !r || r->part_seq != s->settle_seq || !s->read_in[slot])
        return;
    gc_error err = { 0 };
    stream_io *x = calloc(1, sizeof *x);
    if (!x) {
        gc_fail(&err, GC_E_NOMEM, "out of memory cutting a stream part");
        fail(s, &err);
        return;
    }
    s->read_in[slot] = false; /* the task has it now */
    x->part = r;
    x->rest = s->rest;
    x->rest_len = s->rest_len;
    /* the settles are a chain that every part waits on: ahead of the reads queued behind it */
    x->t = (gcd_io_task){ .fd = -1, .len = s->rest_len, .first = true, .work = settle_work, .done = settle_done };
    s->rest = NULL;
    s->rest_len = 0; /* its charge goes with the task (t.len) */
    if (!io_start(s, x, &err)) {
        s->read_in[slot] = true;
        s->rest = x->rest;
        s->rest_len = x->rest_len;
        free(x);
        fail(s, &err);
        return;
    }
    s->settling = true;
}

static void peek_done(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_stream *s = x->s;
    s->peeking = false;
    if (s->drop_after_peek) {
        drop_buffer(s); /* ended or past garbage: what was read is not wanted */
        if (!s->answered)
            pump(s);
    } else if (!s->answered && (t->error || t->moved < t->len)) {
        gc_error err = { 0 };
        io_error(&err, t, "input");
        fail(s, &err);
    } else if (!s->answered) {
        s->len += t->len;
        pump(s);
    }
    io_end(x);
}

/*
 * A file (or ring) stream's cut asked to see the input's bytes [from, to)
 * past base: the pool reads into buf what it does not hold yet (buf holds
 * len bytes from peek_at; a window that moved starts over). Only the cut
 * reads them; each part is read again into its own buffer, so the loop
 * copies none of them.
 */
static bool peek(gcd_stream *s, size_t from, size_t to, gc_error *err)
{
    if (from != s->peek_at) {
        s->peek_at = from;
        s->len = 0;
    }
    size_t n = to - from - s->len;
    stream_io *x = calloc(1, sizeof *x);
    if (!x)
        return gc_fail(err, GC_E_NOMEM, "out of memory reading the input file") == GC_OK;
    if (reserve(s, n, err)) {
        x->t = (gcd_io_task){ .fd = s->in_fd,
                              .buf = s->buf + s->len,
                              .len = n,
                              .offset = s->base + s->peek_at + s->len,
                              .done = peek_done };
        if (ring(s))
            x->t.work = ring_work;
        if (io_start(s, x, err)) {
            s->peeking = true;
            return true;
        }
    }
    free(x);
    return false;
}

static size_t fragment_size(const gcd_stream *s)
{
    size_t most = gc_wire_max_payload(s->set->server->cfg.max_frame);
    return most < STREAM_FRAGMENT ? most : STREAM_FRAGMENT;
}

bool gcd_stream_put(gcd_stream *s, const void *data, size_t len)
{
    if (!may_put(s, len))
        return false;
    if (s->out_fd >= 0)
        return write_copy(s, data, len);
    size_t fragment = fragment_size(s);
    const uint8_t *p = data;
    s->set->server->counters.stream_loop_copied += len;
    while (len) {
        size_t n = len < fragment ? len : fragment;
        send_fragment(s, p, n);
        p += n;
        len -= n;
        s->out_total += n;
    }
    return true;
}

/* Output [from, to) of o's buffer, in frames that refer to it. False: the connection is closing. */
static bool send_shared(gcd_stream *s, gcd_shared_output *o, size_t from, size_t to)
{
    size_t fragment = fragment_size(s), fragments = (to - from + fragment - 1) / fragment;
    gcd_shared_output_ref(o, fragments);
    for (size_t k = 0; k < fragments; k++) {
        size_t n = to - from < fragment ? to - from : fragment;
        Gpucomp__Response resp;
        fragment_response(s, &resp);
        if (!gcd_send_response_ref(s->set->out, &resp, o->buf + from, n, gcd_shared_output_done, o)) {
            while (++k < fragments) /* the fragments never queued give their references back */
                gcd_shared_output_unref(o);
            return false;
        }
        from += n;
    }
    return true;
}

/* A part's output from what it has sent already to `to`, if the stream is at its turn. */
static bool put_part_output(gcd_stream *s, gcd_request *r, size_t to)
{
    if (to <= r->output_sent)
        return can_send(s);
    if (!may_put(s, to - r->output_sent))
        return false;
    if (!r->shared && !(r->shared = gcd_shared_output_wrap(r->output))) {
        bool ok = gcd_stream_put(s, r->output + r->output_sent, to - r->output_sent);
        r->output_sent = to;
        return ok;
    }
    size_t from = r->output_sent;
    r->output_sent = to;
    if (s->out_fd >= 0) {
        gcd_shared_output_ref(r->shared, 1);
        return write_out(s, r->shared, r->shared->buf + from, to - from);
    }
    s->out_total += to - from;
    return send_shared(s, r->shared, from, to);
}

/*
 * Sending a part's output by reference keeps the event loop from copying
 * every byte of a decompressed stream (and faulting in fresh pages for the
 * copies) while the next part waits for it.
 */
bool gcd_stream_put_output(gcd_stream *s, gcd_request *r)
{
    return put_part_output(s, r, r->output_len);
}

/*
 * A part that is the next to emit sends what its engine says is final
 * while the rest decodes, so the client writes it meanwhile; its
 * completion sends the rest. Another part's announcements wait for its
 * completion: output goes out in part order.
 */
void gcd_stream_part_progress(gcd_request *r)
{
    gcd_stream *s = r->stream;
    if (!s || !can_send(s) || r->part_seq != s->emit_seq || !r->shared)
        return;
    size_t final = atomic_load_explicit(&r->output_final, memory_order_acquire);
    put_part_output(s, r, final);
}

/* ---- placed output (gcd_stream_put_placed) ------------------------------ */

static void place_work(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    x->place(x->part);
}

/* A placement's bytes to the client, by reference to the part's buffer (a copy only without memory for that). */
static void send_placed(gcd_stream *s, gcd_request *r, size_t len)
{
    if (!r->shared && !(r->shared = gcd_shared_output_wrap(r->output))) {
        size_t fragment = fragment_size(s);
        for (size_t at = 0; at < len; at += fragment) {
            send_fragment(s, r->output + at, len - at < fragment ? len - at : fragment);
            s->set->server->counters.stream_loop_copied += len - at < fragment ? len - at : fragment;
        }
        return;
    }
    send_shared(s, r->shared, 0, len);
}

/*
 * Placements back from the pool, in stream order: a socket stream's are
 * sent now, in that order. Their parts are freed; the stream goes on (or
 * finishes) before the transfers end, as io_end may free it.
 */
static void placed_drain(gcd_stream *s)
{
    stream_io *ended = NULL, **tail = &ended;
    stream_io *x;
    while ((x = s->placing_head) && x->ready) {
        s->placing_head = x->next;
        if (!s->placing_head)
            s->placing_tail = NULL;
        s->placing--;
        if (s->out_fd < 0 && can_send(s) && x->t.len)
            send_placed(s, x->part, x->t.len);
        gcd_request_free(x->part);
        x->part = NULL;
        x->next = NULL;
        *tail = x;
        tail = &x->next;
    }
    if (!s->answered && s->final_out && s->in_flight == 0 && s->emit_seq == s->next_seq)
        finish(s);
    else if (!s->answered)
        pump(s);
    while ((x = ended)) {
        ended = x->next;
        io_end(x);
    }
}

static void placed_done(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_stream *s = x->s;
    s->write_bytes -= t->len;
    x->ready = true;
    if (!s->answered && (t->error || t->moved < t->len)) {
        gc_error err = { 0 };
        io_error(&err, t, "output");
        fail(s, &err);
    }
    placed_drain(s);
}

bool gcd_stream_put_placed(gcd_stream *s, gcd_request *r, size_t len, gcd_stream_place_fn place)
{
    if (!may_put(s, len))
        return false;
    gc_error err = { 0 };
    stream_io *x = calloc(1, sizeof *x);
    if (!x) {
        gc_fail(&err, GC_E_NOMEM, "out of memory placing a stream part's output");
        fail(s, &err);
        return false;
    }
    x->part = r;
    x->place = place;
    /* ahead of queued reads: a placement gives its part's place in the depth back */
    x->t = (gcd_io_task){ .fd = s->out_fd,
                          .write = true,
                          .buf = r->output,
                          .len = len,
                          .offset = s->out_total,
                          .first = true,
                          .work = place_work,
                          .done = placed_done };
    if (!io_start(s, x, &err)) {
        free(x);
        fail(s, &err);
        return false;
    }
    s->kept = r;
    s->write_bytes += len;
    s->out_total += len;
    if (s->placing_tail)
        s->placing_tail->next = x;
    else
        s->placing_head = x;
    s->placing_tail = x;
    s->placing++;
    return true;
}

void gcd_stream_mark_garbage(gcd_stream *s, uint64_t offset)
{
    s->garbage = true;
    s->garbage_offset = offset;
}

/* Cancel the parts still at the engines: their results are dropped when they return. */
static void cancel_parts(gcd_stream *s)
{
    for (unsigned i = 0; i < STREAM_SLOTS; i++) {
        if (s->out[i] && s->read_in[i]) { /* read, waiting for its settle or turn: nothing brings it back */
            gcd_request_free(s->out[i]);
            s->out[i] = NULL;
            s->read_in[i] = false;
            s->in_flight--;
        } else if (s->out[i]) {
            atomic_store_explicit(&s->out[i]->cancelled, true, memory_order_relaxed);
        }
    }
}

/* End the stream with an error: one final frame, its work dropped. */
static void fail(gcd_stream *s, const gc_error *err)
{
    if (s->answered)
        return;
    if (s->set->serving(s->set->owner)) {
        Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
        resp.id = s->id;
        resp.stream = 1;
        resp.last = 1;
        resp.consumed = s->consumed;
        resp.status = (Gpucomp__Status)err->code;
        resp.message = (char *)err->msg;
        gcd_log(LOG_DEBUG, "stream %llu: %s: %s", (unsigned long long)s->id, gc_status_str(err->code), err->msg);
        gcd_send_response(s->set->out, &resp);
    }
    answered(s);
    s->set->server->counters.requests_failed++;
    cancel_parts(s);
    drop_buffer(s);
}

/* The end of the output, then the final frame once every byte of it is written. */
static void finish(gcd_stream *s)
{
    gc_error err = { 0 };
    if (s->placing) /* the end follows every part's bytes: placed_drain comes back here */
        return;
    if (!s->finishing) {
        s->finishing = true;
        if (s->ops->finish && s->ops->finish(s->state, s, &err) != GC_OK) {
            fail(s, &err);
            return;
        }
    }
    if (!can_send(s) || s->write_bytes)
        return;
    trace(s, "final after", s->next_seq, s->out_total, s->engine_ns / 1000000);
    Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
    char msg[96];
    resp.id = s->id;
    resp.stream = 1;
    resp.last = 1;
    resp.consumed = s->consumed;
    resp.total_size = s->out_total;
    resp.engine_ns = s->engine_ns;
    resp.backend = s->gpu_parts > s->cpu_parts ? GPUCOMP__BACKEND__BACKEND_GPU : GPUCOMP__BACKEND__BACKEND_CPU;
    if (s->garbage) {
        snprintf(msg, sizeof msg, "trailing garbage after the compressed data (from input byte %llu) ignored",
                 (unsigned long long)s->garbage_offset);
        resp.message = msg;
        resp.trailing_garbage = 1;
        resp.garbage_offset = s->garbage_offset;
    }
    gcd_send_response(s->set->out, &resp);
    answered(s);
    gcd_counters *k = &s->set->server->counters;
    k->requests_ok++;
    k->bytes_in += s->received;
    k->bytes_out += s->out_total;
    if (resp.backend == GPUCOMP__BACKEND__BACKEND_GPU)
        k->gpu_requests++;
    else
        k->cpu_requests++;
}

/* ---- input ------------------------------------------------------------- */

/* Make room for more bytes in buf, charged to the client's user. */
static bool reserve(gcd_stream *s, size_t more, gc_error *err)
{
    if (s->cap - s->len >= more)
        return true;
    size_t cap = s->cap ? s->cap : (size_t)1 << 20;
    while (cap - s->len < more)
        cap *= 2;
    gcd_budget *b = s->set->server->budget;
    if (!gcd_budget_try_charge(b, s->proto.uid, cap - s->cap)) {
        gc_fail(err, GC_E_LIMIT,
                "the stream's input buffer of %zu bytes does not fit the daemon's memory "
                "budget now (%llu of %llu bytes held): retry later",
                cap, (unsigned long long)gcd_budget_in_use(b), (unsigned long long)gcd_budget_limit(b));
        return false;
    }
    uint8_t *nb = realloc(s->buf, cap);
    if (!nb) {
        gcd_budget_release(b, s->proto.uid, cap - s->cap);
        gc_fail(err, GC_E_NOMEM, "out of memory for the stream's input");
        return false;
    }
    gc_mem_advise_huge(nb, cap);
    s->charged += cap - s->cap;
    s->buf = nb;
    s->cap = cap;
    return true;
}

/*
 * A ring stream's input not yet taken is charged as a socket stream's
 * buffer is: the ring itself is the client's memory, which the daemon
 * neither maps nor fills, so charging all of it would only make a user's
 * small streams cost a window each.
 */
static bool charge_ring_input(gcd_stream *s, uint64_t n)
{
    gcd_budget *b = s->set->server->budget;
    if (n && !gcd_budget_try_charge(b, s->proto.uid, n)) {
        gc_error err = { 0 };
        gc_fail(&err, GC_E_LIMIT,
                "the stream's %llu bytes of input in its ring do not fit the daemon's memory budget now "
                "(%llu of %llu bytes held): retry later",
                (unsigned long long)(s->received - s->consumed + n), (unsigned long long)gcd_budget_in_use(b),
                (unsigned long long)gcd_budget_limit(b));
        fail(s, &err);
        return false;
    }
    s->ring_charged += n;
    return true;
}

/* What consumed passed is taken: its charge goes (parts and peeks charge their own buffers). */
static void release_ring_input(gcd_stream *s)
{
    uint64_t left = s->received - s->consumed;
    if (s->ring_charged > left) {
        gcd_budget_release(s->set->server->budget, s->proto.uid, s->ring_charged - left);
        s->ring_charged = left;
    }
}

/*
 * A ring stream's frame names its input's place in the ring: a client that
 * lies about it is cut off. The bytes stay in the ring until a part or the
 * cut's peek has them read by the pool.
 */
static void take_ring_input(gcd_stream *s, const Gpucomp__Request *m)
{
    gc_error err = { 0 };
    if (m->payload.len)
        gc_fail(&err, GC_E_INVALID, "stream %llu: a ring stream's input travels in its ring, not as payload",
                (unsigned long long)s->id);
    else
        gcd_stream_ring_check_frame(s->ring_size, s->received, s->consumed, m->ring_offset, m->ring_length, &err);
    if (err.code) {
        fail(s, &err);
        return;
    }
    if (!s->garbage && !charge_ring_input(s, m->ring_length))
        return;
    s->received += m->ring_length;
    if (s->garbage)
        s->consumed = s->received;
    release_ring_input(s);
    if (s->garbage && m->ring_length)
        send_credit(s);
    if (m->flush && !s->garbage)
        s->flush_at = s->received;
}

/* Input after trailing garbage is not kept: it counts as taken at once. */
static void take_input(gcd_stream *s, const Gpucomp__Request *m)
{
    gc_error err = { 0 };
    size_t n = m->payload.len;
    if (ring(s)) {
        take_ring_input(s, m);
        return;
    }
    if (m->ring_offset || m->ring_length) {
        gc_fail(&err, GC_E_PROTOCOL, "stream %llu: ring input on a stream that has no ring",
                (unsigned long long)s->id);
        fail(s, &err);
        return;
    }
    if (s->received + n - s->consumed > GCD_STREAM_WINDOW) {
        gc_fail(&err, GC_E_PROTOCOL,
                "stream %llu: the client sent %llu bytes beyond the %llu it was told were taken "
                "(window %llu)",
                (unsigned long long)s->id, (unsigned long long)(s->received + n - s->consumed),
                (unsigned long long)s->consumed, (unsigned long long)GCD_STREAM_WINDOW);
        fail(s, &err);
        return;
    }
    s->received += n;
    if (s->garbage) {
        s->consumed = s->received;
        if (n)
            send_credit(s);
        return;
    }
    if (n && !reserve(s, n, &err)) {
        fail(s, &err);
        return;
    }
    if (n)
        memcpy(s->buf + s->len, m->payload.data, n);
    s->set->server->counters.stream_loop_copied += n;
    s->len += n;
    if (m->flush)
        s->flush_at = s->received;
}

void gcd_stream_frame(gcd_stream *s, const Gpucomp__Request *m)
{
    if (s->client_done) { /* frames after its last: a protocol slip, dropped */
        return;
    }
    s->waiting_since_ns = 0;
    if (!s->answered && s->in_fd < 0) /* a file stream's input is its file */
        take_input(s, m);
    if (m->last) {
        s->client_done = true;
        s->input_ended = true; /* a file stream's input is all there */
    } else if (s->answered) {
        s->waiting_since_ns = gc_now_ns(); /* a tombstone: its next frame has a deadline too */
    }
    if (!s->answered)
        pump(s);
    maybe_free(s);
}

/* A ring stream's ring (docs/PROTOCOL.md, "Ring streams"): checked and sealed; its input is charged as it comes. */
static int open_ring(gcd_stream *s, const Gpucomp__Request *m, gc_error *err)
{
    if (m->input_fd || m->output_fd)
        return gc_fail(err, GC_E_PROTOCOL, "stream %llu: a stream has a ring or files, not both",
                       (unsigned long long)m->id);
    if (!ring(s))
        return gc_fail(err, GC_E_PROTOCOL, "stream %llu: a ring stream's first frame came without its ring",
                       (unsigned long long)m->id);
    return gcd_stream_ring_check(s->ring_fd, GCD_STREAM_WINDOW, GCD_STREAM_RING_MOST, &s->ring_size, err);
}

/* A file stream's descriptors (docs/PROTOCOL.md, "File streams"), already s's: stream_free closes them. */
static int open_files(gcd_stream *s, const Gpucomp__Request *m, gc_error *err)
{
    if (m->ring)
        return open_ring(s, m, err);
    if (!m->input_fd && !m->output_fd)
        return GC_OK;
    if (!m->input_fd || !m->last || m->payload.len || m->flush)
        return gc_fail(err, GC_E_PROTOCOL,
                       "stream %llu: a file stream is one first frame with input_fd (and optionally "
                       "output_fd), last = true and no payload",
                       (unsigned long long)m->id);
    if (s->in_fd < 0 || (m->output_fd && s->out_fd < 0))
        return gc_fail(err, GC_E_PROTOCOL,
                       "stream %llu: a file stream's frame came with fewer descriptors than it "
                       "names",
                       (unsigned long long)m->id);
    int rc = gcd_fd_file_check_input(s->in_fd, &s->in_size, err);
    if (rc == GC_OK && s->out_fd >= 0)
        rc = gcd_fd_file_check_output(s->out_fd, s->in_fd, err);
    return rc;
}

/*
 * Parts a stream may have out: enough to keep every lane and worker busy
 * while the next parts are read or received (each bounded by the budget: a
 * part that does not fit waits for one out to finish; a socket stream's also
 * by STREAM_HELD_MOST).
 */
static unsigned stream_depth(const gcd_stream *s)
{
    const gcd_server *srv = s->set->server;
    unsigned want = 2 * srv->n_lanes + (srv->workers ? gcd_workers_threads(srv->workers) : 0);
    if (want < GCD_STREAM_DEPTH)
        want = GCD_STREAM_DEPTH;
    return want < STREAM_SLOTS ? want : STREAM_SLOTS;
}

static int check_open(const gcd_stream_set *set, const Gpucomp__Request *m, const gcd_request *proto,
                      gc_error *err)
{
    if (m->payload_in_fd)
        return gc_fail(err, GC_E_PROTOCOL, "stream %llu: a stream's input travels in frames, not memfds",
                       (unsigned long long)m->id);
    if (set->n_open >= GCD_STREAM_MAX_PER_CONN)
        return gc_fail(err, GC_E_LIMIT, "more than %d streams open on one connection", GCD_STREAM_MAX_PER_CONN);
    int rc = gcd_engine_check(proto, err);
    if (rc != GC_OK)
        return rc;
    const gcd_codec *codec = gcd_codec_find(proto->codec);
    if (!codec->stream)
        return gc_fail(err, GC_E_UNSUPPORTED, "the %s codec has no streams", codec->name);
    return GC_OK;
}

void gcd_stream_open(gcd_stream_set *set, const Gpucomp__Request *m, const int fds[2])
{
    gcd_stream *s = calloc(1, sizeof *s);
    gcd_request *tmp = gcd_request_new(set->owner, m);
    gc_error err = { 0 };
    if (!s || !tmp) {
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        free(s);
        gcd_request_free(tmp);
        gcd_send_error_frame(set->out, m->id, GC_E_NOMEM, true, "out of memory opening a stream");
        return;
    }
    s->proto = *tmp;
    free(tmp); /* owns nothing yet */
    s->proto.total_size = 0;
    s->proto.uid = set->uid;
    s->proto.budget = set->server->budget;
    s->id = m->id;
    s->set = set;
    s->opened_ns = gc_now_ns();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    gcd_log(LOG_DEBUG, "stream %llu opened at %lld.%06ld", (unsigned long long)s->id, (long long)wall.tv_sec,
            wall.tv_nsec / 1000);
    s->in_fd = m->ring ? -1 : fds[0];
    s->ring_fd = m->ring ? fds[0] : -1;
    s->out_fd = fds[1];
    s->next = set->list;
    set->list = s;
    set->n++;
    int rc = check_open(set, m, &s->proto, &err);
    set->n_open++; /* fail() below counts it answered */
    if (rc == GC_OK)
        rc = open_files(s, m, &err);
    if (rc == GC_OK) {
        s->ops = gcd_codec_find(s->proto.codec)->stream;
        s->state = s->ops->open(&s->proto, &err);
        if (!s->state)
            rc = err.code ? err.code : GC_E_NOMEM;
    }
    if (rc == GC_OK) {
        s->depth = stream_depth(s);
        if (s->in_fd >= 0)
            s->received = s->in_size;
        if ((s->in_fd >= 0 || ring(s)) && s->ops->settle && s->ops->span)
            s->span = s->ops->span(&s->proto);
    }
    if (rc != GC_OK) {
        if (!err.msg[0])
            gc_fail(&err, GC_E_NOMEM, "out of memory opening a stream");
        s->client_done = m->last;
        fail(s, &err);
        maybe_free(s);
        return;
    }
    gcd_stream_frame(s, m);
}

void gcd_stream_cancel(gcd_stream *s)
{
    gc_error err = { 0 };
    gc_fail(&err, GC_E_CANCELLED, "stream %llu cancelled by the client", (unsigned long long)s->id);
    s->client_done = true;
    fail(s, &err);
    maybe_free(s);
}

/* ---- parts ------------------------------------------------------------- */

/*
 * Whether the client's unread answers hold the stream back. Above the
 * high-water mark one part may still run while they drain, if none of the
 * stream's is out: the engine then works during the drain instead of after
 * it (a stream whose parts run one at a time would otherwise idle for every part's output). The
 * queue stays bounded: that part's output joins at most STREAM_OUTPUT_MOST.
 */
static bool output_backed_up(const gcd_stream *s)
{
    size_t queued = gcd_output_queued(s->set->out);
    if (queued <= GCD_OUTPUT_HIGH_WATER)
        return false;
    return s->next_seq != s->emit_seq || queued > STREAM_OUTPUT_MOST;
}

/*
 * What a socket stream holds beyond its input buffer: its parts' inputs, the
 * outputs of those back and waiting for their turn or placed, and its
 * connection's unread answers. A part at an engine counts its output as the
 * largest part output seen so far (its input before any part is back): the
 * loop cannot read a running part's output, and a stream's parts are alike.
 * A codec that can stop a part early stops it near that guess, past it by
 * at most the part's slack, so a stream whose parts are not alike still
 * holds no more than counted. A decompress stream, whose first part may
 * expand without bound, runs that part alone to learn the size.
 */
static uint64_t part_out_guess(const gcd_stream *s, const gcd_request *r)
{
    return s->part_out_most > r->total_size ? s->part_out_most : r->total_size;
}

static uint64_t held_bytes(const gcd_stream *s)
{
    uint64_t held = gcd_output_queued(s->set->out) + s->write_bytes;
    for (unsigned i = 0; i < STREAM_SLOTS; i++) {
        const gcd_request *out = s->out[i], *done = s->done[i];
        if (out)
            held += out->total_size + part_out_guess(s, out) + out->part_out_slack;
        if (done)
            held += done->total_size + done->output_len;
    }
    if (s->parked)
        held += s->parked->total_size + s->part_out_most;
    return held;
}

/* Whether a socket stream must wait for parts or answers to go before it cuts another part. */
static bool holds_enough(const gcd_stream *s)
{
    if (s->in_fd >= 0 || s->next_seq == s->emit_seq)
        return false; /* one part may always run */
    if (s->proto.op == GPUCOMP__OP__OP_DECOMPRESS && s->part_out_most == 0 && s->in_flight)
        return true;
    return held_bytes(s) >= STREAM_HELD_MOST;
}

/*
 * Bytes of buf the next part takes (0: wait), and whether no input follows
 * them. The last part always goes out, even empty: a stream of no input
 * still has an output (an empty frame, an empty bzip2 stream) or an error.
 */
static int file_cut(gcd_stream *s, size_t left, size_t *take, gc_error *err)
{
    size_t from = 0, to = 0;
    int rc = s->ops->cut_file(s->state, &s->proto, s->buf, s->peek_at, s->len, left, take, &from, &to, err);
    if (rc != GC_OK || !to)
        return rc;
    *take = 0;
    bool held = from == s->peek_at && to <= s->peek_at + s->len;
    if (held || from >= to || to > left || to - from > GCD_STREAM_WINDOW)
        return gc_fail(err, GC_E_INTERNAL,
                       "stream codec asked to see bytes %zu to %zu of %zu (it saw %zu from %zu)", from, to, left,
                       s->len, s->peek_at);
    return peek(s, from, to, err) ? GC_OK : err->code;
}

/*
 * A ring stream's cut sees avail bytes from base, read out of the ring into
 * buf by the pool first (a cut that reads nothing asks for none). What buf
 * holds past the cut is read again for the next cut: the loop copies none.
 */
static int ring_cut(gcd_stream *s, size_t avail, bool final, bool flush, size_t *take, gc_error *err)
{
    *take = 0;
    bool sees = !s->ops->cut_reads || s->ops->cut_reads(&s->proto);
    if (sees && s->len < avail)
        return peek(s, 0, avail, err) ? GC_OK : err->code;
    return s->ops->cut(s->state, &s->proto, s->buf, avail, final, flush, take, err);
}

static int next_cut(gcd_stream *s, size_t *take, bool *final, gc_error *err)
{
    uint64_t mark = s->flush_at ? s->flush_at - s->base : 0;
    bool ended = s->input_ended;
    size_t all = s->in_fd >= 0 ? (size_t)(s->in_size - s->base)
                 : ring(s)     ? (size_t)(s->received - s->base)
                               : s->len;
    size_t avail = ring(s) && all > GCD_STREAM_WINDOW ? (size_t)GCD_STREAM_WINDOW : all; /* what a cut needs */
    bool flush = false;
    if (!ended && mark && mark <= avail) {
        avail = (size_t)mark;
        flush = true;
    }
    *final = ended;
    *take = 0;
    if (s->final_out)
        return GC_OK;
    int rc = s->in_fd >= 0 ? file_cut(s, all, take, err)
             : ring(s)     ? ring_cut(s, avail, ended && avail == all, flush, take, err)
                       : s->ops->cut(s->state, &s->proto, s->buf, avail, ended && avail == all, flush, take, err);
    if (rc != GC_OK)
        return rc;
    if (*take > avail)
        return gc_fail(err, GC_E_INTERNAL, "stream codec cut %zu of %zu bytes", *take, avail);
    /* A flush mark the codec cannot cut at (inside an rle frame) is dropped. */
    if (flush && (*take == avail || *take == 0))
        s->flush_at = 0;
    *final = ended && *take == all;
    if (ended && *take == 0 && all == 0 && s->next_seq == 0)
        *final = true; /* the empty last part */
    return GC_OK;
}

/*
 * A socket stream's part takes buf itself, its input already where the
 * frames' payloads were copied: only the bytes after the part (and the
 * overlap) move, into a fresh buffer as large as the last, so the next part
 * fills without regrowing. The old buffer's charge becomes the part's.
 */
static bool hand_over(gcd_stream *s, gcd_request *r, size_t advance, bool final, gc_error *err)
{
    gcd_budget *b = s->set->server->budget;
    size_t rest = s->len - advance, cap = final ? rest : s->cap; /* no input follows a final part */
    gcd_budget_release(b, s->proto.uid, s->charged);             /* the part charged its take in make_part */
    s->charged = 0;
    if (cap && !gcd_budget_try_charge(b, s->proto.uid, cap))
        return gc_fail(err, GC_E_LIMIT,
                       "the stream's next input buffer of %zu bytes does not fit the daemon's memory budget "
                       "now (%llu of %llu bytes held): retry later",
                       cap, (unsigned long long)gcd_budget_in_use(b),
                       (unsigned long long)gcd_budget_limit(b)) == GC_OK;
    uint8_t *nb = cap ? gc_big_malloc(cap) : NULL;
    if (!nb && cap) {
        gcd_budget_release(b, s->proto.uid, cap);
        return gc_fail(err, GC_E_NOMEM, "out of memory for the stream's input") == GC_OK;
    }
    if (rest)
        memcpy(nb, s->buf + advance, rest);
    s->set->server->counters.stream_loop_copied += rest;
    uint8_t *in = realloc(s->buf, r->total_size); /* shrinks in place: gives back the room past the part */
    r->input = in ? in : s->buf;
    s->buf = nb;
    s->cap = s->charged = cap;
    s->len = rest;
    return true;
}

/* The next part, of take input bytes from base, charged size bytes: its own buffer of that size, or none. */
static gcd_request *new_part(gcd_stream *s, size_t take, size_t size, bool own_buffer, bool final, gc_error *err)
{
    gcd_budget *b = s->set->server->budget;
    if (size && !gcd_budget_try_charge(b, s->proto.uid, size)) {
        gc_fail(err, GC_E_LIMIT,
                "a stream part of %zu bytes does not fit the daemon's memory budget now "
                "(%llu of %llu bytes held): retry later",
                size, (unsigned long long)gcd_budget_in_use(b), (unsigned long long)gcd_budget_limit(b));
        return NULL;
    }
    gcd_request *r = calloc(1, sizeof *r);
    uint8_t *in = own_buffer ? gc_big_malloc(size ? size : 1) : NULL;
    if (!r || (own_buffer && !in)) {
        free(r);
        free(in);
        gcd_budget_release(b, s->proto.uid, size);
        gc_fail(err, GC_E_NOMEM, "out of memory for a stream part");
        return NULL;
    }
    *r = s->proto;
    r->charged = r->input_charge = size;
    r->in_fd = r->out_fd = -1;
    r->input = in;
    r->total_size = r->received = take;
    r->stream = s;
    r->part_seq = s->next_seq++;
    r->part_offset = s->base;
    r->part_final = final;
    r->progress_to = s->set->server->completions;
    r->max_output = s->proto.max_output ? s->proto.max_output - s->out_total : s->set->server->cfg.max_output;
    if (r->max_output > s->set->server->cfg.max_output)
        r->max_output = s->set->server->cfg.max_output;
    atomic_init(&r->cancelled, false);
    return r;
}

/* A part of the first take bytes of buf; buf keeps the rest and the last keep of them. */
static gcd_request *make_part(gcd_stream *s, size_t take, size_t keep, bool final, gc_error *err)
{
    bool own_buffer = take == 0 || reads_parts(s); /* else hand_over gives it buf */
    gcd_request *r = new_part(s, take, take, own_buffer, final, err);
    if (!r)
        return NULL;
    size_t advance = take - (keep < take ? keep : take); /* the overlap begins the next part too */
    if (reads_parts(s)) {                                /* read by the pool (start_part) */
        s->base += advance;
        s->len = s->peek_at = 0; /* what the cut peeked at: the next cut peeks from the new base */
        return r;
    }
    if (!own_buffer && !hand_over(s, r, advance, final, err)) {
        gcd_request_free(r);
        return NULL;
    }
    s->base += advance;
    return r;
}

/*
 * Whether a settled stream's next span is there: a file's always is; a
 * ring's once its bytes, its end or a flush mark have arrived.
 */
static bool span_arrived(const gcd_stream *s)
{
    return s->in_fd >= 0 || s->received - s->read_to >= s->span || s->input_ended || s->flush_at > s->read_to;
}

/*
 * A ring stream's flush mark where its last part's span ended (the mark came
 * in a frame after the bytes): that part keeps all its bytes if no settle
 * has it yet; if it settled, what it left needs a part of its own (false);
 * while its settle runs the stream waits (settle_done pumps again).
 */
static bool flush_at_last_part(gcd_stream *s, bool *wait)
{
    *wait = false;
    gcd_request *last = s->next_seq ? s->out[(s->next_seq - 1) % STREAM_SLOTS] : NULL;
    bool unsettled = last && last->part_seq == s->next_seq - 1 && last->part_seq >= s->settle_seq;
    if (unsettled && last->part_seq == s->settle_seq && s->settling) {
        *wait = true;
        return false;
    }
    if (unsettled)
        last->part_flush = !last->part_final;
    if (unsettled || (s->settle_seq == s->next_seq && s->rest_len == 0)) {
        s->flush_at = 0;
        return true;
    }
    return false;
}

/* The next span of the file, read ahead into a part that settles its own end. */
static gcd_request *span_part(gcd_stream *s, gc_error *err)
{
    uint64_t end = s->in_fd >= 0 ? s->in_size : s->received;
    size_t n = end - s->read_to < s->span ? (size_t)(end - s->read_to) : s->span;
    bool flush = s->flush_at && s->flush_at >= s->read_to && s->flush_at - s->read_to <= s->span;
    if (flush)
        n = (size_t)(s->flush_at - s->read_to);
    gcd_request *r =
        new_part(s, n, SETTLE_ROOM + n, true, s->read_to + n == end && (s->in_fd >= 0 || s->input_ended), err);
    if (!r)
        return NULL;
    r->part_flush = flush && !r->part_final;
    if (flush)
        s->flush_at = 0;
    r->input_base = r->input;
    r->input += SETTLE_ROOM;
    r->total_size = 0; /* until it settles; received: its read */
    r->part_offset = s->read_to;
    s->read_to += n;
    return r;
}

static void pump(gcd_stream *s)
{
    unsigned depth = s->depth;
    if (s->garbage && !s->answered) { /* nothing more is decoded: finish when the input ends */
        s->final_out = s->final_out || s->input_ended;
        if (s->final_out && s->in_flight == 0 && s->emit_seq == s->next_seq)
            finish(s);
        return;
    }
    if (s->parked && !s->answered && !output_backed_up(s)) {
        gcd_request *r = s->parked;
        s->parked = NULL;
        resubmit(s, r);
    }
    /* Parts out and not yet emitted or placed, not just those at the engines: done[] has depth slots. */
    while (!s->answered && !s->final_out && !s->peeking && s->next_seq - s->emit_seq + s->placing < depth &&
           !output_backed_up(s) && !holds_enough(s)) {
        gc_error err = { 0 };
        size_t take = 0;
        bool final = false;
        if (!s->span && next_cut(s, &take, &final, &err) != GC_OK) {
            fail(s, &err);
            return;
        }
        if (!s->span && take == 0 && !final)
            break;
        bool wait = false;
        if (s->span && ring(s) && s->flush_at && s->flush_at == s->read_to && flush_at_last_part(s, &wait))
            continue;
        if (wait || (s->span && !span_arrived(s)))
            break;
        size_t keep = s->ops->overlap && !s->span && !final ? s->ops->overlap(s->state) : 0;
        gcd_request *r = s->span ? span_part(s, &err) : make_part(s, take, keep, final, &err);
        if (r && s->part_out_most)
            r->part_out_guess = part_out_guess(s, r);
        if (r && s->span)
            final = r->part_final; /* it settles (and is prepared) before it goes to the engines */
        else if (r && s->ops->prepare && s->ops->prepare(s->state, r, &err) != GC_OK) {
            gcd_request_free(r);
            r = NULL;
        }
        if (!r && err.code == GC_E_LIMIT && reads_parts(s) && s->in_flight > 0)
            break; /* a file or ring stream waits for a part out to give its memory back */
        if (!r) {
            fail(s, &err);
            return;
        }
        s->final_out = final;
        s->in_flight++;
        s->out[r->part_seq % STREAM_SLOTS] = r;
        trace(s, "cut", r->part_seq, r->part_offset, r->total_size);
        start_part(s, r);
        advance_consumed(s);
        send_credit(s);
    }
    if (!s->answered && !s->input_ended && s->in_flight == 0 && !s->waiting_since_ns)
        s->waiting_since_ns = gc_now_ns();
}

/*
 * Input taken into parts, which the client may now overwrite: a ring
 * stream's only once the pool has read it out of the ring.
 */
static bool advance_consumed(gcd_stream *s)
{
    uint64_t to = s->span && ring(s) ? s->read_to : s->base; /* a settled file stream's moves as it settles */
    for (unsigned i = 0; i < STREAM_SLOTS; i++)
        if (s->reading[i] && s->out[i] && s->out[i]->part_offset < to)
            to = s->out[i]->part_offset;
    if (to <= s->consumed)
        return false;
    s->consumed = to;
    release_ring_input(s);
    return true;
}

void gcd_stream_rerun(gcd_stream *s, gcd_request *part)
{
    s->rerun = part;
}

/* A part its emit sent back (gcd_stream_rerun): to the engines again, in its turn. */
static void resubmit(gcd_stream *s, gcd_request *r)
{
    gcd_request_drop_output(r);
    r->output_sent = 0;
    atomic_store_explicit(&r->output_final, 0, memory_order_relaxed);
    r->error = (gc_error){ 0 };
    r->device_declined = false;
    r->engine_ns = 0;
    s->in_flight++;
    s->out[r->part_seq % STREAM_SLOTS] = r;
    s->set->submit(s->set->owner, r);
}

/* Output of the parts whose turn it is. */
static void emit_ready(gcd_stream *s)
{
    gcd_request *r;
    while (!s->answered && (r = s->done[s->emit_seq % STREAM_SLOTS]) && r->part_seq == s->emit_seq) {
        s->done[s->emit_seq % STREAM_SLOTS] = NULL;
        s->emit_seq++;
        gc_error err = r->error;
        s->engine_ns += r->engine_ns;
        if (r->backend == GPUCOMP__BACKEND__BACKEND_GPU)
            s->gpu_parts++;
        else
            s->cpu_parts++;
        if (err.code == GC_OK)
            s->ops->emit(s->state, s, r, &err);
        trace(s, s->rerun == r ? "emit reruns" : "emitted", r->part_seq, r->output_len, s->write_bytes);
        bool again = s->rerun == r;
        s->rerun = NULL;
        if (s->answered) { /* emit's output passed max_output */
            if (s->kept == r)
                s->kept = NULL;
            else
                gcd_request_free(r);
            return;
        }
        if (again && err.code == GC_OK) { /* pump sends it */
            s->emit_seq--;
            s->parked = r;
            return;
        }
        if (err.code == GC_OK && s->garbage) {
            drop_buffer(s);
            s->consumed = s->received;
            release_ring_input(s);
            s->final_out = s->input_ended;
        }
        if (s->kept == r)
            s->kept = NULL;
        else
            gcd_request_free(r);
        if (err.code != GC_OK) {
            fail(s, &err);
            return;
        }
    }
    if (!s->answered && s->final_out && s->in_flight == 0 && s->emit_seq == s->next_seq)
        finish(s);
}

void gcd_stream_part_done(gcd_request *r)
{
    gcd_stream *s = r->stream;
    s->in_flight--;
    s->out[r->part_seq % STREAM_SLOTS] = NULL;
    if (s->answered || !s->set->serving(s->set->owner)) {
        gcd_request_free(r);
        maybe_free(s);
        return;
    }
    if (r->client_cancelled && r->error.code != GC_OK)
        gc_fail(&r->error, GC_E_CANCELLED, "cancelled by the client");
    if (r->output_len > s->part_out_most)
        s->part_out_most = r->output_len;
    trace(s, r->backend == GPUCOMP__BACKEND__BACKEND_GPU ? "back from gpu" : "back from cpu", r->part_seq,
          r->engine_ns / 1000000, r->output_len);
    s->done[r->part_seq % STREAM_SLOTS] = r;
    emit_ready(s);
    if (!s->answered)
        pump(s);
    maybe_free(s);
}

void gcd_stream_resume_all(gcd_stream_set *set)
{
    gcd_stream *next;
    for (gcd_stream *s = set->list; s; s = next) {
        next = s->next;
        if (!s->answered)
            pump(s);
    }
}

void gcd_stream_close_all(gcd_stream_set *set)
{
    gcd_stream *next;
    for (gcd_stream *s = set->list; s; s = next) {
        next = s->next;
        if (!s->answered) /* abandoned by its client: counted as a failed request */
            set->server->counters.requests_failed++;
        answered(s);
        cancel_parts(s);
        if (s->in_flight == 0 && s->io == 0)
            stream_free(s);
    }
}

bool gcd_stream_awaits_input(const gcd_stream_set *set)
{
    for (const gcd_stream *s = set->list; s; s = s->next)
        if (!s->answered && !s->client_done)
            return true;
    return false;
}

bool gcd_stream_overdue(const gcd_stream_set *set, uint64_t now, uint64_t request_ns)
{
    for (const gcd_stream *s = set->list; s; s = s->next)
        if (s->waiting_since_ns && !s->client_done && now - s->waiting_since_ns > request_ns)
            return true;
    return false;
}
