/*
 * client_io.h - blocking whole-frame I/O on the client's socket.
 *
 * The client library is synchronous: it writes a request's frames, then
 * reads the response's frames. These helpers hide the socket details that
 * every caller would otherwise get wrong: EINTR, short writes, SIGPIPE (a
 * daemon that dies must never kill the user's program) and length headers
 * that claim more than the receiver is willing to allocate.
 */
#ifndef GPUCOMP_CLIENT_IO_H
#define GPUCOMP_CLIENT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/*
 * Returned by client_io_send_frame (never a gc_status value) when
 * stop_on_input is set and the daemon has something to say before the frame
 * is fully written. While a request is being sent the daemon only speaks to
 * refuse it, so the caller stops sending and reads that answer instead of
 * blocking on a daemon that may no longer read.
 */
#define CLIENT_IO_INPUT_PENDING (-1)

/*
 * Serialize f and write it as one frame. Fails with GC_E_INTERNAL if the
 * body would exceed max_body (a bug in the caller's chunking), GC_E_NOMEM
 * or GC_E_IO; see CLIENT_IO_INPUT_PENDING for stop_on_input.
 */
int client_io_send_frame(int fd, const Gpucomp__Frame *f, uint32_t max_body, bool stop_on_input, gc_error *err);

/*
 * Send f as one frame with n_fds descriptors attached (SCM_RIGHTS, through
 * proto/fdpass.h), for the memfd transport. The frame is small (no
 * payload), so a plain blocking send is enough.
 */
int client_io_send_frame_fds(int fd, const Gpucomp__Frame *f, uint32_t max_body, const int *fds, unsigned n_fds,
                             gc_error *err);

/*
 * Read one frame. A header announcing more than max_body bytes is rejected
 * (GC_E_LIMIT) before anything is allocated. GC_E_IO when the daemon closes
 * the connection or the read fails, GC_E_PROTOCOL for bytes that do not
 * parse. On success *out is freed by the caller with gc_wire_free.
 */
int client_io_recv_frame(int fd, uint32_t max_body, Gpucomp__Frame **out, gc_error *err);

/*
 * Time limits (gpucomp_set_timeout): the same three calls, failing with
 * GC_E_IO ("gpucompd sent nothing for N ms" reading, "gpucompd took nothing
 * for N ms" writing) when no byte moves for timeout_ms milliseconds. 0 waits
 * forever, as the calls above do. The caller closes the connection after a
 * timeout: the socket may be in the middle of a frame.
 */
int client_io_send_frame_timed(int fd, const Gpucomp__Frame *f, uint32_t max_body, bool stop_on_input,
                               unsigned timeout_ms, gc_error *err);
int client_io_send_frame_fds_timed(int fd, const Gpucomp__Frame *f, uint32_t max_body, const int *fds,
                                   unsigned n_fds, unsigned timeout_ms, gc_error *err);
int client_io_recv_frame_timed(int fd, uint32_t max_body, Gpucomp__Frame **out, unsigned timeout_ms,
                               gc_error *err);

/* True if err is a time limit's failure (not worth resending the request). */
bool client_io_timed_out(const gc_error *err);

/* True if the daemon has sent something (or closed) that has not been read. */
bool client_io_input_pending(int fd);

/*
 * Reconnection (client_connect.c): open c->path again and redo the
 * handshake into the same client, whose socket is closed; the handshake
 * waits c->timeout_ms, or 2 s with none set. On failure c->fd stays -1 and err says why.
 */
struct gpucomp_client;
int client_reopen(struct gpucomp_client *c, gc_error *err);

#endif
