/*
 * stream_oring.c - a stream's output ring (docs/PROTOCOL.md, "Output rings";
 * see stream_internal.h): the client's memfd that the stream's output is
 * written into, so that it crosses neither the socket nor the event loop.
 *
 * Output comes here in stream order, as it would go into frames: each piece
 * is a reference to the buffer that holds it (a part's output, or a copy of
 * a small header), queued and charged to the client's budget until it is in
 * the ring. The I/O pool writes it with pwrite (the ring is never mapped
 * here: a client that truncates or rewrites its memfd can spoil only its
 * own output), several pieces at once, at output offset % ring size, never
 * past what the client's credit (output_consumed) allows. Writes come back
 * in any order; frames naming their bytes go out in stream order, so the
 * client reads the ring as a queue.
 */
#include "stream_internal.h"

/* One write into the ring at most this much: several run at once, and the client hears of each as it lands. */
#define ORING_CHUNK ((size_t)4 << 20)

/* Output waiting for the ring: one reference to o, from[0..len). */
typedef struct oring_seg {
    gcd_shared_output *o;
    const uint8_t *from;
    size_t len;
    struct oring_seg *next;
} oring_seg;

bool stream_has_oring(const gcd_stream *s)
{
    return s->oring_fd >= 0;
}

/* Output goes to the pool (a file or an output ring), not into frames. */
bool stream_writes_out(const gcd_stream *s)
{
    return s->out_fd >= 0 || stream_has_oring(s);
}

static void oring_pump(gcd_stream *s);

/* A frame naming bytes now in the ring: no payload, the client reads them there. */
static void tell_written(gcd_stream *s, uint64_t offset, size_t len)
{
    Gpucomp__Response resp;
    stream_fragment_response(s, &resp);
    resp.ring_offset = offset;
    resp.ring_length = len;
    gcd_send_response(s->set->out, &resp);
    s->oring_told += len;
}

/*
 * Writes back in stream order are told to the client; the stream goes on
 * (or finishes) before the transfers end, as io_end may free it.
 */
static void oring_drain(gcd_stream *s)
{
    stream_io *ended = NULL, **tail = &ended, *x;
    while ((x = s->ow_head) && x->ready) {
        s->ow_head = x->next;
        if (!s->ow_head)
            s->ow_tail = NULL;
        if (stream_can_send(s))
            tell_written(s, x->t.offset, x->t.len);
        stream_release_written(s, x->shared, x->t.len);
        x->shared = NULL;
        x->next = NULL;
        *tail = x;
        tail = &x->next;
    }
    if (!s->answered)
        oring_pump(s);
    if (!s->answered && s->failing.code && s->write_bytes == 0)
        stream_fail(s, &s->failing); /* the output before the error is all in the ring */
    else if (!s->answered && s->finishing)
        stream_end_output(s); /* the final frame waited for the writes */
    else if (!s->answered)
        stream_pump(s);
    while ((x = ended)) {
        ended = x->next;
        stream_io_end(x);
    }
}

static void oring_written(gcd_io_task *t)
{
    stream_io *x = t->ctx;
    gcd_stream *s = x->s;
    gcd_budget_release(s->set->server->budget, s->proto.uid, t->len);
    s->write_bytes -= t->len;
    x->ready = true;
    if (!s->answered && (t->error || t->moved < t->len)) {
        gc_error err = { 0 };
        stream_io_error(&err, t, "stream's output ring");
        stream_fail(s, &err);
    }
    oring_drain(s);
}

/* The next write of the queue's first piece, as far as the credit, the ring's end and the chunk allow. */
static bool start_write(gcd_stream *s, oring_seg *g, size_t n)
{
    gc_error err = { 0 };
    stream_io *x = calloc(1, sizeof *x);
    if (!x) {
        gc_fail(&err, GC_E_NOMEM, "out of memory writing the stream's output ring");
        stream_fail(s, &err);
        return false;
    }
    gcd_shared_output_ref(g->o, 1);
    x->shared = g->o;
    x->t = (gcd_io_task){ .fd = s->oring_fd,
                          .write = true,
                          .buf = (uint8_t *)g->from,
                          .len = n,
                          .offset = s->oring_issued % s->oring_size,
                          .done = oring_written };
    if (!stream_io_start(s, x, &err)) {
        gcd_shared_output_unref(g->o);
        free(x);
        stream_fail(s, &err);
        return false;
    }
    if (s->ow_tail)
        s->ow_tail->next = x;
    else
        s->ow_head = x;
    s->ow_tail = x;
    s->oring_issued += n;
    g->from += n;
    g->len -= n;
    return true;
}

/*
 * Start the writes the credit allows. A stream whose output waits for
 * credit with nothing at the pool waits for its client as one waiting for
 * input does: request-timeout ends it.
 */
static void oring_pump(gcd_stream *s)
{
    oring_seg *g;
    while ((g = s->oq_head) && !s->answered) {
        uint64_t room = s->oring_credit + s->oring_size - s->oring_issued;
        uint64_t to_end = s->oring_size - s->oring_issued % s->oring_size;
        size_t n = g->len < ORING_CHUNK ? g->len : ORING_CHUNK;
        n = n < room ? n : (size_t)room;
        n = n < to_end ? n : (size_t)to_end;
        if (g->len && n == 0)
            break;
        if (g->len && !start_write(s, g, n))
            return;
        if (g->len == 0) {
            s->oq_head = g->next;
            if (!s->oq_head)
                s->oq_tail = NULL;
            gcd_shared_output_unref(g->o);
            free(g);
        }
    }
    if (s->oq_head && !s->ow_head && !s->waiting_since_ns)
        s->waiting_since_ns = gc_now_ns();
}

bool stream_oring_push(gcd_stream *s, gcd_shared_output *o, const uint8_t *from, size_t len)
{
    oring_seg *g = len ? calloc(1, sizeof *g) : NULL;
    if (!g) {
        gcd_shared_output_unref(o);
        if (len == 0)
            return true;
        gc_error err = { 0 };
        gc_fail(&err, GC_E_NOMEM, "out of memory queueing the stream's output");
        stream_fail(s, &err);
        return false;
    }
    *g = (oring_seg){ .o = o, .from = from, .len = len };
    gcd_budget_charge(s->set->server->budget, s->proto.uid, len);
    s->write_bytes += len;
    if (s->oq_tail)
        s->oq_tail->next = g;
    else
        s->oq_head = g;
    s->oq_tail = g;
    oring_pump(s);
    return true;
}

/* Output not yet at the pool is dropped (the stream ended): its memory and charge go now. */
void stream_oring_drop(gcd_stream *s)
{
    oring_seg *g;
    while ((g = s->oq_head)) {
        s->oq_head = g->next;
        gcd_budget_release(s->set->server->budget, s->proto.uid, g->len);
        s->write_bytes -= g->len;
        gcd_shared_output_unref(g->o);
        free(g);
    }
    s->oq_tail = NULL;
}

/*
 * A frame's output_consumed: the client has read the ring up to there. It
 * may only move forward, and only over bytes it was told are there; a
 * client that claims more could make the daemon write over what it has not
 * read, which only spoils its own output, but is a lie all the same.
 */
void stream_oring_credit(gcd_stream *s, const Gpucomp__Request *m)
{
    gc_error err = { 0 };
    uint64_t to = m->output_consumed;
    if (!stream_has_oring(s) && to)
        gc_fail(&err, GC_E_INVALID, "stream %llu: output_consumed on a stream that has no output ring",
                (unsigned long long)s->id);
    else if (stream_has_oring(s) && (to < s->oring_credit || to > s->oring_told))
        gc_fail(&err, GC_E_INVALID,
                "stream %llu: output_consumed %llu, but the client had returned %llu and was told of %llu "
                "output bytes",
                (unsigned long long)s->id, (unsigned long long)to, (unsigned long long)s->oring_credit,
                (unsigned long long)s->oring_told);
    if (err.code) {
        stream_fail(s, &err);
        return;
    }
    if (!stream_has_oring(s) || to == s->oring_credit)
        return;
    s->oring_credit = to;
    oring_pump(s);
}
