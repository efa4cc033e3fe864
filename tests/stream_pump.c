/*
 * stream_pump.c - driving a stream the way a careless caller would (pieces
 * and output buffers of random sizes), shared by the stream suites
 * (check_stream.c against a daemon, check_local_stream.c in process).
 */
#include "stream_pump.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

uint64_t next_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* 1..max, skewed towards small values half the time (many tiny pieces, some big ones). */
size_t rand_size(uint64_t *state, size_t max)
{
    uint64_t r = next_rand(state);
    size_t limit = (r & 1) ? max : (max < 64 ? max : 64);
    return 1 + (size_t)((r >> 1) % limit);
}

void sink_add(sink *k, const void *p, size_t n)
{
    if (k->len + n > k->cap) {
        k->cap = (k->len + n) * 2;
        k->buf = realloc(k->buf, k->cap ? k->cap : 1);
        ck_assert_ptr_nonnull(k->buf);
    }
    if (n)
        memcpy(k->buf + k->len, p, n);
    k->len += n;
}

/*
 * Feed in[0..len) into s in random pieces of at most max_in bytes, reading
 * into random-sized buffers of at most max_out bytes, then GPUCOMP_END.
 * Returns the stream's status; what came out is in *k either way.
 */
int pump(gpucomp_stream *s, const uint8_t *in, size_t len, uint64_t seed, size_t max_in, size_t max_out, sink *k)
{
    uint64_t rng = seed | 1;
    uint8_t *obuf = malloc(max_out);
    ck_assert_ptr_nonnull(obuf);
    size_t off = 0;
    int rc = GPUCOMP_OK;
    for (;;) {
        size_t n = rand_size(&rng, max_in);
        n = n < len - off ? n : len - off;
        gpucomp_inbuf ib = { in + off, n, 0 };
        gpucomp_end_op op = off + n == len ? GPUCOMP_END : GPUCOMP_CONTINUE;
        size_t pending = 0;
        do {
            gpucomp_outbuf ob = { obuf, rand_size(&rng, max_out), 0 };
            rc = gpucomp_stream_run(s, &ib, &ob, op, &pending);
            ck_assert_uint_le(ob.pos, ob.size);
            sink_add(k, obuf, ob.pos);
        } while (rc == GPUCOMP_OK && (ib.pos < ib.size || (op == GPUCOMP_END && pending)));
        off += n;
        if (rc != GPUCOMP_OK || op == GPUCOMP_END)
            break;
    }
    free(obuf);
    return rc;
}

/* A whole stream: open, pump, check the counters, free. Returns its status. */
int stream_all(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, const uint8_t *in, size_t len,
               uint64_t seed, size_t max_in, size_t max_out, sink *k)
{
    gpucomp_stream *s = NULL;
    int rc = gpucomp_stream_open(c, dir, o, &s);
    ck_assert_msg(rc == GPUCOMP_OK, "stream open: %s", gpucomp_last_error(c));
    rc = pump(s, in, len, seed, max_in, max_out, k);
    ck_assert_uint_eq(gpucomp_stream_bytes_out(s), k->len);
    if (rc == GPUCOMP_OK && !gpucomp_stream_trailing_garbage(s, NULL)) {
        ck_assert_uint_eq(gpucomp_stream_bytes_in(s), len);
        ck_assert_int_ne(gpucomp_stream_backend(s), GPUCOMP_BACKEND_UNKNOWN);
    }
    gpucomp_stream_free(s);
    return rc;
}
