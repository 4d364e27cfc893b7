/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it, otherwise a
 * byte-wise table.  crc32c (0, "123456789", 9) == 0xE3069283.
 */
#include <config.h>

#include <pthread.h>
#include <string.h>

#include "crc32c.h"

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void
make_table (void)
{
  for (uint32_t i = 0; i < 256; i++)
    {
      uint32_t c = i;
      for (int k = 0; k < 8; k++)
        c = (c & 1) ? (c >> 1) ^ 0x82F63B78 : c >> 1;
      table[i] = c;
    }
}

static uint32_t
crc32c_sw (uint32_t crc, const unsigned char *p, size_t len)
{
  pthread_once (&table_once, make_table);
  while (len--)
    crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__ ((target ("sse4.2"))) static uint32_t
crc32c_hw (uint32_t crc, const unsigned char *p, size_t len)
{
  uint64_t c = crc;

  while (len >= 8)
    {
      uint64_t v;
      memcpy (&v, p, 8);
      c = __builtin_ia32_crc32di (c, v);
      p += 8;
      len -= 8;
    }
  crc = (uint32_t)c;
  while (len--)
    crc = __builtin_ia32_crc32qi (crc, *p++);
  return crc;
}
#endif

uint32_t
crc32c (uint32_t crc, const void *buf, size_t len)
{
  crc = ~crc;
#if defined(__x86_64__)
  if (__builtin_cpu_supports ("sse4.2"))
    crc = crc32c_hw (crc, buf, len);
  else
#endif
    crc = crc32c_sw (crc, buf, len);
  return ~crc;
}
