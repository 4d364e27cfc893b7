/* The log's mirrors (docs/design.md §5 and §7; docs/log.md "When a
 * log mirror fails"): a mirror that fails, the fallback when none is
 * left, voiding a mirror's stale log, and retiring a log when the
 * cache is used without it.
 *
 * Tests:
 *   mirror_fails      one mirror fails: I/O and FLUSH go on, replay
 *                     from the survivor (alone, next to the stale
 *                     mirror, or next to a blank one that joins).
 *   mirrors_fail      every mirror fails: FLUSH falls back to writing
 *                     back every dirty block.
 *   wal_mirror_lost   ssd-sync=checkpoint: the only mirror fails, a
 *                     FLUSH falls back, then the power fails: the
 *                     restart redoes nothing over the newer block.
 *   mirror_heals      the only mirror fails, a FLUSH falls back, the
 *                     mirror heals: it is voided (by a FLUSH, or in
 *                     the background) before an SSD loss could replay
 *                     it.
 *   last_mirror_kept  the last mirror fails and heals, no FLUSH falls
 *                     back: it is not voided (it holds the only copy).
 *   retire            a cache used in hhc, then in wbflush: the log
 *                     is voided once the dirty blocks are written back.
 *   retire_checks     what a retire refuses, and format=force.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache-format.h"
#include "crc32c.h"
#include "log-helpers.h"

#define MB_BLOCKS 64

/* One mirror fails (fidx), then the SSD is lost; replay from: 0 the
 * survivor alone, 1 the survivor next to the failed mirror (healed,
 * stale), 2 the survivor next to a blank device, which then carries
 * the log alone after the survivor is lost too.
 */
static void
mirror_fails (unsigned fidx, uint64_t fail_after)
{
  struct env e;
  uint64_t expect[MB_BLOCKS] = { 0 };
  unsigned char *limg[2], *be;
  unsigned surv = !fidx;

  env_init (&e, MB_BLOCKS, 128, 2, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  for (uint64_t l = 0; l < 8; l++)
    {
      env_write (&e, l, 10 + l, false);
      expect[l] = 10 + l;
    }
  env_flush (&e);
  assert_int_equal (counts (&e).log_mirrors_failed, 0);
  pdev_fail_after (e.logs[fidx].pd, fail_after);
  for (int k = 2; k <= 4; k++)
    {
      for (uint64_t l = 4; l < 16; l++)
        {
          env_write (&e, l, k * 100 + l, false);
          expect[l] = k * 100 + l;
        }
      env_flush (&e);
      assert_true (reads_v (&e, 5, k * 100 + 5));
    }
  env_write (&e, 20, 2020, true); /* FUA */
  expect[20] = 2020;
  struct hhc_counts c = counts (&e);
  assert_int_equal (c.log_mirrors, 2);
  assert_int_equal (c.log_mirrors_failed, 1);
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  pdev_heal (e.logs[fidx].pd);
  for (int i = 0; i < 2; i++)
    limg[i] = dev_save (e.logs[i].cd);
  be = malloc (MB_BLOCKS * BS);
  assert_non_null (be);
  membackend_peek (e.mb, true, be, MB_BLOCKS * BS, 0);

  for (int variant = 0; variant < 3; variant++)
    {
      for (int i = 0; i < 2; i++)
        dev_load (e.logs[i].cd, limg[i]);
      membackend_poke (e.mb, be, MB_BLOCKS * BS, 0);
      env_new_ssd (&e);
      if (variant == 0)
        {
          e.conf.nlogs = 1;
          e.pre.logs[0] = e.logs[surv].pd;
        }
      else
        {
          e.conf.nlogs = 2;
          e.pre.logs[0] = e.logs[0].pd;
          e.pre.logs[1] = e.logs[1].pd;
          if (variant == 2)
            {
              tdev_free (&e.logs[fidx]);
              tdev_new (&e.logs[fidx], LOG_REGION_OFF + 1024 * KiB, NULL,
                        log_names[fidx]);
              e.pre.logs[fidx] = e.logs[fidx].pd;
            }
        }
      env_open (&e);
      for (uint64_t l = 0; l < MB_BLOCKS; l++)
        if (!backend_has (&e, l, expect[l]))
          fail_msg ("mirror %u failed, replay variant %d: block %llu holds "
                    "version %lld, expected %llu",
                    fidx, variant, (unsigned long long)l,
                    (long long)backend_version (&e, l),
                    (unsigned long long)expect[l]);
      if (variant == 2)
        {
          /* The blank mirror joined: after a barrier of this run it
           * alone holds what a replay needs.
           */
          membackend_fail_all (e.mb, MB_OP_WRITE, true);
          for (uint64_t l = 30; l < 36; l++)
            {
              env_write (&e, l, 3000 + l, false);
              expect[l] = 3000 + l;
            }
          env_flush (&e);
          env_close (&e);
          membackend_fail_all (e.mb, MB_OP_WRITE, false);
          env_new_ssd (&e);
          e.conf.nlogs = 1;
          e.pre.logs[0] = e.logs[fidx].pd;
          env_open (&e);
          for (uint64_t l = 0; l < MB_BLOCKS; l++)
            if (!backend_has (&e, l, expect[l]))
              fail_msg ("mirror %u failed, replay from the mirror that "
                        "joined: block %llu holds version %lld, expected "
                        "%llu",
                        fidx, (unsigned long long)l,
                        (long long)backend_version (&e, l),
                        (unsigned long long)expect[l]);
        }
      env_close (&e);
    }
  e.conf.nlogs = 2;
  free (be);
  free (limg[0]);
  free (limg[1]);
  env_free (&e);
}

static void
test_mirror_fails (void **state)
{
  for (unsigned fidx = 0; fidx < 2; fidx++)
    for (uint64_t after = 0; after < 3; after++)
      mirror_fails (fidx, after);
}

static void
test_mirrors_fail (void **state)
{
  struct env e;

  env_init (&e, MB_BLOCKS, 128, 2, LOG_REGION_OFF + 1024 * KiB);
  env_open (&e);
  for (uint64_t l = 0; l < 8; l++)
    env_write (&e, l, 10 + l, false);
  env_flush (&e);
  pdev_fail_after (e.logs[0].pd, 0);
  pdev_fail_after (e.logs[1].pd, 1);
  for (uint64_t l = 4; l < 24; l++)
    env_write (&e, l, 100 + l, false);
  /* No mirror left: FLUSH writes back every dirty block instead. */
  env_flush (&e);
  struct hhc_counts c = counts (&e);
  assert_int_equal (c.log_mirrors_failed, 2);
  assert_int_equal (c.dirty, 0);
  for (uint64_t l = 0; l < 24; l++)
    assert_true (backend_has (&e, l, l < 4 ? 10 + l : 100 + l));
  /* And a FUA write is durable in the backend when it returns. */
  env_write (&e, 30, 3030, true);
  assert_true (backend_has (&e, 30, 3030));
  env_write (&e, 31, 3131, false);
  env_write (&e, 5, 555, false);
  env_flush (&e);
  assert_true (backend_has (&e, 31, 3131));
  assert_true (backend_has (&e, 5, 555));
  assert_true (reads_v (&e, 5, 555));
  env_close (&e);
  env_free (&e);
}

/* A run in hhc that leaves block 3 (version 41) dirty in the cache and
 * in the log.
 */
static void
dirty_in_log (struct env *e)
{
  env_open (e);
  env_write (e, 3, 41, false);
  env_flush (e);
  env_close (e);
}

/* ssd-sync=checkpoint: the only mirror fails, a FLUSH falls back (the
 * block goes to the backend), and then the power fails.  The log comes
 * back readable with the block's older version under its last barrier:
 * the restart must not redo that over the newer flushed one.
 */
static void
test_wal_mirror_lost (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 1);
  e.conf.wal = true;
  env_open (&e);
  env_write (&e, 3, 41, false);
  env_write (&e, 4, 51, false);
  env_flush (&e); /* the log's barrier only */
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 42, false);
  env_flush (&e); /* no mirror: commit, write back everything */
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  assert_true (backend_has (&e, 3, 42));
  power_arm (&pw, 0, false, 7, false);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  pdev_heal (e.logs[0].pd);
  env_open (&e);
  assert_int_equal (counts (&e).log_redone, 0);
  assert_true (reads_v (&e, 3, 42));
  assert_true (reads_v (&e, 4, 51));
  env_close (&e);
  pw_env_free (&e, &pw);
}

/* Issue 27, case 1: the only mirror fails, a FLUSH falls back (B goes
 * to the backend), and the mirror heals.  Then the power fails and the
 * SSD is lost: the restart must not replay the mirror's stale log (A)
 * over B.  The mirror is voided by a FLUSH after it healed
 * (flush_after), or else by the writer in the background.
 */
static void
heal_variant (bool flush_after)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 1);
  env_open (&e);
  env_write (&e, 3, 41, false);
  env_flush (&e); /* 41 under a barrier in the log */
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 42, false);
  env_flush (&e); /* no mirror: written back */
  assert_true (backend_has (&e, 3, 42));
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  assert_int_equal (counts (&e).log_mirrors_unvoided, 1);
  pdev_heal (e.logs[0].pd);
  if (flush_after)
    {
      env_write (&e, 5, 51, false);
      env_flush (&e);
    }
  else
    for (int i = 0; i < 1000 && counts (&e).log_mirrors_unvoided; i++)
      {
        struct timespec ts = { 0, 10000000 };
        nanosleep (&ts, NULL);
      }
  assert_int_equal (counts (&e).log_mirrors_unvoided, 0);
  power_arm (&pw, 0, false, 7, false);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  env_new_ssd (&e);
  env_open (&e);
  if (!backend_has (&e, 3, 42))
    fail_msg ("%s: block 3 holds version %lld after the SSD loss, not 42",
              flush_after ? "FLUSH after the heal" : "background void",
              (long long)backend_version (&e, 3));
  assert_true (reads_v (&e, 3, 42));
  if (flush_after)
    assert_true (backend_has (&e, 5, 51));
  env_close (&e);
  pw_env_free (&e, &pw);
}

/* The last mirror fails on a segment write (one transient error) and
 * heals; no FLUSH falls back.  Its log still holds the only copy of a
 * flushed block that survives the loss of the SSD: it must not be
 * voided before a FLUSH has written the block back (found by review:
 * the first version voided it at once, and the replay lost 41).
 */
static void
test_last_mirror_kept (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 1);
  env_open (&e);
  env_write (&e, 3, 41, false);
  env_flush (&e); /* 41 durable in the log only */
  pdev_fail_after (e.logs[0].pd, 0);
  for (uint64_t l = 10; l < 40; l++)
    env_write (&e, l, 1, false); /* fills a segment: its write fails */
  for (int i = 0; i < 1000 && counts (&e).log_mirrors_failed == 0; i++)
    {
      struct timespec ts = { 0, 10000000 };
      nanosleep (&ts, NULL);
    }
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  pdev_heal (e.logs[0].pd);
  /* Owed no void yet: the writer must leave it alone. */
  assert_int_equal (counts (&e).log_mirrors_unvoided, 0);
  power_arm (&pw, 0, false, 7, false);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  env_new_ssd (&e);
  env_open (&e);
  if (!backend_has (&e, 3, 41))
    fail_msg ("block 3 (flushed as 41) holds version %lld after the loss "
              "of the SSD",
              (long long)backend_version (&e, 3));
  env_close (&e);
  pw_env_free (&e, &pw);
}

static void
test_mirror_heals (void **state)
{
  heal_variant (true);
  heal_variant (false);
}

/* Issue 27, case 2: a cache used in hhc (block 3 dirty, in the log),
 * then in wbflush.  Without its log the start is refused; with it the
 * dirty block is written back and the log voided, and later starts
 * need no log.  The SSD is then lost: a restart in hhc with the old
 * log must not replay 41 over the 42 that wbflush wrote back.
 */
static void
test_retire (void **state)
{
  struct env e;

  quiet_env_init (&e, 1);
  dirty_in_log (&e); /* 3 dirty, in the log */
  assert_false (backend_has (&e, 3, 41));
  e.conf.mode = HHC_MODE_WBFLUSH;
  e.conf.nlogs = 0;
  assert_int_equal (env_try_open (&e), EINVAL);
  e.conf.nlogs = 1;
  env_open (&e);
  assert_true (backend_has (&e, 3, 41)); /* drained before the void */
  env_write (&e, 3, 42, false);
  env_flush (&e);
  env_close (&e);
  e.conf.nlogs = 0;
  env_open (&e); /* retired: no log needed */
  env_close (&e);
  env_new_ssd (&e);
  e.conf.mode = HHC_MODE_HHC;
  e.conf.nlogs = 1;
  env_open (&e);
  assert_true (backend_has (&e, 3, 42));
  assert_true (reads_v (&e, 3, 42));
  env_close (&e);
  env_free (&e);
}

/* What a retire refuses, and format=force (review of the first
 * version): (a) one of two mirrors: the other would still be replayed;
 * (b) a log this cache was paired with before a newer one replaced it;
 * (c) format=force in wb over a cache used in hhc, without its log;
 * with it, the log is voided, and a restart in hhc on a new cache
 * after the loss of the SSD replays nothing over what wb wrote back.
 */
static void
test_retire_checks (void **state)
{
  struct env e;

  quiet_env_init (&e, 2);
  dirty_in_log (&e);
  /* (a) */
  e.conf.mode = HHC_MODE_WB;
  e.conf.nlogs = 1;
  assert_int_equal (env_try_open (&e), EINVAL);
  /* (b): a new log (logs[2], blank) replaces both; logs[0] is stale */
  e.conf.mode = HHC_MODE_HHC;
  tdev_new (&e.logs[2], LOG_REGION_OFF + 1024 * KiB, NULL, log_names[2]);
  e.pre.logs[0] = e.logs[2].pd;
  e.conf.nlogs = 1;
  env_open (&e);
  env_close (&e);
  e.conf.mode = HHC_MODE_WB;
  e.pre.logs[0] = e.logs[0].pd;
  e.pre.logs[1] = e.logs[1].pd;
  e.conf.nlogs = 2;
  assert_int_equal (env_try_open (&e), EINVAL);
  /* (c) */
  e.conf.format = HHC_FORMAT_FORCE;
  e.conf.nlogs = 0;
  assert_int_equal (env_try_open (&e), EINVAL);
  e.conf.nlogs = 1;
  e.pre.logs[0] = e.logs[2].pd;
  env_open (&e);
  env_write (&e, 3, 42, false);
  env_flush (&e);
  env_close (&e);
  e.conf.format = HHC_FORMAT_AUTO;
  e.conf.nlogs = 0;
  env_open (&e); /* no log needed any more */
  assert_int_equal (hhc_drain (e.vol, &e.be), 0);
  env_close (&e);
  assert_true (backend_has (&e, 3, 42));
  env_new_ssd (&e);
  e.conf.mode = HHC_MODE_HHC;
  e.conf.nlogs = 1;
  env_open (&e);
  assert_true (backend_has (&e, 3, 42));
  env_close (&e);
  env_free (&e);
}

/* A cache used in hhc whose newer state copy claims a sequence past
 * 2^61 (corrupt: the gateway refuses it) still names its log: start
 * refuses it, and format=force in wb without the log is refused as
 * for any cache paired with a log; with the log, the format goes on.
 * (The first version refused the sequence inside cache_read_state,
 * whose failure logpair_retire_before_format takes as "pairs nothing":
 * format=force then formatted the cache and left its log live, to be
 * replayed over wb's data after the loss of the new cache; review.)
 */
static void
test_retire_late_state (void **state)
{
  struct env e;
  unsigned char pg[CACHE_PAGE];
  uint64_t seq[2];

  quiet_env_init (&e, 1);
  dirty_in_log (&e);
  for (int i = 0; i < 2; i++)
    {
      T_ASSERT (dev_pread (e.ssd.cd, pg, CACHE_PAGE,
                           CACHE_STATE_OFF + (uint64_t)i * CACHE_PAGE)
                == 0);
      seq[i] = get64 (pg + 8);
    }
  int newer = seq[1] > seq[0];
  T_ASSERT (dev_pread (e.ssd.cd, pg, CACHE_PAGE,
                       CACHE_STATE_OFF + (uint64_t)newer * CACHE_PAGE)
            == 0);
  put64 (pg + 8, CACHE_MAX_SEQ - 1);
  put32 (pg + 24, 0);
  put32 (pg + 24, crc32c (0, pg, CACHE_PAGE));
  T_ASSERT (dev_pwrite (e.ssd.cd, pg, CACHE_PAGE,
                        CACHE_STATE_OFF + (uint64_t)newer * CACHE_PAGE)
            == 0);
  T_ASSERT (dev_sync (e.ssd.cd) == 0);

  assert_int_equal (env_try_open (&e), EINVAL); /* hhc, with its log */
  e.conf.mode = HHC_MODE_WB;
  e.conf.format = HHC_FORMAT_FORCE;
  e.conf.nlogs = 0;
  assert_int_equal (env_try_open (&e), EINVAL); /* its log not given */
  e.conf.nlogs = 1;
  env_open (&e); /* formatted, the log voided */
  env_write (&e, 3, 42, false);
  env_flush (&e);
  env_close (&e);
  env_new_ssd (&e);
  e.conf.mode = HHC_MODE_HHC;
  e.conf.format = HHC_FORMAT_AUTO;
  env_open (&e); /* nothing of the voided log is replayed */
  assert_false (backend_has (&e, 3, 41));
  env_close (&e);
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_mirror_fails),
    cmocka_unit_test (test_mirrors_fail),
    cmocka_unit_test (test_wal_mirror_lost),
    cmocka_unit_test (test_mirror_heals),
    cmocka_unit_test (test_last_mirror_kept),
    cmocka_unit_test (test_retire),
    cmocka_unit_test (test_retire_checks),
    cmocka_unit_test (test_retire_late_state),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
