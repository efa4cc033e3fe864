/*
 * wire.h - gpucompd framing, shared by the daemon and the client library.
 *
 * A frame is a 4-byte little-endian body length followed by one serialized
 * gpucomp.Frame protobuf (proto/gpucomp.proto). docs/PROTOCOL.md describes
 * the message sequence.
 */
#ifndef GC_WIRE_H
#define GC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gc_status.h"
#include "proto/gpucomp.pb-c.h"

#define GC_WIRE_HEADER_SIZE 4u
#define GC_WIRE_DEFAULT_MAX_FRAME (16u << 20) /* 16 MiB */
#define GC_WIRE_MIN_MAX_FRAME (64u << 10)     /* smallest limit a daemon may set */
/* Payload bytes a sender puts in one frame: leaves room for the envelope. */
#define GC_WIRE_PAYLOAD_SLACK 256u
#define GC_WIRE_DEFAULT_SOCKET "/run/gpucompd/gpucompd.sock"
#define GC_WIRE_SOCKET_ENV "GPUCOMP_SOCKET"

/* Read the body length from a frame header. */
uint32_t gc_wire_body_len(const uint8_t header[GC_WIRE_HEADER_SIZE]);

/* Bytes gc_wire_pack writes for f (header included). */
size_t gc_wire_packed_size(const Gpucomp__Frame *f);

/* Serialize f with its header into out (capacity >= gc_wire_packed_size). */
size_t gc_wire_pack(const Gpucomp__Frame *f, uint8_t *out);

/*
 * Parse a frame body. Returns NULL if the bytes are not a valid Frame or the
 * frame has no body (message in err). Free with gc_wire_free.
 */
Gpucomp__Frame *gc_wire_unpack(const uint8_t *body, size_t len, gc_error *err);
void gc_wire_free(Gpucomp__Frame *f);

/* Largest payload that fits a frame of max_frame bytes. */
size_t gc_wire_max_payload(uint32_t max_frame);

/* Socket path to use: explicit if non-NULL and non-empty, else $GPUCOMP_SOCKET, else the default. */
const char *gc_wire_socket_path(const char *explicit_path);

#endif
