/* Opening the log in mode hhc (docs/design.md §5 and §7): what
 * log_open refuses, a lost log, and the start-up re-log of the dirty
 * blocks (log_rebase) cut short.
 *
 * Tests:
 *   refusals      logs of another cache, backend, block size or log; a
 *                 log device too small, a valid log too small for a
 *                 bigger segment-size (nothing written), superblocks
 *                 (checksum right) with an impossible region or head;
 *                 hhc without a log.
 *   lost_log      a cache whose log is gone starts on a blank log and
 *                 logs its dirty blocks there again.
 *   rebase_cut    the log fails during the start-up re-log of the
 *                 dirty blocks, then the SSD is lost: the replay still
 *                 brings back every flushed block.
 *   rebase_tight  the same with a log more than half full (every
 *                 segment a barrier) and a slow log sync (buffers
 *                 queued when the re-log is done).
 *   scan_parallel two mirrors are scanned at once at open.
 *   scan_reads    the scan reads a chain of small segments in few
 *                 requests.
 *   scan_bad_tail unreadable sectors past the tail: the chain is whole.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log-helpers.h"

/* A region that wraps LOG_REGION_OFF + region_size to 0. */
static void
wrap_region (struct log_sb *sb)
{
  sb->region_size = -(uint64_t)LOG_REGION_OFF;
}

/* A head hint not 4 KiB aligned. */
static void
misalign_head (struct log_sb *sb)
{
  sb->head_off += 0x32;
}

/* A volume on ssd/log that wrote and flushed something. */
static void
make_pair (struct env *e, uint64_t v)
{
  env_open (e);
  for (uint64_t l = 0; l < 4; l++)
    env_write (e, l, v + l, false);
  env_flush (e);
  env_close (e);
}

static void
test_refusals (void **state)
{
  struct env a, b;
  struct hhc_volume *vol = NULL;
  struct tdev small;

  env_init (&a, 64, 64, 1, LOG_REGION_OFF + 512 * KiB);
  env_init (&b, 64, 64, 1, LOG_REGION_OFF + 512 * KiB);
  /* Same backend, as far as the identity tells. */
  b.info.identity = a.info.identity;
  make_pair (&a, 100);
  make_pair (&b, 200);

  /* Cache a with b's log (paired with cache b): refused. */
  a.pre.logs[0] = b.logs[0].pd;
  assert_int_equal (env_try_open (&a), EINVAL);
  /* Mirrors of two different logs: refused. */
  a.conf.nlogs = 2;
  a.conf.log_paths[1] = log_names[1];
  a.pre.logs[0] = a.logs[0].pd;
  a.pre.logs[1] = b.logs[0].pd;
  assert_int_equal (env_try_open (&a), EINVAL);
  a.conf.nlogs = 1;
  a.pre.logs[1] = NULL;
  /* Neither refusal changed anything: both pairs still open. */
  env_open (&a);
  assert_true (reads_v (&a, 1, 101));
  env_close (&a);
  env_open (&b);
  assert_true (reads_v (&b, 1, 201));
  env_close (&b);

  /* A log of another backend (identity, size, block size), with a
   * blank cache: refused, and the cache is not formatted.
   */
  env_new_ssd (&a);
  a.info.identity = "membackend:someone-else";
  assert_int_equal (env_try_open (&a), EINVAL);
  a.info.identity = b.info.identity;
  a.info.size -= BS;
  assert_int_equal (env_try_open (&a), EINVAL);
  a.info.size += BS;
  a.conf.block_size = 8192;
  assert_int_equal (env_try_open (&a), EINVAL);
  a.conf.block_size = 0;
  {
    unsigned char sb[8];
    assert_int_equal (dev_pread (a.ssd.cd, sb, sizeof sb, 0), 0);
    assert_memory_equal (sb, "\0\0\0\0\0\0\0\0", 8);
  }

  /* A log device too small for segment-size=64K. */
  tdev_new (&small, LOG_REGION_OFF + 128 * KiB, NULL, "small");
  a.pre.logs[0] = small.pd;
  assert_int_equal (env_try_open (&a), EINVAL);
  tdev_free (&small);
  a.pre.logs[0] = a.logs[0].pd;

  /* A valid log too small for a bigger segment-size: refused before
   * anything is written.  So every superblock names a segment size that
   * fits its region, and hhcctl recover, which takes the recorded one,
   * opens every log a gateway wrote (fuzz-log's regress-reopen-952389c6
   * had a superblock that does not fit, made by the fuzzer).
   */
  {
    unsigned char saved[8192], now[8192];
    assert_int_equal (dev_pread (a.logs[0].cd, saved, sizeof saved, 0), 0);
    a.conf.segment_size = 1024 * KiB;
    assert_int_equal (env_try_open (&a), EINVAL);
    a.conf.segment_size = SEG;
    assert_int_equal (dev_pread (a.logs[0].cd, now, sizeof now, 0), 0);
    assert_memory_equal (saved, now, sizeof saved);
  }

  /* A superblock (crc right) whose region wraps LOG_REGION_OFF +
   * region_size to 0: refused as corrupt, before the ring of 2^32
   * slots that it asked for is allocated (found by fuzz-log in CI).
   */
  {
    unsigned char saved[2 * LOG_SB_SIZE];
    edit_sbs (a.logs[0].cd, saved, wrap_region);
    assert_int_equal (env_try_open (&a), EINVAL);
    assert_int_equal (dev_pwrite (a.logs[0].cd, saved, sizeof saved, 0), 0);
  }

  /* A head hint (crc right) that is not 4 KiB aligned: no gateway
   * writes one (segments start aligned), and a run from it would write
   * unaligned segments.  Refused as corrupt (seen in a fuzz-log input).
   */
  {
    unsigned char saved[2 * LOG_SB_SIZE];
    edit_sbs (a.logs[0].cd, saved, misalign_head);
    assert_int_equal (env_try_open (&a), EINVAL);
    assert_int_equal (dev_pwrite (a.logs[0].cd, saved, sizeof saved, 0), 0);
  }

  /* Mode hhc without a log, and a log in another mode. */
  a.conf.nlogs = 0;
  assert_int_equal (hhc_open (&a.conf, &a.pre, &pbe_ops, &a.info, &vol),
                    EINVAL);
  a.conf.nlogs = 1;
  a.conf.mode = HHC_MODE_WB;
  assert_int_equal (hhc_open (&a.conf, &a.pre, &pbe_ops, &a.info, &vol),
                    EINVAL);
  a.conf.mode = HHC_MODE_HHC;
  assert_null (vol);

  /* The right log with the blank cache: replayed, accepted. */
  env_open (&a);
  assert_true (reads_v (&a, 2, 102));
  env_close (&a);
  env_free (&a);
  env_free (&b);
}

/* ---- a lost log ---- */

static void
test_lost_log (void **state)
{
  struct env e;

  env_init (&e, 64, 128, 1, LOG_REGION_OFF + 512 * KiB);
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < 12; l++)
    env_write (&e, l, 40 + l, false);
  env_flush (&e);
  env_close (&e);
  /* The log device is replaced by a blank one: the cache starts, and
   * its dirty blocks go to the new log before any request.
   */
  tdev_free (&e.logs[0]);
  tdev_new (&e.logs[0], LOG_REGION_OFF + 512 * KiB, NULL, "log0");
  e.pre.logs[0] = e.logs[0].pd;
  env_open (&e);
  assert_int_equal (counts (&e).dirty, 12);
  assert_true (counts (&e).log_relogged >= 12);
  assert_true (reads_v (&e, 3, 43));
  env_close (&e);
  /* Then the SSD is lost too: the new log has everything. */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < 64; l++)
    assert_true (backend_has (&e, l, l < 12 ? 40 + l : 0));
  env_close (&e);
  env_free (&e);
}

/* A superblock as earlier builds wrote it (version 1). */
static void
old_version (struct log_sb *sb)
{
  sb->version = 1;
}

/* A log whose superblocks are of version 1 (an earlier build's, whose
 * segments are segsum or crc32c: test-log-replay torn_tail reads those)
 * replays after the loss of the SSD, and this run's start writes
 * version 2 before its first segment, so that an earlier build refuses
 * the log instead of misreading its XXH3 segments.
 */
static void
test_old_version (void **state)
{
  unsigned char saved[2 * LOG_SB_SIZE], buf[LOG_SB_AREA];
  struct log_sb sb;
  struct env e;

  env_init (&e, 64, 128, 1, LOG_REGION_OFF + 512 * KiB);
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < 8; l++)
    env_write (&e, l, 70 + l, false);
  env_flush (&e);
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  edit_sbs (e.logs[0].pd, saved, old_version);
  assert_int_equal (dev_pread (e.logs[0].pd, buf, sizeof buf, 0), 0);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &sb), 0);
  assert_int_equal (sb.version, 1);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < 8; l++)
    assert_true (backend_has (&e, l, 70 + l));
  assert_int_equal (dev_pread (e.logs[0].pd, buf, sizeof buf, 0), 0);
  assert_int_equal (log_sb_decode_mirror (buf, 0, &sb), 0);
  assert_int_equal (sb.version, LOG_VERSION);
  env_close (&e);
  env_free (&e);
  (void)state;
}

/* ---- a cut during the start-up re-log ---- */

#define RB_BLOCKS 64

/* A reopen with RB_BLOCKS dirty blocks re-logs them: several segments.
 * The log fails after `at` more writes (a crash at that point, as
 * far as the log is concerned), then the SSD is lost: the replay must
 * bring back every block the last run flushed.  Before the start-up
 * barrier named the last run's base until every dirty block was
 * logged again, a barrier on the first full segment of re-logged
 * blocks made the replay skip the last run's segments, and the blocks
 * not yet re-logged were lost.
 */
static void
test_rebase_cut (void **state)
{
  struct env e;
  unsigned char *ssd, *log, *be;

  env_init (&e, 2 * RB_BLOCKS, 256, 1, LOG_REGION_OFF + 2048 * KiB);
  e.conf.dirty_low = 90; /* no write-back before the cut */
  e.conf.dirty_high = 95;
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < RB_BLOCKS; l++)
    env_write (&e, l, 100 + l, false);
  env_flush (&e);
  env_close (&e);
  ssd = dev_save (e.ssd.cd);
  log = dev_save (e.logs[0].cd);
  be = malloc (2 * RB_BLOCKS * BS);
  assert_non_null (be);
  membackend_peek (e.mb, true, be, 2 * RB_BLOCKS * BS, 0);

  for (uint64_t at = 0; at <= 12; at++)
    {
      dev_load (e.ssd.cd, ssd);
      dev_load (e.logs[0].cd, log);
      membackend_poke (e.mb, be, 2 * RB_BLOCKS * BS, 0);
      membackend_fail_all (e.mb, MB_OP_WRITE, true);
      pdev_fail_after (e.logs[0].pd, at);
      if (env_try_open (&e) == 0)
        env_close (&e);
      pdev_heal (e.logs[0].pd);
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      /* The SSD is lost: replay. */
      env_new_ssd (&e);
      env_open (&e);
      for (uint64_t l = 0; l < RB_BLOCKS; l++)
        if (!backend_has (&e, l, 100 + l))
          fail_msg ("log failed after %llu writes of the start-up re-log, "
                    "then the SSD was lost: block %llu holds version %lld, "
                    "expected %llu",
                    (unsigned long long)at, (unsigned long long)l,
                    (long long)backend_version (&e, l),
                    (unsigned long long)(100 + l));
      env_close (&e);
      /* Back to the SSD of the last run (same size). */
      tdev_free (&e.ssd);
      tdev_new (&e.ssd, test_cache_dev_size (e.nslots, BS), NULL, "ssd");
      e.pre.cache = e.ssd.pd;
    }
  free (ssd);
  free (log);
  free (be);
  env_free (&e);
}

/* The same with a log more than half full at start-up, small segments
 * and a slow log sync: every segment the writer takes is then a
 * barrier, and several buffers of re-logged blocks wait for it when
 * log_rebase switches to this run's base.  A barrier taken after the
 * switch but before the last re-logged block's segment must still
 * name the last run's base: with this run's, a replay from it skipped
 * the last run's segments and lost the blocks re-logged after it.
 */
#define RT_BLOCKS 64
#define RT_PASSES 4

static void
test_rebase_tight (void **state)
{
  struct env e;
  unsigned char *ssd, *log, *be;
  uint64_t expect[RT_BLOCKS];
  const uint64_t besize = 2 * RT_BLOCKS * BS;

  env_init (&e, 2 * RT_BLOCKS, 256, 1, LOG_REGION_OFF + 2048 * KiB);
  e.conf.dirty_low = 90; /* no write-back before the cut */
  e.conf.dirty_high = 95;
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  /* Dead entries that hold no segment (each keeps a live one): the
   * log is more than half full when the next run re-logs the blocks.
   */
  for (uint64_t l = 0; l < RT_BLOCKS; l++)
    env_write (&e, l, expect[l] = 100 + l, false);
  env_flush (&e);
  for (unsigned pass = 0; pass < RT_PASSES; pass++)
    {
      for (uint64_t l = 0; l < RT_BLOCKS; l++)
        if (l % 4 != 0)
          env_write (&e, l, expect[l] = 200 + 100 * pass + l, false);
      env_flush (&e);
    }
  env_close (&e);
  ssd = dev_save (e.ssd.cd);
  log = dev_save (e.logs[0].cd);
  be = malloc (besize);
  assert_non_null (be);
  membackend_peek (e.mb, true, be, besize, 0);

  for (uint64_t at = 0; at <= 40; at++)
    {
      dev_load (e.ssd.cd, ssd);
      dev_load (e.logs[0].cd, log);
      membackend_poke (e.mb, be, besize, 0);
      membackend_fail_all (e.mb, MB_OP_WRITE, true);
      pdev_set_sync_delay (e.logs[0].pd, 2000);
      pdev_fail_after (e.logs[0].pd, at);
      if (env_try_open (&e) == 0)
        env_close (&e);
      pdev_heal (e.logs[0].pd);
      pdev_set_sync_delay (e.logs[0].pd, 0);
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      env_new_ssd (&e);
      env_open (&e);
      for (uint64_t l = 0; l < RT_BLOCKS; l++)
        if (!backend_has (&e, l, expect[l]))
          fail_msg ("log (more than half full) failed after %llu writes of "
                    "the start-up re-log, then the SSD was lost: block %llu "
                    "holds version %lld, expected %llu",
                    (unsigned long long)at, (unsigned long long)l,
                    (long long)backend_version (&e, l),
                    (unsigned long long)expect[l]);
      env_close (&e);
      tdev_free (&e.ssd);
      tdev_new (&e.ssd, test_cache_dev_size (e.nslots, BS), NULL, "ssd");
      e.pre.cache = e.ssd.pd;
    }
  free (ssd);
  free (log);
  free (be);
  env_free (&e);
}

/* Two mirrors are scanned at once at open (log-scan.c scan_all): each
 * mirror's first read of its segments waits until the other's has
 * come (a scan of one mirror after the other would wait 20 s and
 * fail); the volume then opens and reads what was flushed.
 */
static void
test_scan_parallel (void **state)
{
  struct env e;
  struct meet m;

  env_init (&e, 64, 64, 2, LOG_REGION_OFF + 512 * KiB);
  make_pair (&e, 7);
  meet_init (&m, 2, 20000);
  pdev_set_meet (e.logs[0].pd, &m);
  pdev_set_meet (e.logs[1].pd, &m);
  env_open (&e);
  assert_int_equal (m.arrived, 2);
  assert_false (m.timed_out);
  for (uint64_t l = 0; l < 4; l++)
    assert_true (reads_v (&e, l, 7 + l));
  env_close (&e);
  meet_destroy (&m);
  env_free (&e);
}

/* The open's scan reads the chain through a window (reads of 64 KiB
 * doubling up to 1 MiB): 100 barrier segments of one block each (a
 * write and a FLUSH apiece, 800 KiB of the region) take 4 reads of the
 * region (at most 8 allowed), where a header and its data were two
 * reads per segment (201).  The volume then reads every block back.
 */
static void
test_scan_reads (void **state)
{
  struct env e;
  struct pdev *p;

  env_init (&e, 128, 128, 1, LOG_REGION_OFF + 4096 * KiB);
  env_open (&e);
  for (uint64_t l = 0; l < 100; l++)
    {
      env_write (&e, l, 20 + l, false);
      env_flush (&e);
    }
  env_close (&e);
  p = to_pdev (e.logs[0].pd);
  __atomic_store_n (&p->region_reads, 0, __ATOMIC_RELAXED);
  env_open (&e);
  uint64_t n = __atomic_load_n (&p->region_reads, __ATOMIC_RELAXED);
  if (n > 8)
    fail_msg ("the scan of 100 segments read the region %llu times",
              (unsigned long long)n);
  for (uint64_t l = 0; l < 100; l++)
    assert_true (reads_v (&e, l, 20 + l));
  env_close (&e);
  env_free (&e);
}

/* The end of the chain of segments on a fresh log's crash device
 * (region bytes): past the last segment header found.
 */
static uint64_t
chain_end (struct hhc_dev *cd, uint64_t region)
{
  unsigned char h[LOG_ALIGN];
  struct log_seg_hdr sh;
  uint64_t end = 0;

  for (uint64_t off = 0; off + LOG_ALIGN <= region; off += LOG_ALIGN)
    {
      assert_int_equal (dev_pread (cd, h, LOG_ALIGN, LOG_REGION_OFF + off), 0);
      if (log_seg_decode (h, &sh) == 0)
        end = HHC_MAX (end,
                       off + sh.hdr_len + log_seg_data_len (sh.nblocks, BS));
    }
  return end;
}

/* Unreadable sectors right past the chain's tail (a write that a power
 * cut tore on an HDD) do not end the chain early: the scan's read
 * ahead into them is tried again for only what it needs.  Nothing is
 * written back (watermarks at 100%); the SSD is lost and the replay
 * brings every flushed block back.
 */
static void
test_scan_bad_tail (void **state)
{
  struct env e;
  struct pdev *p;
  uint64_t end;

  env_init (&e, 64, 64, 1, LOG_REGION_OFF + 4096 * KiB);
  e.conf.dirty_low = e.conf.dirty_high = e.conf.dirty_max = 100;
  e.conf.idle_ms = 0;
  env_open (&e);
  for (uint64_t l = 0; l < 20; l++)
    {
      env_write (&e, l, 40 + l, false);
      env_flush (&e);
    }
  env_close (&e);
  end = chain_end (e.logs[0].cd, 4096 * KiB);
  assert_true (end > 64 * KiB); /* past the first read ahead */
  p = to_pdev (e.logs[0].pd);
  p->bad_off = LOG_REGION_OFF + end;
  p->bad_len = 64 * KiB;
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < 20; l++)
    if (!reads_v (&e, l, 40 + l))
      fail_msg ("block %llu lost: the scan stopped before the tail's bad "
                "sectors at region offset %llu",
                (unsigned long long)l, (unsigned long long)end);
  env_close (&e);
  p->bad_len = 0;
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_refusals),     cmocka_unit_test (test_lost_log),
    cmocka_unit_test (test_old_version),  cmocka_unit_test (test_rebase_cut),
    cmocka_unit_test (test_rebase_tight), cmocka_unit_test (test_scan_parallel),
    cmocka_unit_test (test_scan_reads),   cmocka_unit_test (test_scan_bad_tail),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
