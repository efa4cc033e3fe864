/* crc32c.h - CRC32C (Castagnoli), as used by the rle frame (docs/FORMAT.md). */
#ifndef GC_CRC32C_H
#define GC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Continue a CRC: crc32c_update(0, p, n) is the CRC32C of p[0..n). */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

/* The portable (table-driven) implementation, whatever the CPU supports:
 * exposed so tests can check it against the accelerated one. */
uint32_t crc32c_update_portable(uint32_t crc, const void *data, size_t len);

static inline uint32_t crc32c(const void *data, size_t len)
{
    return crc32c_update(0, data, len);
}

#ifdef __cplusplus
}
#endif

#endif
