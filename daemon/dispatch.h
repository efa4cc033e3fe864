/*
 * dispatch.h - routing: which engine runs a request.
 *
 * Small requests and operations without a GPU kernel go to the CPU worker
 * pool (latency); large rle requests and large bzip2 compresses go to the
 * least-loaded device scheduler (throughput), each codec from its own
 * break-even (codec.h, gpu_min_bytes). Retired devices receive no new work.
 * Loop thread only.
 */
#ifndef GCD_DISPATCH_H
#define GCD_DISPATCH_H

#include <stdbool.h>

#include "request.h"
#include "server_state.h"

/* Open the devices the settings ask for; false only on a fatal error (logged). */
bool gcd_dispatch_init(gcd_server *s);

/* Hand a complete request to an engine. */
void gcd_dispatch_submit(gcd_server *s, gcd_request *r);

/* Finish device work and close the devices. */
void gcd_dispatch_stop(gcd_server *s);

struct gcd_codec;

/* Where codec's requests run now, as one line for STATS ("rle: gpu from N bytes, else cpu";
 * a codec whose gpu_scope names what the GPU takes: "x: gpu for compress from N bytes, else cpu"). */
void gcd_dispatch_describe(const gcd_server *s, const struct gcd_codec *codec, char *buf, size_t size);

/* "gpu" if any device serves, else "cpu". */
const char *gcd_dispatch_backend(const gcd_server *s);

#endif
