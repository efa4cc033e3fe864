/* stream_output.c - a stream's output: frames to the socket, writes to a file, placed parts (see stream_internal.h). */
#include "stream_internal.h"

static size_t fragment_size(const gcd_stream *s)
{
    size_t most = gc_wire_max_payload(s->set->server->cfg.max_frame);
    return most < STREAM_FRAGMENT ? most : STREAM_FRAGMENT;
}

bool gcd_stream_put(gcd_stream *s, const void *data, size_t len)
{
    if (!stream_may_put(s, len))
        return false;
    if (stream_writes_out(s))
        return stream_write_copy(s, data, len);
    size_t fragment = fragment_size(s);
    const uint8_t *p = data;
    s->set->server->counters.stream_loop_copied += len;
    while (len) {
        size_t n = len < fragment ? len : fragment;
        stream_send_fragment(s, p, n);
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
        stream_fragment_response(s, &resp);
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
        return stream_can_send(s);
    if (!stream_may_put(s, to - r->output_sent))
        return false;
    if (!r->shared && !(r->shared = gcd_shared_output_wrap(r->output, r->uid))) {
        bool ok = gcd_stream_put(s, r->output + r->output_sent, to - r->output_sent);
        r->output_sent = to;
        return ok;
    }
    size_t from = r->output_sent;
    r->output_sent = to;
    if (stream_writes_out(s)) {
        gcd_shared_output_ref(r->shared, 1);
        return stream_write_out(s, r->shared, r->shared->buf + from, to - from);
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
    if (!s || !stream_can_send(s) || r->part_seq != s->emit_seq || !r->shared)
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
    if (!r->shared && !(r->shared = gcd_shared_output_wrap(r->output, r->uid))) {
        size_t fragment = fragment_size(s);
        for (size_t at = 0; at < len; at += fragment) {
            stream_send_fragment(s, r->output + at, len - at < fragment ? len - at : fragment);
            s->set->server->counters.stream_loop_copied += len - at < fragment ? len - at : fragment;
        }
        return;
    }
    send_shared(s, r->shared, 0, len);
}

/* A placement's bytes into the output ring, by reference to the part's buffer. */
static void ring_placed(gcd_stream *s, gcd_request *r, size_t len)
{
    if (!r->shared && !(r->shared = gcd_shared_output_wrap(r->output, r->uid))) {
        gc_error err = { 0 };
        gc_fail(&err, GC_E_NOMEM, "out of memory writing a stream part's output");
        stream_fail(s, &err);
        return;
    }
    gcd_shared_output_ref(r->shared, 1);
    stream_oring_push(s, r->shared, r->output, len);
}

/*
 * Placements back from the pool, in stream order: a socket stream's are
 * sent (or go into its output ring) now, in that order. Their parts are freed; the stream goes on (or
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
        if (stream_has_oring(s) && stream_can_send(s) && x->t.len)
            ring_placed(s, x->part, x->t.len);
        else if (s->out_fd < 0 && stream_can_send(s) && x->t.len)
            send_placed(s, x->part, x->t.len);
        gcd_request_free(x->part);
        x->part = NULL;
        x->next = NULL;
        *tail = x;
        tail = &x->next;
    }
    if (!s->answered && s->final_out && s->in_flight == 0 && s->emit_seq == s->next_seq)
        stream_end_output(s);
    else if (!s->answered)
        stream_pump(s);
    while ((x = ended)) {
        ended = x->next;
        stream_io_end(x);
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
        stream_io_error(&err, t, "output file");
        stream_fail(s, &err);
    }
    placed_drain(s);
}

bool gcd_stream_put_placed(gcd_stream *s, gcd_request *r, size_t len, gcd_stream_place_fn place)
{
    if (!stream_may_put(s, len))
        return false;
    gc_error err = { 0 };
    stream_io *x = calloc(1, sizeof *x);
    if (!x) {
        gc_fail(&err, GC_E_NOMEM, "out of memory placing a stream part's output");
        stream_fail(s, &err);
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
    if (!stream_io_start(s, x, &err)) {
        free(x);
        stream_fail(s, &err);
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
