/* Sequential cutoff (gateway/seqcut.c): the stream detector on its
 * own (interleaved streams, a jump, eviction, the exact boundary), and
 * volumes whose sequential streams bypass the cache: reads of dirty
 * blocks still come from the cache and misses are not filled; a dirty
 * block under a bypassed write (even one being written back at that
 * moment) reads back and is written back with the new data; in hhc a
 * replay after the SSD is lost brings back no older version; a FLUSH
 * after a bypassed write flushes the backend; a failed backend flush
 * is sticky for a bypassed write that reached the backend, not for one
 * that fell back to the cache.
 */
#include <config.h>

#include "log-helpers.h"
#include "passdown.h"
#include "seqcut.h"

#define K16 (16 * KiB)
#define TIMEOUT_MS 30000
#define CUTOFF (4 * BS) /* the 5th 4K request of a stream bypasses */

/* ---- the detector ---- */

static bool
req (struct hhc_seqcut *sc, uint64_t off, uint32_t len)
{
  return seqcut_check (sc, off, len, false);
}

static void
test_boundary (void **state)
{
  struct hhc_seqcut sc;

  seqcut_init (&sc, 64 * KiB);
  /* Exactly the cutoff: not yet sequential; one byte more is. */
  for (uint64_t i = 0; i < 4; i++)
    assert_false (req (&sc, i * K16, K16));
  assert_true (req (&sc, 4 * K16, 1));
  assert_true (req (&sc, 4 * K16 + 1, K16));
  /* One request longer than the cutoff is a stream of its own. */
  assert_false (req (&sc, 1 << 30, 64 * KiB));
  assert_true (req (&sc, 2u << 30, 64 * KiB + 1));
  assert_int_equal (sc.read_bytes, 1 + K16 + 64 * KiB + 1);
  assert_int_equal (sc.write_bytes, 0);
  seqcut_destroy (&sc);

  seqcut_init (&sc, 0); /* off */
  for (uint64_t i = 0; i < 100; i++)
    assert_false (req (&sc, i * K16, K16));
  seqcut_destroy (&sc);
}

static void
test_interleaved (void **state)
{
  struct hhc_seqcut sc;
  const uint64_t a = 0, b = 1 << 20, c = 8 << 20;

  seqcut_init (&sc, 64 * KiB);
  for (uint64_t i = 0; i < 8; i++)
    {
      bool seq = i >= 4; /* 5 x 16K > 64K */
      assert_int_equal (req (&sc, a + i * K16, K16), seq);
      assert_int_equal (req (&sc, b + i * K16, K16), seq);
      /* A write stream is its own, even at a read stream's next. */
      assert_int_equal (seqcut_check (&sc, c + i * K16, K16, true), seq);
      assert_false (seqcut_check (&sc, a + (i + 1) * K16, 1, true));
    }
  seqcut_destroy (&sc);
}

static void
test_jump (void **state)
{
  struct hhc_seqcut sc;

  seqcut_init (&sc, 64 * KiB);
  for (uint64_t i = 0; i < 5; i++)
    assert_int_equal (req (&sc, i * K16, K16), i == 4);
  /* A jump (forwards, backwards, a re-read) starts a new stream. */
  assert_false (req (&sc, 6 * K16, K16));
  assert_false (req (&sc, 0, K16));
  assert_false (req (&sc, 6 * K16, K16));
  for (uint64_t i = 7; i < 10; i++)
    assert_false (req (&sc, i * K16, K16));
  assert_true (req (&sc, 10 * K16, K16)); /* 5 x 16K from 6 x 16K */
  /* The first stream was kept: it goes on where it stopped. */
  assert_true (req (&sc, 5 * K16, K16));
  seqcut_destroy (&sc);
}

static void
test_eviction (void **state)
{
  struct hhc_seqcut sc;
  const uint64_t gap = 1 << 30;

  seqcut_init (&sc, 64 * KiB);
  /* Stream 0 becomes sequential, then SEQCUT_STREAMS - 1 others start:
   * it is still in the table, and continues.
   */
  for (uint64_t i = 0; i < 5; i++)
    req (&sc, i * K16, K16);
  for (uint64_t s = 1; s < SEQCUT_STREAMS; s++)
    assert_false (req (&sc, s * gap, K16));
  assert_true (req (&sc, 5 * K16, K16));
  /* One more stream evicts the least recently used: stream 1. */
  assert_false (req (&sc, SEQCUT_STREAMS * gap, K16));
  /* It starts again from nothing: 5 more requests to pass 64K (4 if
   * it had been kept).
   */
  for (uint64_t i = 1; i < 5; i++)
    assert_false (req (&sc, 1 * gap + i * K16, K16));
  assert_true (req (&sc, 1 * gap + 5 * K16, K16));
  /* Stream 0, used lately, was kept all along. */
  assert_true (req (&sc, 6 * K16, K16));
  seqcut_destroy (&sc);
}

/* A scan of 1 MiB requests with 100 random 4K requests of another
 * client between each two: the random ones, each a stream of its own,
 * must not push the scan out of the table (plain LRU did: the scan
 * never passed the cutoff).  The scan passes 1 MiB at its second
 * request; a random request never does.
 */
static void
test_scan_among_random (void **state)
{
  struct hhc_seqcut sc;
  uint64_t x = 12345;

  seqcut_init (&sc, 1024 * KiB);
  for (uint64_t i = 0; i < 8; i++)
    {
      assert_int_equal (req (&sc, i * 1024 * KiB, 1024 * KiB), i >= 1);
      for (unsigned k = 0; k < 100; k++)
        {
          x = x * 6364136223846793005u + 1442695040888963407u;
          uint64_t off = (1ull << 40) + (x >> 24) * 4096;
          assert_false (req (&sc, off, 4096));
        }
    }
  seqcut_destroy (&sc);
}

/* ---- volumes ---- */

/* A volume of 64 blocks (as many slots) whose flusher stays quiet. */
static void
seq_env_init (struct env *e, enum hhc_mode mode)
{
  bool log = mode == HHC_MODE_HHC;

  env_init (e, 64, 64, log ? 1 : 0, LOG_REGION_OFF + 4096 * KiB);
  e->conf.mode = mode;
  e->conf.seq_cutoff = CUTOFF;
  e->conf.dirty_low = 90;
  e->conf.dirty_high = 95;
  e->conf.idle_ms = 0;
}

static void
seq_env (struct env *e, enum hhc_mode mode)
{
  seq_env_init (e, mode);
  env_open (e);
}

/* Write version v of blocks [first, last), 4K at a time, in order. */
static void
stream_write (struct env *e, uint64_t first, uint64_t last, uint64_t v)
{
  for (uint64_t l = first; l < last; l++)
    env_write (e, l, v, false);
}

/* Reads: cached blocks (dirty ones above all) come from the cache,
 * misses past the cutoff are not filled.
 */
static void
test_read_bypass (void **state)
{
  struct env e;
  unsigned char buf[64 * BS];
  struct hhc_counts c;

  seq_env (&e, HHC_MODE_WB);
  env_write (&e, 20, 1, false); /* dirty: the backend has version 0 */
  assert_int_equal (hhc_read (e.vol, &e.be, buf, 64 * BS, 0), 0);
  for (uint64_t l = 0; l < 64; l++)
    {
      unsigned char want[BS];
      pattern_fill (want, l, 0, SECTORS, l == 20 ? 1 : 0);
      assert_memory_equal (buf + l * BS, want, BS);
    }
  c = counts (&e);
  assert_int_equal (c.clean, 0); /* one request past the cutoff */
  assert_int_equal (c.dirty, 1);
  /* 4K reads: the first four fill, the rest do not. */
  for (uint64_t l = 30; l < 40; l++)
    assert_true (reads_v (&e, l, 0));
  assert_int_equal (counts (&e).clean, 4);
  env_free (&e);
}

/* pt and wt: a bypassed write updates nothing in the cache and no
 * cached copy is read afterwards.
 */
static void
test_write_bypass_wt (void **state)
{
  struct env e;

  seq_env (&e, HHC_MODE_WT);
  for (uint64_t l = 0; l < 16; l++) /* random reads: cached */
    assert_true (reads_v (&e, (l * 7) % 16, 0));
  assert_int_equal (counts (&e).clean, 16);
  stream_write (&e, 0, 16, 1);
  assert_int_equal (counts (&e).clean, 4); /* 4..15 invalidated */
  for (uint64_t l = 0; l < 16; l++)
    assert_true (reads_v (&e, l, 1));
  env_flush (&e);
  for (uint64_t l = 0; l < 16; l++)
    assert_true (backend_has (&e, l, 1));
  env_free (&e);
}

/* The flusher writes back block 10 while the bypassed write of it
 * runs: its backend write waits until that write has begun.
 */
struct wb_race {
  struct env *e;
  bool seen; /* atomic: the write-back of block 10 reached the backend */
};

static void
wb_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct wb_race *w = opaque;
  struct timespec t0, t;

  if (offset > 10 * BS || offset + count <= 10 * BS
      || __atomic_exchange_n (&w->seen, true, __ATOMIC_ACQ_REL))
    return;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  do /* bounded: the test fails below if it never came */
    clock_gettime (CLOCK_MONOTONIC, &t);
  while (!passdown_running (w->e->vol, 10) && t.tv_sec - t0.tv_sec < 10);
}

static void *
wb_thread (void *opaque)
{
  struct env *e = opaque;

  return (void *)(intptr_t)flusher_batch (e->vol, &e->be, 1);
}

static void
dirty_overwrite (enum hhc_mode mode)
{
  struct env e;
  struct wb_race w = { &e, false };
  pthread_t t;

  seq_env (&e, mode);
  env_write (&e, 12, 1, false); /* 12: written back, clean */
  env_flush (&e);
  assert_int_equal (flusher_writeback_all (e.vol, &e.be), 0);
  env_write (&e, 10, 1, false); /* 10: dirty, being written back */
  env_flush (&e);
  assert_int_equal (counts (&e).clean, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, wb_hook, &w);
  assert_int_equal (pthread_create (&t, NULL, wb_thread, &e), 0);
  while (!__atomic_load_n (&w.seen, __ATOMIC_ACQUIRE))
    sched_yield (); /* the thread gets there or the test times out */
  stream_write (&e, 0, 16, 2);
  assert_true (test_join (t, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  /* 0..3 in the cache; 10 kept dirty with the new data; 12 dropped. */
  assert_int_equal (counts (&e).dirty, 5);
  assert_int_equal (counts (&e).clean, 0);
  for (uint64_t l = 0; l < 16; l++)
    assert_true (reads_v (&e, l, 2));
  env_flush (&e);
  if (mode == HHC_MODE_HHC)
    {
      /* The SSD is lost: the log's replay must not bring back 10's or
       * 12's version 1.
       */
      env_close (&e);
      env_new_ssd (&e);
      env_open (&e);
    }
  else
    assert_int_equal (hhc_drain (e.vol, &e.be), 0);
  for (uint64_t l = 0; l < 16; l++)
    {
      assert_true (backend_has (&e, l, 2));
      assert_true (reads_v (&e, l, 2));
    }
  env_free (&e);
}

static void
test_dirty_overwrite_wb (void **state)
{
  dirty_overwrite (HHC_MODE_WB);
}

static void
test_dirty_overwrite_hhc (void **state)
{
  dirty_overwrite (HHC_MODE_HHC);
}

/* A power cut after a bypassed write over a dirty block that a FLUSH
 * made durable, before the next FLUSH (the backend loses what it did
 * not flush): the block reads the old version or the new one, never
 * the backend's older one (dropping the dirty block would allow it).
 */
static void
crash_after_bypass (enum hhc_mode mode, unsigned seed)
{
  struct env e;
  struct power pw;
  unsigned nd = mode == HHC_MODE_HHC ? 2 : 1;

  seq_env_init (&e, mode);
  power_init (&pw, e.mb);
  e.be.pw = &pw;
  to_pdev (e.ssd.pd)->pw = &pw;
  if (nd == 2)
    to_pdev (e.logs[0].pd)->pw = &pw;
  power_set_devs (&pw, (struct hhc_dev *[]){ e.ssd.cd, e.logs[0].cd }, nd);
  env_open (&e);
  env_write (&e, 10, 1, false);
  env_flush (&e);
  stream_write (&e, 0, 16, 2);
  power_arm (&pw, 0, false, seed, true);
  power_cut (&pw);
  env_close (&e);
  power_restore (&pw);
  env_open (&e);
  if (!reads_v (&e, 10, 1) && !reads_v (&e, 10, 2))
    fail_msg ("%s, seed %u: block 10 lost its flushed version",
              hhc_mode_to_string (mode), seed);
  env_close (&e);
  e.be.pw = NULL;
  to_pdev (e.ssd.pd)->pw = NULL;
  if (nd == 2)
    to_pdev (e.logs[0].pd)->pw = NULL;
  env_free (&e);
  power_destroy (&pw);
}

static void
test_crash_after_bypass (void **state)
{
  for (unsigned seed = 1; seed <= 8; seed++)
    {
      crash_after_bypass (HHC_MODE_WB, seed);
      crash_after_bypass (HHC_MODE_HHC, seed);
    }
}

/* The backend is out: in the write-back modes a bypassed write falls
 * back to the cache (writes keep succeeding, as without a cutoff); in
 * wt it fails.
 */
static void
test_backend_outage (void **state)
{
  enum hhc_mode modes[] = { HHC_MODE_WB, HHC_MODE_HHC, HHC_MODE_WT };

  for (unsigned i = 0; i < 3; i++)
    {
      struct env e;
      unsigned char blk[BS];

      seq_env (&e, modes[i]);
      stream_write (&e, 0, 4, 1);
      membackend_fail_all (e.mb, MB_OP_WRITE, true);
      pattern_fill (blk, 4, 0, SECTORS, 1);
      if (modes[i] == HHC_MODE_WT)
        {
          assert_int_equal (hhc_write (e.vol, &e.be, blk, BS, 4 * BS, false),
                            EIO);
          env_free (&e);
          continue;
        }
      stream_write (&e, 4, 16, 1);
      assert_int_equal (counts (&e).dirty, 16);
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      for (uint64_t l = 0; l < 16; l++)
        assert_true (reads_v (&e, l, 1));
      assert_int_equal (hhc_drain (e.vol, &e.be), 0);
      for (uint64_t l = 0; l < 16; l++)
        assert_true (backend_has (&e, l, 1));
      env_free (&e);
    }
}

/* A whole outage (writes and flushes fail): a bypassed write that fell
 * back to the cache is not a backend write, so a FLUSH does not need
 * the backend for it (as without a cutoff: it succeeds from the SSD or
 * the log) and, above all, the failed backend flush must not make
 * every later FLUSH fail once the backend is back.
 */
static void
test_outage_flush (void **state)
{
  enum hhc_mode modes[] = { HHC_MODE_WB, HHC_MODE_HHC };

  for (unsigned i = 0; i < 2; i++)
    {
      struct env e;

      seq_env (&e, modes[i]);
      stream_write (&e, 0, 4, 1);
      membackend_fail_all (e.mb, MB_OP_WRITE, true);
      membackend_fail_all (e.mb, MB_OP_FLUSH, true);
      stream_write (&e, 4, 8, 1); /* bypassed, fell back to the cache */
      assert_int_equal (counts (&e).dirty, 8);
      assert_int_equal (hhc_flush (e.vol, &e.be), 0);
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      membackend_fail_all (e.mb, MB_OP_FLUSH, false);
      assert_int_equal (hhc_flush (e.vol, &e.be), 0);
      assert_int_equal (hhc_drain (e.vol, &e.be), 0);
      for (uint64_t l = 0; l < 8; l++)
        assert_true (backend_has (&e, l, 1));
      env_free (&e);
    }
}

/* The same outage, and write-back's backend flush fails while the
 * bypassed write is at the backend (it fails and falls back to the
 * cache): that flush dropped nothing a FLUSH covers either, so it is
 * not sticky (the passdown ends not owed: bflush.c judges a failure
 * during a passdown at the passdown's end).
 */
static void
outage_wb_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct env *e = opaque;

  if (offset == 4 * BS)
    (void)flusher_batch (e->vol, &e->be, 1);
}

static void
test_outage_flush_wb_race (void **state)
{
  enum hhc_mode modes[] = { HHC_MODE_WB, HHC_MODE_HHC };

  for (unsigned i = 0; i < 2; i++)
    {
      struct env e;

      seq_env (&e, modes[i]);
      stream_write (&e, 0, 4, 1); /* dirty: for the write-back */
      membackend_fail_all (e.mb, MB_OP_WRITE, true);
      membackend_fail_all (e.mb, MB_OP_FLUSH, true);
      membackend_set_hook (e.mb, MB_OP_WRITE, outage_wb_hook, &e);
      env_write (&e, 4, 1, false); /* bypassed, fell back to the cache */
      membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
      assert_int_equal (counts (&e).dirty, 5);
      assert_int_equal (hhc_flush (e.vol, &e.be), 0);
      membackend_fail_all (e.mb, MB_OP_WRITE, false);
      membackend_fail_all (e.mb, MB_OP_FLUSH, false);
      assert_int_equal (hhc_drain (e.vol, &e.be), 0);
      env_free (&e);
    }
}

/* The other side: a failed write-back flush is sticky when it may
 * have dropped a bypassed write that reached the backend (one that
 * ended before it, one that ran during it and ended owed), and not for
 * a bypassed write that began after it.
 */
enum owed_case { OWED_BEFORE, OWED_DURING, OWED_AFTER };

static void
failing_wb_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct env *e = opaque;

  if (offset == 4 * BS)
    {
      membackend_fail_next (e->mb, MB_OP_FLUSH, 1);
      assert_int_equal (flusher_batch (e->vol, &e->be, 1), -EIO);
    }
}

static void
owed_flush (enum hhc_mode mode, enum owed_case c)
{
  struct env e;
  unsigned char blk[BS];
  int want = c == OWED_AFTER ? 0 : EIO;

  seq_env (&e, mode);
  stream_write (&e, 0, 4, 1); /* dirty: for the write-back */
  if (c == OWED_BEFORE)
    env_write (&e, 4, 1, false); /* bypassed: at the backend */
  if (c != OWED_DURING)
    {
      membackend_fail_next (e.mb, MB_OP_FLUSH, 1);
      assert_int_equal (flusher_batch (e.vol, &e.be, 1), -EIO);
    }
  else /* the flush fails as the write goes out (the hook runs first:
        * the gateway cannot tell that from after)
        */
    membackend_set_hook (e.mb, MB_OP_WRITE, failing_wb_hook, &e);
  if (c != OWED_BEFORE)
    env_write (&e, 4, 1, false); /* bypassed, and it succeeds */
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  pattern_fill (blk, 4, 0, SECTORS, 1);
  assert_int_equal (membackend_cmp (e.mb, false, blk, BS, 4 * BS), 0);
  assert_int_equal (membackend_count (e.mb, MB_FLUSH_ERRORS), 1);
  for (unsigned i = 0; i < 2; i++)
    if (hhc_flush (e.vol, &e.be) != want)
      fail_msg ("mode %s: a bypassed write %s a failed backend flush: "
                "FLUSH %u should return %d",
                hhc_mode_to_string (mode),
                c == OWED_BEFORE   ? "ended before"
                : c == OWED_DURING ? "ran during"
                                   : "began after",
                i + 1, want);
  env_free (&e);
}

static void
test_outage_flush_owed (void **state)
{
  enum hhc_mode modes[] = { HHC_MODE_WB, HHC_MODE_HHC };

  for (unsigned i = 0; i < 2; i++)
    for (enum owed_case c = OWED_BEFORE; c <= OWED_AFTER; c++)
      owed_flush (modes[i], c);
}

/* A FLUSH after a bypassed write flushes the backend, even in hhc
 * (where a FLUSH of cached writes needs only the log).
 */
static void
test_flush_backend (void **state)
{
  enum hhc_mode modes[] = { HHC_MODE_WB, HHC_MODE_HHC };

  for (unsigned i = 0; i < 2; i++)
    {
      struct env e;
      uint64_t n;

      seq_env (&e, modes[i]);
      stream_write (&e, 0, 4, 1); /* cached: no backend flush */
      n = membackend_count (e.mb, MB_FLUSHES);
      env_flush (&e);
      assert_int_equal (membackend_count (e.mb, MB_FLUSHES), n);
      env_write (&e, 4, 1, false); /* bypassed */
      assert_false (backend_has (&e, 4, 1));
      env_flush (&e);
      assert_int_equal (membackend_count (e.mb, MB_FLUSHES), n + 1);
      assert_true (backend_has (&e, 4, 1));
      env_free (&e);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_boundary),
    cmocka_unit_test (test_interleaved),
    cmocka_unit_test (test_jump),
    cmocka_unit_test (test_eviction),
    cmocka_unit_test (test_scan_among_random),
    cmocka_unit_test (test_read_bypass),
    cmocka_unit_test (test_write_bypass_wt),
    cmocka_unit_test (test_dirty_overwrite_wb),
    cmocka_unit_test (test_dirty_overwrite_hhc),
    cmocka_unit_test (test_crash_after_bypass),
    cmocka_unit_test (test_backend_outage),
    cmocka_unit_test (test_outage_flush),
    cmocka_unit_test (test_outage_flush_wb_race),
    cmocka_unit_test (test_outage_flush_owed),
    cmocka_unit_test (test_flush_backend),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
