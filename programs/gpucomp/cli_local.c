/*
 * cli_local.c - gpucomp without gpucompd: the CPU codecs of
 * codecs/libgccodecs.la run in this process (--local, or the announced
 * fallback when no daemon answers), through the library's own in-process
 * engine (libclient/client_local.c, built into this program too: the
 * library exports only gpucomp_*), so the output bytes are the daemon's.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "gc_clock.h"
#include "gc_status.h"

int cli_local_request(cli_session *s, bool decompress, const gpucomp_options *o, const uint8_t *in, size_t in_len,
                      cli_result *r)
{
    gc_error err;
    gc_error_clear(&err);
    uint8_t *out = NULL;
    size_t out_len = 0;
    uint64_t t0 = gc_now_ns();
    int rc = client_local_run(decompress, o, in, in_len, &out, &out_len, &err);
    r->seconds = (double)(gc_now_ns() - t0) / 1e9;
    /* gc_status and the library's codes are the same numbers (gpucomp.h, gc_status.h). */
    snprintf(s->local_error, sizeof s->local_error, "%s", rc == GC_OK ? "" : err.msg);
    if (rc != GC_OK) {
        free(out);
        return rc;
    }
    r->data = out; /* gpucomp_free() is free() */
    r->len = out_len;
    r->backend = GPUCOMP_BACKEND_CPU;
    return GPUCOMP_OK;
}
