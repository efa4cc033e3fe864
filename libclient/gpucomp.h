/*
 * gpucomp.h - libgpucomp-client: compress and decompress through gpucompd.
 *
 * Link with `pkg-config --cflags --libs gpucomp-client`.
 *
 *     gpucomp_client *c;
 *     if (gpucomp_connect(NULL, &c) != GPUCOMP_OK) { ...gpucomp_strerror... }
 *     gpucomp_options o;
 *     gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
 *     void *out; size_t out_len;
 *     int rc = gpucomp_compress(c, &o, data, len, &out, &out_len);
 *     if (rc) fprintf(stderr, "%s\n", gpucomp_last_error(c));
 *     ...
 *     gpucomp_free(out);
 *     gpucomp_close(c);
 *
 * Thread safety: a gpucomp_client is NOT thread-safe, except for the
 * asynchronous calls below (gpucomp_submit and friends); use one client per
 * thread (connections are cheap, and the daemon serves many at once). The
 * functions that take no client (gpucomp_strerror, gpucomp_options_init,
 * gpucomp_free) are thread-safe.
 *
 * Errors: every function returning int returns GPUCOMP_OK (0) or one of the
 * GPUCOMP_E_* codes; gpucomp_last_error() gives the detailed message (from
 * the daemon when it produced the error).
 */
#ifndef GPUCOMP_H
#define GPUCOMP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (the same numbers travel in the protocol). */
enum {
    GPUCOMP_OK = 0,
    GPUCOMP_E_INVALID = 1,     /* invalid argument or option */
    GPUCOMP_E_CORRUPT = 2,     /* input is not a valid stream of the codec */
    GPUCOMP_E_TRUNCATED = 3,   /* input ends before the stream does */
    GPUCOMP_E_CRC = 4,         /* checksum mismatch: data is damaged */
    GPUCOMP_E_LIMIT = 5,       /* a size limit was exceeded (frame, request, max_output) */
    GPUCOMP_E_NOMEM = 6,       /* out of memory, in the client or the daemon */
    GPUCOMP_E_UNSUPPORTED = 7, /* unknown codec or operation, protocol version mismatch */
    GPUCOMP_E_PROTOCOL = 8,    /* malformed or unexpected message */
    GPUCOMP_E_IO = 9,          /* socket read/write failed, daemon went away */
    GPUCOMP_E_CONNECT = 10,    /* cannot connect to the daemon (not running?) */
    GPUCOMP_E_BUSY = 11,       /* the daemon is shutting down or over capacity: retry later */
    GPUCOMP_E_INTERNAL = 12,   /* a bug: please report */
    GPUCOMP_E_DEVICE = 13,     /* unrecoverable GPU failure */
    GPUCOMP_E_PERMISSION =
        14, /* this user may not use the daemon (socket permissions, its allow-users/allow-groups) */
    GPUCOMP_E_CANCELLED =
        15, /* the request was cancelled (gpucomp_cancel; a stream cancelled by gpucomp_stream_free) */
    GPUCOMP_E_IN_USE = 16,   /* this client is in use by its own open stream or asynchronous requests
                                * (or the call came from one of its callbacks): retrying will not help
                                * until the stream is freed or the requests are done; or use another
                                * client. Never the daemon's answer (that is GPUCOMP_E_BUSY). */
    GPUCOMP_E_TOO_SMALL = 17 /* the caller's output buffer (dst_capacity) cannot hold the output: see
                              * gpucomp_compress_into. Never the daemon's answer. */
};

typedef enum gpucomp_codec {
    GPUCOMP_CODEC_RLE = 1,  /* PARLE run-length frames (docs/FORMAT.md) */
    GPUCOMP_CODEC_BZIP2 = 2 /* standard bzip2 streams */
} gpucomp_codec;

typedef enum gpucomp_backend {
    GPUCOMP_BACKEND_UNKNOWN = 0,
    GPUCOMP_BACKEND_CPU = 1,
    GPUCOMP_BACKEND_GPU = 2,
    GPUCOMP_BACKEND_LOCAL = 3 /* "cpu (in process)": this process ran it, no daemon (gpucomp_open) */
} gpucomp_backend;

typedef struct gpucomp_options {
    gpucomp_codec codec;
    int level;              /* bzip2: 1..9 (block size level*100k); 0 = 9 */
    unsigned element_width; /* rle: 1, 2, 4 or 8 bytes; 0 = 1 */
    uint32_t chunk_size;    /* rle: bytes per chunk; 0 = 1 MiB */
    uint64_t max_output;    /* decompress: fail with GPUCOMP_E_LIMIT beyond this; 0 = daemon default */
} gpucomp_options;

#define GPUCOMP_MAX_DEVICES 16
#define GPUCOMP_MAX_CODECS 8

/* One lane's counters (times summed over its batches, from CUDA events). A
 * lane is one scheduler thread with its own context on a GPU; a GPU has
 * several (gpucompd --device-lanes). The type and field names say "device"
 * for what is a lane: they are kept for the library's ABI. */
typedef struct gpucomp_device_stats {
    char name[96];
    uint64_t batches;
    uint64_t requests;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t h2d_ns;      /* host-to-device copies */
    uint64_t kernel_ns;   /* kernels */
    uint64_t d2h_ns;      /* device-to-host copies */
    uint64_t wall_ns;     /* batch wall time, first copy in to last copy out */
    uint64_t fallbacks;   /* requests rerun on the CPU: after a device failure, or handed back by it */
    uint32_t queue_depth; /* requests waiting for a batch */
    int retired;          /* nonzero once the device failed and was taken out of service */
    /* The load the daemon routes new work by (to the device with the fewest
     * bytes, then requests): submitted and not yet completed, queued or running. */
    uint32_t requests_in_flight;
    uint32_t gpu;             /* the GPU this lane runs on (CUDA device index) */
    uint64_t bytes_in_flight; /* their input bytes */
} gpucomp_device_stats;

/* Daemon-wide counters, as returned by gpucomp_stats_get(). */
typedef struct gpucomp_stats {
    uint64_t uptime_ms;
    uint32_t connections;
    uint64_t requests_ok;
    uint64_t requests_failed;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint32_t worker_threads;
    uint32_t queue_depth;
    uint64_t memory_in_use;
    uint64_t memory_budget;
    uint64_t cpu_requests;
    uint64_t gpu_requests;
    char backend[16];                                  /* "cpu" or "gpu" */
    uint32_t gpu_devices;                              /* lanes: entries used in devices[] */
    uint32_t gpus;                                     /* GPUs behind those lanes (0 from an older daemon) */
    gpucomp_device_stats devices[GPUCOMP_MAX_DEVICES]; /* one per lane */
    uint64_t registered_bytes;                         /* client memory registered now (gpucomp_register_fd) */
    uint64_t register_limit; /* most the daemon registers at once (gpucompd --register-limit) */
    uint32_t n_routing;      /* entries used in routing[] */
    char routing[GPUCOMP_MAX_CODECS]
                [96]; /* per codec, where its requests run: "rle: gpu from N bytes, else cpu" */
    /* Requests run on a lane below their codec's break-even because the CPU
     * pool had no free worker (routing by load; saturates). */
    uint32_t gpu_by_load;
} gpucomp_stats;

typedef struct gpucomp_client gpucomp_client;

/* Fill *o with the defaults for codec. */
void gpucomp_options_init(gpucomp_options *o, gpucomp_codec codec);

/*
 * Connect to gpucompd and check the protocol version. socket_path NULL or ""
 * means $GPUCOMP_SOCKET, else /run/gpucompd/gpucompd.sock.
 * On failure *out is NULL and the return code says why: GPUCOMP_E_CONNECT
 * when nothing listens there (no socket file, or no daemon behind it);
 * GPUCOMP_E_PERMISSION when something does but this user may not use it
 * (the socket file's permissions refused the connection, EACCES or EPERM,
 * or the daemon did: its allow-users/allow-groups). Only the first means
 * there is no daemon to use. gpucomp_connect_error() gives the message.
 */
int gpucomp_connect(const char *socket_path, gpucomp_client **out);

/* Message for the last failed gpucomp_connect() on this thread. */
const char *gpucomp_connect_error(void);

/* Close the connection and free the client (NULL is fine). */
void gpucomp_close(gpucomp_client *c);

/*
 * Compress src[0..src_len) with o. NULL means the defaults of the one
 * default codec, bzip2 (level 9), as in the gpucomp command: the same as
 * gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2). On success *dst is a
 * buffer of *dst_len bytes to release with gpucomp_free().
 */
int gpucomp_compress(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len, void **dst,
                     size_t *dst_len);

/* Decompress; o->codec says which codec wrote src (o NULL: bzip2). Same conventions. */
int gpucomp_decompress(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len, void **dst,
                       size_t *dst_len);

/* Release a buffer returned by gpucomp_compress/gpucomp_decompress. */
void gpucomp_free(void *buf);

/*
 * Zero-copy variants for large buffers: the input is in_len bytes at offset 0
 * of in_fd and the daemon writes the result into out_fd, growing it as
 * needed; *out_len is the result's length. Both descriptors must be memfds
 * made with MFD_ALLOW_SEALING (gpucomp_memfd_create makes one): the daemon
 * seals both against shrinking (F_SEAL_SHRINK) so it can map them safely.
 * The descriptors stay the caller's. gpucomp_compress/gpucomp_decompress use
 * this transport by themselves for inputs of GPUCOMP_MEMFD_THRESHOLD bytes
 * and more (through two memfds of their own), or of the size in the
 * environment variable GPUCOMP_MEMFD_THRESHOLD at gpucomp_connect() (bytes,
 * or with a K, M, G or T unit, also written KiB or KB, all powers of 1024;
 * ignored if it is not a size). Measured: from
 * 16 KiB on a memfd round trip beats the socket, for one client and far more
 * so for many (docs/BENCHMARKS.md, "Break-even").
 */
#define GPUCOMP_MEMFD_THRESHOLD (16u << 10)
int gpucomp_compress_fd(gpucomp_client *c, const gpucomp_options *o, int in_fd, size_t in_len, int out_fd,
                        size_t *out_len);
int gpucomp_decompress_fd(gpucomp_client *c, const gpucomp_options *o, int in_fd, size_t in_len, int out_fd,
                          size_t *out_len);

/* What a file call did (gpucomp_compress_file, gpucomp_decompress_file). */
typedef struct gpucomp_file_result {
    uint64_t bytes_in;       /* input bytes the daemon read: the file's size when the call began */
    uint64_t bytes_out;      /* output bytes written to out_fd */
    gpucomp_backend backend; /* the engine that ran most of the work */
    int trailing_garbage;    /* decompress: bytes after the compressed data were ignored */
    uint64_t garbage_offset; /* and where they began in the input */
} gpucomp_file_result;

/*
 * Compress or decompress a whole regular file: in_fd, open for reading,
 * from offset 0 to its size now. The daemon reads the file itself (the
 * descriptor is passed to it; its bytes never cross the socket) and, when
 * out_fd is a regular file open for writing at offset 0 and without
 * O_APPEND, writes the output into it at its final offsets, truncates it to
 * the output's length and leaves its offset at the end; otherwise (a pipe, a
 * terminal, a file at another offset) the output arrives in frames and is
 * written to out_fd here. *res (may be NULL) says what was done. A file that
 * shrinks while it is read fails with GPUCOMP_E_IO; on any failure out_fd
 * may hold part of the output (the caller removes it). The descriptors stay
 * the caller's. A decompress stops at the end of the compressed data:
 * bytes after it that begin no stream are ignored and reported in *res.
 */
int gpucomp_compress_file(gpucomp_client *c, const gpucomp_options *o, int in_fd, int out_fd,
                          gpucomp_file_result *res);
int gpucomp_decompress_file(gpucomp_client *c, const gpucomp_options *o, int in_fd, int out_fd,
                            gpucomp_file_result *res);

/* A sealable memfd for the calls above (close() it when done), or -1 with errno set. */
int gpucomp_memfd_create(const char *name);

/*
 * Registered buffers, for clients that use the same memfds for many requests
 * (a storage server's I/O buffers, a pipeline's staging area).
 *
 * gpucomp_register_fd asks gpucompd to map the first size bytes of fd (a
 * memfd from gpucomp_memfd_create, already at least size bytes long) once
 * and, when it serves requests on a GPU, to page-lock them. Later
 * gpucomp_compress_fd/gpucomp_decompress_fd calls on c that name the memfd,
 * as input or as output, then move its bytes between it and the GPU by DMA
 * with no copy on the host and no mapping work. Page-locking costs time once
 * (more for a fresh memfd, whose pages are allocated first) and holds up
 * the daemon's GPU work for other clients while it runs, so register
 * buffers that serve many requests, once, when the client starts: not per
 * request. The library does not register its own staging memfds: for a
 * client of a few requests the locking costs more than it saves.
 *
 * Size an output memfd for the largest result it will hold before
 * registering it (gpucomp_compress_fd grows the output to the codec's bound
 * first: register it after a first call, or ftruncate it yourself). A
 * request that needs more of a file than is registered still works, through
 * a one-off mapping, as for a file never registered.
 *
 * *pinned (may be NULL) is set to 1 if the pages are page-locked for DMA, 0
 * if they are only mapped (the daemon has no GPU). Errors: GPUCOMP_E_LIMIT
 * when the daemon's registration limit would be exceeded (gpucomp_stats_get
 * reports registered_bytes and register_limit), GPUCOMP_E_BUSY when a
 * request is using the file at that moment, GPUCOMP_E_INVALID for a
 * descriptor that is not a sealable memfd of at least size bytes or a file
 * another connection registered. Registering a registered file again is a
 * no-op if size fits, else it is registered again at the new size.
 *
 * A registration ends with gpucomp_unregister_fd (GPUCOMP_E_INVALID if fd's
 * file is not registered on c) or when c is closed. The descriptor stays
 * the caller's; like every memfd passed to the daemon it is sealed against
 * shrinking.
 */
int gpucomp_register_fd(gpucomp_client *c, int fd, size_t size, int *pinned);
int gpucomp_unregister_fd(gpucomp_client *c, int fd);

/* Round trip to the daemon; GPUCOMP_OK if it answers. */
int gpucomp_ping(gpucomp_client *c);

/* Fetch the daemon's counters. */
int gpucomp_stats_get(gpucomp_client *c, gpucomp_stats *out);

/* Which engine served the last successful request on c. */
gpucomp_backend gpucomp_last_backend(const gpucomp_client *c);

/* Detailed message for the last failure on c (never NULL; "" if none). */
const char *gpucomp_last_error(const gpucomp_client *c);

/* Fixed description of a status code (never NULL). */
const char *gpucomp_strerror(int code);

/* Library version string, e.g. "0.2.0". */
const char *gpucomp_version(void);

/*
 * Additions (0.1.0). Notes on the functions above that they rely on:
 * a successful gpucomp_compress/gpucomp_decompress always returns a
 * non-NULL *dst, also when *dst_len is 0. After GPUCOMP_E_IO or
 * GPUCOMP_E_PROTOCOL (and any other failure that left the connection in
 * an unknown state) the client is closed: every later call fails with
 * GPUCOMP_E_IO, so gpucomp_close() it and connect again. Errors the daemon
 * reports for one request (GPUCOMP_E_CORRUPT, _CRC, _LIMIT, ...) leave the
 * connection usable.
 */

/* Version string gpucompd announced when c connected ("" if it sent none). */
const char *gpucomp_server_version(const gpucomp_client *c);

/*
 * Largest input, in bytes, that one request on c may carry (announced by
 * gpucompd); 0 if the daemon announced no limit. Larger inputs fail with
 * GPUCOMP_E_LIMIT before anything is sent.
 */
uint64_t gpucomp_max_request_size(const gpucomp_client *c);

/* Nanoseconds gpucompd's codec engine spent on the last successful request on c. */
uint64_t gpucomp_last_engine_ns(const gpucomp_client *c);

/* ------------------------------------------------------------------ */
/* Streams: inputs of any length, output as it is produced (0.2.0)     */
/*
 * A stream compresses or decompresses an input whose length need not be
 * known, in bounded memory on both sides, whatever its size: the daemon
 * works on it in parts (docs/PROTOCOL.md, "Streams") and sends output as each
 * part is done. The output is byte for byte what gpucomp_compress gives for
 * the same input (bzip2; rle: one frame per part, docs/FORMAT.md), unless
 * GPUCOMP_FLUSH is used. The shape is zstd's ZSTD_compressStream2:
 *
 *     gpucomp_stream *s;
 *     if (gpucomp_stream_open(c, GPUCOMP_COMPRESS, NULL, &s) != GPUCOMP_OK) ...
 *     for (;;) {
 *         gpucomp_inbuf in = { buf, fread(buf, 1, sizeof buf, f), 0 };
 *         gpucomp_end_op op = in.size ? GPUCOMP_CONTINUE : GPUCOMP_END;
 *         size_t pending;
 *         do {
 *             gpucomp_outbuf out = { obuf, sizeof obuf, 0 };
 *             if (gpucomp_stream_run(s, &in, &out, op, &pending) != GPUCOMP_OK) ...error...
 *             fwrite(obuf, 1, out.pos, g);
 *         } while (in.pos < in.size || (op != GPUCOMP_CONTINUE && pending));
 *         if (op == GPUCOMP_END) break;
 *     }
 *     gpucomp_stream_free(s);
 *
 * While a stream is open its client serves only that stream: other calls on
 * the client fail with GPUCOMP_E_IN_USE until gpucomp_stream_free.
 */
typedef struct gpucomp_stream gpucomp_stream;

typedef enum gpucomp_direction { GPUCOMP_COMPRESS = 1, GPUCOMP_DECOMPRESS = 2 } gpucomp_direction;

typedef enum gpucomp_end_op {
    GPUCOMP_CONTINUE = 0, /* take input, return whatever output is ready */
    GPUCOMP_FLUSH = 1,    /* also: the daemon takes all input given so far now and sends its output
                           * (compress: ends a block run); see gpucomp_stream_run */
    GPUCOMP_END = 2       /* no more input: finish the stream */
} gpucomp_end_op;

typedef struct gpucomp_inbuf {
    const void *src;
    size_t size;
    size_t pos; /* bytes of src consumed; updated by gpucomp_stream_run */
} gpucomp_inbuf;

typedef struct gpucomp_outbuf {
    void *dst;
    size_t size;
    size_t pos; /* bytes written to dst; updated by gpucomp_stream_run */
} gpucomp_outbuf;

/*
 * Open a stream (o NULL: bzip2 level 9). For decompression o->max_output
 * bounds the stream's whole output (0 = no limit: a stream's memory is
 * bounded whatever its output). GPUCOMP_E_UNSUPPORTED if the daemon has no
 * streams (an older gpucompd).
 */
int gpucomp_stream_open(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, gpucomp_stream **out);

/*
 * Move input in and output out, waiting only until one of them moved (or,
 * with a timeout set by gpucomp_set_timeout, failing with GPUCOMP_E_IO when
 * the daemon says nothing for that long). *pending (may be NULL) gets 0 once
 * everything op asked for is done: GPUCOMP_FLUSH: all input given so far has
 * gone out with the flush mark, the daemon has taken all of it, and the output
 * that has arrived is in out (output the daemon is still producing for it
 * comes with later calls: the protocol has no "flush done" answer);
 * GPUCOMP_END: the stream is complete (later calls return GPUCOMP_OK with
 * nothing). Any other status ends the stream:
 * gpucomp_last_error says why; output already returned stays valid up to
 * that point (decompression: it is the correct prefix).
 */
int gpucomp_stream_run(gpucomp_stream *s, gpucomp_inbuf *in, gpucomp_outbuf *out, gpucomp_end_op op,
                       size_t *pending);

/*
 * Where the stream's next input bytes may be put so that gpucomp_stream_run
 * takes them without copying them (a read(2) straight into it, say): memory
 * shared with the daemon, *len (may be NULL) bytes of it, as many as the
 * daemon lets the stream send now. NULL with *len 0 when there is none now:
 * nothing may be sent until the daemon takes more (gpucomp_stream_run waits
 * for that), the stream ended, or it sends its input in frames (a daemon
 * without rings). Valid until the next call on the stream: fill n <= *len
 * bytes and pass { the pointer, n, 0 } as gpucomp_stream_run's input; input
 * elsewhere is copied as always (GPUCOMP_E_INVALID for any other input
 * inside this memory). (0.2.0)
 */
void *gpucomp_stream_input_space(gpucomp_stream *s, size_t *len);

/*
 * The stream's output that has arrived and is not yet handed out, where it
 * lies: *len (may be NULL) bytes at the pointer, in stream order, without
 * the copy into gpucomp_stream_run's output buffer (a write(2) straight
 * from it, say). With a daemon that writes output into rings this is memory
 * shared with the daemon; otherwise the frame the output came in. NULL with
 * *len 0 when nothing is waiting (call gpucomp_stream_run, with an empty
 * output buffer if you like, to wait for more) or the stream runs in this
 * process (its output comes only through the output buffer). Valid until
 * the next call on the stream. (0.3.0)
 */
const void *gpucomp_stream_output_view(gpucomp_stream *s, size_t *len);

/*
 * The caller is done with the first n bytes of the last view: they count as
 * handed out (gpucomp_stream_bytes_out), and the daemon may reuse their
 * memory once gpucomp_stream_run next runs. GPUCOMP_E_INVALID if n is more
 * than the view held. Output must be taken, by a view or an output buffer,
 * for the stream to go on: the daemon stops while it is not. (0.3.0)
 */
int gpucomp_stream_output_release(gpucomp_stream *s, size_t n);

/* Input bytes taken and output bytes returned so far (progress). */
uint64_t gpucomp_stream_bytes_in(const gpucomp_stream *s);
uint64_t gpucomp_stream_bytes_out(const gpucomp_stream *s);

/*
 * Decompression streams, once complete: 1 if the input went on after a
 * complete stream with bytes that are not one (bzip2's "trailing garbage",
 * tape padding), which were ignored; *offset (may be NULL) gets the input
 * offset where they begin. 0 otherwise.
 */
int gpucomp_stream_trailing_garbage(const gpucomp_stream *s, uint64_t *offset);

/* Which engine served most of the stream's parts (after GPUCOMP_END). */
gpucomp_backend gpucomp_stream_backend(const gpucomp_stream *s);

/* Stop the stream on the daemon (its work is dropped) and free it; NULL is fine.
 * Freeing an unfinished stream cancels it. The client is usable afterwards. */
void gpucomp_stream_free(gpucomp_stream *s);

/* ------------------------------------------------------------------ */
/* Asynchronous requests (0.2.0)                                        */
/*
 * gpucomp_submit returns at once; the result is delivered to done, called
 * from gpucomp_async_poll in the thread that polls. gpucomp_async_fd is a
 * descriptor that becomes readable when results wait, for the caller's own
 * event loop (poll/epoll/libevent): when it is readable, call
 * gpucomp_async_poll(c, 0). Submissions may come from several threads at
 * once; gpucomp_async_poll and gpucomp_cancel too (callbacks run in the
 * polling thread, never two at once for one client, and may submit). While
 * asynchronous requests are outstanding, the blocking calls on the same
 * client fail with GPUCOMP_E_IN_USE: use one client for each style.
 *
 * out/out_len are valid only during the callback (copy what you keep);
 * status is GPUCOMP_OK or an error (gpucomp_strerror; msg says more, "" if
 * nothing). A request cancelled before it finished completes with
 * GPUCOMP_E_CANCELLED. gpucomp_close runs no callbacks: outstanding requests
 * are cancelled on the daemon and dropped.
 */
typedef void (*gpucomp_done_fn)(void *arg, uint64_t id, int status, const char *msg, const void *out,
                                size_t out_len);

/* Submit; *id (may be NULL) gets the request's id, for gpucomp_cancel. src is copied before return. */
int gpucomp_submit(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const void *src,
                   size_t src_len, gpucomp_done_fn done, void *arg, uint64_t *id);

/*
 * The descriptor to poll for readability (-1 if c is closed, or its
 * connection is: see gpucomp_async_poll). A new connection has a new
 * descriptor: ask again after a gpucomp_async_poll that failed and after
 * each gpucomp_submit.
 */
int gpucomp_async_fd(gpucomp_client *c);

/*
 * Run the callbacks of finished requests, waiting up to timeout_ms (0: not at
 * all, -1: until at least one finishes). Returns how many callbacks ran, or
 * a negative GPUCOMP_E_* code (-GPUCOMP_E_IO: the connection failed; every
 * outstanding request has then been completed with GPUCOMP_E_IO;
 * -GPUCOMP_E_IN_USE: called from one of c's own callbacks). A
 * connection that ends with nothing outstanding (the daemon restarted) makes
 * the descriptor readable, and the poll then says -GPUCOMP_E_IO; the
 * connection is closed, so the descriptor is -1 until the next
 * gpucomp_submit opens a new one (gpucomp_set_reconnect; with reconnection
 * off, the client stays closed).
 */
int gpucomp_async_poll(gpucomp_client *c, int timeout_ms);

/* Requests submitted and not yet completed. */
unsigned gpucomp_async_pending(gpucomp_client *c);

/*
 * Cancel request id: the daemon drops its work, and it completes with
 * GPUCOMP_E_CANCELLED (or with its result, if that was already on its way).
 * GPUCOMP_E_INVALID if id is not outstanding on c.
 */
int gpucomp_cancel(gpucomp_client *c, uint64_t id);

/* ------------------------------------------------------------------ */
/* Time limits and reconnection (0.2.0)                                 */

/*
 * Fail a blocking call (and gpucomp_stream_run) with GPUCOMP_E_IO when the
 * daemon sends nothing for ms milliseconds (0, the default: wait forever).
 * The connection is closed by such a timeout.
 */
void gpucomp_set_timeout(gpucomp_client *c, unsigned ms);

/*
 * A closed connection (the daemon restarted, a timeout, an I/O error) is
 * opened again by the next buffer call (gpucomp_compress, _decompress, their
 * _fd variants, gpucomp_ping, gpucomp_stats_get) on c, once per call, to the
 * same socket path; a request whose connection broke before any answer
 * arrived is sent again once (every request is a pure function of its
 * input). Streams and asynchronous requests are not resent: they fail with
 * GPUCOMP_E_IO; gpucomp_submit opens a closed connection again once nothing
 * is outstanding. On by default; gpucomp_set_reconnect(c, 0) turns it off.
 * Registrations do not survive a reconnection.
 */
void gpucomp_set_reconnect(gpucomp_client *c, int on);

/* ------------------------------------------------------------------ */
/* Without the daemon, and into the caller's buffers (0.2.0)            */
/*
 * A program that must work whether or not gpucompd runs (or lets this user
 * in) opens its client with gpucomp_open: with a daemon it is
 * gpucomp_connect's client; with none, or one that refuses, it is still a
 * client, whose buffer requests run in this process on the CPU engine
 * that gpucompd's CPU workers use (same output bytes as a CPU daemon).
 * gpucomp_last_backend then says GPUCOMP_BACKEND_LOCAL, and
 * gpucomp_last_error says why there was no daemon until a request fails.
 * Such a client stays in this process: open a new one to use a daemon
 * started later. The buffer calls (gpucomp_compress, _decompress and the
 * _into calls below), streams and the file calls run in process (a stream
 * in parts as the daemon cuts them: the same output bytes as a daemon's
 * stream, in the memory of a few parts of 32 MiB whatever the input's
 * size; gpucomp_stream_backend says GPUCOMP_BACKEND_LOCAL); the rest (the
 * _fd calls, asynchronous requests, ping, stats, registrations) need the
 * daemon and fail with GPUCOMP_E_IO. Returns GPUCOMP_OK, or
 * GPUCOMP_E_NOMEM / GPUCOMP_E_INVALID.
 *
 * A client from gpucomp_open also falls back (see gpucomp_set_fallback):
 * a buffer request, a stream or a file call that its daemon cannot take
 * when it begins (gone: GPUCOMP_E_CONNECT or GPUCOMP_E_IO; refusing:
 * GPUCOMP_E_PERMISSION; GPUCOMP_E_BUSY) runs in this process instead. A
 * request the daemon rejects for its content (corrupt data, limits) is
 * not rerun, nor is a stream the daemon fails once it has begun.
 */
int gpucomp_open(const char *socket_path, gpucomp_client **out);

/*
 * A client that uses no daemon at all, whether or not one runs: what
 * gpucomp_open gives when it finds none (gpucomp --local). (0.2.0)
 */
int gpucomp_open_local(gpucomp_client **out);

/* Turn that fallback on or off for c (gpucomp_connect: off, gpucomp_open: on). */
void gpucomp_set_fallback(gpucomp_client *c, int on);

/*
 * Compress or decompress into the caller's dst, which holds dst_capacity
 * bytes; *dst_len gets the output's length. c NULL runs in this process;
 * otherwise through c, falling back to this process whatever
 * gpucomp_set_fallback says. An output longer than dst_capacity fails with
 * GPUCOMP_E_TOO_SMALL, *dst_len set to the length it needs, and dst
 * unchanged: for compression, a dst_capacity of gpucomp_compress_bound
 * never is too small. The output is made whole before it is copied (the
 * memory of one output, as gpucomp_compress takes). gpucomp_last_error(c)
 * (c NULL: gpucomp_last_error(NULL), per thread) says why a call failed.
 */
int gpucomp_compress_into(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len, void *dst,
                          size_t dst_capacity, size_t *dst_len);
int gpucomp_decompress_into(gpucomp_client *c, const gpucomp_options *o, const void *src, size_t src_len,
                            void *dst, size_t dst_capacity, size_t *dst_len);

/*
 * The most bytes compressing src_len bytes with o (NULL: bzip2 level 9) can
 * give, with gpucompd or in process; 0 for options no compression takes or
 * a bound that does not fit in a size_t.
 */
size_t gpucomp_compress_bound(const gpucomp_options *o, size_t src_len);

#ifdef __cplusplus
}
#endif

#endif
