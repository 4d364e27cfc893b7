/* Fuzz target: the SSD cache device as hhc_open () finds it.
 *
 * Why: the superblock, the two state pages and the A/B metadata pages
 * are read back from a device that a crash, a torn write, a dying SSD
 * or a wrong cache= path can fill with anything.  cache_read_super,
 * cache_read_state and cache_load (gateway/cache.c) must refuse what
 * they cannot use and never crash, hang or read outside their
 * buffers, whatever the bytes.  (What is valid is decided by the
 * codec, gateway/cache-format.c, which hhcctl check uses too.)
 *
 * What: the input (format in fuzz.h) is the device, checksums fixed
 * up as its flags say.  The backend is the one the superblock names
 * (identity and size), so that the geometry and the metadata get
 * parsed instead of refused as another volume's; it holds zeros and
 * aborts on I/O outside the volume.  Then hhc_open (format=never, wb
 * or pt), in pt optionally hhc_start (which writes back every dirty
 * block it loaded), and hhc_close.  Checks beyond the sanitizers':
 * every slot is free, clean or dirty exactly once; and a cache that
 * was loaded and closed by the code loads again with the same blocks.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache-format.h"
#include "common.h"
#include "fuzz.h"
#include "offline.h"
#include "hhccore.h"
#include "preopen.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* The backend: zeros, size bytes. */
struct stub {
  uint64_t size;
};

static void
check_range (struct stub *b, uint32_t count, uint64_t offset, const char *op)
{
  if (offset > b->size || count > b->size - offset)
    {
      fprintf (stderr,
               "fuzz-cache: backend %s of %u bytes at %" PRIu64
               " is beyond the volume (%" PRIu64 " bytes)\n",
               op, count, offset, b->size);
      abort ();
    }
}

static int
stub_pread (void *ctx, void *buf, uint32_t count, uint64_t offset)
{
  check_range (ctx, count, offset, "read");
  memset (buf, 0, count);
  return 0;
}

static int
stub_pwrite (void *ctx, const void *buf, uint32_t count, uint64_t offset,
             bool fua)
{
  static unsigned char sink[1024 * 1024];

  check_range (ctx, count, offset, "write");
  /* Read every byte (ASan checks the buffer). */
  memcpy (sink, buf, HHC_MIN (count, sizeof sink));
  return 0;
}

static int
stub_flush (void *ctx)
{
  return 0;
}

static const struct hhc_backend_ops stub_ops = {
  .pread = stub_pread,
  .pwrite = stub_pwrite,
  .flush = stub_flush,
};

static int
open_volume (struct hhc_dev *dev, enum hhc_mode mode, const char *identity,
             struct stub *be, struct hhc_volume **vol)
{
  struct hhc_conf conf;
  struct hhc_preopened pre = { .cache = dev };
  struct hhc_backend_info info = {
    .size = be->size,
    .identity = "",
    .multi_conn = true,
  };

  hhc_conf_init (&conf);
  conf.mode = mode;
  conf.format = HHC_FORMAT_NEVER;
  conf.backend_id = identity;
  /* The superblock may name no identity: such a cache is still loaded
   * and parsed (a gateway loads one; only formatting one is refused).
   */
  conf.allow_no_identity = true;
  conf.msgfn = fuzz_log;
  /* Write-back in this thread (as the filter over a serialized
   * plugin): three threads started per batch cost more than the rest
   * of an input, and the stub backend has no latency to overlap.
   */
  conf.writeback_threads = 1;
  return hhc_open (&conf, &pre, &stub_ops, &info, vol);
}

static void
check_counts (const struct hhc_counts *c, const char *when)
{
  if (c->free + c->clean + c->dirty != c->slots)
    {
      fprintf (stderr,
               "fuzz-cache: %s: %" PRIu64 " free + %" PRIu64 " clean + %" PRIu64
               " dirty != %" PRIu64 " slots\n",
               when, c->free, c->clean, c->dirty, c->slots);
      abort ();
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct cache_super sb;
  struct hhc_dev *dev;
  struct hhc_volume *vol;
  struct hhc_counts before, after;
  struct stub be;
  unsigned char *mem;
  size_t loaded;
  unsigned flags;
  enum hhc_mode mode;
  bool started = false;

  if (size < 1)
    return 0;
  flags = data[0];
  mode = (flags & FUZZ_CACHE_PT) ? HHC_MODE_PT : HHC_MODE_WB;
  dev = fuzzdev_new (FUZZ_CACHE_DEV, "fuzz-cache");
  fuzzdev_load (dev, 0, data + 1, size - 1);
  mem = fuzzdev_mem (dev);
  /* The pages past the input are zero: nothing to fix there. */
  loaded
      = HHC_MIN ((size_t)FUZZ_CACHE_DEV, HHC_ROUND_UP (size - 1, CACHE_PAGE));
  fuzzdev_wrote (dev, fuzz_fix_cache (mem, loaded, flags));

  /* The volume the superblock names (nbdkit's sizes fit in int64),
   * whether or not the superblock is valid.
   */
  cache_super_decode (mem, &sb);
  be.size = sb.volume_size;
  if (be.size > INT64_MAX)
    be.size = INT64_MAX;

  if (open_volume (dev, mode, sb.identity, &be, &vol) != 0)
    goto out;
  hhc_get_counts (vol, &before);
  check_counts (&before, "after open");
  if ((flags & FUZZ_CACHE_START) && mode == HHC_MODE_PT)
    {
      if (hhc_start (vol, &be) != 0)
        {
          fprintf (stderr, "fuzz-cache: hhc_start failed\n");
          abort ();
        }
      started = true;
      hhc_get_counts (vol, &before);
      check_counts (&before, "after start");
      if (before.dirty != 0)
        {
          fprintf (stderr, "fuzz-cache: pt start left dirty blocks\n");
          abort ();
        }
    }
  if (hhc_close (vol) != 0)
    {
      fprintf (stderr, "fuzz-cache: hhc_close failed\n");
      abort ();
    }

  /* What the code closed, it must load again, with the same blocks
   * (but for pt without a start, which leaves the cache "in use": its
   * clean blocks are not trusted).
   */
  if (open_volume (dev, mode, sb.identity, &be, &vol) != 0)
    {
      /* Refused only for a sequence the run took to the load limit
       * (CACHE_SEQ_LOAD_MAX: 2^61, which no run of a real cache
       * reaches; the input started just below it).
       */
      struct offline_cache cc;
      if (offline_cache_read (dev, fuzz_log, &cc) == 0
          && (cc.late_pages || cc.late_state))
        goto out;
      fprintf (stderr, "fuzz-cache: the closed cache does not load again\n");
      abort ();
    }
  hhc_get_counts (vol, &after);
  check_counts (&after, "after reopen");
  if (after.dirty != before.dirty
      || after.clean != (mode == HHC_MODE_PT && !started ? 0 : before.clean))
    {
      fprintf (stderr,
               "fuzz-cache: reopened with %" PRIu64 " clean, %" PRIu64
               " dirty; closed with %" PRIu64 " clean, %" PRIu64 " dirty\n",
               after.clean, after.dirty, before.clean, before.dirty);
      abort ();
    }
  if (hhc_close (vol) != 0)
    abort ();
out:
  fuzzdev_free (dev);
  return 0;
}
