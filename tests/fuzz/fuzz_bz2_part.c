/*
 * fuzz_bz2_part.c - libFuzzer target for the streamed bzip2 decoder.
 *
 * The first input byte picks a split schedule for the rest: the rest is
 * fed to bz2_decompress_part piece by piece, the way the daemon does it
 * (keep the unconsumed tail, append the next piece, more = 1 until the last
 * call). The result must equal bz2_decompress of the rest in one call: the
 * same bytes and status, the same message on error; where the whole decode
 * reports trailing garbage, the streamed one flags it (GC_OK) at the same
 * offset, with the output of the input before it. Both decode under a
 * 16 MiB output limit (inputs over it are skipped: no call of the streamed
 * decode can exceed it when the whole stays under it). Bit 6 of the
 * selector makes the streamed calls bz2_decompress_part_into, writing
 * straight into the result: the same result, and every call's output
 * announced as final, block by block, in ascending lengths.
 *
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -Icommon -Icodecs/rle -Icodecs/bzip2 -Icodecs/bzip2/cpu \
 *   tests/fuzz/fuzz_bz2_part.c codecs/bzip2/cpu/bz2_*.c common/gc_status.c \
 *   common/parallel.c common/scratch.c -lpthread -o /tmp/fuzz_bz2_part
 * /tmp/fuzz_bz2_part -max_total_time=120 tests/fuzz/corpus/bzip2
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bzip2.h"

#define MAX_OUT (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Schedule from the selector byte: piece lengths drawn from a small PRNG
 * seeded by it. Low 2 bits: 0 = 1-byte pieces, 1 = up to 16, 2 = up to
 * 4096, 3 = two pieces cut at a position chosen by the seed. */
typedef struct sched {
    unsigned mode;
    uint32_t x;
    size_t cut;
} sched;

static size_t next_piece(sched *s, size_t left, unsigned call)
{
    s->x = s->x * 1103515245u + 12345u;
    uint32_t r = s->x >> 8;
    switch (s->mode) {
    case 0: return left ? 1 : 0;
    case 1: return r % 17; /* 0 too: an empty piece must be harmless */
    case 2: return 1 + r % 4096;
    default: return call == 0 ? s->cut : left;
    }
}

/* The largest final length announced so far; announcements must ascend. */
static void heard(void *ctx, size_t final)
{
    size_t *last = ctx;
    if (final <= *last)
        abort();
    *last = final;
}

/* One streamed call: into the caller's buffer at got (room bytes), or a buffer of its own copied there. */
static int part_call(const uint8_t *buf, size_t blen, int more, bz2_dstate *st, unsigned threads, int into,
                     uint8_t *got, size_t room, size_t *ol, size_t *used, gc_error *err)
{
    if (into) {
        size_t last = 0;
        gc_job job = { .progress = heard, .ctx = &last };
        int rc = bz2_decompress_part_into(buf, blen, more, st, MAX_OUT, got, room, threads, &job, ol, used, err);
        if (rc == GC_OK && last != *ol)
            abort(); /* every byte of a call's output was announced */
        return rc;
    }
    uint8_t *o = NULL;
    int rc = bz2_decompress_part(buf, blen, more, st, MAX_OUT, threads, NULL, &o, ol, used, err);
    if (rc == GC_OK) {
        if (*ol > room)
            abort();
        memcpy(got, o, *ol);
    }
    free(o);
    return rc;
}

static void fail_with(const char *what, int rc_whole, const char *m_whole, int rc_part, const char *m_part)
{
    fprintf(stderr, "fuzz_bz2_part: %s: whole %d '%s', streamed %d '%s'\n", what, rc_whole, m_whole, rc_part,
            m_part);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned sel = data[0];
    const uint8_t *in = data + 1;
    size_t n = size - 1;

    uint8_t *want = NULL;
    size_t want_len = 0;
    gc_error werr;
    int wrc = bz2_decompress(in, n, MAX_OUT, 1, &want, &want_len, &werr);
    if (wrc == GC_E_LIMIT) /* a bomb: the streamed calls would split the limit differently */
        return 0;

    sched s = { .mode = sel & 3, .x = sel * 2654435761u, .cut = n ? (size_t)(sel >> 2) * n / 63 : 0 };
    if (s.cut > n)
        s.cut = n;
    uint8_t *buf = malloc(n + 1);
    uint8_t *got = malloc(MAX_OUT + 1);
    if (!buf || !got)
        abort();
    size_t blen = 0, fed = 0, got_len = 0, consumed = 0, garbage_abs = (size_t)-1;
    bz2_dstate st = { 0 };
    int prc = GC_OK;
    gc_error perr = { 0 };
    for (unsigned call = 0;; call++) {
        size_t p = next_piece(&s, n - fed, call);
        if (p > n - fed)
            p = n - fed;
        memcpy(buf + blen, in + fed, p);
        blen += p;
        fed += p;
        int more =
            fed < n || (s.mode == 1 && call % 5 == 1 && fed == n && p != 0); /* sometimes an empty last call */
        size_t ol = 0, used = 0;
        int had_garbage = st.garbage;
        prc = part_call(buf, blen, more, &st, 1 + (sel >> 7), (sel >> 6) & 1, got + got_len, MAX_OUT - got_len,
                        &ol, &used, &perr);
        if (prc != GC_OK)
            break;
        if (used > blen || st.bit > 7 || (had_garbage && ol) || got_len + ol > MAX_OUT)
            abort();
        if (!had_garbage && st.garbage)
            garbage_abs = consumed + (size_t)st.garbage_at;
        got_len += ol;
        memmove(buf, buf + used, blen - used);
        blen -= used;
        consumed += used;
        if (!more) {
            if (blen != 0 || st.bit != 0)
                abort(); /* the last call consumes everything */
            break;
        }
    }

    if (wrc == GC_E_CORRUPT && strstr(werr.msg, "trailing garbage after stream")) {
        if (prc != GC_OK || !st.garbage || garbage_abs >= n)
            fail_with("garbage", wrc, werr.msg, prc, perr.msg);
        char msg[96];
        snprintf(msg, sizeof msg, "bzip2: trailing garbage after stream %u", st.stream_no);
        if (strcmp(msg, werr.msg) != 0)
            fail_with("garbage stream number", wrc, werr.msg, prc, msg);
        uint8_t *pre = NULL;
        size_t pl = 0;
        gc_error e;
        if (bz2_decompress(in, garbage_abs, MAX_OUT, 1, &pre, &pl, &e) != GC_OK || pl != got_len ||
            (pl && memcmp(pre, got, pl) != 0))
            fail_with("output before the garbage", wrc, werr.msg, prc, e.msg);
        free(pre);
    } else {
        if (prc != wrc || st.garbage)
            fail_with("status", wrc, wrc ? werr.msg : "", prc, prc ? perr.msg : "");
        if (wrc != GC_OK && strcmp(werr.msg, perr.msg) != 0)
            fail_with("message", wrc, werr.msg, prc, perr.msg);
        if (wrc == GC_OK && (got_len != want_len || (want_len && memcmp(got, want, want_len) != 0)))
            fail_with("output", wrc, "", prc, "");
    }
    free(buf);
    free(got);
    free(want);
    return 0;
}
