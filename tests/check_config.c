/*
 * check_config.c - the daemon's config file (daemon/config/settings.c, the path
 * `gpucompd --config` and SIGHUP take) and the shipped systemd/gpucompd.conf.
 *
 * Every example line of the shipped file, uncommented on its own and all of
 * them together, must be accepted and set its setting to the example's value:
 * the same configuration as that value given on the command line, starting
 * from a different value so that an ignored line cannot pass. The table below
 * holds each example's value independently of the file, so a remark that
 * leaked into a value, or a line the table does not know, fails the test.
 */
#include <check.h>
#include <dlfcn.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "codec.h"
#include "settings.h"

#ifndef SHIPPED_CONF
#error "SHIPPED_CONF: the path of systemd/gpucompd.conf (tests/tests.am)"
#endif

/*
 * The shipped file names group gpucomp, which the packages and make install
 * create but a test host need not have; settings.c resolves names while
 * parsing, so the test answers for that one name and asks the system for others.
 */
enum { FAKE_GPUCOMP_GID = 4242 };
static char *no_members[] = { NULL };
static struct group fake_gpucomp = { "gpucomp", "x", FAKE_GPUCOMP_GID, no_members };

struct group *getgrnam(const char *name)
{
    if (strcmp(name, "gpucomp") == 0)
        return &fake_gpucomp;
    struct group *(*next)(const char *);
    *(void **)&next = dlsym(RTLD_NEXT, "getgrnam");
    return next ? next(name) : NULL;
}

typedef struct example {
    const char *key;
    const char *value; /* the example's value in the shipped file */
    const char *other; /* a different valid value, set before the file is read */
} example;

static const example examples[] = {
    { "socket", "/run/gpucompd/gpucompd.sock", "/tmp/other.sock" },
    { "workers", "0", "3" },
    { "codec-threads", "0", "3" },
    { "io-threads", "0", "2" },
    { "max-frame", "16M", "1M" },
    { "max-request", "2G", "1G" },
    { "max-output", "4G", "1G" },
    { "memory-budget", "16G", "1G" },
    { "user-memory-share", "50", "10" },
    { "request-timeout", "60", "5" },
    { "idle-timeout", "600", "5" },
    { "gpu", "auto", "off" },
    { "gpu-min-bytes", "3M", "1M" },
    { "gpu-min-bytes-bzip2", "4M", "1M" },
    { "gpu-min-bytes-bzip2-decompress", "8M", "1M" },
    { "batch-bytes", "64M", "2M" },
    { "batch-wait-us", "200", "7" },
    { "device-lanes", "2", "3" },
    { "emulated-devices", "1", "3" },
    { "register-limit", "32G", "1G" },
    { "log-level", "info", "debug" },
    { "allow-users", "root", "*" },
    { "allow-groups", "gpucomp", "0" },
    { "socket-group", "gpucomp", "0" },
};
#define N_EXAMPLES (sizeof examples / sizeof examples[0])

static char tmpdir[64];

static void setup(void)
{
    strcpy(tmpdir, "/tmp/check_config.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* gcd_config_parse on cfg (not reset first) with the given options; its result. */
static int parse_args(gcd_config *cfg, int n, char **opts)
{
    char *argv[2 * N_EXAMPLES + 2];
    ck_assert_int_le(n, (int)(sizeof argv / sizeof argv[0]) - 2);
    argv[0] = (char *)"gpucompd";
    for (int i = 0; i < n; i++)
        argv[i + 1] = opts[i];
    argv[n + 1] = NULL;
    return gcd_config_parse(cfg, n + 1, argv);
}

/* "--key=value" into buf. */
static char *option(char *buf, size_t size, const char *key, const char *value)
{
    ck_assert_int_lt(snprintf(buf, size, "--%s=%s", key, value), (int)size);
    return buf;
}

/* Parse the file at path into cfg (not reset first). */
static int parse_file(gcd_config *cfg, const char *path)
{
    char opt[300];
    char *opts[] = { option(opt, sizeof opt, "config", path) };
    return parse_args(cfg, 1, opts);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* The shipped file's lines, read whole; *n of them. */
static char **shipped_lines(size_t *n)
{
    FILE *f = fopen(SHIPPED_CONF, "r");
    ck_assert_msg(f != NULL, "cannot open %s", SHIPPED_CONF);
    char **lines = NULL, *line = NULL;
    size_t cap = 0;
    *n = 0;
    while (getline(&line, &cap, f) >= 0) {
        lines = realloc(lines, (*n + 1) * sizeof *lines);
        ck_assert_ptr_nonnull(lines);
        lines[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    ck_assert_uint_gt(*n, 0);
    return lines;
}

static void free_lines(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* The example an example line ("# key = ...") shows, or NULL for any other line. */
static const example *example_of(const char *line)
{
    if (strncmp(line, "# ", 2) != 0)
        return NULL;
    const char *key = line + 2;
    size_t len = strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789-");
    if (len == 0 || strncmp(key + len, " = ", 3) != 0)
        return NULL;
    for (size_t i = 0; i < N_EXAMPLES; i++)
        if (strlen(examples[i].key) == len && strncmp(examples[i].key, key, len) == 0)
            return &examples[i];
    ck_abort_msg("%s: example line for a key the test does not know: %s", SHIPPED_CONF, line);
    return NULL;
}

/* Every example line alone, uncommented: accepted, and its value is the example's. */
START_TEST(test_each_example_line_sets_its_value)
{
    size_t n;
    char **lines = shipped_lines(&n);
    char path[128], opt[300];
    snprintf(path, sizeof path, "%s/one.conf", tmpdir);
    bool seen[N_EXAMPLES] = { false };
    for (size_t i = 0; i < n; i++) {
        const example *e = example_of(lines[i]);
        if (!e)
            continue;
        ck_assert_msg(!seen[e - examples], "%s shows %s twice", SHIPPED_CONF, e->key);
        seen[e - examples] = true;
        write_file(path, lines[i] + 2);

        gcd_config before, from_file, from_args;
        gcd_config_defaults(&before);
        char *other[] = { option(opt, sizeof opt, e->key, e->other) };
        ck_assert_int_eq(parse_args(&before, 1, other), 0);
        from_file = before;
        from_args = before;
        ck_assert_msg(parse_file(&from_file, path) == 0, "line %zu, uncommented, is refused: %s", i + 1,
                      lines[i] + 2);
        char *value[] = { option(opt, sizeof opt, e->key, e->value) };
        ck_assert_int_eq(parse_args(&from_args, 1, value), 0);
        ck_assert_msg(memcmp(&from_file, &from_args, sizeof from_file) == 0,
                      "line %zu, uncommented, does not set %s = %s: %s", i + 1, e->key, e->value, lines[i] + 2);
        ck_assert_msg(memcmp(&from_file, &before, sizeof from_file) != 0, "line %zu changed nothing", i + 1);
    }
    for (size_t i = 0; i < N_EXAMPLES; i++)
        ck_assert_msg(seen[i], "%s has no example line for %s", SHIPPED_CONF, examples[i].key);
    free_lines(lines, n);
}
END_TEST

/* The whole file with every example line uncommented: every value at once, as on the command line. */
START_TEST(test_all_example_lines_together)
{
    size_t n;
    char **lines = shipped_lines(&n);
    char path[128];
    snprintf(path, sizeof path, "%s/all.conf", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < n; i++)
        fputs(example_of(lines[i]) ? lines[i] + 2 : lines[i], f);
    ck_assert_int_eq(fclose(f), 0);

    static char others[N_EXAMPLES][300], values[N_EXAMPLES][300];
    char *other_opts[N_EXAMPLES], *value_opts[N_EXAMPLES];
    for (size_t i = 0; i < N_EXAMPLES; i++) {
        other_opts[i] = option(others[i], sizeof others[i], examples[i].key, examples[i].other);
        value_opts[i] = option(values[i], sizeof values[i], examples[i].key, examples[i].value);
    }
    gcd_config before, from_file, from_args;
    gcd_config_defaults(&before);
    ck_assert_int_eq(parse_args(&before, (int)N_EXAMPLES, other_opts), 0);
    from_file = before;
    from_args = before;
    ck_assert_int_eq(parse_file(&from_file, path), 0);
    ck_assert_int_eq(parse_args(&from_args, (int)N_EXAMPLES, value_opts), 0);
    ck_assert(memcmp(&from_file, &from_args, sizeof from_file) == 0);

    /* A few values read back directly, not only through the command line's parser. */
    ck_assert_str_eq(from_file.socket_path, "/run/gpucompd/gpucompd.sock");
    ck_assert_uint_eq(from_file.workers, 0);
    ck_assert_uint_eq(from_file.memory_budget, 16ull << 30);
    ck_assert_uint_eq(from_file.register_limit, 32ull << 30);
    ck_assert_uint_eq(from_file.idle_timeout_ms, 600000);
    ck_assert_int_eq(from_file.gpu, GCD_GPU_AUTO);
    ck_assert_int_eq(from_file.log_level, LOG_INFO);
    ck_assert(!from_file.allow_any_user);
    ck_assert_uint_eq(from_file.n_allow_uids, 1);
    ck_assert_uint_eq(from_file.allow_uids[0], 0);
    ck_assert_uint_eq(from_file.n_allow_gids, 1);
    ck_assert_uint_eq(from_file.allow_gids[0], FAKE_GPUCOMP_GID);
    ck_assert_str_eq(from_file.socket_group, "gpucomp");
    free_lines(lines, n);
}
END_TEST

/* Parse text as a config file onto the defaults; gcd_config_parse's result. */
static int parse_text(gcd_config *cfg, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/t.conf", tmpdir);
    write_file(path, text);
    gcd_config_defaults(cfg);
    return parse_file(cfg, path);
}

/* The documented rule: '#' at a line's start or after a blank starts a comment; elsewhere it is data. */
START_TEST(test_comment_rule)
{
    gcd_config c;
    ck_assert_int_eq(parse_text(&c, "  # an indented comment\n\tsocket = /tmp/a#b.sock\t# a remark\n"), 0);
    ck_assert_str_eq(c.socket_path, "/tmp/a#b.sock");
    ck_assert_int_eq(parse_text(&c, "socket = /tmp/x.sock # (ignored under socket activation)\n"), 0);
    ck_assert_str_eq(c.socket_path, "/tmp/x.sock");
    ck_assert_int_eq(parse_text(&c, "workers = 3 #\n"), 0);
    ck_assert_uint_eq(c.workers, 3);
    /* Not after a blank: part of the value, which is then not a number. */
    ck_assert_int_eq(parse_text(&c, "workers = 3# remark\n"), -1);
    /* Only a comment after '=': an empty value, refused. */
    ck_assert_int_eq(parse_text(&c, "socket = # nothing\n"), -1);
    ck_assert_int_eq(parse_text(&c, "# workers = 3\n"), 0);
    ck_assert_uint_eq(c.workers, 0);
}
END_TEST

/* A line of any length is one line: a long remark is not read as a second line. */
START_TEST(test_long_lines)
{
    static char text[4096];
    char *p = text;
    p += sprintf(p, "# ");
    memset(p, 'x', 2000);
    p += 2000;
    p += sprintf(p, "\nworkers = 5   # ");
    memset(p, 'y', 1000);
    p += 1000;
    strcpy(p, "\nlog-level = debug"); /* and no newline at the end */
    gcd_config c;
    ck_assert_int_eq(parse_text(&c, text), 0);
    ck_assert_uint_eq(c.workers, 5);
    ck_assert_int_eq(c.log_level, LOG_DEBUG);
}
END_TEST

/* key = value parsed over the defaults. */
static void config_with(gcd_config *cfg, const char *key, const char *value)
{
    char buf[256];
    char *opt = option(buf, sizeof buf, key, value);
    gcd_config_defaults(cfg);
    ck_assert_msg(parse_args(cfg, 1, &opt) == 0, "%s does not parse", opt);
}

/*
 * The table's reload metadata (settings.h gcd_setting): each setting's
 * field is its own, so a SIGHUP sees a change of exactly that setting and
 * copies it; the allow lists alone are left to the peer policy, and they
 * and the live settings are those a reload applies at once.
 */
START_TEST(test_each_setting_owns_its_field)
{
    static const example more[] = { { "fail-device", "0:1", "1.1:2" } };
    static const char *const live[] = { "max-request",
                                        "max-output",
                                        "request-timeout",
                                        "idle-timeout",
                                        "gpu-min-bytes",
                                        "gpu-min-bytes-bzip2",
                                        "gpu-min-bytes-bzip2-decompress",
                                        "log-level",
                                        "allow-users",
                                        "allow-groups" };
    unsigned n;
    const gcd_setting *all = gcd_settings(&n);
    ck_assert_uint_eq(n, N_EXAMPLES + 1);
    for (unsigned i = 0; i < n; i++) {
        const gcd_setting *s = &all[i];
        const example *e = NULL;
        for (size_t k = 0; k < N_EXAMPLES && !e; k++)
            if (strcmp(examples[k].key, s->name) == 0)
                e = &examples[k];
        if (!e && strcmp(s->name, more[0].key) == 0)
            e = &more[0];
        ck_assert_msg(e != NULL, "no values to try for %s", s->name);
        bool is_live = false;
        for (size_t k = 0; k < sizeof live / sizeof live[0]; k++)
            is_live = is_live || strcmp(live[k], s->name) == 0;
        ck_assert_msg(s->live == is_live, "%s: live is %d", s->name, (int)s->live);
        bool by_peers = strncmp(s->name, "allow-", 6) == 0;
        ck_assert_msg((s->size == 0) == by_peers, "%s: a field of %zu bytes", s->name, s->size);
        if (by_peers)
            continue;
        gcd_config a, b;
        config_with(&a, s->name, e->value);
        config_with(&b, s->name, e->other);
        for (unsigned j = 0; j < n; j++)
            ck_assert_msg(gcd_setting_differs(&all[j], &a, &b) == (j == i),
                          "%s set to %s and to %s: %s differs: %d", s->name, e->value, e->other, all[j].name,
                          (int)gcd_setting_differs(&all[j], &a, &b));
        gcd_setting_copy(s, &a, &b);
        ck_assert_msg(!gcd_setting_differs(s, &a, &b), "%s: not copied", s->name);
    }
}
END_TEST

/* A codec's own settings (codec.h gcd_codec_option) reach the codec: bzip2's break-evens, by operation. */
START_TEST(test_codec_options_reach_their_codec)
{
    gcd_request r = { .codec = GPUCOMP__CODEC__CODEC_BZIP2 };
    gcd_config cfg;
    gcd_config_defaults(&cfg);
    r.op = GPUCOMP__OP__OP_COMPRESS;
    ck_assert_uint_eq(gcd_codec_bzip2.gpu_min_bytes(&cfg, &r), 4u << 20);
    r.op = GPUCOMP__OP__OP_DECOMPRESS;
    ck_assert_uint_eq(gcd_codec_bzip2.gpu_min_bytes(&cfg, &r), 8u << 20);
    char *opts[] = { (char *)"--gpu-min-bytes-bzip2=1M", (char *)"--gpu-min-bytes-bzip2-decompress=3M" };
    ck_assert_int_eq(parse_args(&cfg, 2, opts), 0);
    r.op = GPUCOMP__OP__OP_COMPRESS;
    ck_assert_uint_eq(gcd_codec_bzip2.gpu_min_bytes(&cfg, &r), 1u << 20);
    r.op = GPUCOMP__OP__OP_DECOMPRESS;
    ck_assert_uint_eq(gcd_codec_bzip2.gpu_min_bytes(&cfg, &r), 3u << 20);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *t = tcase_create("file");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, test_each_example_line_sets_its_value);
    tcase_add_test(t, test_all_example_lines_together);
    tcase_add_test(t, test_comment_rule);
    tcase_add_test(t, test_long_lines);
    tcase_add_test(t, test_each_setting_owns_its_field);
    tcase_add_test(t, test_codec_options_reach_their_codec);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
