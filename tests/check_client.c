/*
 * check_client.c - libgpucomp-client without a daemon: the pure API, and a
 * fake gpucompd (a thread behind a real Unix socket, speaking the protocol
 * from this file, memfd transport included) that checks what the client
 * sends and misbehaves on
 * purpose to check what the client accepts. Also the CLI's name rules.
 *
 * The fake runs on its own thread, where Check's asserts must not be used:
 * it records its first complaint in fake.fail, which the test asserts empty
 * after joining it.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli_names.h"
#include "size_parse.h"
#include "fdpass.h"
#include "gc_status.h"
#include "gpucomp.h"
#include "wire.h"

/* ---- the fake daemon ------------------------------------------------------ */

typedef struct fake fake;
typedef void (*scenario)(fake *f);

struct fake {
    char dir[64];
    char path[128];
    int listen_fd;
    int fd; /* the accepted connection */
    pthread_t thread;
    bool joined;
    scenario run;
    /* Welcome */
    uint32_t version;
    Gpucomp__Status welcome_status;
    const char *welcome_message;
    uint32_t max_frame;
    uint64_t max_request;
    /* what the fake saw of the last request */
    uint64_t id;
    Gpucomp__Op op;
    Gpucomp__Codec codec;
    uint32_t level, width, chunk;
    uint64_t total_size, max_output;
    uint8_t *input;
    size_t input_len;
    unsigned frames;
    size_t largest_frame;   /* largest body seen */
    int fds[GC_FDPASS_MAX]; /* descriptors that came with the client's bytes */
    unsigned n_fds;
    bool lie_about_fd_output; /* memfd answers: announce more than was written */
    uint64_t prev_id;         /* id of the request before the last */
    char fail[256];           /* first complaint; "" if all was well */
};

static void complain(fake *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void complain(fake *f, const char *fmt, ...)
{
    if (f->fail[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->fail, sizeof f->fail, fmt, ap);
    va_end(ap);
}

static bool raw_write(fake *f, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(f->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reads keep any descriptors the client attached (memfd transport). */
static bool raw_read(fake *f, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        bool overflow = false;
        ssize_t n = gc_fdpass_recv(f->fd, p, len, f->fds, &f->n_fds, GC_FDPASS_MAX, &overflow);
        if (overflow)
            complain(f, "client sent more than %d descriptors", GC_FDPASS_MAX);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

static void send_frame(fake *f, const Gpucomp__Frame *fr)
{
    uint8_t *buf = malloc(gc_wire_packed_size(fr));
    size_t n = gc_wire_pack(fr, buf);
    if (!raw_write(f, buf, n))
        complain(f, "fake: send failed: %s", strerror(errno));
    free(buf);
}

/* Next frame from the client; NULL at EOF (not a complaint: callers decide). */
static Gpucomp__Frame *recv_frame(fake *f)
{
    uint8_t header[GC_WIRE_HEADER_SIZE];
    if (!raw_read(f, header, sizeof header))
        return NULL;
    uint32_t len = gc_wire_body_len(header);
    if (len > f->max_frame) {
        complain(f, "client sent a %u-byte frame, over max_frame_size %u", len, f->max_frame);
        return NULL;
    }
    if (len > f->largest_frame)
        f->largest_frame = len;
    uint8_t *body = malloc(len ? len : 1);
    Gpucomp__Frame *fr = NULL;
    gc_error err;
    if (raw_read(f, body, len) && !(fr = gc_wire_unpack(body, len, &err)))
        complain(f, "client sent a bad frame: %s", err.msg);
    free(body);
    return fr;
}

static void send_welcome(fake *f)
{
    Gpucomp__Welcome w = GPUCOMP__WELCOME__INIT;
    w.protocol_version = f->version;
    w.status = f->welcome_status;
    w.message = (char *)(f->welcome_message ? f->welcome_message : "");
    w.max_frame_size = f->max_frame;
    w.max_request_size = f->max_request;
    w.server_version = (char *)"fake-9.9";
    Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
    fr.body_case = GPUCOMP__FRAME__BODY_WELCOME;
    fr.welcome = &w;
    send_frame(f, &fr);
}

/* Hello in, Welcome out; false if the client never said Hello. */
static bool handshake(fake *f)
{
    Gpucomp__Frame *fr = recv_frame(f);
    if (!fr || fr->body_case != GPUCOMP__FRAME__BODY_HELLO) {
        complain(f, "expected Hello");
        gc_wire_free(fr);
        return false;
    }
    if (fr->hello->protocol_version != 1)
        complain(f, "Hello with protocol_version %u", fr->hello->protocol_version);
    if (!fr->hello->client_name || !*fr->hello->client_name)
        complain(f, "Hello without a client_name");
    gc_wire_free(fr);
    send_welcome(f);
    return true;
}

static void record_first(fake *f, const Gpucomp__Request *r)
{
    f->prev_id = f->id;
    f->id = r->id;
    f->op = r->op;
    f->codec = r->codec;
    f->level = r->options ? r->options->level : 0;
    f->width = r->options ? r->options->element_width : 0;
    f->chunk = r->options ? r->options->chunk_size : 0;
    f->total_size = r->total_size;
    f->max_output = r->max_output;
    free(f->input);
    f->input = malloc(r->total_size ? r->total_size : 1);
    f->input_len = 0;
    f->frames = 0;
    if (r->id == 0)
        complain(f, "request with id 0");
}

/* One whole request, checked as the daemon checks it; false at EOF or on a complaint. */
static bool read_request(fake *f)
{
    for (bool first = true;; first = false) {
        Gpucomp__Frame *fr = recv_frame(f);
        if (!fr)
            return false;
        const Gpucomp__Request *r = fr->body_case == GPUCOMP__FRAME__BODY_REQUEST ? fr->request : NULL;
        if (!r) {
            complain(f, "expected a Request frame");
            gc_wire_free(fr);
            return false;
        }
        if (first)
            record_first(f, r);
        else if (r->id != f->id)
            complain(f, "frame with id %llu inside request %llu", (unsigned long long)r->id,
                     (unsigned long long)f->id);
        f->frames++;
        if (f->input_len + r->payload.len > f->total_size)
            complain(f, "payload beyond total_size %llu", (unsigned long long)f->total_size);
        else if (r->payload.len)
            memcpy(f->input + f->input_len, r->payload.data, r->payload.len);
        f->input_len += r->payload.len;
        bool last = r->last;
        gc_wire_free(fr);
        if (last)
            break;
    }
    if (f->input_len != f->total_size)
        complain(f, "pieces sum to %zu, total_size is %llu", f->input_len, (unsigned long long)f->total_size);
    return f->fail[0] == '\0';
}

/* A Response frame with the given fields. */
static void send_response(fake *f, uint64_t id, Gpucomp__Status st, const char *msg, uint64_t total,
                          const void *payload, size_t len, bool last)
{
    Gpucomp__Response r = GPUCOMP__RESPONSE__INIT;
    r.id = id;
    r.status = st;
    r.message = (char *)(msg ? msg : "");
    r.total_size = total;
    r.payload.data = (uint8_t *)(uintptr_t)payload;
    r.payload.len = len;
    r.last = last;
    r.backend = GPUCOMP__BACKEND__BACKEND_GPU;
    r.engine_ns = 4242;
    Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
    fr.body_case = GPUCOMP__FRAME__BODY_RESPONSE;
    fr.response = &r;
    send_frame(f, &fr);
}

/* data as a correct response in pieces of piece bytes. */
static void send_data(fake *f, uint64_t id, const uint8_t *data, size_t len, size_t piece)
{
    size_t off = 0;
    do {
        size_t n = len - off < piece ? len - off : piece;
        send_response(f, id, GPUCOMP__STATUS__STATUS_OK, NULL, len, data + off, n, off + n == len);
        off += n;
    } while (off < len);
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    f->fd = accept(f->listen_fd, NULL, NULL);
    if (f->fd < 0) {
        complain(f, "accept: %s", strerror(errno));
        return NULL;
    }
    f->run(f);
    close(f->fd);
    return NULL;
}

/* One fake per test (each test runs in its own process). */
static fake the_fake;

static fake *fake_new(void)
{
    fake *f = &the_fake;
    memset(f, 0, sizeof *f);
    f->version = 1;
    f->welcome_status = GPUCOMP__STATUS__STATUS_OK;
    f->max_frame = GC_WIRE_DEFAULT_MAX_FRAME;
    f->max_request = 1u << 30;
    return f;
}

static void fake_start(fake *f, scenario run)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/check_client.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/sock", f->dir);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strcpy(sa.sun_path, f->path);
    f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(f->listen_fd, 0);
    ck_assert_int_eq(bind(f->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(f->listen_fd, 4), 0);
    f->run = run;
    ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

/* Wait for the fake to end its scenario (the client must have hung up if it waits for that). */
static void fake_join(fake *f)
{
    if (!f->joined)
        ck_assert_int_eq(pthread_join(f->thread, NULL), 0);
    f->joined = true;
}

/* Join, clean up, and fail the test on the fake's complaints; f's records stay readable. */
static void fake_finish(fake *f)
{
    fake_join(f);
    close(f->listen_fd);
    unlink(f->path);
    rmdir(f->dir);
    free(f->input);
    f->input = NULL;
    ck_assert_msg(f->fail[0] == '\0', "fake daemon: %s", f->fail);
}

static gpucomp_client *connect_ok(fake *f)
{
    gpucomp_client *c = NULL;
    int rc = gpucomp_connect(f->path, &c);
    ck_assert_msg(rc == GPUCOMP_OK, "connect: %s", gpucomp_connect_error());
    ck_assert_ptr_nonnull(c);
    return c;
}

/* Connected with every buffer-API request on the socket, whatever its size
 * (GPUCOMP_MEMFD_THRESHOLD in the environment): for the tests of the socket
 * framing with payloads above the built-in threshold. */
static gpucomp_client *connect_socket_only(fake *f)
{
    setenv("GPUCOMP_MEMFD_THRESHOLD", "1G", 1);
    gpucomp_client *c = connect_ok(f);
    unsetenv("GPUCOMP_MEMFD_THRESHOLD");
    return c;
}

static uint8_t *pattern(size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 31 + (i >> 9));
    return p;
}

#define ck_assert_contains(hay, needle) \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

/* Is out exactly in with every byte xor 0x5a (what the fakes answer)? */
static bool is_xor_of(const void *out, const uint8_t *in, size_t len)
{
    uint8_t *want = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++)
        want[i] = in[i] ^ 0x5a;
    bool same = memcmp(out, want, len) == 0;
    free(want);
    return same;
}

/* ---- pure API ----------------------------------------------------------- */

START_TEST(test_strerror_every_code)
{
    for (int code = GPUCOMP_OK; code <= GPUCOMP_E_TOO_SMALL; code++) {
        const char *s = gpucomp_strerror(code);
        ck_assert_ptr_nonnull(s);
        ck_assert_msg(*s != '\0', "code %d has an empty description", code);
        ck_assert_str_eq(s, gc_status_str(code)); /* one table for both */
        ck_assert_str_ne(s, "unknown error");
        for (int other = GPUCOMP_OK; other < code; other++)
            ck_assert_str_ne(s, gpucomp_strerror(other));
    }
    ck_assert_str_eq(gpucomp_strerror(GPUCOMP_OK), "success");
    ck_assert_contains(gpucomp_strerror(GPUCOMP_E_CONNECT), "connect");
    ck_assert_contains(gpucomp_strerror(GPUCOMP_E_IN_USE), "in use");
    ck_assert_contains(gpucomp_strerror(GPUCOMP_E_TOO_SMALL), "too small");
    ck_assert_contains(gpucomp_strerror(GPUCOMP_E_BUSY), "daemon");
    ck_assert_str_eq(gpucomp_strerror(GPUCOMP_E_TOO_SMALL + 1), "unknown error");
    ck_assert_str_eq(gpucomp_strerror(-1), "unknown error");
}
END_TEST

START_TEST(test_codes_match_internal_and_wire)
{
    ck_assert_int_eq(GPUCOMP_E_CRC, GC_E_CRC);
    ck_assert_int_eq(GPUCOMP_E_DEVICE, GPUCOMP__STATUS__STATUS_DEVICE);
    ck_assert_int_eq(GPUCOMP_E_PERMISSION, GPUCOMP__STATUS__STATUS_PERMISSION);
    ck_assert_int_eq(GPUCOMP_CODEC_BZIP2, GPUCOMP__CODEC__CODEC_BZIP2);
}
END_TEST

START_TEST(test_options_init_defaults)
{
    gpucomp_options o;
    memset(&o, 0xab, sizeof o);
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    ck_assert_int_eq(o.codec, GPUCOMP_CODEC_BZIP2);
    ck_assert_int_eq(o.level, 9);
    ck_assert_uint_eq(o.element_width, 1);
    ck_assert_uint_eq(o.chunk_size, 1u << 20);
    ck_assert_uint_eq(o.max_output, 0);
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    ck_assert_int_eq(o.codec, GPUCOMP_CODEC_RLE);
    ck_assert_int_eq(o.level, 9);
    ck_assert_uint_eq(o.element_width, 1);
    gpucomp_options_init(NULL, GPUCOMP_CODEC_RLE); /* harmless */
}
END_TEST

START_TEST(test_null_client_and_version)
{
    ck_assert_str_eq(gpucomp_last_error(NULL), "");
    ck_assert_int_eq(gpucomp_last_backend(NULL), GPUCOMP_BACKEND_UNKNOWN);
    ck_assert_int_eq(gpucomp_ping(NULL), GPUCOMP_E_INVALID);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(NULL, &st), GPUCOMP_E_INVALID);
    void *out = (void *)1;
    size_t len = 7;
    ck_assert_int_eq(gpucomp_compress(NULL, NULL, "x", 1, &out, &len), GPUCOMP_E_INVALID);
    gpucomp_close(NULL);
    gpucomp_free(NULL);
    ck_assert_str_eq(gpucomp_server_version(NULL), "");
    ck_assert_uint_eq(gpucomp_max_request_size(NULL), 0);
    const char *v = gpucomp_version();
    ck_assert_msg(v[0] >= '0' && v[0] <= '9' && strchr(v, '.'), "version '%s'", v);
}
END_TEST

/* ---- connecting ---------------------------------------------------------- */

START_TEST(test_connect_missing_socket)
{
    gpucomp_client *c = (gpucomp_client *)1;
    const char *path = "/tmp/check_client-no-such-dir/gpucompd.sock";
    ck_assert_int_eq(gpucomp_connect(path, &c), GPUCOMP_E_CONNECT);
    ck_assert_ptr_null(c);
    ck_assert_contains(gpucomp_connect_error(), path);
    ck_assert_contains(gpucomp_connect_error(), "No such file or directory");
}
END_TEST

START_TEST(test_connect_uses_environment)
{
    gpucomp_client *c;
    const char *path = "/tmp/check_client-from-env.sock";
    setenv("GPUCOMP_SOCKET", path, 1);
    ck_assert_int_eq(gpucomp_connect(NULL, &c), GPUCOMP_E_CONNECT);
    ck_assert_contains(gpucomp_connect_error(), path);
    ck_assert_int_eq(gpucomp_connect("", &c), GPUCOMP_E_CONNECT);
    ck_assert_contains(gpucomp_connect_error(), path);
    unsetenv("GPUCOMP_SOCKET");
    ck_assert_int_eq(gpucomp_connect(NULL, &c), GPUCOMP_E_CONNECT);
    ck_assert_contains(gpucomp_connect_error(), GC_WIRE_DEFAULT_SOCKET);
}
END_TEST

START_TEST(test_connect_path_too_long)
{
    char path[300];
    memset(path, 'a', sizeof path - 1);
    path[0] = '/';
    path[sizeof path - 1] = '\0';
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(path, &c), GPUCOMP_E_INVALID);
    ck_assert_ptr_null(c);
    ck_assert_contains(gpucomp_connect_error(), "longer than 107 bytes");
    ck_assert_int_eq(gpucomp_connect(NULL, NULL), GPUCOMP_E_INVALID);
}
END_TEST

/* The connect error is per thread: another thread's failure does not overwrite ours. */
static void *fail_elsewhere(void *arg)
{
    gpucomp_client *c;
    gpucomp_connect("/tmp/check_client-other-thread.sock", &c);
    return NULL;
}

START_TEST(test_connect_error_is_thread_local)
{
    gpucomp_client *c;
    gpucomp_connect("/tmp/check_client-this-thread.sock", &c);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fail_elsewhere, NULL), 0);
    pthread_join(t, NULL);
    ck_assert_contains(gpucomp_connect_error(), "this-thread");
}
END_TEST

static void serve_handshake_only(fake *f)
{
    handshake(f);
    Gpucomp__Frame *fr = recv_frame(f); /* the client should just hang up */
    if (fr)
        complain(f, "client sent a frame after a failed handshake");
    gc_wire_free(fr);
}

START_TEST(test_handshake_version_mismatch)
{
    fake *f = fake_new();
    f->version = 2;
    fake_start(f, serve_handshake_only);
    gpucomp_client *c = (gpucomp_client *)1;
    ck_assert_int_eq(gpucomp_connect(f->path, &c), GPUCOMP_E_UNSUPPORTED);
    ck_assert_ptr_null(c);
    ck_assert_contains(gpucomp_connect_error(), "version 2");
    fake_finish(f);
}
END_TEST

START_TEST(test_handshake_refused)
{
    fake *f = fake_new();
    f->welcome_status = GPUCOMP__STATUS__STATUS_UNSUPPORTED;
    f->welcome_message = "protocol version 1 is not supported here";
    fake_start(f, serve_handshake_only);
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(f->path, &c), GPUCOMP_E_UNSUPPORTED);
    ck_assert_contains(gpucomp_connect_error(), "protocol version 1 is not supported here");
    fake_finish(f);
}
END_TEST

START_TEST(test_handshake_busy)
{
    fake *f = fake_new();
    f->welcome_status = GPUCOMP__STATUS__STATUS_BUSY;
    f->welcome_message = "shutting down";
    fake_start(f, serve_handshake_only);
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(f->path, &c), GPUCOMP_E_BUSY);
    ck_assert_contains(gpucomp_connect_error(), "shutting down");
    fake_finish(f);
}
END_TEST

START_TEST(test_handshake_tiny_frame_limit)
{
    fake *f = fake_new();
    f->max_frame = 1000;
    fake_start(f, serve_handshake_only);
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(f->path, &c), GPUCOMP_E_PROTOCOL);
    ck_assert_contains(gpucomp_connect_error(), "max_frame_size");
    fake_finish(f);
}
END_TEST

static void hang_up_at_once(fake *f)
{
    Gpucomp__Frame *fr = recv_frame(f);
    gc_wire_free(fr);
}

START_TEST(test_handshake_daemon_hangs_up)
{
    fake *f = fake_new();
    fake_start(f, hang_up_at_once);
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(f->path, &c), GPUCOMP_E_IO);
    ck_assert_contains(gpucomp_connect_error(), "closed the connection");
    ck_assert_contains(gpucomp_connect_error(), f->path);
    fake_finish(f);
}
END_TEST

static void answer_hello_with_request(fake *f)
{
    gc_wire_free(recv_frame(f));
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = 1;
    Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
    fr.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    fr.request = &r;
    send_frame(f, &fr);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_handshake_wrong_frame)
{
    fake *f = fake_new();
    fake_start(f, answer_hello_with_request);
    gpucomp_client *c;
    ck_assert_int_eq(gpucomp_connect(f->path, &c), GPUCOMP_E_PROTOCOL);
    ck_assert_contains(gpucomp_connect_error(), "Request");
    fake_finish(f);
}
END_TEST

/* ---- requests and responses --------------------------------------------- */

/* Ping, then a compress answered with each byte xor 0x5a in 50000-byte frames, twice. */
static void serve_in_frames(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    if (f->op != GPUCOMP__OP__OP_PING || f->frames != 1 || f->total_size != 0)
        complain(f, "ping: op %d, %u frames, total %llu", f->op, f->frames, (unsigned long long)f->total_size);
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 0, NULL, 0, true);
    for (int round = 0; round < 2 && read_request(f); round++) {
        if (f->id == f->prev_id)
            complain(f, "request id %llu reused", (unsigned long long)f->id);
        for (size_t i = 0; i < f->input_len; i++)
            f->input[i] ^= 0x5a;
        send_data(f, f->id, f->input, f->input_len, 50000);
    }
    gc_wire_free(recv_frame(f));
}

START_TEST(test_request_and_response_in_frames)
{
    fake *f = fake_new();
    f->max_frame = GC_WIRE_MIN_MAX_FRAME;
    fake_start(f, serve_in_frames);
    gpucomp_client *c = connect_socket_only(f);
    ck_assert_str_eq(gpucomp_server_version(c), "fake-9.9");
    ck_assert_uint_eq(gpucomp_max_request_size(c), 1u << 30);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);

    size_t len = 300000;
    uint8_t *in = pattern(len);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    o.element_width = 4;
    o.chunk_size = 4096;
    for (int round = 0; round < 2; round++) {
        void *out;
        size_t out_len;
        int rc = gpucomp_compress(c, &o, in, len, &out, &out_len);
        ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
        ck_assert_uint_eq(out_len, len);
        ck_assert(is_xor_of(out, in, len));
        gpucomp_free(out);
        ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
        ck_assert_uint_eq(gpucomp_last_engine_ns(c), 4242);
    }
    gpucomp_close(c);
    free(in);
    fake_finish(f);
    /* what the fake saw of the last request */
    ck_assert_int_eq(f->op, GPUCOMP__OP__OP_COMPRESS);
    ck_assert_int_eq(f->codec, GPUCOMP__CODEC__CODEC_RLE);
    ck_assert_uint_eq(f->width, 4);
    ck_assert_uint_eq(f->chunk, 4096);
    ck_assert_uint_eq(f->total_size, len);
    ck_assert_uint_ge(f->frames, (len + GC_WIRE_MIN_MAX_FRAME - 1) / GC_WIRE_MIN_MAX_FRAME);
    ck_assert_uint_le(f->largest_frame + GC_WIRE_HEADER_SIZE, GC_WIRE_MIN_MAX_FRAME);
}
END_TEST

static void serve_empty(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    if (f->frames != 1 || f->total_size != 0 || f->input_len != 0)
        complain(f, "empty input: %u frames, total %llu", f->frames, (unsigned long long)f->total_size);
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 0, NULL, 0, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_empty_input_and_output)
{
    fake *f = fake_new();
    fake_start(f, serve_empty);
    gpucomp_client *c = connect_ok(f);
    void *out = NULL;
    size_t out_len = 99;
    ck_assert_int_eq(gpucomp_compress(c, NULL, NULL, 0, &out, &out_len), GPUCOMP_OK);
    ck_assert_ptr_nonnull(out);
    ck_assert_uint_eq(out_len, 0);
    gpucomp_free(out);
    gpucomp_close(c);
    fake_finish(f);
    ck_assert_int_eq(f->codec, GPUCOMP__CODEC__CODEC_BZIP2); /* NULL options: bzip2, the CLI's default */
}
END_TEST

/* Answers the first request with total 1000 but only 600 bytes, last set. */
static void serve_short_sum(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    uint8_t junk[600] = { 0 };
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 1000, junk, 400, false);
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 0, junk, 200, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_payload_sum_short)
{
    fake *f = fake_new();
    fake_start(f, serve_short_sum);
    gpucomp_client *c = connect_ok(f);
    void *out = (void *)1;
    size_t out_len = 1;
    ck_assert_int_eq(gpucomp_decompress(c, NULL, "abc", 3, &out, &out_len), GPUCOMP_E_PROTOCOL);
    ck_assert_ptr_null(out);
    ck_assert_uint_eq(out_len, 0);
    ck_assert_contains(gpucomp_last_error(c), "600 of the 1000");
    /* the connection is no longer trusted */
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    ck_assert_contains(gpucomp_last_error(c), "earlier error");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

static void serve_long_sum(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    uint8_t junk[150] = { 0 };
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 100, junk, 150, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_payload_sum_long)
{
    fake *f = fake_new();
    fake_start(f, serve_long_sum);
    gpucomp_client *c = connect_ok(f);
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress(c, NULL, "abc", 3, &out, &out_len), GPUCOMP_E_PROTOCOL);
    ck_assert_contains(gpucomp_last_error(c), "more than the 100 bytes");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* First piece of a 1000-byte response, then gone. */
static void serve_vanish(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    uint8_t junk[100] = { 0 };
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 1000, junk, 100, false);
}

START_TEST(test_daemon_vanishes_mid_response)
{
    fake *f = fake_new();
    fake_start(f, serve_vanish);
    gpucomp_client *c = connect_ok(f);
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress(c, NULL, "abc", 3, &out, &out_len), GPUCOMP_E_IO);
    ck_assert_contains(gpucomp_last_error(c), "closed the connection");
    ck_assert_contains(gpucomp_last_error(c), "100 of 1000");
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* The whole request read, then gone without a word. */
static void serve_silent_death(fake *f)
{
    if (handshake(f))
        read_request(f);
}

START_TEST(test_daemon_dies_before_answering)
{
    fake *f = fake_new();
    fake_start(f, serve_silent_death);
    gpucomp_client *c = connect_ok(f);
    gpucomp_set_reconnect(c, 0); /* the fake serves one connection: no second try to wait for */
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress(c, NULL, "abc", 3, &out, &out_len), GPUCOMP_E_IO);
    ck_assert_str_eq(gpucomp_last_error(c), "gpucompd closed the connection before answering the request");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* Half a frame, then gone. */
static void serve_half_frame(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    uint8_t header[6] = { 100, 0, 0, 0, 0x22, 0x05 };
    raw_write(f, header, sizeof header);
}

START_TEST(test_daemon_vanishes_mid_frame)
{
    fake *f = fake_new();
    fake_start(f, serve_half_frame);
    gpucomp_client *c = connect_ok(f);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    ck_assert_contains(gpucomp_last_error(c), "inside a frame");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

static void serve_other_id(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    send_response(f, f->id + 7, GPUCOMP__STATUS__STATUS_OK, NULL, 0, NULL, 0, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_response_for_another_id)
{
    fake *f = fake_new();
    fake_start(f, serve_other_id);
    gpucomp_client *c = connect_ok(f);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_PROTOCOL);
    char want[64];
    snprintf(want, sizeof want, "request id %llu", (unsigned long long)f->id + 7);
    ck_assert_contains(gpucomp_last_error(c), want);
    snprintf(want, sizeof want, "in flight is %llu", (unsigned long long)f->id);
    ck_assert_contains(gpucomp_last_error(c), want);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

static void serve_connection_error(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    send_response(f, 0, GPUCOMP__STATUS__STATUS_LIMIT, "frame of 20000000 bytes is over the limit", 0, NULL, 0,
                  true);
}

START_TEST(test_connection_level_error)
{
    fake *f = fake_new();
    fake_start(f, serve_connection_error);
    gpucomp_client *c = connect_ok(f);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_LIMIT);
    ck_assert_contains(gpucomp_last_error(c), "frame of 20000000 bytes");
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* A request error, then a ping on the same connection. */
static void serve_error_then_ping(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_CRC, "bzip2: stream 1 block 3: block CRC mismatch", 0, NULL, 0,
                  true);
    if (!read_request(f))
        return;
    if (f->op != GPUCOMP__OP__OP_PING)
        complain(f, "expected a ping after the error");
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 0, NULL, 0, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_daemon_error_keeps_connection)
{
    fake *f = fake_new();
    fake_start(f, serve_error_then_ping);
    gpucomp_client *c = connect_ok(f);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_decompress(c, &o, "BZh9", 4, &out, &out_len), GPUCOMP_E_CRC);
    ck_assert_str_eq(gpucomp_last_error(c), "bzip2: stream 1 block 3: block CRC mismatch");
    ck_assert_int_eq(f->codec, GPUCOMP__CODEC__CODEC_BZIP2);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    ck_assert_str_eq(gpucomp_last_error(c), "");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

static void serve_unknown_status(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    send_response(f, f->id, (Gpucomp__Status)99, "something new", 0, NULL, 0, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_unknown_status_code)
{
    fake *f = fake_new();
    fake_start(f, serve_unknown_status);
    gpucomp_client *c = connect_ok(f);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_PROTOCOL);
    ck_assert_contains(gpucomp_last_error(c), "something new");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* Announces 5000 bytes of output to a client that allows 100. */
static void serve_too_much(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    if (f->max_output != 100)
        complain(f, "max_output %llu, expected 100", (unsigned long long)f->max_output);
    uint8_t junk[5000] = { 0 };
    send_data(f, f->id, junk, sizeof junk, sizeof junk); /* one frame: the client hangs up after it */
    gc_wire_free(recv_frame(f));
}

START_TEST(test_max_output_enforced)
{
    fake *f = fake_new();
    fake_start(f, serve_too_much);
    gpucomp_client *c = connect_ok(f);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    o.max_output = 100;
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_decompress(c, &o, "GCRL", 4, &out, &out_len), GPUCOMP_E_LIMIT);
    ck_assert_contains(gpucomp_last_error(c), "limit of 100");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* max_request 1000: a 2000-byte request never reaches the wire; the ping after it does. */
static void serve_ping_only(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    if (f->op != GPUCOMP__OP__OP_PING)
        complain(f, "op %d arrived; only a ping should have", f->op);
    send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 0, NULL, 0, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_max_request_enforced)
{
    fake *f = fake_new();
    f->max_request = 1000;
    fake_start(f, serve_ping_only);
    gpucomp_client *c = connect_ok(f);
    uint8_t *in = pattern(2000);
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress(c, NULL, in, 2000, &out, &out_len), GPUCOMP_E_LIMIT);
    ck_assert_contains(gpucomp_last_error(c), "limit of 1000");
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(c);
    free(in);
    fake_finish(f);
}
END_TEST

START_TEST(test_invalid_arguments)
{
    fake *f = fake_new();
    fake_start(f, serve_ping_only);
    gpucomp_client *c = connect_ok(f);
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress(c, NULL, "x", 1, NULL, &out_len), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_compress(c, NULL, "x", 1, &out, NULL), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_compress(c, NULL, NULL, 5, &out, &out_len), GPUCOMP_E_INVALID);
    gpucomp_options o;
    gpucomp_options_init(&o, (gpucomp_codec)42);
    ck_assert_int_eq(gpucomp_compress(c, &o, "x", 1, &out, &out_len), GPUCOMP_E_INVALID);
    ck_assert_contains(gpucomp_last_error(c), "codec 42");
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = -3;
    ck_assert_int_eq(gpucomp_decompress(c, &o, "x", 1, &out, &out_len), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_stats_get(c, NULL), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK); /* nothing reached the wire before */
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* Reads the first frame of a big request, refuses it, hangs up without reading the rest. */
static void serve_refuse_early(fake *f)
{
    if (!handshake(f))
        return;
    Gpucomp__Frame *fr = recv_frame(f);
    if (!fr || fr->body_case != GPUCOMP__FRAME__BODY_REQUEST) {
        complain(f, "expected a Request");
        gc_wire_free(fr);
        return;
    }
    uint64_t id = fr->request->id;
    gc_wire_free(fr);
    send_response(f, id, GPUCOMP__STATUS__STATUS_BUSY, "over the memory budget: try later", 0, NULL, 0, true);
    shutdown(f->fd, SHUT_RDWR);
}

START_TEST(test_early_refusal_while_sending)
{
    /* SIGPIPE stays at its default: if the client let one through, this test dies. */
    signal(SIGPIPE, SIG_DFL);
    fake *f = fake_new();
    f->max_frame = GC_WIRE_MIN_MAX_FRAME;
    fake_start(f, serve_refuse_early);
    gpucomp_client *c = connect_socket_only(f);
    size_t len = 8u << 20; /* many frames: the refusal comes while they are being sent */
    uint8_t *in = pattern(len);
    void *out;
    size_t out_len;
    int rc = gpucomp_compress(c, NULL, in, len, &out, &out_len);
    ck_assert_msg(rc == GPUCOMP_E_BUSY, "rc %d: %s", rc, gpucomp_last_error(c));
    ck_assert_contains(gpucomp_last_error(c), "over the memory budget");
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_IO);
    gpucomp_close(c);
    free(in);
    fake_finish(f);
}
END_TEST

/* Reads nothing, closes: the client's writes hit a dead socket. */
static void serve_die_after_welcome(fake *f)
{
    handshake(f);
}

START_TEST(test_dead_daemon_no_sigpipe)
{
    signal(SIGPIPE, SIG_DFL);
    fake *f = fake_new();
    f->max_frame = GC_WIRE_MIN_MAX_FRAME;
    fake_start(f, serve_die_after_welcome);
    gpucomp_client *c = connect_socket_only(f);
    fake_join(f); /* the fake has hung up */
    size_t len = 1u << 20;
    uint8_t *in = pattern(len);
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress(c, NULL, in, len, &out, &out_len), GPUCOMP_E_IO);
    ck_assert_contains(gpucomp_last_error(c), "closed the connection");
    gpucomp_close(c);
    free(in);
    fake_finish(f);
}
END_TEST

static void serve_oversize_header(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    uint32_t n = f->max_frame + 1;
    uint8_t header[4] = { (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24) };
    raw_write(f, header, sizeof header);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_oversize_frame_rejected)
{
    fake *f = fake_new();
    f->max_frame = GC_WIRE_MIN_MAX_FRAME;
    fake_start(f, serve_oversize_header);
    gpucomp_client *c = connect_ok(f);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_LIMIT);
    ck_assert_contains(gpucomp_last_error(c), "over the limit");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

static void serve_garbage(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    uint8_t bytes[9] = { 5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff };
    raw_write(f, bytes, sizeof bytes);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_garbage_frame_rejected)
{
    fake *f = fake_new();
    fake_start(f, serve_garbage);
    gpucomp_client *c = connect_ok(f);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_E_PROTOCOL);
    ck_assert_contains(gpucomp_last_error(c), "malformed");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* STATS with counters and two lanes; then a STATS answer without them. */
static void serve_stats(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    if (f->op != GPUCOMP__OP__OP_STATS)
        complain(f, "op %d, expected STATS", f->op);
    Gpucomp__LaneStats d0 = GPUCOMP__LANE_STATS__INIT, d1 = GPUCOMP__LANE_STATS__INIT;
    d0.name = (char *)"NVIDIA H100";
    d1.name = (char *)"emulated1";
    d1.batches = 5;
    d1.requests = 11;
    d1.bytes_in = 100;
    d1.bytes_out = 50;
    d1.h2d_ns = 1;
    d1.kernel_ns = 2;
    d1.d2h_ns = 3;
    d1.wall_ns = 9;
    d1.fallbacks = 1;
    d1.queue_depth = 2;
    d1.retired = true;
    d1.requests_in_flight = 3;
    d1.bytes_in_flight = 5ull << 32;
    d1.gpu = 1;
    Gpucomp__LaneStats *devs[2] = { &d0, &d1 };
    Gpucomp__Stats st = GPUCOMP__STATS__INIT;
    st.uptime_ms = 123456;
    st.connections = 3;
    st.requests_ok = 10;
    st.requests_failed = 2;
    st.bytes_in = 1u << 30;
    st.bytes_out = 12345;
    st.worker_threads = 16;
    st.queue_depth = 4;
    st.memory_in_use = 777;
    st.memory_budget = 8888;
    st.cpu_requests = 3;
    st.gpu_requests = 7;
    st.backend = (char *)"gpu";
    st.n_lanes = 2;
    st.lanes = devs;
    st.gpus = 2;
    st.gpu_by_load = (uint64_t)UINT32_MAX + 5; /* the library's 32-bit counter saturates */
    Gpucomp__Response r = GPUCOMP__RESPONSE__INIT;
    r.id = f->id;
    r.last = true;
    r.stats = &st;
    Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
    fr.body_case = GPUCOMP__FRAME__BODY_RESPONSE;
    fr.response = &r;
    send_frame(f, &fr);
    if (read_request(f))
        send_response(f, f->id, GPUCOMP__STATUS__STATUS_OK, NULL, 0, NULL, 0, true);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_stats)
{
    fake *f = fake_new();
    fake_start(f, serve_stats);
    gpucomp_client *c = connect_ok(f);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.uptime_ms, 123456);
    ck_assert_uint_eq(st.connections, 3);
    ck_assert_uint_eq(st.requests_ok, 10);
    ck_assert_uint_eq(st.requests_failed, 2);
    ck_assert_uint_eq(st.bytes_in, 1u << 30);
    ck_assert_uint_eq(st.bytes_out, 12345);
    ck_assert_uint_eq(st.worker_threads, 16);
    ck_assert_uint_eq(st.queue_depth, 4);
    ck_assert_uint_eq(st.memory_in_use, 777);
    ck_assert_uint_eq(st.memory_budget, 8888);
    ck_assert_uint_eq(st.cpu_requests, 3);
    ck_assert_uint_eq(st.gpu_requests, 7);
    ck_assert_str_eq(st.backend, "gpu");
    ck_assert_uint_eq(st.gpu_devices, 2);
    ck_assert_str_eq(st.devices[0].name, "NVIDIA H100");
    ck_assert_int_eq(st.devices[0].retired, 0);
    ck_assert_str_eq(st.devices[1].name, "emulated1");
    ck_assert_uint_eq(st.devices[1].batches, 5);
    ck_assert_uint_eq(st.devices[1].requests, 11);
    ck_assert_uint_eq(st.devices[1].bytes_in, 100);
    ck_assert_uint_eq(st.devices[1].bytes_out, 50);
    ck_assert_uint_eq(st.devices[1].h2d_ns, 1);
    ck_assert_uint_eq(st.devices[1].kernel_ns, 2);
    ck_assert_uint_eq(st.devices[1].d2h_ns, 3);
    ck_assert_uint_eq(st.devices[1].wall_ns, 9);
    ck_assert_uint_eq(st.devices[1].fallbacks, 1);
    ck_assert_uint_eq(st.devices[1].queue_depth, 2);
    ck_assert_int_ne(st.devices[1].retired, 0);
    ck_assert_uint_eq(st.devices[1].requests_in_flight, 3);
    ck_assert_uint_eq(st.devices[1].bytes_in_flight, 5ull << 32);
    ck_assert_uint_eq(st.devices[0].gpu, 0);
    ck_assert_uint_eq(st.devices[1].gpu, 1);
    ck_assert_uint_eq(st.gpus, 2);
    ck_assert_uint_eq(st.gpu_by_load, UINT32_MAX);
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_E_PROTOCOL);
    ck_assert_contains(gpucomp_last_error(c), "without statistics");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* ---- memfd transport ------------------------------------------------------ */

static bool read_fd_fully(int fd, uint8_t *buf, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t n = pread(fd, buf + off, len - off, (off_t)off);
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    return true;
}

/* Answer one memfd request: output = input xor 0x5a, written into the output memfd. */
static void answer_fd_request(fake *f, const Gpucomp__Request *r)
{
    record_first(f, r);
    f->frames = 1;
    if (!r->payload_in_fd || !r->last || r->payload.len || f->n_fds != 2) {
        complain(f, "memfd request: payload_in_fd %d, last %d, %zu payload bytes, %u fds", r->payload_in_fd,
                 r->last, r->payload.len, f->n_fds);
        return;
    }
    if (!read_fd_fully(f->fds[0], f->input, r->total_size))
        complain(f, "cannot read %llu bytes from the input memfd", (unsigned long long)r->total_size);
    f->input_len = r->total_size;
    for (size_t i = 0; i < f->input_len; i++)
        f->input[i] ^= 0x5a;
    if (ftruncate(f->fds[1], (off_t)f->input_len) != 0 ||
        pwrite(f->fds[1], f->input, f->input_len, 0) != (ssize_t)f->input_len)
        complain(f, "cannot write the output memfd");
    Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
    resp.id = r->id;
    resp.total_size = f->input_len + (f->lie_about_fd_output ? 100 : 0);
    resp.payload_in_fd = true;
    resp.last = true;
    resp.backend = GPUCOMP__BACKEND__BACKEND_CPU;
    Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
    fr.body_case = GPUCOMP__FRAME__BODY_RESPONSE;
    fr.response = &resp;
    send_frame(f, &fr);
}

static void serve_memfd(fake *f)
{
    if (!handshake(f))
        return;
    for (;;) {
        Gpucomp__Frame *fr = recv_frame(f);
        if (!fr)
            return;
        if (fr->body_case == GPUCOMP__FRAME__BODY_REQUEST)
            answer_fd_request(f, fr->request);
        else
            complain(f, "expected a Request");
        gc_wire_free(fr);
        while (f->n_fds)
            close(f->fds[--f->n_fds]);
    }
}

START_TEST(test_large_buffer_goes_through_memfd)
{
    fake *f = fake_new();
    fake_start(f, serve_memfd);
    gpucomp_client *c = connect_ok(f);
    size_t len = GPUCOMP_MEMFD_THRESHOLD + 12345;
    uint8_t *in = pattern(len);
    void *out;
    size_t out_len;
    int rc = gpucomp_compress(c, NULL, in, len, &out, &out_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(out_len, len);
    ck_assert(is_xor_of(out, in, len));
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    gpucomp_free(out);
    gpucomp_close(c);
    free(in);
    fake_finish(f);
    ck_assert_uint_eq(f->frames, 1);
    ck_assert_uint_eq(f->total_size, len);
    ck_assert_int_eq(f->op, GPUCOMP__OP__OP_COMPRESS);
}
END_TEST

/* Compresses answered inline (each byte xor 0x5a) until the client hangs up. */
static void serve_inline(fake *f)
{
    if (!handshake(f))
        return;
    while (read_request(f)) {
        for (size_t i = 0; i < f->input_len; i++)
            f->input[i] ^= 0x5a;
        send_data(f, f->id, f->input, f->input_len, 50000);
    }
}

/* One 32 KiB compress through a fake serving `run`, with GPUCOMP_MEMFD_THRESHOLD
 * set to env (NULL: unset). The fake checks the transport: serve_memfd
 * complains about an inline request, serve_inline about a memfd one. */
static void compress_32k_with_threshold(scenario run, const char *env)
{
    fake *f = fake_new();
    fake_start(f, run);
    if (env)
        setenv("GPUCOMP_MEMFD_THRESHOLD", env, 1);
    gpucomp_client *c = connect_ok(f);
    unsetenv("GPUCOMP_MEMFD_THRESHOLD");
    size_t len = 32u << 10;
    uint8_t *in = pattern(len);
    void *out;
    size_t out_len;
    int rc = gpucomp_compress(c, NULL, in, len, &out, &out_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress (threshold %s): %s", env ? env : "unset", gpucomp_last_error(c));
    ck_assert(out_len == len && is_xor_of(out, in, len));
    gpucomp_free(out);
    gpucomp_close(c);
    free(in);
    fake_finish(f); /* asserts the fake had no complaint */
    ck_assert_uint_eq(f->total_size, len);
}

START_TEST(test_memfd_threshold_from_env)
{
    ck_assert_uint_lt(GPUCOMP_MEMFD_THRESHOLD, 32u << 10);
    compress_32k_with_threshold(serve_memfd, NULL);   /* built in: a memfd */
    compress_32k_with_threshold(serve_inline, "64k"); /* raised: the socket */
    compress_32k_with_threshold(serve_inline, "32769");
    compress_32k_with_threshold(serve_memfd, "32K"); /* exactly the threshold */
    /* the one size parser's units (size_parse.h) */
    compress_32k_with_threshold(serve_memfd, "16k");
    compress_32k_with_threshold(serve_memfd, "32KiB");
    compress_32k_with_threshold(serve_inline, "33kb");
    compress_32k_with_threshold(serve_inline, "1T"); /* T: once refused, so the default applied */
    compress_32k_with_threshold(serve_memfd, "0");   /* every non-empty input: a memfd */
    /* values that are not sizes leave the built-in threshold */
    compress_32k_with_threshold(serve_memfd, "12x");
    compress_32k_with_threshold(serve_memfd, "-5");
    compress_32k_with_threshold(serve_memfd, "99999999999G");
}
END_TEST

START_TEST(test_fd_api)
{
    fake *f = fake_new();
    fake_start(f, serve_memfd);
    gpucomp_client *c = connect_ok(f);
    int in = gpucomp_memfd_create("check-in"), out = gpucomp_memfd_create(NULL);
    ck_assert(in >= 0 && out >= 0);
    ck_assert_int_ne(fcntl(in, F_GETFD) & FD_CLOEXEC, 0);
    uint8_t *data = pattern(1000);
    ck_assert_int_eq(pwrite(in, data, 1000, 0), 1000);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.max_output = 5000;
    size_t out_len = 0;
    int rc = gpucomp_decompress_fd(c, &o, in, 1000, out, &out_len);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress_fd: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(out_len, 1000);
    uint8_t back[1000];
    ck_assert(read_fd_fully(out, back, sizeof back));
    ck_assert(is_xor_of(back, data, sizeof back));
    ck_assert_int_eq(gpucomp_decompress_fd(c, &o, -1, 10, out, &out_len), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_compress_fd(c, &o, in, 10, out, NULL), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_compress_fd(NULL, &o, in, 10, out, &out_len), GPUCOMP_E_INVALID);
    gpucomp_close(c);
    close(in);
    close(out);
    free(data);
    fake_finish(f);
    ck_assert_int_eq(f->op, GPUCOMP__OP__OP_DECOMPRESS);
    ck_assert_int_eq(f->codec, GPUCOMP__CODEC__CODEC_BZIP2);
    ck_assert_uint_eq(f->max_output, 5000);
}
END_TEST

START_TEST(test_memfd_create_is_sealable)
{
    int fd = gpucomp_memfd_create("sealable");
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    close(fd);
}
END_TEST

START_TEST(test_fd_output_shorter_than_announced)
{
    fake *f = fake_new();
    f->lie_about_fd_output = true;
    fake_start(f, serve_memfd);
    gpucomp_client *c = connect_ok(f);
    int in = gpucomp_memfd_create("in"), out = gpucomp_memfd_create("out");
    ck_assert_int_eq(pwrite(in, "hello", 5, 0), 5);
    size_t out_len = 1;
    ck_assert_int_eq(gpucomp_compress_fd(c, NULL, in, 5, out, &out_len), GPUCOMP_E_PROTOCOL);
    ck_assert_uint_eq(out_len, 0);
    ck_assert_contains(gpucomp_last_error(c), "memfd holds 5");
    gpucomp_close(c);
    close(in);
    close(out);
    fake_finish(f);
}
END_TEST

static void serve_fd_flag_inline(fake *f)
{
    if (!handshake(f) || !read_request(f))
        return;
    Gpucomp__Response resp = GPUCOMP__RESPONSE__INIT;
    resp.id = f->id;
    resp.payload_in_fd = true;
    resp.last = true;
    Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
    fr.body_case = GPUCOMP__FRAME__BODY_RESPONSE;
    fr.response = &resp;
    send_frame(f, &fr);
    gc_wire_free(recv_frame(f));
}

START_TEST(test_fd_answer_to_inline_request)
{
    fake *f = fake_new();
    fake_start(f, serve_fd_flag_inline);
    gpucomp_client *c = connect_ok(f);
    void *out;
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress(c, NULL, "abc", 3, &out, &out_len), GPUCOMP_E_PROTOCOL);
    ck_assert_contains(gpucomp_last_error(c), "payload_in_fd");
    gpucomp_close(c);
    fake_finish(f);
}
END_TEST

/* ---- the CLI's names ------------------------------------------------------ */

START_TEST(test_cli_suffixes)
{
    gpucomp_codec c = 0;
    char *n = cli_decompressed_name("dir/a.txt.bz2", &c);
    ck_assert_str_eq(n, "dir/a.txt");
    ck_assert_int_eq(c, GPUCOMP_CODEC_BZIP2);
    free(n);
    n = cli_decompressed_name("x.tbz2", &c);
    ck_assert_str_eq(n, "x.tar");
    free(n);
    n = cli_decompressed_name("x.tbz", &c);
    ck_assert_str_eq(n, "x.tar");
    free(n);
    n = cli_decompressed_name("data.rle", &c);
    ck_assert_str_eq(n, "data");
    ck_assert_int_eq(c, GPUCOMP_CODEC_RLE);
    free(n);
    ck_assert_ptr_null(cli_decompressed_name("notes.txt", &c));
    ck_assert_ptr_null(cli_decompressed_name(".bz2", &c)); /* a hidden file, not a suffix */
    ck_assert_ptr_null(cli_decompressed_name("dir/.rle", &c));
    ck_assert_ptr_null(cli_decompressed_name("a.bz2/b", &c));
    ck_assert_str_eq(cli_known_suffix("a.tbz2"), ".tbz2");
    ck_assert_ptr_null(cli_known_suffix("a.gz"));
    n = cli_compressed_name("a.txt", GPUCOMP_CODEC_BZIP2);
    ck_assert_str_eq(n, "a.txt.bz2");
    free(n);
    n = cli_compressed_name("a.txt", GPUCOMP_CODEC_RLE);
    ck_assert_str_eq(n, "a.txt.rle");
    free(n);
}
END_TEST

START_TEST(test_cli_codecs_and_magic)
{
    gpucomp_codec c = 0;
    ck_assert(cli_parse_codec("bzip2", &c) && c == GPUCOMP_CODEC_BZIP2);
    ck_assert(cli_parse_codec("rle", &c) && c == GPUCOMP_CODEC_RLE);
    ck_assert(!cli_parse_codec("gzip", &c));
    ck_assert_str_eq(cli_codec_name(GPUCOMP_CODEC_RLE), "rle");
    ck_assert_str_eq(cli_codec_name(GPUCOMP_CODEC_BZIP2), "bzip2");
    ck_assert(cli_codec_from_magic((const uint8_t *)"BZh91AY&SY", 10, &c) && c == GPUCOMP_CODEC_BZIP2);
    ck_assert(cli_codec_from_magic((const uint8_t *)"GCRL\x01", 5, &c) && c == GPUCOMP_CODEC_RLE);
    ck_assert(!cli_codec_from_magic((const uint8_t *)"BZh0", 4, &c));
    ck_assert(!cli_codec_from_magic((const uint8_t *)"BZh", 3, &c));
    ck_assert(!cli_codec_from_magic((const uint8_t *)"", 0, &c));
}
END_TEST

/* bzip2's own rule for its names: the basename, "unzip" decompresses, "zcat"/"z2cat" to stdout. */
START_TEST(test_cli_mode_from_name)
{
    static const struct {
        const char *argv0;
        bool decompress, to_stdout;
    } names[] = {
        { "gpucomp", false, false }, { "bzip2", false, false },       { "/usr/bin/bzip2", false, false },
        { "bunzip2", true, false },  { "/bin/bunzip2", true, false }, { "./links/bunzip2", true, false },
        { "BUNZIP2", true, false },  { "bzcat", true, true },         { "/usr/lib/x/bzcat", true, true },
        { "bz2cat", true, true },    { "BZCAT", true, true },         { "/bunzip2.d/bzip2", false, false },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        bool dec = !names[i].decompress, out = !names[i].to_stdout;
        cli_mode_from_name(names[i].argv0, &dec, &out);
        ck_assert_msg(dec == names[i].decompress && out == names[i].to_stdout, "%s: decompress %d, stdout %d",
                      names[i].argv0, dec, out);
    }
}
END_TEST

START_TEST(test_cli_sizes)
{
    uint64_t v;
    ck_assert(gc_parse_size("4096", UINT32_MAX, &v) && v == 4096);
    ck_assert(gc_parse_size("64k", UINT32_MAX, &v) && v == 65536);
    ck_assert(gc_parse_size("1M", UINT32_MAX, &v) && v == 1u << 20);
    ck_assert(gc_parse_size("2G", UINT32_MAX, &v) && v == 2ull << 30);
    ck_assert(!gc_parse_size("4G", UINT32_MAX, &v));
    ck_assert(!gc_parse_size("-1", UINT32_MAX, &v));
    ck_assert(!gc_parse_size(" 5", UINT32_MAX, &v));
    ck_assert(!gc_parse_size("", UINT32_MAX, &v));
    ck_assert(!gc_parse_size("99999999999999999999999", UINT64_MAX, &v));
    ck_assert(gc_parse_size("8", 8, &v) && v == 8);
    ck_assert(!gc_parse_size("9", 8, &v));
}
END_TEST

/*
 * The one set of rules (size_parse.h), as the daemon's settings
 * (--memory-budget=4GiB) and the library's environment
 * (GPUCOMP_MEMFD_THRESHOLD=16k) both use it.
 */
START_TEST(test_size_rules)
{
    uint64_t v;
    /* every unit a power of 1024, written K, Ki, KB or KiB, in any case */
    static const struct {
        const char *text;
        uint64_t value;
    } good[] = {
        { "0", 0 },
        { "0K", 0 },
        { "007", 7 },
        { "512B", 512 },
        { "512b", 512 },
        { "16k", 16u << 10 },
        { "16K", 16u << 10 },
        { "16Ki", 16u << 10 },
        { "16KB", 16u << 10 },
        { "16kb", 16u << 10 },
        { "16KiB", 16u << 10 },
        { "16kib", 16u << 10 },
        { "1MB", 1u << 20 },
        { "3Mi", 3u << 20 },
        { "64mb", 64u << 20 },
        { "4GiB", 4ull << 30 },
        { "4gib", 4ull << 30 },
        { "4G", 4ull << 30 },
        { "1T", 1ull << 40 },
        { "2TiB", 2ull << 40 },
        { "16777215T", 16777215ull << 40 },
        { "18446744073709551615", UINT64_MAX },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        v = 12345;
        ck_assert_msg(gc_parse_size(good[i].text, UINT64_MAX, &v), "'%s' refused", good[i].text);
        ck_assert_msg(v == good[i].value, "'%s' read as %llu", good[i].text, (unsigned long long)v);
    }
    static const char *const bad[] = {
        "",
        "K",
        "B",
        "iB",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1 K",
        "1.5G",
        "0x10",
        "1e3",
        "1KK",
        "1Kb2",
        "1KiBB",
        "1BK",
        "1iB",
        "1Bi",
        "1P",
        "1E",
        "1kbit",
        "4G\n",
        "16777216T",            /* 2^64 */
        "18446744073709551616", /* 2^64 */
        "99999999999999999999999G",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 12345;
        ck_assert_msg(!gc_parse_size(bad[i], UINT64_MAX, &v), "'%s' accepted", bad[i]);
        ck_assert_uint_eq(v, 12345); /* untouched */
    }
    /* max is inclusive and applies after the unit */
    ck_assert(gc_parse_size("64M", 64u << 20, &v) && v == 64u << 20);
    ck_assert(!gc_parse_size("67108865", 64u << 20, &v));
    ck_assert(!gc_parse_size("65537K", 64u << 20, &v));
    ck_assert(!gc_parse_size("1T", UINT32_MAX, &v));
    ck_assert(gc_parse_size("0", 0, &v) && v == 0);
    ck_assert(!gc_parse_size("1", 0, &v));
}
END_TEST

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *api = tcase_create("api");
    tcase_add_test(api, test_strerror_every_code);
    tcase_add_test(api, test_codes_match_internal_and_wire);
    tcase_add_test(api, test_options_init_defaults);
    tcase_add_test(api, test_null_client_and_version);
    suite_add_tcase(s, api);

    TCase *conn = tcase_create("connect");
    tcase_add_test(conn, test_connect_missing_socket);
    tcase_add_test(conn, test_connect_uses_environment);
    tcase_add_test(conn, test_connect_path_too_long);
    tcase_add_test(conn, test_connect_error_is_thread_local);
    tcase_add_test(conn, test_handshake_version_mismatch);
    tcase_add_test(conn, test_handshake_refused);
    tcase_add_test(conn, test_handshake_busy);
    tcase_add_test(conn, test_handshake_tiny_frame_limit);
    tcase_add_test(conn, test_handshake_daemon_hangs_up);
    tcase_add_test(conn, test_handshake_wrong_frame);
    suite_add_tcase(s, conn);

    TCase *wire = tcase_create("wire");
    tcase_add_test(wire, test_request_and_response_in_frames);
    tcase_add_test(wire, test_empty_input_and_output);
    tcase_add_test(wire, test_payload_sum_short);
    tcase_add_test(wire, test_payload_sum_long);
    tcase_add_test(wire, test_daemon_vanishes_mid_response);
    tcase_add_test(wire, test_daemon_vanishes_mid_frame);
    tcase_add_test(wire, test_daemon_dies_before_answering);
    tcase_add_test(wire, test_response_for_another_id);
    tcase_add_test(wire, test_connection_level_error);
    tcase_add_test(wire, test_daemon_error_keeps_connection);
    tcase_add_test(wire, test_unknown_status_code);
    tcase_add_test(wire, test_max_output_enforced);
    tcase_add_test(wire, test_max_request_enforced);
    tcase_add_test(wire, test_invalid_arguments);
    tcase_add_test(wire, test_early_refusal_while_sending);
    tcase_add_test(wire, test_dead_daemon_no_sigpipe);
    tcase_add_test(wire, test_oversize_frame_rejected);
    tcase_add_test(wire, test_garbage_frame_rejected);
    tcase_add_test(wire, test_stats);
    tcase_set_timeout(wire, 20);
    suite_add_tcase(s, wire);

    TCase *memfd = tcase_create("memfd");
    tcase_add_test(memfd, test_large_buffer_goes_through_memfd);
    tcase_add_test(memfd, test_memfd_threshold_from_env);
    tcase_add_test(memfd, test_fd_api);
    tcase_add_test(memfd, test_memfd_create_is_sealable);
    tcase_add_test(memfd, test_fd_output_shorter_than_announced);
    tcase_add_test(memfd, test_fd_answer_to_inline_request);
    tcase_set_timeout(memfd, 20);
    suite_add_tcase(s, memfd);

    TCase *cli = tcase_create("cli-names");
    tcase_add_test(cli, test_cli_suffixes);
    tcase_add_test(cli, test_cli_codecs_and_magic);
    tcase_add_test(cli, test_cli_mode_from_name);
    tcase_add_test(cli, test_cli_sizes);
    tcase_add_test(cli, test_size_rules);
    suite_add_tcase(s, cli);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(client_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
