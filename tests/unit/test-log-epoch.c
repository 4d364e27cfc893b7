/* A log mirror left out of a run (docs/design.md §5.10): each start
 * reserves a superblock epoch in the cache's state page before any
 * mirror can take it, marks the mirrors given with it, and records
 * it; a start given only mirrors of an older run is refused when a
 * redo is owed.
 *
 * Tests:
 *   partial_mark  ssd-sync=checkpoint, mirrors a and b.  A start with a
 *                 alone dies after a took its mark, before the state
 *                 page recorded it (the SSD's last write fails).  Then
 *                 b alone: block 3 = v2, FLUSH, power cut.  Then a
 *                 alone must be refused (its mark's epoch is below
 *                 b's), and a and b together read v2.  Without the
 *                 reservation b's mark took a's epoch, a alone was
 *                 taken and its log redone: v1.
 *   older_run_tail  b alone writes 40 segments (drained), then a alone
 *                 a few: at the start with both, b (of the older run)
 *                 holds its own history past the log's tail; once the
 *                 start is done its block at the tail is zeros, so that
 *                 no stale segment there can pass for this run's next
 *                 (the head segment's link is not checked).  Without
 *                 cut_older_history it holds b's old segment.
 *   failed_joined ssd-sync=checkpoint, mirrors a and b: block 3 = v1,
 *                 FLUSH; a fails for good; v2, FLUSH (b's superblock
 *                 and the cache record a newer generation); power cut.
 *                 a heals (its void never landed).  A start's log with
 *                 a, b and a blank c, up to log_start (which writes
 *                 superblocks for the blank one): a's superblock must
 *                 not move before the re-log has made it complete (a
 *                 cut there left a newer generation on it than the
 *                 record: a alone then passed for the log and read v1;
 *                 found by review).  Then a alone is refused, and so
 *                 are a and c (c took superblocks in that start over an
 *                 empty chain: the generation that counts is the one of
 *                 the mirror whose chain is read; second review), and
 *                 all three read v2.
 *   failed_tied   mirrors a and b, ssd-sync=checkpoint: v1, FLUSH,
 *                 power cut; then b's superblocks and the cache's
 *                 record one generation newer, as record_failures
 *                 leaves them when a fails on an I/O that is not a
 *                 segment (its chain ties with b's).  a and b given
 *                 (a first: on a tie it is the chain read) must start
 *                 and read v1: b's chain is the same, and its newer
 *                 generation vouches for it (third review: refused).
 *   damaged_vouch mirrors a and b, ssd-sync=checkpoint: v1, FLUSH; a
 *                 fails; v2, FLUSH; power cut; b's region is lost
 *                 (zeros).  a and b given must be refused: b's newer
 *                 generation does not vouch for a's chain, which it
 *                 does not hold (an empty or shorter chain vouched, and
 *                 a's stale chain was redone: fourth review).
 *   force_stale   mirrors a and b: v1, FLUSH, clean stop; b alone: v2,
 *                 drained (v2 on the backend), clean stop.  format=force
 *                 with a alone (stale) is refused; with log-lost=accept
 *                 it formats without the replay, and a start cut at
 *                 log_start (a fails) leaves a cache that the next start
 *                 with a does not take for a recovery to replay again
 *                 (third review: it replayed v1 over the backend).
 *   taken_back    cache c1 with log L: v1, FLUSH, clean stop; two starts
 *                 of c1 cut before their mark (each reserves an epoch:
 *                 the fifth review's case).  The SSD
 *                 is replaced: a new cache c2 replays L and runs with
 *                 it: v2, FLUSH, clean stop.  c1 given again with L must
 *                 be refused (it took L back as "a recovery into this
 *                 cache was interrupted": L replayed, v1 served; fourth
 *                 review).
 *   taken_blank   cache c1 with log L: v1, FLUSH, clean stop; c1 with a
 *                 blank L2 instead, cut after L2 is formatted (its first
 *                 write after the format fails).  A new cache c2 takes
 *                 L2 and runs: v2, FLUSH.  c1 given L2 again must be
 *                 refused (it recorded no generation of L2: taken as
 *                 paired, v1 served; sixth review).
 *   replay_cut    mirrors a and b: v1, FLUSH, clean stop (v1 in the
 *                 log and the lost SSD only).  A new SSD's replay fails
 *                 (the backend's writes do): then a blank c alone must
 *                 be refused and left blank (the replay was abandoned,
 *                 "the log is gone", and v1 lost: found by the
 *                 mirror-sets campaign), and so must mode wb with a and
 *                 b (a retirement voided the log unreplayed); a and b
 *                 then replay it and read v1.
 *   formatted_for ssd-sync=checkpoint.  A new cache's first start with
 *                 a blank a is cut after a is formatted (a names no
 *                 cache: the cache is formatted for it).  b alone (blank:
 *                 a new log): v1, FLUSH, power cut: a redo of b is owed.
 *                 a alone must be refused (it passed for an interrupted
 *                 recovery into the cache it was formatted for, "replayed
 *                 again", and the redo was skipped: v0 served; found by
 *                 the mirror-sets campaign); b reads v1.
 *   replay_upgrade replay_cut's cut replay, its state page as an earlier
 *                 build left it after a second start cut too (the link
 *                 paired, an epoch reserved): the replay must be done
 *                 again, v1 read (review: taken as paired, not replayed).
 *   voided_later  mirrors a and b: v1, FLUSH, stop; a alone: a fails
 *                 once, v2's FLUSH falls back (v2 written back) and a is
 *                 voided.  The SSD is lost: a and b must not replay b's
 *                 older chain over v2 (refused, or v2 read).
 *   left_out      cache c1 with mirrors a, b and c: v1, FLUSH, stop; then
 *                 b alone twice (b's epoch above a's and c's).  The SSD
 *                 is lost: a new cache c2 replays a and c, runs: v2,
 *                 FLUSH, stop.  Given a, b and c, c2 must be refused,
 *                 changing no device, by a message that names b as
 *                 another cache's later run (it said "an older copy,
 *                 format=force", which would replay b's chain: found by
 *                 the mirror-sets campaign, seed 27308).  Its advice
 *                 must work: a and c read v2; a blank b in its place
 *                 joins, and after a loss of c2's SSD the three replay
 *                 v3.
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

#include "cache-format.h"
#include "epoch-helpers.h"
#include "log-helpers.h"
#include "log_int.h"
#include "vol.h"

/* A start with a alone whose SSD fails at its last write (the state
 * page that records the mark).
 */
static void
start_dies_after_mark (struct env *e)
{
  uint64_t before = sb_epoch (e->logs[0].cd);

  start_dies_at_last_write (e, 1);
  /* The premise: a took this start's mark (a new epoch), b did not. */
  assert_true (sb_epoch (e->logs[0].cd) > before);
  assert_true (sb_epoch (e->logs[1].cd) < sb_epoch (e->logs[0].cd));
}

static void
test_partial_mark (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 2);
  e.conf.wal = true;
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);

  start_dies_after_mark (&e);

  give (&e, 2);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_write (&e, 3, 2, false);
  env_flush (&e);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);

  refused (&e, 1, "a alone, after b's run,");
  give (&e, 3);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  pw_env_free (&e, &pw);
}

/* Write versions v of blocks first..first+n-1, a FLUSH after each. */
static void
write_flushed (struct env *e, uint64_t first, uint64_t n, uint64_t v)
{
  for (uint64_t l = first; l < first + n; l++)
    {
      env_write (e, l, v, false);
      env_flush (e);
    }
}

static void
test_older_run_tail (void **state)
{
  struct env e;
  unsigned char blk[LOG_ALIGN], zero[LOG_ALIGN] = { 0 };
  uint64_t phys;

  quiet_env_init (&e, 2);
  env_open (&e);
  write_flushed (&e, 3, 1, 1);
  env_close (&e);
  give (&e, 2);
  env_open (&e);
  write_flushed (&e, 10, 40, 2);
  assert_int_equal (hhc_drain (e.vol, &e.be), 0);
  env_close (&e);
  give (&e, 1);
  env_open (&e);
  write_flushed (&e, 5, 1, 3);
  assert_int_equal (hhc_drain (e.vol, &e.be), 0);
  env_close (&e);

  give (&e, 3);
  env_open (&e);
  hhc_lock (&e.vol->log->lock);
  phys = e.vol->log->tail_lpos % e.vol->log->region_size;
  hhc_unlock (&e.vol->log->lock);
  assert_int_equal (
      dev_pread (e.logs[1].cd, blk, LOG_ALIGN, LOG_REGION_OFF + phys), 0);
  assert_memory_equal (blk, zero, LOG_ALIGN);
  assert_true (reads_v (&e, 5, 3));
  assert_true (reads_v (&e, 10, 2));
  env_close (&e);
  env_free (&e);
}

/* The log of a start with the mirrors of e (the volume closed), up to
 * log_start: a's superblock generation must not have moved.
 */
static void
start_log_only (struct env *e, struct hhc_dev *a)
{
  struct log_conf lc = {
    .paths = e->conf.log_paths,
    .npaths = e->conf.nlogs,
    .block_size = 512, /* the log's own, as offline (identity NULL) */
    .msgfn = e->conf.msgfn,
    .devs = e->pre.logs,
  };
  uint8_t luuid[16], cache_uuid[16];
  struct hhc_log *log = NULL;
  enum log_found found;
  uint64_t g = sb_gen (a);

  assert_int_equal (log_open (&lc, cache_uuid, &log, &found), 0);
  assert_int_equal (found, LOG_FOUND_VALID);
  log_uuids (log, luuid, cache_uuid);
  assert_int_equal (log_start (log, cache_uuid, e->nslots, NULL), 0);
  assert_int_equal (sb_gen (a), g);
  log_close (log);
}

static void
test_failed_joined (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 3);
  e.conf.wal = true;
  give (&e, 3);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  assert_int_equal (counts (&e).log_mirrors_failed, 1);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  pdev_heal (e.logs[0].pd);

  give (&e, 7);
  start_log_only (&e, e.logs[0].cd);
  refused (&e, 1, "a alone, after it failed,");
  /* c joined in that start, and holds no chain of it. */
  refused (&e, 5, "a with c, after a failed,");
  give (&e, 7);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  pw_env_free (&e, &pw);
}

static void
gen_up (struct log_sb *sb)
{
  sb->generation++;
}

/* Rewrite the cache's state pages (each valid copy) with edit applied;
 * at least one is valid.
 */
static void
edit_state (struct hhc_dev *ssd, void (*edit) (struct cache_state_page *))
{
  unsigned char pg[CACHE_PAGE];
  struct cache_state_page sp;
  uint8_t uuid[16] = { 0 };
  unsigned n = 0;

  for (unsigned copy = 0; copy < 2; copy++)
    {
      uint64_t off = CACHE_STATE_OFF + copy * CACHE_PAGE;
      assert_int_equal (dev_pread (ssd, pg, CACHE_PAGE, off), 0);
      memcpy (uuid, pg + 16, 8); /* the decode checks these 8 bytes */
      if (!cache_state_decode (pg, uuid, &sp))
        continue;
      edit (&sp);
      cache_state_encode (&sp, pg);
      assert_int_equal (dev_pwrite (ssd, pg, CACHE_PAGE, off), 0);
      n++;
    }
  assert_true (n > 0);
}

/* The state page records one generation more. */
static void
state_gen_up (struct cache_state_page *sp)
{
  sp->log_gen++;
}

static void
test_failed_tied (void **state)
{
  unsigned char saved[2 * LOG_SB_SIZE];
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 2);
  e.conf.wal = true;
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  edit_sbs (e.logs[1].cd, saved, gen_up);
  edit_state (e.ssd.cd, state_gen_up);
  assert_true (sb_gen (e.logs[1].cd) > sb_gen (e.logs[0].cd));

  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_close (&e);
  pw_env_free (&e, &pw);
}

static void
test_damaged_vouch (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 2);
  e.conf.wal = true;
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  pdev_fail_after (e.logs[0].pd, 0);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  pdev_heal (e.logs[0].pd);
  uint64_t size = e.logs[1].cd->size - LOG_REGION_OFF;
  unsigned char *zero = calloc (1, size);
  assert_non_null (zero);
  assert_int_equal (dev_pwrite (e.logs[1].cd, zero, size, LOG_REGION_OFF), 0);
  free (zero);
  refused (&e, 3, "a with b's lost region, after a failed,");
  pw_env_free (&e, &pw);
}

static void
test_force_stale (void **state)
{
  struct env e;

  quiet_env_init (&e, 2);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  give (&e, 2);
  env_open (&e);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  assert_int_equal (hhc_drain (e.vol, &e.be), 0);
  env_close (&e);
  assert_true (backend_has (&e, 3, 2));

  give (&e, 1);
  e.conf.format = HHC_FORMAT_FORCE;
  assert_int_not_equal (env_try_open (&e), 0);
  assert_true (backend_has (&e, 3, 2));
  e.conf.accept_log_loss = true;
  pdev_fail_once (e.logs[0].pd, 0); /* its first write: log_start's */
  assert_int_not_equal (env_try_open (&e), 0);
  pdev_heal (e.logs[0].pd);
  assert_true (backend_has (&e, 3, 2));
  e.conf.format = HHC_FORMAT_AUTO;
  e.conf.accept_log_loss = false;
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  assert_true (backend_has (&e, 3, 2));
  env_free (&e);
}

static void
test_taken_back (void **state)
{
  unsigned char *c1;
  struct env e;

  quiet_env_init (&e, 1);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  for (int k = 0; k < 2; k++)
    {
      pdev_fail_once (e.logs[0].pd, 0); /* the start's first log write */
      assert_int_not_equal (env_try_open (&e), 0);
    }
  c1 = dev_save (e.ssd.cd);
  env_new_ssd (&e);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  dev_load (e.ssd.cd, c1);
  free (c1);
  refused (&e, 1, "the first cache, given its log back,");
  env_free (&e);
}

static void
test_taken_blank (void **state)
{
  unsigned char *c1;
  struct env e;

  quiet_env_init (&e, 2);
  give (&e, 1);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  give (&e, 2);
  pdev_fail_once (e.logs[1].pd, 6); /* after open_format's six writes */
  assert_int_not_equal (env_try_open (&e), 0);
  c1 = dev_save (e.ssd.cd);
  env_new_ssd (&e);
  env_open (&e);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  dev_load (e.ssd.cd, c1);
  free (c1);
  refused (&e, 2, "the first cache, given the log another took,");
  env_free (&e);
}

static void
test_replay_cut (void **state)
{
  struct env e;
  unsigned char *c, *zero;

  quiet_env_init (&e, 3);
  give (&e, 3);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  assert_false (backend_has (&e, 3, 1)); /* the premise */
  env_new_ssd (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  assert_int_not_equal (env_try_open (&e), 0);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  refused (&e, 4, "a blank log, the replay into the new cache not done,");
  c = dev_save (e.logs[2].cd);
  zero = calloc (1, e.logs[2].cd->size);
  assert_non_null (zero);
  assert_memory_equal (c, zero, e.logs[2].cd->size);
  free (c);
  free (zero);
  e.conf.mode = HHC_MODE_WB;
  refused (&e, 3, "a retirement, the replay into the new cache not done,");
  e.conf.mode = HHC_MODE_HHC;
  give (&e, 3);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_close (&e);
  env_free (&e);
}

/* The state page as an earlier build wrote it after a second start of
 * a new cache was cut in its replay: the link paired, an epoch
 * reserved above the record.
 */
static void
state_as_earlier_build (struct cache_state_page *sp)
{
  assert_int_equal (sp->log_link, CACHE_LOG_REPLAYING); /* the premise */
  sp->log_link = CACHE_LOG_PAIRED;
  sp->log_epoch = (sp->log_gen >> LOG_EPOCH_SHIFT) + 1;
}

static void
test_replay_upgrade (void **state)
{
  struct env e;

  quiet_env_init (&e, 1);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  env_new_ssd (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  assert_int_not_equal (env_try_open (&e), 0);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  edit_state (e.ssd.cd, state_as_earlier_build);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_close (&e);
  env_free (&e);
}

static void
test_voided_later (void **state)
{
  struct log_sb sb;
  struct log_sb_read rd;
  struct env e;

  quiet_env_init (&e, 2);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  give (&e, 1);
  env_open (&e);
  pdev_fail_once (e.logs[0].pd, 0);
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  /* The premise: a void of the later run, v2 on the backend. */
  assert_int_equal (log_dev_sb (e.logs[0].cd, &sb, &rd), ESTALE);
  assert_true (sb.generation >> LOG_EPOCH_SHIFT > sb_epoch (e.logs[1].cd));
  assert_true (backend_has (&e, 3, 2));
  env_new_ssd (&e);
  give (&e, 3);
  if (env_try_open (&e) == 0)
    {
      assert_true (reads_v (&e, 3, 2));
      env_close (&e);
    }
  env_free (&e);
}

static char last_err[512];

static void
keep_err (enum hhc_msg_level level, const char *msg)
{
  test_msg (level, msg);
  if (level == HHC_MSG_ERROR)
    snprintf (last_err, sizeof last_err, "%s", msg);
}

static void
test_left_out (void **state)
{
  unsigned char *img[4];
  struct hhc_dev *cds[4];
  struct env e;

  quiet_env_init (&e, 3);
  e.conf.msgfn = keep_err;
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  env_close (&e);
  give (&e, 2);
  for (int k = 0; k < 2; k++)
    {
      env_open (&e);
      env_close (&e);
    }
  env_new_ssd (&e);
  give (&e, 5);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_write (&e, 3, 2, false);
  env_flush (&e);
  env_close (&e);
  /* The premise: b's run (c1's) numbered above c2's. */
  assert_true (sb_epoch (e.logs[1].cd) > sb_epoch (e.logs[0].cd));
  cds[0] = e.ssd.cd;
  for (unsigned i = 0; i < 3; i++)
    cds[i + 1] = e.logs[i].cd;
  for (unsigned i = 0; i < 4; i++)
    img[i] = dev_save (cds[i]);
  last_err[0] = '\0';
  refused (&e, 7, "a mirror left out when the cache took the log over");
  if (strstr (last_err, "log mirror log1 holds another cache's run") == NULL)
    fail_msg ("the refusal did not name b: %s", last_err);
  for (unsigned i = 0; i < 4; i++)
    {
      unsigned char *now = dev_save (cds[i]);
      assert_memory_equal (now, img[i], cds[i]->size);
      free (now);
      free (img[i]);
    }
  give (&e, 5);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_close (&e);
  dev_blank (e.logs[1].cd);
  give (&e, 7);
  env_open (&e);
  assert_true (reads_v (&e, 3, 2));
  env_write (&e, 3, 3, false);
  env_flush (&e);
  env_close (&e);
  env_new_ssd (&e);
  env_open (&e);
  assert_true (reads_v (&e, 3, 3));
  env_close (&e);
  env_free (&e);
}

static void
test_formatted_for (void **state)
{
  struct env e;
  struct power pw;

  pw_env_init (&e, &pw, 2);
  e.conf.wal = true;
  give (&e, 1);
  pdev_fail_once (e.logs[0].pd, 6); /* after open_format's six writes */
  assert_int_not_equal (env_try_open (&e), 0);
  give (&e, 2);
  env_open (&e);
  env_write (&e, 3, 1, false);
  env_flush (&e);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  refused (&e, 1,
           "the log the cache was formatted for, a redo of another owed,");
  give (&e, 2);
  env_open (&e);
  assert_true (reads_v (&e, 3, 1));
  env_close (&e);
  pw_env_free (&e, &pw);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_partial_mark),
    cmocka_unit_test (test_older_run_tail),
    cmocka_unit_test (test_failed_joined),
    cmocka_unit_test (test_failed_tied),
    cmocka_unit_test (test_damaged_vouch),
    cmocka_unit_test (test_force_stale),
    cmocka_unit_test (test_taken_back),
    cmocka_unit_test (test_taken_blank),
    cmocka_unit_test (test_replay_cut),
    cmocka_unit_test (test_formatted_for),
    cmocka_unit_test (test_left_out),
    cmocka_unit_test (test_voided_later),
    cmocka_unit_test (test_replay_upgrade),
  };

  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
