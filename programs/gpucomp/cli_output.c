/* cli_output.c - temporary file, metadata, atomic rename (cli_output.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli_output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The one temporary file that exists at a time, for the signal handler.
 * The path is written while unarmed, so the handler never reads half of it.
 */
static char cleanup_path[PATH_MAX];
static volatile sig_atomic_t cleanup_armed;

static void on_fatal_signal(int sig)
{
    if (cleanup_armed)
        unlink(cleanup_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_output_install_signals(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa = { .sa_handler = on_fatal_signal };
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

static void arm_cleanup(const char *path)
{
    cleanup_armed = 0;
    if (strlen(path) < sizeof cleanup_path) {
        strcpy(cleanup_path, path);
        cleanup_armed = 1;
    }
}

/* "dir/.base.XXXXXX" for final "dir/base", or "dir/.gpucomp.XXXXXX" if short is set. */
static char *temp_template(const char *final, bool short_name)
{
    const char *slash = strrchr(final, '/');
    size_t dir_len = slash ? (size_t)(slash - final) + 1 : 0;
    const char *base = short_name ? "gpucomp" : final + dir_len;
    size_t len = dir_len + 1 + strlen(base) + sizeof ".XXXXXX";
    char *t = malloc(len);
    if (t)
        snprintf(t, len, "%.*s.%s.XXXXXX", (int)dir_len, final, base);
    return t;
}

int cli_output_open(cli_output *o, const char *final)
{
    *o = (cli_output){ .final = final, .fd = -1 };
    for (int attempt = 0; attempt < 2; attempt++) {
        o->tmp = temp_template(final, attempt == 1);
        if (!o->tmp)
            return ENOMEM;
        o->fd = mkostemp(o->tmp, O_CLOEXEC);
        if (o->fd >= 0) {
            arm_cleanup(o->tmp);
            return 0;
        }
        int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        if (e != ENAMETOOLONG) /* a name near NAME_MAX leaves no room for ".…XXXXXX" */
            return e;
    }
    return ENAMETOOLONG;
}

int cli_output_copy_meta(cli_output *o, const struct stat *st)
{
    mode_t mode = st->st_mode & 07777;
    if (fchown(o->fd, st->st_uid, st->st_gid) != 0) {
        /* Not allowed (not root): the file stays ours, so it must not carry the input's setuid/setgid. */
        if (fchown(o->fd, (uid_t)-1, st->st_gid) != 0)
            mode &= ~(mode_t)S_ISGID;
        mode &= ~(mode_t)S_ISUID;
    }
    int e = 0;
    if (fchmod(o->fd, mode) != 0)
        e = errno;
    /* Last: any write after this would move mtime again. */
    struct timespec times[2] = { st->st_atim, st->st_mtim };
    if (futimens(o->fd, times) != 0 && !e)
        e = errno;
    return e;
}

/*
 * renameat2(RENAME_NOREPLACE) where the filesystem has it; else link()
 * (which never replaces) and unlink(); else, on filesystems without hard
 * links, a check then rename(), which is the best they allow.
 */
static int rename_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return errno;
#endif
    if (link(from, to) == 0) {
        unlink(from);
        return 0;
    }
    if (errno != EPERM && errno != EOPNOTSUPP)
        return errno;
    struct stat st;
    if (lstat(to, &st) == 0)
        return EEXIST;
    return rename(from, to) == 0 ? 0 : errno;
}

int cli_output_commit(cli_output *o, bool replace)
{
    int fd = o->fd;
    o->fd = -1;
    if (close(fd) != 0) /* delayed write errors (NFS, quotas) surface here */
        return errno;
    int e = replace ? (rename(o->tmp, o->final) == 0 ? 0 : errno) : rename_noreplace(o->tmp, o->final);
    if (e)
        return e;
    cleanup_armed = 0;
    free(o->tmp);
    o->tmp = NULL;
    return 0;
}

void cli_output_abort(cli_output *o)
{
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp) {
        unlink(o->tmp);
        cleanup_armed = 0;
        free(o->tmp);
        o->tmp = NULL;
    }
}

int cli_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0) /* no progress and no error: do not spin */
            return EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
