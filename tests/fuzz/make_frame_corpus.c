/*
 * make_frame_corpus.c - write the seed corpus for fuzz_frame: byte streams
 * as a client sends them (every frame packed by gc_wire_pack), one file per
 * stream. The files in tests/fuzz/corpus/frame were made by this program;
 * run it again after a change to proto/gpucomp.proto.
 *
 * Build and run from the repository root (the generated protobuf sources
 * come from scripts/fuzz.sh, or: protoc-c -I. --c_out=build-fuzz proto/gpucomp.proto):
 *   cc -std=c11 -O2 -D_GNU_SOURCE -pthread -I. -Ibuild-fuzz -Icommon -Icodecs/rle -Icodecs/bzip2 -Icodecs/bzip2/cpu \
 *     tests/fuzz/make_frame_corpus.c proto/wire.c build-fuzz/proto/gpucomp.pb-c.c \
 *     codecs/rle/cpu/rle*.c common/crc32c.c codecs/bzip2/cpu/bz2_*.c common/gc_status.c \
 *     common/parallel.c $(pkg-config --cflags --libs libprotobuf-c) \
 *     -o /tmp/make_frame_corpus && /tmp/make_frame_corpus tests/fuzz/corpus/frame
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bzip2.h"
#include "proto/wire.h"
#include "rle.h"

typedef struct stream {
    uint8_t *buf;
    size_t len, cap;
} stream;

static void put_frame(stream *s, const Gpucomp__Frame *f)
{
    size_t n = gc_wire_packed_size(f);
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2;
        if (!(s->buf = realloc(s->buf, s->cap)))
            abort();
    }
    s->len += gc_wire_pack(f, s->buf + s->len);
}

static void put_hello(stream *s, uint32_t version)
{
    Gpucomp__Hello h = GPUCOMP__HELLO__INIT;
    h.protocol_version = version;
    h.client_name = "libgpucomp-client/0.1.0";
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_HELLO;
    f.hello = &h;
    put_frame(s, &f);
}

static void put_request(stream *s, const Gpucomp__Request *m)
{
    Gpucomp__Frame f = GPUCOMP__FRAME__INIT;
    f.body_case = GPUCOMP__FRAME__BODY_REQUEST;
    f.request = (Gpucomp__Request *)m;
    put_frame(s, &f);
}

/* One-frame request of op with no payload. */
static void put_simple(stream *s, uint64_t id, Gpucomp__Op op)
{
    Gpucomp__Request m = GPUCOMP__REQUEST__INIT;
    m.id = id;
    m.op = op;
    m.last = 1;
    put_request(s, &m);
}

/* A request of op/codec whose input is data, in frames of at most piece bytes. */
static void put_data(stream *s, uint64_t id, Gpucomp__Op op, Gpucomp__Codec codec, Gpucomp__CodecOptions *opt,
                     const uint8_t *data, size_t len, size_t piece)
{
    size_t at = 0;
    do {
        Gpucomp__Request m = GPUCOMP__REQUEST__INIT;
        m.id = id;
        if (at == 0) {
            m.op = op;
            m.codec = codec;
            m.options = opt;
            m.total_size = len;
        }
        size_t n = len - at < piece ? len - at : piece;
        m.payload.data = (uint8_t *)data + at;
        m.payload.len = n;
        at += n;
        m.last = at == len;
        put_request(s, &m);
    } while (at < len);
}

static void write_stream(const char *dir, const char *name, stream *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(s->buf, 1, s->len, fp) != s->len || fclose(fp) != 0) {
        perror(path);
        exit(1);
    }
    free(s->buf);
    *s = (stream){ 0 };
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    /* 200 bytes of runs and literals: several 64-byte rle chunks and a tail */
    uint8_t text[200];
    size_t text_len = sizeof text;
    for (size_t i = 0; i < text_len; i++)
        text[i] = (i / 40) % 2 ? (uint8_t)('a' + i % 26) : (uint8_t)('A' + i / 8 % 4);
    stream s = { 0 };
    gc_error err;

    put_hello(&s, 1);
    write_stream(dir, "hello", &s);

    put_hello(&s, 2);
    put_simple(&s, 1, GPUCOMP__OP__OP_PING);
    write_stream(dir, "hello_v2", &s);

    put_hello(&s, 1);
    put_simple(&s, 1, GPUCOMP__OP__OP_PING);
    write_stream(dir, "hello_ping", &s);

    put_hello(&s, 1);
    put_simple(&s, 1, GPUCOMP__OP__OP_STATS);
    write_stream(dir, "hello_stats", &s);

    /* rle COMPRESS of 200 bytes in 2 frames, width 2, 64-byte chunks */
    Gpucomp__CodecOptions rle_opt = GPUCOMP__CODEC_OPTIONS__INIT;
    rle_opt.element_width = 2;
    rle_opt.chunk_size = 64;
    put_hello(&s, 1);
    put_data(&s, 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_RLE, &rle_opt, text, text_len, 128);
    write_stream(dir, "hello_rle_compress_2frames", &s);

    /* memfd transport: one frame, no payload (the fuzzer has no descriptors to go with it) */
    Gpucomp__Request fd = GPUCOMP__REQUEST__INIT;
    fd.id = 1;
    fd.op = GPUCOMP__OP__OP_COMPRESS;
    fd.codec = GPUCOMP__CODEC__CODEC_RLE;
    fd.total_size = 1u << 20;
    fd.payload_in_fd = 1;
    fd.last = 1;
    put_hello(&s, 1);
    put_request(&s, &fd);
    write_stream(dir, "hello_payload_in_fd", &s);

    /* rle DECOMPRESS of a valid frame, with a max_output */
    rle_options ro = { .width = 1, .chunk_size = 64, .threads = 1 };
    size_t bound = rle_compress_bound(text_len, &ro), rle_len;
    uint8_t *rle = malloc(bound);
    if (!rle || rle_compress(text, text_len, &ro, rle, bound, &rle_len, &err) != GC_OK)
        abort();
    Gpucomp__Request dm = GPUCOMP__REQUEST__INIT;
    dm.id = 7;
    dm.op = GPUCOMP__OP__OP_DECOMPRESS;
    dm.codec = GPUCOMP__CODEC__CODEC_RLE;
    dm.total_size = rle_len;
    dm.max_output = 1024;
    dm.payload.data = rle;
    dm.payload.len = rle_len;
    dm.last = 1;
    put_hello(&s, 1);
    put_request(&s, &dm);
    write_stream(dir, "hello_rle_decompress", &s);
    free(rle);

    /* bzip2 COMPRESS level 1, and DECOMPRESS of a valid stream in 3 frames */
    Gpucomp__CodecOptions bz_opt = GPUCOMP__CODEC_OPTIONS__INIT;
    bz_opt.level = 1;
    put_hello(&s, 1);
    put_data(&s, 1, GPUCOMP__OP__OP_COMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, &bz_opt, text, text_len, 128);
    write_stream(dir, "hello_bzip2_compress", &s);

    bz2_options bo = { .level = 1, .threads = 1 };
    uint8_t *bz = NULL;
    size_t bz_len = 0;
    if (bz2_compress(text, text_len, &bo, &bz, &bz_len, &err) != GC_OK)
        abort();
    put_hello(&s, 1);
    put_data(&s, 2, GPUCOMP__OP__OP_DECOMPRESS, GPUCOMP__CODEC__CODEC_BZIP2, NULL, bz, bz_len, bz_len / 3 + 1);
    write_stream(dir, "hello_bzip2_decompress_3frames", &s);
    free(bz);

    /* Interleaved: two rle requests, a refused one (width 3) that keeps sending,
     * id 0, and a REGISTER without its descriptor. */
    Gpucomp__CodecOptions bad = GPUCOMP__CODEC_OPTIONS__INIT;
    bad.element_width = 3;
    put_hello(&s, 1);
    Gpucomp__Request a = GPUCOMP__REQUEST__INIT, b = GPUCOMP__REQUEST__INIT, x = GPUCOMP__REQUEST__INIT;
    a.id = 1;
    a.op = GPUCOMP__OP__OP_COMPRESS;
    a.codec = GPUCOMP__CODEC__CODEC_RLE;
    a.total_size = 20;
    a.payload.data = (uint8_t *)text;
    a.payload.len = 10;
    put_request(&s, &a);
    x.id = 3;
    x.op = GPUCOMP__OP__OP_COMPRESS;
    x.codec = GPUCOMP__CODEC__CODEC_RLE;
    x.options = &bad;
    x.total_size = 12;
    x.payload.data = (uint8_t *)text;
    x.payload.len = 6;
    put_request(&s, &x);
    b.id = 2;
    b.op = GPUCOMP__OP__OP_COMPRESS;
    b.codec = GPUCOMP__CODEC__CODEC_RLE;
    b.total_size = 8;
    b.payload.data = (uint8_t *)text + 30;
    b.payload.len = 8;
    b.last = 1;
    put_request(&s, &b);
    put_simple(&s, 0, GPUCOMP__OP__OP_PING);
    Gpucomp__Request a2 = GPUCOMP__REQUEST__INIT;
    a2.id = 1;
    a2.payload.data = (uint8_t *)text + 10;
    a2.payload.len = 10;
    a2.last = 1;
    put_request(&s, &a2);
    Gpucomp__Request x2 = GPUCOMP__REQUEST__INIT;
    x2.id = 3;
    x2.payload.data = (uint8_t *)text + 6;
    x2.payload.len = 6;
    x2.last = 1;
    put_request(&s, &x2);
    Gpucomp__Request reg = GPUCOMP__REQUEST__INIT;
    reg.id = 4;
    reg.op = GPUCOMP__OP__OP_REGISTER;
    reg.total_size = 4096;
    reg.payload_in_fd = 1;
    reg.last = 1;
    put_request(&s, &reg);
    write_stream(dir, "hello_interleaved", &s);

    /* Limits: 1 MiB requests started and never finished until the memory
     * budget makes the daemon wait; 65 requests in assembly at once. */
    put_hello(&s, 1);
    for (uint64_t id = 1; id <= 12; id++) {
        Gpucomp__Request big = GPUCOMP__REQUEST__INIT;
        big.id = id;
        big.op = GPUCOMP__OP__OP_DECOMPRESS;
        big.codec = GPUCOMP__CODEC__CODEC_BZIP2;
        big.total_size = 1u << 20;
        put_request(&s, &big);
    }
    write_stream(dir, "hello_budget_wait", &s);

    put_hello(&s, 1);
    for (uint64_t id = 1; id <= 65; id++) {
        Gpucomp__Request open = GPUCOMP__REQUEST__INIT;
        open.id = id;
        open.op = GPUCOMP__OP__OP_COMPRESS;
        open.codec = GPUCOMP__CODEC__CODEC_RLE;
        open.total_size = 1;
        put_request(&s, &open);
    }
    write_stream(dir, "hello_65_requests", &s);
    return 0;
}
