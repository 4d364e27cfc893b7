/* Pipelined barriers (log-inflight, docs/design.md §5.5): how a
 * barrier is made durable on a mirror, by FUA writes alone or by a
 * sync, and a sync's error.  (The durable frontier with writes that
 * finish out of order: test-log-pipeline.c.)
 *
 * Tests (on the log of logpipe.h):
 *   k1_serial         K=1: one write at a time; with nothing written
 *                     plain between barriers each is a FUA write.
 *   k1_fua_after_plain  K=1: after a segment written plain the barrier
 *                     syncs; a power cut loses nothing acknowledged.
 *   sync_error_sticky  a device that reports a write-back error to one
 *                     sync only: every later sync of the mirror fails
 *                     too; without errors_once each reports its own.
 *   piped_plain_kept  K=2: a sync through do_io (persist_head's) leaves
 *                     the lanes' plain state alone; K=1 clears it.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common.h"
#include "devcrash.h"
#include "log.h"
#include "log_int.h"
#include "logpipe.h"
#include "membackend.h"

static void
test_k1_serial (void **state)
{
  struct plog *t = plog_new (1, 1, true);
  struct log_stats st;

  for (unsigned r = 0; r < 20; r++)
    {
      put_block (t, r % NKEYS, r + 1);
      assert_int_equal (log_barrier (t->log), 0);
    }
  log_get_stats (t->log, &st);
  assert_int_equal (t->gd[0].max_active, 1);
  /* Nothing plain between the barriers: each is FUA writes alone. */
  assert_true (t->gd[0].fua_writes >= 19);
  assert_true (st.fua_barriers >= 19);
  assert_true (st.barriers >= 20);
  plog_free (t);
}

/* K=1 on a device with FUA: a barrier with nothing written plain since
 * the last sync is one FUA write per piece and no sync; after a
 * segment sealed full and written plain, the next barrier syncs (a FUA
 * write does not make the earlier write durable).  The power then
 * fails, keeping nothing unsynced: every acknowledged block replays.
 * (Checked by hand: with the rule dropped from do_io the full
 * segment's blocks are lost here.)
 */
static void
test_k1_fua_after_plain (void **state)
{
  struct plog *t = plog_new (1, 1, true);
  struct log_stats st0, st1;
  enum log_found found;

  put_block (t, 0, 1);
  assert_int_equal (log_barrier (t->log), 0);
  log_get_stats (t->log, &st0);
  put_block (t, 1, 2);
  assert_int_equal (log_barrier (t->log), 0);
  log_get_stats (t->log, &st1);
  assert_int_equal (st1.fua_barriers, st0.fua_barriers + 1);
  assert_int_equal (st1.syncs, st0.syncs);
  /* The FLUSH waited for a new barrier (a join); one with nothing new
   * does not.
   */
  assert_int_equal (st1.joins, st0.joins + 1);
  assert_int_equal (log_barrier (t->log), 0);
  log_get_stats (t->log, &st1);
  assert_int_equal (st1.joins, st0.joins + 1);
  for (unsigned k = 0; k < NKEYS; k++) /* more than a segment holds */
    put_block (t, k, (unsigned char)(10 + k));
  assert_int_equal (log_barrier (t->log), 0);
  log_get_stats (t->log, &st0);
  assert_true (st0.segments >= st1.segments + 2);
  assert_true (st0.syncs > st1.syncs);
  crashdev_crash (t->cd[0], 1, keep_none, NULL);
  log_close (t->log);
  crashdev_restart (t->cd[0]);
  t->log = plog_open_log (t, false, &found);
  assert_int_equal (found, LOG_FOUND_VALID);
  for (unsigned i = 0; i < NKEYS; i++)
    first[i] = -1;
  assert_int_equal (log_replay (t->log, replayed_write, NULL, NULL), 0);
  for (unsigned k = 0; k < NKEYS; k++)
    assert_int_equal (first[k], 10 + k);
  plog_free (t);
}

/* A device that reports a write-back error to one sync only (a file:
 * errseq): once a sync of the mirror failed, every later one fails
 * too, so no barrier can be credited after the error (review of the
 * pipeline: two overlapping syncs, one took the error, the other was
 * credited).  Without errors_once each call reports its own.
 */
static void
test_sync_error_sticky (void **state)
{
  for (int once = 0; once <= 1; once++)
    {
      struct plog *t = plog_new (1, 2, false);
      struct mirror m = { .dev = &t->gd[0].dev };

      pthread_mutex_init (&m.sync_mu, NULL);
      t->gd[0].dev.errors_once = once;
      t->gd[0].sync_fail_once = EIO;
      assert_int_equal (mirror_fsync (&m, NULL, 0, 0), EIO);
      assert_int_equal (mirror_fsync (&m, NULL, 0, 0), once ? EIO : 0);
      pthread_mutex_destroy (&m.sync_mu);
      plog_free (t);
    }
}

/* With K > 1 a mirror's plain state is the lanes' (pipe_issue): a sync
 * that do_io makes (persist_head's, from log_rebase while the writer
 * may issue a plain segment) must not clear it, or the next barrier
 * could go FUA without covering that segment.  With K = 1 do_io owns
 * it: its sync clears it.  (Fails with do_io clearing it for K > 1.)
 */
static void
test_piped_plain_kept (void **state)
{
  for (unsigned k = 1; k <= 2; k++)
    {
      struct plog *t = plog_new (1, k, true);
      struct io sync = { .sync = true, .sync_only = true };
      struct mirror *m = &t->log->m[0];

      hhc_lock (&t->log->lock);
      m->plain = true; /* as a plain segment issued leaves it */
      hhc_unlock (&t->log->lock);
      assert_int_equal (mirrors_io (t->log, &sync), 0);
      hhc_lock (&t->log->lock);
      assert_int_equal (m->plain, k > 1);
      hhc_unlock (&t->log->lock);
      plog_free (t);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_k1_serial),
    cmocka_unit_test (test_k1_fua_after_plain),
    cmocka_unit_test (test_sync_error_sticky),
    cmocka_unit_test (test_piped_plain_kept),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
