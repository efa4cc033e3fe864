/*
 * cli_daemon.c - everything gpucomp says to gpucompd: the lazy connection,
 * one request per file, --ping, --stats, and the -v line.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli.h"

#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "wire.h" /* GC_WIRE_DEFAULT_SOCKET, GC_WIRE_SOCKET_ENV */
#include "gc_clock.h"

/* The group a packaged gpucompd's socket belongs to (systemd/gpucompd.socket). */
#define DEFAULT_SOCKET_GROUP "gpucomp"

/* The path gpucomp_connect will use, for messages (same rule as the library). */
static const char *socket_path(const cli_session *s)
{
    if (s->opts.socket && *s->opts.socket)
        return s->opts.socket;
    const char *env = getenv(GC_WIRE_SOCKET_ENV);
    return env && *env ? env : GC_WIRE_DEFAULT_SOCKET;
}

static const char *backend_name(gpucomp_backend b)
{
    return b == GPUCOMP_BACKEND_GPU ? "gpu" : b == GPUCOMP_BACKEND_CPU ? "cpu" : "unknown";
}

/* The name of group gid, or its number. */
static const char *group_name(gid_t gid, char buf[32])
{
    struct group *gr = getgrgid(gid);
    if (gr && gr->gr_name && *gr->gr_name)
        return gr->gr_name;
    snprintf(buf, 32, "%u", (unsigned)gid);
    return buf;
}

static const char *user_name(char buf[32])
{
    struct passwd *pw = getpwuid(getuid());
    if (pw && pw->pw_name && *pw->pw_name)
        return pw->pw_name;
    snprintf(buf, 32, "%u", (unsigned)getuid());
    return buf;
}

/*
 * A daemon is there and this user may not use it: say so with the remedy.
 * The way in is the socket file's group (gpucompd's default allow-groups),
 * unless the file admits its owner alone; a socket we may not even stat
 * (its directory is closed) is taken to have the packaged group.
 */
static void say_refused(cli_session *s)
{
    const char *path = socket_path(s);
    char gbuf[32], ubuf[32];
    const char *group = DEFAULT_SOCKET_GROUP;
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!(st.st_mode & S_IWGRP)) {
            cli_error(s,
                      "permission denied by gpucompd at %s: the socket (mode %04o) admits only its owner, "
                      "uid %u; ask its administrator, or use --local",
                      path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
            return;
        }
        group = group_name(st.st_gid, gbuf);
    }
    const char *user = user_name(ubuf);
    cli_error(s,
              "permission denied by gpucompd at %s: add your user to group '%s' (usermod -aG %s %s, then "
              "log in again), or use --local",
              path, group, group, user);
}

/* A client that runs in this process (the library's local streams); false (reported) if none. */
static bool open_local(cli_session *s)
{
    s->local = true;
    if (gpucomp_open_local(&s->client) == GPUCOMP_OK)
        return true;
    cli_error(s, "%s", gpucomp_connect_error());
    s->fatal = true;
    return false;
}

/*
 * Connected lazily, so that a file skipped for its name never needs the
 * daemon. No daemon is fatal: every other file would fail the same way.
 * Only "nothing listens" falls back to this CPU: a daemon that refuses
 * this user is an error, or the refusal would pass unnoticed (and the work
 * run where the administrator did not mean it to).
 */
bool cli_connect(cli_session *s)
{
    if (s->client)
        return true;
    if (s->opts.local || s->local)
        return open_local(s);
    int rc = gpucomp_connect(s->opts.socket, &s->client);
    if (rc == GPUCOMP_OK)
        return true;
    if (rc == GPUCOMP_E_CONNECT && !s->opts.no_fallback && !s->opts.ping && !s->opts.stats) {
        /* bzip2 needs no daemon: neither do we, but say so (the daemon may be down by mistake). */
        const char *verb = s->opts.mode == CLI_COMPRESS     ? "compressing"
                           : s->opts.mode == CLI_DECOMPRESS ? "decompressing"
                                                            : "testing";
        cli_note(s, "no daemon at %s; %s on this CPU", socket_path(s), verb);
        return open_local(s);
    }
    if (rc == GPUCOMP_E_PERMISSION)
        say_refused(s);
    else if (rc == GPUCOMP_E_CONNECT)
        cli_error(s, "%s (is gpucompd running? set --socket or %s)", gpucomp_connect_error(), GC_WIRE_SOCKET_ENV);
    else
        cli_error(s, "%s", gpucomp_connect_error());
    s->fatal = true;
    return false;
}

void cli_disconnect(cli_session *s)
{
    gpucomp_close(s->client);
    s->client = NULL;
}

bool cli_fits(cli_session *s, const char *name, uint64_t size)
{
    if (!cli_connect(s))
        return false;
    uint64_t max = s->local ? 0 : gpucomp_max_request_size(s->client);
    if ((max && size > max) || size > SIZE_MAX) {
        cli_error(s, "%s: %llu bytes is more than gpucompd takes in one request (%llu bytes)", name,
                  (unsigned long long)size, (unsigned long long)(max ? max : SIZE_MAX));
        return false;
    }
    return true;
}

int cli_request(cli_session *s, bool decompress, const gpucomp_options *o, const uint8_t *in, size_t in_len,
                cli_result *r)
{
    memset(r, 0, sizeof *r);
    if (!cli_connect(s))
        return GPUCOMP_E_CONNECT;
    uint64_t t0 = gc_now_ns();
    void *out;
    int rc = decompress ? gpucomp_decompress(s->client, o, in, in_len, &out, &r->len)
                        : gpucomp_compress(s->client, o, in, in_len, &out, &r->len);
    r->seconds = (double)(gc_now_ns() - t0) / 1e9;
    if (rc != GPUCOMP_OK)
        return rc;
    r->data = out;
    r->backend = gpucomp_last_backend(s->client);
    return GPUCOMP_OK;
}

int cli_exit_for(int rc)
{
    switch (rc) {
    case GPUCOMP_OK: return CLI_EXIT_OK;
    case GPUCOMP_E_CORRUPT:
    case GPUCOMP_E_TRUNCATED:
    case GPUCOMP_E_CRC: return CLI_EXIT_CORRUPT;
    case GPUCOMP_E_INVALID:  /* the CLI sent what it should not have */
    case GPUCOMP_E_PROTOCOL: /* one side misread the other */
    case GPUCOMP_E_INTERNAL:
    case GPUCOMP_E_IN_USE: /* the CLI misused its own client */ return CLI_EXIT_INTERNAL;
    default: /* no daemon, limits, memory, busy, device, permission */ return CLI_EXIT_ERROR;
    }
}

const char *cli_last_error(const cli_session *s)
{
    return s->client ? gpucomp_last_error(s->client) : "";
}

void cli_request_failed(cli_session *s, const char *name, int rc)
{
    if (rc == GPUCOMP_E_CONNECT && s->fatal)
        return; /* cli_connect said it */
    const char *msg = cli_last_error(s);
    cli_fail(s, cli_exit_for(rc), "%s: %s", name, *msg ? msg : gpucomp_strerror(rc));
    /* Some failures close the connection; a fresh one for the next file is always safe. */
    cli_disconnect(s);
}

bool cli_run(cli_session *s, const char *name, bool decompress, const gpucomp_options *o, const uint8_t *in,
             size_t in_len, cli_result *r)
{
    int rc = cli_request(s, decompress, o, in, in_len, r);
    if (rc != GPUCOMP_OK)
        cli_request_failed(s, name, rc);
    return rc == GPUCOMP_OK;
}

/*
 * bzip2's "% saved", except that a saving that rounds to zero prints
 * "0.00", never "-0.00" (bzip2 prints -0.00 when the output is a hair
 * longer than the input, as rle's is for data with no runs); a saving that
 * shows as negative is a real loss and keeps its sign.
 */
static double percent_saved(size_t in_len, size_t out_len)
{
    double saved = 100.0 * (1.0 - (double)out_len / (double)in_len);
    return saved > -0.005 && saved < 0.005 ? 0.0 : saved;
}

/*
 * bzip2's -v line, then the backend in parentheses, so that a script that
 * parses bzip2's line parses ours:
 *   "  FILE:  X.XXX:1,  Y.YYY bits/byte, ZZ.ZZ% saved, N in, M out. (gpu)"
 *   "  FILE: done (cpu)" after -d, "  FILE: ok (cpu)" after -t.
 * Names are padded to the longest operand (at least 7, "(stdin)"), as bzip2 does.
 */
void cli_report(const cli_session *s, const char *name, size_t in_len, const cli_result *r)
{
    if (s->opts.verbosity < 1)
        return;
    int pad = s->opts.name_width - (int)strlen(name);
    fprintf(stderr, "  %s: %*s", name, pad > 0 ? pad : 0, "");
    const char *backend = s->local ? "cpu, local" : backend_name(r->backend);
    if (s->opts.mode == CLI_TEST) {
        fprintf(stderr, "ok (%s)\n", backend);
    } else if (s->opts.mode == CLI_DECOMPRESS) {
        fprintf(stderr, "done (%s)\n", backend);
    } else if (in_len == 0) {
        fprintf(stderr, " no data compressed. (%s)\n", backend);
    } else {
        double nin = (double)in_len, nout = (double)r->len;
        fprintf(stderr, "%6.3f:1, %6.3f bits/byte, %5.2f%% saved, %zu in, %zu out. (%s)\n",
                nout > 0 ? nin / nout : 0.0, 8.0 * nout / nin, percent_saved(in_len, r->len), in_len, r->len,
                backend);
    }
}

int cli_ping(cli_session *s)
{
    if (!cli_connect(s))
        return s->status;
    uint64_t t0 = gc_now_ns();
    int rc = gpucomp_ping(s->client);
    double ms = (double)(gc_now_ns() - t0) / 1e6;
    if (rc != GPUCOMP_OK) {
        cli_error(s, "ping: %s", gpucomp_last_error(s->client));
        return s->status;
    }
    const char *v = gpucomp_server_version(s->client);
    printf("gpucompd%s%s at %s is alive (round trip %.3f ms)\n", *v ? " " : "", v, socket_path(s), ms);
    return s->status;
}

/* 123456789 -> "117.7 MiB" */
static const char *human(uint64_t n, char buf[32])
{
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

/* One lane (the library's gpucomp_device_stats: the name is kept for its ABI). */
static void print_lane(unsigned i, const gpucomp_device_stats *d)
{
    char a[32], b[32];
    printf("  lane %u:          %s on GPU %u%s\n", i, d->name, d->gpu,
           d->retired ? " (retired after a failure)" : "");
    printf("    requests:      %llu in %llu batches, %llu fell back to the cpu, queue %u\n",
           (unsigned long long)d->requests, (unsigned long long)d->batches, (unsigned long long)d->fallbacks,
           d->queue_depth);
    printf("    bytes:         %s in, %s out\n", human(d->bytes_in, a), human(d->bytes_out, b));
    printf("    in flight:     %u requests, %s\n", d->requests_in_flight, human(d->bytes_in_flight, a));
    printf("    time:          %.1f ms copy in, %.1f ms kernels, %.1f ms copy out, %.1f ms wall\n",
           (double)d->h2d_ns / 1e6, (double)d->kernel_ns / 1e6, (double)d->d2h_ns / 1e6, (double)d->wall_ns / 1e6);
}

static void print_stats(const cli_session *s, const gpucomp_stats *st)
{
    char a[32], b[32];
    const char *v = gpucomp_server_version(s->client);
    printf("gpucompd%s%s at %s\n", *v ? " " : "", v, socket_path(s));
    printf("  backend:         %s (%u GPU%s, %u lane%s)\n", st->backend, st->gpus, st->gpus == 1 ? "" : "s",
           st->gpu_devices, st->gpu_devices == 1 ? "" : "s");
    printf("  uptime:          %.1f s\n", (double)st->uptime_ms / 1e3);
    printf("  connections:     %u\n", st->connections);
    printf("  worker threads:  %u\n", st->worker_threads);
    printf("  queue depth:     %u\n", st->queue_depth);
    printf("  requests ok:     %llu (cpu %llu, gpu %llu)\n", (unsigned long long)st->requests_ok,
           (unsigned long long)st->cpu_requests, (unsigned long long)st->gpu_requests);
    printf("  requests failed: %llu\n", (unsigned long long)st->requests_failed);
    printf("  bytes in:        %llu (%s)\n", (unsigned long long)st->bytes_in, human(st->bytes_in, a));
    printf("  bytes out:       %llu (%s)\n", (unsigned long long)st->bytes_out, human(st->bytes_out, a));
    printf("  memory:          %s in use of %s budget\n", human(st->memory_in_use, a),
           human(st->memory_budget, b));
    printf("  registered:      %s of %s limit\n", human(st->registered_bytes, a), human(st->register_limit, b));
    for (uint32_t i = 0; i < st->n_routing && i < GPUCOMP_MAX_CODECS; i++)
        printf("  routing:         %s\n", st->routing[i]);
    printf("  routed by load:  %u requests below their break-even ran on a GPU (the cpu pool was queued)\n",
           st->gpu_by_load);
    for (uint32_t i = 0; i < st->gpu_devices && i < GPUCOMP_MAX_DEVICES; i++)
        print_lane(i, &st->devices[i]);
}

/* s as a JSON string: quotes, backslashes and control characters escaped; other bytes as they are. */
static void json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

#define JU64(name, v) printf("%s\"" name "\": %llu", sep, (unsigned long long)(v)), sep = ", "

static void json_lane(const gpucomp_device_stats *d)
{
    const char *sep = "";
    printf("{\"name\": ");
    json_string(d->name);
    sep = ", ";
    JU64("gpu", d->gpu);
    JU64("batches", d->batches);
    JU64("requests", d->requests);
    JU64("bytes_in", d->bytes_in);
    JU64("bytes_out", d->bytes_out);
    JU64("h2d_ns", d->h2d_ns);
    JU64("kernel_ns", d->kernel_ns);
    JU64("d2h_ns", d->d2h_ns);
    JU64("wall_ns", d->wall_ns);
    JU64("fallbacks", d->fallbacks);
    JU64("queue_depth", d->queue_depth);
    JU64("requests_in_flight", d->requests_in_flight);
    JU64("bytes_in_flight", d->bytes_in_flight);
    printf("%s\"retired\": %s}", sep, d->retired ? "true" : "false");
}

/* --stats --json: every field of gpucomp_stats, one object on one line, for scripts. */
static void print_stats_json(const cli_session *s, const gpucomp_stats *st)
{
    const char *sep = "";
    printf("{\"version\": ");
    json_string(gpucomp_server_version(s->client));
    printf(", \"socket\": ");
    json_string(socket_path(s));
    printf(", \"backend\": ");
    json_string(st->backend);
    sep = ", ";
    JU64("uptime_ms", st->uptime_ms);
    JU64("connections", st->connections);
    JU64("requests_ok", st->requests_ok);
    JU64("requests_failed", st->requests_failed);
    JU64("bytes_in", st->bytes_in);
    JU64("bytes_out", st->bytes_out);
    JU64("worker_threads", st->worker_threads);
    JU64("queue_depth", st->queue_depth);
    JU64("memory_in_use", st->memory_in_use);
    JU64("memory_budget", st->memory_budget);
    JU64("cpu_requests", st->cpu_requests);
    JU64("gpu_requests", st->gpu_requests);
    JU64("registered_bytes", st->registered_bytes);
    JU64("register_limit", st->register_limit);
    JU64("gpus", st->gpus);
    JU64("gpu_by_load", st->gpu_by_load);
    /* The library's devices[] and gpu_devices are lanes: named so here. */
    JU64("n_lanes", st->gpu_devices);
    printf(", \"lanes\": [");
    for (uint32_t i = 0; i < st->gpu_devices && i < GPUCOMP_MAX_DEVICES; i++) {
        fputs(i ? ", " : "", stdout);
        json_lane(&st->devices[i]);
    }
    putchar(']');
    JU64("n_routing", st->n_routing);
    printf(", \"routing\": [");
    for (uint32_t i = 0; i < st->n_routing && i < GPUCOMP_MAX_CODECS; i++) {
        fputs(i ? ", " : "", stdout);
        json_string(st->routing[i]);
    }
    printf("]}\n");
}

int cli_stats(cli_session *s)
{
    if (!cli_connect(s))
        return s->status;
    gpucomp_stats st;
    if (gpucomp_stats_get(s->client, &st) != GPUCOMP_OK) {
        cli_error(s, "stats: %s", gpucomp_last_error(s->client));
        return s->status;
    }
    if (s->opts.json)
        print_stats_json(s, &st);
    else
        print_stats(s, &st);
    return s->status;
}
