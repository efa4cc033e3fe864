/*
 * daemon_harness.h - start a real gpucompd for integration tests, and speak
 * raw protocol frames to it (for the malformed-input cases the client
 * library would never send).
 */
#ifndef GC_DAEMON_HARNESS_H
#define GC_DAEMON_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/gpucomp.pb-c.h"

typedef struct test_daemon {
    pid_t pid;
    char dir[64]; /* private temporary directory */
    char socket_path[108];
    /* Optional, set before test_daemon_start: */
    long nofile_limit; /* > 0: the daemon's RLIMIT_NOFILE, soft and hard */
    int capture_log;   /* nonzero: the daemon's stderr goes to log_path (in dir) */
    char log_path[128];
} test_daemon;

/* Start $GPUCOMPD on a fresh socket with extra args (NULL-terminated); wait until it answers. */
void test_daemon_start(test_daemon *d, const char *const *extra_args);

/* SIGTERM and wait; returns the exit status (or -1 if it had to be killed). */
int test_daemon_stop(test_daemon *d);

/* Remove the temporary directory and anything in it. */
void test_daemon_cleanup(test_daemon *d);

/* Connected raw socket (no handshake), or -1. */
/* Sleep ms milliseconds; the monotonic clock in seconds (for deadlines and durations). */
void test_sleep_ms(unsigned ms);
double test_now_s(void);

int raw_connect(const char *socket_path);

/* Send a Hello with the given version; returns the Welcome frame (caller frees). */
Gpucomp__Frame *raw_hello(int fd, uint32_t version);

/* Send bytes as one frame body (length prefix added). */
void raw_send_body(int fd, const void *body, size_t len);

/* Send a Request frame. */
void raw_send_request(int fd, const Gpucomp__Request *req);

/* Send a Request frame with n_fds descriptors attached (SCM_RIGHTS; n_fds may be 0). */
void raw_send_request_fds(int fd, const Gpucomp__Request *req, const int *fds, unsigned n_fds);

/* The same, but a send that fails (the daemon closed, or stopped reading for longer than
 * the socket's SO_SNDTIMEO) returns -1 instead of failing the test; 0 when all was sent. */
int raw_try_send_request_fds(int fd, const Gpucomp__Request *req, const int *fds, unsigned n_fds);

/* req packed as one Request frame, header included (malloc'd; *len its bytes). */
uint8_t *raw_pack_request(const Gpucomp__Request *req, size_t *len);

/* Receive one frame (NULL on EOF, error or a frame over max_len). */
Gpucomp__Frame *raw_recv(int fd, size_t max_len);

/* Deterministic test data: kind 0 random, 1 short runs, 2 text-like. */
void fill_test_data(uint8_t *buf, size_t len, int kind, uint64_t seed);

/* Write a file; returns 0 on success. */
int write_file(const char *path, const void *data, size_t len);

/* Read a whole file (malloc'd) or NULL. */
uint8_t *read_file(const char *path, size_t *len);

/* Run a shell command line, returning its exit status (-1 if it did not exit). */
int run_shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
