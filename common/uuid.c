/* Random (version 4) UUIDs (uuid.h): the volume UUID of a new cos
 * volume, and the core's cache and log UUIDs (gateway/common.h calls
 * these hhc_make_uuid and hhc_uuid_str).
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "uuid.h"

void
hhc_uuid_generate (uint8_t uuid[16])
{
  if (getrandom (uuid, 16, 0) != 16)
    {
      /* No entropy to be had: time and address are unique enough. */
      struct timespec ts;
      uint64_t t, a = (uintptr_t)uuid;

      clock_gettime (CLOCK_MONOTONIC, &ts);
      t = (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
      memcpy (uuid, &t, 8);
      memcpy (uuid + 8, &a, 8);
    }
  uuid[6] = (uuid[6] & 0x0f) | 0x40; /* version 4 */
  uuid[8] = (uuid[8] & 0x3f) | 0x80; /* variant 1 */
}

void
hhc_uuid_format (const uint8_t u[16], char out[37])
{
  char *p = out;

  for (int i = 0; i < 16; i++)
    {
      if (i == 4 || i == 6 || i == 8 || i == 10)
        *p++ = '-';
      p += sprintf (p, "%02x", u[i]);
    }
}
