/* peer.c - who may connect (see peer.h). */
#include "config.h" /* _GNU_SOURCE: struct ucred */
#include "peer.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

#define DEFAULT_GROUP "gpucomp"
#define LOG_INTERVAL_NS 1000000000ull

/* The group owning the socket file behind listen_fd, or false if there is no such file. */
static bool socket_file_group(int listen_fd, gid_t *gid, char *path, size_t path_size)
{
    struct sockaddr_un addr;
    socklen_t len = sizeof addr;
    memset(&addr, 0, sizeof addr);
    if (getsockname(listen_fd, (struct sockaddr *)&addr, &len) != 0 || addr.sun_family != AF_UNIX ||
        len <= offsetof(struct sockaddr_un, sun_path) || addr.sun_path[0] == '\0')
        return false; /* not a Unix socket, unnamed, or abstract */
    size_t n = len - offsetof(struct sockaddr_un, sun_path);
    if (n >= sizeof addr.sun_path)
        n = sizeof addr.sun_path - 1;
    addr.sun_path[n] = '\0';
    struct stat st;
    if (stat(addr.sun_path, &st) != 0)
        return false;
    *gid = st.st_gid;
    snprintf(path, path_size, "%s", addr.sun_path);
    return true;
}

void gcd_peer_policy_init(gcd_peer_policy *p, const gcd_config *cfg, int listen_fd)
{
    memset(p, 0, sizeof *p);
    if (cfg->allow_users_set) {
        p->any_user = cfg->allow_any_user;
        p->n_uids = cfg->n_allow_uids;
        memcpy(p->uids, cfg->allow_uids, cfg->n_allow_uids * sizeof p->uids[0]);
    } else {
        p->uids[p->n_uids++] = 0;
        if (geteuid() != 0)
            p->uids[p->n_uids++] = geteuid();
    }
    if (cfg->allow_groups_set) {
        p->n_gids = cfg->n_allow_gids;
        memcpy(p->gids, cfg->allow_gids, cfg->n_allow_gids * sizeof p->gids[0]);
    } else {
        gid_t gid;
        char path[sizeof ((struct sockaddr_un *)0)->sun_path];
        struct group *gr;
        if (socket_file_group(listen_fd, &gid, path, sizeof path)) {
            p->gids[p->n_gids++] = gid;
            gcd_log(LOG_DEBUG, "allow-groups: gid %u, the group of %s", (unsigned)gid, path);
        } else if ((gr = getgrnam(DEFAULT_GROUP))) {
            p->gids[p->n_gids++] = gr->gr_gid;
            gcd_log(LOG_DEBUG, "allow-groups: %s (no socket file to take the group from)", DEFAULT_GROUP);
        } else {
            gcd_log(LOG_NOTICE, "no socket file group and no group %s: only allow-users may connect",
                    DEFAULT_GROUP);
        }
    }
    if (p->any_user)
        gcd_log(LOG_NOTICE, "allow-users = *: any local user may connect");
}

bool gcd_peer_credentials(int fd, gcd_peer *who)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) {
        who->uid = (uid_t)-1;
        who->gid = (gid_t)-1;
        who->pid = -1;
        return false;
    }
    who->uid = cred.uid;
    who->gid = cred.gid;
    who->pid = cred.pid;
    return true;
}

static bool gid_listed(const gcd_peer_policy *p, gid_t gid)
{
    for (unsigned i = 0; i < p->n_gids; i++)
        if (p->gids[i] == gid)
            return true;
    return false;
}

/* Whether any group of uid's passwd entry (primary and supplementary) is listed. */
static bool user_groups_listed(const gcd_peer_policy *p, uid_t uid)
{
    long size = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t buf_size = size > 0 ? (size_t)size : 16384;
    char *buf = NULL;
    struct passwd pw, *found = NULL;
    int rc;
    do { /* ERANGE: the entry needs a larger buffer */
        char *bigger = realloc(buf, buf_size);
        if (!bigger)
            break;
        buf = bigger;
        rc = getpwuid_r(uid, &pw, buf, buf_size, &found);
        buf_size *= 2;
    } while (rc == ERANGE && buf_size <= (1u << 20));
    bool listed = false;
    if (found) { /* no passwd entry: the peer's own primary gid is all there is */
        int n = 64;
        gid_t *groups = NULL;
        for (int tries = 0; tries < 4; tries++) {
            gid_t *g = realloc(groups, (size_t)n * sizeof *g);
            if (!g)
                break;
            groups = g;
            int want = n;
            if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &want) >= 0) {
                for (int i = 0; i < want && !listed; i++)
                    listed = gid_listed(p, groups[i]);
                break;
            }
            n = want > n ? want : n * 2;
        }
        free(groups);
    }
    free(buf);
    return listed;
}

bool gcd_peer_allowed(const gcd_peer_policy *p, const gcd_peer *who)
{
    if (who->uid == (uid_t)-1)
        return false;
    if (p->any_user)
        return true;
    for (unsigned i = 0; i < p->n_uids; i++)
        if (p->uids[i] == who->uid)
            return true;
    if (p->n_gids == 0)
        return false;
    return gid_listed(p, who->gid) || user_groups_listed(p, who->uid);
}

void gcd_peer_log_refusal(gcd_peer_policy *p, const gcd_peer *who, uint64_t now_ns)
{
    if (p->last_log_ns && now_ns - p->last_log_ns < LOG_INTERVAL_NS) {
        p->suppressed++;
        return;
    }
    char more[64] = "";
    if (p->suppressed)
        snprintf(more, sizeof more, " (and %lu more refused since the last message)", p->suppressed);
    gcd_log(LOG_WARNING,
            "refused connection from uid %ld (pid %ld): not root, the daemon's user, or in "
            "allow-users/allow-groups%s",
            who->uid == (uid_t)-1 ? -1L : (long)who->uid, (long)who->pid, more);
    p->last_log_ns = now_ns;
    p->suppressed = 0;
}
