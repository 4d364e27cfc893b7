/* The log's writer under load (docs/design.md §5; docs/log.md): the
 * group commit, and a log that runs full (the ring of segments, active
 * reclaim, the emergency barrier, write-back asked for).
 *
 * Tests:
 *   group_commit      16 threads writing and flushing to a slow log:
 *                     far fewer log syncs than flushes, and after an SSD
 *                     loss the replay holds every block's last version.
 *   outage_flush      a backend outage under a FLUSH every 8 writes:
 *                     active reclaim keeps making room, every FLUSH
 *                     completes.
 *   small_ring        a ring of 12 segment slots: write + FLUSH rounds
 *                     keep going through write-back freeing slots.
 *   ring_pinned_head  a pinned head and a ring of 12 slots: the log
 *                     counts as full, so write-back frees them.
 *   full_log          a log much smaller than the dirty data: FLUSH
 *                     completes (bounded: a HANG failure otherwise) and
 *                     everything is durable.
 *   close_full_log    hhc_close right after filling the log (the flusher
 *                     is stopped first) finishes, and the cache keeps it
 *                     all.
 * small_ring, ring_pinned_head and full_log run with the default
 * log-inflight (4 barriers in flight on these devices, with FUA), and
 * again with 1 (one segment at a time) and 8: room, head and reclaim
 * with any number of barriers in flight.
 * All but group_commit run last, in this order, as a hang leaves
 * threads behind.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log-helpers.h"

#define GC_THREADS 16
#define GC_ITERS 25

struct gc_arg {
  struct env *e;
  unsigned id;
  int err;
};

static void *
gc_thread (void *p)
{
  struct gc_arg *a = p;

  for (unsigned i = 0; i < GC_ITERS && a->err == 0; i++)
    {
      uint64_t lba = a->id * 4 + i % 4;
      a->err = env_try_write (a->e, lba, 1 + i);
      if (a->err == 0)
        a->err = hhc_flush (a->e->vol, &a->e->be);
    }
  return NULL;
}

static void
test_group_commit (void **state)
{
  struct env e;
  pthread_t th[GC_THREADS];
  struct gc_arg args[GC_THREADS];
  struct hhc_counts c0, c1;
  uint64_t expect[GC_THREADS * 4];

  env_init (&e, 256, 256, 1, LOG_REGION_OFF + 4096 * KiB);
  /* An HDD: a sync takes a while (the log's only; no time is
   * asserted).
   */
  pdev_set_sync_delay (e.logs[0].pd, 1000);
  env_open (&e);
  /* Nothing is written back: the log alone holds what was flushed
   * (checked by a replay below).
   */
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  c0 = counts (&e);
  for (unsigned i = 0; i < GC_THREADS; i++)
    {
      args[i] = (struct gc_arg){ &e, i, 0 };
      assert_int_equal (pthread_create (&th[i], NULL, gc_thread, &args[i]), 0);
    }
  for (unsigned i = 0; i < GC_THREADS; i++)
    {
      assert_true (test_join (th[i], 300000));
      assert_int_equal (args[i].err, 0);
    }
  c1 = counts (&e);
  uint64_t flushes = c1.flushes - c0.flushes;
  /* Durable points: barriers made durable by a sync or by FUA. */
  uint64_t syncs
      = c1.log_syncs + c1.log_fua_barriers - c0.log_syncs - c0.log_fua_barriers;
  uint64_t barriers = c1.log_barriers - c0.log_barriers;
  printf ("group commit: %llu flushes, %llu log barriers, %llu log syncs\n",
          (unsigned long long)flushes, (unsigned long long)barriers,
          (unsigned long long)syncs);
  assert_int_equal (flushes, GC_THREADS * GC_ITERS);
  assert_true (syncs * 2 < flushes);
  for (unsigned i = 0; i < GC_THREADS; i++)
    for (unsigned k = 0; k < 4; k++)
      {
        /* The last version written to block id*4+k. */
        unsigned last = 0;
        for (unsigned it = 0; it < GC_ITERS; it++)
          if (it % 4 == k)
            last = it + 1;
        assert_true (reads_v (&e, i * 4 + k, last));
        expect[i * 4 + k] = last;
      }
  /* The SSD is lost: the replay of the log (barriers sealed by the
   * group commit's wait, see group_wait_ns) brings back every block's
   * last flushed version.
   */
  env_close (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < GC_THREADS * 4; l++)
    if (!backend_has (&e, l, expect[l]))
      fail_msg ("group commit replay: block %llu holds version %lld, "
                "expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)expect[l]);
  env_close (&e);
  env_free (&e);
}

#define FL_BLOCKS 1500

struct fl_arg {
  struct env *e;
  int err;
};

static void *
fl_thread (void *p)
{
  struct fl_arg *a = p;
  unsigned char blk[BS];

  for (uint64_t l = 0; l < FL_BLOCKS && a->err == 0; l++)
    {
      pattern_fill (blk, l * 2, 0, SECTORS, 7000 + l);
      a->err = hhc_write (a->e->vol, &a->e->be, blk, BS, l * 2 * BS, false);
    }
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  return NULL;
}

/* A ring of a few segment slots (a big log's ring is coarser than its
 * region: log.c ring_slots): with every slot in use the log counts as
 * full, and small barrier segments (a FLUSH after each write) must
 * keep going, through write-back freeing slots, without a hang.  Then
 * the SSD is lost: the replay holds every flushed block.
 */
#define SMALL_RING_ROUNDS 400

struct ring_arg {
  struct env *e;
  uint64_t expect[64];
  int err;
};

static void *
ring_thread (void *p)
{
  struct ring_arg *a = p;

  for (uint64_t i = 0; i < SMALL_RING_ROUNDS && a->err == 0; i++)
    {
      uint64_t l = (i * 37) % 64;
      a->err = env_try_write (a->e, l, 1000 + i);
      if (a->err == 0)
        a->err = hhc_flush (a->e->vol, &a->e->be);
      a->expect[l] = 1000 + i;
    }
  return NULL;
}

/* A ring of 12 slots in a 16 MiB region, write-back only at 90%
 * dirty: one flushed block pins the head, then writes without FLUSH
 * fill segments.  The slots run out long before the bytes do; the log
 * must still count as full (log_usage) so that write-back frees them
 * (found by review: every FLUSH waited for ever).
 */
struct pin_arg {
  struct env *e;
  int err;
};

static void *
pin_thread (void *p)
{
  struct pin_arg *a = p;

  a->err = env_try_write (a->e, 0, 7);
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  for (uint64_t i = 0; i < 2000 && a->err == 0; i++)
    {
      if (i % 400 == 399)
        a->err = hhc_flush (a->e->vol, &a->e->be);
      if (a->err == 0)
        a->err = env_try_write (a->e, 1 + i % 63, 1000 + i);
    }
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  return NULL;
}

/* A variant's log-inflight (cmocka's prestate: NULL, the default). */
static void
set_inflight (struct env *e, void **state)
{
  if (*state)
    e->conf.log_inflight = *(const unsigned *)*state;
}

static const unsigned inflight_1 = 1, inflight_8 = 8;

static void
test_ring_pinned_head (void **state)
{
  struct env e;
  pthread_t th;
  struct pin_arg arg = { 0 };
  struct hhc_counts c;

  env_init (&e, 1024, 1024, 1, LOG_REGION_OFF + 16384 * KiB);
  set_inflight (&e, state);
  e.pre.log_ring_slots = 12;
  e.conf.dirty_low = 90;
  e.conf.dirty_high = 95;
  e.conf.dirty_max = 99;
  e.conf.idle_ms = 0;
  env_open (&e);
  arg.e = &e;
  assert_int_equal (pthread_create (&th, NULL, pin_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      fail_msg ("HANG: a pinned head and a ring of 12 slots (%llu segments, "
                "%llu full waits, %llu written back, log %llu of %llu "
                "bytes used)",
                (unsigned long long)c.log_segments,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.writeback_blocks,
                (unsigned long long)c.log_used,
                (unsigned long long)c.log_region);
    }
  assert_int_equal (arg.err, 0);
  env_close (&e);
  env_free (&e);
}

static void
test_small_ring (void **state)
{
  struct env e;
  pthread_t th;
  struct ring_arg arg = { 0 };
  struct hhc_counts c;

  env_init (&e, 64, 128, 1, LOG_REGION_OFF + 1024 * KiB);
  set_inflight (&e, state);
  e.pre.log_ring_slots = 12; /* the region would take 256 */
  env_open (&e);
  arg.e = &e;
  assert_int_equal (pthread_create (&th, NULL, ring_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      fail_msg ("HANG: write + FLUSH rounds with a ring of 12 segments "
                "(%llu segments, %llu full waits, %llu written back)",
                (unsigned long long)c.log_segments,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.writeback_blocks);
    }
  assert_int_equal (arg.err, 0);
  c = counts (&e);
  printf ("small ring: %llu segments, %llu full waits, %llu written back\n",
          (unsigned long long)c.log_segments,
          (unsigned long long)c.log_full_waits,
          (unsigned long long)c.writeback_blocks);
  assert_true (c.log_segments >= SMALL_RING_ROUNDS);
  env_close (&e);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < 64; l++)
    if (arg.expect[l] && !backend_has (&e, l, arg.expect[l]))
      fail_msg ("small ring, SSD lost: block %llu holds version %lld, "
                "expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)arg.expect[l]);
  env_close (&e);
  env_free (&e);
}

static void
test_full_log (void **state)
{
  struct env e;
  struct power pw;
  pthread_t th;
  struct fl_arg arg;
  struct hhc_counts c;

  /* 8 MiB of cache, a 352 KiB log region. */
  env_init (&e, 2 * FL_BLOCKS + 100, 2048, 1, LOG_REGION_OFF + 352 * KiB);
  power_init (&pw, e.mb);
  e.be.pw = &pw;
  to_pdev (e.logs[0].pd)->pw = &pw;
  to_pdev (e.ssd.pd)->pw = &pw;
  power_set_devs (&pw, (struct hhc_dev *[]){ e.ssd.cd, e.logs[0].cd }, 2);
  e.conf.log_buffers = 2;
  set_inflight (&e, state);
  if (*state)
    e.conf.log_buffers = 0; /* as many as the log takes */
  /* Write-back starts only when the log asks for it. */
  e.conf.dirty_low = 80;
  e.conf.dirty_high = 90;
  e.conf.dirty_max = 95;
  env_open (&e);
  arg = (struct fl_arg){ &e, 0 };
  assert_int_equal (pthread_create (&th, NULL, fl_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      /* Leaves the volume and its threads behind (hence the last test). */
      fail_msg ("HANG: %u writes and a FLUSH on a full log did not finish "
                "(%llu dirty, %llu full waits, log %llu of %llu bytes used)",
                FL_BLOCKS, (unsigned long long)c.dirty,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.log_used,
                (unsigned long long)c.log_region);
    }
  assert_int_equal (arg.err, 0);
  /* What the FLUSH covered survives a power cut that loses the SSD
   * (and whatever the backend was not asked to flush).
   */
  power_arm (&pw, 0, false, 99, true);
  power_cut (&pw);
  c = counts (&e);
  printf ("full log: %llu blocks logged, %llu segments, %llu full waits, "
          "%llu relogged, %llu written back\n",
          (unsigned long long)c.log_blocks, (unsigned long long)c.log_segments,
          (unsigned long long)c.log_full_waits,
          (unsigned long long)c.log_relogged,
          (unsigned long long)c.writeback_blocks);
  assert_true (c.log_blocks > 0);
  for (uint64_t l = 0; l < FL_BLOCKS; l += 7)
    assert_true (reads_v (&e, l * 2, 7000 + l));
  env_close (&e);
  power_restore (&pw);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < FL_BLOCKS; l++)
    if (!backend_has (&e, l * 2, 7000 + l))
      fail_msg ("full log, SSD lost after the FLUSH: block %llu holds "
                "version %lld, expected %llu",
                (unsigned long long)(l * 2),
                (long long)backend_version (&e, l * 2),
                (unsigned long long)(7000 + l));
  env_close (&e);
  e.be.pw = NULL;
  to_pdev (e.logs[0].pd)->pw = NULL;
  env_free (&e);
  power_destroy (&pw);
}

/* A backend outage under a load that overwrites a small working set
 * with a FLUSH every 8 writes: nothing can be written back, so the
 * log fills with entries of which only the newest per block are live
 * (far less than the region).  Active reclaim must keep making room:
 * every FLUSH completes while the backend is down (a FLUSH waited for
 * the backend in the outage campaign: the head segment was all live,
 * so copying it "gained" nothing and reclaim gave up).
 */
#define OUT_WS 48       /* blocks in the working set: 192 KiB */
#define OUT_ROUNDS 3000 /* writes */

struct out_arg {
  struct env *e;
  uint64_t seed;
  int err;
  unsigned flushes;
  uint64_t last[OUT_WS];
};

static void *
out_thread (void *p)
{
  struct out_arg *a = p;
  unsigned char blk[BS];

  for (unsigned i = 0; i < OUT_ROUNDS && a->err == 0; i++)
    {
      /* A hot quarter takes half the writes. */
      uint64_t r = test_rand (&a->seed);
      uint64_t l = r & 1 ? (r >> 1) % (OUT_WS / 4) : (r >> 1) % OUT_WS;
      a->last[l] = 1000 + i;
      pattern_fill (blk, l, 0, SECTORS, a->last[l]);
      a->err = hhc_write (a->e->vol, &a->e->be, blk, BS, l * BS, false);
      if (a->err == 0 && i % 8 == 7)
        {
          a->err = hhc_flush (a->e->vol, &a->e->be);
          a->flushes++;
        }
    }
  if (a->err == 0)
    a->err = hhc_flush (a->e->vol, &a->e->be);
  return NULL;
}

static void
test_outage_flush (void **state)
{
  struct env e;
  pthread_t th;
  struct out_arg arg;
  struct hhc_counts c;

  /* A 640 KiB log region: 3.3 times the working set. */
  env_init (&e, OUT_WS + 16, 256, 1, LOG_REGION_OFF + 640 * KiB);
  e.conf.log_buffers = 2;
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  arg = (struct out_arg){ .e = &e, .seed = 77 };
  assert_int_equal (pthread_create (&th, NULL, out_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    {
      c = counts (&e);
      /* Leaves the volume and its threads behind (hence near the end). */
      fail_msg ("HANG: a FLUSH during a backend outage did not finish "
                "after %u of them (%llu dirty, %llu full waits, %llu "
                "reclaimed, log %llu of %llu bytes used)",
                arg.flushes, (unsigned long long)c.dirty,
                (unsigned long long)c.log_full_waits,
                (unsigned long long)c.log_reclaimed,
                (unsigned long long)c.log_used,
                (unsigned long long)c.log_region);
    }
  assert_int_equal (arg.err, 0);
  c = counts (&e);
  printf (
      "outage: %u writes, %u flushes, %llu dirty, %llu segments, %llu "
      "reclaimed, %llu full waits, %llu relogged\n",
      OUT_ROUNDS, arg.flushes + 1, (unsigned long long)c.dirty,
      (unsigned long long)c.log_segments, (unsigned long long)c.log_reclaimed,
      (unsigned long long)c.log_full_waits, (unsigned long long)c.log_relogged);
  assert_int_equal (c.writeback_blocks, 0);
  /* The last FLUSH covered everything: the SSD is lost, the log is
   * replayed into the backend (back now).
   */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  env_close (&e);
  env_new_ssd (&e);
  env_open (&e);
  for (uint64_t l = 0; l < OUT_WS; l++)
    if (arg.last[l] && !backend_has (&e, l, arg.last[l]))
      fail_msg ("outage, SSD lost after the last FLUSH: block %llu holds "
                "version %lld, expected %llu",
                (unsigned long long)l, (long long)backend_version (&e, l),
                (unsigned long long)arg.last[l]);
  env_close (&e);
  env_free (&e);
}

/* Closing with the log full: the flusher is stopped first, so the
 * close's barrier must not wait for write-back that never comes.
 */
struct cl_arg {
  struct env *e;
  int err;
};

static void *
cl_thread (void *p)
{
  struct cl_arg *a = p;
  unsigned char blk[BS];

  for (uint64_t l = 0; l < FL_BLOCKS && a->err == 0; l++)
    {
      pattern_fill (blk, l * 2, 0, SECTORS, 8000 + l);
      a->err = hhc_write (a->e->vol, &a->e->be, blk, BS, l * 2 * BS, false);
    }
  if (a->err == 0)
    {
      struct hhc_counts c;
      hhc_get_counts (a->e->vol, &c);
      printf ("close on a full log: %llu dirty, %llu full waits, log %llu "
              "of %llu bytes used\n",
              (unsigned long long)c.dirty, (unsigned long long)c.log_full_waits,
              (unsigned long long)c.log_used, (unsigned long long)c.log_region);
      a->err = hhc_close (a->e->vol);
    }
  a->e->vol = NULL;
  return NULL;
}

static void
test_close_full_log (void **state)
{
  struct env e;
  pthread_t th;
  struct cl_arg arg;

  env_init (&e, 2 * FL_BLOCKS + 100, 2048, 1, LOG_REGION_OFF + 352 * KiB);
  e.conf.log_buffers = 2;
  e.conf.dirty_low = 80;
  e.conf.dirty_high = 90;
  e.conf.dirty_max = 95;
  env_open (&e);
  arg = (struct cl_arg){ &e, 0 };
  assert_int_equal (pthread_create (&th, NULL, cl_thread, &arg), 0);
  if (!test_join (th, (SANITIZED ? 300 : 60) * 1000))
    fail_msg ("HANG: %u writes and a close on a full log did not finish",
              FL_BLOCKS);
  assert_int_equal (arg.err, 0);
  /* Reopened, the cache has it all. */
  env_open (&e);
  for (uint64_t l = 0; l < FL_BLOCKS; l += 5)
    assert_true (reads_v (&e, l * 2, 8000 + l));
  env_close (&e);
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_group_commit),
    cmocka_unit_test (test_outage_flush),     /* a hang leaves threads */
    cmocka_unit_test (test_small_ring),       /* a hang leaves threads */
    cmocka_unit_test (test_ring_pinned_head), /* a hang leaves threads */
    cmocka_unit_test_prestate (test_small_ring, (void *)&inflight_1),
    cmocka_unit_test_prestate (test_small_ring, (void *)&inflight_8),
    cmocka_unit_test_prestate (test_ring_pinned_head, (void *)&inflight_1),
    cmocka_unit_test_prestate (test_ring_pinned_head, (void *)&inflight_8),
    cmocka_unit_test_prestate (test_full_log, (void *)&inflight_1),
    cmocka_unit_test_prestate (test_full_log, (void *)&inflight_8),
    cmocka_unit_test (test_full_log), /* last: a hang leaves threads */
    cmocka_unit_test (test_close_full_log),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
