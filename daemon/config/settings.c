/*
 * settings.c - gpucompd settings. One table drives both the command line and
 * the config file, so every setting has exactly one parser.
 */

#include "settings.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "codec.h"
#include "size_parse.h"
#include "wire.h"

#include "config.h" /* autoconf: PACKAGE_VERSION */
#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

typedef gcd_setting setting;

/* A plain count (threads, lanes, a percentage, microseconds): decimal digits,
 * no unit, at most max. Sizes go through gc_parse_size (size_parse.h). */
static bool parse_number(const char *text, uint64_t max, uint64_t *out)
{
    if (!isdigit((unsigned char)*text))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_count(const char *text, unsigned *out)
{
    uint64_t v;
    if (!parse_number(text, 4096, &v))
        return false;
    *out = (unsigned)v;
    return true;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static bool set_socket(gcd_config *c, const char *v)
{
    if (!*v || strlen(v) >= sizeof c->socket_path)
        return false;
    strcpy(c->socket_path, v);
    return true;
}

static bool set_workers(gcd_config *c, const char *v)
{
    return parse_count(v, &c->workers);
}
static bool set_codec_threads(gcd_config *c, const char *v)
{
    return parse_count(v, &c->codec_threads);
}
static bool set_io_threads(gcd_config *c, const char *v)
{
    return parse_count(v, &c->io_threads);
}
static bool set_max_request(gcd_config *c, const char *v)
{
    return gc_parse_size(v, UINT64_MAX, &c->max_request) && c->max_request > 0;
}
static bool set_max_output(gcd_config *c, const char *v)
{
    return gc_parse_size(v, UINT64_MAX, &c->max_output) && c->max_output > 0;
}
static bool set_memory_budget(gcd_config *c, const char *v)
{
    return gc_parse_size(v, UINT64_MAX, &c->memory_budget) && c->memory_budget > 0;
}
static bool set_user_share(gcd_config *c, const char *v)
{
    return parse_count(v, &c->user_share_pct) && c->user_share_pct >= 1 && c->user_share_pct <= 100;
}

/* A duration: a number of seconds, or of milliseconds with an "ms" suffix. */
static bool parse_duration_ms(const char *v, uint64_t *ms)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || !isdigit((unsigned char)*v) || n > 100000000ull)
        return false;
    if (strcmp(end, "ms") == 0)
        *ms = n;
    else if (*end == '\0' || strcmp(end, "s") == 0)
        *ms = n * 1000;
    else
        return false;
    return true;
}
static bool set_request_timeout(gcd_config *c, const char *v)
{
    return parse_duration_ms(v, &c->request_timeout_ms) && c->request_timeout_ms > 0;
}
static bool set_idle_timeout(gcd_config *c, const char *v)
{
    return parse_duration_ms(v, &c->idle_timeout_ms);
}
static bool set_register_limit(gcd_config *c, const char *v)
{
    return gc_parse_size(v, UINT64_MAX, &c->register_limit);
}
static bool set_gpu_min_bytes(gcd_config *c, const char *v)
{
    return gc_parse_size(v, UINT64_MAX, &c->gpu_min_bytes);
}
static bool set_batch_bytes(gcd_config *c, const char *v)
{
    return gc_parse_size(v, UINT64_MAX, &c->batch_bytes) && c->batch_bytes >= (1u << 20);
}
static bool set_device_lanes(gcd_config *c, const char *v)
{
    return parse_count(v, &c->device_lanes) && c->device_lanes >= 1 && c->device_lanes <= 4;
}
static bool set_emulated_devices(gcd_config *c, const char *v)
{
    return parse_count(v, &c->emulated_devices) && c->emulated_devices >= 1 && c->emulated_devices <= 8;
}
/* "N[.L][:K]": device N's lanes (lane L only, with .L) each fail their batch K (default 1). */
static bool set_fail_device(gcd_config *c, const char *v)
{
    char index[16], lane[16] = "";
    const char *colon = strchr(v, ':');
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    unsigned device, lane_no = 0;
    uint64_t batch = 1;
    if (n == 0 || n >= sizeof index)
        return false;
    memcpy(index, v, n);
    index[n] = '\0';
    char *dot = strchr(index, '.');
    if (dot) {
        snprintf(lane, sizeof lane, "%s", dot + 1);
        *dot = '\0';
    }
    if (!parse_count(index, &device) || (dot && !parse_count(lane, &lane_no)) ||
        (colon && (!parse_number(colon + 1, UINT32_MAX, &batch) || batch == 0)))
        return false;
    c->fail_device = device;
    c->fail_lane = dot ? (int)lane_no : -1;
    c->fail_batch = batch;
    return true;
}
static bool set_batch_wait_us(gcd_config *c, const char *v)
{
    return parse_number(v, 1000000, &c->batch_wait_us);
}

static bool set_max_frame(gcd_config *c, const char *v)
{
    uint64_t n;
    if (!gc_parse_size(v, 1u << 30, &n) || n < GC_WIRE_MIN_MAX_FRAME)
        return false;
    c->max_frame = (uint32_t)n;
    return true;
}

static bool set_gpu(gcd_config *c, const char *v)
{
    if (strcmp(v, "auto") == 0)
        c->gpu = GCD_GPU_AUTO;
    else if (strcmp(v, "off") == 0)
        c->gpu = GCD_GPU_OFF;
    else if (strcmp(v, "emulate") == 0)
        c->gpu = GCD_GPU_EMULATE;
    else if (strcmp(v, "emulate-failing") == 0)
        c->gpu = GCD_GPU_EMULATE_FAILING;
    else if (strcmp(v, "emulate-limit") == 0)
        c->gpu = GCD_GPU_EMULATE_LIMIT;
    else
        return false;
    return true;
}

static bool set_log_level(gcd_config *c, const char *v)
{
    static const char *const names[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };
    for (int i = 0; i <= LOG_DEBUG; i++)
        if (strcmp(v, names[i]) == 0) {
            c->log_level = i;
            return true;
        }
    return false;
}

/* A numeric id, or -1 if text is not one. */
static long long parse_id(const char *text)
{
    if (!isdigit((unsigned char)*text))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    return errno || *end || v >= (unsigned long long)(uid_t)-1 ? -1 : (long long)v;
}

/*
 * Split a comma-separated list of user or group names or numeric ids,
 * resolving names now (a typo is a start-up error, not a silent refusal).
 */
static bool parse_id_list(const char *v, bool groups, unsigned *ids, unsigned *n)
{
    char buf[1024];
    if (strlen(v) >= sizeof buf)
        return false;
    strcpy(buf, v);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        if (!*tok)
            continue;
        long long id = parse_id(tok);
        if (id < 0 && groups) {
            struct group *gr = getgrnam(tok);
            id = gr ? (long long)gr->gr_gid : -1;
        } else if (id < 0) {
            struct passwd *pw = getpwnam(tok);
            id = pw ? (long long)pw->pw_uid : -1;
        }
        if (id < 0 || *n >= GCD_ALLOW_MAX) {
            if (id < 0)
                fprintf(stderr, "gpucompd: no %s named '%s'\n", groups ? "group" : "user", tok);
            return false;
        }
        ids[(*n)++] = (unsigned)id;
    }
    return true;
}

static bool set_allow_users(gcd_config *c, const char *v)
{
    unsigned ids[GCD_ALLOW_MAX];
    c->allow_users_set = true;
    c->allow_any_user = strcmp(v, "*") == 0;
    c->n_allow_uids = 0;
    if (c->allow_any_user)
        return true;
    if (!parse_id_list(v, false, ids, &c->n_allow_uids))
        return false;
    for (unsigned i = 0; i < c->n_allow_uids; i++)
        c->allow_uids[i] = (uid_t)ids[i];
    return true;
}

static bool set_allow_groups(gcd_config *c, const char *v)
{
    unsigned ids[GCD_ALLOW_MAX];
    c->allow_groups_set = true;
    if (!parse_id_list(v, true, ids, &c->n_allow_gids))
        return false;
    for (unsigned i = 0; i < c->n_allow_gids; i++)
        c->allow_gids[i] = (gid_t)ids[i];
    return true;
}

static bool set_socket_group(gcd_config *c, const char *v)
{
    if (!*v || strlen(v) >= sizeof c->socket_group || (parse_id(v) < 0 && !getgrnam(v)))
        return false;
    strcpy(c->socket_group, v);
    return true;
}

/* How a reload treats a setting (server.c gcd_server_reload): LIVE settings are read per frame,
 * per request or per sweep, or when a peer connects; the others are fixed at start (the socket,
 * threads, devices, the budget, frame sizes told to clients). */
#define LIVE true
#define RESTART false
#define FIELD_AT(f) offsetof(gcd_config, f), sizeof(((gcd_config *)0)->f)
#define FIELD(f) FIELD_AT(f), false
#define TEXT_FIELD(f) FIELD_AT(f), true
/* Adjacent fields set together (no padding between them: checked below). */
#define FIELDS(first, last)      \
    offsetof(gcd_config, first), \
        offsetof(gcd_config, last) + sizeof(((gcd_config *)0)->last) - offsetof(gcd_config, first), false
#define BY_PEERS 0, 0, false /* the allow lists: peer.h's policy is rebuilt from them */
/* Where the codecs' own settings (codec.h) are listed. */
#define CODEC_OPTIONS                              \
    {                                              \
        NULL, NULL, NULL, NULL, false, 0, 0, false \
    }

static const setting core_settings[] = {
    { "socket", "PATH", "listen on this Unix socket (default " GC_WIRE_DEFAULT_SOCKET ")", set_socket, RESTART,
      TEXT_FIELD(socket_path) },
    { "workers", "N", "CPU worker threads running requests (default: the CPUs it may run on)", set_workers,
      RESTART, FIELD(workers) },
    { "codec-threads", "N", "threads one large request may use (default: CPUs)", set_codec_threads, RESTART,
      FIELD(codec_threads) },
    { "io-threads", "N",
      "threads reading and writing the files of file streams (default: one per two CPUs, 8 to 64)", set_io_threads,
      RESTART, FIELD(io_threads) },
    { "max-frame", "SIZE", "largest protocol frame accepted (default 16M)", set_max_frame, RESTART,
      FIELD(max_frame) },
    { "max-request", "SIZE", "largest input of one request (default 2G)", set_max_request, LIVE,
      FIELD(max_request) },
    { "max-output", "SIZE", "default limit on decompressed size (default 4G)", set_max_output, LIVE,
      FIELD(max_output) },
    { "memory-budget", "SIZE", "memory held for requests at once (default: RAM/4)", set_memory_budget, RESTART,
      FIELD(memory_budget) },
    { "user-memory-share", "PERCENT", "of the budget, the most one user may hold (default 50)", set_user_share,
      RESTART, FIELD(user_share_pct) },
    { "request-timeout", "SECONDS", "a frame or streamed request must arrive within this (default 60)",
      set_request_timeout, LIVE, FIELD(request_timeout_ms) },
    { "idle-timeout", "SECONDS", "close connections idle this long, 0 = never (default 600)", set_idle_timeout,
      LIVE, FIELD(idle_timeout_ms) },
    { "gpu", "auto|off|emulate|emulate-failing|emulate-limit",
      "GPUs when present (default), CPU only, or a stand-in device (testing)", set_gpu, RESTART, FIELD(gpu) },
    { "batch-bytes", "SIZE", "most input bytes in one GPU batch (default 64M)", set_batch_bytes, RESTART,
      FIELD(batch_bytes) },
    { "batch-wait-us", "N", "longest wait for a GPU batch to fill, microseconds (default 200)", set_batch_wait_us,
      RESTART, FIELD(batch_wait_us) },
    { "device-lanes", "N", "batches in flight per GPU, 1..4 (default 2)", set_device_lanes, RESTART,
      FIELD(device_lanes) },
    { "emulated-devices", "N",
      "stand-in devices of --gpu=emulate*, 1..8; emulate-failing fails the first only (default 1)",
      set_emulated_devices, RESTART, FIELD(emulated_devices) },
    { "fail-device", "N[.L][:K]",
      "testing: GPU N's lanes (lane L only) fail their batch K (default 1), as a device failure", set_fail_device,
      RESTART, FIELDS(fail_device, fail_batch) },
    { "register-limit", "SIZE", "client memory registered for DMA at once, 0 = none (default: RAM/4)",
      set_register_limit, RESTART, FIELD(register_limit) },
    { "gpu-min-bytes", "SIZE", "smaller requests run on the CPU engine (default 3M)", set_gpu_min_bytes, LIVE,
      FIELD(gpu_min_bytes) },
    CODEC_OPTIONS,
    { "log-level", "LEVEL", "err, warning, notice, info (default) or debug", set_log_level, LIVE,
      FIELD(log_level) },
    { "allow-users", "LIST",
      "users who may connect, names or uids, * = anyone (default: root and the daemon's user)", set_allow_users,
      LIVE, BY_PEERS },
    { "allow-groups", "LIST", "groups whose members may connect (default: the socket file's group)",
      set_allow_groups, LIVE, BY_PEERS },
    { "socket-group", "GROUP", "group of the socket the daemon creates (default gpucomp if it exists)",
      set_socket_group, RESTART, TEXT_FIELD(socket_group) },
};
#define N_CORE (sizeof core_settings / sizeof core_settings[0])
#define N_MOST (N_CORE + GCD_MAX_CODEC_OPTIONS)
_Static_assert(offsetof(gcd_config, fail_lane) == offsetof(gcd_config, fail_device) + sizeof(unsigned) &&
                   offsetof(gcd_config, fail_batch) == offsetof(gcd_config, fail_lane) + sizeof(int),
               "fail-device's fields are adjacent");

/* The core table with the codecs' options in place of CODEC_OPTIONS, made on first use. */
static setting all_settings[N_MOST];
static unsigned n_settings;

static void add_codec_options(void)
{
    unsigned n_codecs;
    const gcd_codec *const *codecs = gcd_codec_all(&n_codecs);
    for (unsigned k = 0; k < n_codecs; k++)
        for (unsigned i = 0; i < codecs[k]->n_options; i++) {
            unsigned slot = gcd_codec_option_slot(codecs[k], i);
            if (slot >= GCD_MAX_CODEC_OPTIONS) { /* a codec table this build cannot hold */
                fprintf(stderr, "gpucompd: more codec settings than GCD_MAX_CODEC_OPTIONS\n");
                abort();
            }
            const gcd_codec_option *o = &codecs[k]->options[i];
            all_settings[n_settings++] =
                (setting){ o->name,          "SIZE",
                           o->help,          NULL,
                           o->live,          offsetof(gcd_config, codec_options) + slot * sizeof(uint64_t),
                           sizeof(uint64_t), false };
        }
}

const gcd_setting *gcd_settings(unsigned *n)
{
    if (!n_settings)
        for (size_t i = 0; i < N_CORE; i++) {
            if (core_settings[i].name)
                all_settings[n_settings++] = core_settings[i];
            else
                add_codec_options();
        }
    *n = n_settings;
    return all_settings;
}

static uint64_t *codec_option_at(gcd_config *cfg, const setting *s)
{
    return (uint64_t *)((char *)cfg + s->offset);
}

bool gcd_setting_differs(const gcd_setting *s, const gcd_config *a, const gcd_config *b)
{
    const char *x = (const char *)a + s->offset, *y = (const char *)b + s->offset;
    if (s->text)
        return strncmp(x, y, s->size) != 0;
    return memcmp(x, y, s->size) != 0;
}

void gcd_setting_copy(const gcd_setting *s, gcd_config *to, const gcd_config *from)
{
    memcpy((char *)to + s->offset, (const char *)from + s->offset, s->size);
}

/*
 * Page-locked memory cannot be swapped or reclaimed, so registrations get a
 * bound of their own: a quarter of physical memory leaves the rest of the
 * host room to work (a 128 GiB host pins up to 32 GiB for its clients).
 */
static uint64_t default_register_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 1ull << 30;
    return (uint64_t)pages * (uint64_t)page / 4;
}

/* Everything the daemon holds for requests: a quarter of the host's memory. */
static uint64_t default_memory_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 1ull << 30;
    return (uint64_t)pages * (uint64_t)page / 4;
}

void gcd_config_defaults(gcd_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->socket_path, GC_WIRE_DEFAULT_SOCKET);
    cfg->max_frame = GC_WIRE_DEFAULT_MAX_FRAME;
    cfg->max_request = 2ull << 30;
    cfg->max_output = 4ull << 30;
    cfg->memory_budget = default_memory_budget();
    cfg->user_share_pct = 50;
    cfg->request_timeout_ms = 60000;
    cfg->idle_timeout_ms = 600000;
    cfg->gpu = GCD_GPU_AUTO;
    cfg->gpu_min_bytes = 3ull << 20;
    cfg->batch_bytes = 64ull << 20;
    cfg->batch_wait_us = 200;
    cfg->io_threads = 0; /* gcd_io_threads picks */
    cfg->device_lanes = 2;
    cfg->emulated_devices = 1;
    cfg->fail_lane = -1;
    cfg->log_level = LOG_INFO;
    cfg->register_limit = default_register_limit();
    unsigned n_codecs;
    const gcd_codec *const *codecs = gcd_codec_all(&n_codecs);
    for (unsigned k = 0; k < n_codecs; k++)
        for (unsigned i = 0;
             i < codecs[k]->n_options && gcd_codec_option_slot(codecs[k], i) < GCD_MAX_CODEC_OPTIONS; i++)
            cfg->codec_options[gcd_codec_option_slot(codecs[k], i)] = codecs[k]->options[i].default_value;
}

static const setting *find_setting(const char *name)
{
    unsigned n;
    const setting *all = gcd_settings(&n);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(all[i].name, name) == 0)
            return &all[i];
    return NULL;
}

static bool apply(gcd_config *cfg, const char *name, const char *value, const char *where)
{
    const setting *s = find_setting(name);
    if (!s) {
        fprintf(stderr, "gpucompd: %s: unknown setting '%s'\n", where, name);
        return false;
    }
    if (s->set ? !s->set(cfg, value) : !gc_parse_size(value, UINT64_MAX, codec_option_at(cfg, s))) {
        fprintf(stderr, "gpucompd: %s: invalid value '%s' for %s (expected %s)\n", where, value, name,
                s->arg_help);
        return false;
    }
    return true;
}

/*
 * A '#' at the start of a line or after a blank starts a comment that runs to
 * the end of the line, so a value can carry a remark after it. A '#' inside a
 * value (a socket path "/run/a#b.sock") stays part of it; a value cannot
 * contain " #" (give such a socket path with --socket).
 */
static void strip_comment(char *s)
{
    for (char *p = s; (p = strchr(p, '#')) != NULL; p++)
        if (p == s || p[-1] == ' ' || p[-1] == '\t') {
            *p = '\0';
            return;
        }
}

static bool load_file(gcd_config *cfg, const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "gpucompd: cannot open config %s: %s\n", path, strerror(errno));
        return false;
    }
    /* getline: a line of any length is one line (a long remark too). */
    char *line = NULL, where[600];
    size_t cap = 0;
    bool ok = true;
    for (int lineno = 1; ok && getline(&line, &cap, f) >= 0; lineno++) {
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        strip_comment(line);
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            fprintf(stderr, "gpucompd: %s: expected 'key = value'\n", where);
            ok = false;
            break;
        }
        *eq = '\0';
        ok = apply(cfg, trim(s), trim(eq + 1), where);
    }
    free(line);
    fclose(f);
    return ok;
}

/* The options that are not settings, for --help. */
static const struct {
    const char *opt, *help;
} other_options[] = {
    { "      --config=FILE", "read settings (key = value lines) from FILE first" },
    { "  -v, --verbose", "same as --log-level=debug" },
    { "  -h, --help", "show this help" },
    { "  -V, --version", "show the version" },
};

/* One option and its help, the help in a column at width (or on the next line when the option is wider). */
static void usage_line(FILE *out, const char *opt, int width, const char *help)
{
    if ((int)strlen(opt) >= width)
        fprintf(out, "%s\n%*s%s\n", opt, width + 2, "", help);
    else
        fprintf(out, "%-*s  %s\n", width, opt, help);
}

static void usage(FILE *out)
{
    enum { WIDTH = 30 }; /* "      --user-memory-share=PERCENT" and shorter */
    fprintf(out, "Usage: gpucompd [OPTION]...\n"
                 "GPU compression daemon: serves compress/decompress requests on a Unix socket.\n\n");
    unsigned n;
    const setting *settings = gcd_settings(&n);
    for (unsigned i = 0; i < n; i++) {
        char opt[128];
        snprintf(opt, sizeof opt, "      --%s=%s", settings[i].name, settings[i].arg_help);
        usage_line(out, opt, WIDTH, settings[i].help);
    }
    for (size_t i = 0; i < sizeof other_options / sizeof other_options[0]; i++)
        usage_line(out, other_options[i].opt, WIDTH, other_options[i].help);
    fprintf(out, "\nSIZE: bytes, with an optional unit K, M, G or T, each a power of 1024\n"
                 "(written K, Ki, KB or KiB, in any case), e.g. 4GiB. See gpucompd(8).\n");
}

enum { OPT_CONFIG = 256, OPT_SETTING_BASE = 512 };

int gcd_config_parse(gcd_config *cfg, int argc, char **argv)
{
    unsigned n;
    const setting *settings = gcd_settings(&n);
    struct option longopts[N_MOST + 5];
    for (unsigned i = 0; i < n; i++)
        longopts[i] = (struct option){ settings[i].name, required_argument, NULL, OPT_SETTING_BASE + (int)i };
    longopts[n] = (struct option){ "config", required_argument, NULL, OPT_CONFIG };
    longopts[n + 1] = (struct option){ "verbose", no_argument, NULL, 'v' };
    longopts[n + 2] = (struct option){ "help", no_argument, NULL, 'h' };
    longopts[n + 3] = (struct option){ "version", no_argument, NULL, 'V' };
    longopts[n + 4] = (struct option){ NULL, 0, NULL, 0 };

    /* First pass: only --config, so the command line can override the file.
     * optind = 0 makes glibc start over: SIGHUP parses the command line again. */
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "vhV", longopts, NULL)) != -1)
        if (c == OPT_CONFIG && !load_file(cfg, optarg))
            return -1;
    optind = 0;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "vhV", longopts, NULL)) != -1) {
        if (c >= OPT_SETTING_BASE) {
            const setting *s = &settings[c - OPT_SETTING_BASE];
            if (!apply(cfg, s->name, optarg, "command line"))
                return -1;
        } else if (c == 'v') {
            cfg->log_level = LOG_DEBUG;
        } else if (c == 'h') {
            usage(stdout);
            return 1;
        } else if (c == 'V') {
            printf("gpucompd %s\n", PACKAGE_VERSION);
            return 1;
        } else if (c != OPT_CONFIG) {
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpucompd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}
