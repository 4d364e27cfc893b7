/* Write-back (docs/design.md §6): watermarks, drain, backend errors,
 * the stall at dirty-max.  (Races of write-back with client I/O:
 * test-flusher-race.c; coalescing: test-flusher-coalesce.c; what one
 * batch takes: test-flusher-batch.c; the fixture: flusherenv.h.)
 *
 * Where determinism matters the tests call flusher_batch or hhc_drain
 * themselves instead of running the flusher thread; where they run it
 * (hhc_start), they wait on the backend's counters (condition
 * variables with a timeout), never on sleeps.
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

#include "common.h"
#include "devcrash.h"
#include "flusher.h"
#include "flusherenv.h"
#include "membackend.h"
#include "preopen.h"
#include "reclaim.h"
#include "vol.h"

/* ---- watermarks ---- */

static void
test_watermarks (void **state)
{
  struct env e;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  assert_int_equal (e.vol->dirty_low, 12);  /* 20% of 64 */
  assert_int_equal (e.vol->dirty_high, 38); /* 60% */
  assert_int_equal (e.vol->dirty_max, 60);  /* 95% */
  hhc_close (e.vol);
  e.vol = NULL;
  e.conf.dirty_low = 10;
  e.conf.dirty_high = 50;
  e.conf.dirty_max = 90;
  env_open (&e);
  assert_int_equal (e.vol->dirty_low, 6);
  assert_int_equal (e.vol->dirty_high, 32);
  assert_int_equal (e.vol->dirty_max, 57);
  hhc_close (e.vol);
  e.vol = NULL;
  /* Inconsistent watermarks are refused. */
  e.conf.dirty_low = 70;
  assert_int_equal (
      hhc_open (&e.conf, &e.pre, &membackend_ops, &e.info, &e.vol), EINVAL);
  e.conf.dirty_low = 20;
  e.conf.dirty_max = 101;
  assert_int_equal (
      hhc_open (&e.conf, &e.pre, &membackend_ops, &e.info, &e.vol), EINVAL);
  e.vol = NULL;
  env_free (&e);
}

/* Below dirty-low the flusher writes back only once the client has
 * been idle (1 s): every write-back it starts must see an idle client.
 */
struct idle_probe {
  struct hhc_volume *vol;
  uint64_t min_idle_ns; /* smallest idle time seen at a write-back */
  uint64_t calls;
};

static void
idle_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct idle_probe *p = opaque;
  uint64_t last = __atomic_load_n (&p->vol->last_io_ns, __ATOMIC_RELAXED);
  uint64_t idle = hhc_now_ns () - last;

  if (p->calls++ == 0 || idle < p->min_idle_ns)
    p->min_idle_ns = idle;
}

static void
test_idle_writeback_below_low (void **state)
{
  struct env e;
  struct idle_probe p = { NULL, 0, 0 };

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  p.vol = e.vol;
  e.conf.writeback_threads = 1;
  e.vol->conf.writeback_threads = 1; /* the hook runs in one thread */
  membackend_set_hook (e.mb, MB_OP_WRITE, idle_hook, &p);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < 3; l++) /* 3 < dirty-low (12) */
    write_v (&e, l, 1);
  assert_true (membackend_wait_count (e.mb, MB_WRITES, 1, TIMEOUT_MS));
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, 1, TIMEOUT_MS));
  hhc_close (e.vol);
  e.vol = NULL;
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_true (p.calls >= 1);
  /* The core waits for 1 s of idleness; any real wait (not the 20-100
   * ms pace of an active flusher) shows the rule is kept.
   */
  if (p.min_idle_ns < UINT64_C (200000000))
    fail_msg ("below dirty-low, write-back started after only %llu ms of "
              "client idleness",
              (unsigned long long)(p.min_idle_ns / 1000000));
  for (uint64_t l = 0; l < 3; l++)
    assert_true (backend_has (&e, true, l, 1));
  env_free (&e);
}

/* Above dirty-low the flusher writes back without waiting for idle
 * (the test does not measure when; it only waits for it).
 */
static void
test_writeback_above_low (void **state)
{
  struct env e;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < 40; l++) /* above dirty-high (38) */
    write_v (&e, l, 1);
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, 1, TIMEOUT_MS));
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  for (uint64_t l = 0; l < 40; l++)
    assert_true (backend_has (&e, true, l, 1));
  env_free (&e);
}

/* ---- drain ---- */

static void
test_drain (void **state)
{
  struct env e;
  const uint64_t size = 1 << 20;
  unsigned char *shadow = calloc (1, size), *got = malloc (size);
  unsigned char buf[3 * BS];
  uint64_t s = 5;
  struct hhc_counts c;

  assert_non_null (shadow);
  assert_non_null (got);
  env_init (&e, 128, size, 0);
  env_open (&e);
  for (int i = 0; i < 100; i++)
    {
      uint64_t off = test_rand_below (&s, 120) * BS + test_rand_below (&s, BS);
      uint32_t len = 1 + test_rand_below (&s, sizeof buf);
      for (uint32_t j = 0; j < len; j++)
        buf[j] = test_rand (&s);
      assert_int_equal (hhc_write (e.vol, e.mb, buf, len, off, false), 0);
      memcpy (shadow + off, buf, len);
    }
  assert_true (dirty (&e) > 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 0);
  assert_true (c.writeback_blocks > 0);
  membackend_peek (e.mb, true, got, size, 0);
  assert_memory_equal (got, shadow, size);
  /* Draining a clean cache is a no-op. */
  membackend_reset_counts (e.mb);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (membackend_count (e.mb, MB_WRITES), 0);
  free (shadow);
  free (got);
  env_free (&e);
}

/* hhccore.h: drain writes back every dirty block "and flushes the
 * backend" (what hhcctl drain promises: afterwards the backend alone
 * holds the volume durably).  A zero passed down to the backend and
 * not flushed yet must be durable after a drain too, even when no
 * block was dirty.
 */
static void
test_drain_flushes_backend (void **state)
{
  struct env e;
  unsigned char blk[BS], zero[BS];
  bool durable;

  memset (zero, 0, sizeof zero);
  env_init (&e, 64, 1 << 20, 0);
  pattern_fill (blk, 2, 0, SECTORS, 0);
  membackend_poke (e.mb, blk, BS, 2 * BS);
  env_open (&e);
  assert_int_equal (hhc_zero (e.vol, e.mb, BS, 2 * BS, false), 0);
  assert_int_equal (dirty (&e), 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  durable = membackend_cmp (e.mb, true, zero, BS, 2 * BS) == 0;
  env_free (&e);
  if (!durable)
    fail_msg ("hhc_drain returned with a zeroed block not flushed to the "
              "backend (no dirty blocks, so no backend flush)");
}

/* In pt and wt modes, hhc_start first writes back what an earlier
 * write-back run left dirty.
 */
static void
test_start_drains_in_wt (void **state)
{
  struct env e;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  for (uint64_t l = 0; l < 10; l++)
    write_v (&e, l, 1);
  assert_int_equal (hhc_close (e.vol), 0);
  e.vol = NULL;
  e.conf.mode = HHC_MODE_WT;
  env_open (&e);
  assert_int_equal (dirty (&e), 10);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  for (uint64_t l = 0; l < 10; l++)
    assert_true (backend_has (&e, true, l, 1));
  env_free (&e);
}

/* ---- backend errors ---- */

static void
test_backend_errors (void **state)
{
  struct env e;
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  for (uint64_t l = 0; l < 20; l++)
    write_v (&e, l, 1);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  assert_int_equal (flusher_batch (e.vol, e.mb, 4), -EIO);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 20);
  assert_int_equal (c.writeback_blocks, 0);
  assert_true (c.writeback_errors >= 1);
  /* drain gives up after a few failures, with the error. */
  assert_int_equal (hhc_drain (e.vol, e.mb), EIO);
  /* Cached data stays readable, and writes go on into the cache. */
  for (uint64_t l = 0; l < 20; l++)
    assert_true (reads_v (&e, l, 1));
  write_v (&e, 3, 2);
  write_v (&e, 30, 2);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 21);
  assert_int_equal (membackend_count (e.mb, MB_WRITES), 0);
  /* A failing flush also keeps them dirty. */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (flusher_batch (e.vol, e.mb, 4), -EIO);
  assert_int_equal (dirty (&e), 21);
  /* Backend back: drain succeeds. */
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  for (uint64_t l = 0; l < 20; l++)
    assert_true (backend_has (&e, true, l, l == 3 ? 2 : 1));
  assert_true (backend_has (&e, true, 30, 2));
  env_free (&e);
}

/* Backend errors: the flusher retries with a growing (capped
 * exponential) back-off, not at a fixed short interval.  Measured
 * between the batches' backend flushes (each failed batch still ends
 * with one); nothing kicks the flusher meanwhile.  Lower bounds only.
 */
struct flush_times {
  pthread_mutex_t lock;
  uint64_t t[8];
  unsigned n;
};

static void
flush_time_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct flush_times *ft = opaque;

  pthread_mutex_lock (&ft->lock);
  if (ft->n < 8)
    ft->t[ft->n++] = hhc_now_ns ();
  pthread_mutex_unlock (&ft->lock);
}

static void
test_backoff_grows (void **state)
{
  struct env e;
  struct flush_times ft = { .n = 0 };
  uint64_t gap[4];

  pthread_mutex_init (&ft.lock, NULL);
  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  for (uint64_t l = 0; l < 20; l++) /* above dirty-low */
    write_v (&e, l, 1);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  membackend_set_hook (e.mb, MB_OP_FLUSH, flush_time_hook, &ft);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, 5, TIMEOUT_MS));
  hhc_close (e.vol);
  e.vol = NULL;
  for (int i = 0; i < 4; i++)
    gap[i] = (ft.t[i + 1] - ft.t[i]) / 1000000;
  pthread_mutex_destroy (&ft.lock);
  env_free (&e);
  /* 100, 200, 400, 800 ms with doubling; at least 350 ms by the 4th. */
  if (gap[3] < 350)
    fail_msg ("retry intervals after backend write errors: %llu, %llu, "
              "%llu, %llu ms (no back-off growth)",
              (unsigned long long)gap[0], (unsigned long long)gap[1],
              (unsigned long long)gap[2], (unsigned long long)gap[3]);
}

/* ---- the stall at dirty-max ---- */

static void
test_stall_at_dirty_max (void **state)
{
  struct env e;
  struct write_arg w;
  pthread_t tw;
  struct timespec ts;
  uint64_t errs;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < e.vol->dirty_max; l++)
    write_v (&e, l, 1);
  assert_int_equal (dirty (&e), e.vol->dirty_max);

  write_arg_init (&w, &e, 100, 1);
  assert_int_equal (pthread_create (&tw, NULL, write_thread, &w), 0);
  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&w.lock);
  while (!w.started)
    assert_int_not_equal (pthread_cond_timedwait (&w.cond, &w.lock, &ts),
                          ETIMEDOUT);
  pthread_mutex_unlock (&w.lock);
  /* The flusher keeps failing (and retrying: each failed batch still
   * ends with a backend flush) while the writer waits.
   */
  errs = membackend_count (e.mb, MB_FLUSHES);
  assert_true (membackend_wait_count (e.mb, MB_FLUSHES, errs + 3, TIMEOUT_MS));
  assert_false (write_done (&w));
  assert_true (stat_get (&e.vol->stats.stalls) > 0);
  /* Reads of cached data go on meanwhile. */
  for (uint64_t l = 0; l < 10; l++)
    assert_true (reads_v (&e, l, 1));
  /* Backend back: the writer completes, without an error. */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  assert_true (test_join (tw, TIMEOUT_MS));
  assert_int_equal (w.result, 0);
  assert_true (reads_v (&e, 100, 1));
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_true (backend_has (&e, true, 100, 1));
  env_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_watermarks),
    cmocka_unit_test (test_idle_writeback_below_low),
    cmocka_unit_test (test_writeback_above_low),
    cmocka_unit_test (test_drain),
    cmocka_unit_test (test_drain_flushes_backend),
    cmocka_unit_test (test_start_drains_in_wt),
    cmocka_unit_test (test_backend_errors),
    cmocka_unit_test (test_backoff_grows),
    cmocka_unit_test (test_stall_at_dirty_max),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
