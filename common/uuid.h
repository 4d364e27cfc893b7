/* Random (version 4) UUIDs and their text form. */
#ifndef HHC_COMMON_UUID_H
#define HHC_COMMON_UUID_H

#include <stdint.h>

/* A random (version 4) UUID. */
extern void hhc_uuid_generate (uint8_t uuid[16]);

/* UUID as "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (36 characters and
 * the NUL) into OUT.
 */
extern void hhc_uuid_format (const uint8_t uuid[16], char out[37]);

#endif /* HHC_COMMON_UUID_H */
