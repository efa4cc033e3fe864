/*
 * cli_file.c - one operand of gpucomp, the way gzip and bzip2 treat it:
 * decide whether to touch it at all, pick the output name and codec, stream
 * it through the daemon a read at a time (writing the output as it comes, so memory
 * stays bounded whatever the size), and only then remove the input. Local
 * runs (--local, or no daemon) stream the same way through the library's
 * in-process client (its local streams); only a daemon without streams gets
 * the input read whole and one request.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_names.h"
#include "cli_output.h"
#include "cli_progress.h"

typedef struct job {
    const char *name; /* for messages: the operand, or "(stdin)" */
    int fd;
    struct stat st;
    char *out_name; /* NULL: standard output, or nothing for -t */
    bool has_suffix_codec;
    gpucomp_codec suffix_codec; /* what the input's suffix says (-d) */
} job;

/* Writes FILE.suffix (or FILE) next to FILE and removes FILE, rather than using stdout. */
static bool in_place(const cli_session *s)
{
    return s->opts.mode != CLI_TEST && !s->opts.to_stdout;
}

/*
 * Read fd to EOF after the first have bytes, already in *buf (malloc'd, or
 * NULL with have 0); size is a hint (st_size), the data decides. Returns 0
 * or an errno (then *buf is freed).
 */
static int read_all(int fd, off_t size, uint8_t **buf, size_t *len, size_t have)
{
    /* +1 so that a file of exactly st_size bytes hits EOF without a realloc */
    size_t cap = size > 0 && (uint64_t)size < SIZE_MAX / 2 ? (size_t)size + 1 : 1u << 16;
    cap = cap > have ? cap : have + 1;
    size_t n = have;
    uint8_t *p = realloc(*buf, cap);
    if (!p)
        free(*buf);
    *buf = NULL;
    while (p) {
        if (n == cap) {
            uint8_t *q = cap <= SIZE_MAX / 2 ? realloc(p, cap * 2) : NULL;
            if (!q)
                break;
            p = q;
            cap *= 2;
        }
        ssize_t r = read(fd, p + n, cap - n);
        if (r > 0) {
            n += (size_t)r;
            cli_progress_add((uint64_t)r);
        } else if (r == 0) {
            *buf = p;
            *len = n;
            return 0;
        } else if (errno != EINTR) {
            int e = errno;
            free(p);
            return e;
        }
    }
    free(p);
    return ENOMEM;
}

/* Fill buf (len bytes) from fd, short only at end of input. Returns 0 or an errno; *got says how much. */
static int read_some(int fd, uint8_t *buf, size_t len, size_t *got)
{
    *got = 0;
    while (*got < len) {
        ssize_t r = read(fd, buf + *got, len - *got);
        if (r > 0)
            *got += (size_t)r;
        else if (r == 0)
            return 0;
        else if (errno != EINTR)
            return errno;
    }
    return 0;
}

/* The name to write for -z or -d without -c; false (reported) to skip the file. */
static bool plan_output_name(cli_session *s, job *j)
{
    if (s->opts.mode == CLI_COMPRESS) {
        const char *sfx = cli_known_suffix(j->name);
        if (sfx && !s->opts.force) {
            cli_warn(s, "%s already has %s suffix -- unchanged", j->name, sfx);
            return false;
        }
        j->out_name = cli_compressed_name(j->name, s->opts.codec.codec);
    } else if (cli_known_suffix(j->name)) {
        j->out_name = cli_decompressed_name(j->name, &j->suffix_codec);
        j->has_suffix_codec = true;
    } else {
        /* bzip2's way: decompress anyway, into FILE.out; the data decides the codec. */
        size_t n = strlen(j->name);
        j->out_name = malloc(n + sizeof ".out");
        if (j->out_name) {
            memcpy(j->out_name, j->name, n);
            memcpy(j->out_name + n, ".out", sizeof ".out");
            cli_note(s, "Can't guess original name for %s -- using %s", j->name, j->out_name);
        }
    }
    if (!j->out_name)
        cli_error(s, "%s: out of memory", j->name);
    return j->out_name != NULL;
}

/* Checks before any work when writing next to the input; false (reported) to skip. */
static bool plan_output(cli_session *s, job *j)
{
    if (!plan_output_name(s, j))
        return false;
    /* Removing one name of a hard-linked file frees nothing and surprises. */
    if (j->st.st_nlink > 1 && !s->opts.keep && !s->opts.force) {
        unsigned long others = (unsigned long)j->st.st_nlink - 1;
        cli_warn(s, "%s has %lu other link%s -- unchanged", j->name, others, others == 1 ? "" : "s");
        return false;
    }
    struct stat st;
    /* An early answer for the common case; the final rename checks again, atomically. */
    if (!s->opts.force && lstat(j->out_name, &st) == 0) {
        cli_error(s, "%s already exists; not overwritten (use -f to overwrite)", j->out_name);
        return false;
    }
    return true;
}

/* Is this operand something to work on? Opens it; false (reported) to skip. */
static bool open_input(cli_session *s, job *j)
{
    struct stat st;
    if (lstat(j->name, &st) != 0) {
        cli_error(s, "%s: %s", j->name, strerror(errno));
        return false;
    }
    if (S_ISLNK(st.st_mode) && in_place(s) && !s->opts.force) {
        cli_warn(s, "%s is a symbolic link -- ignored", j->name);
        return false;
    }
    /* stat() before open(): opening a FIFO we are about to refuse would block. */
    if (stat(j->name, &st) != 0) {
        cli_error(s, "%s: %s", j->name, strerror(errno));
        return false;
    }
    if (S_ISDIR(st.st_mode)) {
        cli_warn(s, "%s is a directory -- ignored", j->name);
        return false;
    }
    if (!S_ISREG(st.st_mode) && in_place(s)) {
        cli_warn(s, "%s is not a regular file -- ignored", j->name);
        return false;
    }
    j->fd = open(j->name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (j->fd < 0 || fstat(j->fd, &j->st) != 0) {
        cli_error(s, "%s: %s", j->name, strerror(errno));
        return false;
    }
    return true;
}

/* Codec for -d/-t: the data's magic bytes, else -a, else the suffix; false: none (not reported). */
static bool choose_codec(const cli_session *s, const job *j, const uint8_t *in, size_t len, gpucomp_options *o)
{
    *o = s->opts.codec;
    if (s->opts.mode == CLI_COMPRESS)
        return true;
    gpucomp_codec c;
    if (cli_codec_from_magic(in, len, &c))
        o->codec = c;
    else if (j->has_suffix_codec && !s->opts.codec_given)
        o->codec = j->suffix_codec;
    else if (!s->opts.codec_given)
        return false; /* the caller says so, once the progress line is gone */
    return true;
}

static bool write_output_file(cli_session *s, const job *j, const cli_result *r)
{
    cli_output out;
    int e = cli_output_open(&out, j->out_name);
    if (e) {
        cli_error(s, "%s: cannot create a temporary file: %s", j->out_name, strerror(e));
        return false;
    }
    e = cli_write_all(out.fd, r->data, r->len);
    int meta = e ? 0 : cli_output_copy_meta(&out, &j->st);
    if (meta)
        cli_warn(s, "%s: cannot preserve mode or times: %s", j->out_name, strerror(meta));
    if (!e)
        e = cli_output_commit(&out, s->opts.force);
    if (e == EEXIST)
        cli_error(s, "%s already exists; not overwritten (use -f to overwrite)", j->out_name);
    else if (e)
        cli_error(s, "%s: write error: %s", j->out_name, strerror(e));
    if (e)
        cli_output_abort(&out);
    return e == 0;
}

static bool deliver(cli_session *s, const job *j, const cli_result *r)
{
    if (s->opts.mode == CLI_TEST)
        return true;
    if (j->out_name)
        return write_output_file(s, j, r);
    int e = cli_write_all(STDOUT_FILENO, r->data, r->len);
    if (e)
        cli_error(s, "(stdout): write error: %s", strerror(e));
    return e == 0;
}

/* Did the codec stop at trailing garbage after a complete bzip2 stream? */
static bool trailing_garbage(cli_session *s, const gpucomp_options *o, int rc)
{
    return s->opts.mode != CLI_COMPRESS && o->codec == GPUCOMP_CODEC_BZIP2 && rc == GPUCOMP_E_CORRUPT &&
           strstr(cli_last_error(s), "trailing garbage after stream");
}

/*
 * bzip2 decodes the streams before trailing garbage (tape padding, a
 * newline, junk) and warns. The codec reports the garbage but not where it
 * starts: decode again the longest prefix that ends with an end-of-stream
 * marker and leaves garbage after it. A marker's 48 bits can occur by chance
 * (in the garbage itself), so a few candidates are tried, longest first.
 */
static int decode_before_garbage(cli_session *s, const job *j, const gpucomp_options *o, const uint8_t *in,
                                 size_t in_len, cli_result *r)
{
    enum { MAX_TRIES = 8 };
    char first_error[256];
    snprintf(first_error, sizeof first_error, "%s", cli_last_error(s));
    size_t end = in_len;
    for (int tries = 0; tries < MAX_TRIES; tries++) {
        end = cli_bzip2_stream_end_before(in, in_len, end);
        if (end == 0)
            break;
        int rc = cli_request(s, true, o, in, end, r);
        if (rc == GPUCOMP_OK) {
            cli_note(s, "%s: trailing garbage after EOF ignored", j->name);
            return rc;
        }
        if (rc != GPUCOMP_E_CORRUPT && rc != GPUCOMP_E_CRC && rc != GPUCOMP_E_TRUNCATED) {
            cli_request_failed(s, j->name, rc);
            return rc;
        }
    }
    cli_fail(s, CLI_EXIT_CORRUPT, "%s: %s", j->name, first_error);
    return GPUCOMP_E_CORRUPT;
}

/* The input is done with: remove it if the job writes next to it (-k keeps it). */
static void finish_input(cli_session *s, const job *j)
{
    if (j->out_name && !s->opts.keep && unlink(j->name) != 0)
        cli_warn(s, "%s: cannot remove: %s", j->name, strerror(errno));
}

/*
 * One whole-buffer request: local runs, and a daemon without streams. The
 * first have bytes of the input are already in in (malloc'd, or NULL).
 */
static void run_whole(cli_session *s, job *j, uint8_t *in, size_t have)
{
    if (S_ISREG(j->st.st_mode) && !cli_fits(s, j->name, (uint64_t)j->st.st_size)) {
        cli_progress_end();
        free(in);
        return;
    }
    size_t in_len = 0;
    int e = read_all(j->fd, S_ISREG(j->st.st_mode) ? j->st.st_size : 0, &in, &in_len, have);
    if (e) {
        cli_progress_end();
        cli_error(s, "%s: read error: %s", j->name, strerror(e));
        return;
    }
    gpucomp_options o;
    cli_result r;
    cli_progress_working();
    bool chosen = choose_codec(s, j, in, in_len, &o);
    int rc = chosen ? cli_request(s, s->opts.mode != CLI_COMPRESS, &o, in, in_len, &r) : GPUCOMP_OK;
    cli_progress_end(); /* before any message */
    if (!chosen)
        cli_fail(s, CLI_EXIT_CORRUPT, "%s is not a bzip2 file (nor rle)", j->name);
    if (chosen) {
        if (rc != GPUCOMP_OK && trailing_garbage(s, &o, rc))
            rc = decode_before_garbage(s, j, &o, in, in_len, &r);
        else if (rc != GPUCOMP_OK)
            cli_request_failed(s, j->name, rc);
        if (rc == GPUCOMP_OK && deliver(s, j, &r)) {
            cli_report(s, j->name, in_len, &r);
            finish_input(s, j);
        }
        gpucomp_free(r.data);
    }
    free(in);
}

/* ---- streaming through the daemon ---------------------------------------- */

/* Bytes read from the input at a time, and output taken from the stream at a time. */
#define READ_SIZE ((size_t)1 << 20)

/* One streamed file: its buffers, its stream, where its output goes. */
typedef struct streamed {
    gpucomp_stream *st;
    uint8_t *ibuf, *obuf;
    uint8_t *in;              /* the bytes read: in ibuf, or in the stream's ring */
    size_t have;              /* bytes in it */
    bool eof;                 /* it holds the input's last bytes */
    uint64_t read_total;      /* input bytes read */
    cli_output out;           /* the temporary output file (a FILE operand without -c) */
    int out_fd;               /* where output goes: out.fd, stdout, or -1 (-t: nowhere) */
    int write_error;          /* errno of a failed output write */
    int read_error;           /* errno of a failed input read */
    bool file;                /* the daemon read the input file itself (gpucomp_compress_file) */
    gpucomp_file_result done; /* and this is what it did */
} streamed;

static uint64_t bytes_out(const streamed *x)
{
    return x->file ? x->done.bytes_out : gpucomp_stream_bytes_out(x->st);
}

/*
 * Into the stream's ring where it offers room (the library then sends the
 * bytes without copying them), else into ibuf (the first read, before
 * the stream is open to choose the codec; a full window; no ring).
 */
static int next_read(const job *j, streamed *x)
{
    size_t room = 0;
    uint8_t *space = x->st ? gpucomp_stream_input_space(x->st, &room) : NULL;
    size_t want = space && room < READ_SIZE ? room : READ_SIZE;
    x->in = space ? space : x->ibuf;
    x->read_error = read_some(j->fd, x->in, want, &x->have);
    x->read_total += x->have;
    x->eof = x->have < want;
    return x->read_error;
}

/*
 * A pipe at either end is made as large as an unprivileged process may
 * (fs.pipe-max-size): with the default 64 KiB every read or write moves a
 * few pages and wakes the other side, which holds a stream far below the
 * daemon's speed (docs/DECISIONS.md, "Pipes as wide as allowed").
 */
static void widen_pipe(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
        return;
    int most = 0;
    FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");
    if (f) {
        if (fscanf(f, "%d", &most) != 1)
            most = 0;
        fclose(f);
    }
    if (most > fcntl(fd, F_GETPIPE_SZ))
        (void)fcntl(fd, F_SETPIPE_SZ, most); /* best effort: another user's pipe may refuse */
}

/* Where the output goes; false (reported) if the temporary file cannot be made. */
static bool open_sink(cli_session *s, const job *j, streamed *x)
{
    x->out_fd = -1;
    if (s->opts.mode == CLI_TEST)
        return true;
    if (!j->out_name) {
        x->out_fd = STDOUT_FILENO;
        widen_pipe(x->out_fd);
        return true;
    }
    int e = cli_output_open(&x->out, j->out_name);
    if (e) {
        cli_error(s, "%s: cannot create a temporary file: %s", j->out_name, strerror(e));
        return false;
    }
    x->out_fd = x->out.fd;
    return true;
}

/*
 * Write the output the stream holds where it lies (its output ring, or the
 * frame it came in) instead of copying it into obuf first; a stream with
 * no such view (one run in this process) fills obuf.
 */
static void write_view(streamed *x)
{
    size_t n;
    const void *p;
    while ((p = gpucomp_stream_output_view(x->st, &n)) != NULL) {
        if (x->out_fd >= 0 && !x->write_error)
            x->write_error = cli_write_all(x->out_fd, p, n);
        gpucomp_stream_output_release(x->st, n);
    }
}

/* Move ibuf through the stream (op: CONTINUE, or END for the last read), writing the output as it comes. */
static int pump_read(streamed *x, gpucomp_end_op op)
{
    gpucomp_inbuf in = { x->in, x->have, 0 };
    size_t pending = 0;
    int rc;
    do {
        write_view(x);
        /* a daemon's stream hands its output out by view: no buffer, so nothing is copied into one */
        bool by_view = gpucomp_stream_backend(x->st) != GPUCOMP_BACKEND_LOCAL;
        gpucomp_outbuf out = { x->obuf, by_view ? 0 : READ_SIZE, 0 };
        rc = gpucomp_stream_run(x->st, &in, &out, op, &pending);
        if (out.pos && x->out_fd >= 0 && !x->write_error)
            x->write_error = cli_write_all(x->out_fd, x->obuf, out.pos);
        write_view(x);
        cli_progress_stream(gpucomp_stream_bytes_in(x->st), gpucomp_stream_bytes_out(x->st));
    } while (rc == GPUCOMP_OK && !x->write_error && (in.pos < in.size || (op == GPUCOMP_END && pending)));
    return rc;
}

/*
 * The whole input through the open stream. A decompression that ends early
 * (trailing garbage after the last bzip2 stream) stops reading there: the
 * rest is ignored, as bzip2 ignores it.
 */
static int pump_all(const job *j, streamed *x)
{
    for (;;) {
        gpucomp_end_op op = x->eof ? GPUCOMP_END : GPUCOMP_CONTINUE;
        int rc = pump_read(x, op);
        if (rc != GPUCOMP_OK || x->write_error || op == GPUCOMP_END)
            return rc;
        if (gpucomp_stream_trailing_garbage(x->st, NULL)) {
            x->have = 0;
            x->eof = true;
        } else if (next_read(j, x)) {
            return GPUCOMP_OK; /* the caller reports read_error */
        }
    }
}

/* The stream is done and its output complete: give the output its name, report, remove the input. */
static void finish_streamed(cli_session *s, const job *j, streamed *x, gpucomp_backend backend)
{
    if (j->out_name) {
        int meta = cli_output_copy_meta(&x->out, &j->st);
        if (meta)
            cli_warn(s, "%s: cannot preserve mode or times: %s", j->out_name, strerror(meta));
        int e = cli_output_commit(&x->out, s->opts.force);
        if (e == EEXIST)
            cli_error(s, "%s already exists; not overwritten (use -f to overwrite)", j->out_name);
        else if (e)
            cli_error(s, "%s: write error: %s", j->out_name, strerror(e));
        if (e) {
            cli_output_abort(&x->out);
            return;
        }
    }
    cli_result r = { .len = (size_t)bytes_out(x), .backend = backend };
    cli_report(s, j->name, (size_t)(x->file ? x->done.bytes_in : x->read_total), &r);
    finish_input(s, j);
}

/* After the stream ran (rc): success, or the one message that says why not. */
static void conclude(cli_session *s, const job *j, streamed *x, int rc)
{
    gpucomp_backend backend = x->file ? x->done.backend : gpucomp_stream_backend(x->st);
    bool ok = rc == GPUCOMP_OK && !x->write_error && !x->read_error;
    if (ok)
        finish_streamed(s, j, x, backend); /* bytes_out is read from the stream: free it after */
    gpucomp_stream_free(x->st);            /* an unfinished stream is cancelled on the daemon */
    x->st = NULL;
    if (ok)
        return;
    if (j->out_name)
        cli_output_abort(&x->out);
    if (rc != GPUCOMP_OK)
        cli_request_failed(s, j->name, rc);
    else if (x->read_error)
        cli_error(s, "%s: read error: %s", j->name, strerror(x->read_error));
    else
        cli_error(s, "%s: write error: %s", j->out_name ? j->out_name : "(stdout)", strerror(x->write_error));
}

/*
 * An rle frame larger than the daemon's stream window (written by a
 * whole-buffer request: gpucomp before streams, --local) cannot be streamed:
 * the daemon refuses it with LIMIT before any output. A regular file can be
 * read again from the start and decompressed in one request instead.
 */
static bool retry_whole(cli_session *s, const job *j, streamed *x, int rc)
{
    if (rc != GPUCOMP_E_LIMIT || s->opts.mode == CLI_COMPRESS || bytes_out(x) != 0 || !S_ISREG(j->st.st_mode) ||
        lseek(j->fd, 0, SEEK_SET) != 0)
        return false;
    gpucomp_stream_free(x->st);
    x->st = NULL;
    if (j->out_name)
        cli_output_abort(&x->out);
    return true;
}

/*
 * A whole regular file with somewhere to write: the daemon reads it itself
 * (and writes a regular output file itself), so its bytes never cross the
 * socket. Not for -t, whose output goes nowhere.
 */
static int run_file(cli_session *s, streamed *x, int in_fd, const gpucomp_options *o)
{
    x->file = true;
    if (s->opts.mode == CLI_COMPRESS)
        return gpucomp_compress_file(s->client, o, in_fd, x->out_fd, &x->done);
    return gpucomp_decompress_file(s->client, o, in_fd, x->out_fd, &x->done);
}

/* Open the stream for j's codec; rc of gpucomp_stream_open, or -1 (reported) when no codec fits. */
static int open_stream(cli_session *s, const job *j, streamed *x, gpucomp_options *o)
{
    if (!choose_codec(s, j, x->ibuf, x->have, o)) {
        cli_progress_end();
        cli_fail(s, CLI_EXIT_CORRUPT, "%s is not a bzip2 file (nor rle)", j->name);
        return -1;
    }
    if (x->file)
        return GPUCOMP_OK;
    gpucomp_direction dir = s->opts.mode == CLI_COMPRESS ? GPUCOMP_COMPRESS : GPUCOMP_DECOMPRESS;
    return gpucomp_stream_open(s->client, dir, o, &x->st);
}

/* run_file_or_stream's: the daemon has no streams at all (run_whole instead). */
#define NO_STREAMS (-2)

/* A daemon without file streams (it refuses before any output) gets the file through a stream. */
static int run_file_or_stream(cli_session *s, const job *j, streamed *x, const gpucomp_options *o)
{
    int rc = run_file(s, x, j->fd, o);
    if (rc != GPUCOMP_E_UNSUPPORTED || x->done.bytes_out)
        return rc;
    x->file = false;
    gpucomp_direction dir = s->opts.mode == CLI_COMPRESS ? GPUCOMP_COMPRESS : GPUCOMP_DECOMPRESS;
    rc = gpucomp_stream_open(s->client, dir, o, &x->st);
    if (rc == GPUCOMP_E_UNSUPPORTED)
        return NO_STREAMS;
    return rc == GPUCOMP_OK ? pump_all(j, x) : rc;
}

static void run_streamed(cli_session *s, job *j)
{
    streamed x = { .out_fd = -1 };
    x.ibuf = malloc(READ_SIZE);
    x.obuf = malloc(READ_SIZE);
    if (!x.ibuf || !x.obuf) {
        cli_error(s, "%s: out of memory", j->name);
        goto out;
    }
    cli_progress_begin(s, j->name, S_ISREG(j->st.st_mode) ? (uint64_t)j->st.st_size : 0);
    /* the daemon reads a file from offset 0: one read from elsewhere (stdin) streams */
    x.file = S_ISREG(j->st.st_mode) && s->opts.mode != CLI_TEST && lseek(j->fd, 0, SEEK_CUR) == 0;
    widen_pipe(j->fd);
    if (next_read(j, &x)) {
        cli_progress_end();
        cli_error(s, "%s: read error: %s", j->name, strerror(x.read_error));
        goto out;
    }
    gpucomp_options o;
    int rc = open_stream(s, j, &x, &o);
    if (rc == GPUCOMP_E_UNSUPPORTED) { /* an older gpucompd: one request, as before streams */
        run_whole(s, j, x.ibuf, x.have);
        x.ibuf = NULL;
        goto out;
    }
    if (rc != GPUCOMP_OK) {
        cli_progress_end();
        if (rc > 0)
            cli_request_failed(s, j->name, rc);
        goto out;
    }
    if (open_sink(s, j, &x))
        rc = x.file ? run_file_or_stream(s, j, &x, &o) : pump_all(j, &x);
    else
        rc = GPUCOMP_OK, x.write_error = -1;
    cli_progress_end();     /* before any message */
    if (rc == NO_STREAMS) { /* an older gpucompd: one request, as before streams */
        if (j->out_name)
            cli_output_abort(&x.out);
        cli_progress_begin(s, j->name, (uint64_t)j->st.st_size);
        run_whole(s, j, x.ibuf, x.have);
        x.ibuf = NULL;
        goto out;
    }
    if (retry_whole(s, j, &x, rc)) {
        cli_progress_begin(s, j->name, (uint64_t)j->st.st_size);
        run_whole(s, j, NULL, 0);
        goto out;
    }
    if (x.write_error == -1) { /* open_sink said why */
        gpucomp_stream_free(x.st);
        goto out;
    }
    if (rc == GPUCOMP_OK && !x.write_error && !x.read_error &&
        (x.file ? x.done.trailing_garbage : gpucomp_stream_trailing_garbage(x.st, NULL)))
        cli_note(s, "%s: trailing garbage after EOF ignored", j->name);
    conclude(s, j, &x, rc);
out:
    free(x.ibuf);
    free(x.obuf);
}

/* From an open input to a delivered output (and the input removed, if that is the job). */
static void run_job(cli_session *s, job *j)
{
    if (cli_connect(s))
        run_streamed(s, j);
}

static void process_stdin(cli_session *s)
{
    job j = { .name = "(stdin)", .fd = STDIN_FILENO };
    if (s->opts.mode != CLI_COMPRESS && isatty(STDIN_FILENO) && !s->opts.force) {
        cli_error(s, "compressed data not read from a terminal. Use -f to force decompression.");
        return;
    }
    if (fstat(STDIN_FILENO, &j.st) != 0) {
        cli_error(s, "(stdin): %s", strerror(errno));
        return;
    }
    run_job(s, &j);
}

void cli_process(cli_session *s, const char *operand)
{
    if (strcmp(operand, "-") == 0) {
        process_stdin(s);
        return;
    }
    job j = { .name = operand, .fd = -1 };
    /* -t and -c too: the suffix names the codec of data too short to show its magic (an empty .bz2). */
    if (s->opts.mode != CLI_COMPRESS && cli_known_suffix(operand)) {
        char *plain = cli_decompressed_name(operand, &j.suffix_codec);
        j.has_suffix_codec = plain != NULL;
        free(plain);
    }
    if (open_input(s, &j) && (!in_place(s) || plan_output(s, &j)))
        run_job(s, &j);
    if (j.fd >= 0)
        close(j.fd);
    free(j.out_name);
}
