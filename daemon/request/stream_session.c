/* stream_session.c - stream sessions (see stream.h): opening, input, cutting parts, ordered emission, the end. */
#include "stream_internal.h"

static void resubmit(gcd_stream *s, gcd_request *r);

bool stream_is_ring(const gcd_stream *s)
{
    return s->ring_fd >= 0;
}

/* A file or ring stream: its parts are read straight into their own buffers; buf holds only what the cut peeks at. */
bool stream_reads_parts(const gcd_stream *s)
{
    return s->in_fd >= 0 || stream_is_ring(s);
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
void stream_drop_buffer(gcd_stream *s)
{
    s->drop_after_peek = s->peeking;
    if (s->peeking)
        return;
    gcd_part_cache_free(s->proto.uid, s->buf);
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
    stream_drop_buffer(s);
    free(s->rest);
    gcd_budget_release(s->set->server->budget, s->proto.uid, s->rest_len);
    if (s->in_fd >= 0)
        close(s->in_fd);
    if (s->out_fd >= 0)
        close(s->out_fd);
    if (stream_is_ring(s))
        close(s->ring_fd);
    stream_oring_drop(s);
    if (stream_has_oring(s))
        close(s->oring_fd);
    if (s->ring_charged)
        gcd_budget_release(set->server->budget, s->proto.uid, s->ring_charged);
    if (s->ops && s->ops->close && s->state)
        s->ops->close(s->state);
    else
        free(s->state);
    free(s);
}

/* Free s once nothing refers to it: its client has finished with the id, no part is out, no I/O runs. */
void stream_maybe_free(gcd_stream *s)
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

bool stream_can_send(const gcd_stream *s)
{
    return s->set->serving(s->set->owner) && !s->answered;
}

void stream_fragment_response(const gcd_stream *s, Gpucomp__Response *resp)
{
    *resp = (Gpucomp__Response)GPUCOMP__RESPONSE__INIT;
    resp->id = s->id;
    resp->stream = 1;
    resp->consumed = s->consumed;
}

void stream_send_fragment(gcd_stream *s, const uint8_t *data, size_t len)
{
    Gpucomp__Response resp;
    stream_fragment_response(s, &resp);
    resp.payload.data = (uint8_t *)data;
    resp.payload.len = len;
    gcd_send_response(s->set->out, &resp);
}

/* Tell the client how much input was taken, so it may send more. */
void stream_send_credit(gcd_stream *s)
{
    if (stream_can_send(s) && s->in_fd < 0) /* a file stream's client sends no more input */
        stream_send_fragment(s, NULL, 0);
}

/* Whether len more bytes may go out; if not, the stream has failed. */
bool stream_may_put(gcd_stream *s, size_t len)
{
    if (!stream_can_send(s))
        return false;
    uint64_t max = s->proto.max_output;
    if (max && len > max - s->out_total) {
        gc_error err = { 0 };
        gc_fail(&err, GC_E_LIMIT, "the stream's output exceeds its max_output of %llu bytes",
                (unsigned long long)max);
        stream_fail(s, &err);
        return false;
    }
    return true;
}

/*
 * One event of a part's life at --log-level=debug (cut, submitted, back,
 * emitted, written), so a slow stream shows where its time went
 * (docs/ARCHITECTURE.md, "Streams").
 */
void stream_trace(const gcd_stream *s, const char *event, uint64_t seq, uint64_t a, uint64_t b)
{
    gcd_log(LOG_DEBUG, "stream %llu %.3f ms: %s %llu (%llu %llu)", (unsigned long long)s->id,
            (double)(gc_now_ns() - s->opened_ns) / 1e6, event, (unsigned long long)seq, (unsigned long long)a,
            (unsigned long long)b);
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
void stream_fail(gcd_stream *s, const gc_error *err)
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
    stream_drop_buffer(s);
    stream_oring_drop(s);
}

/*
 * A part's error ends the stream once the output before it is out: in an
 * output ring that is once its writes are done (the client reads there every
 * block decoded before a damaged one, as it would in frames sent before
 * the error). Meanwhile nothing more is cut or emitted.
 */
void stream_fail_after_output(gcd_stream *s, const gc_error *err)
{
    if (!stream_has_oring(s) || s->write_bytes == 0 || s->answered) {
        stream_fail(s, err);
        return;
    }
    s->failing = *err;
    cancel_parts(s);
}

/* The end of the output, then the final frame once every byte of it is written. */
void stream_end_output(gcd_stream *s)
{
    gc_error err = { 0 };
    if (s->placing ||
        s->failing
            .code) /* a failing stream ends with its error (stream_oring.c) */ /* the end follows every part's bytes: placed_drain comes back here */
        return;
    if (!s->finishing) {
        s->finishing = true;
        if (s->ops->finish && s->ops->finish(s->state, s, &err) != GC_OK) {
            stream_fail(s, &err);
            return;
        }
    }
    if (!stream_can_send(s) || s->write_bytes)
        return;
    stream_trace(s, "final after", s->next_seq, s->out_total, s->engine_ns / 1000000);
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
bool stream_reserve(gcd_stream *s, size_t more, gc_error *err)
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
        stream_fail(s, &err);
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
        gc_fail(&err, GC_E_INVALID,
                "stream %llu: a ring stream's input travels in its stream_is_ring, not as payload",
                (unsigned long long)s->id);
    else
        gcd_stream_ring_check_frame(s->ring_size, s->received, s->consumed, m->ring_offset, m->ring_length, &err);
    if (err.code) {
        stream_fail(s, &err);
        return;
    }
    if (!s->garbage && !charge_ring_input(s, m->ring_length))
        return;
    s->received += m->ring_length;
    if (s->garbage)
        s->consumed = s->received;
    release_ring_input(s);
    if (s->garbage && m->ring_length)
        stream_send_credit(s);
    if (m->flush && !s->garbage)
        s->flush_at = s->received;
}

/* Input after trailing garbage is not kept: it counts as taken at once. */
static void take_input(gcd_stream *s, const Gpucomp__Request *m)
{
    gc_error err = { 0 };
    size_t n = m->payload.len;
    if (stream_is_ring(s)) {
        take_ring_input(s, m);
        return;
    }
    if (m->ring_offset || m->ring_length) {
        gc_fail(&err, GC_E_PROTOCOL, "stream %llu: ring input on a stream that has no ring",
                (unsigned long long)s->id);
        stream_fail(s, &err);
        return;
    }
    if (s->received + n - s->consumed > GCD_STREAM_WINDOW) {
        gc_fail(&err, GC_E_PROTOCOL,
                "stream %llu: the client sent %llu bytes beyond the %llu it was told were taken "
                "(window %llu)",
                (unsigned long long)s->id, (unsigned long long)(s->received + n - s->consumed),
                (unsigned long long)s->consumed, (unsigned long long)GCD_STREAM_WINDOW);
        stream_fail(s, &err);
        return;
    }
    s->received += n;
    if (s->garbage) {
        s->consumed = s->received;
        if (n)
            stream_send_credit(s);
        return;
    }
    if (n && !stream_reserve(s, n, &err)) {
        stream_fail(s, &err);
        return;
    }
    if (n)
        memcpy(s->buf + s->len, m->payload.data, n);
    s->set->server->counters.stream_loop_copied += n;
    s->len += n;
    if (m->flush)
        s->flush_at = s->received;
}

/* Whether a frame adds input or marks it (a frame with none may carry only an output ring's credit). */
static bool carries_input(const Gpucomp__Request *m)
{
    return m->payload.len || m->ring_offset || m->ring_length || m->flush || m->last;
}

/*
 * An output ring's client sends credit after its input's last frame, so
 * its last frame ends the input only: it ends the id with OP_CANCEL once
 * the final frame has come (docs/PROTOCOL.md, "Output rings").
 */
static void take_frame(gcd_stream *s, const Gpucomp__Request *m)
{
    gc_error err = { 0 };
    if (s->answered)
        return;
    if (s->input_ended && carries_input(m)) {
        gc_fail(&err, GC_E_PROTOCOL, "stream %llu: input after the stream's last frame",
                (unsigned long long)s->id);
        stream_fail(s, &err);
        return;
    }
    if (s->in_fd < 0 && carries_input(m)) /* a file stream's input is its file */
        take_input(s, m);
    if (!s->answered)
        stream_oring_credit(s, m);
}

void gcd_stream_frame(gcd_stream *s, const Gpucomp__Request *m)
{
    if (s->client_done) { /* frames after its last: a protocol slip, dropped */
        return;
    }
    s->waiting_since_ns = 0;
    take_frame(s, m);
    if (m->last) {
        s->client_done = !stream_has_oring(s);
        s->input_ended = true; /* a file stream's input is all there */
    }
    if (s->answered && !s->client_done)
        s->waiting_since_ns = gc_now_ns(); /* a tombstone: its next frame has a deadline too */
    if (!s->answered)
        stream_pump(s);
    stream_maybe_free(s);
}

/* A ring stream's stream_is_ring (docs/PROTOCOL.md, "Ring streams"): checked and sealed; its input is charged as it comes. */
static int open_ring(gcd_stream *s, const Gpucomp__Request *m, gc_error *err)
{
    if (m->input_fd || m->output_fd)
        return gc_fail(err, GC_E_PROTOCOL, "stream %llu: a stream has a ring or files, not both",
                       (unsigned long long)m->id);
    if (!stream_is_ring(s))
        return gc_fail(err, GC_E_PROTOCOL, "stream %llu: a ring stream's first frame came without its ring",
                       (unsigned long long)m->id);
    return gcd_stream_ring_check(s->ring_fd, GCD_STREAM_WINDOW, GCD_STREAM_RING_MOST, &s->ring_size, err);
}

/* An output ring (docs/PROTOCOL.md, "Output rings"): checked and sealed; the pool writes into it. */
static int open_oring(gcd_stream *s, const Gpucomp__Request *m, gc_error *err)
{
    if (m->output_fd)
        return gc_fail(err, GC_E_PROTOCOL, "stream %llu: a stream has an output file or an output ring, not both",
                       (unsigned long long)m->id);
    if (!stream_has_oring(s))
        return gc_fail(err, GC_E_PROTOCOL, "stream %llu: a stream's first frame came without its output ring",
                       (unsigned long long)m->id);
    return gcd_stream_ring_check_output(s->oring_fd, GCD_STREAM_ORING_LEAST, GCD_STREAM_RING_MOST, &s->oring_size,
                                        err);
}

/* A file stream's descriptors (docs/PROTOCOL.md, "File streams"), already s's: stream_free closes them. */
static int open_files(gcd_stream *s, const Gpucomp__Request *m, gc_error *err)
{
    if (m->output_ring) {
        int rc = open_oring(s, m, err);
        if (rc != GC_OK)
            return rc;
    }
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
 * part that does not fit waits for one out to stream_end_output; a socket stream's also
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
    /* the input's descriptor (a ring or a file) comes first, then the output's (a file or a ring) */
    bool input_first = m->ring || m->input_fd;
    s->oring_fd = m->output_ring ? fds[input_first ? 1 : 0] : -1;
    s->in_fd = m->ring || (m->output_ring && !input_first) ? -1 : fds[0];
    s->ring_fd = m->ring ? fds[0] : -1;
    s->out_fd = m->output_ring ? -1 : fds[1];
    for (int i = 0; i < 2; i++) /* one the frame's flags give no place (output_fd with an output ring) */
        if (fds[i] >= 0 && fds[i] != s->in_fd && fds[i] != s->ring_fd && fds[i] != s->out_fd &&
            fds[i] != s->oring_fd)
            close(fds[i]);
    s->next = set->list;
    set->list = s;
    set->n++;
    int rc = check_open(set, m, &s->proto, &err);
    set->n_open++; /* stream_fail() below counts it answered */
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
        if ((s->in_fd >= 0 || stream_is_ring(s)) && s->ops->settle && s->ops->span)
            s->span = s->ops->span(&s->proto);
    }
    if (rc != GC_OK) {
        if (!err.msg[0])
            gc_fail(&err, GC_E_NOMEM, "out of memory opening a stream");
        s->client_done = m->last;
        stream_fail(s, &err);
        stream_maybe_free(s);
        return;
    }
    gcd_stream_frame(s, m);
}

void gcd_stream_cancel(gcd_stream *s)
{
    gc_error err = { 0 };
    gc_fail(&err, GC_E_CANCELLED, "stream %llu cancelled by the client", (unsigned long long)s->id);
    s->client_done = true;
    stream_fail(s, &err);
    stream_maybe_free(s);
}

/* ---- parts ------------------------------------------------------------- */

/*
 * Whether the client's unread answers (or output-ring output not yet read) hold the stream back. Above the
 * high-water mark one part may still run while they drain, if none of the
 * stream's is out: the engine then works during the drain instead of after
 * it (a stream whose parts run one at a time would otherwise idle for every part's output). The
 * queue stays bounded: that part's output joins at most STREAM_OUTPUT_MOST.
 */
static bool output_backed_up(const gcd_stream *s)
{
    /* an output ring's output waiting for the pool or for credit is the client's unread output too */
    size_t queued = gcd_output_queued(s->set->out) + (stream_has_oring(s) ? (size_t)s->write_bytes : 0);
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
    if ((s->in_fd >= 0 && !stream_has_oring(s)) || s->next_seq == s->emit_seq)
        return false; /* one part may always run; a file's output waits only for its disk */
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
    return stream_peek(s, from, to, err) ? GC_OK : err->code;
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
        return stream_peek(s, 0, avail, err) ? GC_OK : err->code;
    return s->ops->cut(s->state, &s->proto, s->buf, avail, final, flush, take, err);
}

static int next_cut(gcd_stream *s, size_t *take, bool *final, gc_error *err)
{
    uint64_t mark = s->flush_at ? s->flush_at - s->base : 0;
    bool ended = s->input_ended;
    size_t all = s->in_fd >= 0       ? (size_t)(s->in_size - s->base)
                 : stream_is_ring(s) ? (size_t)(s->received - s->base)
                                     : s->len;
    size_t avail =
        stream_is_ring(s) && all > GCD_STREAM_WINDOW ? (size_t)GCD_STREAM_WINDOW : all; /* what a cut needs */
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
             : stream_is_ring(s)
                 ? ring_cut(s, avail, ended && avail == all, flush, take, err)
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
    uint8_t *nb = cap ? gcd_part_cache_alloc(s->proto.uid, cap) : NULL;
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
    uint8_t *in = own_buffer ? gcd_part_cache_alloc(s->proto.uid, size) : NULL;
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
    bool own_buffer = take == 0 || stream_reads_parts(s); /* else hand_over gives it buf */
    gcd_request *r = new_part(s, take, take, own_buffer, final, err);
    if (!r)
        return NULL;
    size_t advance = take - (keep < take ? keep : take); /* the overlap begins the next part too */
    if (stream_reads_parts(s)) {                         /* read by the pool (stream_start_part) */
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

void stream_pump(gcd_stream *s)
{
    unsigned depth = s->depth;
    if (s->failing.code)
        return;
    if (s->garbage && !s->answered) { /* nothing more is decoded: finish when the input ends */
        s->final_out = s->final_out || s->input_ended;
        if (s->final_out && s->in_flight == 0 && s->emit_seq == s->next_seq)
            stream_end_output(s);
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
            stream_fail(s, &err);
            return;
        }
        if (!s->span && take == 0 && !final)
            break;
        bool wait = false;
        if (s->span && stream_is_ring(s) && s->flush_at && s->flush_at == s->read_to &&
            flush_at_last_part(s, &wait))
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
        if (!r && err.code == GC_E_LIMIT && stream_reads_parts(s) && s->in_flight > 0)
            break; /* a file or ring stream waits for a part out to give its memory back */
        if (!r) {
            stream_fail(s, &err);
            return;
        }
        s->final_out = final;
        s->in_flight++;
        s->out[r->part_seq % STREAM_SLOTS] = r;
        stream_trace(s, "cut", r->part_seq, r->part_offset, r->total_size);
        stream_start_part(s, r);
        stream_advance_consumed(s);
        stream_send_credit(s);
    }
    if (!s->answered && !s->input_ended && s->in_flight == 0 && !s->waiting_since_ns)
        s->waiting_since_ns = gc_now_ns();
}

/*
 * Input taken into parts, which the client may now overwrite: a ring
 * stream's only once the pool has read it out of the ring.
 */
bool stream_advance_consumed(gcd_stream *s)
{
    uint64_t to =
        s->span && stream_is_ring(s) ? s->read_to : s->base; /* a settled file stream's moves as it settles */
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
    while (!s->answered && !s->failing.code && (r = s->done[s->emit_seq % STREAM_SLOTS]) &&
           r->part_seq == s->emit_seq) {
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
        stream_trace(s, s->rerun == r ? "emit reruns" : "emitted", r->part_seq, r->output_len, s->write_bytes);
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
            stream_drop_buffer(s);
            s->consumed = s->received;
            release_ring_input(s);
            s->final_out = s->input_ended;
        }
        if (s->kept == r)
            s->kept = NULL;
        else
            gcd_request_free(r);
        if (err.code != GC_OK) {
            stream_fail_after_output(s, &err);
            return;
        }
    }
    if (!s->answered && s->final_out && s->in_flight == 0 && s->emit_seq == s->next_seq)
        stream_end_output(s);
}

void gcd_stream_part_done(gcd_request *r)
{
    gcd_stream *s = r->stream;
    s->in_flight--;
    s->out[r->part_seq % STREAM_SLOTS] = NULL;
    if (s->answered || !s->set->serving(s->set->owner)) {
        gcd_request_free(r);
        stream_maybe_free(s);
        return;
    }
    if (r->client_cancelled && r->error.code != GC_OK)
        gc_fail(&r->error, GC_E_CANCELLED, "cancelled by the client");
    if (r->output_len > s->part_out_most)
        s->part_out_most = r->output_len;
    stream_trace(s, r->backend == GPUCOMP__BACKEND__BACKEND_GPU ? "back from gpu" : "back from cpu", r->part_seq,
                 r->engine_ns / 1000000, r->output_len);
    s->done[r->part_seq % STREAM_SLOTS] = r;
    emit_ready(s);
    if (!s->answered)
        stream_pump(s);
    stream_maybe_free(s);
}

void gcd_stream_resume_all(gcd_stream_set *set)
{
    gcd_stream *next;
    for (gcd_stream *s = set->list; s; s = next) {
        next = s->next;
        if (!s->answered)
            stream_pump(s);
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
