/* stream_io.c - a stream's transfers at the I/O pool: part reads, settles, peeks at the input, output writes (see stream_internal.h). */
#include "stream_internal.h"

/* ---- file I/O (file streams; io_pool.h) --------------------------------- */

bool stream_io_start(gcd_stream *s, stream_io *x, gc_error *err)
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
void stream_io_end(stream_io *x)
{
    gcd_stream *s = x->s;
    gcd_stream_set *set = s->set;
    free(x);
    s->io--;
    set->io--;
    stream_maybe_free(s);
    if (set->io == 0 && set->gone(set->owner))
        set->released(set->owner);
}

void stream_io_error(gc_error *err, const gcd_io_task *t, const char *what)
{
    if (t->error)
        gc_fail(err, GC_E_IO, "%s the %s at offset %llu: %s", t->write ? "writing" : "reading", what,
                (unsigned long long)t->offset, strerror(t->error));
    else if (t->write)
        gc_fail(err, GC_E_IO, "writing the %s at offset %llu: %zu of %zu bytes written", what,
                (unsigned long long)t->offset, t->moved, t->len);
    else
        gc_fail(err, GC_E_IO, "the %s shrank while it was read (%zu of %zu bytes at offset %llu)", what, t->moved,
                t->len, (unsigned long long)t->offset);
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
    stream_io_end(t->ctx);
}

/*
 * Let go of a reference to o after writing len bytes of it: a large
 * buffer's on a pool thread, so the loop (and the final frame) does not
 * wait while it is unmapped.
 */
void stream_release_written(gcd_stream *s, gcd_shared_output *o, size_t len)
{
    gc_error err = { 0 };
    stream_io *x = len >= STREAM_RELEASE_OFF_LOOP ? calloc(1, sizeof *x) : NULL;
    if (x) {
        x->shared = o;
        x->t = (gcd_io_task){ .fd = -1, .work = release_work, .done = release_done };
        if (stream_io_start(s, x, &err))
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
    stream_trace(s, "written at", t->offset, t->len, s->write_bytes);
    stream_release_written(s, x->shared, t->len);
    if (!s->answered && (t->error || t->moved < t->len)) {
        gc_error err = { 0 };
        stream_io_error(&err, t, "output file");
        stream_fail(s, &err);
    } else if (!s->answered && s->finishing) {
        stream_end_output(s); /* the final frame waited for the writes */
    } else if (!s->answered) {
        stream_pump(s); /* the writes may have held it back */
    }
    stream_io_end(x);
}

/*
 * Write len bytes at from (inside o's buffer; the caller gave this write one
 * reference to o) at the output's end. Until written they are charged as
 * answers queued on a socket are.
 */
bool stream_write_out(gcd_stream *s, gcd_shared_output *o, const uint8_t *from, size_t len)
{
    gc_error err = { 0 };
    if (stream_has_oring(s)) {
        s->out_total += len;
        return stream_oring_push(s, o, from, len);
    }
    stream_io *x = len ? calloc(1, sizeof *x) : NULL;
    if (!x) {
        gcd_shared_output_unref(o);
        if (len == 0)
            return true;
        gc_fail(&err, GC_E_NOMEM, "out of memory writing the output file");
        stream_fail(s, &err);
        return false;
    }
    x->shared = o;
    x->t = (gcd_io_task){ .fd = s->out_fd,
                          .write = true,
                          .buf = (uint8_t *)from,
                          .len = len,
                          .offset = s->out_total,
                          .done = write_done };
    if (!stream_io_start(s, x, &err)) {
        gcd_shared_output_unref(o);
        free(x);
        stream_fail(s, &err);
        return false;
    }
    gcd_budget_charge(s->set->server->budget, s->proto.uid, len);
    s->write_bytes += len;
    s->out_total += len;
    return true;
}

/* A copy of data to the output file (small ones: headers, markers, spliced parts). */
bool stream_write_copy(gcd_stream *s, const void *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    gcd_shared_output *o = copy ? gcd_shared_output_wrap(copy, s->proto.uid) : NULL;
    if (!o) {
        gc_error err = { 0 };
        free(copy);
        gc_fail(&err, GC_E_NOMEM, "out of memory writing the output");
        stream_fail(s, &err);
        return false;
    }
    memcpy(copy, data, len);
    s->set->server->counters.stream_loop_copied += len;
    return stream_write_out(s, o, copy, len);
}

static void try_settle(gcd_stream *s);

static void submit_in_order(gcd_stream *s);

static void read_done(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_stream *s = x->s;
    gcd_request *r = x->part;
    s->reading[r->part_seq % STREAM_SLOTS] = false;
    if (!s->answered && stream_is_ring(s) && stream_advance_consumed(s))
        stream_send_credit(s); /* the client may write over what the pool has read */
    if (s->answered || !s->set->serving(s->set->owner) || t->error || t->moved < t->len) {
        gc_error err = { 0 };
        stream_io_error(&err, t, stream_is_ring(s) ? "input ring" : "input file");
        s->in_flight--;
        s->out[r->part_seq % STREAM_SLOTS] = NULL;
        gcd_request_free(r);
        if (!s->answered)
            stream_fail(s, &err);
    } else if (s->span) {
        stream_trace(s, "read", r->part_seq, r->received, s->in_flight);
        s->read_in[r->part_seq % STREAM_SLOTS] = true;
        try_settle(s);
    } else {
        stream_trace(s, "read", r->part_seq, r->total_size, s->in_flight);
        s->read_in[r->part_seq % STREAM_SLOTS] = true;
        submit_in_order(s);
    }
    stream_io_end(x);
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

/* On a pool thread: a ring stream's bytes out of its stream_is_ring (t->offset is the input offset). */
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
void stream_start_part(gcd_stream *s, gcd_request *r)
{
    gc_error err = { 0 };
    size_t len = s->span ? r->received : r->total_size; /* a settled part's read is its span */
    stream_io *x = stream_reads_parts(s) && len ? calloc(1, sizeof *x) : NULL;
    if (!x && stream_reads_parts(s) && len) {
        gc_fail(&err, GC_E_NOMEM, "out of memory reading the input file");
        x = NULL;
    } else if (x) {
        x->part = r;
        x->t = (gcd_io_task){
            .fd = s->in_fd, .buf = r->input, .len = len, .offset = r->part_offset, .done = read_done
        };
        if (stream_is_ring(s))
            x->t.work = ring_work;
        if (s->span && s->ops->scan)
            x->t.after = scan_read;
        if (stream_io_start(s, x, &err)) {
            s->reading[r->part_seq % STREAM_SLOTS] = stream_is_ring(s);
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
    stream_fail(s, &err);
}

/* ---- settled file streams (gcd_stream_ops.settle) ------------------------ */

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
        if (!(data = gcd_part_cache_alloc(r->uid, len))) {
            t->error = ENOMEM;
            return;
        }
        memcpy(data + before, r->input, r->received);
        gcd_part_cache_free(r->uid, r->input_base);
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
        if (!stream_is_ring(s)) /* a ring's consumed moves as its reads come back (stream_advance_consumed) */
            s->consumed = s->base;
        stream_trace(s, "settled", r->part_seq, r->total_size, s->rest_len);
        s->set->submit(s->set->owner, r);
        try_settle(s);
        if (s->flush_at) /* a flush mark waited for this settle (flush_at_last_part) */
            stream_pump(s);
    } else {
        free(x->rest);
        s->in_flight--;
        s->out[slot] = NULL;
        gcd_request_free(r);
        stream_fail(s, &err);
    }
    stream_io_end(x);
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
        stream_fail(s, &err);
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
    if (!stream_io_start(s, x, &err)) {
        s->read_in[slot] = true;
        s->rest = x->rest;
        s->rest_len = x->rest_len;
        free(x);
        stream_fail(s, &err);
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
        stream_drop_buffer(s); /* ended or past garbage: what was read is not wanted */
        if (!s->answered)
            stream_pump(s);
    } else if (!s->answered && (t->error || t->moved < t->len)) {
        gc_error err = { 0 };
        stream_io_error(&err, t, stream_is_ring(s) ? "input ring" : "input file");
        stream_fail(s, &err);
    } else if (!s->answered) {
        s->len += t->len;
        stream_pump(s);
    }
    stream_io_end(x);
}

/*
 * A file (or stream_is_ring) stream's cut asked to see the input's bytes [from, to)
 * past base: the pool reads into buf what it does not hold yet (buf holds
 * len bytes from peek_at; a window that moved starts over). Only the cut
 * reads them; each part is read again into its own buffer, so the loop
 * copies none of them.
 */
bool stream_peek(gcd_stream *s, size_t from, size_t to, gc_error *err)
{
    if (from != s->peek_at) {
        s->peek_at = from;
        s->len = 0;
    }
    size_t n = to - from - s->len;
    stream_io *x = calloc(1, sizeof *x);
    if (!x)
        return gc_fail(err, GC_E_NOMEM, "out of memory reading the input file") == GC_OK;
    if (stream_reserve(s, n, err)) {
        x->t = (gcd_io_task){ .fd = s->in_fd,
                              .buf = s->buf + s->len,
                              .len = n,
                              .offset = s->base + s->peek_at + s->len,
                              .done = peek_done };
        if (stream_is_ring(s))
            x->t.work = ring_work;
        if (stream_io_start(s, x, err)) {
            s->peeking = true;
            return true;
        }
    }
    free(x);
    return false;
}
