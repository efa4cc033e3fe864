/* gc_status.c - status strings and the error-recording helper. */
#include "gc_status.h"

#include <stdarg.h>
#include <stdio.h>

const char *gc_status_str(int code)
{
    switch (code) {
    case GC_OK: return "success";
    case GC_E_INVALID: return "invalid argument";
    case GC_E_CORRUPT: return "corrupt data";
    case GC_E_TRUNCATED: return "truncated data";
    case GC_E_CRC: return "checksum mismatch";
    case GC_E_LIMIT: return "size limit exceeded";
    case GC_E_NOMEM: return "out of memory";
    case GC_E_UNSUPPORTED: return "unsupported";
    case GC_E_PROTOCOL: return "protocol error";
    case GC_E_IO: return "I/O error";
    case GC_E_CONNECT: return "cannot connect to gpucompd";
    case GC_E_BUSY: return "daemon busy or shutting down";
    case GC_E_INTERNAL: return "internal error";
    case GC_E_DEVICE: return "GPU device error";
    case GC_E_PERMISSION: return "permission denied";
    case GC_E_CANCELLED: return "cancelled";
    case GC_E_IN_USE: return "connection in use by its own stream or asynchronous requests";
    case GC_E_TOO_SMALL: return "output buffer too small";
    default: return "unknown error";
    }
}

int gc_fail(gc_error *err, gc_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void gc_error_clear(gc_error *err)
{
    if (err) {
        err->code = GC_OK;
        err->msg[0] = '\0';
    }
}
