/*
 * check_bz2compat_file.c - libgpucomp-bz2's FILE calls (BZ2_bzRead*,
 * BZ2_bzWrite*) and bzopen family against Debian's libbz2: both libraries
 * are dlopen'ed side by side (bzlib_pair.h) and play the same session on the
 * same bytes; every call's return value and bzerror, in order, and every
 * decoded byte must be equal. Compressed bytes may differ (docs/BZIP2.md,
 * "libbz2 compatibility"), so a written file is judged by what both read
 * back from it.
 */
#include <bzlib.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "bzlib_pair.h"
#include "daemon_harness.h"

static bzlib ref, shim;

static void setup(void)
{
    bzlib_load(&ref, "libbz2.so.1.0");
    bzlib_load(&shim, SHIM_PATH);
    ck_assert_ptr_ne(ref.read, shim.read);
}

/* The shim stays loaded: its CPU engine keeps pool threads, which an unload
 * would pull the code from under (libgpucomp-bz2(7) says so). */
static void teardown(void)
{
    dlclose(ref.handle);
}

/* What a session did: each call's results in order, and the bytes it read. */
typedef struct session {
    long *trace;
    size_t n, cap;
    uint8_t *out;
    size_t len, out_cap;
} session;

static void note(session *s, long v)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->trace = realloc(s->trace, s->cap * sizeof *s->trace);
        ck_assert_ptr_nonnull(s->trace);
    }
    s->trace[s->n++] = v;
}

static void keep(session *s, const void *p, size_t n)
{
    if (s->len + n > s->out_cap) {
        s->out_cap = (s->len + n) * 2;
        s->out = realloc(s->out, s->out_cap);
        ck_assert_ptr_nonnull(s->out);
    }
    if (n)
        memcpy(s->out + s->len, p, n);
    s->len += n;
}

/* Both sessions did the same: same results in the same order, same bytes. */
static void same(session *a, session *b, const char *what)
{
    size_t k = 0;
    while (k < a->n && k < b->n && a->trace[k] == b->trace[k])
        k++;
    /* CHECK_BZ2COMPAT_TRACE=1 prints both sessions when they differ */
    if (getenv("CHECK_BZ2COMPAT_TRACE") && (k != a->n || k != b->n))
        for (size_t i = 0; i < a->n || i < b->n; i++)
            fprintf(stderr, "%zu: %ld %ld\n", i, i < a->n ? a->trace[i] : -999, i < b->n ? b->trace[i] : -999);
    ck_assert_msg(k == a->n && k == b->n, "%s: result %zu differs: libbz2 %ld, shim %ld (of %zu and %zu)", what, k,
                  k < a->n ? a->trace[k] : -999, k < b->n ? b->trace[k] : -999, a->n, b->n);
    ck_assert_msg(a->len == b->len, "%s: libbz2 read %zu bytes, shim %zu", what, a->len, b->len);
    ck_assert(a->len == 0 || memcmp(a->out, b->out, a->len) == 0);
    free(a->trace);
    free(a->out);
    free(b->trace);
    free(b->out);
}

/* A FILE holding data, at its start. */
static FILE *file_with(const void *data, size_t n)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    rewind(f);
    return f;
}

static int at_eof(FILE *f)
{
    int c = fgetc(f);
    if (c == EOF)
        return 1;
    ungetc(c, f);
    return 0;
}

/*
 * Read every stream of data as bzip2 does: BZ2_bzRead len bytes at a time
 * while it says BZ_OK; at BZ_STREAM_END take the unused bytes, close, and
 * open a new handle on them unless none are left at the end of the file.
 */
static session read_all(const bzlib *b, const uint8_t *data, size_t n, int len)
{
    FILE *f = file_with(data, n);
    session s = { 0 };
    char unused[BZ_MAX_UNUSED];
    int n_unused = 0, err;
    char *buf = malloc((size_t)len);
    ck_assert_ptr_nonnull(buf);
    for (int streams = 0; streams < 50; streams++) {
        BZFILE *h = b->read_open(&err, f, 0, 0, unused, n_unused);
        note(&s, err);
        ck_assert_ptr_nonnull(h);
        int got;
        do {
            got = b->read(&err, h, buf, len);
            note(&s, got);
            note(&s, err);
            keep(&s, buf, (size_t)got);
        } while (err == BZ_OK);
        if (err != BZ_STREAM_END) {
            b->read_close(&err, h);
            note(&s, err);
            break;
        }
        void *u;
        b->read_unused(&err, h, &u, &n_unused);
        note(&s, err);
        note(&s, n_unused);
        memcpy(unused, u, (size_t)n_unused);
        b->read_close(&err, h);
        note(&s, err);
        if (n_unused == 0 && at_eof(f))
            break;
    }
    free(buf);
    fclose(f);
    return s;
}

static void read_both(const uint8_t *data, size_t n, int len)
{
    session a = read_all(&ref, data, n, len), b = read_all(&shim, data, n, len);
    char what[64];
    snprintf(what, sizeof what, "%zu bytes read %d at a time", n, len);
    same(&a, &b, what);
}

static uint8_t *test_data(size_t n, int kind)
{
    uint8_t *d = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(d);
    fill_test_data(d, n, kind, 3535);
    return d;
}

/* data compressed by libbz2 at level into a malloc'd buffer */
static uint8_t *libbz2_compress(const uint8_t *data, size_t n, int level, size_t *zlen)
{
    unsigned cap = (unsigned)(n + n / 100 + 600);
    char *z = malloc(cap);
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(ref.b2b_compress(z, &cap, (char *)(n ? data : (const uint8_t *)""), (unsigned)n, level, 0, 0),
                     BZ_OK);
    *zlen = cap;
    return (uint8_t *)z;
}

static const int lens[] = { 1, 4999, 5000, 65536, 1 << 24 };

/* One stream of several blocks, and streams one after another (an empty one
 * among them), read in 1-byte to huge pieces. */
START_TEST(test_read_streams)
{
    size_t n = 350000, z1, z2, z3;
    uint8_t *d = test_data(n, 0);
    uint8_t *a = libbz2_compress(d, n, 1, &z1), *b = libbz2_compress(d, 0, 9, &z2),
            *c = libbz2_compress(d + 7, 12345, 9, &z3);
    uint8_t *all = malloc(z1 + z2 + z3 + z1);
    ck_assert_ptr_nonnull(all);
    memcpy(all, a, z1);
    memcpy(all + z1, b, z2);
    memcpy(all + z1 + z2, c, z3);
    memcpy(all + z1 + z2 + z3, a, z1);
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        read_both(a, z1, lens[i]);
        read_both(all, z1 + z2 + z3 + z1, lens[i]);
    }
    /* a stream whose end lies just before, at and after each BZ_MAX_UNUSED piece's end */
    for (size_t at = BZ_MAX_UNUSED - 12; at <= BZ_MAX_UNUSED + 12; at++) {
        size_t lead = at - z3 % BZ_MAX_UNUSED;
        uint8_t *p = malloc(z3 * 2 + lead);
        ck_assert_ptr_nonnull(p);
        memcpy(p, c, z3);
        memcpy(p + z3, c, z3);
        memcpy(p + 2 * z3, c, lead); /* a third stream cut short */
        read_both(p, 2 * z3 + lead, 4096);
        free(p);
    }
    free(all);
    free(a);
    free(b);
    free(c);
    free(d);
}
END_TEST

/* Cut short anywhere, bit flips, wrong block CRCs, garbage after a stream, no stream at all. */
START_TEST(test_read_damaged)
{
    size_t n = 350000, z;
    uint8_t *d = test_data(n, 2);
    uint8_t *a = libbz2_compress(d, n, 1, &z);
    for (size_t cut = 0; cut < z; cut += 4001)
        read_both(a, cut, 5000);
    for (size_t cut = z - 12; cut < z; cut++)
        read_both(a, cut, cut % 2 ? 1 << 24 : 777);
    uint8_t *bad = malloc(z + 20);
    ck_assert_ptr_nonnull(bad);
    for (size_t bit = 0; bit < z * 8; bit += z * 8 / 37 + 1) {
        memcpy(bad, a, z);
        bad[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
        read_both(bad, z, 5000);
    }
    /* each block's stored CRC wrong: libbz2 reads out the block's bytes
     * before BZ_DATA_ERROR, in pieces of 1 byte to the whole file */
    for (unsigned k = 0; bzlib_block_bit(a, z, k) != UINT64_MAX; k++) {
        memcpy(bad, a, z);
        uint64_t crc_bit = bzlib_block_bit(a, z, k) + 48 + 31;
        bad[crc_bit / 8] ^= (uint8_t)(0x80 >> (crc_bit % 8));
        for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
            read_both(bad, z, lens[i]);
    }
    memcpy(bad, a, z);
    memcpy(bad + z, "garbage after the end", 20);
    read_both(bad, z + 20, 5000);
    memcpy(bad + z, "BZh9", 4);
    read_both(bad, z + 4, 5000);
    static const char *const others[] = { "", "B", "BZh", "BZh0", "not bzip2 at all" };
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        read_both((const uint8_t *)others[i], strlen(others[i]), 100);
    free(bad);
    free(a);
    free(d);
}
END_TEST

/*
 * Write data with b, pieces of `piece` bytes (0: one call), at level, then
 * close: every result noted (the output count only as "the file's size").
 * Returns the file, at its start.
 */
static FILE *write_all(const bzlib *b, const uint8_t *data, size_t n, size_t piece, int level, session *s)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    int err;
    BZFILE *h = b->write_open(&err, f, level, 0, 0);
    note(s, err);
    ck_assert_ptr_nonnull(h);
    piece = piece ? piece : n;
    for (size_t at = 0; at < n; at += piece) {
        b->write(&err, h, (void *)(data + at), (int)(n - at < piece ? n - at : piece));
        note(s, err);
    }
    b->write(&err, h, (void *)data, 0);
    note(s, err);
    unsigned in_lo = 1, in_hi = 1, out_lo = 1, out_hi = 1;
    b->write_close64(&err, h, 0, &in_lo, &in_hi, &out_lo, &out_hi);
    note(s, err);
    note(s, (long)((uint64_t)in_hi << 32 | in_lo));
    note(s, (long)((uint64_t)out_hi << 32 | out_lo) == ftell(f));
    rewind(f);
    return f;
}

/* Read back a FILE b wrote, with both libraries. */
static void read_back(FILE *f, const uint8_t *data, size_t n)
{
    fseek(f, 0, SEEK_END);
    size_t zlen = (size_t)ftell(f);
    rewind(f);
    uint8_t *z = malloc(zlen ? zlen : 1);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq(fread(z, 1, zlen, f), zlen);
    session a = read_all(&ref, z, zlen, 65536);
    ck_assert_uint_eq(a.len, n);
    ck_assert(n == 0 || memcmp(a.out, data, n) == 0);
    read_both(z, zlen, 5000);
    free(a.trace);
    free(a.out);
    free(z);
}

static void write_both(const uint8_t *data, size_t n, size_t piece, int level)
{
    session a = { 0 }, b = { 0 };
    FILE *fa = write_all(&ref, data, n, piece, level, &a);
    FILE *fb = write_all(&shim, data, n, piece, level, &b);
    same(&a, &b, "write");
    read_back(fa, data, n);
    read_back(fb, data, n);
    fclose(fa);
    fclose(fb);
}

START_TEST(test_write_read_back)
{
    size_t n = 700 * 1000;
    uint8_t *d = test_data(n, 1);
    write_both(d, 0, 0, 9);
    write_both(d, 20000, 1, 9);
    write_both(d, n, 4999, 1);
    write_both(d, n, 0, 3);
    free(d);
}
END_TEST

/* One huge write and one huge read: past the shim's 32 MiB part. */
START_TEST(test_write_read_huge)
{
    size_t n = (size_t)33 << 20;
    uint8_t *d = test_data(n, 2);
    session a = { 0 }, b = { 0 };
    FILE *fa = write_all(&ref, d, n, 0, 9, &a);
    FILE *fb = write_all(&shim, d, n, 0, 9, &b);
    same(&a, &b, "huge write");
    uint8_t *z = malloc(n);
    ck_assert_ptr_nonnull(z);
    size_t zlen = fread(z, 1, n, fb);
    read_both(z, zlen, 1 << 26);
    session r = read_all(&ref, z, zlen, 1 << 26);
    ck_assert_uint_eq(r.len, n);
    ck_assert(memcmp(r.out, d, n) == 0);
    free(r.trace);
    free(r.out);
    free(z);
    fclose(fa);
    fclose(fb);
    free(d);
}
END_TEST

/* Argument and order errors, abandoning, and failing FILEs, call by call. */
static session errors(const bzlib *b)
{
    session s = { 0 };
    int err = 99;
    char buf[64], *u = buf;
    FILE *f = tmpfile();
    note(&s, b->read_open(&err, NULL, 0, 0, NULL, 0) == NULL);
    note(&s, err);
    const int bad_open[][4] = { { 5, 0, 0, 0 }, { -1, 0, 0, 0 }, { 0, 2, 0, 0 },
                                { 0, 0, 0, 1 }, { 0, 0, 1, -1 }, { 0, 0, 1, BZ_MAX_UNUSED + 1 } };
    for (size_t i = 0; i < sizeof bad_open / sizeof *bad_open; i++) {
        note(&s, b->read_open(&err, f, bad_open[i][0], bad_open[i][1], bad_open[i][2] ? buf : NULL,
                              bad_open[i][3]) == NULL);
        note(&s, err);
    }
    note(&s, b->write_open(&err, NULL, 9, 0, 0) == NULL);
    note(&s, err);
    const int bad_wopen[][3] = {
        { 0, 0, 0 }, { 10, 0, 0 }, { 9, 5, 0 }, { 9, -1, 0 }, { 9, 0, 251 }, { 9, 0, -1 }
    };
    for (size_t i = 0; i < sizeof bad_wopen / sizeof *bad_wopen; i++) {
        note(&s, b->write_open(&err, f, bad_wopen[i][0], bad_wopen[i][1], bad_wopen[i][2]) == NULL);
        note(&s, err);
    }
    /* a reading handle: writing calls, unused bytes before the end, odd reads */
    BZFILE *r = b->read_open(&err, f, 4, 1, buf, 0);
    note(&s, err);
    b->write(&err, r, buf, 1);
    note(&s, err);
    b->write_close(&err, r, 0, NULL, NULL);
    note(&s, err);
    int nu = 7;
    b->read_unused(&err, r, (void **)&u, &nu);
    note(&s, err);
    note(&s, nu);
    note(&s, b->read(&err, r, NULL, 1));
    note(&s, err);
    note(&s, b->read(&err, r, buf, -1));
    note(&s, err);
    note(&s, b->read(&err, r, buf, 0));
    note(&s, err);
    note(&s, b->read(&err, r, buf, 1)); /* an empty file */
    note(&s, err);
    note(&s, b->read(NULL, r, buf, 1));
    b->read_unused(&err, NULL, (void **)&u, &nu);
    note(&s, err);
    b->read_close(&err, r);
    note(&s, err);
    b->read_close(&err, NULL);
    note(&s, err);
    /* a writing handle: reading calls, odd writes, abandoning */
    BZFILE *w = b->write_open(&err, f, 1, 4, 250);
    note(&s, err);
    note(&s, b->read(&err, w, buf, 1));
    note(&s, err);
    b->read_close(&err, w);
    note(&s, err);
    b->write(&err, w, NULL, 1);
    note(&s, err);
    b->write(&err, w, buf, -1);
    note(&s, err);
    b->write(&err, w, (void *)"some bytes", 10);
    note(&s, err);
    unsigned in = 5, out = 5;
    b->write_close(&err, w, 1, &in, &out);
    note(&s, err);
    note(&s, in);
    note(&s, out);
    b->write_close(&err, NULL, 0, &in, &out);
    note(&s, err);
    fseek(f, 0, SEEK_END);
    note(&s, ftell(f)); /* abandoned: nothing written */
    fclose(f);
    return s;
}

START_TEST(test_errors)
{
    session a = errors(&ref), b = errors(&shim);
    same(&a, &b, "errors");
}
END_TEST

/* A FILE that cannot be written or read: BZ_IO_ERROR where libbz2 says so. */
static session io_errors(const bzlib *b)
{
    session s = { 0 };
    int err;
    char buf[100];
    FILE *ro = fopen("/dev/null", "r");
    ck_assert_ptr_nonnull(ro);
    BZFILE *w = b->write_open(&err, ro, 9, 0, 0);
    note(&s, err);
    b->write(&err, w, (void *)"bytes that cannot be written", 28);
    note(&s, err);
    b->write_close(&err, w, 0, NULL, NULL);
    note(&s, err);
    b->write(&err, w, (void *)"more", 4);
    note(&s, err);
    note(&s, b->write_open(&err, ro, 9, 0, 0) == NULL); /* the FILE has failed */
    note(&s, err);
    clearerr(ro);
    b->write_close(&err, w, 1, NULL, NULL); /* abandoned: released */
    note(&s, err);
    fclose(ro);
    FILE *wo = tmpfile();
    int fd = open("/dev/null", O_WRONLY);
    ck_assert_int_ge(fd, 0);
    wo = fdopen(fd, "w");
    BZFILE *r = b->read_open(&err, wo, 0, 0, NULL, 0);
    note(&s, err);
    for (int k = 0; k < 3; k++) {
        note(&s, b->read(&err, r, buf, sizeof buf));
        note(&s, err);
    }
    b->read_close(&err, r);
    note(&s, err);
    fclose(wo);
    return s;
}

START_TEST(test_io_errors)
{
    session a = io_errors(&ref), b = io_errors(&shim);
    same(&a, &b, "io errors");
}
END_TEST

static char tmpdir[] = "/tmp/check-bz2compat-file.XXXXXX";

static void dir_setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void dir_teardown(void)
{
    run_shell("rm -rf '%s'", tmpdir);
    memcpy(tmpdir + strlen(tmpdir) - 6, "XXXXXX", 6);
}

/* bzerror's code and words for h, noted */
static void note_error(session *s, const bzlib *b, BZFILE *h)
{
    int e = 99;
    const char *words = b->zerror(h, &e);
    note(s, e);
    note(s, (long)words[0] << 16 | (long)strlen(words) << 8 | (unsigned char)words[strlen(words) - 1]);
}

/* Read a file with bzopen's calls, len bytes at a time, to the end or an error. */
static void zread_all(session *s, const bzlib *b, BZFILE *h, int len)
{
    char buf[8192];
    int got;
    do {
        got = b->zread(h, buf, len);
        note(s, got);
        note_error(s, b, h);
        if (got > 0)
            keep(s, buf, (size_t)got);
    } while (got > 0);
    note(s, b->zread(h, buf, len)); /* after the end: 0 again; after an error: -1 again */
    b->zclose(h);
}

static session zcalls(const bzlib *b, const uint8_t *data, size_t n, const char *tag)
{
    session s = { 0 };
    char path[256];
    snprintf(path, sizeof path, "%s/%s.bz2", tmpdir, tag);
    note(&s, b->zopen(path, NULL) == NULL);
    note(&s, b->zopen(path, "r") == NULL); /* no such file */
    BZFILE *w = b->zopen(path, "wx0");
    note(&s, w != NULL);
    for (size_t at = 0; at < n; at += 3001)
        note(&s, b->zwrite(w, (void *)(data + at), (int)(n - at < 3001 ? n - at : 3001)));
    note(&s, b->zflush(w));
    note_error(&s, b, w);
    b->zclose(w);
    /* a failed write abandons the stream: bzclose writes nothing more */
    char other[300];
    snprintf(other, sizeof other, "%s.abandoned", path);
    BZFILE *wa = b->zopen(other, "w");
    note(&s, b->zwrite(wa, (void *)data, 10));
    note(&s, b->zwrite(wa, (void *)data, -1));
    note_error(&s, b, wa);
    b->zclose(wa);
    size_t alen = 99;
    free(read_file(other, &alen));
    note(&s, (long)alen);
    BZFILE *r = b->zopen(path, "rs");
    note(&s, r != NULL);
    note(&s, b->zwrite(r, (void *)data, 1));
    zread_all(&s, b, r, 777);
    /* the same file, damaged, through a descriptor */
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "\x31\x40", 2, 4), 2); /* the first block magic */
    r = b->zdopen(fd, "r");
    note(&s, r != NULL);
    zread_all(&s, b, r, 8192);
    fd = open(path, O_RDWR | O_TRUNC);
    ck_assert_int_eq(write(fd, "not bzip2", 9), 9);
    ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
    zread_all(&s, b, b->zdopen(fd, "r9"), 100);
    return s;
}

START_TEST(test_bzopen_family)
{
    size_t n = 250000;
    uint8_t *d = test_data(n, 0);
    session a = zcalls(&ref, d, n, "ref"), b = zcalls(&shim, d, n, "shim");
    ck_assert_uint_eq(a.len, n);
    ck_assert(memcmp(a.out, d, n) == 0);
    same(&a, &b, "bzopen");
    free(d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bz2compat_file");
    TCase *t = tcase_create("file");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_checked_fixture(t, dir_setup, dir_teardown);
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_read_streams);
    tcase_add_test(t, test_read_damaged);
    tcase_add_test(t, test_write_read_back);
    tcase_add_test(t, test_write_read_huge);
    tcase_add_test(t, test_errors);
    tcase_add_test(t, test_io_errors);
    tcase_add_test(t, test_bzopen_family);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
