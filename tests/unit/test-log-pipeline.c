/* Pipelined barriers (log-inflight, docs/design.md §5.5): the durable
 * frontier is the contiguous prefix of durable segments, whatever
 * order the writes finish in.
 *
 * Tests (a log on crash devices, each behind a "gate" device that can
 * hold the write of one segment, counts writes in progress and offers
 * FUA or not):
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
 *                     other.
 *   k1_serial         K=1: one write at a time; with nothing written
 *                     plain between barriers each is a FUA write.
 *   k1_fua_after_plain  K=1: after a segment written plain the barrier
 *                     syncs; a power cut loses nothing acknowledged.
 * Each waits until the log has recorded the writes it let through
 * (lane_wrote) before it looks at durable_barrier: a frontier that
 * acknowledged a barrier past the held one (checked by hand: a mutant
 * of advance_front that did) fails torn_hole and mirror_fails.
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
#include "membackend.h"

#define BS 4096u
#define NKEYS 16
#define SEG 65536u
#define LOG_DEV (LOG_REGION_OFF + 1024 * 1024)
#define MAXM 2
#define WAIT_S 10 /* bound of every wait */

/* ---- the gate device ---- */

struct gdev {
  struct hhc_dev dev; /* first */
  struct hhc_dev *inner;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t hold_seq; /* a write of this segment waits (0: none) */
  bool held;         /* one waits */
  int release_err;   /* it then fails so (0: it is forwarded) */
  unsigned active, max_active;
  uint64_t fua_writes, syncs;
  int sync_fail_once; /* the next sync fails so, later ones do not */
  uint64_t done_seq[256], done_off[256]; /* segment writes done */
  unsigned ndone;
};

/* The sequence number of the segment (or wrap marker) buf starts. */
static uint64_t
seg_seq (const void *buf, size_t len)
{
  if (len < 16 || memcmp (buf, LOG_SEG_MAGIC, 8) != 0)
    return 0;
  return get64 ((const char *)buf + 8);
}

static int
gd_write (struct hhc_dev *d, const void *buf, size_t len, uint64_t off,
          bool fua)
{
  struct gdev *g = (struct gdev *)d;
  uint64_t seq = seg_seq (buf, len);
  int r = 0;

  pthread_mutex_lock (&g->mu);
  g->active++;
  if (g->active > g->max_active)
    g->max_active = g->active;
  if (seq && seq == g->hold_seq)
    {
      g->held = true;
      pthread_cond_broadcast (&g->cv);
      while (g->hold_seq == seq)
        pthread_cond_wait (&g->cv, &g->mu);
      r = g->release_err;
    }
  pthread_mutex_unlock (&g->mu);
  if (r == 0)
    r = fua ? dev_pwrite_fua (g->inner, buf, len, off)
            : dev_pwrite (g->inner, buf, len, off);
  pthread_mutex_lock (&g->mu);
  g->active--;
  g->fua_writes += fua;
  if (r == 0 && seq && g->ndone < 256)
    {
      g->done_seq[g->ndone] = seq;
      g->done_off[g->ndone++] = off;
    }
  pthread_cond_broadcast (&g->cv);
  pthread_mutex_unlock (&g->mu);
  return r;
}

static int
gd_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return gd_write (d, buf, len, off, false);
}

static int
gd_pwrite_fua (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return gd_write (d, buf, len, off, true);
}

static int
gd_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  return dev_pread (((struct gdev *)d)->inner, buf, len, off);
}

static int
gd_sync (struct hhc_dev *d)
{
  struct gdev *g = (struct gdev *)d;

  int r;

  pthread_mutex_lock (&g->mu);
  g->syncs++;
  r = g->sync_fail_once;
  g->sync_fail_once = 0;
  pthread_mutex_unlock (&g->mu);
  return r ? r : dev_sync (g->inner);
}

static void
gd_close (struct hhc_dev *d)
{
}

static const struct hhc_dev_ops gd_ops = {
  .pread = gd_pread,
  .pwrite = gd_pwrite,
  .sync = gd_sync,
  .close = gd_close,
};

static const struct hhc_dev_ops gd_fua_ops = {
  .pread = gd_pread,
  .pwrite = gd_pwrite,
  .sync = gd_sync,
  .close = gd_close,
  .pwrite_fua = gd_pwrite_fua,
};

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

/* ---- a log on gate devices ---- */

struct plog {
  unsigned nm;
  struct hhc_dev *cd[MAXM];
  struct gdev gd[MAXM];
  struct hhc_dev *devs[MAXM];
  struct hhc_log *log;
  unsigned inflight;
  unsigned char blocks[NKEYS][BS];
};

static const uint8_t cache_uuid[16] = { 0x70, 0x69 };
static const char *const paths[MAXM] = { "pipe-a", "pipe-b" };

static int
plog_relog (void *opaque, uint32_t key, uint64_t lba)
{
  struct plog *t = opaque;

  log_append (t->log, key, lba, t->blocks[key]);
  return 0;
}

static struct hhc_log *
plog_open_log (struct plog *t, bool online, enum log_found *found)
{
  struct log_conf lc = {
    .paths = paths,
    .npaths = t->nm,
    .block_size = online ? BS : 512,
    .volume_size = online ? (uint64_t)NKEYS * BS : 0,
    .identity = online ? "pipe" : NULL,
    .segment_size = SEG,
    .inflight = t->inflight,
    .msgfn = test_msg,
    .devs = t->devs,
  };
  struct hhc_log *log = NULL;

  assert_int_equal (log_open (&lc, cache_uuid, &log, found), 0);
  return log;
}

static struct plog *
plog_new (unsigned nm, unsigned inflight, bool fua)
{
  struct plog *t = calloc (1, sizeof *t);
  struct log_callbacks cb = { t, plog_relog, NULL, NULL };
  enum log_found found;

  assert_non_null (t);
  t->nm = nm;
  t->inflight = inflight;
  for (unsigned i = 0; i < nm; i++)
    {
      struct gdev *g = &t->gd[i];
      assert_int_equal (crashdev_create (LOG_DEV, &t->cd[i]), 0);
      pthread_mutex_init (&g->mu, NULL);
      pthread_cond_init (&g->cv, NULL);
      g->inner = t->cd[i];
      g->dev.ops = fua ? &gd_fua_ops : &gd_ops;
      g->dev.size = LOG_DEV;
      g->dev.name = (char *)paths[i];
      t->devs[i] = &g->dev;
    }
  t->log = plog_open_log (t, true, &found);
  assert_int_equal (found, LOG_FOUND_BLANK);
  assert_int_equal (log_start (t->log, cache_uuid, NKEYS, &cb), 0);
  assert_int_equal (log_rebase (t->log, NULL, NULL, 0), 0);
  return t;
}

static void
plog_free (struct plog *t)
{
  log_close (t->log);
  for (unsigned i = 0; i < t->nm; i++)
    {
      crashdev_destroy (t->cd[i]);
      pthread_cond_destroy (&t->gd[i].cv);
      pthread_mutex_destroy (&t->gd[i].mu);
    }
  free (t);
}

static void
put_block (struct plog *t, uint32_t key, unsigned char v)
{
  memset (t->blocks[key], v, BS);
  log_append (t->log, key, key, t->blocks[key]);
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

/* What a replay writes: per LBA the first byte of the last block. */
static int first[NKEYS];

static int
replayed_write (void *opaque, const void *buf, uint64_t lba)
{
  if (lba >= NKEYS)
    return EINVAL;
  first[lba] = *(const unsigned char *)buf;
  return 0;
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

static bool
keep_none (size_t i, void *opaque)
{
  return false;
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
  plog_replay (t);
  assert_int_equal (first[0], 1);
  assert_int_equal (first[1], 2);
  assert_int_equal (first[2], 3);
  plog_free (t);
}

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

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_torn_hole),
    cmocka_unit_test (test_sync_in_order),
    cmocka_unit_test (test_mirror_fails),
    cmocka_unit_test (test_k1_serial),
    cmocka_unit_test (test_k1_fua_after_plain),
    cmocka_unit_test (test_sync_error_sticky),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
