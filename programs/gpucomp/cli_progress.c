/* cli_progress.c - the progress line (cli_progress.h): one thread that redraws it. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli_progress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gc_clock.h"

#define FIRST_DRAW_NS 1000000000ull /* a job shorter than this never shows a line */
#define REDRAW_NS 250000000ull      /* at most four redraws a second */

static struct {
    bool running;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;  /* under lock */
    bool drawn; /* something is on the line (thread only, then end) */
    const char *name;
    const char *verb;  /* "compressing", ... */
    const char *where; /* "gpucompd" or "this CPU" */
    uint64_t total, t0, t_work;
    _Atomic uint64_t done;
    _Atomic uint64_t out; /* streaming: output bytes so far */
    atomic_bool working;
    atomic_bool streaming;
    uint64_t rate_t, rate_done; /* stream_rate's last sample (thread only, reset by begin) */
    double rate;
} p = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* 123456789 -> "117.7 MiB" */
static const char *human(double v, char buf[32])
{
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

static const char *clock_text(double seconds, char buf[32])
{
    unsigned long t = seconds > 0 ? (unsigned long)(seconds + 0.5) : 0;
    if (t >= 3600)
        snprintf(buf, 32, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, 32, "%lu:%02lu", t / 60, t % 60);
    return buf;
}

/*
 * The streaming rate, smoothed over the last second or so of redraws: the
 * daemon takes the first window's worth of input at once (up to ~128 MiB
 * ahead of the work), so the rate since the start would promise too much.
 * Thread only.
 */
static double stream_rate(uint64_t now, uint64_t done)
{
    if (p.rate_t && now > p.rate_t && done >= p.rate_done) {
        double inst = (double)(done - p.rate_done) / ((double)(now - p.rate_t) / 1e9);
        p.rate = p.rate > 0 ? 0.75 * p.rate + 0.25 * inst : inst;
    }
    p.rate_t = now;
    p.rate_done = done;
    return p.rate;
}

/*
 * "  NAME: compressing 1.2 GiB on gpucompd, 0:05 so far, 310.0 MiB out, 245.8 MiB/s, ETA 0:16":
 * the first part is the whole-buffer line's (scripts and tests look for it), the rest what streams add.
 * Rate and ETA are of the input handed over, until all of it is.
 */
static int draw_stream(char *line, size_t size, uint64_t now, uint64_t done)
{
    char a[32], b[32], c[32], e[32], f[32];
    double secs = (double)(now - p.t0) / 1e9, rate = stream_rate(now, done);
    int n = snprintf(line, size, "  %.40s: %s %s on %s, %s so far, %s out", p.name, p.verb, human((double)done, a),
                     p.where, clock_text(secs, e), human((double)atomic_load(&p.out), b));
    if (n <= 0 || (size_t)n >= size || rate <= 0 || (p.total && done >= p.total))
        return n;
    if (p.total)
        return n + snprintf(line + n, size - (size_t)n, ", %s/s, ETA %s", human(rate, c),
                            clock_text((double)(p.total - done) / rate, f));
    return n + snprintf(line + n, size - (size_t)n, ", %s/s", human(rate, c));
}

static void draw(uint64_t now)
{
    char line[256], a[32], b[32], c[32], e[32];
    uint64_t done = atomic_load(&p.done);
    int n;
    if (atomic_load(&p.streaming)) {
        n = draw_stream(line, sizeof line, now, done);
    } else if (atomic_load(&p.working)) {
        n = snprintf(line, sizeof line, "  %.40s: %s %s on %s, %s so far", p.name, p.verb, human((double)done, a),
                     p.where, clock_text((double)(now - p.t_work) / 1e9, e));
    } else {
        double secs = (double)(now - p.t0) / 1e9, rate = secs > 0 ? (double)done / secs : 0;
        if (p.total && rate > 0 && done <= p.total)
            n = snprintf(line, sizeof line, "  %.40s: read %s of %s, %s/s, ETA %s", p.name, human((double)done, a),
                         human((double)p.total, b), human(rate, c),
                         clock_text((double)(p.total - done) / rate, e));
        else
            n = snprintf(line, sizeof line, "  %.40s: read %s, %s/s", p.name, human((double)done, a),
                         human(rate, c));
    }
    if (n > 0) {
        fprintf(stderr, "\r%s\033[K", line);
        fflush(stderr);
        p.drawn = true;
    }
}

static void *progress_thread(void *arg)
{
    (void)arg;
    uint64_t next = p.t0 + FIRST_DRAW_NS;
    pthread_mutex_lock(&p.lock);
    while (!p.stop) {
        uint64_t now = gc_now_ns();
        if (now >= next) {
            draw(now);
            next = now + REDRAW_NS;
        }
        /* The condition variable runs on CLOCK_REALTIME: wait a relative amount from it. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t wait = next > now ? next - now : REDRAW_NS;
        ts.tv_sec += (time_t)(wait / 1000000000u);
        ts.tv_nsec += (long)(wait % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p.wake, &p.lock, &ts);
    }
    pthread_mutex_unlock(&p.lock);
    return NULL;
}

void cli_progress_begin(const cli_session *s, const char *name, uint64_t total)
{
    if (p.running || s->opts.verbosity < 0 || !isatty(STDERR_FILENO))
        return;
    static const char *verbs[] = {
        [CLI_COMPRESS] = "compressing", [CLI_DECOMPRESS] = "decompressing", [CLI_TEST] = "testing"
    };
    p.name = name;
    p.verb = verbs[s->opts.mode];
    p.where = s->local ? "this CPU" : "gpucompd";
    p.total = total;
    p.t0 = gc_now_ns();
    p.stop = false;
    p.drawn = false;
    atomic_store(&p.done, 0);
    atomic_store(&p.out, 0);
    atomic_store(&p.working, false);
    atomic_store(&p.streaming, false);
    p.rate_t = p.rate_done = 0;
    p.rate = 0;
    if (pthread_cond_init(&p.wake, NULL) != 0)
        return;
    if (pthread_create(&p.thread, NULL, progress_thread, NULL) != 0) {
        pthread_cond_destroy(&p.wake);
        return;
    }
    p.running = true;
}

void cli_progress_add(uint64_t n)
{
    atomic_fetch_add(&p.done, n);
}

void cli_progress_working(void)
{
    p.t_work = gc_now_ns(); /* read by the thread only after the store below */
    atomic_store(&p.working, true);
}

void cli_progress_stream(uint64_t in, uint64_t out)
{
    atomic_store(&p.done, in);
    atomic_store(&p.out, out);
    atomic_store(&p.streaming, true);
}

void cli_progress_end(void)
{
    if (!p.running)
        return;
    pthread_mutex_lock(&p.lock);
    p.stop = true;
    pthread_cond_signal(&p.wake);
    pthread_mutex_unlock(&p.lock);
    pthread_join(p.thread, NULL);
    pthread_cond_destroy(&p.wake);
    p.running = false;
    if (p.drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}
