/*
 * server.c - listener, signals, readiness and shutdown around the event loop.
 *
 * Socket activation: if systemd passed a listening socket (sd_listen_fds),
 * it is used as is; otherwise the daemon creates --socket itself, refusing
 * to steal a path another live daemon is listening on, with mode 0660 and
 * group --socket-group. Who may connect is decided per connection (peer.h).
 */
#include "config.h"
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <syslog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/thread.h>
#include <systemd/sd-daemon.h>

#include "budget.h"
#include "completions.h"
#include "io_pool.h"
#include "conn.h"
#include "dispatch.h"
#include "fd_map_cache.h"
#include "gc_clock.h"
#include "log.h"
#include "parallel.h"
#include "part_cache.h"
#include "trim.h"

#define SHUTDOWN_GRACE_SEC 10
/* Out of descriptors: accept again after this long, or as soon as a connection closes. */
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_PAUSE_LOG_NS 1000000000ull
#define DEFAULT_SOCKET_GROUP "gpucomp"
/* STATUS= (systemctl status) is refreshed this often. */
#define STATUS_EVERY_SEC 5

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *addr, int len, void *arg)
{
    gcd_server *s = arg;
    if (s->shutting_down) {
        evutil_closesocket(fd);
        return;
    }
    gcd_peer who;
    gcd_peer_credentials(fd, &who);
    bool allowed = gcd_peer_allowed(&s->peers, &who, fd);
    if (!allowed)
        gcd_peer_log_refusal(&s->peers, &who, gc_now_ns());
    /* A refused peer is still accepted: its Hello is answered with PERMISSION, then it is closed. */
    gcd_conn_accept(s, fd, who.uid, !allowed);
}

static void accept_resume(gcd_server *s)
{
    if (!s->accept_paused || s->shutting_down || !s->listener)
        return;
    s->accept_paused = false;
    event_del(s->accept_timer);
    evconnlistener_enable(s->listener);
}

static void on_accept_timer(evutil_socket_t fd, short what, void *arg)
{
    accept_resume(arg);
}

/*
 * Out of descriptors (or kernel memory), the pending connection stays in the
 * backlog and the listener stays readable: retrying at once would spin and
 * log once per try. Stop listening instead until a connection closes or
 * ACCEPT_PAUSE_MS pass, logging at most once per pause and per second.
 */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    gcd_server *s = arg;
    int err = EVUTIL_SOCKET_ERROR();
    if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) {
        gcd_log(LOG_WARNING, "accept failed: %s", evutil_socket_error_to_string(err));
        return;
    }
    if (s->accept_paused)
        return;
    uint64_t now = gc_now_ns();
    if (!s->accept_paused_log_ns || now - s->accept_paused_log_ns >= ACCEPT_PAUSE_LOG_NS) {
        gcd_log(LOG_WARNING,
                "accept failed: %s (%u connections open): not accepting for %d ms "
                "or until a connection closes",
                evutil_socket_error_to_string(err), s->n_conns, ACCEPT_PAUSE_MS);
        s->accept_paused_log_ns = now;
    }
    s->accept_paused = true;
    evconnlistener_disable(l);
    struct timeval pause = { 0, ACCEPT_PAUSE_MS * 1000 };
    event_add(s->accept_timer, &pause);
}

/* Raise the soft descriptor limit to the hard one: each client holds a socket and up to 18 fds. */
static void raise_nofile_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            gcd_log(LOG_WARNING, "cannot raise the descriptor limit from %llu to %llu: %s",
                    (unsigned long long)was, (unsigned long long)rl.rlim_max, strerror(errno));
            return;
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY)
        gcd_log(LOG_INFO, "descriptor limit: unlimited");
    else if (was != rl.rlim_cur)
        gcd_log(LOG_INFO, "descriptor limit: %llu (raised from %llu)", (unsigned long long)rl.rlim_cur,
                (unsigned long long)was);
    else
        gcd_log(LOG_INFO, "descriptor limit: %llu", (unsigned long long)rl.rlim_cur);
}

/* --socket-group, else gpucomp if it exists; false = leave the daemon's own group. */
static bool socket_group(const gcd_server *s, gid_t *gid)
{
    const char *name = s->cfg.socket_group[0] ? s->cfg.socket_group : DEFAULT_SOCKET_GROUP;
    struct group *gr = getgrnam(name);
    if (gr) {
        *gid = gr->gr_gid;
        return true;
    }
    char *end;
    unsigned long v = strtoul(name, &end, 10);
    if (s->cfg.socket_group[0] && *name >= '0' && *name <= '9' && !*end) {
        *gid = (gid_t)v;
        return true;
    }
    if (s->cfg.socket_group[0])
        gcd_log(LOG_WARNING, "socket-group %s: no such group; the socket keeps the daemon's group", name);
    return false;
}

/* True if something is accepting connections on path right now. */
static bool socket_is_live(const struct sockaddr_un *addr)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool live = connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0;
    close(fd);
    return live;
}

static int create_socket(gcd_server *s)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    /* settings.c guarantees the path fits sun_path with its terminator */
    memcpy(addr.sun_path, s->cfg.socket_path, strlen(s->cfg.socket_path) + 1);
    struct stat st;
    if (lstat(addr.sun_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode) || socket_is_live(&addr)) {
            gcd_log(LOG_ERR, "%s exists and is %s: not replacing it", addr.sun_path,
                    S_ISSOCK(st.st_mode) ? "in use by a running daemon" : "not a socket");
            return -1;
        }
        unlink(addr.sun_path); /* a stale socket from a daemon that died */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    /* Created 0660 (umask), not chmod-ed after: no moment when anyone else may connect. */
    mode_t old_umask = umask(0117);
    bool bound = fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
    int bind_errno = errno;
    umask(old_umask);
    if (bound)
        s->owns_socket_file = true;
    else
        errno = bind_errno;
    if (!bound || chmod(addr.sun_path, 0660) != 0) {
        gcd_log(LOG_ERR, "cannot listen on %s: %s", addr.sun_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* The group before listen(): a client that connects finds the socket as it stays. */
    gid_t gid;
    if (socket_group(s, &gid) && chown(addr.sun_path, (uid_t)-1, gid) != 0)
        gcd_log(LOG_WARNING, "cannot give %s to group %u: %s; it keeps the daemon's group", addr.sun_path,
                (unsigned)gid, strerror(errno));
    if (listen(fd, 256) != 0) {
        gcd_log(LOG_ERR, "cannot listen on %s: %s", addr.sun_path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int listening_socket(gcd_server *s)
{
    int n = sd_listen_fds(1);
    if (n < 0)
        gcd_log(LOG_WARNING, "sd_listen_fds: %s; creating the socket", strerror(-n));
    if (n >= 1) {
        int fd = SD_LISTEN_FDS_START;
        evutil_make_socket_nonblocking(fd);
        gcd_log(LOG_INFO, "using the socket passed by systemd (%d socket%s)", n, n > 1 ? "s" : "");
        return fd;
    }
    return create_socket(s);
}

/* Shutdown: finish in-flight work and flush answers, then leave the loop. */
static void check_drained(evutil_socket_t fd, short what, void *arg)
{
    gcd_server *s = arg;
    bool output_pending = false;
    for (gcd_conn *c = s->conns; c; c = c->next)
        if (evbuffer_get_length(bufferevent_get_output(c->out.bev)) > 0)
            output_pending = true;
    if (s->requests_in_flight == 0 && !output_pending)
        event_base_loopbreak(s->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    gcd_server *s = arg;
    if (s->shutting_down)
        return;
    gcd_log(LOG_INFO, "%s: finishing in-flight requests, then exiting", strsignal((int)sig));
    sd_notify(0, "STOPPING=1");
    s->shutting_down = true;
    /* New clients are refused at once instead of waiting in the backlog until
     * the exit: close the listening socket and remove a socket file we made
     * (so a new daemon may bind that path while this one drains). Under socket
     * activation systemd keeps its own copy, where connections wait for the
     * next start. */
    evconnlistener_free(s->listener);
    s->listener = NULL;
    if (s->owns_socket_file) {
        unlink(s->cfg.socket_path);
        s->owns_socket_file = false;
    }
    for (gcd_conn *c = s->conns; c; c = c->next)
        gcd_conn_stop_reading(c);
    struct timeval poll = { 0, 20000 }, grace = { SHUTDOWN_GRACE_SEC, 0 };
    s->drain_timer = event_new(s->base, -1, EV_PERSIST, check_drained, s);
    if (s->drain_timer)
        event_add(s->drain_timer, &poll);
    event_base_loopexit(s->base, &grace);
}

static void on_sighup(evutil_socket_t sig, short what, void *arg)
{
    gcd_server *s = arg;
    if (s->shutting_down)
        return;
    uint64_t now_usec = gc_now_ns() / 1000; /* CLOCK_MONOTONIC, as RELOADING=1 wants */
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)now_usec);
    gcd_server_reload(s);
    sd_notify(0, "READY=1");
}

static bool add_signal(gcd_server *s, int sig, struct event **ev)
{
    *ev = evsignal_new(s->base, sig, sig == SIGHUP ? on_sighup : on_signal, s);
    return *ev && event_add(*ev, NULL) == 0;
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    gcd_server *s = arg;
    gcd_conn_sweep(s, gc_now_ns());
    const gcd_counters *k = &s->counters;
    bool busy = s->requests_in_flight > 0 || gcd_budget_in_use(s->budget) > 0;
    gcd_trim_tick(s->trim, busy, k->requests_ok + k->requests_failed + k->bytes_in + k->bytes_out + s->n_conns);
}

/*
 * Freed part buffers kept for reuse (part_cache.h) hold at most a small
 * share of the budget, and never more than a ceiling that covers the parts
 * in flight on a busy host.
 */
#define PART_CACHE_SHARE 8
#define PART_CACHE_CEILING ((uint64_t)1 << 30)

static size_t part_cache_limit(uint64_t budget)
{
    uint64_t limit = budget / PART_CACHE_SHARE;
    return (size_t)(limit < PART_CACHE_CEILING ? limit : PART_CACHE_CEILING);
}

/* The memory budget, the once-a-second timeout sweep and the heap trimmer it drives. */
static bool start_budget(gcd_server *s)
{
    s->trim = gcd_trim_start(); /* NULL: logged, the daemon runs without it */
    gcd_part_cache_set_limit(part_cache_limit(s->cfg.memory_budget));
    uint64_t share = s->cfg.memory_budget / 100 * s->cfg.user_share_pct;
    s->budget = gcd_budget_new(s->cfg.memory_budget, share ? share : s->cfg.memory_budget);
    s->sweep_timer = event_new(s->base, -1, EV_PERSIST, on_sweep, s);
    struct timeval every = { 1, 0 };
    if (!s->budget || !s->sweep_timer || event_add(s->sweep_timer, &every) != 0) {
        gcd_log(LOG_ERR, "cannot set up the memory budget");
        return false;
    }
    return true;
}

/* 1536 -> "1.5K"; for STATUS= lines. */
static const char *human_size(uint64_t n, char *buf, size_t size)
{
    static const char units[] = "BKMGTP";
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%lluB", (unsigned long long)n);
    else
        snprintf(buf, size, "%.1f%c", v, units[u]);
    return buf;
}

static void send_status(gcd_server *s)
{
    char used[32], limit[32];
    sd_notifyf(0,
               "STATUS=%s backend, %u GPU lane(s), %u CPU workers: %u connection%s, "
               "%llu request%s in flight, %s of %s memory in use",
               gcd_dispatch_backend(s), s->n_lanes, gcd_workers_threads(s->workers), s->n_conns,
               s->n_conns == 1 ? "" : "s", (unsigned long long)s->requests_in_flight,
               s->requests_in_flight == 1 ? "" : "s", human_size(gcd_budget_in_use(s->budget), used, sizeof used),
               human_size(gcd_budget_limit(s->budget), limit, sizeof limit));
}

static void on_status_timer(evutil_socket_t fd, short what, void *arg)
{
    send_status(arg);
}

/* Sent from the loop itself: if the loop wedges, the pings stop and systemd restarts us. */
static void on_watchdog_timer(evutil_socket_t fd, short what, void *arg)
{
    sd_notify(0, "WATCHDOG=1");
}

/* $WATCHDOG_USEC (WatchdogSec=): ping at half the interval. Status lines every STATUS_EVERY_SEC. */
static bool start_notify_timers(gcd_server *s)
{
    uint64_t usec = 0;
    int wd = sd_watchdog_enabled(0, &usec);
    if (wd < 0)
        gcd_log(LOG_WARNING, "ignoring the watchdog settings: %s", strerror(-wd));
    if (wd > 0 && usec > 0) {
        uint64_t half = usec / 2 ? usec / 2 : 1;
        struct timeval every = { (time_t)(half / 1000000), (suseconds_t)(half % 1000000) };
        s->watchdog_timer = event_new(s->base, -1, EV_PERSIST, on_watchdog_timer, s);
        if (!s->watchdog_timer || event_add(s->watchdog_timer, &every) != 0) {
            gcd_log(LOG_ERR, "cannot start the watchdog timer");
            return false;
        }
        gcd_log(LOG_INFO, "watchdog: every %llu ms (WATCHDOG_USEC=%llu)", (unsigned long long)(half / 1000),
                (unsigned long long)usec);
    }
    struct timeval status_every = { STATUS_EVERY_SEC, 0 };
    s->status_timer = event_new(s->base, -1, EV_PERSIST, on_status_timer, s);
    if (!s->status_timer || event_add(s->status_timer, &status_every) != 0) {
        gcd_log(LOG_ERR, "cannot start the status timer");
        return false;
    }
    return true;
}

static bool same_ids(const unsigned *a, unsigned na, const unsigned *b, unsigned nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

bool gcd_server_reload(gcd_server *s)
{
    if (!s->argv) {
        gcd_log(LOG_WARNING, "SIGHUP: no command line to reload from");
        return false;
    }
    gcd_config n;
    gcd_config_defaults(&n);
    if (gcd_config_parse(&n, s->argc, s->argv) != 0) {
        gcd_log(LOG_ERR, "SIGHUP: the settings did not parse (see the message above); "
                         "keeping the current ones");
        return false;
    }
    gcd_config *c = &s->cfg;
    unsigned changed = 0, n_settings;
    const gcd_setting *settings = gcd_settings(&n_settings);
    for (unsigned i = 0; i < n_settings; i++) /* settings.c says which are live */
        if (settings[i].live && gcd_setting_differs(&settings[i], c, &n)) {
            gcd_log(LOG_INFO, "SIGHUP: %s changed", settings[i].name);
            gcd_setting_copy(&settings[i], c, &n);
            changed++;
        }
    gcd_log_set_level(c->log_level);
    bool users_changed = c->allow_users_set != n.allow_users_set || c->allow_any_user != n.allow_any_user ||
                         !same_ids((const unsigned *)c->allow_uids, c->n_allow_uids,
                                   (const unsigned *)n.allow_uids, n.n_allow_uids);
    bool groups_changed =
        c->allow_groups_set != n.allow_groups_set || !same_ids((const unsigned *)c->allow_gids, c->n_allow_gids,
                                                               (const unsigned *)n.allow_gids, n.n_allow_gids);
    if (users_changed || groups_changed) {
        c->allow_users_set = n.allow_users_set;
        c->allow_any_user = n.allow_any_user;
        c->n_allow_uids = n.n_allow_uids;
        memcpy(c->allow_uids, n.allow_uids, sizeof c->allow_uids);
        c->allow_groups_set = n.allow_groups_set;
        c->n_allow_gids = n.n_allow_gids;
        memcpy(c->allow_gids, n.allow_gids, sizeof c->allow_gids);
        uint64_t last_log_ns = s->peers.last_log_ns;
        unsigned long suppressed = s->peers.suppressed;
        gcd_peer_policy_init(&s->peers, c, evconnlistener_get_fd(s->listener));
        s->peers.last_log_ns = last_log_ns;
        s->peers.suppressed = suppressed;
        gcd_log(LOG_INFO, "SIGHUP: allow-users/allow-groups changed (new connections; open ones stay)");
        changed++;
    }
    for (unsigned i = 0; i < n_settings; i++)
        if (!settings[i].live && gcd_setting_differs(&settings[i], c, &n))
            gcd_log(LOG_WARNING, "SIGHUP: %s changed: takes effect after a restart", settings[i].name);
    gcd_log(LOG_NOTICE, "SIGHUP: settings reloaded (%u live change%s)", changed, changed == 1 ? "" : "s");
    return true;
}

bool gcd_server_init(gcd_server *s, const gcd_config *cfg)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->conn_closed = accept_resume;
    s->counters.started_ns = gc_now_ns();
    gcd_fd_map_cache_init(cfg->memory_budget, cfg->register_limit);
    signal(SIGPIPE, SIG_IGN); /* a vanished client is an EPIPE, not a crash */
    if (evthread_use_pthreads() != 0 || !(s->base = event_base_new())) {
        gcd_log(LOG_ERR, "cannot create the event loop");
        return false;
    }
    /* Signals first: a client may connect, and a supervisor signal us, the moment we listen. */
    if (!add_signal(s, SIGINT, &s->sigint_event) || !add_signal(s, SIGTERM, &s->sigterm_event) ||
        !add_signal(s, SIGHUP, &s->sighup_event)) {
        gcd_log(LOG_ERR, "cannot install signal handlers");
        return false;
    }
    if (!start_budget(s))
        return false;
    raise_nofile_limit();
    int fd = listening_socket(s);
    if (fd < 0)
        return false;
    gcd_peer_policy_init(&s->peers, &s->cfg, fd);
    s->accept_timer = evtimer_new(s->base, on_accept_timer, s);
    if (!s->accept_timer) {
        gcd_log(LOG_ERR, "cannot create a timer");
        close(fd);
        return false;
    }
    s->listener = evconnlistener_new(s->base, on_accept, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
    if (!s->listener) {
        gcd_log(LOG_ERR, "cannot watch the listening socket");
        close(fd);
        return false;
    }
    evconnlistener_set_error_cb(s->listener, on_accept_error);
    unsigned n = cfg->workers ? cfg->workers : gc_cpu_count(); /* the CPUs it may run on */
    s->completions = gcd_completions_new(s->base, gcd_conn_request_done, gcd_conn_request_progress, s);
    if (!s->completions) {
        gcd_log(LOG_ERR, "cannot create the completion queue");
        return false;
    }
    s->workers = gcd_workers_start(n ? n : 1, cfg->codec_threads, gcd_completions_done, s->completions);
    s->io = gcd_io_pool_start(s->base, gcd_io_threads(cfg->io_threads));
    if (!s->workers || !s->io || !gcd_dispatch_init(s) || !start_notify_timers(s))
        return false;
    return true;
}

int gcd_server_run(gcd_server *s)
{
    const char *backend = gcd_dispatch_backend(s);
    gcd_log(LOG_INFO, "gpucompd %s serving on %s: %u CPU workers, %u GPU lane(s), backend %s", PACKAGE_VERSION,
            s->cfg.socket_path, gcd_workers_threads(s->workers), s->n_lanes, backend);
    /* Devices are initialised (gcd_dispatch_init in gcd_server_init): now we are ready. */
    sd_notify(0, "READY=1");
    send_status(s);
    if (event_base_dispatch(s->base) < 0) {
        gcd_log(LOG_ERR, "event loop failed");
        return 1;
    }
    return 0;
}

void gcd_server_cleanup(gcd_server *s)
{
    /* File I/O first (what it finishes may still submit parts), then devices,
     * then workers: their completions may still reference connections. */
    gcd_io_pool *io = s->io;
    s->io = NULL; /* transfers asked for from here on fail at once */
    gcd_io_pool_stop(io);
    gcd_dispatch_stop(s);
    gcd_workers_stop(s->workers);
    s->workers = NULL;
    if (s->completions) /* what the stopped workers and devices finished last */
        gcd_completions_drain(s->completions);
    while (s->conns)
        gcd_conn_close(s->conns);
    gcd_fd_map_cache_clear();
    if (s->listener)
        evconnlistener_free(s->listener);
    if (s->owns_socket_file)
        unlink(s->cfg.socket_path);
    if (s->drain_timer)
        event_free(s->drain_timer);
    if (s->accept_timer)
        event_free(s->accept_timer);
    if (s->sweep_timer)
        event_free(s->sweep_timer);
    gcd_trim_stop(s->trim);
    s->trim = NULL;
    gcd_part_cache_drop();
    if (s->watchdog_timer)
        event_free(s->watchdog_timer);
    if (s->status_timer)
        event_free(s->status_timer);
    if (s->wake_event)
        event_free(s->wake_event);
    gcd_completions_free(s->completions);
    s->completions = NULL;
    gcd_budget_free(s->budget);
    s->budget = NULL;
    if (s->sigint_event)
        event_free(s->sigint_event);
    if (s->sigterm_event)
        event_free(s->sigterm_event);
    if (s->sighup_event)
        event_free(s->sighup_event);
    if (s->base)
        event_base_free(s->base);
    libevent_global_shutdown();
}
