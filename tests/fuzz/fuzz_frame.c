/*
 * fuzz_frame.c - libFuzzer target for the daemon's frame handling.
 *
 * The input is the byte stream a client writes to the daemon's socket. It is
 * cut into frames the way daemon/conn.c's read_one_frame does (4-byte
 * little-endian length from gc_wire_body_len, checked against the frame
 * limit before anything is allocated, then gc_wire_unpack on the body), and
 * every frame goes through:
 *
 *  - a round trip: gc_wire_pack of the unpacked Frame must give a header
 *    that matches gc_wire_packed_size, and unpacking that again must give a
 *    Frame equal field by field (compared through the protobuf-c descriptors,
 *    unknown fields included) that packs to the same bytes. Any difference
 *    abort()s.
 *  - the daemon's request path, for every Request after a valid Hello:
 *    gcd_request_new, gcd_engine_check and gcd_request_free from
 *    daemon/request.c and daemon/engine.c (linked as they are). conn.c's
 *    assembly (budget_admits / start_request / admit / handle_request /
 *    refuse) is static and tied to libevent and the server, so it is
 *    mirrored here, decision for decision, without the sockets: first frame
 *    of an id, tombstones for refused requests, payload bounds against
 *    total_size, the 64-request limit that closes the connection, a first
 *    frame that waits for memory (here: until its deadline, as nothing else
 *    holds any) or is refused for memory its own connection holds.
 *  - a request that completes runs through the CPU engine
 *    (gcd_engine_run_cpu, one thread), and a COMPRESS that succeeds is
 *    decompressed by the engine again: it must give the input back.
 *  - the memory budget (daemon/budget.c, request.c's charges): a request
 *    charges its input when admitted, the engine gives it back and charges
 *    the output; once the stream is over and every request freed, nothing
 *    may be left charged.
 *
 * Not covered: descriptors (a fuzz input carries no SCM_RIGHTS, so a
 * payload_in_fd request always meets "fewer than 2 descriptors", as in the
 * daemon), responses, timeouts, the worker queues and the GPU. When conn.c
 * changes its assembly rules, the mirror below must follow.
 *
 * Limits are the daemon's where they do not make the fuzzer allocate
 * gigabytes: the frame limit is the daemon's default (16 MiB); requests are
 * capped at FUZZ_MAX_REQUEST (the daemon's --max-request, default 2 GiB,
 * which the daemon mallocs up front), outputs at FUZZ_MAX_OUTPUT (its
 * --max-output, default 4 GiB), the budget at FUZZ_BUDGET with a user's
 * share of FUZZ_USER_SHARE (small, so that a few frames reach them).
 *
 * Build: scripts/fuzz.sh (target "frame"). Seeds: tests/fuzz/corpus/frame,
 * written by tests/fuzz/make_frame_corpus.c.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/budget.h"
#include "daemon/completions.h"
#include "daemon/engine.h"
#include "daemon/request.h"
#include "daemon/stream.h"
#include "proto/wire.h"

#define FUZZ_MAX_FRAME GC_WIRE_DEFAULT_MAX_FRAME
#define FUZZ_MAX_REQUEST (1u << 20)
#define FUZZ_MAX_OUTPUT (64u << 20)
#define FUZZ_BUDGET (8u << 20)
#define FUZZ_USER_SHARE (6u << 20)
#define FUZZ_UID 1000
#define MAX_ASSEMBLING 64 /* daemon/conn.c */

/* The memory budget the requests charge (daemon/budget.h): empty between inputs. */
static gcd_budget *budget;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The codecs' stream hooks (codec.h gcd_stream_ops) hand output to
 * daemon/stream.c, which lives on the event loop and is not linked here:
 * this model runs requests through the engine and never a stream's part
 * (streams have their own tests, check_stream_wire). Reaching these is a
 * bug in the model.
 */
bool gcd_stream_put(gcd_stream *s, const void *data, size_t len)
{
    (void)s, (void)data, (void)len;
    abort();
}

bool gcd_stream_put_output(gcd_stream *s, gcd_request *r)
{
    (void)s, (void)r;
    abort();
}

void gcd_completions_announce(gcd_request *r, size_t final)
{
    (void)r, (void)final;
    abort();
}

void gcd_stream_mark_garbage(gcd_stream *s, uint64_t offset)
{
    (void)s, (void)offset;
    abort();
}

/* ---- round trip --------------------------------------------------------- */

static bool msg_equal(const ProtobufCMessage *a, const ProtobufCMessage *b);

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

/* One value of type fd->type at a and b. */
static bool value_equal(const ProtobufCFieldDescriptor *fd, const void *a, const void *b)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_FLOAT: /* bitwise: a NaN must come back as the same NaN */
        return memcmp(a, b, 4) == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return memcmp(a, b, 8) == 0;
    case PROTOBUF_C_TYPE_BOOL:
        return !*(const protobuf_c_boolean *)a == !*(const protobuf_c_boolean *)b;
    case PROTOBUF_C_TYPE_STRING:
        return strcmp(str_or_empty(*(char *const *)a), str_or_empty(*(char *const *)b)) == 0;
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *x = a, *y = b;
        return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *x = *(ProtobufCMessage *const *)a, *y = *(ProtobufCMessage *const *)b;
        if (!x || !y)
            return x == y;
        return msg_equal(x, y);
    }
    }
    abort(); /* a type this build does not know */
}

static size_t value_size(const ProtobufCFieldDescriptor *fd)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    default:
        return 4;
    }
}

/* Every field of a and b (same descriptor), repeated and oneof fields included. */
static bool msg_equal(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    if (a->descriptor != b->descriptor)
        return false;
    const ProtobufCMessageDescriptor *d = a->descriptor;
    const char *pa = (const char *)a, *pb = (const char *)b;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t na = *(const size_t *)(pa + fd->quantifier_offset);
            size_t nb = *(const size_t *)(pb + fd->quantifier_offset);
            if (na != nb)
                return false;
            const char *va = *(char *const *)(pa + fd->offset), *vb = *(char *const *)(pb + fd->offset);
            for (size_t k = 0; k < na; k++)
                if (!value_equal(fd, va + k * value_size(fd), vb + k * value_size(fd)))
                    return false;
            continue;
        }
        if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t ca = *(const uint32_t *)(pa + fd->quantifier_offset);
            uint32_t cb = *(const uint32_t *)(pb + fd->quantifier_offset);
            if (ca != cb)
                return false;
            if (ca != fd->id)
                continue;
        } else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->quantifier_offset &&
                   fd->type != PROTOBUF_C_TYPE_MESSAGE && fd->type != PROTOBUF_C_TYPE_STRING) {
            protobuf_c_boolean ha = *(const protobuf_c_boolean *)(pa + fd->quantifier_offset);
            protobuf_c_boolean hb = *(const protobuf_c_boolean *)(pb + fd->quantifier_offset);
            if (!ha != !hb)
                return false;
            if (!ha)
                continue;
        }
        if (!value_equal(fd, pa + fd->offset, pb + fd->offset))
            return false;
    }
    if (a->n_unknown_fields != b->n_unknown_fields)
        return false;
    for (unsigned i = 0; i < a->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *x = &a->unknown_fields[i], *y = &b->unknown_fields[i];
        if (x->tag != y->tag || x->wire_type != y->wire_type || x->len != y->len ||
            (x->len && memcmp(x->data, y->data, x->len) != 0))
            return false;
    }
    return true;
}

/*
 * protobuf-c 1.4 keeps fields it does not know as unknown fields and packs
 * them back. Its tag parser (parse_tag_and_wiretype) refuses field number 0
 * in one byte (0x00-0x07) but takes it in a longer varint (0x80 0x00), and
 * takes numbers beyond 2^29 - 1: packed again, the first comes out as the
 * byte 0x00, which the parser then refuses, the second with its top bits
 * lost. Frames holding such a field cannot round-trip; the daemon never
 * packs a client's frame again, so for it they are only unknown fields to
 * ignore (tests/fuzz/corpus/frame/pbc_field0_long_tag keeps one).
 */
static bool field_numbers_valid(const ProtobufCMessage *m)
{
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        if (m->unknown_fields[i].tag == 0 || m->unknown_fields[i].tag > 536870911u)
            return false;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        const char *p = (const char *)m + fd->offset;
        size_t n = 1;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            n = *(const size_t *)((const char *)m + fd->quantifier_offset);
            p = *(char *const *)p;
        } else if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                   *(const uint32_t *)((const char *)m + fd->quantifier_offset) != fd->id) {
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            const ProtobufCMessage *sub = ((ProtobufCMessage *const *)p)[k];
            if (sub && !field_numbers_valid(sub))
                return false;
        }
    }
    return true;
}

/* Pack f with the daemon's wire code; unpacking that must give f back. */
static void check_round_trip(const Gpucomp__Frame *f)
{
    if (!field_numbers_valid(&f->base))
        return;
    size_t n = gc_wire_packed_size(f);
    uint8_t *buf = malloc(n), *again = NULL;
    if (!buf)
        abort();
    if (gc_wire_pack(f, buf) != n || gc_wire_body_len(buf) != n - GC_WIRE_HEADER_SIZE)
        abort();
    gc_error err = { 0 };
    Gpucomp__Frame *g = gc_wire_unpack(buf + GC_WIRE_HEADER_SIZE, n - GC_WIRE_HEADER_SIZE, &err);
    if (!g || g->body_case != f->body_case || !msg_equal(&f->base, &g->base))
        abort();
    /* protobuf-c writes fields in one order: equal messages pack alike. */
    if (gc_wire_packed_size(g) != n || !(again = malloc(n)) || gc_wire_pack(g, again) != n ||
        memcmp(buf, again, n) != 0)
        abort();
    free(again);
    gc_wire_free(g);
    free(buf);
}

/* ---- the connection, as daemon/conn.c runs it ---------------------------- */

typedef struct conn_model {
    bool serving;          /* Hello accepted */
    bool closing;          /* the daemon closes the connection (or waits for ever) */
    gcd_request *assembling;
    unsigned n_assembling;
} conn_model;

static gcd_request *find_assembling(conn_model *c, uint64_t id)
{
    for (gcd_request *r = c->assembling; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

static void unlink_assembling(conn_model *c, gcd_request *r)
{
    for (gcd_request **p = &c->assembling; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            c->n_assembling--;
            return;
        }
    abort(); /* a request the model lost */
}

static void drop_request(conn_model *c, gcd_request *r)
{
    unlink_assembling(c, r);
    gcd_request_free(r); /* releases its charges */
}

/* The answer to a refused request must say why. */
static void check_error(const gc_error *err)
{
    if (err->code == GC_OK || !err->msg[0] || !memchr(err->msg, 0, sizeof err->msg))
        abort();
}

static void refuse(conn_model *c, gcd_request *r, const gc_error *err, bool more_frames)
{
    check_error(err);
    if (!more_frames) {
        drop_request(c, r);
        return;
    }
    if (!r->input_mapped) { /* drop_input */
        free(r->input);
        r->input = NULL;
        gcd_request_uncharge(r, r->input_charge);
        r->input_charge = 0;
    }
    r->refused = true;
}

static int admit(gcd_request *r, bool payload_in_fd, gc_error *err)
{
    if (gcd_request_is_registration(r)) /* admit_registration: no descriptor ever arrives here */
        return gc_fail(err, GC_E_PROTOCOL, "request %llu: a registration carries one memfd (payload_in_fd)",
                       (unsigned long long)r->id);
    int rc = gcd_engine_check(r, err);
    if (rc != GC_OK) {
        check_error(err);
        return rc;
    }
    if (r->total_size > FUZZ_MAX_REQUEST)
        return gc_fail(err, GC_E_LIMIT, "request of %llu bytes exceeds the max-request",
                       (unsigned long long)r->total_size);
    if (r->max_output == 0 || r->max_output > FUZZ_MAX_OUTPUT)
        r->max_output = FUZZ_MAX_OUTPUT;
    if (payload_in_fd) /* attach_fds with in_fd = out_fd = -1 */
        return gc_fail(err, GC_E_PROTOCOL, "request %llu: payload_in_fd set but fewer than 2 descriptors arrived",
                       (unsigned long long)r->id);
    rc = gcd_request_charge(r, r->total_size, "input", err);
    if (rc != GC_OK) {
        check_error(err);
        return rc;
    }
    if (r->charged != r->total_size)
        abort();
    r->input_charge = r->total_size;
    r->input = malloc(r->total_size ? r->total_size : 1);
    if (!r->input)
        abort();
    return GC_OK;
}

/* What gcd_request_new made of the first frame. */
static void check_new_request(const gcd_request *r, const Gpucomp__Request *m)
{
    if (r->id != m->id || r->op != m->op || r->codec != m->codec || r->total_size != m->total_size ||
        r->max_output != m->max_output || r->received != 0 || r->input || r->output ||
        r->in_fd != -1 || r->out_fd != -1 || r->refused || r->charged)
        abort();
    if (m->options && (r->level != m->options->level || r->element_width != m->options->element_width ||
                       r->chunk_size != m->options->chunk_size))
        abort();
    if (!m->options && (r->level || r->element_width || r->chunk_size))
        abort();
}

static gcd_request *start_request(conn_model *c, const Gpucomp__Request *m)
{
    if (m->op == GPUCOMP__OP__OP_PING || m->op == GPUCOMP__OP__OP_STATS)
        return NULL; /* answered at once */
    if (c->n_assembling >= MAX_ASSEMBLING) { /* LIMIT, and the connection closes */
        c->closing = true;
        return NULL;
    }
    gcd_request *r = gcd_request_new(NULL, m);
    if (!r)
        abort();
    check_new_request(r, m);
    r->budget = budget;
    r->uid = FUZZ_UID;
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
    if (admit(r, m->payload_in_fd, &err) != GC_OK) {
        refuse(c, r, &err, !m->last);
        return NULL;
    }
    return r;
}

/*
 * conn.c's budget_admits: a first frame whose input does not fit the budget
 * now stays unread until memory is released, unless its own connection has
 * a request in assembly holding memory: then admit refuses it with LIMIT at
 * once. Here nothing else holds memory that could be released (every
 * complete request has run), so a connection that waits would wait until
 * its timeouts end the wait: false.
 */
static bool budget_admits(conn_model *c, const Gpucomp__Request *m)
{
    if (m->payload_in_fd || gcd_op_is_registration(m->op) || m->op == GPUCOMP__OP__OP_PING ||
        m->op == GPUCOMP__OP__OP_STATS || m->total_size == 0 || find_assembling(c, m->id))
        return true;
    if (!gcd_budget_could_fit(budget, m->total_size) || m->total_size > FUZZ_MAX_REQUEST)
        return true; /* admit refuses it with GC_E_LIMIT */
    if (gcd_budget_in_use(budget) + m->total_size <= gcd_budget_limit(budget) &&
        gcd_budget_uid_in_use(budget, FUZZ_UID) + m->total_size <= gcd_budget_uid_limit(budget))
        return true;
    for (gcd_request *r = c->assembling; r; r = r->next)
        if (r->charged)
            return true; /* no wait for its own memory: admit refuses it */
    return false;
}

/* A request made of the output of r, to undo it (charged to no budget). */
static gcd_request *inverse_request(const gcd_request *r, uint64_t want)
{
    Gpucomp__CodecOptions opt = GPUCOMP__CODEC_OPTIONS__INIT;
    Gpucomp__Request m = GPUCOMP__REQUEST__INIT;
    m.id = r->id;
    m.op = GPUCOMP__OP__OP_DECOMPRESS;
    m.codec = r->codec;
    m.options = &opt;
    m.total_size = r->output_len;
    m.max_output = want;
    gcd_request *back = gcd_request_new(NULL, &m);
    gc_error err = { 0 };
    if (!back || gcd_engine_check(back, &err) != GC_OK || !(back->input = malloc(r->output_len + 1)))
        abort();
    if (r->output_len)
        memcpy(back->input, r->output, r->output_len);
    back->received = back->total_size;
    return back;
}

/* What a worker does with a complete request; a COMPRESS must decompress back. */
static void run_engine(gcd_request *r)
{
    uint8_t *input = NULL;
    size_t len = (size_t)r->total_size;
    if (r->op == GPUCOMP__OP__OP_COMPRESS) {
        if (!(input = malloc(len + 1)))
            abort();
        memcpy(input, r->input, len);
    }
    gcd_engine_run_cpu(r, 1);
    /* The input and its charge are gone; what is charged now is the output. */
    if (r->input || r->input_charge || r->charged != r->output_charge)
        abort();
    if (r->error.code != GC_OK) {
        check_error(&r->error);
        if (r->output_len)
            abort();
        /* Only a decoder, the budget or an allocation may fail on input that passed the check. */
        if (r->op == GPUCOMP__OP__OP_COMPRESS && r->error.code != GC_E_NOMEM &&
            r->error.code != GC_E_LIMIT)
            abort();
    } else if (r->op == GPUCOMP__OP__OP_DECOMPRESS && r->output_len > r->max_output) {
        abort();
    } else if (input) {
        gcd_request *back = inverse_request(r, len);
        gcd_engine_run_cpu(back, 1);
        if (back->error.code != GC_OK || back->output_len != len ||
            (len && memcmp(back->output, input, len) != 0))
            abort();
        gcd_request_free(back);
    }
    free(input);
}

static void handle_request(conn_model *c, const Gpucomp__Request *m)
{
    if (m->id == 0)
        return; /* connection-level PROTOCOL error */
    gcd_request *r = find_assembling(c, m->id);
    if (!r && !(r = start_request(c, m)))
        return;
    if (r->refused) {
        if (m->last)
            drop_request(c, r);
        return;
    }
    gc_error err = { 0 };
    if (r->received > r->total_size || r->charged != r->input_charge || r->input_charge != r->total_size)
        abort();
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
    unlink_assembling(c, r); /* submit */
    run_engine(r);
    gcd_request_free(r);
}

static void handle_frame(conn_model *c, const Gpucomp__Frame *f)
{
    if (!c->serving) {
        if (f->body_case != GPUCOMP__FRAME__BODY_HELLO ||
            f->hello->protocol_version != GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT)
            c->closing = true;
        else
            c->serving = true;
    } else if (f->body_case == GPUCOMP__FRAME__BODY_REQUEST) {
        handle_request(c, f->request);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!budget && !(budget = gcd_budget_new(FUZZ_BUDGET, FUZZ_USER_SHARE)))
        abort();
    conn_model c = { 0 };
    size_t at = 0;
    while (size - at >= GC_WIRE_HEADER_SIZE) {
        uint32_t body = gc_wire_body_len(data + at);
        if (body > FUZZ_MAX_FRAME || size - at - GC_WIRE_HEADER_SIZE < body)
            break; /* closed with a LIMIT error / waiting for the rest */
        at += GC_WIRE_HEADER_SIZE;
        gc_error err = { 0 };
        Gpucomp__Frame *f = gc_wire_unpack(data + at, body, &err);
        at += body;
        if (!f) {
            if (err.code != GC_E_PROTOCOL)
                abort();
            check_error(&err);
            if (!c.serving)
                break;
            continue;
        }
        if (f->body_case == GPUCOMP__FRAME__BODY__NOT_SET)
            abort();
        check_round_trip(f);
        if (c.serving && f->body_case == GPUCOMP__FRAME__BODY_REQUEST && !budget_admits(&c, f->request)) {
            gc_wire_free(f);
            break;
        }
        handle_frame(&c, f);
        gc_wire_free(f);
        if (c.closing)
            break;
    }
    /* The connection closes: whatever is still in assembly is dropped. */
    while (c.assembling)
        drop_request(&c, c.assembling);
    if (c.n_assembling != 0 || gcd_budget_in_use(budget) != 0)
        abort();
    return 0;
}
