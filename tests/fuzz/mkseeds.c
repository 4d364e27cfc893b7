/* mkseeds: write the seed inputs of fuzz-cache and fuzz-log (formats
 * in fuzz.h) from devices that the code itself formatted and wrote.
 *
 *   tests/fuzz/mkseeds DIR    writes DIR/cache/ and DIR/log/
 *
 * Why: a mutation of a real superblock, state page, metadata page or
 * segment chain reaches far deeper than random bytes, and near-valid
 * inputs (a torn page, a torn segment, a duplicate entry, a second
 * run on an old log, a wrapped log) start the fuzzer next to the
 * interesting refusals.  UUIDs are random, so every run writes other
 * bytes; the corpus in the tree is one such run (regenerate it when
 * a format changes).
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "common.h"
#include "fuzz.h"
#include "hhccore.h"
#include "log.h"
#include "preopen.h"

#define VOL_SIZE (4 * 1024 * 1024)

static const char *outdir;

static void
die (const char *what)
{
  fprintf (stderr, "mkseeds: %s\n", what);
  exit (1);
}

static void
quiet (enum hhc_msg_level level, const char *msg)
{
  if (level >= HHC_MSG_WARNING)
    fprintf (stderr, "mkseeds: %s\n", msg);
}

static void
write_seed (const char *sub, const char *name, const void *p1, size_t n1,
            const void *p2, size_t n2, const void *p3, size_t n3)
{
  char path[4096];
  FILE *f;

  snprintf (path, sizeof path, "%s/%s", outdir, sub);
  mkdir (path, 0755);
  snprintf (path, sizeof path, "%s/%s/%s", outdir, sub, name);
  f = fopen (path, "wb");
  if (f == NULL || fwrite (p1, 1, n1, f) != n1
      || (n2 && fwrite (p2, 1, n2, f) != n2)
      || (n3 && fwrite (p3, 1, n3, f) != n3) || fclose (f) != 0)
    die (path);
  printf ("%s: %zu bytes\n", path, n1 + n2 + n3);
}

/* Bytes up to the last non-zero 4 KiB page of [p, p+n). */
static size_t
used_len (const unsigned char *p, size_t n)
{
  while (n >= 4096)
    {
      size_t i;
      for (i = n - 4096; i < n && p[i] == 0; i++)
        ;
      if (i < n)
        break;
      n -= 4096;
    }
  return n;
}

/* ---- cache ---- */

static unsigned char backend[VOL_SIZE];

static int
be_pread (void *ctx, void *buf, uint32_t count, uint64_t offset)
{
  memcpy (buf, backend + offset, count);
  return 0;
}

static int
be_pwrite (void *ctx, const void *buf, uint32_t count, uint64_t offset,
           bool fua)
{
  memcpy (backend + offset, buf, count);
  return 0;
}

static int
be_flush (void *ctx)
{
  return 0;
}

static const struct hhc_backend_ops be_ops = {
  .pread = be_pread,
  .pwrite = be_pwrite,
  .flush = be_flush,
};

static struct hhc_volume *
cache_open (struct hhc_dev *dev, uint32_t bs)
{
  struct hhc_backend_info info = {
    .size = VOL_SIZE,
    .identity = "fuzz-volume",
    .multi_conn = true,
  };
  struct hhc_conf conf;
  struct hhc_preopened pre = { .cache = dev };
  struct hhc_volume *vol;

  hhc_conf_init (&conf);
  conf.block_size = bs;
  conf.msgfn = quiet;
  if (hhc_open (&conf, &pre, &be_ops, &info, &vol) != 0)
    die ("hhc_open");
  return vol;
}

/* A cache input: flags, then the device up to its data slots. */
static void
cache_seed (const char *name, unsigned flags, const unsigned char *img)
{
  unsigned char f = flags;

  write_seed ("cache", name, &f, 1, img, get64 (img + 72), NULL, 0);
}

static void
cache_seeds (void)
{
  const unsigned fix
      = FUZZ_CACHE_FIX_SUPER | FUZZ_CACHE_FIX_STATE | FUZZ_CACHE_FIX_PAGES;
  struct hhc_dev *dev = fuzzdev_new (FUZZ_CACHE_DEV, "seed-cache");
  unsigned char *mem = fuzzdev_mem (dev), *img = malloc (FUZZ_CACHE_DEV);
  unsigned char block[4096];
  struct hhc_volume *vol;

  if (img == NULL)
    die ("malloc");

  /* Fresh, 4 KiB blocks (one metadata page). */
  hhc_close (cache_open (dev, 4096));
  cache_seed ("fresh-4k", fix, mem);

  /* 512-byte blocks (four pages): clean blocks from reads, dirty ones
   * from writes, a few commits (both copies of a page in use).
   */
  memset (mem, 0, FUZZ_CACHE_DEV);
  vol = cache_open (dev, 512);
  if (hhc_start (vol, NULL) != 0)
    die ("hhc_start");
  for (unsigned i = 0; i < 64; i++)
    {
      if (hhc_read (vol, NULL, block, 512, (uint64_t)i * 7 * 512) != 0)
        die ("hhc_read");
      memset (block, i, 512);
      if (hhc_write (vol, NULL, block, 512, (uint64_t)(i * 13 + 600) * 512,
                     false)
          != 0)
        die ("hhc_write");
      if (i % 16 == 15 && hhc_flush (vol, NULL) != 0)
        die ("hhc_flush");
    }
  /* In use (as after a crash in wb), then closed cleanly. */
  memcpy (img, mem, FUZZ_CACHE_DEV);
  hhc_close (vol);
  cache_seed ("inuse-wb-512", fix, img);
  cache_seed ("inuse-pt-start-512", fix | FUZZ_CACHE_PT | FUZZ_CACHE_START,
              img);
  cache_seed ("closed-512", fix, mem);
  cache_seed ("closed-pt-512", fix | FUZZ_CACHE_PT, mem);

  /* Near-valid: one LBA in two slots on two pages (a crash in the
   * middle of a commit), and a torn metadata page (bad crc).
   */
  memcpy (img, mem, FUZZ_CACHE_DEV);
  {
    struct hhc_cache c = { .dev = dev };
    char id[CACHE_IDENTITY_MAX + 1];
    if (cache_read_super (&c, id, sizeof id) != 0 || c.npages < 2)
      die ("cache_read_super");
    for (int copy = 0; copy < 2; copy++)
      {
        unsigned char *p0 = img + c.meta_off + (size_t)copy * c.npages * 4096;
        unsigned char *p1 = p0 + 4096;
        uint64_t lba = 0;
        unsigned st = 0;
        for (unsigned i = 0; i < CACHE_EPP && st == 0; i++)
          cache_page_get (p0, i, &lba, &st);
        cache_page_set (p1, 7, lba, st);
      }
    fuzz_fix_cache (img, FUZZ_CACHE_DEV, fix);
    cache_seed ("dup-lba-512", fix, img);
    memcpy (img, mem, FUZZ_CACHE_DEV);
    img[c.meta_off + 100] ^= 0x40;
    cache_seed ("torn-page-512", FUZZ_CACHE_FIX_SUPER | FUZZ_CACHE_FIX_STATE,
                img);
  }
  fuzzdev_free (dev);
  free (img);
}

/* ---- log ---- */

#define LOG_DEV (LOG_REGION_OFF + FUZZ_LOG_MIN_REGION)
#define LOG_BS 512
#define NKEYS 64

static unsigned char blocks[NKEYS][LOG_BS];
static uint64_t key_lba[NKEYS];
static struct hhc_log *cur_log;

static int
relog (void *opaque, uint32_t key, uint64_t lba)
{
  log_append (cur_log, key, lba, blocks[key]);
  return 0;
}

static void
pressure (void *opaque)
{
}

static struct hhc_log *
log_open1 (struct hhc_dev *dev, const uint8_t cache_uuid[16])
{
  const char *paths[] = { "seed-log" };
  struct hhc_dev *devs[] = { dev };
  struct log_conf lc = {
    .paths = paths,
    .npaths = 1,
    .block_size = LOG_BS,
    .volume_size = VOL_SIZE,
    .identity = "fuzz-volume",
    .segment_size = FUZZ_LOG_SEGMENT,
    .msgfn = quiet,
    .devs = devs,
  };
  struct log_callbacks cb = { NULL, relog, pressure, NULL };
  struct hhc_log *log;
  enum log_found found;

  if (log_open (&lc, cache_uuid, &log, &found) != 0)
    die ("log_open");
  cur_log = log;
  if (log_start (log, cache_uuid, NKEYS, &cb) != 0)
    die ("log_start");
  return log;
}

static void
put_block (struct hhc_log *log, uint32_t key, uint64_t lba, unsigned v)
{
  memset (blocks[key], v, LOG_BS);
  put64 (blocks[key], lba);
  key_lba[key] = lba;
  log_append (log, key, lba, blocks[key]);
}

/* A log input: flags, cut, the superblocks, the used region. */
static void
log_seed (const char *name, unsigned flags, unsigned cut,
          const unsigned char *img)
{
  unsigned char hdr[2] = { flags, cut };

  write_seed ("log", name, hdr, 2, img, FUZZ_LOG_SB_BYTES, img + LOG_REGION_OFF,
              used_len (img + LOG_REGION_OFF, FUZZ_LOG_MIN_REGION));
}

static void
log_seeds (void)
{
  const unsigned fix = FUZZ_LOG_FIX_SUPER | FUZZ_LOG_FIX_SEGS;
  static const uint8_t cache_uuid[16] = { 0xca, 0xc4, 0xe0 };
  struct hhc_dev *dev = fuzzdev_new (LOG_DEV, "seed-log");
  unsigned char *mem = fuzzdev_mem (dev), *img = malloc (LOG_DEV);
  struct hhc_log *log;
  uint32_t keys[NKEYS];

  if (img == NULL)
    die ("malloc");

  /* One run: blocks, barriers, an overwrite, a revoke. */
  log = log_open1 (dev, cache_uuid);
  if (log_rebase (log, NULL, NULL, 0) != 0)
    die ("log_rebase");
  for (unsigned k = 0; k < 5; k++)
    put_block (log, k, k * 3, 0x10 + k);
  if (log_barrier (log) != 0)
    die ("log_barrier");
  put_block (log, 5, 100, 0x20);
  put_block (log, 1, 3, 0x21);
  if (log_barrier (log) != 0)
    die ("log_barrier");
  log_revoke (log, 2, 6);
  if (log_barrier (log) != 0)
    die ("log_barrier");
  log_close (log);
  log_seed ("run", fix, 0, mem);
  log_seed ("run-filter", fix | FUZZ_LOG_FILTER, 0, mem);
  log_seed ("run-start", fix | FUZZ_LOG_START, 0, mem);
  log_seed ("run-filter-start", fix | FUZZ_LOG_FILTER | FUZZ_LOG_START, 0, mem);
  log_seed ("run-mirror2", fix | FUZZ_LOG_MIRROR2, 5, mem);
  log_seed ("run-nofix", 0, 0, mem);
  /* The void mark of the newest copy's generation (void); a copy, or
   * the mark too, unreadable (cut picks which: fuzz.h).
   */
  log_seed ("run-mark", fix | FUZZ_LOG_MARK, 1, mem);
  log_seed ("run-torn-a-start", fix | FUZZ_LOG_TORN | FUZZ_LOG_START, 0, mem);
  log_seed ("run-torn-b-filter", fix | FUZZ_LOG_TORN | FUZZ_LOG_FILTER, 4, mem);
  log_seed ("run-mark-torn-a", fix | FUZZ_LOG_MARK | FUZZ_LOG_TORN, 1, mem);

  /* A torn last segment: the replay stops at the barrier before it. */
  memcpy (img, mem, LOG_DEV);
  img[LOG_REGION_OFF + used_len (mem + LOG_REGION_OFF, FUZZ_LOG_MIN_REGION)
      - 100]
      ^= 1;
  log_seed ("torn-tail", FUZZ_LOG_FIX_SUPER, 0, img);

  /* A second run after the first: rebase of its dirty blocks (an older
   * base in the log), then more.
   */
  log = log_open1 (dev, cache_uuid);
  for (unsigned k = 0; k < 6; k++)
    keys[k] = k;
  if (log_rebase (log, keys, key_lba, 6) != 0)
    die ("log_rebase");
  put_block (log, 7, 50, 0x30);
  if (log_barrier (log) != 0)
    die ("log_barrier");
  log_close (log);
  log_seed ("rebased", fix, 0, mem);
  log_seed ("rebased-filter-start", fix | FUZZ_LOG_FILTER | FUZZ_LOG_START, 0,
            mem);

  /* Wrapped: the same blocks again and again until the region wraps;
   * revokes let the head move.
   */
  memset (mem, 0, LOG_DEV);
  log = log_open1 (dev, cache_uuid);
  if (log_rebase (log, NULL, NULL, 0) != 0)
    die ("log_rebase");
  for (unsigned round = 0; round < 80; round++)
    {
      for (unsigned k = 0; k < 4; k++)
        put_block (log, k, 2 * k, round);
      if (log_barrier (log) != 0)
        die ("log_barrier");
      for (unsigned k = 0; k < 4; k++)
        if ((round + k) % 2)
          log_revoke (log, k, key_lba[k]);
    }
  log_close (log);
  log_seed ("wrapped", fix, 0, mem);

  /* Blank: the filter formats a new log and runs on it. */
  memset (mem, 0, LOG_DEV);
  log_seed ("blank-filter-start", FUZZ_LOG_FILTER | FUZZ_LOG_START, 0, mem);
  fuzzdev_free (dev);
  free (img);
}

int
main (int argc, char **argv)
{
  if (argc != 2)
    {
      fprintf (stderr, "usage: mkseeds DIR\n");
      return 2;
    }
  outdir = argv[1];
  mkdir (outdir, 0755);
  cache_seeds ();
  log_seeds ();
  return 0;
}
