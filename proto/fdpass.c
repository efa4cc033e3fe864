/* fdpass.c - SCM_RIGHTS send/receive and memfd creation (see fdpass.h). */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

int gc_fdpass_send(int sock, const void *buf, size_t len, const int *fds, unsigned n_fds, gc_error *err)
{
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * GC_FDPASS_MAX)];
    } control;
    if (n_fds > GC_FDPASS_MAX)
        return gc_fail(err, GC_E_INVALID, "too many descriptors (%u) for one message", n_fds);
    const char *p = buf;
    size_t left = len;
    bool fds_sent = n_fds == 0;
    while (left > 0) {
        struct iovec iov = { (void *)p, left };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (!fds_sent) {
            memset(&control, 0, sizeof control);
            msg.msg_control = control.space;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
            struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
            memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        }
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return gc_fail(err, GC_E_IO, "send to gpucompd failed: %s", strerror(errno));
        fds_sent = true;
        p += n;
        left -= (size_t)n;
    }
    return GC_OK;
}

static void take_fds(struct msghdr *msg, int *fds, unsigned *n_fds, unsigned cap, bool *overflow)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
            if (*n_fds < cap) {
                fds[(*n_fds)++] = fd;
            } else {
                close(fd);
                *overflow = true;
            }
        }
    }
}

ssize_t gc_fdpass_recv(int sock, void *buf, size_t len, int *fds, unsigned *n_fds, unsigned cap, bool *overflow)
{
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * GC_FDPASS_RECV_MAX)];
    } control;
    struct iovec iov = { buf, len };
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space, .msg_controllen = sizeof control.space
    };
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n >= 0) {
        take_fds(&msg, fds, n_fds, cap, overflow);
        if (msg.msg_flags & MSG_CTRUNC)
            *overflow = true; /* the kernel closed what did not fit */
    }
    return n;
}

int gc_memfd_create(const char *name)
{
    return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
}
