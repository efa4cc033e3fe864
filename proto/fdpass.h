/*
 * fdpass.h - file descriptors over the Unix socket (SCM_RIGHTS), for the
 * zero-copy memfd transport. Shared by the daemon and the client library.
 */
#ifndef GC_FDPASS_H
#define GC_FDPASS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "gc_status.h"

#define GC_FDPASS_MAX 4 /* most descriptors one message sent by gc_fdpass_send carries */
/* Most descriptors one received message may carry (the daemon's limit on unclaimed ones). */
#define GC_FDPASS_RECV_MAX 16

/*
 * Send all of buf on a blocking socket, attaching n_fds descriptors to its
 * first byte. Retries on EINTR and partial writes; never raises SIGPIPE.
 */
int gc_fdpass_send(int sock, const void *buf, size_t len, const int *fds, unsigned n_fds, gc_error *err);

/*
 * One recvmsg of up to len bytes. Descriptors that arrive are appended to
 * fds[*n_fds .. cap); any beyond cap are closed and *overflow is set.
 * Returns bytes read, 0 at EOF, -1 with errno set on error.
 */
ssize_t gc_fdpass_recv(int sock, void *buf, size_t len, int *fds, unsigned *n_fds, unsigned cap, bool *overflow);

/* A sealable memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING), or -1 with errno. */
int gc_memfd_create(const char *name);

#endif
