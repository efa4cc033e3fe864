/*
 * dispatch.h - routing: which engine runs a request.
 *
 * Requests a codec's GPU backend does not take (codec.h gpu_takes) go to
 * the CPU worker pool; the rest, compress and decompress alike, go to the
 * lane with the fewest bytes in flight (throughput) from the codec's own
 * break-even per operation (codec.h gpu_min_bytes, else --gpu-min-bytes).
 * Below it they go to the pool (latency) unless the pool has no free worker
 * and that lane holds less than a batch: then to the lane (routing by load). Retired lanes receive no new work:
 * what a retired lane had not run comes back through reroute, on that
 * lane's thread, to the least-loaded lane in service, else the CPU pool.
 * Everything else runs on the loop thread.
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

/* GPUs with an opened lane (in service or retired). */
unsigned gcd_dispatch_gpus(const gcd_server *s);

/* "gpu" if any lane serves, else "cpu". */
const char *gcd_dispatch_backend(const gcd_server *s);

#endif
