/*
 * check_wire_chaos.c - seeded random walks of hostile frames against a real
 * gpucompd (docs/SECURITY.md). Several raw connections at once each take
 * random steps: good and bad Hellos, whole requests inline and in memfds of
 * every wrong kind, streams with input and output rings, credit that lies,
 * cancels, garbage bodies, length prefixes that lie, half frames and abrupt
 * closes. No step asserts which error it gets; the suite asserts what the
 * daemon promises whatever it is sent: it stays alive, every frame it sends
 * parses, a well-behaved client keeps getting byte-exact round trips, and
 * once the attackers are gone it holds no request memory, no connection and
 * no more descriptors than before. One seed drives every choice; it is
 * printed, and GPUCOMP_CHAOS_SEED replays it (=time: a new one from the
 * clock); GPUCOMP_CHAOS_ROUNDS makes a longer run of it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "daemon_harness.h"
#include "fdpass.h"
#include "gpucomp.h"
#include "test_rng.h"
#include "wire.h"

#define N_CONNS 8
#define N_ROUNDS 6
#define STEPS_PER_ROUND 800
#define MAX_STREAMS 6
#define MAX_FRAME (1u << 20)
#define POOL_LEN (1u << 20)
#define BOMB_LEN (8u << 20)

static test_daemon dut;

/* A stream this test opened, as far as the test knows it. */
typedef struct chaos_stream {
    uint64_t id;
    uint64_t ring_size;  /* input ring bytes, 0: none */
    uint64_t ring_sent;  /* input named in the ring so far */
    uint64_t oring_size; /* output ring bytes, 0: none */
    uint64_t named;      /* output ring bytes the daemon's frames named */
    uint64_t credited;   /* the highest honest output_consumed sent */
    int ring_fd;         /* the input ring, kept to write input into */
    bool input_done;     /* its last frame or a cancel was sent */
    bool answered;       /* its final frame came */
    uint64_t consumed;   /* the daemon's last word on the input it took */
} chaos_stream;

typedef struct chaos_conn {
    int fd;
    int reg_fd; /* a memfd this connection registered, reused as requests' input */
    bool welcomed;
    bool deaf;         /* reads nothing until the round ends */
    bool fds_skewed;   /* a frame carried other descriptors than it named: which ring is whose is unknown */
    bool mid_response; /* the last frame was one of a response with more to come */
    uint64_t mid_id;
    uint64_t next_id;
    chaos_stream streams[MAX_STREAMS];
    unsigned n_streams;
} chaos_conn;

typedef struct chaos {
    uint64_t seed; /* for every failure's message */
    uint64_t rng;
    chaos_conn conns[N_CONNS];
    uint64_t window;   /* stream window from a Welcome */
    uint8_t *pool;     /* random bytes the inputs are cut from */
    uint8_t *valid[2]; /* real compressed inputs: rle, bzip2 */
    size_t valid_len[2];
    void *bomb[2]; /* inputs that decompress to BOMB_LEN zeros: rle, bzip2 */
    size_t bomb_len[2];
    unsigned long frames_in;                                        /* answer frames read */
    unsigned long by_status[GPUCOMP__STATUS__STATUS_TOO_SMALL + 2]; /* final answer frames by status */
    unsigned long closed_by_daemon;
    unsigned long steps;
} chaos;

/* ---- random choices -------------------------------------------------- */

static uint64_t rnd(chaos *c, uint64_t n)
{
    return n ? test_xorshift(&c->rng) % n : 0;
}

static bool chance(chaos *c, unsigned percent)
{
    return rnd(c, 100) < percent;
}

/* A size that is mostly small, sometimes up to max. */
static size_t rnd_size(chaos *c, size_t max)
{
    switch (rnd(c, 4)) {
    case 0: return rnd(c, 16);
    case 1: return rnd(c, 4096);
    default: return rnd(c, max + 1);
    }
}

/* An id: usually the next one, else zero, huge, an old one or a stream's. */
static uint64_t rnd_id(chaos *c, chaos_conn *k)
{
    switch (rnd(c, 32)) {
    case 0: return 0;
    case 1: return UINT64_MAX - rnd(c, 2);
    case 2:
    case 3: return k->next_id > 1 ? 1 + rnd(c, k->next_id - 1) : 1;
    case 4:
    case 5:
    case 6: return k->n_streams ? k->streams[rnd(c, k->n_streams)].id : 1;
    default: return k->next_id++;
    }
}

/* ---- sending and receiving, where the daemon may close at any moment --- */

static void conn_drop(chaos_conn *k)
{
    for (unsigned i = 0; i < k->n_streams; i++)
        if (k->streams[i].ring_fd >= 0)
            close(k->streams[i].ring_fd);
    if (k->fd >= 0)
        close(k->fd);
    if (k->reg_fd >= 0)
        close(k->reg_fd);
    uint64_t next = k->next_id;
    memset(k, 0, sizeof *k);
    k->fd = k->reg_fd = -1;
    k->next_id = next;
}

static bool send_raw(chaos_conn *k, const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len) {
        ssize_t n = send(k->fd, b, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            conn_drop(k); /* closed by the daemon, or it stopped reading us */
            return false;
        }
        b += n;
        len -= (size_t)n;
    }
    return true;
}

/*
 * The descriptors the daemon takes off the connection's queue for a frame
 * (daemon/request/assembly.c): what the frame names, not what came with it.
 */
static unsigned fds_named(const Gpucomp__Request *r)
{
    if (r->payload_in_fd)
        return r->op == GPUCOMP__OP__OP_REGISTER || r->op == GPUCOMP__OP__OP_UNREGISTER ? 1 : 2;
    return (unsigned)r->input_fd + (unsigned)r->output_fd +
           (r->stream ? (unsigned)r->ring + (unsigned)r->output_ring : 0);
}

static bool send_request(chaos_conn *k, const Gpucomp__Request *req, const int *fds, unsigned n_fds)
{
    if (k->fd < 0)
        return false;
    k->fds_skewed |= n_fds != fds_named(req);
    if (raw_try_send_request_fds(k->fd, req, fds, n_fds) == 0)
        return true;
    conn_drop(k);
    return false;
}

static chaos_stream *stream_of(chaos_conn *k, uint64_t id)
{
    for (unsigned i = 0; i < k->n_streams; i++)
        if (k->streams[i].id == id)
            return &k->streams[i];
    return NULL;
}

/*
 * What the protocol promises of an answer frame: a response's frames come
 * back to back; a stream's consumed never goes back; output ring frames go
 * on where the last one ended, never past the ring's end or the credit,
 * and the final frame counts them.
 */
static void check_answer(chaos *c, chaos_conn *k, const Gpucomp__Response *r)
{
    ck_assert_msg(!k->mid_response || (r->id == k->mid_id && !r->stream),
                  "seed %" PRIu64 ": a frame of id %" PRIu64 " inside the response to %" PRIu64, c->seed, r->id,
                  k->mid_id);
    k->mid_response = !r->stream && !r->last;
    k->mid_id = r->id;
    chaos_stream *s = stream_of(k, r->id);
    if (!s || !r->stream || s->answered) /* after its final frame, the id may open anything */
        return;
    ck_assert_msg(r->consumed >= s->consumed,
                  "seed %" PRIu64 ": stream %" PRIu64 ": consumed %" PRIu64 " after %" PRIu64, c->seed, r->id,
                  r->consumed, s->consumed);
    s->consumed = r->consumed;
    s->answered = r->last;
    if (r->last && s->oring_size && r->status == GPUCOMP__STATUS__STATUS_OK)
        ck_assert_msg(r->total_size == s->named,
                      "seed %" PRIu64 ": stream %" PRIu64 " ends at %" PRIu64
                      " bytes, its ring frames named %" PRIu64,
                      c->seed, r->id, r->total_size, s->named);
    if (!s->oring_size || !r->ring_length)
        return;
    ck_assert_msg(r->ring_offset == s->named % s->oring_size && r->ring_offset + r->ring_length <= s->oring_size,
                  "seed %" PRIu64 ": stream %" PRIu64 " names ring bytes [%" PRIu64 ", +%" PRIu64 ") of %" PRIu64
                  " after %" PRIu64,
                  c->seed, r->id, r->ring_offset, r->ring_length, s->oring_size, s->named);
    s->named += r->ring_length;
    ck_assert_msg(s->named <= s->credited + s->oring_size,
                  "seed %" PRIu64 ": stream %" PRIu64 ": %" PRIu64 " output bytes named, credit %" PRIu64
                  " + ring %" PRIu64,
                  c->seed, r->id, s->named, s->credited, s->oring_size);
}

/*
 * Read one frame if one comes within wait_ms. Every frame must parse, and
 * be a Welcome first and Responses after; a close (or a reset) is fine.
 * Returns the frame (caller frees) or NULL.
 */
static Gpucomp__Frame *recv_frame(chaos *c, chaos_conn *k, int wait_ms)
{
    struct pollfd p = { k->fd, POLLIN, 0 };
    if (k->fd < 0 || poll(&p, 1, wait_ms) <= 0)
        return NULL;
    uint8_t hdr[GC_WIRE_HEADER_SIZE];
    ssize_t n = recv(k->fd, hdr, sizeof hdr, MSG_WAITALL);
    if (n != (ssize_t)sizeof hdr) {
        c->closed_by_daemon++;
        conn_drop(k);
        return NULL;
    }
    uint32_t len = gc_wire_body_len(hdr);
    ck_assert_msg(len <= MAX_FRAME, "the daemon sent a frame of %u bytes (limit %u)", len, MAX_FRAME);
    uint8_t *body = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(body);
    n = len ? recv(k->fd, body, len, MSG_WAITALL) : 0;
    if (n != (ssize_t)len) { /* a connection cut mid-frame is a close, not a frame */
        free(body);
        c->closed_by_daemon++;
        conn_drop(k);
        return NULL;
    }
    gc_error err = { 0 };
    Gpucomp__Frame *f = gc_wire_unpack(body, len, &err);
    free(body);
    ck_assert_msg(f != NULL, "an answer frame of %u bytes does not parse: %s", len, err.msg);
    Gpucomp__Frame__BodyCase want = k->welcomed ? GPUCOMP__FRAME__BODY_RESPONSE : GPUCOMP__FRAME__BODY_WELCOME;
    ck_assert_msg(f->body_case == want, "the daemon sent a frame of kind %d where %d belongs", f->body_case, want);
    c->frames_in++;
    if (f->body_case == GPUCOMP__FRAME__BODY_RESPONSE) {
        check_answer(c, k, f->response);
        if (f->response->last || f->response->id == 0) {
            unsigned st = (unsigned)f->response->status;
            c->by_status[st <= GPUCOMP__STATUS__STATUS_TOO_SMALL ? st : GPUCOMP__STATUS__STATUS_TOO_SMALL + 1]++;
        }
    }
    return f;
}

/* Read what the daemon has for k now. */
static void drain(chaos *c, chaos_conn *k, int wait_ms)
{
    Gpucomp__Frame *f;
    while ((f = recv_frame(c, k, wait_ms)) != NULL) {
        gc_wire_free(f);
        wait_ms = 0;
    }
}

/* ---- the steps ------------------------------------------------------- */

static void step_hello(chaos *c, chaos_conn *k)
{
    if (k->fd >= 0)
        conn_drop(k);
    k->fd = raw_connect(dut.socket_path);
    ck_assert_msg(k->fd >= 0, "cannot connect to the daemon");
    struct timeval rcv = { 5, 0 }, snd = { 1, 0 }; /* a daemon that stops reading us: drop the connection */
    setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv);
    setsockopt(k->fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
    static const uint32_t versions[] = { 0, 2, 7, UINT32_MAX };
    Gpucomp__Hello h = GPUCOMP__HELLO__INIT;
    h.protocol_version = chance(c, 85) ? 1 : versions[rnd(c, 4)];
    h.client_name = (char *)"check_wire_chaos";
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_HELLO;
    f.hello = &h;
    uint8_t buf[128];
    size_t len = gc_wire_pack(&f, buf);
    if (!send_raw(k, buf, len))
        return;
    Gpucomp__Frame *w = recv_frame(c, k, 5000);
    if (!w)
        return;
    if (w->welcome->status == GPUCOMP__STATUS__STATUS_OK) {
        k->welcomed = true;
        k->deaf = chance(c, 10);
        c->window = w->welcome->stream_window;
    } else {
        drain(c, k, 1000); /* a refused Hello: the daemon closes */
        conn_drop(k);
    }
    gc_wire_free(w);
}

/* Codec options: valid mostly (bzip2's fast levels), else one of them out of range. */
static void rnd_options(chaos *c, Gpucomp__CodecOptions *o)
{
    static const uint32_t widths[] = { 0, 1, 2, 4, 8 };
    o->level = (uint32_t)rnd(c, 4);
    o->element_width = widths[rnd(c, 5)];
    o->chunk_size = chance(c, 80) ? 0 : 64u << rnd(c, 21);
    if (chance(c, 85))
        return;
    switch (rnd(c, 3)) {
    case 0: o->level = 10 + (uint32_t)rnd(c, UINT32_MAX - 10); break;
    case 1: o->element_width = chance(c, 50) ? 3 : UINT32_MAX - (uint32_t)rnd(c, 2); break;
    default: o->chunk_size = (uint32_t)rnd(c, 64) + (chance(c, 50) ? 0 : (64u << 20) + 1); break;
    }
}

/* The input bytes of a request: random, or a real compressed stream, perhaps damaged. */
static const uint8_t *rnd_input(chaos *c, Gpucomp__Codec codec, size_t *len)
{
    int v = codec == GPUCOMP__CODEC__CODEC_BZIP2;
    if (chance(c, 4)) {
        *len = c->bomb_len[v];
        return c->bomb[v];
    }
    if (chance(c, 40) && c->valid[v]) {
        *len = c->valid_len[v] - (chance(c, 30) ? rnd(c, c->valid_len[v]) : 0);
        if (chance(c, 50))
            c->valid[v][rnd(c, c->valid_len[v])] ^= (uint8_t)(1u << rnd(c, 8));
        return c->valid[v];
    }
    *len = rnd_size(c, MAX_FRAME / 2);
    return c->pool + rnd(c, POOL_LEN - *len + 1);
}

/* A first frame: op, codec, options and id, each now and then wrong; returns its input (*len bytes). */
static const uint8_t *rnd_first_frame(chaos *c, chaos_conn *k, Gpucomp__Request *req, Gpucomp__CodecOptions *o,
                                      size_t *len)
{
    req->id = rnd_id(c, k);
    req->op = chance(c, 90) ? (Gpucomp__Op)(1 + rnd(c, 2)) : (Gpucomp__Op)rnd(c, 12);
    req->codec = chance(c, 90) ? (Gpucomp__Codec)(1 + rnd(c, 2)) : (Gpucomp__Codec)rnd(c, 5);
    rnd_options(c, o);
    req->options = chance(c, 90) ? o : NULL;
    req->max_output = chance(c, 80) ? 0 : rnd_size(c, 1u << 20);
    return rnd_input(c, req->codec, len);
}

/* A memfd holding len bytes of the pool, made wrong now and then. */
static int rnd_memfd(chaos *c, const uint8_t *data, size_t len)
{
    int fd = gc_memfd_create("chaos");
    ck_assert_int_ge(fd, 0);
    size_t have = chance(c, 85) ? len : rnd(c, len + 1);
    ck_assert_int_eq(ftruncate(fd, (off_t)have), 0);
    if (have)
        ck_assert_int_eq(pwrite(fd, data, have, 0), (ssize_t)have);
    if (chance(c, 8))
        fcntl(fd, F_ADD_SEALS, (int)(chance(c, 50) ? F_SEAL_WRITE : F_SEAL_SEAL | F_SEAL_GROW));
    return fd;
}

/* A descriptor of the wrong kind: a pipe, /dev/null, a read-only memfd, an unsealable memfd. */
static int wrong_fd(chaos *c, int memfd)
{
    char path[64];
    int p[2];
    switch (rnd(c, 4)) {
    case 0:
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        close(p[1]);
        return p[0];
    case 1: return open("/dev/null", O_RDWR | O_CLOEXEC);
    case 2:
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
        return open(memfd >= 0 ? path : "/dev/zero", O_RDONLY | O_CLOEXEC);
    default: return memfd_create("chaos-unsealable", MFD_CLOEXEC);
    }
}

/* Up to four descriptors for a frame: the right ones mostly, else too few, too many, wrong or the same twice. */
static unsigned rnd_fds(chaos *c, int *fds, unsigned want, const uint8_t *in, size_t in_len)
{
    unsigned n = want;
    for (unsigned i = 0; i < want; i++)
        fds[i] = i == 0 ? rnd_memfd(c, in, in_len) : rnd_memfd(c, c->pool, rnd_size(c, 1u << 16));
    if (chance(c, 70))
        return n;
    switch (rnd(c, 4)) {
    case 0: /* one fewer */
        if (n)
            close(fds[--n]);
        return n;
    case 1: /* one more */ fds[n] = rnd_memfd(c, c->pool, 64); return n + 1;
    case 2: /* the same file twice */
        if (n > 1) {
            close(fds[1]);
            fds[1] = dup(fds[0]);
        }
        return n;
    default: {
        unsigned i = (unsigned)rnd(c, n ? n : 1);
        int w = wrong_fd(c, fds[i]);
        if (i < n)
            close(fds[i]);
        fds[i] = w;
        return n ? n : 1;
    }
    }
}

static void close_fds(const int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void step_whole(chaos *c, chaos_conn *k)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    size_t len;
    const uint8_t *in = rnd_first_frame(c, k, &req, &o, &len);
    req.total_size = len;
    if (chance(c, 15)) { /* more than comes: a little, past every limit, or a claim on the budget */
        uint64_t claims[] = { len + 1 + rnd(c, 64), UINT64_MAX - rnd(c, 1000), len + rnd(c, 64u << 20) };
        req.total_size = claims[rnd(c, 3)];
    }
    size_t first = chance(c, 70) ? len : rnd(c, len + 1);
    req.payload.data = (uint8_t *)(uintptr_t)in;
    req.payload.len = first;
    req.last = first == len ? chance(c, 95) : chance(c, 5);
    int fds[GC_FDPASS_MAX]; /* now and then descriptors nobody claims */
    unsigned n = chance(c, 95) ? 0 : 1 + (unsigned)rnd(c, GC_FDPASS_MAX);
    for (unsigned i = 0; i < n; i++)
        fds[i] = rnd_memfd(c, c->pool, rnd_size(c, 4096));
    bool sent = send_request(k, &req, fds, n);
    close_fds(fds, n);
    if (!sent || first == len || chance(c, 20))
        return; /* the rest, if any, never comes: the request times out */
    Gpucomp__Request more = GPUCOMP__REQUEST__INIT;
    more.id = chance(c, 90) ? req.id : rnd_id(c, k);
    more.payload.data = (uint8_t *)(uintptr_t)(in + first);
    more.payload.len = len - first;
    more.last = chance(c, 90);
    send_request(k, &more, NULL, 0);
}

static void step_memfd(chaos *c, chaos_conn *k)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    size_t len;
    const uint8_t *in = rnd_first_frame(c, k, &req, &o, &len);
    bool reg = chance(c, 15);
    if (reg)
        req.op = chance(c, 50) ? GPUCOMP__OP__OP_REGISTER : GPUCOMP__OP__OP_UNREGISTER;
    req.payload_in_fd = 1;
    req.total_size = chance(c, 90) ? len : test_xorshift(&c->rng) >> rnd(c, 64);
    req.last = chance(c, 95);
    if (chance(c, 5)) {
        req.payload.data = c->pool;
        req.payload.len = 1 + rnd(c, 100);
    }
    int fds[GC_FDPASS_MAX];
    unsigned n = rnd_fds(c, fds, reg ? 1 : 2, in, len);
    if (k->reg_fd >= 0 && chance(c, 40)) { /* the registered file, as the input or to (un)register again */
        close(fds[0]);
        fds[0] = dup(k->reg_fd);
    }
    bool sent = send_request(k, &req, fds, n);
    if (sent && req.op == GPUCOMP__OP__OP_REGISTER && k->reg_fd < 0)
        k->reg_fd = dup(fds[0]);
    close_fds(fds, n);
}

/* Ring sizes: mostly what the protocol allows, now and then not. */
static uint64_t rnd_ring_size(chaos *c, uint64_t lo, uint64_t hi)
{
    if (chance(c, 85))
        return lo + rnd(c, hi - lo + 1);
    return chance(c, 50) ? rnd(c, lo) : hi + 1 + rnd(c, 4096);
}

static int ring_memfd(chaos *c, uint64_t size)
{
    int fd = gc_memfd_create("chaos-ring");
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
    if (chance(c, 5))
        fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE);
    return fd;
}

/* A file stream's descriptors: a regular file to read, or something else; perhaps an output file, right or wrong. */
static void file_stream_fds(chaos *c, Gpucomp__Request *req, int *fds, unsigned *n)
{
    char in[160], out[160];
    snprintf(in, sizeof in, "%s/chaos-in", dut.dir);
    snprintf(out, sizeof out, "%s/chaos-out", dut.dir);
    req->input_fd = 1;
    req->last = chance(c, 95);
    fds[(*n)++] = chance(c, 70) ? open(in, O_RDONLY | O_CLOEXEC) : wrong_fd(c, -1);
    if (chance(c, 50))
        return;
    req->output_fd = 1;
    static const int modes[] = { O_WRONLY, O_WRONLY | O_APPEND, O_RDONLY };
    switch (rnd(c, 4)) {
    case 0: fds[(*n)++] = wrong_fd(c, -1); break;
    case 1: fds[(*n)++] = open(in, O_RDWR | O_CLOEXEC); break; /* the input's own file */
    default: fds[(*n)++] = open(out, modes[rnd(c, 3)] | O_CREAT | O_CLOEXEC, 0600); break;
    }
}

/* Forget the streams that are over both ways, to make room for new ones. */
static void reap_streams(chaos_conn *k)
{
    for (unsigned i = 0; i < k->n_streams;) {
        chaos_stream *s = &k->streams[i];
        if (!s->answered || !s->input_done) {
            i++;
            continue;
        }
        if (s->ring_fd >= 0)
            close(s->ring_fd);
        *s = k->streams[--k->n_streams];
    }
}

static void step_stream_open(chaos *c, chaos_conn *k)
{
    reap_streams(k);
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    Gpucomp__CodecOptions o = GPUCOMP__CODEC_OPTIONS__INIT;
    uint64_t fresh = k->next_id;
    size_t unused;
    rnd_first_frame(c, k, &req, &o, &unused);
    req.stream = 1;
    chaos_stream s = { .id = req.id, .ring_fd = -1 };
    int fds[GC_FDPASS_MAX];
    unsigned n = 0;
    if (chance(c, 35)) {
        req.ring = 1;
        s.ring_size = rnd_ring_size(c, c->window, 2 * c->window);
        s.ring_fd = fds[n++] = ring_memfd(c, s.ring_size);
    } else if (chance(c, 15)) {
        file_stream_fds(c, &req, fds, &n);
    }
    if (chance(c, 40)) {
        req.output_ring = 1;
        s.oring_size = rnd_ring_size(c, 1u << 20, 4u << 20);
        fds[n++] = ring_memfd(c, s.oring_size);
    }
    unsigned made = n;
    if (chance(c, 10) && n) /* a descriptor named and not sent */
        n--;
    req.flush = chance(c, 5);
    /* Only a fresh id is tracked: answers to an old one's would be taken for the new stream's. */
    bool track = req.id == fresh && k->n_streams < MAX_STREAMS;
    int keep = -1; /* the input ring stays open with its stream, to write input into */
    bool sent = send_request(k, &req, fds, n);
    if (k->fds_skewed) /* another frame's ring may be taken for this one's: leave its ring frames unchecked */
        s.oring_size = 0;
    if (sent && track) {
        k->streams[k->n_streams++] = s;
        keep = s.ring_fd;
    }
    for (unsigned i = 0; i < made; i++)
        if (fds[i] >= 0 && fds[i] != keep)
            close(fds[i]);
}

/* The next input of a ring stream: bytes written into its ring at the right place, or a lie. */
static void ring_input(chaos *c, chaos_stream *s, Gpucomp__Request *req)
{
    uint64_t at = s->ring_size ? s->ring_sent % s->ring_size : 0;
    uint64_t len = rnd_size(c, 1u << 18);
    if (s->ring_size && len > s->ring_size - at)
        len = s->ring_size - at;
    req->ring_offset = at;
    req->ring_length = len;
    if (chance(c, 10))
        req->ring_offset = test_xorshift(&c->rng) >> rnd(c, 64);
    if (chance(c, 10))
        req->ring_length = test_xorshift(&c->rng) >> rnd(c, 64);
    if (s->ring_fd >= 0 && len)
        (void)!pwrite(s->ring_fd, c->pool + rnd(c, POOL_LEN - len), len, (off_t)at);
    s->ring_sent += len;
}

/* output_consumed: honest mostly, else backwards, ahead of what was named, or absurd. */
static uint64_t rnd_credit(chaos *c, chaos_stream *s)
{
    if (chance(c, 85)) {
        s->credited = s->named;
        return s->named;
    }
    switch (rnd(c, 3)) {
    case 0: return s->credited ? s->credited - 1 - rnd(c, s->credited) : 0;
    case 1: return s->named + 1 + rnd(c, 1u << 20);
    default: return UINT64_MAX - rnd(c, 2);
    }
}

/* A stream to send to: mostly one still taking input, else any, or none. */
static chaos_stream *pick_stream(chaos *c, chaos_conn *k)
{
    if (!k->n_streams)
        return NULL;
    unsigned at = (unsigned)rnd(c, k->n_streams);
    for (unsigned i = 0; i < k->n_streams && chance(c, 85); i++) {
        chaos_stream *s = &k->streams[(at + i) % k->n_streams];
        if (!s->input_done && !s->answered)
            return s;
    }
    return &k->streams[at];
}

static void step_stream_data(chaos *c, chaos_conn *k)
{
    chaos_stream *s = pick_stream(c, k);
    if (!s && chance(c, 80)) {
        step_stream_open(c, k);
        return;
    }
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = s && chance(c, 90) ? s->id : rnd_id(c, k);
    if (s && s->ring_size && chance(c, 90)) {
        ring_input(c, s, &req);
    } else if (chance(c, 80)) {
        size_t len;
        req.payload.data = (uint8_t *)(uintptr_t)rnd_input(c, (Gpucomp__Codec)(1 + rnd(c, 2)), &len);
        req.payload.len = len;
    }
    if (s && s->oring_size)
        req.output_consumed = rnd_credit(c, s);
    req.flush = chance(c, 10);
    req.last = chance(c, 15);
    if (chance(c, 3)) /* a first frame's fields on a later frame */
        req.stream = req.ring = 1;
    if (send_request(k, &req, NULL, 0) && s && req.id == s->id && req.last)
        s->input_done = true;
}

/* Credit only, as a client whose input has ended sends it. */
static void step_credit(chaos *c, chaos_conn *k)
{
    if (!k->n_streams)
        return;
    chaos_stream *s = &k->streams[rnd(c, k->n_streams)];
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = s->id;
    req.output_consumed = s->oring_size ? rnd_credit(c, s) : rnd(c, 1u << 20);
    send_request(k, &req, NULL, 0);
}

static void step_cancel(chaos *c, chaos_conn *k)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.op = GPUCOMP__OP__OP_CANCEL;
    unsigned i = k->n_streams ? (unsigned)rnd(c, k->n_streams) : 0;
    req.id = k->n_streams && chance(c, 70) ? k->streams[i].id : rnd_id(c, k);
    req.last = chance(c, 90);
    if (!send_request(k, &req, NULL, 0) || !k->n_streams || req.id != k->streams[i].id)
        return;
    if (k->streams[i].ring_fd >= 0)
        close(k->streams[i].ring_fd);
    k->streams[i] = k->streams[--k->n_streams];
}

/* Bytes that are no Frame, behind an honest length prefix. */
static void step_garbage(chaos *c, chaos_conn *k)
{
    size_t len = rnd_size(c, 4096);
    uint8_t hdr[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
    if (send_raw(k, hdr, 4))
        send_raw(k, c->pool + rnd(c, POOL_LEN - len), len);
}

/* A frame cut short: its length prefix claims more than comes, then maybe a close. */
static void step_cut_frame(chaos *c, chaos_conn *k)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = rnd_id(c, k);
    req.op = GPUCOMP__OP__OP_PING;
    req.last = 1;
    size_t len;
    uint8_t *buf = raw_pack_request(&req, &len);
    if (chance(c, 50)) { /* the prefix lies: larger than the body, up to far past the limit */
        uint32_t lie = (uint32_t)(len + 1 + rnd(c, chance(c, 50) ? 64 : UINT32_MAX - len - 1));
        buf[0] = (uint8_t)lie, buf[1] = (uint8_t)(lie >> 8), buf[2] = (uint8_t)(lie >> 16);
        buf[3] = (uint8_t)(lie >> 24);
    } else {
        len = rnd(c, len);
    }
    bool sent = send_raw(k, buf, len);
    free(buf);
    if (sent && chance(c, 60))
        conn_drop(k);
}

/* Wait a little for k's answers, so that work runs while the others keep sending. */
static void step_pause(chaos *c, chaos_conn *k)
{
    drain(c, k, 1 + (int)rnd(c, 20));
}

typedef void (*step_fn)(chaos *, chaos_conn *);

static void step(chaos *c, chaos_conn *k)
{
    static const struct {
        step_fn fn;
        unsigned weight;
    } steps[] = {
        { step_hello, 4 },        { step_whole, 20 }, { step_memfd, 14 }, { step_stream_open, 10 },
        { step_stream_data, 24 }, { step_credit, 6 }, { step_cancel, 6 }, { step_garbage, 3 },
        { step_cut_frame, 2 },    { step_pause, 3 },  { NULL, 2 }, /* NULL: an abrupt close */
    };
    if (k->fd < 0) {
        step_hello(c, k);
        return;
    }
    unsigned total = 0;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        total += steps[i].weight;
    unsigned r = (unsigned)rnd(c, total);
    size_t i = 0;
    while (r >= steps[i].weight)
        r -= steps[i++].weight;
    if (steps[i].fn)
        steps[i].fn(c, k);
    else
        conn_drop(k);
}

/* ---- the invariants -------------------------------------------------- */

static void assert_alive(const chaos *c)
{
    int status = 0;
    ck_assert_msg(waitpid(dut.pid, &status, WNOHANG) == 0 && kill(dut.pid, 0) == 0,
                  "seed %" PRIu64 ": gpucompd died after %lu steps (status 0x%x)", c->seed, c->steps, status);
}

/* A well-behaved client's round trip of len bytes through codec; keeps the compressed bytes as a valid input. */
static void round_trip(chaos *c, gpucomp_client *g, gpucomp_codec codec, size_t len, uint64_t data_seed)
{
    uint8_t *src = malloc(len);
    ck_assert_ptr_nonnull(src);
    fill_test_data(src, len, 1 + (int)(data_seed % 2), data_seed);
    gpucomp_options o;
    gpucomp_options_init(&o, codec);
    if (codec == GPUCOMP_CODEC_BZIP2)
        o.level = 1;
    void *packed = NULL, *back = NULL;
    size_t packed_len = 0, back_len = 0;
    int rc = gpucomp_compress(g, &o, src, len, &packed, &packed_len);
    ck_assert_msg(rc == GPUCOMP_OK, "seed %" PRIu64 ": compress: %s", c->seed, gpucomp_last_error(g));
    rc = gpucomp_decompress(g, &o, packed, packed_len, &back, &back_len);
    ck_assert_msg(rc == GPUCOMP_OK, "seed %" PRIu64 ": decompress: %s", c->seed, gpucomp_last_error(g));
    ck_assert_msg(back_len == len && memcmp(back, src, len) == 0, "seed %" PRIu64 ": the round trip differs",
                  c->seed);
    int v = codec == GPUCOMP_CODEC_BZIP2;
    free(c->valid[v]);
    c->valid[v] = malloc(packed_len);
    ck_assert_ptr_nonnull(c->valid[v]);
    memcpy(c->valid[v], packed, packed_len);
    c->valid_len[v] = packed_len;
    gpucomp_free(packed);
    gpucomp_free(back);
    free(src);
}

/* A new client of the public library round-trips a few hundred KiB, and a few bytes, through both codecs. */
static void assert_serves(chaos *c, int round)
{
    gpucomp_client *g = NULL;
    ck_assert_msg(gpucomp_connect(dut.socket_path, &g) == GPUCOMP_OK, "seed %" PRIu64 ": connect: %s", c->seed,
                  gpucomp_connect_error());
    uint64_t seed = c->seed + 3 * (uint64_t)round;
    round_trip(c, g, GPUCOMP_CODEC_BZIP2, 300000 + (size_t)(seed % 4096), seed);
    round_trip(c, g, GPUCOMP_CODEC_RLE, 400000 + (size_t)(seed % 4096), seed + 1);
    round_trip(c, g, GPUCOMP_CODEC_RLE, 1000, seed + 2);
    gpucomp_close(g);
}

/* Entries of the daemon's /proc/PID/<what>: its descriptors ("fd") or threads ("task"). */
/* Small inputs with a large output, for answers that press on the budget and on deaf readers. */
static void make_bombs(chaos *c)
{
    uint8_t *zeros = calloc(1, BOMB_LEN);
    ck_assert_ptr_nonnull(zeros);
    gpucomp_client *g = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &g), GPUCOMP_OK);
    for (int v = 0; v < 2; v++) {
        gpucomp_options o;
        gpucomp_options_init(&o, v ? GPUCOMP_CODEC_BZIP2 : GPUCOMP_CODEC_RLE);
        ck_assert_int_eq(gpucomp_compress(g, &o, zeros, BOMB_LEN, &c->bomb[v], &c->bomb_len[v]), GPUCOMP_OK);
    }
    gpucomp_close(g);
    free(zeros);
}

static unsigned daemon_count(const char *what)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)dut.pid, what);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The daemon, with nobody connected: true when it holds nothing for requests and one connection, the asker. */
static bool daemon_idle(gpucomp_stats *st)
{
    gpucomp_client *g = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &g), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_stats_get(g, st), GPUCOMP_OK);
    gpucomp_close(g);
    return st->memory_in_use == 0 && st->connections == 1 && st->queue_depth == 0 && st->registered_bytes == 0;
}

/* Poll until the daemon is idle and has its old descriptor and thread counts back (within a deadline). */
static void assert_released(unsigned fds_before, unsigned threads_before, uint64_t seed)
{
    gpucomp_stats st;
    double deadline = test_now_s() + 15;
    bool idle = false;
    unsigned fds = 0, threads = 0;
    while (test_now_s() < deadline) {
        idle = daemon_idle(&st);
        fds = daemon_count("fd");
        threads = daemon_count("task");
        if (idle && fds == fds_before && threads == threads_before)
            return;
        test_sleep_ms(100);
    }
    ck_abort_msg("seed %" PRIu64 ": after the chaos: %" PRIu64 " bytes in use, %u connections, %u queued, %" PRIu64
                 " registered bytes, %u descriptors (%u before), %u threads (%u before)",
                 seed, st.memory_in_use, st.connections, st.queue_depth, st.registered_bytes, fds, fds_before,
                 threads, threads_before);
}

/* ---- the suite ------------------------------------------------------- */

/*
 * The same walk on every run by default, so that a CI verdict is about the
 * change under test; GPUCOMP_CHAOS_SEED=time explores a new one each run.
 */
#define CHAOS_DEFAULT_SEED 20261128u

static uint64_t chaos_seed(void)
{
    const char *env = getenv("GPUCOMP_CHAOS_SEED");
    if (!env || !*env)
        return CHAOS_DEFAULT_SEED;
    if (strcmp(env, "time") != 0)
        return strtoull(env, NULL, 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
}

/* The chaos against a daemon started with args; salt sets each test's walk apart under one seed. */
static void run_chaos(const char *const *args, uint64_t salt)
{
    uint64_t seed = chaos_seed();
    dut.capture_log = 1; /* what the daemon says (a sanitizer's report too) goes to its log */
    test_daemon_start(&dut, args);
    chaos c = { .seed = seed, .rng = (seed ^ salt) ? seed ^ salt : 1 };
    fprintf(stderr, "chaos seed %" PRIu64 " (GPUCOMP_CHAOS_SEED=%" PRIu64 " replays it)\n", seed, seed);
    c.pool = malloc(POOL_LEN);
    ck_assert_ptr_nonnull(c.pool);
    fill_test_data(c.pool, POOL_LEN, 0, c.rng);
    for (int i = 0; i < N_CONNS; i++)
        c.conns[i].fd = c.conns[i].reg_fd = -1, c.conns[i].next_id = 1;
    char path[160];
    snprintf(path, sizeof path, "%s/chaos-in", dut.dir);
    ck_assert_int_eq(write_file(path, c.pool, POOL_LEN), 0);
    assert_serves(&c, -1);
    make_bombs(&c);
    gpucomp_stats st;
    ck_assert(daemon_idle(&st) || (test_sleep_ms(500), daemon_idle(&st)));
    unsigned fds_before = daemon_count("fd");
    unsigned threads_before = daemon_count("task");
    double t0 = test_now_s();
    const char *env = getenv("GPUCOMP_CHAOS_ROUNDS"); /* more for a soak */
    int rounds = env && atoi(env) > 0 ? atoi(env) : N_ROUNDS;
    for (int round = 0; round < rounds; round++) {
        for (int s = 0; s < STEPS_PER_ROUND; s++, c.steps++) {
            chaos_conn *k = &c.conns[rnd(&c, N_CONNS)];
            step(&c, k);
            for (int i = 0; i < N_CONNS; i++)
                if (!c.conns[i].deaf)
                    drain(&c, &c.conns[i], 0);
            assert_alive(&c);
        }
        for (int i = 0; i < N_CONNS; i++) { /* what the deaf hold counts against this user's memory share */
            c.conns[i].deaf = false;
            drain(&c, &c.conns[i], 0);
        }
        assert_serves(&c, round);
        assert_alive(&c);
    }
    for (int i = 0; i < N_CONNS; i++) {
        drain(&c, &c.conns[i], 0);
        conn_drop(&c.conns[i]);
    }
    fprintf(stderr, "  %lu steps in %.1f s: %lu answer frames, %lu closes by the daemon\n", c.steps,
            test_now_s() - t0, c.frames_in, c.closed_by_daemon);
    fprintf(stderr, "  answers by status:");
    for (unsigned i = 0; i < sizeof c.by_status / sizeof c.by_status[0]; i++)
        if (c.by_status[i])
            fprintf(stderr, " %u: %lu", i, c.by_status[i]);
    fprintf(stderr, "\n");
    assert_released(fds_before, threads_before, seed);
    assert_alive(&c);
    /* Under the sanitizers a leak the chaos caused shows here, as the exit status. */
    int status = test_daemon_stop(&dut);
    if (status != 0)
        run_shell("tail -n 40 '%s' >&2", dut.log_path);
    ck_assert_msg(status == 0, "seed %" PRIu64 ": gpucompd exited with %d on SIGTERM (its log above)", seed,
                  status);
    free(c.valid[0]);
    free(c.valid[1]);
    gpucomp_free(c.bomb[0]);
    gpucomp_free(c.bomb[1]);
    free(c.pool);
}

static void teardown(void)
{
    test_daemon_cleanup(&dut);
}

START_TEST(test_chaos_cpu)
{
    const char *args[] = { "--gpu=off",      "--memory-budget=256M", "--max-request=64M",
                           "--max-frame=1M", "--request-timeout=2",  NULL };
    run_chaos(args, 0);
}
END_TEST

START_TEST(test_chaos_emulated_gpus)
{
    /* Low break-evens, so that the chaos's small inputs reach the stand-in devices too. */
    const char *args[] = { "--gpu=emulate",
                           "--emulated-devices=2",
                           "--memory-budget=256M",
                           "--max-request=64M",
                           "--max-frame=1M",
                           "--request-timeout=2",
                           "--gpu-min-bytes=64K",
                           "--gpu-min-bytes-bzip2=64K",
                           "--gpu-min-bytes-bzip2-decompress=64K",
                           NULL };
    run_chaos(args, 0x5DEECE66Dull);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wire_chaos");
    TCase *tc = tcase_create("chaos");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_chaos_cpu);
    tcase_add_test(tc, test_chaos_emulated_gpus);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
