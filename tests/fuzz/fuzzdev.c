/* Helpers of the fuzz targets (see fuzz.h): a memory device, a quiet
 * log callback, and the checksum fix-ups that let mutated images get
 * past the checksums to the code behind them.
 *
 * The fix-ups only write inside the image they are given and read
 * every field with bounds checks: whatever the bytes, they must not
 * be the ones that crash.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "common.h"
#include "crc32c.h"
#include "fuzz.h"
#include "log.h"

struct fuzzdev {
  struct hhc_dev dev;
  unsigned char *mem;
};

static int
fd_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct fuzzdev *f = (struct fuzzdev *)d;

  if (off > d->size || len > d->size - off)
    return EIO;
  memcpy (buf, f->mem + off, len);
  return 0;
}

static int
fd_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  struct fuzzdev *f = (struct fuzzdev *)d;

  if (off > d->size || len > d->size - off)
    return EIO;
  memcpy (f->mem + off, buf, len);
  return 0;
}

static int
fd_sync (struct hhc_dev *d)
{
  return 0;
}

/* The owner frees it (fuzzdev_free): a volume or log that "closes" it
 * does nothing.
 */
static void
fd_close (struct hhc_dev *d)
{
}

static const struct hhc_dev_ops fuzzdev_ops = {
  .pread = fd_pread,
  .pwrite = fd_pwrite,
  .sync = fd_sync,
  .close = fd_close,
};

/* Freed device memory, kept for the next input: a fresh megabyte
 * each time costs more page faults than the rest of a run.
 */
static struct {
  unsigned char *mem;
  uint64_t size;
} spare[4];

struct hhc_dev *
fuzzdev_new (uint64_t size, const char *name)
{
  struct fuzzdev *f = calloc (1, sizeof *f);

  if (f == NULL)
    abort ();
  for (size_t i = 0; i < sizeof spare / sizeof spare[0]; i++)
    if (spare[i].mem && spare[i].size == size)
      {
        f->mem = spare[i].mem;
        spare[i].mem = NULL;
        memset (f->mem, 0, size);
        break;
      }
  if (f->mem == NULL)
    f->mem = calloc (1, size);
  f->dev.name = strdup (name);
  if (f->mem == NULL || f->dev.name == NULL)
    abort ();
  f->dev.ops = &fuzzdev_ops;
  f->dev.size = size;
  return &f->dev;
}

void
fuzzdev_load (struct hhc_dev *d, uint64_t off, const void *buf, size_t len)
{
  struct fuzzdev *f = (struct fuzzdev *)d;

  if (off >= d->size)
    return;
  memcpy (f->mem + off, buf, HHC_MIN ((uint64_t)len, d->size - off));
}

unsigned char *
fuzzdev_mem (struct hhc_dev *d)
{
  return ((struct fuzzdev *)d)->mem;
}

void
fuzzdev_free (struct hhc_dev *d)
{
  struct fuzzdev *f = (struct fuzzdev *)d;

  if (f == NULL)
    return;
  for (size_t i = 0; f->mem && i < sizeof spare / sizeof spare[0]; i++)
    if (spare[i].mem == NULL)
      {
        spare[i].mem = f->mem;
        spare[i].size = f->dev.size;
        f->mem = NULL;
      }
  free (f->mem);
  free (f->dev.name);
  free (f);
}

void
fuzz_log (enum hhc_log_level level, const char *msg)
{
  static int verbose = -1;

  if (verbose < 0)
    verbose = getenv ("FUZZ_VERBOSE") != NULL;
  if (verbose)
    fprintf (stderr, "hhc[%d]: %s\n", (int)level, msg);
}

/* ---- cache ---- */

#define PAGE_MAGIC 0x504d4848u  /* "HHMP", as in cache.c */
#define STATE_MAGIC 0x54534848u /* "HHST" */

/* A page whose crc32c is at crc_at, computed with that field zero. */
static void
fix_page (unsigned char *pg, size_t crc_at)
{
  put32 (pg + crc_at, 0);
  put32 (pg + crc_at, crc32c (0, pg, CACHE_PAGE));
}

void
fuzz_fix_cache (unsigned char *img, size_t len, unsigned flags)
{
  if ((flags & FUZZ_CACHE_FIX_SUPER) && len >= CACHE_PAGE
      && memcmp (img, CACHE_MAGIC, 8) == 0)
    put32 (img + 4092, crc32c (0, img, 4092));
  for (size_t off = CACHE_PAGE; off + CACHE_PAGE <= len; off += CACHE_PAGE)
    {
      uint32_t magic = get32 (img + off);
      bool state = off <= 2 * CACHE_PAGE;
      if (state && magic == STATE_MAGIC && (flags & FUZZ_CACHE_FIX_STATE))
        fix_page (img + off, 24);
      else if (!state && magic == PAGE_MAGIC && (flags & FUZZ_CACHE_FIX_PAGES))
        fix_page (img + off, 24);
    }
}

/* ---- log ---- */

#define LOG_ALIGN 4096

const unsigned char *
fuzz_log_sb (const unsigned char *img, size_t len)
{
  const unsigned char *best = NULL;

  for (int c = 0; c < 2; c++)
    {
      const unsigned char *sb = img + (size_t)c * 4096;
      if ((size_t)(c + 1) * 4096 > len || memcmp (sb, LOG_MAGIC, 8) != 0
          || crc32c (0, sb, 4092) != get32 (sb + 4092)
          || get32 (sb + 8) != LOG_VERSION)
        continue;
      if (best == NULL || get64 (sb + 88) > get64 (best + 88))
        best = sb;
    }
  return best;
}

void
fuzz_fix_log (unsigned char *img, size_t len, unsigned flags)
{
  const unsigned char *sb;
  uint64_t bs, region, lpos, start;
  uint32_t prev_crc = 0;
  bool have_prev = false;

  if (flags & FUZZ_LOG_FIX_SUPER)
    for (int c = 0; c < 2; c++)
      {
        unsigned char *p = img + (size_t)c * 4096;
        if ((size_t)(c + 1) * 4096 <= len && memcmp (p, LOG_MAGIC, 8) == 0)
          put32 (p + 4092, crc32c (0, p, 4092));
      }
  if (!(flags & FUZZ_LOG_FIX_SEGS) || (sb = fuzz_log_sb (img, len)) == NULL)
    return;
  bs = get32 (sb + 12);
  region = get64 (sb + 56);
  if (bs == 0 || len <= LOG_REGION_OFF || region > len - LOG_REGION_OFF
      || region < LOG_ALIGN)
    return;
  lpos = start = get64 (sb + 72);
  /* At most one pass over the region, as the scan. */
  for (unsigned n = 0; n < 4096 && lpos - start < region; n++)
    {
      uint64_t phys = lpos % region;
      if (phys + LOG_ALIGN > region)
        {
          lpos += region - phys;
          continue;
        }
      unsigned char *h = img + LOG_REGION_OFF + phys;
      uint64_t hl = get32 (h + 36), nb = get32 (h + 28);
      uint64_t dl = nb * bs;
      if (memcmp (h, LOG_SEG_MAGIC, 8) != 0 || hl < LOG_ALIGN || hl % LOG_ALIGN
          || nb > region / bs || phys + hl + dl > region)
        return;
      if (have_prev)
        put32 (h + 84, prev_crc);
      put32 (h + 80, 0);
      /* As the scan: the first 4 KiB, then the rest of the header and
       * the data.
       */
      uint32_t crc = log_segment_checksum (get32 (h + 24), h, hl + dl);
      put32 (h + 80, crc);
      if (get32 (h + 24) & LOG_F_WRAP)
        {
          lpos += region - phys;
          continue;
        }
      prev_crc = crc;
      have_prev = true;
      lpos += hl + HHC_ROUND_UP (dl, LOG_ALIGN);
    }
}
