/* crc32.h - CRC-32 as used by the image format (docs/format.md section 6). */
#ifndef COLIBRI_CRC32_H
#define COLIBRI_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC over [data, data + size); start with crc = 0. */
uint32_t colibri_crc32_update(uint32_t crc, const uint8_t *data, size_t size);

#endif
