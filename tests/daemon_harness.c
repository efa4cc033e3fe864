/* daemon_harness.c - see daemon_harness.h. */
#include "daemon_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "fdpass.h"
#include "wire.h"

/* The daemon last started, so that a failed send can say whether it died. */
static pid_t last_daemon_pid;

/* What became of the last daemon, without reaping it (test_daemon_stop does). */
static const char *daemon_state(char *buf, size_t n)
{
    siginfo_t si = { 0 };
    if (last_daemon_pid <= 0 || waitid(P_PID, (id_t)last_daemon_pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return "no daemon to ask";
    if (si.si_pid == 0)
        return "the daemon is still running";
    if (si.si_code == CLD_EXITED)
        snprintf(buf, n, "the daemon exited with status %d", si.si_status);
    else
        snprintf(buf, n, "the daemon died of signal %d", si.si_status);
    return buf;
}

void test_sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

double test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int raw_connect(const char *socket_path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    strncpy(addr.sun_path, socket_path, sizeof addr.sun_path - 1);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

void test_daemon_start(test_daemon *d, const char *const *extra_args)
{
    const char *bin = getenv("GPUCOMPD");
    ck_assert_msg(bin != NULL, "GPUCOMPD (path of the daemon binary) is not set");
    strcpy(d->dir, "/tmp/gpucomp-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->dir));
    snprintf(d->socket_path, sizeof d->socket_path, "%s/sock", d->dir);
    if (d->capture_log)
        snprintf(d->log_path, sizeof d->log_path, "%s/daemon.log", d->dir);

    const char *argv[32] = { bin, "--socket", d->socket_path, "--log-level", "warning" };
    size_t argc = 5;
    for (size_t i = 0; extra_args && extra_args[i] && argc < 31; i++)
        argv[argc++] = extra_args[i];
    argv[argc] = NULL;
    d->pid = fork();
    ck_assert_int_ge(d->pid, 0);
    if (d->pid == 0) {
        if (d->nofile_limit > 0) {
            struct rlimit rl = { (rlim_t)d->nofile_limit, (rlim_t)d->nofile_limit };
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
                _exit(126);
        }
        if (d->capture_log) {
            int log = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (log < 0 || dup2(log, STDERR_FILENO) < 0)
                _exit(126);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    last_daemon_pid = d->pid;
    for (int i = 0; i < 1000; i++) { /* up to 10 s, for sanitizer builds */
        int fd = raw_connect(d->socket_path);
        if (fd >= 0) {
            close(fd);
            return;
        }
        int status;
        ck_assert_msg(waitpid(d->pid, &status, WNOHANG) == 0, "gpucompd exited during startup");
        test_sleep_ms(10);
    }
    ck_abort_msg("gpucompd did not start listening on %s", d->socket_path);
}

int test_daemon_stop(test_daemon *d)
{
    if (d->pid <= 0)
        return -1;
    kill(d->pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < 3000; i++) {
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        test_sleep_ms(10);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &status, 0);
    d->pid = 0;
    return -1;
}

void test_daemon_cleanup(test_daemon *d)
{
    if (d->pid > 0)
        test_daemon_stop(d);
    if (d->dir[0])
        run_shell("rm -rf '%s'", d->dir);
}

static void write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = errno;
            char state[64];
            ck_abort_msg("send failed: %s (%s)", strerror(e), daemon_state(state, sizeof state));
        }
        p += n;
        len -= (size_t)n;
    }
}

static int read_all(int fd, void *data, size_t len)
{
    uint8_t *p = data;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void raw_send_body(int fd, const void *body, size_t len)
{
    uint8_t hdr[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
    write_all(fd, hdr, 4);
    write_all(fd, body, len);
}

static void send_frame(int fd, const Gpucomp__Frame *f)
{
    size_t size = gc_wire_packed_size(f);
    uint8_t *buf = malloc(size);
    ck_assert_ptr_nonnull(buf);
    gc_wire_pack(f, buf);
    write_all(fd, buf, size);
    free(buf);
}

void raw_send_request(int fd, const Gpucomp__Request *req)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = (Gpucomp__Request *)req;
    send_frame(fd, &f);
}

uint8_t *raw_pack_request(const Gpucomp__Request *req, size_t *len)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = (Gpucomp__Request *)req;
    *len = gc_wire_packed_size(&f);
    uint8_t *buf = malloc(*len);
    ck_assert_ptr_nonnull(buf);
    gc_wire_pack(&f, buf);
    return buf;
}

static int send_request_fds(int fd, const Gpucomp__Request *req, const int *fds, unsigned n_fds, gc_error *err)
{
    size_t size;
    uint8_t *buf = raw_pack_request(req, &size);
    int rc = gc_fdpass_send(fd, buf, size, fds, n_fds, err);
    free(buf);
    return rc;
}

void raw_send_request_fds(int fd, const Gpucomp__Request *req, const int *fds, unsigned n_fds)
{
    gc_error err = { 0 };
    ck_assert_msg(send_request_fds(fd, req, fds, n_fds, &err) == GC_OK, "send: %s", err.msg);
}

int raw_try_send_request_fds(int fd, const Gpucomp__Request *req, const int *fds, unsigned n_fds)
{
    gc_error err = { 0 };
    return send_request_fds(fd, req, fds, n_fds, &err) == GC_OK ? 0 : -1;
}

Gpucomp__Frame *raw_hello(int fd, uint32_t version)
{
    Gpucomp__Hello h = GPUCOMP__HELLO__INIT;
    h.protocol_version = version;
    h.client_name = (char *)"check_daemon";
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_HELLO;
    f.hello = &h;
    send_frame(fd, &f);
    return raw_recv(fd, 1 << 20);
}

Gpucomp__Frame *raw_recv(int fd, size_t max_len)
{
    uint8_t hdr[4];
    if (read_all(fd, hdr, 4) != 0)
        return NULL;
    uint32_t len = gc_wire_body_len(hdr);
    if (len > max_len)
        return NULL;
    uint8_t *body = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(body);
    Gpucomp__Frame *f = NULL;
    if (read_all(fd, body, len) == 0)
        f = gc_wire_unpack(body, len, NULL);
    free(body);
    return f;
}

static uint64_t next_random(uint64_t *s)
{
    /* splitmix64: deterministic, fast, good enough for test data */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fill_test_data(uint8_t *buf, size_t len, int kind, uint64_t seed)
{
    static const char *const words[] = { "the ",   "gpu ", "compress ", "daemon ", "stream ",
                                         "block ", "of ",  "data\n",    "and ",    "bzip2 " };
    size_t i = 0;
    while (i < len) {
        uint64_t r = next_random(&seed);
        if (kind == 0) {
            for (int k = 0; k < 8 && i < len; k++)
                buf[i++] = (uint8_t)(r >> (8 * k));
        } else if (kind == 1) {
            size_t run = 1 + (r % 16);
            for (size_t k = 0; k < run && i < len; k++)
                buf[i++] = (uint8_t)(r >> 32);
        } else {
            const char *w = words[r % 10];
            for (size_t k = 0; w[k] && i < len; k++)
                buf[i++] = (uint8_t)w[k];
        }
    }
}

int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(data, 1, len, f);
    return fclose(f) == 0 && n == len ? 0 : -1;
}

uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return buf;
}

int run_shell(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int status = system(cmd);
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
