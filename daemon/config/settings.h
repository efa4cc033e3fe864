/*
 * settings.h - gpucompd settings: defaults, command line, config file.
 *
 * Precedence: defaults < config file (--config, key = value lines, the long
 * option names without dashes) < command-line options.
 */
#ifndef GCD_SETTINGS_H
#define GCD_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GCD_SOCKET_PATH_MAX 108
#define GCD_ALLOW_MAX 32 /* entries in allow-users and in allow-groups */
#define GCD_GROUP_NAME_MAX 64
#define GCD_MAX_CODEC_OPTIONS 8 /* the codecs' own settings, together (codec.h gcd_codec_option) */

typedef enum gcd_gpu_mode {
    GCD_GPU_AUTO = 0,            /* use GPUs when present, else CPU */
    GCD_GPU_OFF = 1,             /* CPU engine only */
    GCD_GPU_EMULATE = 2,         /* testing aid: one CPU-backed device behind the scheduler */
    GCD_GPU_EMULATE_FAILING = 3, /* testing aid: as above, failing from its second batch */
    GCD_GPU_EMULATE_LIMIT = 4    /* testing aid: as emulate, answering every compress job with
                                 * GC_E_LIMIT (an output that did not fit) and every bzip2
                                 * decompress with GC_E_CORRUPT after decoding it, so the lane
                                 * reruns them */
} gcd_gpu_mode;

typedef struct gcd_config {
    char socket_path[GCD_SOCKET_PATH_MAX];
    unsigned workers;            /* CPU worker threads running requests (0 = CPUs) */
    unsigned codec_threads;      /* threads one codec call may use (0 = CPUs) */
    unsigned io_threads;         /* threads reading and writing clients' files (file streams) */
    uint32_t max_frame;          /* largest frame accepted, bytes */
    uint64_t max_request;        /* largest input of one request, bytes */
    uint64_t max_output;         /* default decompression output limit, bytes */
    uint64_t memory_budget;      /* memory held for requests at once (budget.h) */
    unsigned user_share_pct;     /* of memory_budget, the most one uid may hold */
    uint64_t request_timeout_ms; /* a frame or a streamed request must complete within this */
    uint64_t idle_timeout_ms;    /* a connection with nothing to do is closed after this (0 = never) */
    gcd_gpu_mode gpu;
    uint64_t gpu_min_bytes;                        /* requests smaller than this run on the CPU engine */
    uint64_t codec_options[GCD_MAX_CODEC_OPTIONS]; /* the codecs' own settings (codec.h gcd_codec_option) */
    uint64_t batch_bytes;                          /* most input bytes in one device batch */
    uint64_t batch_wait_us;                        /* longest wait for a batch to fill */
    unsigned device_lanes;                         /* scheduler threads (each with its own context) per device */
    unsigned emulated_devices;                     /* stand-in devices of --gpu=emulate* (testing several GPUs) */
    unsigned fail_device;    /* fault injection: this device's lanes (or one of them) fail ... */
    int fail_lane;           /* ... -1 = every lane, else that lane only, ... */
    uint64_t fail_batch;     /* ... their batch number fail_batch (0 = no injection) */
    uint64_t register_limit; /* most client memory registered (OP_REGISTER) at once */
    int log_level;           /* syslog level: LOG_ERR .. LOG_DEBUG */

    /* Who may connect (peer.h). Unset lists take their defaults at start-up:
     * users root and the daemon's own user, groups the socket file's group. */
    bool allow_users_set, allow_any_user; /* allow-users given; "*" = anyone */
    uid_t allow_uids[GCD_ALLOW_MAX];
    unsigned n_allow_uids;
    bool allow_groups_set;
    gid_t allow_gids[GCD_ALLOW_MAX];
    unsigned n_allow_gids;
    char socket_group[GCD_GROUP_NAME_MAX]; /* group of a socket we create ("" = default) */
} gcd_config;

typedef bool (*gcd_setting_set_fn)(gcd_config *cfg, const char *value);

/* One setting: its option and config-file name, how to parse it, and how a reload treats it. */
typedef struct gcd_setting {
    const char *name; /* --NAME on the command line, NAME = value in the config file */
    const char *arg_help;
    const char *help;
    gcd_setting_set_fn set; /* NULL: a codec's option, a size */
    bool live;              /* SIGHUP applies a change at once; otherwise it waits for a restart */
    size_t offset, size;    /* its value in gcd_config (size 0: applied by its user, peer.h) */
    bool text;              /* a string: the same up to its end is unchanged */
} gcd_setting;

/* Every setting, the codecs' own among them, in --help order: *n gets the count. */
const gcd_setting *gcd_settings(unsigned *n);

/* Whether setting s has another value in a than in b (never for a setting of size 0). */
bool gcd_setting_differs(const gcd_setting *s, const gcd_config *a, const gcd_config *b);

/* Give to the value of setting s in to (size 0: nothing). */
void gcd_setting_copy(const gcd_setting *s, gcd_config *to, const gcd_config *from);

/* Fill *cfg with the built-in defaults. */
void gcd_config_defaults(gcd_config *cfg);

/*
 * Parse argv (and a --config file if given) into *cfg.
 * Returns 0 to run, 1 when the program should exit successfully (--help,
 * --version), -1 on a usage error (message already printed).
 * May be called again (SIGHUP) on a fresh *cfg from gcd_config_defaults.
 */
int gcd_config_parse(gcd_config *cfg, int argc, char **argv);

#endif
