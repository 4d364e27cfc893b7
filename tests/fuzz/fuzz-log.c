/* Fuzz target: the HDD log as recovery finds it: superblocks, the
 * scan of the segment chain, replay, and a run that continues it.
 *
 * Why: after the SSD is lost, the log is the only copy of the data
 * that FLUSH acknowledged, and it is read back from cheap disks after
 * a crash, with torn segments, stale segments of older runs and bit
 * rot.  read_sb (gateway/log-mirror.c: log_sb_decode), check_sb_owner
 * and log_open's steps (log-open.c), scan_mirror (log-scan.c:
 * header_ok, the checksum and the chain link) and log_replay
 * (log-replay.c) must refuse what they
 * cannot use and never crash, hang or read outside their buffers,
 * whatever the bytes; hhcctl recover runs the same code on a log
 * device named on its command line.
 *
 * What: the input (format in fuzz.h) is a log mirror, checksums fixed
 * up as its flags say; optionally a second mirror holds a copy cut off
 * somewhere in the region.  log_open as hhcctl recover does (the
 * volume is whatever the log records) or as the filter does (the
 * volume given, the same as the log's), then log_replay into a backend
 * that aborts on a block beyond the volume.  Optionally the log then
 * goes on as at the gateway's start (log_start, log_rebase of two
 * dirty blocks, one more write, a barrier, a revoke, a barrier,
 * log_stop), and the result must replay to exactly those blocks.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define NKEYS 3

/* The backend of a replay: checks each block, remembers the last
 * NKEYS + 1 it got (for the check after a run of our own).
 */
struct target {
  uint64_t nblocks, volume_size;
  uint32_t bs;
  size_t n;
  uint64_t lba[NKEYS + 1];
  unsigned char first[NKEYS + 1]; /* first byte of each */
};

static int
replay_write (void *opaque, const void *buf, uint64_t lba)
{
  static unsigned char sink[1024 * 1024];
  struct target *t = opaque;

  if (lba >= t->nblocks)
    {
      fprintf (stderr,
               "fuzz-log: replay wrote block %" PRIu64
               " of a volume of %" PRIu64 "\n",
               lba, t->nblocks);
      abort ();
    }
  /* Read every byte (ASan checks the buffer). */
  memcpy (sink, buf, HHC_MIN ((size_t)t->bs, sizeof sink));
  if (t->n <= NKEYS)
    {
      t->lba[t->n] = lba;
      t->first[t->n] = *(const unsigned char *)buf;
    }
  t->n++;
  return 0;
}

static void
replay_progress (void *opaque, uint64_t done, uint64_t total)
{
  if (done > total)
    {
      fprintf (stderr, "fuzz-log: progress %" PRIu64 " of %" PRIu64 "\n", done,
               total);
      abort ();
    }
}

/* Our own run on the log: key k is block lbas[k], filled with 0x40+k. */
struct run {
  struct hhc_log *log;
  uint32_t bs;
  uint64_t lbas[NKEYS];
  unsigned char *blocks[NKEYS];
};

static int
relog (void *opaque, uint32_t key, uint64_t lba)
{
  struct run *r = opaque;

  if (key >= NKEYS || lba != r->lbas[key])
    {
      fprintf (stderr, "fuzz-log: relog of key %u, block %" PRIu64 "\n", key,
               lba);
      abort ();
    }
  log_append (r->log, key, lba, r->blocks[key]);
  return 0;
}

static void
pressure (void *opaque)
{
}

static struct hhc_log *
open_log (struct hhc_dev **devs, unsigned ndevs, const char *identity,
          uint64_t volume_size, uint32_t bs, const uint8_t cache_uuid[16],
          enum log_found *found)
{
  static const char *const paths[] = { "fuzz-log-a", "fuzz-log-b" };
  struct log_conf lc = {
    .paths = paths,
    .npaths = ndevs,
    .block_size = bs,
    .volume_size = volume_size,
    .identity = identity,
    .segment_size = FUZZ_LOG_SEGMENT,
    .msgfn = fuzz_log,
    .devs = devs,
  };
  struct hhc_log *log;

  return log_open (&lc, cache_uuid, &log, found) == 0 ? log : NULL;
}

static void
replay (struct hhc_log *log, struct target *t, int *r)
{
  const char *id;

  memset (t, 0, sizeof *t);
  log_volume (log, &id, &t->volume_size, &t->bs);
  t->nblocks = t->volume_size / t->bs + (t->volume_size % t->bs != 0);
  *r = log_replay (log, replay_write, replay_progress, t);
}

/* Go on with the log as a gateway does at start-up, then check that
 * it replays to what this run wrote.  as_filter: log was opened as the
 * filter opens it.
 */
static void
run_and_check (struct hhc_log *log, struct hhc_dev **devs, unsigned ndevs,
               const struct target *vol, bool as_filter)
{
  uint64_t nblocks = vol->nblocks;
  uint32_t bs = vol->bs;
  static const uint8_t cache_uuid[16] = { 0xfa, 0x22 };
  struct run run = { .log = log, .bs = bs };
  struct log_callbacks cb = { &run, relog, pressure, NULL };
  unsigned n = HHC_MIN (nblocks, (uint64_t)NKEYS);
  uint32_t keys[2] = { 0, 1 };
  struct target t;
  enum log_found found;
  int r;

  struct log_stats ls;

  /* A gateway's volume: nbdkit sizes fit in int64, blocks are 512
   * bytes to 1 MiB.  And a log with room for this run next to its
   * buffers' reservations: in a smaller one the run's FLUSHes wait for
   * write-back, which this harness does not do (such inputs hung
   * before the log's tickets counted revokes).  The input is still
   * opened and scanned.
   */
  log_get_stats (log, &ls);
  if (n < NKEYS || bs < 512 || bs > 1024 * 1024 || vol->volume_size > INT64_MAX
      || ls.region_size
             < 16
                   * ((uint64_t)HHC_MAX ((uint32_t)FUZZ_LOG_SEGMENT, bs)
                      + 65536))
    {
      log_close (log);
      return;
    }
  /* The check below reopens the log as hhcctl recover does, with the
   * segment size its superblock records; the filter used its own
   * (FUZZ_LOG_SEGMENT).  A superblock naming a segment size too big
   * for its region (no gateway writes one: log_open checks the size
   * against the region before it writes anything) opens only as the
   * filter, and after the run only if the writer happened to rewrite
   * the superblock (a head persisted after active reclaim, a matter of
   * timing).  Such a log is not run on (regress-reopen-952389c6).
   */
  if (as_filter)
    {
      struct hhc_log *offline
          = open_log (devs, ndevs, NULL, 0, 512, cache_uuid, &found);
      if (offline == NULL)
        {
          log_close (log);
          return;
        }
      log_close (offline);
    }
  for (unsigned k = 0; k < n; k++)
    {
      run.lbas[k] = k == 0 ? nblocks - 1 : k == 1 ? 0 : (nblocks - 1) / 2;
      run.blocks[k] = malloc (bs);
      if (run.blocks[k] == NULL)
        abort ();
      memset (run.blocks[k], 0x40 + k, bs);
    }
  if ((r = log_start (log, cache_uuid, NKEYS, &cb)) != 0)
    {
      fprintf (stderr, "fuzz-log: log_start: %s\n", strerror (r));
      abort ();
    }
  if (!log_rebase_fits (log, 2) && (r = log_discard (log)) != 0)
    {
      fprintf (stderr, "fuzz-log: log_discard: %s\n", strerror (r));
      abort ();
    }
  if ((r = log_rebase (log, keys, run.lbas, 2)) != 0)
    {
      fprintf (stderr, "fuzz-log: log_rebase: %s\n", strerror (r));
      abort ();
    }
  log_append (log, 2, run.lbas[2], run.blocks[2]);
  if ((r = log_barrier (log)) != 0)
    {
      fprintf (stderr, "fuzz-log: log_barrier: %s\n", strerror (r));
      abort ();
    }
  log_revoke (log, 1, run.lbas[1]);
  if ((r = log_barrier (log)) != 0)
    {
      fprintf (stderr, "fuzz-log: log_barrier: %s\n", strerror (r));
      abort ();
    }
  log_close (log);

  /* Replayed now: blocks 0 and 2 of this run, nothing else. */
  log = open_log (devs, ndevs, NULL, 0, 512, cache_uuid, &found);
  if (log == NULL || found != LOG_FOUND_VALID)
    {
      fprintf (stderr, "fuzz-log: the log written does not open again\n");
      abort ();
    }
  replay (log, &t, &r);
  log_close (log);
  bool ok = r == 0 && t.n == 2;
  for (size_t i = 0; ok && i < t.n; i++)
    {
      unsigned k = t.lba[i] == run.lbas[0] ? 0 : 2;
      ok = (t.lba[i] == run.lbas[k] && t.first[i] == 0x40 + k);
    }
  if (!ok)
    {
      fprintf (stderr,
               "fuzz-log: the run's log replays to %zu blocks (r=%d), "
               "not blocks %" PRIu64 " and %" PRIu64 "\n",
               t.n, r, run.lbas[0], run.lbas[2]);
      for (size_t i = 0; i < HHC_MIN (t.n, (size_t)NKEYS + 1); i++)
        fprintf (stderr, "  block %" PRIu64 ": 0x%02x\n", t.lba[i], t.first[i]);
      abort ();
    }
  for (unsigned k = 0; k < n; k++)
    free (run.blocks[k]);
}

/* FUZZ_LOG_MARK: the void mark of copy A's log, its generation near
 * copy A's (fuzz.h).
 */
static void
put_mark (struct hhc_dev *d, unsigned k)
{
  struct log_sb a;
  unsigned char mark[LOG_SB_SIZE];

  log_sb_decode (fuzzdev_mem (d), &a); /* the fields, whatever the crc */
  log_sb_encode_void (a.log_uuid, a.cache_uuid, a.generation + (k & 3) - 1,
                      mark);
  fuzzdev_load (d, LOG_VOID_OFF, mark, sizeof mark);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const uint8_t zero_uuid[16];
  struct hhc_dev *devs[2] = { NULL, NULL };
  unsigned ndevs = 1, flags;
  size_t sbpart, regpart;
  uint64_t devsize, cut;
  struct log_sb sb;
  char *identity = NULL;
  uint64_t volume_size = 0;
  uint32_t bs = 512;
  const uint8_t *cache_uuid = zero_uuid;
  struct hhc_log *log;
  enum log_found found;
  struct target t;
  int r;

  if (size < 2)
    return 0;
  flags = data[0];
  cut = (uint64_t)data[1] * 4096;
  data += 2;
  size -= 2;
  sbpart = HHC_MIN (size, (size_t)FUZZ_LOG_SB_BYTES);
  regpart = size - sbpart;
  devsize = LOG_REGION_OFF
            + HHC_MAX ((uint64_t)FUZZ_LOG_MIN_REGION,
                       HHC_ROUND_UP ((uint64_t)regpart, 4096));
  devs[0] = fuzzdev_new (devsize, "fuzz-log-a");
  fuzzdev_load (devs[0], 0, data, sbpart);
  fuzzdev_load (devs[0], LOG_REGION_OFF, data + sbpart, regpart);
  if (flags & FUZZ_LOG_MARK)
    put_mark (devs[0], cut / 4096);
  fuzzdev_wrote (devs[0], fuzz_fix_log (fuzzdev_mem (devs[0]), devsize, flags));
  if (flags & FUZZ_LOG_MIRROR2)
    {
      /* (Past what the first one holds, both are zero.) */
      devs[1] = fuzzdev_new (devsize, "fuzz-log-b");
      fuzzdev_load (devs[1], 0, fuzzdev_mem (devs[0]),
                    HHC_MIN (fuzzdev_used (devs[0]), LOG_REGION_OFF + cut));
      ndevs = 2;
    }
  /* A torn superblock write left one part of it unreadable. */
  if (flags & FUZZ_LOG_TORN)
    fuzzdev_set_bad (devs[0], (cut / 4096 >> 2) % 3 * LOG_SB_SIZE, LOG_SB_SIZE);

  /* As the filter: the volume is given (here: the one the log names;
   * a log of another volume is refused before anything else is read).
   */
  if ((flags & FUZZ_LOG_FILTER)
      && fuzz_log_sb (fuzzdev_mem (devs[0]), devsize, &sb)
      && HHC_IS_POW2 (sb.block_size) && sb.block_size >= 512
      && sb.block_size <= 1024 * 1024)
    {
      identity = strndup (
          sb.identity, HHC_MIN (sb.identity_len, (uint32_t)LOG_IDENTITY_MAX));
      volume_size = sb.volume_size;
      bs = sb.block_size;
      cache_uuid = sb.cache_uuid;
    }
  else if (flags & FUZZ_LOG_FILTER)
    {
      /* No log the filter could use: it formats a new one (if the
       * superblocks are blank) or refuses the device.
       */
      identity = strdup ("fuzz-volume");
      volume_size = 1024 * 1024;
      bs = 4096;
    }
  if ((flags & FUZZ_LOG_FILTER) && identity == NULL)
    abort ();

  log = open_log (devs, ndevs, identity, volume_size, bs, cache_uuid, &found);
  if (log == NULL)
    goto out;
  replay (log, &t, &r);
  if (r == 0 && (flags & FUZZ_LOG_START))
    run_and_check (log, devs, ndevs, &t, flags & FUZZ_LOG_FILTER);
  else
    log_close (log);
out:
  free (identity);
  fuzzdev_free (devs[0]);
  fuzzdev_free (devs[1]);
  return 0;
}
