/* Retiring the log (docs/design.md §5.10): a start in a mode other
 * than hhc on a cache used in hhc writes every dirty block back and
 * voids the log's mirrors, each of the newest run's given; it reserves
 * an epoch of its own first, which the voids carry, so that an older
 * copy of the cache shows older than them.
 *
 * Tests:
 *   retire_cut    mirrors a and b, then mode wb with a, b and a blank c
 *                 retires the log, and its SSD fails at the state page
 *                 that says so (the voids written): the same retirement
 *                 with a and b must go on (the voids recorded 3 mirrors,
 *                 the blank one too: refused for ever; fourth review).
 *   retired_copy  mirrors a and b: v1, FLUSH, stop; the cache's image
 *                 saved; mode wb with a and b retires the log: v2,
 *                 FLUSH, stop.  The image put back must be refused in
 *                 wb and in hhc, changing nothing (its log voided, it
 *                 started with a new one and served v1: the voids
 *                 carried the retired run's epoch, which the image knew;
 *                 now the retirement reserves its own first).
 *   retired_left_out mirrors a and b: v1, FLUSH, stop; a alone: v2,
 *                 FLUSH, stop; mode wb with a retires the log (v2 written
 *                 back).  b alone (left out of the last run and the
 *                 retirement, its chain older) must start and read v2
 *                 (refused as an interrupted recovery: found by the
 *                 mirror-sets campaign, which no longer draws it).
 *   retired_void_copy mirrors a and b, both fail in a run and are
 *                 voided: v1, FLUSH (written back), stop; the image
 *                 saved.  Mode wb with a and b (void already): v2,
 *                 FLUSH, stop.  The image put back must be refused (no
 *                 mirror was left to void, and the voids carried the
 *                 epoch the image knew: it served v1; found by the
 *                 mirror-sets campaign, seed 7747; now a retirement
 *                 writes its epoch into the voids it finds too).
 *   retired_format_cut mirrors a and b: v1, FLUSH, stop; the image
 *                 saved.  Mode wb with a and b retires the log: v2,
 *                 FLUSH, stop.  Mode hhc with a and b formats a new log
 *                 and fails (b does).  The image put back with a alone
 *                 must be refused (the new log named the cache at epoch
 *                 0, over the void that showed the retirement: v1
 *                 served; seed 5617; now a loaded cache's new log
 *                 starts at the epoch the cache knows).
 *   retire_old_void mirrors a and b: a fails and is voided; then b and a
 *                 blank c run.  Mode wb with a and b must be refused (c
 *                 is left out: a's void is of the earlier run; fifth
 *                 review), with a, b and c it retires.
 *   retire_member mirrors a and b, then a and c (b left out).  Mode wb
 *                 with a, b and c, cut after a and b are voided (c's
 *                 void fails); then a and b alone must be refused (b,
 *                 not of the last run, was voided as one of it and
 *                 stood in for c; sixth review); a, b and c retire.
 *   retire_later_void mirrors a and b, then b and c (a left out), where
 *                 c fails and is voided.  Mode wb with a and c must be
 *                 refused: b, valid and of the newest run, is left out
 *                 (counted by the valid mirrors' epoch, a's older one
 *                 and c's void of the newest passed; seventh review).
 *   retire_order  mirrors a, b, c: v1, FLUSH, stop; a alone: v2, FLUSH,
 *                 stop.  Mode wb with all three: the drain writes v2 back,
 *                 and a's void fails after its mark (a reads void).  The
 *                 SSD is lost; all three must start and read v2 (a was
 *                 voided first, b and c left valid with v1's chain, which
 *                 the replay wrote over v2: found by the mirror-sets
 *                 campaign; now the oldest are voided first, and a replay
 *                 of a chain older than a void of its log is refused).
 *   retire_tie    cache c1 with mirrors a and b: v1, FLUSH, stop; mode
 *                 wb retires the log and is cut after a's void (b's
 *                 fails).  The SSD is set aside: a new cache c2 replays
 *                 b alone and runs: v2, FLUSH, stop.  c1 put back, given
 *                 a and b, must be refused in wb and in hhc (c2's run
 *                 took the same epoch as c1's retirement, which c1
 *                 knew: taken, v1 written back over v2; second review;
 *                 now another cache's run above c1's last record
 *                 refuses).
 *   retire_void   mirrors a and b: a fails, v1, FLUSH; a heals and is
 *                 voided at the close.  Mode wb with a alone (void) must
 *                 be refused: b is still a valid log of the cache (third
 *                 review: retired, b left to be replayed after a loss of
 *                 the SSD).
 */
#include <config.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "epoch-helpers.h"
#include "log-helpers.h"
#include "log_int.h"
#include "vol.h"

/* v1, FLUSH, stop; the SSD's image taken (returned); mode wb with the
 * mirrors given retires the log: v2, FLUSH, stop.
 */
static unsigned char *
image_then_retire (struct env *e)
{
  unsigned char *old;

  run_v (e, 1);
  old = dev_save (e->ssd.cd);
  e->conf.mode = HHC_MODE_WB;
  run_v (e, 2);
  return old;
}

static void
test_retire_cut (void **state)
{
  struct log_sb sb;
  struct log_sb_read rd;
  struct env e;

  quiet_env_init (&e, 3);
  give (&e, 3);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  e.conf.mode = HHC_MODE_WB;
  start_dies_at_last_write (&e, 7);
  /* The premise: the voids were written, the state page not. */
  for (unsigned i = 0; i < 2; i++)
    assert_int_equal (log_dev_sb (e.logs[i].cd, &sb, &rd), ESTALE);
  give (&e, 3);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_close (&e);
  env_free (&e);
}

static void
test_retired_copy (void **state)
{
  unsigned char *old, *now;
  struct env e;

  quiet_env_init (&e, 2);
  old = image_then_retire (&e);
  now = dev_save (e.ssd.cd);
  dev_load (e.ssd.cd, old);
  refused (&e, 3, "a copy of the cache older than the retirement, in wb,");
  e.conf.mode = HHC_MODE_HHC;
  refused (&e, 3, "a copy of the cache older than the retirement, in hhc,");
  refused (&e, 1, "a copy of the cache older than the retirement, with a,");
  unsigned char *cur = dev_save (e.ssd.cd);
  assert_memory_equal (cur, old, e.ssd.cd->size);
  free (cur);
  dev_load (e.ssd.cd, now);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  free (old);
  free (now);
  env_free (&e);
}

static void
test_retired_left_out (void **state)
{
  struct env e;

  quiet_env_init (&e, 2);
  run_v (&e, 1);
  give (&e, 1);
  run_v (&e, 2);
  e.conf.mode = HHC_MODE_WB;
  env_open (&e);
  env_close (&e);
  assert_true (backend_has (&e, 3, 2));
  e.conf.mode = HHC_MODE_HHC;
  give (&e, 2);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  env_free (&e);
}

static void
test_retired_void_copy (void **state)
{
  struct log_sb sb;
  struct log_sb_read rd;
  unsigned char *old;
  struct env e;

  quiet_env_init (&e, 2);
  env_open (&e);
  for (unsigned i = 0; i < 2; i++)
    pdev_fail_once (e.logs[i].pd, 0);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  for (unsigned i = 0; i < 2; i++)
    assert_int_equal (log_dev_sb (e.logs[i].cd, &sb, &rd), ESTALE);
  old = dev_save (e.ssd.cd);
  e.conf.mode = HHC_MODE_WB;
  env_open (&e);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  dev_load (e.ssd.cd, old);
  free (old);
  refused (&e, 3, "a copy of the cache older than a retirement of voids,");
  env_free (&e);
}

static void
test_retired_format_cut (void **state)
{
  struct log_sb sb;
  struct log_sb_read rd;
  unsigned char *old;
  struct env e;

  quiet_env_init (&e, 2);
  old = image_then_retire (&e);
  e.conf.mode = HHC_MODE_HHC;
  pdev_fail_once (e.logs[1].pd, 0);
  assert_int_not_equal (env_try_open (&e), 0);
  pdev_heal (e.logs[1].pd);
  /* The premise: a holds the new log, b its retirement's void. */
  assert_int_equal (log_dev_sb (e.logs[0].cd, &sb, &rd), 0);
  assert_int_equal (log_dev_sb (e.logs[1].cd, &sb, &rd), ESTALE);
  dev_load (e.ssd.cd, old);
  free (old);
  refused (&e, 1,
           "a copy of the cache older than a retirement, given the "
           "log a cut start formatted since,");
  env_free (&e);
}

static void
test_retire_old_void (void **state)
{
  struct env e;

  quiet_env_init (&e, 3);
  give (&e, 3);
  env_open (&e);
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  pdev_heal (e.logs[0].pd);
  env_close (&e);
  give (&e, 6);
  env_open (&e);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  e.conf.mode = HHC_MODE_WB;
  refused (&e, 3, "a retirement with a void of an earlier run, c left out,");
  give (&e, 7);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  env_free (&e);
}

static void
test_retire_member (void **state)
{
  struct env e;

  quiet_env_init (&e, 3);
  give (&e, 3);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  give (&e, 5);
  env_open (&e);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  e.conf.mode = HHC_MODE_WB;
  give (&e, 7);
  pdev_fail_once (e.logs[2].pd, 0); /* c's void mark */
  assert_int_not_equal (env_try_open (&e), 0);
  refused (&e, 3, "a retirement of a and b, c left out,");
  give (&e, 7);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  env_free (&e);
}

static void
test_retire_later_void (void **state)
{
  struct env e;

  quiet_env_init (&e, 3);
  give (&e, 3);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  give (&e, 6);
  env_open (&e);
  pdev_fail_after (e.logs[2].pd, 0);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  pdev_heal (e.logs[2].pd);
  env_close (&e);
  e.conf.mode = HHC_MODE_WB;
  refused (&e, 5, "a retirement of a and the void c, b left out,");
  give (&e, 7);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  env_free (&e);
}

static void
test_retire_void (void **state)
{
  struct env e;

  quiet_env_init (&e, 2);
  env_open (&e);
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  pdev_heal (e.logs[0].pd);
  env_close (&e);
  struct log_sb sb;
  struct log_sb_read rd;
  assert_int_equal (log_dev_sb (e.logs[0].cd, &sb, &rd), ESTALE);

  give (&e, 1);
  e.conf.mode = HHC_MODE_WB;
  assert_int_not_equal (env_try_open (&e), 0);
  give (&e, 3);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_close (&e);
  env_free (&e);
}

static void
test_retire_order (void **state)
{
  struct env e;

  quiet_env_init (&e, 3);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  give (&e, 1);
  env_open (&e);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  e.conf.mode = HHC_MODE_WB;
  give (&e, 7);
  pdev_fail_after (e.logs[0].pd, 1); /* a's void mark, then nothing */
  assert_int_not_equal (env_try_open (&e), 0);
  pdev_heal (e.logs[0].pd);
  assert_true (backend_has (&e, 3, 2)); /* the drain */
  env_new_ssd (&e);
  e.conf.mode = HHC_MODE_HHC;
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  env_free (&e);
}

static void
test_retire_tie (void **state)
{
  struct log_sb sb;
  struct log_sb_read rd;
  unsigned char *a;
  struct env e;

  quiet_env_init (&e, 2);
  run_v (&e, 1);
  e.conf.mode = HHC_MODE_WB;
  pdev_fail_once (e.logs[1].pd, 0);
  assert_int_not_equal (env_try_open (&e), 0);
  /* The premise: a voided (with the retirement's epoch), b not. */
  assert_int_equal (log_dev_sb (e.logs[0].cd, &sb, &rd), ESTALE);
  assert_int_equal (log_dev_sb (e.logs[1].cd, &sb, &rd), 0);
  a = dev_save (e.ssd.cd);
  env_new_ssd (&e);
  e.conf.mode = HHC_MODE_HHC;
  give (&e, 2);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  dev_load (e.ssd.cd, a);
  free (a);
  e.conf.mode = HHC_MODE_WB;
  refused (&e, 3, "the first cache, in wb, given the log another took,");
  e.conf.mode = HHC_MODE_HHC;
  refused (&e, 3, "the first cache, in hhc, given the log another took,");
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_retire_cut),
    cmocka_unit_test (test_retired_copy),
    cmocka_unit_test (test_retired_left_out),
    cmocka_unit_test (test_retired_void_copy),
    cmocka_unit_test (test_retired_format_cut),
    cmocka_unit_test (test_retire_old_void),
    cmocka_unit_test (test_retire_member),
    cmocka_unit_test (test_retire_later_void),
    cmocka_unit_test (test_retire_void),
    cmocka_unit_test (test_retire_order),
    cmocka_unit_test (test_retire_tie),
  };

  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
