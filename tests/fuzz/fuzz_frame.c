/*
 * fuzz_frame.c - libFuzzer target for the daemon's frame handling.
 *
 * The input is the byte stream a client writes to the daemon's socket. It is
 * cut into frames the way daemon/conn/conn.c's read_one_frame does (4-byte
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
 *    daemon/request/assembly.c, the module daemon/conn/conn.c assembles requests with,
 *    driven the way conn.c drives it (its budget wait, its id cap, cancel,
 *    the first frame of an id, tombstones for refused requests, payload
 *    bounds against total_size), with gcd_request_new, gcd_engine_check and
 *    gcd_request_free from daemon/request/request.c and daemon/sched/engine.c. A first
 *    frame that would wait for memory ends the input (nothing else holds any
 *    here, so only its deadline would end the wait). Stream frames only
 *    count against the id cap: streams have their own tests.
 *  - a request that completes runs through the CPU engine
 *    (gcd_engine_run_cpu, one thread), and a COMPRESS that succeeds is
 *    decompressed by the engine again: it must give the input back.
 *  - the memory budget (daemon/mem/budget.c, request.c's charges): a request
 *    charges its input when admitted, the engine gives it back and charges
 *    the output; once the stream is over and every request freed, nothing
 *    may be left charged.
 *
 * Not covered: descriptors (a fuzz input carries no SCM_RIGHTS, so a
 * payload_in_fd request always meets "fewer than 2 descriptors", as in the
 * daemon), responses, timeouts, the worker queues and the GPU.
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

#include "daemon/request/assembly.h"
#include "daemon/mem/budget.h"
#include "daemon/sched/completions.h"
#include "daemon/sched/engine.h"
#include "daemon/request/request.h"
#include "daemon/request/stream.h"
#include "proto/wire.h"

#define FUZZ_MAX_FRAME GC_WIRE_DEFAULT_MAX_FRAME
#define FUZZ_MAX_REQUEST (1u << 20)
#define FUZZ_MAX_OUTPUT (64u << 20)
#define FUZZ_BUDGET (8u << 20)
#define FUZZ_USER_SHARE (6u << 20)
#define FUZZ_UID 1000

/* The memory budget the requests charge (daemon/mem/budget.h): empty between inputs. */
static gcd_budget *budget;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The codecs' stream hooks (codec.h gcd_stream_ops) hand output to
 * daemon/request/stream_session.c, which lives on the event loop and is not linked here:
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
    (void)r, (void) final;
    abort();
}

void gcd_stream_mark_garbage(gcd_stream *s, uint64_t offset)
{
    (void)s, (void)offset;
    abort();
}

bool gcd_stream_put_placed(gcd_stream *s, gcd_request *part, size_t len, gcd_stream_place_fn place)
{
    (void)s, (void)part, (void)len, (void)place;
    abort();
}

void gcd_stream_rerun(gcd_stream *s, gcd_request *part)
{
    (void)s, (void)part;
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
    case PROTOBUF_C_TYPE_FLOAT: /* bitwise: a NaN must come back as the same NaN */ return memcmp(a, b, 4) == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return memcmp(a, b, 8) == 0;
    case PROTOBUF_C_TYPE_BOOL: return !*(const protobuf_c_boolean *)a == !*(const protobuf_c_boolean *)b;
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
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 4;
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

/* ---- the connection, as daemon/conn/conn.c runs it ---------------------------- */

#define MAX_STREAMS GCD_ASSEMBLY_MAX_IDS

typedef struct conn_model {
    bool serving;                  /* Hello accepted */
    bool closing;                  /* the daemon closes the connection (or waits for ever) */
    gcd_assembly assembly;         /* the daemon's own */
    uint64_t streams[MAX_STREAMS]; /* ids of streams opened and not yet ended by their client */
    unsigned n_streams;
} conn_model;

/* The answer to a refused request must say why. */
static void check_error(const gc_error *err)
{
    if (err->code == GC_OK || !err->msg[0] || !memchr(err->msg, 0, sizeof err->msg))
        abort();
}

static gcd_request *find_assembling(const conn_model *c, uint64_t id)
{
    for (gcd_request *r = c->assembly.list; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

/* What gcd_request_new and admission made of the first frame. */
static void check_new_request(const gcd_request *r, const Gpucomp__Request *m)
{
    if (r->id != m->id || r->op != m->op || r->codec != m->codec || r->total_size != m->total_size || r->output ||
        r->in_fd != -1 || r->out_fd != -1 || r->refused || !r->input || r->charged != r->total_size ||
        r->input_charge != r->total_size)
        abort();
    if (r->max_output == 0 || r->max_output > FUZZ_MAX_OUTPUT ||
        (m->max_output && m->max_output <= FUZZ_MAX_OUTPUT && r->max_output != m->max_output))
        abort();
    if (m->options && (r->level != m->options->level || r->element_width != m->options->element_width ||
                       r->chunk_size != m->options->chunk_size))
        abort();
    if (!m->options && (r->level || r->element_width || r->chunk_size))
        abort();
}

/* Every request in assembly: a tombstone holds nothing, any other its whole input's charge. */
static void check_assembly(const conn_model *c)
{
    unsigned n = 0;
    for (const gcd_request *r = c->assembly.list; r; r = r->next, n++) {
        if (r->received > r->total_size)
            abort();
        if (r->refused ? r->charged || r->input
                       : r->charged != r->input_charge || r->input_charge != r->total_size)
            abort();
    }
    if (n != c->assembly.n || (n == 0) != (c->assembly.started_ns == 0) || n + c->n_streams > GCD_ASSEMBLY_MAX_IDS)
        abort();
}

static int stream_slot(const conn_model *c, uint64_t id)
{
    for (unsigned i = 0; i < c->n_streams; i++)
        if (c->streams[i] == id)
            return (int)i;
    return -1;
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
        if (r->op == GPUCOMP__OP__OP_COMPRESS && r->error.code != GC_E_NOMEM && r->error.code != GC_E_LIMIT)
            abort();
    } else if (r->op == GPUCOMP__OP__OP_DECOMPRESS && r->output_len > r->max_output) {
        abort();
    } else if (input) {
        gcd_request *back = inverse_request(r, len);
        gcd_engine_run_cpu(back, 1);
        if (back->error.code != GC_OK || back->output_len != len || (len && memcmp(back->output, input, len) != 0))
            abort();
        gcd_request_free(back);
    }
    free(input);
}

/* A stream's frame (conn.c hands it to stream_session.c): here it only holds its id until its last frame. */
static void stream_frame(conn_model *c, const Gpucomp__Request *m, int slot)
{
    if (slot < 0) {
        if (!gcd_assembly_id_fits(&c->assembly, c->n_streams)) {
            c->closing = true; /* LIMIT, and the connection closes */
            return;
        }
        slot = (int)c->n_streams++;
        c->streams[slot] = m->id;
    }
    if (m->last)
        c->streams[slot] = c->streams[--c->n_streams];
}

static void request_frame(conn_model *c, const Gpucomp__Request *m)
{
    const int fds[2] = { -1, -1 }; /* a fuzz input carries no descriptors */
    bool first = !find_assembling(c, m->id);
    gcd_request *done = NULL;
    gc_error err = { 0 };
    switch (gcd_assembly_frame(&c->assembly, m, fds, c->n_streams, &done, &err)) {
    case GCD_ASSEMBLY_TAKEN: {
        gcd_request *r = find_assembling(c, m->id);
        if (first && r && !r->refused)
            check_new_request(r, m);
        break;
    }
    case GCD_ASSEMBLY_COMPLETE:
        if (!done || find_assembling(c, m->id) || !gcd_request_complete(done) || done->refused ||
            done->charged != done->total_size)
            abort();
        run_engine(done);
        gcd_request_free(done);
        break;
    case GCD_ASSEMBLY_REFUSED: check_error(&err); break;
    case GCD_ASSEMBLY_FULL:
        c->closing = true; /* LIMIT, and the connection closes */
        break;
    case GCD_ASSEMBLY_NO_MEMORY:
    case GCD_ASSEMBLY_PING:
    case GCD_ASSEMBLY_STATS:
        if (!first || find_assembling(c, m->id))
            abort();
        break;
    }
}

static void handle_request(conn_model *c, const Gpucomp__Request *m)
{
    if (m->id == 0)
        return; /* connection-level PROTOCOL error */
    int slot = stream_slot(c, m->id);
    if (m->op == GPUCOMP__OP__OP_CANCEL) {
        gc_error err = { 0 };
        if (slot >= 0)
            c->streams[slot] = c->streams[--c->n_streams];
        else if (gcd_assembly_cancel(&c->assembly, m->id, &err) && err.code != GC_OK)
            check_error(&err);
    } else if (slot >= 0 || (m->stream && !find_assembling(c, m->id))) {
        stream_frame(c, m, slot);
    } else {
        request_frame(c, m);
    }
    check_assembly(c);
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
    gcd_config cfg = { 0 };
    cfg.max_request = FUZZ_MAX_REQUEST;
    cfg.max_output = FUZZ_MAX_OUTPUT;
    cfg.register_limit = FUZZ_MAX_REQUEST;
    conn_model c = { 0 };
    gcd_assembly_init(&c.assembly, &cfg, budget, FUZZ_UID, NULL);
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
        if (c.serving && f->body_case == GPUCOMP__FRAME__BODY_REQUEST &&
            gcd_assembly_must_wait(&c.assembly, f->request, stream_slot(&c, f->request->id) >= 0, false,
                                   c.n_streams > 0)) {
            gc_wire_free(f);
            break;
        }
        handle_frame(&c, f);
        gc_wire_free(f);
        if (c.closing)
            break;
    }
    /* The connection closes: whatever is still in assembly is dropped. */
    gcd_assembly_clear(&c.assembly);
    if (c.assembly.n != 0 || c.assembly.list || c.assembly.started_ns || gcd_budget_in_use(budget) != 0)
        abort();
    return 0;
}
