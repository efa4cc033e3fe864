/*
 * check_names.c - gpucomp called by bzip2's names (bzip2, bunzip2, bzcat,
 * through links as the gpucomp-bzip2 package installs them) against Debian's
 * bzip2 called by the same names: exit status, files left, standard output;
 * and tar -j with the links first on PATH.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "daemon_harness.h"

static test_daemon daemon_under_test;

/* "VAR=value ..." that runs the links against the daemon under test. */
static char env[1024];

/*
 * The links must reach the real program: libtool's wrapper script in the
 * build tree would exec it under its own name, losing the link's. So a
 * wrapper's program (.libs/ beside it) is linked instead, and finds the
 * uninstalled library through LD_LIBRARY_PATH.
 */
static void setup(void)
{
    test_daemon_start(&daemon_under_test, NULL);
    const char *bin = getenv("GPUCOMP");
    ck_assert_msg(bin != NULL, "GPUCOMP (path of the CLI) is not set");
    const char *d = daemon_under_test.dir;
    ck_assert_int_eq(run_shell("cd %s && mkdir links && b='%s' && real=$b && "
                               "if [ -x \"$(dirname \"$b\")/.libs/gpucomp\" ]; then "
                               "real=$(dirname \"$b\")/.libs/gpucomp; fi && "
                               "for n in bzip2 bunzip2 bzcat; do ln -s \"$real\" links/$n || exit 1; done",
                               d, bin),
                     0);
    snprintf(env, sizeof env,
             "GPUCOMP_SOCKET=%s PATH=%s/links:$PATH LD_LIBRARY_PATH=$(dirname "
             "'%s')/../../libclient/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}",
             daemon_under_test.socket_path, d, bin);
}

static void teardown(void)
{
    test_daemon_cleanup(&daemon_under_test);
}

/* What of standard output is compared when both succeed. */
enum { OUT_NONE, OUT_BYTES, OUT_DECOMPRESSED };

typedef struct by_name {
    const char *what;
    const char *setup; /* shell, run in the empty directory */
    const char *name;  /* bzip2, bunzip2 or bzcat */
    const char *args;
    int expect; /* Debian's bzip2 exit status under that name, measured */
    int out;
} by_name;

#define SEQ "seq 1 20000 > f && bzip2 -k f"
#define TWO SEQ " && seq 7 9000 > g && bzip2 g"
#define CORRUPT SEQ " && rm f && printf X | dd of=f.bz2 bs=1 seek=200 conv=notrunc 2>/dev/null"

static const by_name cases[] = {
    { "bunzip2 from a pipe", SEQ, "bunzip2", "< f.bz2", 0, OUT_BYTES },
    { "bunzip2 FILE", SEQ " && rm f", "bunzip2", "f.bz2", 0, OUT_NONE },
    { "bunzip2 -c", SEQ, "bunzip2", "-c f.bz2", 0, OUT_BYTES },
    { "bunzip2 -k", SEQ " && rm f", "bunzip2", "-k f.bz2", 0, OUT_NONE },
    { "bunzip2 output exists", SEQ, "bunzip2", "f.bz2", 1, OUT_NONE },
    { "bunzip2 unknown suffix", "seq 1 20000 | bzip2 > x.txt", "bunzip2", "x.txt", 0, OUT_NONE },
    { "bunzip2 not bzip2", "seq 1 100 > f.bz2", "bunzip2", "f.bz2", 2, OUT_NONE },
    { "bunzip2 corrupt", CORRUPT, "bunzip2", "f.bz2", 2, OUT_NONE },
    { "bunzip2 -t", SEQ, "bunzip2", "-t f.bz2", 0, OUT_NONE },
    { "bunzip2 -z compresses", "seq 1 20000 > f", "bunzip2", "-z f", 0, OUT_NONE },
    { "bunzip2 missing file", "true", "bunzip2", "nofile.bz2", 1, OUT_NONE },
    { "bzcat FILE", SEQ, "bzcat", "f.bz2", 0, OUT_BYTES },
    { "bzcat two files", TWO, "bzcat", "f.bz2 g.bz2", 0, OUT_BYTES },
    { "bzcat from a pipe", SEQ, "bzcat", "< f.bz2", 0, OUT_BYTES },
    { "bzcat -", SEQ, "bzcat", "- < f.bz2", 0, OUT_BYTES },
    { "bzcat -k", SEQ, "bzcat", "-k f.bz2", 0, OUT_BYTES },
    { "bzcat unknown suffix", "seq 1 20000 | bzip2 > x.txt", "bzcat", "x.txt", 0, OUT_BYTES },
    { "bzcat not bzip2", "seq 1 100 > f.bz2", "bzcat", "f.bz2", 2, OUT_NONE },
    { "bzcat corrupt", CORRUPT, "bzcat", "f.bz2", 2, OUT_NONE },
    { "bzcat missing, then good", SEQ, "bzcat", "nofile.bz2 f.bz2", 1, OUT_NONE },
    { "bzcat trailing junk", SEQ " && printf junk >> f.bz2", "bzcat", "f.bz2", 0, OUT_BYTES },
    { "bzcat -z compresses to stdout", "seq 1 20000 > f", "bzcat", "-z f", 0, OUT_DECOMPRESSED },
    { "bzip2 FILE", "seq 1 20000 > f", "bzip2", "f", 0, OUT_NONE },
    { "bzip2 from a pipe", "seq 1 20000 > f", "bzip2", "< f", 0, OUT_DECOMPRESSED },
    { "bzip2 -d", SEQ " && rm f", "bzip2", "-d f.bz2", 0, OUT_NONE },
    { "bzip2 -dc", SEQ, "bzip2", "-dc f.bz2", 0, OUT_BYTES },
    { "bzip2 already .bz2", SEQ, "bzip2", "f.bz2", 1, OUT_NONE },
};

START_TEST(test_name_like_bzip2)
{
    const by_name *c = &cases[_i];
    const char *d = daemon_under_test.dir;
    ck_assert_int_eq(run_shell("mkdir %s/bz %s/gc", d, d), 0);
    ck_assert_msg(run_shell("cd %s/bz && { %s; } && cd %s/gc && { %s; }", d, c->setup, d, c->setup) == 0,
                  "%s: setup failed", c->what);
    int bz = run_shell("cd %s/bz && %s %s >../bz.out 2>../bz.err", d, c->name, c->args);
    int gc = run_shell("cd %s/gc && %s %s %s >../gc.out 2>../gc.err", d, env, c->name, c->args);
    ck_assert_msg(bz == c->expect, "%s: %s %s exits %d here, the table says %d", c->what, c->name, c->args, bz,
                  c->expect);
    ck_assert_msg(gc == bz, "%s: gpucomp as %s %s exits %d, bzip2 %d", c->what, c->name, c->args, gc, bz);
    ck_assert_msg(run_shell("cd %s && [ \"$(ls -A bz)\" = \"$(ls -A gc)\" ]", d) == 0, "%s: files differ",
                  c->what);
    int same = run_shell("cd %s && for f in $(ls -A bz); do case $f in "
                         "*.bz2) bzip2 -dc bz/$f >t1 2>/dev/null; bzip2 -dc gc/$f >t2 2>/dev/null; "
                         "cmp -s t1 t2 || exit 1;; *) cmp -s bz/$f gc/$f || exit 1;; esac; done",
                         d);
    ck_assert_msg(same == 0, "%s: a file's contents differ", c->what);
    if (c->expect == 0 && c->out == OUT_BYTES)
        ck_assert_msg(run_shell("cmp -s %s/bz.out %s/gc.out", d, d) == 0, "%s: standard output differs", c->what);
    if (c->expect == 0 && c->out == OUT_DECOMPRESSED)
        ck_assert_msg(run_shell("cd %s && bzip2 -dc bz.out > t1 && bzip2 -dc gc.out > t2 && cmp -s t1 t2", d) == 0,
                      "%s: standard output decompresses to other bytes", c->what);
    if (c->expect == 0 && c->out == OUT_NONE)
        ck_assert_msg(run_shell("test ! -s %s/gc.out", d) == 0, "%s: wrote to standard output", c->what);
}
END_TEST

/* argv[0] as a path: the basename decides, as in bzip2. */
START_TEST(test_name_by_path)
{
    const char *d = daemon_under_test.dir;
    ck_assert_int_eq(run_shell("cd %s && seq 1 5000 > f && bzip2 -k f", d), 0);
    ck_assert_int_eq(run_shell("cd %s && %s %s/links/bunzip2 < f.bz2 > out && cmp -s f out", d, env, d), 0);
    ck_assert_int_eq(run_shell("cd %s && %s ./links/bzcat f.bz2 > out2 && cmp -s f out2", d, env), 0);
}
END_TEST

/*
 * tar -j runs "bzip2" (with -d to extract) from PATH: with the links first,
 * the service does the work both ways, and Debian's tar and bzip2 read what
 * it wrote.
 */
START_TEST(test_tar_through_links)
{
    const char *d = daemon_under_test.dir, *s = daemon_under_test.socket_path;
    ck_assert_int_eq(run_shell("cd %s && mkdir t && seq 1 30000 > t/a && seq 5 7000 > t/b && "
                               "tar -cjf deb.tar.bz2 t",
                               d),
                     0);
    const char *prefix = env;
    /* extract Debian's archive through the links */
    ck_assert_int_eq(run_shell("cd %s && mkdir x && %s tar -C x -xjf deb.tar.bz2 && diff -r t x/t", d, prefix), 0);
    ck_assert_int_eq(
        run_shell("cd %s && mkdir y && %s tar -C y --use-compress-program=bzip2 -xf deb.tar.bz2 && diff -r t y/t",
                  d, prefix),
        0);
    /* create through the links; Debian's tar (and bzip2) extract it */
    ck_assert_int_eq(run_shell("cd %s && %s tar -cjf gc.tar.bz2 t && mkdir z && tar -C z -xjf gc.tar.bz2 && "
                               "diff -r t z/t",
                               d, prefix),
                     0);
    /* the daemon did that work: two extractions and one compression at least */
    ck_assert_int_eq(run_shell("'%s' --socket %s --stats --json | python3 -c 'import json,sys\n"
                               "o = json.load(sys.stdin)\n"
                               "assert o[\"requests_ok\"] >= 3, o'",
                               getenv("GPUCOMP"), s),
                     0);
}
END_TEST

static Suite *names_suite(void)
{
    Suite *s = suite_create("names");
    TCase *tc = tcase_create("bzip2-names");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_name_like_bzip2, 0, sizeof cases / sizeof cases[0]);
    tcase_add_test(tc, test_name_by_path);
    tcase_add_test(tc, test_tar_through_links);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(names_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
