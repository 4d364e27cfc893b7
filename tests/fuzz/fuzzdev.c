/* Helpers of the fuzz targets (see fuzz.h): a memory device, a quiet
 * log callback, and the checksum fix-ups that let mutated images get
 * past the checksums to the code behind them.
 *
 * The fix-ups only write inside the image they are given and read
 * every field with bounds checks: whatever the bytes, they must not
 * be the ones that crash.
 *
 * The device's memory is kept for the next input (fresh memory costs
 * a page fault per 4 KiB, and zeroing a whole megabyte more than the
 * rest of a small input's run), and only what an input may have made
 * non-zero is zeroed again:
 *
 *   [0, used)      loaded, written or fixed up: zeroed by fuzzdev_free
 *   [used, size)   zero (nothing wrote there)
 *   [size, cap)    zero, and poisoned under ASan while in use (not
 *                  the device's)
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#include "cache-format.h"
#include "common.h"
#include "fuzz.h"

struct fuzzdev {
  struct hhc_dev dev;
  unsigned char *mem;
  uint64_t cap;              /* bytes of mem */
  uint64_t used;             /* bytes from 0 that may be non-zero (atomic) */
  uint64_t bad_off, bad_len; /* unreadable (atomic: 0 length, none) */
};

static bool
touches_bad (struct fuzzdev *f, uint64_t off, uint64_t len)
{
  uint64_t bl = __atomic_load_n (&f->bad_len, __ATOMIC_ACQUIRE);

  return bl && off < f->bad_off + bl && f->bad_off < off + len;
}

void
fuzzdev_set_bad (struct hhc_dev *d, uint64_t off, uint64_t len)
{
  struct fuzzdev *f = (struct fuzzdev *)d;

  f->bad_off = off;
  __atomic_store_n (&f->bad_len, len, __ATOMIC_RELEASE);
}

/* Bytes up to end may be non-zero now. */
static void
mark_used (struct fuzzdev *f, uint64_t end)
{
  uint64_t u = __atomic_load_n (&f->used, __ATOMIC_RELAXED);

  while (u < end
         && !__atomic_compare_exchange_n (&f->used, &u, end, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
}

static int
fd_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct fuzzdev *f = (struct fuzzdev *)d;

  if (off > d->size || len > d->size - off || touches_bad (f, off, len))
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
  mark_used (f, off + len);
  if (touches_bad (f, off, len))
    __atomic_store_n (&f->bad_len, 0, __ATOMIC_RELEASE); /* healed */
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

/* Memory of freed devices, all zero, for the next ones. */
#define SPARE_ALIGN (64 * 1024)
static struct {
  unsigned char *mem;
  uint64_t cap;
} spare[4];

/* Zero memory of at least size bytes: the smallest spare that fits,
 * else a new one.
 */
static void
get_mem (struct fuzzdev *f, uint64_t size)
{
  size_t best = sizeof spare / sizeof spare[0];

  for (size_t i = 0; i < sizeof spare / sizeof spare[0]; i++)
    if (spare[i].mem && spare[i].cap >= size
        && (best == sizeof spare / sizeof spare[0]
            || spare[i].cap < spare[best].cap))
      best = i;
  if (best < sizeof spare / sizeof spare[0])
    {
      f->mem = spare[best].mem;
      f->cap = spare[best].cap;
      spare[best].mem = NULL;
    }
  else
    {
      f->cap = HHC_ROUND_UP (HHC_MAX (size, (uint64_t)1), SPARE_ALIGN);
      f->mem = calloc (1, f->cap);
    }
}

/* Keep f's memory, zero again, for the next device (or free it). */
static void
put_mem (struct fuzzdev *f)
{
  size_t slot = 0;

  memset (f->mem, 0, f->used);
  /* Keep the largest: the smallest spare is the one to let go. */
  for (size_t i = 1; i < sizeof spare / sizeof spare[0]; i++)
    if (spare[i].mem == NULL
        || (spare[slot].mem && spare[i].cap < spare[slot].cap))
      slot = i;
  if (spare[slot].mem && spare[slot].cap >= f->cap)
    {
      free (f->mem);
      return;
    }
  free (spare[slot].mem);
  spare[slot].mem = f->mem;
  spare[slot].cap = f->cap;
}

struct hhc_dev *
fuzzdev_new (uint64_t size, const char *name)
{
  struct fuzzdev *f = calloc (1, sizeof *f);

  if (f == NULL)
    abort ();
  get_mem (f, size);
  f->dev.name = strdup (name);
  if (f->mem == NULL || f->dev.name == NULL)
    abort ();
  ASAN_POISON_MEMORY_REGION (f->mem + size, f->cap - size);
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
  len = HHC_MIN ((uint64_t)len, d->size - off);
  memcpy (f->mem + off, buf, len);
  mark_used (f, off + len);
}

unsigned char *
fuzzdev_mem (struct hhc_dev *d)
{
  return ((struct fuzzdev *)d)->mem;
}

void
fuzzdev_wrote (struct hhc_dev *d, uint64_t end)
{
  mark_used ((struct fuzzdev *)d, HHC_MIN (end, d->size));
}

uint64_t
fuzzdev_used (struct hhc_dev *d)
{
  return __atomic_load_n (&((struct fuzzdev *)d)->used, __ATOMIC_RELAXED);
}

void
fuzzdev_free (struct hhc_dev *d)
{
  struct fuzzdev *f = (struct fuzzdev *)d;

  if (f == NULL)
    return;
  ASAN_UNPOISON_MEMORY_REGION (f->mem + d->size, f->cap - d->size);
  put_mem (f);
  free (f->dev.name);
  free (f);
}

void
fuzz_log (enum hhc_msg_level level, const char *msg)
{
  static int verbose = -1;

  if (verbose < 0)
    verbose = getenv ("FUZZ_VERBOSE") != NULL;
  if (verbose)
    fprintf (stderr, "hhc[%d]: %s\n", (int)level, msg);
}

/* ---- cache ---- */

size_t
fuzz_fix_cache (unsigned char *img, size_t len, unsigned flags)
{
  size_t end = 0;

  if ((flags & FUZZ_CACHE_FIX_SUPER) && len >= CACHE_PAGE
      && memcmp (img, CACHE_MAGIC, 8) == 0)
    {
      cache_super_seal (img);
      end = CACHE_PAGE;
    }
  for (size_t off = CACHE_PAGE; off + CACHE_PAGE <= len; off += CACHE_PAGE)
    {
      uint32_t magic = get32 (img + off);
      bool state = off <= 2 * CACHE_PAGE;
      if ((state && magic == CACHE_STATE_MAGIC
           && (flags & FUZZ_CACHE_FIX_STATE))
          || (!state && magic == CACHE_PAGE_MAGIC
              && (flags & FUZZ_CACHE_FIX_PAGES)))
        {
          cache_page_seal (img + off);
          end = off + CACHE_PAGE;
        }
    }
  return end;
}

/* ---- log ---- */

bool
fuzz_log_sb (const unsigned char *img, size_t len, struct log_sb *sb)
{
  return len >= LOG_SB_AREA && log_sb_decode_mirror (img, 0, sb) == 0;
}

/* The superblock copies and the void mark that have the log's magic
 * (valid or not) or the void magic get their checksum, whatever else
 * they hold.
 */
static size_t
fix_log_sbs (unsigned char *img, size_t len)
{
  struct log_sb sb;
  size_t end = 0;

  for (int c = 0; c < 3; c++)
    {
      unsigned char *p = img + (size_t)c * LOG_SB_SIZE;
      int r = (size_t)(c + 1) * LOG_SB_SIZE <= len ? log_sb_decode (p, &sb)
                                                   : ENOENT;
      if (r == 0 || r == EILSEQ || r == ESTALE
          || (r == ENOENT && (size_t)(c + 1) * LOG_SB_SIZE <= len
              && memcmp (p, LOG_VOID_MAGIC, 8) == 0))
        {
          log_sb_seal (p);
          end = (size_t)(c + 1) * LOG_SB_SIZE;
        }
    }
  return end;
}

size_t
fuzz_fix_log (unsigned char *img, size_t len, unsigned flags)
{
  struct log_sb sb;
  uint64_t bs, region, lpos, start;
  uint32_t prev_crc = 0;
  bool have_prev = false;
  size_t end = 0;

  if (flags & FUZZ_LOG_FIX_SUPER)
    end = fix_log_sbs (img, len);
  if (!(flags & FUZZ_LOG_FIX_SEGS) || !fuzz_log_sb (img, len, &sb))
    return end;
  bs = sb.block_size;
  region = sb.region_size;
  if (bs == 0 || len <= LOG_REGION_OFF || region > len - LOG_REGION_OFF
      || region < LOG_ALIGN)
    return end;
  lpos = start = sb.head_off;
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
      struct log_seg_hdr sh;
      uint64_t dl;
      /* As the scan: a header whose lengths fit the region. */
      if (log_seg_decode (h, &sh) != 0 || !log_seg_fits (&sh, phys, region, bs))
        return end;
      dl = (uint64_t)sh.nblocks * bs;
      if (have_prev)
        log_seg_set_prev (h, prev_crc);
      end = HHC_MAX (end, (size_t)(h + LOG_HDR_FIXED - img));
      /* As the scan: the header, then the data. */
      uint32_t crc = log_seg_link (log_seg_seal (h, h + sh.hdr_len, dl));
      if (sh.flags & LOG_F_WRAP)
        {
          lpos += region - phys;
          continue;
        }
      prev_crc = crc;
      have_prev = true;
      lpos += sh.hdr_len + HHC_ROUND_UP (dl, LOG_ALIGN);
    }
  return end;
}
