/*
 * peer.h - who may connect: the peer's credentials against the allow-lists.
 *
 * A peer is allowed if its uid is in allow-users (default: root and the
 * daemon's own user; "*" admits anyone), or its gid or one of the
 * supplementary groups its process had at connect() is in allow-groups
 * (default: the group owning the listening socket file, else the group
 * gpucomp). The groups are the process's own, from the kernel, not
 * /etc/group's list for the uid. An explicit allow-users replaces the
 * default, so it must name root too if root is to connect.
 */
#ifndef GCD_PEER_H
#define GCD_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "settings.h"

typedef struct gcd_peer {
    uid_t uid;
    gid_t gid;
    pid_t pid;
} gcd_peer;

typedef struct gcd_peer_policy {
    bool any_user;
    uid_t uids[GCD_ALLOW_MAX + 1];
    unsigned n_uids;
    gid_t gids[GCD_ALLOW_MAX];
    unsigned n_gids;
    /* Refusal log rate limit: one line per second, the rest counted. */
    uint64_t last_log_ns;
    unsigned long suppressed;
} gcd_peer_policy;

/* Resolve cfg's lists, defaults included, for the socket listen_fd (logs the result). */
void gcd_peer_policy_init(gcd_peer_policy *p, const gcd_config *cfg, int listen_fd);

/* Read fd's SO_PEERCRED into *who; false (who = nobody, -1) if the kernel would not say. */
bool gcd_peer_credentials(int fd, gcd_peer *who);

/* Whether *who, connected on fd, may use the daemon (fd's SO_PEERGROUPS are read only if needed). */
bool gcd_peer_allowed(const gcd_peer_policy *p, const gcd_peer *who, int fd);

/* Why a peer was refused, after "uid N": the same words in the log and in the Welcome. */
#define GCD_PEER_REFUSAL \
    "not in allow-users, and none of its groups (its gid and supplementary groups) is in allow-groups"

/* Log a refusal at LOG_WARNING, at most one line per second (now_ns: monotonic). */
void gcd_peer_log_refusal(gcd_peer_policy *p, const gcd_peer *who, uint64_t now_ns);

#endif
