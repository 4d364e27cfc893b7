/* Fill a formatted cache's metadata for the start-up benchmark
 * (scripts/bench/scale startup, issue 33).
 *
 *   cache-fill CACHE USED
 *
 * CACHE must hold a cache the gateway formatted (its superblock gives
 * the geometry, the UUID and the volume size, whose block count must
 * be a power of two).  Slots 0 .. USED-1 become used: slot i holds
 * block (i * 0x9E3779B1) mod nblocks (distinct for distinct i: an odd
 * multiplier is a bijection modulo a power of two, and it scatters the
 * blocks over the volume and the hash table), clean for even i and
 * dirty for odd i.  Copy A of every page is written with commit
 * sequence 2 (format wrote 1), copy B is left as format left it, the
 * state page (closed) and the data slots are not touched: the data
 * slots of a fresh sparse file read as zeros, as the backend's sparse
 * blocks do, so the clean entries are honest.  The pages are built
 * with the core's own encoders (gateway/cache-format.c), so they are
 * what a commit of the gateway writes.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache-format.h"
#include "index.h"

#define CHUNK 256 /* pages written at a time */

static int
fill_chunk (const struct cache_super *sb, uint32_t p0, uint32_t n,
            uint64_t used, unsigned char *buf)
{
  uint64_t mask = sb->volume_size / sb->block_size - 1;

  for (uint32_t k = 0; k < n; k++)
    {
      unsigned char *pg = buf + (size_t)k * CACHE_PAGE;
      uint32_t p = p0 + k;
      cache_page_init (pg, p, 2, sb->uuid);
      for (uint32_t i = 0; i < CACHE_EPP; i++)
        {
          uint64_t slot = (uint64_t)p * CACHE_EPP + i;
          if (slot >= used || slot >= sb->nslots)
            break;
          cache_page_set (pg, i, (slot * UINT64_C (0x9E3779B1)) & mask,
                          slot % 2 ? SLOT_DIRTY : SLOT_CLEAN);
        }
      cache_page_seal (pg);
    }
  return 0;
}

int
main (int argc, char *argv[])
{
  static unsigned char sbuf[CACHE_PAGE];
  struct cache_super sb;
  unsigned char *buf;
  uint64_t used, nblocks;
  int fd;

  if (argc != 3)
    {
      fprintf (stderr, "usage: cache-fill CACHE USED\n");
      return 2;
    }
  used = strtoull (argv[2], NULL, 0);
  fd = open (argv[1], O_RDWR);
  if (fd == -1 || pread (fd, sbuf, CACHE_PAGE, 0) != CACHE_PAGE)
    {
      fprintf (stderr, "cache-fill: %s: %s\n", argv[1], strerror (errno));
      return 1;
    }
  cache_super_decode (sbuf, &sb);
  nblocks = sb.volume_size / sb.block_size;
  if (!sb.magic_ok || !sb.crc_ok || used > sb.nslots || nblocks == 0
      || (nblocks & (nblocks - 1)) || used > nblocks)
    {
      fprintf (stderr,
               "cache-fill: %s: no cache, or a volume whose block count "
               "is not a power of two, or USED above the slots\n",
               argv[1]);
      return 1;
    }
  buf = malloc ((size_t)CHUNK * CACHE_PAGE);
  if (buf == NULL)
    return 1;
  for (uint32_t p = 0; p < sb.npages; p += CHUNK)
    {
      uint32_t n = sb.npages - p < CHUNK ? sb.npages - p : CHUNK;
      fill_chunk (&sb, p, n, used, buf);
      size_t len = (size_t)n * CACHE_PAGE;
      if (pwrite (fd, buf, len,
                  cache_page_offset (sb.meta_off, sb.npages, p, 0))
          != (ssize_t)len)
        {
          fprintf (stderr, "cache-fill: %s: %s\n", argv[1], strerror (errno));
          return 1;
        }
    }
  if (fsync (fd) || close (fd))
    return 1;
  free (buf);
  printf ("slots=%" PRIu32 " used=%" PRIu64 " pages=%" PRIu32
          " meta_off=%" PRIu64 " data_off=%" PRIu64 "\n",
          sb.nslots, used, sb.npages, sb.meta_off, sb.data_off);
  return 0;
}
