/*
 * codec.h - the daemon's codec table: all it knows about a codec, in one
 * entry. The connection, routing and engine code go through the table;
 * only a codec's own file (codec_rle.c, codec_bzip2.c) names its codec.
 * Adding a codec is one file and one line in codec.c.
 */
#ifndef GCD_CODEC_H
#define GCD_CODEC_H

#include <stdbool.h>
#include <stdint.h>

#include "request.h"

struct gc_gpu_job;
struct gcd_config;
struct gcd_stream;

/*
 * A codec's part in streams (stream.h, docs/PROTOCOL.md "Streams"): where
 * parts are cut and how their outputs make one stream's output. Hooks run on
 * the loop thread and must be cheap (a header peek, a bit splice); the parts
 * themselves run through run_cpu / gpu_job like any request, with
 * r->stream set.
 */
typedef struct gcd_stream_ops {
    /* The codec's state for one stream (malloc'd, freed with free()), from its first frame. */
    void *(*open)(const gcd_request *proto, gc_error *err);
    /*
     * How many of the avail buffered input bytes at buf the next part takes;
     * 0: wait for more input. final: no more input follows these avail bytes;
     * flush: the client asked for the output of everything up to them (more
     * input follows). An error fails the stream.
     */
    int (*cut)(void *state, const gcd_request *proto, const uint8_t *buf, size_t avail, bool final, bool flush,
               size_t *take, gc_error *err);
    /* Whether cut looks at the bytes (NULL: always); a ring stream's are read for it only if so. */
    bool (*cut_reads)(const gcd_request *proto);
    /*
     * The same for a file stream, whose input is all there: left bytes of
     * the file from the cut point, of which head holds head_len from
     * head_at on (read by an I/O thread; none at first). Either *take
     * (<= left; each part is read straight into its own buffer), or the
     * bytes [*see_from, *see_to) from the cut point it must see first
     * (see_to <= left, at most the stream's window, not all held already;
     * from head_at the read only adds what head lacks), after which it is
     * asked again. A cut that reads nothing asks for none.
     */
    int (*cut_file)(void *state, const gcd_request *proto, const uint8_t *head, size_t head_at, size_t head_len,
                    size_t left, size_t *take, size_t *see_from, size_t *see_to, gc_error *err);
    /*
     * A file stream whose parts end where their own bytes say (NULL, or span
     * 0 for this proto: cut_file cuts). The stream reads its input span
     * bytes at a time, one read per part, ahead of the cuts; a part's bytes
     * are those the part before it left, then its read. Once they are all
     * there, settle says on an I/O thread, one part at a time in order, how
     * many of them the part keeps (<= len; the rest begin the next part);
     * never for the last part, which keeps all. It may use only its
     * arguments: the loop runs on meanwhile. Settles are a chain, so what
     * can be done on a part's bytes alone is done by scan (NULL: nothing),
     * on the I/O thread of its read, as soon as the read is back: what it
     * returns (malloc'd, NULL: nothing) is given to settle with where the
     * read's bytes begin in buf.
     */
    size_t (*span)(const gcd_request *proto);
    size_t (*settle)(const gcd_request *proto, const uint8_t *buf, size_t len, const void *scan, size_t scan_at);
    void *(*scan)(const gcd_request *proto, const uint8_t *buf, size_t len);
    /* Bytes at the end of the part just cut that also begin the next part (NULL: none). */
    size_t (*overlap)(void *state);
    /* Before a part goes to an engine: what its run needs (part->part_state, malloc'd). NULL: nothing. */
    int (*prepare)(void *state, gcd_request *part, gc_error *err);
    /*
     * A finished part, in order: its output into the stream (gcd_stream_put).
     * A part that must run again before the
     * parts after it are emitted (its input and part_state as emit leaves
     * them; what it emitted stays sent) says so with gcd_stream_rerun.
     */
    int (*emit)(void *state, struct gcd_stream *s, gcd_request *part, gc_error *err);
    /* After the last part: what ends the output (bzip2's end-of-stream marker). NULL: nothing. */
    int (*finish)(void *state, struct gcd_stream *s, gc_error *err);
    /* Free the codec's state (NULL: free()). */
    void (*close)(void *state);
} gcd_stream_ops;

/*
 * A setting of a codec's own: a size, --NAME on the command line and
 * NAME = value in the config file, listed with the daemon's settings
 * (settings.c). Its value is cfg->codec_options[gcd_codec_option_slot()].
 */
typedef struct gcd_codec_option {
    const char *name;
    const char *help; /* for --help, with its default */
    uint64_t default_value;
    bool live; /* SIGHUP applies a change at once (settings.h gcd_setting.live) */
} gcd_codec_option;

typedef struct gcd_codec {
    Gpucomp__Codec id;
    const char *name;

    /* Its own settings (NULL: none). */
    const gcd_codec_option *options;
    unsigned n_options;

    /* Options and operation acceptable, before any payload is accepted (loop thread). */
    int (*check)(const gcd_request *r, gc_error *err);

    /*
     * Bytes of data the request moves, for routing: its input, or more where
     * the header it carries declares a larger output. A peek, not a check:
     * the engine validates (worker thread reads may differ from this one).
     */
    uint64_t (*work_bytes)(const gcd_request *r);

    /* Run on the CPU engine (worker thread): r->output, r->output_len, r->error. */
    int (*run_cpu)(gcd_request *r, unsigned threads);

    /* Whether the GPU backend can take this operation (NULL: the codec has none yet). */
    bool (*gpu_takes)(const gcd_request *r);

    /* What gpu_takes accepts, in words for STATS ("compress"); NULL: every operation. */
    const char *gpu_scope;

    /*
     * The work_bytes from which r is worth the trip to the device, from the
     * settings (NULL: --gpu-min-bytes). A codec whose GPU path has a larger
     * fixed cost per request has a break-even of its own, which may depend on
     * the request (bzip2: one for compress, one for decompress). Only r's op
     * and codec may be read: STATS asks with a request that has no more
     * (gcd_dispatch_describe).
     */
    uint64_t (*gpu_min_bytes)(const struct gcd_config *cfg, const gcd_request *r);

    /*
     * The codec's part of a GPU job (gpu/gpu.h): codec, op and options,
     * and the output capacity to allocate. GC_OK, or an error in r->error.
     * A job whose output size is known only once it is decoded sets job->grow
     * instead (gpu.h; job->user is r): it starts with no output (*out_cap 0,
     * nothing allocated), and grow makes and charges r->output as it goes.
     */
    int (*gpu_job)(gcd_request *r, struct gc_gpu_job *job, size_t *out_cap);

    /*
     * After a job succeeded on the device (r->output_len set): whatever its
     * output still needs where the client expects it (bzip2: size the memfd
     * of an empty grown output, which never grew; a stream part's block
     * count). GC_OK, or an error in r->error, the request's answer. NULL:
     * nothing to do.
     */
    int (*gpu_finish)(gcd_request *r, struct gc_gpu_job *job);

    /*
     * Whether r, failed on the device with any status but GC_E_DEVICE, is rerun
     * on the CPU engine (device.h gcd_device_declines): for a device whose
     * verdicts are less exact than the CPU engine's, or that refuses streams
     * the CPU engine accepts. NULL: only the codec-neutral rule.
     */
    bool (*gpu_reruns_failures)(const gcd_request *r);
    /* Streams of this codec; NULL: the codec has none. */
    const gcd_stream_ops *stream;
} gcd_codec;

/* The entry for id, or NULL for a codec this daemon does not know. */
const gcd_codec *gcd_codec_find(Gpucomp__Codec id);

/* Every known codec, in table order: *n gets the count. */
const gcd_codec *const *gcd_codec_all(unsigned *n);

/* Where codec's option i keeps its value in gcd_config.codec_options: the codecs' options in table order. */
unsigned gcd_codec_option_slot(const gcd_codec *codec, unsigned i);

/* The codecs' entries (codec_*.c). */
extern const gcd_codec gcd_codec_rle;
extern const gcd_codec gcd_codec_bzip2;

#endif
