/* Pipelined barriers (log-inflight, docs/design.md §5.5): the durable
 * frontier is the contiguous prefix of durable segments, whatever
 * order the writes finish in.
 *
 * Tests (on the log of logpipe.h: gate devices that can hold the
 * write of one segment, count writes in progress and offer FUA or
 * not):
 *   torn_hole         K=4, FUA: segment s1 held, s2 after it durable by
 *                     FUA: durable_barrier stays below s1; the power
 *                     fails; neither FLUSH is acknowledged, the chain
 *                     on disk ends at the hole (s2 is on disk, whole,
 *                     past it) and the replay brings back what was
 *                     acknowledged and nothing of s1 or s2.
 *   sync_in_order     K=4, no FUA: s2's sync waits for s1's write; once
 *                     it is released, both FLUSHes complete and
 *                     everything replays.
 *   mirror_fails      K=4, two mirrors, s1 held on one: the frontier
 *                     waits for it; the held write fails, that mirror
 *                     stops counting, and both FLUSHes complete on the
 *                     other; the failed one is owed its void once the
 *                     other made a barrier durable after its failure.
 *   owe_rule          owe_voids_locked on a log of two mirrors: a failed
 *                     mirror is owed its void only for a durable I/O
 *                     of a complete mirror begun after the failure.
 * Each waits until the log has recorded the writes it let through
 * (lane_wrote) before it looks at durable_barrier: a frontier that
 * acknowledged a barrier past the held one (checked by hand: a mutant
 * of advance_front that did) fails torn_hole and mirror_fails.
 * (How a barrier is made durable, FUA writes or a sync, and a sync's
 * error: test-log-pipeline-sync.c.)
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

#define WAIT_S 10 /* bound of every wait */

/* Wait (bounded) until cond holds for g; false if it never did. */
#define GD_WAIT(g, cond)                                                       \
  ({                                                                           \
    struct timespec ts_;                                                       \
    bool ok_ = true;                                                           \
    clock_gettime (CLOCK_REALTIME, &ts_);                                      \
    ts_.tv_sec += WAIT_S;                                                      \
    pthread_mutex_lock (&(g)->mu);                                             \
    while (!(cond) && ok_)                                                     \
      ok_ = pthread_cond_timedwait (&(g)->cv, &(g)->mu, &ts_) == 0;            \
    ok_ = (cond);                                                              \
    pthread_mutex_unlock (&(g)->mu);                                           \
    ok_;                                                                       \
  })

static bool
gd_done (struct gdev *g, uint64_t seq)
{
  for (unsigned i = 0; i < g->ndone; i++)
    if (g->done_seq[i] == seq)
      return true;
  return false;
}

/* Where segment seq was written (region offset), or -1. */
static int64_t
gd_where (struct gdev *g, uint64_t seq)
{
  for (unsigned i = g->ndone; i-- > 0;)
    if (g->done_seq[i] == seq)
      return (int64_t)(g->done_off[i] - LOG_REGION_OFF);
  return -1;
}

static void
gd_release (struct gdev *g, int err)
{
  pthread_mutex_lock (&g->mu);
  g->release_err = err;
  g->hold_seq = 0;
  pthread_cond_broadcast (&g->cv);
  pthread_mutex_unlock (&g->mu);
}

static void
gd_hold (struct gdev *g, uint64_t seq)
{
  pthread_mutex_lock (&g->mu);
  g->hold_seq = seq;
  g->held = false;
  pthread_mutex_unlock (&g->mu);
}

/* The current buffer's sequence number: the next barrier's. */
static uint64_t
cur_seq (struct plog *t)
{
  HHC_SCOPED_LOCK (&t->log->lock);

  assert_non_null (t->log->cur);
  return t->log->cur->seq;
}

static uint64_t
durable_barrier (struct plog *t)
{
  HHC_SCOPED_LOCK (&t->log->lock);

  return t->log->durable_barrier;
}

/* Has the log recorded segment seq's write on mirror i (its lane is
 * done with it, and the frontier was computed after)?  A segment no
 * longer in flight is done.
 */
static bool
lane_wrote (struct plog *t, uint64_t seq, unsigned i)
{
  HHC_SCOPED_LOCK (&t->log->lock);

  for (struct buf *b = t->log->ifhead; b; b = b->next)
    if (b->seq == seq)
      return b->wdone >> i & 1;
  return true;
}

/* Poll lane_wrote, for at most WAIT_S seconds. */
static bool
wait_lane_wrote (struct plog *t, uint64_t seq, unsigned i)
{
  for (unsigned n = 0; n < WAIT_S * 1000; n++)
    {
      if (lane_wrote (t, seq, i))
        return true;
      nanosleep (&(struct timespec){ 0, 1000000 }, NULL);
    }
  return false;
}

/* Write key 1 (version 2) under barrier s1, held on mirror hm, then
 * key 2 (version 3) under barrier s2, and wait until s2 is written
 * everywhere (and s1 everywhere but hm): tickets in *t1, *t2.
 */
static void
hole (struct plog *t, unsigned hm, struct log_ticket *t1, struct log_ticket *t2)
{
  put_block (t, 0, 1);
  assert_int_equal (log_barrier (t->log), 0); /* acknowledged */
  put_block (t, 1, 2);
  uint64_t s1 = cur_seq (t);
  gd_hold (&t->gd[hm], s1);
  assert_int_equal (log_barrier_begin (t->log, t1), 0);
  assert_int_equal (t1->seq, s1);
  assert_true (GD_WAIT (&t->gd[hm], t->gd[hm].held));
  put_block (t, 2, 3);
  assert_int_equal (log_barrier_begin (t->log, t2), 0);
  assert_true (t2->seq > s1);
  for (unsigned i = 0; i < t->nm; i++)
    {
      assert_true (GD_WAIT (&t->gd[i], gd_done (&t->gd[i], t2->seq)));
      assert_true (wait_lane_wrote (t, t2->seq, i));
      if (i != hm)
        assert_true (GD_WAIT (&t->gd[i], gd_done (&t->gd[i], s1)));
      if (i != hm)
        assert_true (wait_lane_wrote (t, s1, i));
    }
}

/* Is mirror i owed a void (or voided)? */
static bool
want_void (struct plog *t, unsigned i)
{
  HHC_SCOPED_LOCK (&t->log->lock);

  return t->log->m[i].want_void;
}

/* Close t's log, open it offline and replay it into first[]. */
static void
plog_replay (struct plog *t)
{
  enum log_found found;

  log_close (t->log);
  for (unsigned i = 0; i < NKEYS; i++)
    first[i] = -1;
  t->log = plog_open_log (t, false, &found);
  assert_int_equal (found, LOG_FOUND_VALID);
  assert_int_equal (log_replay (t->log, replayed_write, NULL, NULL), 0);
}

static void
test_torn_hole (void **state)
{
  struct plog *t = plog_new (1, 4, true);
  struct log_ticket t1, t2;

  hole (t, 0, &t1, &t2);
  /* s2 is durable (FUA) and s1 is not written: the frontier waits. */
  assert_true (durable_barrier (t) < t1.seq);
  assert_true (t->gd[0].max_active >= 2);
  assert_true (t->gd[0].fua_writes > 0);
  int64_t s2_off = gd_where (&t->gd[0], t2.seq);
  assert_true (s2_off >= 0);
  /* The power fails; then the held write meets a dead device. */
  crashdev_crash (t->cd[0], 1, keep_none, NULL);
  gd_release (&t->gd[0], 0);
  assert_int_equal (log_barrier_wait (t->log, &t1), EIO);
  assert_int_equal (log_barrier_wait (t->log, &t2), EIO);
  log_close (t->log);
  crashdev_restart (t->cd[0]);
  t->log = NULL;

  enum log_found found;
  struct log_chain_desc c;
  struct log_seg_desc d;
  t->log = plog_open_log (t, false, &found);
  assert_int_equal (log_inspect_chain (t->log, 0, &c), 0);
  assert_int_equal (c.end_seq, t1.seq); /* the chain ends at the hole */
  free (c.segs);
  assert_int_equal (log_inspect_segment (t->log, 0, s2_off, &d), 0);
  assert_int_equal (d.hdr.seq, t2.seq); /* whole, on disk, past it */
  assert_true (d.hdr.flags & LOG_F_BARRIER);
  for (unsigned i = 0; i < NKEYS; i++)
    first[i] = -1;
  assert_int_equal (log_replay (t->log, replayed_write, NULL, NULL), 0);
  assert_int_equal (first[0], 1); /* acknowledged before the cut */
  assert_int_equal (first[1], -1);
  assert_int_equal (first[2], -1); /* not replayed past the hole */
  plog_free (t);
}

static void
test_sync_in_order (void **state)
{
  struct plog *t = plog_new (1, 4, false);
  struct log_ticket t1, t2;

  hole (t, 0, &t1, &t2);
  /* s2 is written, but its sync waits for s1's write. */
  assert_true (durable_barrier (t) < t1.seq);
  assert_int_equal (t->gd[0].fua_writes, 0);
  gd_release (&t->gd[0], 0);
  assert_int_equal (log_barrier_wait (t->log, &t1), 0);
  assert_int_equal (log_barrier_wait (t->log, &t2), 0);
  assert_true (durable_barrier (t) >= t2.seq);
  plog_replay (t);
  assert_int_equal (first[0], 1);
  assert_int_equal (first[1], 2);
  assert_int_equal (first[2], 3);
  plog_free (t);
}

static void
test_mirror_fails (void **state)
{
  struct plog *t = plog_new (2, 4, true);
  struct log_ticket t1, t2;
  struct log_stats st;

  hole (t, 1, &t1, &t2);
  assert_true (durable_barrier (t) < t1.seq);
  gd_release (&t->gd[1], EIO); /* mirror B fails on s1 */
  assert_int_equal (log_barrier_wait (t->log, &t1), 0);
  assert_int_equal (log_barrier_wait (t->log, &t2), 0);
  log_get_stats (t->log, &st);
  assert_int_equal (st.mirrors_failed, 1);
  /* B is owed its void once A has made something durable that it
   * began after B failed: the barrier below, or the writer's own sync
   * when idle (owe_rule: not s1 and s2, done before).
   */
  put_block (t, 3, 4);
  assert_int_equal (log_barrier (t->log), 0);
  assert_true (want_void (t, 1));
  plog_replay (t);
  assert_int_equal (first[0], 1);
  assert_int_equal (first[1], 2);
  assert_int_equal (first[2], 3);
  plog_free (t);
}

/* owe_voids_locked on a log of two mirrors, B failed: B is owed its void
 * only when A (healthy, complete) made something durable in an I/O begun
 * after B's failure (A's dur_gen at least B's fail_gen), not for one
 * begun before (a pipelined barrier A had finished: found by review);
 * not while A is joining; never for a mirror never to be voided.
 */
static void
test_owe_rule (void **state)
{
  struct hhc_log *log = calloc (1, sizeof *log);

  assert_non_null (log);
  pthread_mutex_init (&log->lock, NULL);
  pthread_cond_init (&log->writer_cv, NULL);
  pthread_cond_init (&log->pipe_cv, NULL);
  log->nm = 2;
  log->healthy = 2;
  hhc_lock (&log->lock);
  mark_failed_locked (log, &log->m[1], true); /* fail_gen 1 */
  assert_int_equal (log->healthy, 1);
  assert_int_equal (log->m[1].fail_gen, 1);
  log->m[0].dur_gen = 0; /* A's last durable I/O began before */
  owe_voids_locked (log);
  assert_false (log->m[1].want_void);
  log->m[0].dur_gen = 1;
  log->m[0].joining = true; /* not complete yet */
  owe_voids_locked (log);
  assert_false (log->m[1].want_void);
  log->m[0].joining = false;
  log->m[1].no_void = true;
  owe_voids_locked (log);
  assert_false (log->m[1].want_void);
  log->m[1].no_void = false;
  owe_voids_locked (log);
  assert_true (log->m[1].want_void);
  assert_int_equal (log->unvoided, 1);
  hhc_unlock (&log->lock);
  pthread_cond_destroy (&log->writer_cv);
  pthread_cond_destroy (&log->pipe_cv);
  pthread_mutex_destroy (&log->lock);
  free (log);
  (void)state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_torn_hole),
    cmocka_unit_test (test_sync_in_order),
    cmocka_unit_test (test_mirror_fails),
    cmocka_unit_test (test_owe_rule),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
