/*
 * stream_pipe.c - stdin to stdout through a gpucompd stream: inputs of any
 * length, in bounded memory, output as the daemon produces it.
 *
 *     cc stream_pipe.c -o stream_pipe $(pkg-config --cflags --libs gpucomp-client)
 *     ./stream_pipe < big > big.bz2
 *     ./stream_pipe -d < big.bz2 > big
 *
 * bzip2 (level 9) unless -r (rle). Exits 1 with a message on any failure
 * (what was written before a decompression failure is a correct prefix).
 */
#include <stdio.h>
#include <string.h>

#include <gpucomp.h>

static unsigned char ibuf[1 << 20], obuf[1 << 20];

int main(int argc, char **argv)
{
    gpucomp_direction dir = GPUCOMP_COMPRESS;
    gpucomp_codec codec = GPUCOMP_CODEC_BZIP2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-d") == 0) {
            dir = GPUCOMP_DECOMPRESS;
        } else if (strcmp(argv[i], "-r") == 0) {
            codec = GPUCOMP_CODEC_RLE;
        } else {
            fprintf(stderr, "usage: stream_pipe [-d] [-r] < INPUT > OUTPUT\n");
            return 2;
        }
    }
    gpucomp_client *c = NULL;
    if (gpucomp_connect(NULL, &c) != GPUCOMP_OK) {
        fprintf(stderr, "stream_pipe: connect: %s\n", gpucomp_connect_error());
        return 1;
    }
    gpucomp_options o;
    gpucomp_options_init(&o, codec);
    gpucomp_stream *s = NULL;
    if (gpucomp_stream_open(c, dir, &o, &s) != GPUCOMP_OK) {
        fprintf(stderr, "stream_pipe: %s\n", gpucomp_last_error(c));
        gpucomp_close(c);
        return 1;
    }
    int status = 0;
    for (;;) {
        gpucomp_inbuf in = { ibuf, fread(ibuf, 1, sizeof ibuf, stdin), 0 };
        if (ferror(stdin)) {
            fprintf(stderr, "stream_pipe: read error on stdin\n");
            status = 1;
            break;
        }
        gpucomp_end_op op = in.size ? GPUCOMP_CONTINUE : GPUCOMP_END;
        size_t pending = 0;
        do {
            gpucomp_outbuf out = { obuf, sizeof obuf, 0 };
            if (gpucomp_stream_run(s, &in, &out, op, &pending) != GPUCOMP_OK) {
                fprintf(stderr, "stream_pipe: %s\n", gpucomp_last_error(c));
                status = 1;
                break;
            }
            if (fwrite(obuf, 1, out.pos, stdout) != out.pos) {
                fprintf(stderr, "stream_pipe: write error on stdout\n");
                status = 1;
                break;
            }
        } while (in.pos < in.size || (op != GPUCOMP_CONTINUE && pending));
        if (status || op == GPUCOMP_END)
            break;
    }
    if (status == 0 && fflush(stdout) != 0) {
        fprintf(stderr, "stream_pipe: write error on stdout\n");
        status = 1;
    }
    gpucomp_stream_free(s); /* cancels the stream on the daemon if it did not finish */
    gpucomp_close(c);
    return status;
}
