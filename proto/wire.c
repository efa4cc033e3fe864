/* wire.c - length-prefixed protobuf frames (see wire.h). */
#include "wire.h"

#include <stdlib.h>

uint32_t gc_wire_body_len(const uint8_t header[GC_WIRE_HEADER_SIZE])
{
    return (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 | (uint32_t)header[3] << 24;
}

size_t gc_wire_packed_size(const Gpucomp__Frame *f)
{
    return GC_WIRE_HEADER_SIZE + gpucomp__frame__get_packed_size(f);
}

size_t gc_wire_pack(const Gpucomp__Frame *f, uint8_t *out)
{
    size_t body = gpucomp__frame__pack(f, out + GC_WIRE_HEADER_SIZE);
    out[0] = (uint8_t)body;
    out[1] = (uint8_t)(body >> 8);
    out[2] = (uint8_t)(body >> 16);
    out[3] = (uint8_t)(body >> 24);
    return GC_WIRE_HEADER_SIZE + body;
}

Gpucomp__Frame *gc_wire_unpack(const uint8_t *body, size_t len, gc_error *err)
{
    Gpucomp__Frame *f = gpucomp__frame__unpack(NULL, len, body);
    if (!f) {
        gc_fail(err, GC_E_PROTOCOL, "malformed frame: %zu bytes that are not a gpucomp.Frame", len);
        return NULL;
    }
    if (f->body_case == GPUCOMP__FRAME__BODY__NOT_SET) {
        gpucomp__frame__free_unpacked(f, NULL);
        gc_fail(err, GC_E_PROTOCOL, "malformed frame: empty body");
        return NULL;
    }
    return f;
}

void gc_wire_free(Gpucomp__Frame *f)
{
    if (f)
        gpucomp__frame__free_unpacked(f, NULL);
}

size_t gc_wire_max_payload(uint32_t max_frame)
{
    return max_frame > GC_WIRE_PAYLOAD_SLACK + GC_WIRE_HEADER_SIZE
               ? max_frame - GC_WIRE_PAYLOAD_SLACK - GC_WIRE_HEADER_SIZE
               : 0;
}

const char *gc_wire_socket_path(const char *explicit_path)
{
    if (explicit_path && *explicit_path)
        return explicit_path;
    const char *env = getenv(GC_WIRE_SOCKET_ENV);
    return env && *env ? env : GC_WIRE_DEFAULT_SOCKET;
}
