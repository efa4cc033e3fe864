/*
 * check_hostile.c - a real gpucompd against clients that attack it
 * (docs/SECURITY.md): hand-made frames and memfds that alias,
 * change under the daemon, shrink, bomb, stall and flood. Each test is one
 * finding; each failed before its fix (docs/RELIABILITY.md says how).
 * Races run a bounded number of attempts. The daemon must survive every
 * one and keep serving others.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "daemon_harness.h"
#include "fdpass.h"
#include "gc_clock.h"
#include "gc_status.h"
#include "gpucomp.h"
#include "wire.h"

static test_daemon dut;

static void start(const char *const *args)
{
    test_daemon_start(&dut, args);
}

/*
 * For peak-RSS tests: under AddressSanitizer freed memory sits in a
 * quarantine (256 MiB by default) that would count as the daemon's; keep it
 * small so the figure is the daemon's own.
 */
static void start_for_rss(const char *const *args)
{
    const char *was = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=1", was ? was : "", was && *was ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    start(args);
}

static void teardown(void)
{
    test_daemon_cleanup(&dut);
}

/* A raw connection past the handshake, with a receive timeout so a stalled daemon fails the test. */
static int hello(void)
{
    int fd = raw_connect(dut.socket_path);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    ck_assert_msg(w && w->body_case == GPUCOMP__FRAME__BODY_WELCOME, "no Welcome from the daemon");
    ck_assert_int_eq(w->welcome->status, GC_OK);
    gc_wire_free(w);
    return fd;
}

/* The Response to id (skipping others); NULL if the connection ended. Caller frees. */
static Gpucomp__Frame *response_to(int fd, uint64_t id)
{
    for (;;) {
        Gpucomp__Frame *f = raw_recv(fd, 64u << 20);
        if (!f)
            return NULL;
        if (f->body_case == GPUCOMP__FRAME__BODY_RESPONSE && f->response->id == id)
            return f;
        gc_wire_free(f);
    }
}

/* The daemon is alive and answers a new client's PING. */
static void assert_daemon_serves(void)
{
    int status;
    ck_assert_msg(waitpid(dut.pid, &status, WNOHANG) == 0, "gpucompd died (status 0x%x)", status);
    int fd = hello();
    Gpucomp__Request ping = GPUCOMP__REQUEST__INIT;
    ping.id = 99;
    ping.op = GPUCOMP__OP__OP_PING;
    ping.last = 1;
    double t0 = test_now_s();
    raw_send_request(fd, &ping);
    Gpucomp__Frame *f = response_to(fd, 99);
    ck_assert_msg(f != NULL, "the daemon did not answer a PING");
    fprintf(stderr, "  another client's PING: %.2f ms\n", (test_now_s() - t0) * 1e3);
    gc_wire_free(f);
    close(fd);
}

/* One request whose whole input travels inline in one frame. */
static void send_inline(int sock, uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, const void *data, size_t len)
{
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = id;
    req.op = op;
    req.codec = codec;
    req.total_size = len;
    req.payload.data = (uint8_t *)data;
    req.payload.len = len;
    req.last = 1;
    raw_send_request(sock, &req);
}

/* A memfd holding len bytes. */
static int memfd_with(const void *data, size_t len)
{
    int fd = gc_memfd_create("hostile");
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
    if (len) {
        void *p = mmap(NULL, len, PROT_WRITE, MAP_SHARED, fd, 0);
        ck_assert_ptr_ne(p, MAP_FAILED);
        memcpy(p, data, len);
        munmap(p, len);
    }
    return fd;
}

/* An rle frame of data, made by the daemon itself (socket transport). */
static void *rle_frame_of(const void *data, size_t len, uint32_t chunk, size_t *frame_len)
{
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    o.chunk_size = chunk;
    void *frame = NULL;
    int rc = gpucomp_compress(c, &o, data, len, &frame, frame_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
    gpucomp_close(c);
    return frame;
}

static Gpucomp__Request fd_request(uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, uint64_t size)
{
    Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
    r.id = id;
    r.op = op;
    r.codec = codec;
    r.total_size = size;
    r.payload_in_fd = 1;
    r.last = 1;
    return r;
}

/*
 * Runs a decoder must trust: each 1 MiB chunk opens with a run of 70,000
 * 0xFF bytes (so its lengths take 4 bytes: 0xFFFFFFFF written over one is a
 * 4 GiB run) and goes on in short runs.
 */
static uint8_t *short_runs(size_t len)
{
    uint8_t *d = malloc(len);
    ck_assert_ptr_nonnull(d);
    fill_test_data(d, len, 1, 7);
    for (size_t at = 0; at < len; at += 1 << 20)
        memset(d + at, 0xFF, len - at < 70000 ? len - at : 70000);
    return d;
}

/* ---- 1. the same memfd as input and output ---------------------------- */

START_TEST(test_same_memfd_in_and_out)
{
    start(NULL);
    size_t len = 1 << 20, frame_len;
    uint8_t *data = short_runs(len);
    void *frame = rle_frame_of(data, len, 0, &frame_len);
    int mfd = memfd_with(frame, frame_len);
    int sock = hello();
    Gpucomp__Request req = fd_request(1, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, frame_len);
    int fds[2] = { mfd, mfd };
    raw_send_request_fds(sock, &req, fds, 2);
    Gpucomp__Frame *f = response_to(sock, 1);
    ck_assert_msg(f != NULL, "no answer: the daemon died or closed the connection");
    ck_assert_int_eq(f->response->status, GC_E_INVALID);
    ck_assert_msg(strstr(f->response->message, "same file"), "message: %s", f->response->message);
    gc_wire_free(f);
    assert_daemon_serves();
    close(sock);
    close(mfd);
    gpucomp_free(frame);
    free(data);
}
END_TEST

/* ---- 2. input bytes that change while the daemon reads them ------------ */

typedef struct scribbler {
    uint8_t *map;
    size_t len;
    atomic_bool stop;
    uint64_t seed;
} scribbler;

/* Keep overwriting random bytes of the mapped input (run lengths, index, headers, anything). */
static void *scribble(void *arg)
{
    scribbler *s = arg;
    uint64_t x = s->seed;
    while (!atomic_load(&s->stop)) {
        for (int i = 0; i < 64; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s->map[x % s->len] = (uint8_t)(x >> 40);
        }
        if (x & 1) /* now and then, every run length at once */
            memset(s->map + (x >> 8) % (s->len - s->len / 64), 0xFF, s->len / 64);
    }
    return NULL;
}

/* Send `rounds` requests of one kind on src while another thread scribbles on it. */
static void race_requests(Gpucomp__Op op, Gpucomp__Codec codec, const void *src, size_t len, int rounds)
{
    int sock = hello();
    int out = gc_memfd_create("out");
    ck_assert_int_ge(out, 0);
    unsigned answered = 0, failed = 0;
    for (int i = 0; i < rounds; i++) {
        int in = memfd_with(src, len);
        scribbler s = { .len = len, .seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) };
        s.map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, in, 0);
        ck_assert_ptr_ne(s.map, MAP_FAILED);
        atomic_init(&s.stop, false);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, scribble, &s), 0);
        Gpucomp__Request req = fd_request((uint64_t)i + 1, op, codec, len);
        int fds[2] = { in, out };
        raw_send_request_fds(sock, &req, fds, 2);
        Gpucomp__Frame *f = response_to(sock, (uint64_t)i + 1);
        atomic_store(&s.stop, true);
        pthread_join(t, NULL);
        ck_assert_msg(f != NULL, "round %d: no answer (the daemon died)", i);
        answered++;
        failed += (int)f->response->status != GC_OK;
        gc_wire_free(f);
        munmap(s.map, len);
        close(in);
    }
    fprintf(stderr, "  %s %s: %u answers, %u errors\n", codec == GPUCOMP__CODEC__CODEC_RLE ? "rle" : "bzip2",
            op == GPUCOMP__OP__OP_COMPRESS ? "compress" : "decompress", answered, failed);
    close(out);
    close(sock);
    assert_daemon_serves();
}

START_TEST(test_input_changing_under_rle_decode)
{
    start(NULL);
    size_t len = 4 << 20, frame_len;
    uint8_t *data = short_runs(len);
    void *frame = rle_frame_of(data, len, 0, &frame_len);
    race_requests(GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, frame, frame_len, 60);
    gpucomp_free(frame);
    free(data);
}
END_TEST

START_TEST(test_input_changing_under_rle_encode)
{
    start(NULL);
    size_t len = 4 << 20;
    uint8_t *data = short_runs(len);
    race_requests(GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, data, len, 60);
    free(data);
}
END_TEST

START_TEST(test_input_changing_under_bzip2)
{
    start(NULL);
    size_t len = 256 << 10;
    uint8_t *data = short_runs(len);
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = 1;
    void *bz = NULL;
    size_t bz_len = 0;
    ck_assert_int_eq(gpucomp_compress(c, &o, data, len, &bz, &bz_len), GPUCOMP_OK);
    gpucomp_close(c);
    race_requests(GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, bz, bz_len, 20);
    race_requests(GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, data, len, 10);
    gpucomp_free(bz);
    free(data);
}
END_TEST

/* ---- 3. an output memfd shrunk, or one that can fault ------------------- */

typedef struct shrinker {
    int fd;
    off_t size;
    atomic_bool stop;
} shrinker;

static void *shrink_loop(void *arg)
{
    shrinker *s = arg;
    while (!atomic_load(&s->stop)) {
        if (ftruncate(s->fd, 0) != 0) /* sealed now: nothing more to try */
            break;
        if (ftruncate(s->fd, s->size) != 0)
            break;
    }
    return NULL;
}

START_TEST(test_output_memfd_shrunk_while_used)
{
    start(NULL);
    size_t len = 1 << 20, frame_len;
    uint8_t *data = short_runs(len);
    void *frame = rle_frame_of(data, len, 0, &frame_len);
    int sock = hello();
    unsigned ok = 0;
    for (int i = 0; i < 200; i++) {
        int in = memfd_with(frame, frame_len);
        shrinker s = { .fd = gc_memfd_create("out"), .size = (off_t)len };
        ck_assert_int_ge(s.fd, 0);
        ck_assert_int_eq(ftruncate(s.fd, s.size), 0);
        atomic_init(&s.stop, false);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, shrink_loop, &s), 0);
        Gpucomp__Request req =
            fd_request((uint64_t)i + 1, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, frame_len);
        int fds[2] = { in, s.fd };
        raw_send_request_fds(sock, &req, fds, 2);
        Gpucomp__Frame *f = response_to(sock, (uint64_t)i + 1);
        atomic_store(&s.stop, true);
        pthread_join(t, NULL);
        ck_assert_msg(f != NULL, "attempt %d: no answer (the daemon died)", i);
        ok += (int)f->response->status == GC_OK;
        gc_wire_free(f);
        close(in);
        close(s.fd);
    }
    fprintf(stderr, "  shrunk output: %u of 200 served\n", ok);
    close(sock);
    assert_daemon_serves();
    gpucomp_free(frame);
    free(data);
}
END_TEST

START_TEST(test_hugetlb_memfd_refused)
{
    start(NULL);
    int out = memfd_create("huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    if (out < 0 || ftruncate(out, 2 << 20) != 0) {
        fprintf(stderr, "  hugetlb memfds unavailable here (%s): test not run\n", strerror(errno));
        if (out >= 0)
            close(out);
        return;
    }
    size_t len = 1 << 20, frame_len;
    uint8_t *data = short_runs(len);
    void *frame = rle_frame_of(data, len, 0, &frame_len);
    int in = memfd_with(frame, frame_len);
    int sock = hello();
    Gpucomp__Request req = fd_request(1, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, frame_len);
    int fds[2] = { in, out };
    raw_send_request_fds(sock, &req, fds, 2);
    Gpucomp__Frame *f = response_to(sock, 1);
    ck_assert_msg(f != NULL, "no answer (the daemon died)");
    ck_assert_int_eq(f->response->status, GC_E_INVALID);
    ck_assert_msg(strstr(f->response->message, "not a sealable memfd"), "message: %s", f->response->message);
    gc_wire_free(f);
    assert_daemon_serves();
    close(sock);
    close(in);
    close(out);
    gpucomp_free(frame);
    free(data);
}
END_TEST

/* ---- 4. budget held by requests that never finish ----------------------- */

/* Start a socket request declaring total bytes, send one byte of it, and go silent. */
static int half_request(uint64_t total)
{
    int fd = hello();
    Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
    req.id = 1;
    req.op = GPUCOMP__OP__OP_COMPRESS;
    req.codec = GPUCOMP__CODEC__CODEC_RLE;
    req.total_size = total;
    uint8_t one = 0;
    req.payload.data = &one;
    req.payload.len = 1;
    raw_send_request(fd, &req);
    return fd;
}

START_TEST(test_declared_sizes_do_not_lock_others_out)
{
    const char *args[] = { "--memory-budget=64M", "--user-memory-share=100", "--request-timeout=1", NULL };
    start(args);
    int attackers[5];
    for (int i = 0; i < 5; i++)
        attackers[i] = half_request(40u << 20);
    test_sleep_ms(200);
    /* A new client gets its Welcome (hello() fails the test otherwise) and is served. */
    double t0 = test_now_s();
    assert_daemon_serves();
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    uint8_t *data = short_runs(1 << 20);
    void *packed = NULL;
    size_t packed_len = 0;
    int rc = gpucomp_compress(c, &o, data, 1 << 20, &packed, &packed_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
    ck_assert_msg(test_now_s() - t0 < 8, "served only after %.1f s", test_now_s() - t0);
    /* The stalled requests time out one after another (each is admitted as
     * memory frees up; time spent waiting for the daemon does not count). */
    gpucomp_stats st;
    for (int i = 0; i < 150; i++) {
        ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
        if (st.memory_in_use < (1u << 20))
            break;
        test_sleep_ms(100);
    }
    ck_assert_msg(st.memory_in_use < (1u << 20), "%llu bytes still held after the timeouts",
                  (unsigned long long)st.memory_in_use);
    for (int i = 0; i < 5; i++) {
        uint8_t buf[256];
        ssize_t n;
        while ((n = read(attackers[i], buf, sizeof buf)) > 0) /* the timeout's error frame */
            ;
        ck_assert_msg(n == 0, "attacker %d: connection not closed by the timeout", i);
        close(attackers[i]);
    }
    gpucomp_close(c);
    gpucomp_free(packed);
    free(data);
}
END_TEST

START_TEST(test_vanished_attacker_frees_its_budget)
{
    const char *args[] = { "--memory-budget=64M", "--user-memory-share=100", NULL };
    start(args);
    int attackers[5];
    for (int i = 0; i < 5; i++)
        attackers[i] = half_request(40u << 20);
    for (int i = 0; i < 5; i++)
        close(attackers[i]);
    test_sleep_ms(300);
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_msg(st.memory_in_use < (1u << 20), "%llu bytes still held after the attackers left",
                  (unsigned long long)st.memory_in_use);
    gpucomp_close(c);
}
END_TEST

/* ---- 5. outputs inside the budget: decompression bombs ------------------ */

/* Forget the daemon's peak RSS so far (Linux: "5" to clear_refs), so that
 * VmHWM measures only what comes after. */
static void reset_daemon_peak(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)dut.pid);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs("5", f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

static uint64_t daemon_rss_kib(const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)dut.pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    uint64_t kib = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0)
            kib = strtoull(line + n + 1, NULL, 10);
    fclose(f);
    return kib;
}

START_TEST(test_rle_bombs_stay_in_the_budget)
{
    const char *args[] = { "--memory-budget=256M", "--workers=2", NULL };
    start_for_rss(args);
    size_t bomb = 64u << 20, frame_len;
    uint8_t *zeros = calloc(bomb, 1);
    ck_assert_ptr_nonnull(zeros);
    void *frame = rle_frame_of(zeros, bomb, 0, &frame_len);
    free(zeros);
    ck_assert_uint_lt(frame_len, 64 << 10);
    int sock = hello(); /* never reads its answers */
    for (int i = 0; i < 32; i++)
        send_inline(sock, (uint64_t)i + 1, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, frame,
                    frame_len);
    test_sleep_ms(3000);
    uint64_t peak = daemon_rss_kib("VmHWM:");
    fprintf(stderr, "  32 bombs of 64 MiB, budget 256 MiB: peak RSS %llu MiB\n", (unsigned long long)(peak >> 10));
    ck_assert_msg(peak < (256u + 160u) << 10, "peak RSS %llu KiB: outputs are outside the budget",
                  (unsigned long long)peak);
    assert_daemon_serves();
    close(sock);
    gpucomp_free(frame);
}
END_TEST

START_TEST(test_bzip2_bombs_stay_in_the_budget)
{
    const char *args[] = { "--memory-budget=192M", "--workers=2", "--codec-threads=2", NULL };
    start_for_rss(args);
    size_t bomb = 128u << 20;
    uint8_t *zeros = calloc(bomb, 1);
    ck_assert_ptr_nonnull(zeros);
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    void *bz = NULL;
    size_t bz_len = 0;
    ck_assert_int_eq(gpucomp_compress(c, &o, zeros, bomb, &bz, &bz_len), GPUCOMP_OK);
    gpucomp_close(c);
    free(zeros);
    /* the bombs' peak, not the compression that made them (its input alone is
     * 128 MiB, within the budget but near the bound under a loaded CI) */
    reset_daemon_peak();
    int sock = hello(); /* never reads its answers */
    for (int i = 0; i < 8; i++)
        send_inline(sock, (uint64_t)i + 1, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, bz, bz_len);
    test_sleep_ms(6000);
    uint64_t peak = daemon_rss_kib("VmHWM:");
    fprintf(stderr, "  8 bzip2 bombs of 128 MiB, budget 192 MiB: peak RSS %llu MiB\n",
            (unsigned long long)(peak >> 10));
    /* the budget, and what SECURITY.md lets the decoder hold outside it: the blocks it decodes
     * ahead of its walk (a bomb's block decodes to 46 MB under bzip2's block rule) */
    ck_assert_msg(peak < (192u + 256u) << 10, "peak RSS %llu KiB: bzip2 output is outside the budget",
                  (unsigned long long)peak);
    assert_daemon_serves();
    close(sock);
    gpucomp_free(bz);
}
END_TEST

/* ---- 6. REGISTER checks its limit before mapping anything --------------- */

START_TEST(test_register_limit_checked_before_mapping)
{
    const char *args[] = { "--register-limit=16M", NULL };
    start_for_rss(args);
    int mfd = gc_memfd_create("sparse");
    ck_assert_int_ge(mfd, 0);
    ck_assert_int_eq(ftruncate(mfd, 1ll << 30), 0); /* sparse: no pages until touched */
    int sock = hello();
    Gpucomp__Request req = fd_request(1, GPUCOMP__OP__OP_REGISTER, GPUCOMP__CODEC__CODEC_UNSPECIFIED, 1ull << 30);
    raw_send_request_fds(sock, &req, &mfd, 1);
    Gpucomp__Frame *f = response_to(sock, 1);
    ck_assert_msg(f != NULL, "no answer (the daemon died)");
    ck_assert_int_eq(f->response->status, GC_E_LIMIT);
    gc_wire_free(f);
    uint64_t peak = daemon_rss_kib("VmHWM:");
    fprintf(stderr, "  REGISTER of a sparse 1 GiB memfd over the limit: peak RSS %llu MiB\n",
            (unsigned long long)(peak >> 10));
    ck_assert_msg(peak < 200u << 10, "peak RSS %llu KiB: the file was populated before the limit check",
                  (unsigned long long)peak);
    close(sock);
    close(mfd);
    assert_daemon_serves();
}
END_TEST

/* ---- 8. refused requests that never end (tombstones) --------------------- */

START_TEST(test_refused_requests_are_bounded)
{
    start(NULL);
    int sock = hello();
    for (int i = 0; i < 2000; i++) {
        Gpucomp__Request req = GPUCOMP__REQUEST__INIT;
        req.id = (uint64_t)i + 1;
        req.op = GPUCOMP__OP__OP_COMPRESS;
        req.codec = (Gpucomp__Codec)77; /* refused, and more frames announced */
        req.total_size = 10;
        req.last = 0;
        Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
        fr.body_case = GPUCOMP__FRAME__BODY_REQUEST;
        fr.request = &req;
        uint8_t buf[64];
        size_t n = gc_wire_packed_size(&fr);
        ck_assert_uint_le(n, sizeof buf);
        gc_wire_pack(&fr, buf);
        if (send(sock, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
            break; /* closed by the daemon: expected */
    }
    unsigned answers = 0;
    Gpucomp__Frame *f;
    while ((f = raw_recv(sock, 1 << 20)) != NULL) {
        answers++;
        gc_wire_free(f);
    }
    ck_assert_msg(answers <= 70, "%u refusals answered: tombstones are not capped", answers);
    close(sock);
    assert_daemon_serves();
}
END_TEST

/* ---- 10. five descriptors in one message --------------------------------- */

START_TEST(test_five_descriptors_keep_the_connection)
{
    start(NULL);
    int sock = hello();
    int fds[5];
    for (int i = 0; i < 5; i++)
        fds[i] = gc_memfd_create("extra");
    Gpucomp__Request ping = GPUCOMP__REQUEST__INIT;
    ping.id = 7;
    ping.op = GPUCOMP__OP__OP_PING;
    ping.last = 1;
    Gpucomp__Frame fr = GPUCOMP__FRAME__INIT;
    fr.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    fr.request = &ping;
    uint8_t buf[64];
    size_t n = gc_wire_pack(&fr, buf);
    /* gc_fdpass_send attaches at most GC_FDPASS_MAX: build this message by hand */
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof fds)];
    } control;
    struct iovec iov = { buf, n };
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space, .msg_controllen = sizeof control.space
    };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    ck_assert_int_eq(sendmsg(sock, &msg, MSG_NOSIGNAL), (ssize_t)n);
    Gpucomp__Frame *f = response_to(sock, 7);
    ck_assert_msg(f != NULL, "connection closed for 5 descriptors (the documented limit is 16)");
    ck_assert_int_eq(f->response->status, GC_OK);
    gc_wire_free(f);
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    close(sock);
}
END_TEST

/* Descriptors that came with a frame starting no request are not handed to the next one. */
START_TEST(test_stray_descriptors_are_not_reused)
{
    start(NULL);
    int sock = hello();
    int stray[2] = { gc_memfd_create("stray-in"), gc_memfd_create("stray-out") };
    Gpucomp__Request bad = fd_request(0, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, 0);
    raw_send_request_fds(sock, &bad, stray, 2); /* id 0: refused */
    Gpucomp__Frame *f = response_to(sock, 0);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->response->status, GC_E_PROTOCOL);
    gc_wire_free(f);
    size_t len = 64 << 10;
    uint8_t *data = short_runs(len);
    int fds[2] = { memfd_with(data, len), gc_memfd_create("out") };
    Gpucomp__Request req = fd_request(5, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, len);
    raw_send_request_fds(sock, &req, fds, 2);
    f = response_to(sock, 5);
    ck_assert_ptr_nonnull(f);
    ck_assert_msg((int)f->response->status == GC_OK, "%s", f->response->message);
    struct stat out_st, stray_st;
    ck_assert_int_eq(fstat(fds[1], &out_st), 0);
    ck_assert_int_eq(fstat(stray[1], &stray_st), 0);
    ck_assert_msg(out_st.st_size >= (off_t)f->response->total_size && stray_st.st_size == 0,
                  "the output went to the stray descriptor (%lld bytes there, %lld in the request's)",
                  (long long)stray_st.st_size, (long long)out_st.st_size);
    gc_wire_free(f);
    for (int i = 0; i < 2; i++)
        close(stray[i]), close(fds[i]);
    close(sock);
    free(data);
}
END_TEST

/*
 * A frame that names descriptors it does not carry must not take the next
 * frame's. Found by check_wire_chaos: a stream's first frame naming an
 * output ring it did not send was given the ring the next frame carried.
 * The daemon matched descriptors to frames by the order of its queue, and
 * one read of the socket can bring both frames and the second's
 * descriptors. Unread answers (over the per-connection limit) keep the
 * daemon from reading while both frames queue, so that one read takes them.
 */
START_TEST(test_descriptors_go_with_their_frame)
{
    start(NULL);
    size_t bomb = 80u << 20, frame_len;
    uint8_t *zeros = calloc(1, bomb);
    ck_assert_ptr_nonnull(zeros);
    void *frame = rle_frame_of(zeros, bomb, 0, &frame_len);
    int sock = hello();
    send_inline(sock, 1, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_RLE, frame, frame_len);
    struct pollfd p = { sock, POLLIN, 0 };
    ck_assert_int_eq(poll(&p, 1, 30000), 1); /* the answer is queued: the daemon reads this socket no more */
    size_t len = 64 << 10;
    uint8_t *data = short_runs(len);
    Gpucomp__Request liar = fd_request(3, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, len);
    raw_send_request(sock, &liar); /* names two descriptors, carries none */
    int fds[2] = { memfd_with(data, len), gc_memfd_create("out") };
    Gpucomp__Request req = fd_request(4, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, len);
    raw_send_request_fds(sock, &req, fds, 2);
    int status[5] = { -1, -1, -1, -1, -1 };
    while (status[3] < 0 || status[4] < 0) {
        Gpucomp__Frame *f = raw_recv(sock, 64u << 20);
        ck_assert_msg(f != NULL, "the connection ended before both answers");
        if (f->body_case == GPUCOMP__FRAME__BODY_RESPONSE && f->response->last && f->response->id < 5)
            status[f->response->id] = (int)f->response->status;
        gc_wire_free(f);
    }
    ck_assert_msg(status[3] == GC_E_PROTOCOL && status[4] == GC_OK,
                  "the frame without descriptors was answered %d, the one with them %d", status[3], status[4]);
    for (int i = 0; i < 2; i++)
        close(fds[i]);
    close(sock);
    free(data);
    gpucomp_free(frame);
    free(zeros);
}
END_TEST

/* ---- one user cannot starve another ---------------------------------------- */

START_TEST(test_one_user_cannot_starve_another)
{
    if (geteuid() != 0) {
        fprintf(stderr, "  not root: cannot connect as a second user here, test not run\n");
        return;
    }
    const char *args[] = { "--memory-budget=64M", "--user-memory-share=50", "--allow-users=*",
                           "--request-timeout=60", NULL };
    start(args);
    ck_assert_int_eq(chmod(dut.dir, 0755), 0);
    ck_assert_int_eq(chmod(dut.socket_path, 0666), 0);
    int stalled[3];
    for (int i = 0; i < 3; i++) /* root: 20 MiB admitted and silent, two more waiting */
        stalled[i] = half_request(20u << 20);
    test_sleep_ms(200);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) { /* nobody: an 8 MiB compress over the socket */
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        gpucomp_client *c = NULL;
        if (gpucomp_connect(dut.socket_path, &c) != GPUCOMP_OK)
            _exit(4);
        size_t len = 8u << 20;
        uint8_t *data = malloc(len);
        fill_test_data(data, len, 1, 5);
        gpucomp_options o;
        gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
        void *packed = NULL;
        size_t packed_len;
        setenv("GPUCOMP_MEMFD_THRESHOLD", "1G", 1); /* over the socket: its input is charged too */
        _exit(gpucomp_compress(c, &o, data, len, &packed, &packed_len) == GPUCOMP_OK ? 0 : 5);
    }
    double t0 = test_now_s();
    int status = 0;
    while (waitpid(child, &status, WNOHANG) == 0 && test_now_s() - t0 < 10)
        test_sleep_ms(20);
    if (test_now_s() - t0 >= 10) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        ck_abort_msg("the second user waited 10 s behind the first user's stalled requests");
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "second user: exit status 0x%x", status);
    fprintf(stderr, "  second user served in %.2f s while the first holds its share\n", test_now_s() - t0);
    for (int i = 0; i < 3; i++)
        close(stalled[i]);
}
END_TEST

/* ---- a client that does not read its answers gets no more work run ---------- */

typedef struct sender {
    int sock;
    const uint8_t *data;
    size_t len;
    int count;
} sender;

/* Send every request, blocking as the daemon's backpressure says (the reader is elsewhere). */
static void *send_bzip2_requests(void *arg)
{
    sender *s = arg;
    for (int i = 0; i < s->count; i++)
        send_inline(s->sock, (uint64_t)i + 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, s->data,
                    s->len);
    return NULL;
}

START_TEST(test_non_reader_gets_no_more_work)
{
    const char *args[] = { "--memory-budget=64M", "--user-memory-share=50", "--workers=2", NULL };
    start_for_rss(args);
    size_t len = 4u << 20;
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 0, 9); /* random: bzip2 output as large as the input */
    sender snd = { .sock = hello(), .data = data, .len = len, .count = 24 };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, send_bzip2_requests, &snd), 0);
    /* Nobody reads snd.sock for 4 s; the stats come from another client of the same user. */
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    uint64_t most = 0;
    for (int i = 0; i < 40; i++) {
        gpucomp_stats st;
        ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
        most = st.memory_in_use > most ? st.memory_in_use : most;
        test_sleep_ms(100);
    }
    gpucomp_close(c);
    fprintf(stderr, "  24 x 4 MiB bzip2 answers not read, share 32 MiB: at most %.1f MiB held\n",
            (double)most / (1 << 20));
    ck_assert_msg(most <= (33u << 20), "%llu bytes held for one user, over its 32 MiB share",
                  (unsigned long long)most);
    unsigned ok = 0, limit = 0, done = 0;
    while (done < 24) { /* answers may come in any order, large ones in several frames */
        Gpucomp__Frame *f = raw_recv(snd.sock, 64u << 20);
        ck_assert_msg(f != NULL, "connection ended after %u of 24 answers", done);
        if (f->body_case == GPUCOMP__FRAME__BODY_RESPONSE && f->response->last && f->response->id) {
            done++;
            ok += (int)f->response->status == GC_OK;
            limit += (int)f->response->status == GC_E_LIMIT;
        }
        gc_wire_free(f);
    }
    pthread_join(t, NULL);
    fprintf(stderr, "  then read: %u answered OK, %u refused with LIMIT\n", ok, limit);
    ck_assert_uint_eq(ok + limit, 24);
    ck_assert_msg(limit > 0, "every request ran although its user's share was full of unread answers");
    close(snd.sock);
    free(data);
}
END_TEST

/* ---- timeouts: slow frames and idle connections -------------------------- */

START_TEST(test_slow_frame_and_idle_timeouts)
{
    const char *args[] = { "--request-timeout=1", "--idle-timeout=2", NULL };
    start(args);
    int slow = hello(), idle = hello();
    uint8_t header[4] = { 100, 0, 0, 0 }; /* a 100-byte frame that never comes */
    ck_assert_int_eq(send(slow, header, 4, MSG_NOSIGNAL), 4);
    ck_assert_int_eq(send(slow, header, 1, MSG_NOSIGNAL), 1);
    double t0 = test_now_s();
    uint8_t buf[512];
    while (read(slow, buf, sizeof buf) > 0)
        ;
    double slow_s = test_now_s() - t0;
    while (read(idle, buf, sizeof buf) > 0)
        ;
    double idle_s = test_now_s() - t0;
    ck_assert_msg(slow_s < 4, "slow frame held the connection for %.1f s", slow_s);
    ck_assert_msg(idle_s < 5, "idle connection held for %.1f s", idle_s);
    close(slow);
    close(idle);
    assert_daemon_serves();
}
END_TEST

/* ---- a vanished client's long request is cancelled ----------------------- */

static double daemon_cpu_s(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)dut.pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    ck_assert_ptr_nonnull(p);
    unsigned long utime = 0, stime = 0;
    /* fields after ")": state(3) ... utime(14) stime(15) */
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime), 2);
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

START_TEST(test_vanished_client_work_is_cancelled)
{
    /* One worker, one codec thread: a job left running would hold the only worker. */
    const char *args[] = { "--workers=1", "--codec-threads=1", NULL };
    start(args);
    size_t len = 96u << 20; /* about 3 s of bzip2 on one fast thread; one block is milliseconds */
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, 2, 3);
    int in = memfd_with(data, len), out = gc_memfd_create("out");
    int sock = hello();
    Gpucomp__Request req = fd_request(1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, len);
    int fds[2] = { in, out };
    raw_send_request_fds(sock, &req, fds, 2);
    test_sleep_ms(500); /* it is running */
    close(sock);
    close(in);
    close(out);
    double t0 = test_now_s(), cpu0 = daemon_cpu_s();
    gpucomp_client *c = NULL;
    ck_assert_int_eq(gpucomp_connect(dut.socket_path, &c), GPUCOMP_OK);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    void *packed = NULL;
    size_t packed_len = 0;
    ck_assert_int_eq(gpucomp_compress(c, &o, data, 4096, &packed, &packed_len), GPUCOMP_OK);
    double waited = test_now_s() - t0;
    fprintf(stderr, "  next request on the only worker after its client left: %.2f s (%.2f s of daemon CPU)\n",
            waited, daemon_cpu_s() - cpu0);
    ck_assert_msg(waited < 1, "the next request waited %.1f s: the abandoned job ran on", waited);
    gpucomp_free(packed);
    gpucomp_close(c);
    free(data);
}
END_TEST

static Suite *hostile_suite(void)
{
    Suite *s = suite_create("hostile");
    TCase *mem = tcase_create("client memory");
    tcase_add_checked_fixture(mem, NULL, teardown);
    tcase_set_timeout(mem, 120);
    tcase_add_test(mem, test_same_memfd_in_and_out);
    tcase_add_test(mem, test_input_changing_under_rle_decode);
    tcase_add_test(mem, test_input_changing_under_rle_encode);
    tcase_add_test(mem, test_input_changing_under_bzip2);
    tcase_add_test(mem, test_output_memfd_shrunk_while_used);
    tcase_add_test(mem, test_hugetlb_memfd_refused);
    tcase_add_test(mem, test_register_limit_checked_before_mapping);
    suite_add_tcase(s, mem);

    TCase *res = tcase_create("resources");
    tcase_add_checked_fixture(res, NULL, teardown);
    tcase_set_timeout(res, 120);
    tcase_add_test(res, test_declared_sizes_do_not_lock_others_out);
    tcase_add_test(res, test_vanished_attacker_frees_its_budget);
    tcase_add_test(res, test_rle_bombs_stay_in_the_budget);
    tcase_add_test(res, test_bzip2_bombs_stay_in_the_budget);
    tcase_add_test(res, test_refused_requests_are_bounded);
    tcase_add_test(res, test_five_descriptors_keep_the_connection);
    tcase_add_test(res, test_stray_descriptors_are_not_reused);
    tcase_add_test(res, test_descriptors_go_with_their_frame);
    tcase_add_test(res, test_one_user_cannot_starve_another);
    tcase_add_test(res, test_non_reader_gets_no_more_work);
    tcase_add_test(res, test_slow_frame_and_idle_timeouts);
    tcase_add_test(res, test_vanished_client_work_is_cancelled);
    suite_add_tcase(s, res);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(hostile_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
