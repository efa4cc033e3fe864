/*
 * dispatch.h - routing: which engine runs a request.
 *
 * Small requests and codecs without a GPU kernel go to the CPU worker pool
 * (latency); large rle requests go to the least-loaded device scheduler
 * (throughput). Retired devices receive no new work. Loop thread only.
 */
#ifndef GCD_DISPATCH_H
#define GCD_DISPATCH_H

#include <stdbool.h>

#include "request.h"
#include "server.h"

/* Open the devices the settings ask for; false only on a fatal error (logged). */
bool gcd_dispatch_init(gcd_server *s);

/* Hand a complete request to an engine. */
void gcd_dispatch_submit(gcd_server *s, gcd_request *r);

/* Finish device work and close the devices. */
void gcd_dispatch_stop(gcd_server *s);

/* "gpu" if any device serves, else "cpu". */
const char *gcd_dispatch_backend(const gcd_server *s);

#endif
