/* peer.c - who may connect (see peer.h). */
#include "config.h" /* _GNU_SOURCE: struct ucred */
#include "peer.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
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
        char path[sizeof((struct sockaddr_un *)0)->sun_path];
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

/*
 * The peer's supplementary groups as the kernel recorded them at connect()
 * (SO_PEERGROUPS): the groups the process really has, also when they came
 * from setgroups, sg or systemd's SupplementaryGroups= rather than from
 * /etc/group, and read without NSS (no LDAP round trip on the event loop).
 * A peer with many groups needs a larger buffer: the kernel says how large
 * (ERANGE), bounded by NGROUPS_MAX. Returns a malloc'd array (NULL with
 * *n = 0 if there are none or the kernel would not say).
 */
static gid_t *peer_groups(int fd, unsigned *n)
{
    socklen_t len = 64 * sizeof(gid_t);
    gid_t *groups = NULL;
    *n = 0;
    for (int tries = 0; tries < 3; tries++) {
        if (len == 0 || len > (socklen_t)(NGROUPS_MAX * sizeof(gid_t)))
            break;
        gid_t *bigger = realloc(groups, len);
        if (!bigger)
            break;
        groups = bigger;
        socklen_t got = len;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &got) == 0) {
            *n = (unsigned)(got / sizeof(gid_t));
            return groups;
        }
        if (errno != ERANGE)
            break; /* ENOPROTOOPT before Linux 4.13: the primary gid is all we know */
        len = got > len ? got : len * 2;
    }
    free(groups);
    return NULL;
}

bool gcd_peer_allowed(const gcd_peer_policy *p, const gcd_peer *who, int fd)
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
    if (gid_listed(p, who->gid))
        return true;
    unsigned n;
    gid_t *groups = peer_groups(fd, &n);
    bool listed = false;
    for (unsigned i = 0; i < n && !listed; i++)
        listed = gid_listed(p, groups[i]);
    free(groups);
    return listed;
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
    gcd_log(LOG_WARNING, "refused connection from uid %ld (pid %ld): " GCD_PEER_REFUSAL "%s",
            who->uid == (uid_t)-1 ? -1L : (long)who->uid, (long)who->pid, more);
    p->last_log_ns = now_ns;
    p->suppressed = 0;
}
