/* Little-endian fields: load and store 16, 32 and 64-bit values at
 * any alignment (on-disk and on-the-wire formats).
 */
#ifndef HHC_COMMON_LE_H
#define HHC_COMMON_LE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* The 16-bit little-endian value at P. */
static inline uint16_t
le16_load (const void *p)
{
  uint16_t v;
  memcpy (&v, p, sizeof v);
  return le16toh (v);
}

/* The 32-bit little-endian value at P. */
static inline uint32_t
le32_load (const void *p)
{
  uint32_t v;
  memcpy (&v, p, sizeof v);
  return le32toh (v);
}

/* The 64-bit little-endian value at P. */
static inline uint64_t
le64_load (const void *p)
{
  uint64_t v;
  memcpy (&v, p, sizeof v);
  return le64toh (v);
}

/* Store V at P, little-endian. */
static inline void
le16_store (void *p, uint16_t v)
{
  v = htole16 (v);
  memcpy (p, &v, sizeof v);
}

/* Store V at P, little-endian. */
static inline void
le32_store (void *p, uint32_t v)
{
  v = htole32 (v);
  memcpy (p, &v, sizeof v);
}

/* Store V at P, little-endian. */
static inline void
le64_store (void *p, uint64_t v)
{
  v = htole64 (v);
  memcpy (p, &v, sizeof v);
}

#endif /* HHC_COMMON_LE_H */
