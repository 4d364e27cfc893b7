/* CRC-32C (Castagnoli), used by every on-disk structure. */
#ifndef HHC_CRC32C_H
#define HHC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC-32C over buf; start with crc = 0. */
uint32_t crc32c (uint32_t crc, const void *buf, size_t len);

#endif /* HHC_CRC32C_H */
