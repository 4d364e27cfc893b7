/* The SSD cache under power cuts and device failure (docs/design.md
 * §4.6), on a crash device: a clean block rewritten in place or copied
 * on write and then zeroed before the next commit, warm (wb) and cold
 * (wt) restarts after a crash, and a cache device that failed a sync
 * never supplying stale slot contents.  (The invariants: test-cache.c
 * and test-cache-reuse.c; the fixture: cacheenv.h.)
 */
#include <config.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cacheenv.h"
#include "common.h"
#include "flusher.h"
#include "reclaim.h"
#include "vol.h"

/* ---- power cuts: what a restart trusts ---- */

/* A clean cached block overwritten in place (wb), then a power cut
 * before the next commit: the data write reached the SSD, the "dirty"
 * state did not.  After restart the cache must not present a block as
 * clean whose slot differs from the backend: reads would return the
 * new data now and the old data once the block is evicted, i.e. the
 * block would change with nobody writing it.
 */
static bool
keep_all (size_t i, void *opaque)
{
  return true;
}

static void
test_clean_rewrite_then_crash (void **state)
{
  struct env e;
  int64_t first, after_evict;

  env_init (&e, 64, 1 << 20, true);
  env_open_ok (&e);
  write_v (&e, 4, 1);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0); /* backend: v1 */
  assert_int_equal (hhc_flush (e.vol, e.mb), 0); /* durable: clean */
  write_v (&e, 4, 2);                            /* in place, not flushed */
  env_crash_restart (&e, keep_all);              /* data write landed */
  env_open_ok (&e);
  first = read_v (&e, 4);
  assert_true (first == 1 || first == 2);
  vol_evict (e.vol, 1000);
  assert_int_equal (vol_reclaim (e.vol), 0);
  after_evict = read_v (&e, 4);
  if (getenv ("HHC_TEST_VERBOSE"))
    fprintf (stderr, "first %lld after evict %lld dirty %llu\n",
             (long long)first, (long long)after_evict,
             (unsigned long long)e.vol->ndirty);
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
  if (first != after_evict)
    fail_msg ("after a power cut, block 4 read version %lld, then version "
              "%lld once evicted, with no write in between: the cache "
              "kept as clean a slot rewritten in place",
              (long long)first, (long long)after_evict);
}

/* A clean block rewritten (copy-on-write: the old slot is freed, not
 * yet durably) and then zeroed: the zero reaches the backend, which
 * may make it durable at once.  If the old slot's persisted clean
 * entry survived that, after a power cut the cache would serve the old
 * data as clean over the backend's zeros.  The core commits before a
 * trim or zero reaches the backend; check that every block the cache
 * calls clean after the crash equals the backend's data.
 */
static void
test_cow_then_zero_crash (void **state)
{
  struct env e;
  unsigned char blk[BS], be[BS];

  env_init (&e, 64, 1 << 20, true);
  env_open_ok (&e);
  write_v (&e, 4, 1);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0); /* backend v1, clean */
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  write_v (&e, 4, 2); /* copy-on-write, nothing committed */
  assert_int_equal (hhc_zero (e.vol, e.mb, BS, 4 * BS, false), 0);
  /* The backend made everything durable by itself. */
  membackend_peek (e.mb, false, be, BS, 4 * BS);
  membackend_poke (e.mb, be, BS, 4 * BS);
  env_crash_restart (&e, keep_none);
  env_open_ok (&e);
  if (block_state (e.vol, 4) == SLOT_CLEAN)
    {
      assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, 4 * BS), 0);
      membackend_peek (e.mb, true, be, BS, 4 * BS);
      if (memcmp (blk, be, BS) != 0)
        fail_msg ("block 4 is clean in the cache after the crash but "
                  "differs from the backend's durable data");
    }
  env_free (&e);
}

/* After a crash, a wb cache keeps its clean blocks (they are trusted:
 * copy-on-write, commits before write-back); a wt cache drops them (a
 * crash may have lost a backend write the cache holds) but keeps dirty
 * ones.
 */
static void
check_warm_after_crash (enum hhc_mode mode, bool want_warm)
{
  struct env e;
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, true);
  e.conf.mode = mode;
  env_open_ok (&e);
  for (uint64_t l = 0; l < 8; l++)
    assert_true (read_v (&e, l) >= 0); /* fills: clean */
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  env_crash_restart (&e, keep_all);
  env_open_ok (&e);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.clean, want_warm ? 8 : 0);
  for (uint64_t l = 0; l < 8; l++)
    assert_true (read_v (&e, l) >= 0);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.read_hits, want_warm ? 8 : 0);
  env_free (&e);
}

static void
test_warm_after_crash_wb (void **state)
{
  check_warm_after_crash (HHC_MODE_WB, true);
}

static void
test_cold_after_crash_wt (void **state)
{
  check_warm_after_crash (HHC_MODE_WT, false);
}

/* ---- after the cache device failed ----
 *
 * A device that failed a sync may have lost writes that it had
 * acknowledged (a drive that lost its volatile cache in a reset; Linux
 * after a failed fdatasync, once the page cache drops the pages):
 * reads then return the older on-disk contents.  Once the core knows
 * this (the FLUSH failed, cache.failed is set), it must not copy slot
 * contents anywhere as the data of the LBA the slot is mapped to: a
 * slot reused from the free pool still holds its previous block's
 * data on the medium.
 */
static void
test_failed_cache_no_stale_writeback (void **state)
{
  struct env e;
  uint32_t k, k2;
  struct hhc_stripe *st;
  unsigned char blk[BS];
  uint64_t l, v;
  uint32_t sec;
  int d, r;
  bool backend_bad, read_bad;

  env_init (&e, 32, 1 << 20, true);
  env_open_ok (&e);
  /* Block 5 in slot k, durable, written back, evicted: k is free. */
  write_v (&e, 5, 1);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  st = index_stripe (&e.vol->idx, 5);
  pthread_mutex_lock (&st->lock);
  k = index_lookup (&e.vol->idx, 5);
  pthread_mutex_unlock (&st->lock);
  assert_int_equal (vol_evict (e.vol, 100), 1);
  assert_int_equal (vol_reclaim (e.vol), 0);
  /* Block 9 gets slot k (the pool hands out the last freed slot). */
  write_v (&e, 9, 1);
  st = index_stripe (&e.vol->idx, 9);
  pthread_mutex_lock (&st->lock);
  k2 = index_lookup (&e.vol->idx, 9);
  pthread_mutex_unlock (&st->lock);
  assert_int_equal (k2, k);

  /* The device loses its unsynced writes and fails from now on; the
   * gateway keeps running and learns it from the FLUSH.
   */
  crashdev_crash (e.cdev, 1, keep_none, NULL);
  assert_int_not_equal (hhc_flush (e.vol, e.mb), 0);

  /* A client read of block 9: an error, or block 9's data. */
  r = hhc_read (e.vol, e.mb, blk, BS, 9 * BS);
  d = pattern_decode (blk, &l, &sec, &v);
  read_bad = r == 0 && !(d == 1 && l == 9);
  /* Write-back: may fail, must not write block 5's data over 9. */
  (void)flusher_batch (e.vol, e.mb, 1);
  membackend_peek (e.mb, false, blk, PAT_SECTOR, 9 * BS);
  d = pattern_decode (blk, &l, &sec, &v);
  backend_bad = !(d == 1 && l == 9);
  env_close (&e);
  env_free (&e);
  if (backend_bad || read_bad)
    fail_msg ("after the cache device failed: %s%s%s",
              read_bad ? "a read of block 9 returned block 5's data" : "",
              read_bad && backend_bad ? "; " : "",
              backend_bad ? "write-back wrote block 5's data (read from "
                            "the failed device) over block 9 in the "
                            "backend"
                          : "");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_clean_rewrite_then_crash),
    cmocka_unit_test (test_warm_after_crash_wb),
    cmocka_unit_test (test_cow_then_zero_crash),
    cmocka_unit_test (test_cold_after_crash_wt),
    cmocka_unit_test (test_failed_cache_no_stale_writeback),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
