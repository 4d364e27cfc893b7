/* The SSD cache's invariants 2 to 4 (docs/design.md §4), on a crash
 * device: eviction never takes a dirty block or one under write-back,
 * a block is clean only after its backend write and flush, a FLUSH or
 * FUA write makes data and metadata durable; RAM per block.
 * (Invariant 1 under slot reuse: test-cache-reuse.c; power cuts and a
 * failed cache device: test-cache-crash.c; the format and load:
 * test-cache-format.c; the fixture: cacheenv.h.)
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
#include <unistd.h>

#include <cmocka.h>

#include "cacheenv.h"
#include "common.h"
#include "flusher.h"
#include "reclaim.h"
#include "vol.h"

/* ---- invariant 2: eviction never picks a dirty block ---- */

static void
test_inv2_no_dirty_eviction (void **state)
{
  struct env e;
  struct hhc_counts c;
  uint32_t ev;
  uint64_t errs;

  env_init (&e, 64, 1 << 20, true);
  env_open_ok (&e);
  membackend_fail_all (e.mb, MB_OP_WRITE, true);
  /* Dirty up to dirty-max (95% of 64 = 60). */
  assert_int_equal (e.vol->dirty_max, 60);
  for (uint64_t l = 0; l < 60; l++)
    write_v (&e, l, 7);
  /* Write-back fails: everything stays dirty. */
  assert_true (flusher_batch (e.vol, e.mb, 2) < 0);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 60);
  /* Reads of other blocks fill the 4 free slots (clean) ... */
  for (uint64_t l = 100; l < 104; l++)
    assert_int_equal (read_v (&e, l), 0);
  /* ... eviction takes exactly those, never a dirty one. */
  ev = vol_evict (e.vol, 1000);
  assert_int_equal (ev, 4);
  assert_int_equal (vol_reclaim (e.vol), 0);
  assert_int_equal (vol_evict (e.vol, 1000), 0);
  /* Reads with no slot to spare go around the cache. */
  for (uint64_t l = 100; l < 200; l++)
    {
      assert_int_equal (read_v (&e, l), 0);
      vol_reclaim (e.vol);
    }
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 60);
  for (uint64_t l = 0; l < 60; l++)
    assert_int_equal (read_v (&e, l), 7);

  /* The same with the flusher thread running and retrying. */
  errs = membackend_count (e.mb, MB_WRITE_ERRORS);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  for (int round = 0; round < 3; round++)
    for (uint64_t l = 100; l < 256; l++)
      assert_int_equal (read_v (&e, l), 0);
  assert_true (membackend_wait_count (e.mb, MB_WRITE_ERRORS, errs + 2, 30000));
  for (uint64_t l = 0; l < 60; l++)
    assert_int_equal (read_v (&e, l), 7);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 60);
  assert_true (c.evictions >= 4);
  /* Backend back: everything drains. */
  membackend_fail_all (e.mb, MB_OP_WRITE, false);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < 60; l++)
    {
      unsigned char blk[BS];
      pattern_fill (blk, l, 0, SECTORS, 7);
      assert_int_equal (membackend_cmp (e.mb, true, blk, BS, l * BS), 0);
    }
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
}

/* Blocks under write-back are not evicted either. */
struct evict_during_wb {
  struct env *e;
  uint32_t evicted;
  bool mapped_after;
};

static void
evict_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct evict_during_wb *x = opaque;
  struct hhc_volume *vol = x->e->vol;
  uint64_t lba = offset / BS;
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);

  x->evicted += vol_evict (vol, 1000);
  pthread_mutex_lock (&st->lock);
  x->mapped_after
      = index_lookup (&vol->idx, lba) != HHC_NIL
        && (active_get (st, index_lookup (&vol->idx, lba)) & ACT_WB);
  pthread_mutex_unlock (&st->lock);
}

static void
test_inv2_not_during_writeback (void **state)
{
  struct env e;
  struct evict_during_wb x = { &e, 0, false };
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, true);
  env_open_ok (&e);
  write_v (&e, 3, 1);
  /* Some clean blocks that may go. */
  for (uint64_t l = 10; l < 20; l++)
    assert_int_equal (read_v (&e, l), 0);
  membackend_set_hook (e.mb, MB_OP_WRITE, evict_hook, &x);
  assert_int_equal (flusher_batch (e.vol, e.mb, 1), 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (x.evicted, 10);
  assert_true (x.mapped_after);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 0);
  assert_int_equal (c.clean, 1);
  assert_int_equal (read_v (&e, 3), 1);
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
}

/* ---- invariant 3: clean only after backend write + flush, and only
 * if not rewritten meanwhile.
 */

struct inv3 {
  struct env *e;
  int violations;
  uint64_t rewrite_lba; /* rewrite this block from the write hook */
  bool rewritten;
};

/* At a backend write or flush: no block of the batch is clean yet. */
static void
inv3_write_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct inv3 *x = opaque;

  for (uint64_t l = offset / BS; l * BS < offset + count; l++)
    if (block_state (x->e->vol, l) != SLOT_DIRTY)
      __atomic_fetch_add (&x->violations, 1, __ATOMIC_RELAXED);
  if (x->rewrite_lba >= offset / BS && x->rewrite_lba * BS < offset + count
      && !x->rewritten)
    {
      /* A client rewrites the block while it is being written back. */
      x->rewritten = true;
      write_v (x->e, x->rewrite_lba, 2);
    }
}

static void
inv3_flush_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct inv3 *x = opaque;

  for (uint64_t l = 0; l < 10; l++)
    if (block_state (x->e->vol, l) != SLOT_DIRTY)
      __atomic_fetch_add (&x->violations, 1, __ATOMIC_RELAXED);
}

static void
assert_backend_has (struct env *e, bool durable, uint64_t lba, uint64_t v)
{
  unsigned char blk[BS];

  pattern_fill (blk, lba, 0, SECTORS, v);
  assert_int_equal (membackend_cmp (e->mb, durable, blk, BS, lba * BS), 0);
}

static void
test_inv3_clean_after_flush (void **state)
{
  struct env e;
  struct inv3 x = { &e, 0, UINT64_MAX, false };
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, true);
  e.info.preferred_block = BS; /* one extent per block */
  env_open_ok (&e);
  for (uint64_t l = 0; l < 10; l++)
    write_v (&e, l, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, inv3_write_hook, &x);
  membackend_set_hook (e.mb, MB_OP_FLUSH, inv3_flush_hook, &x);

  /* Writes succeed but the backend flush fails: nothing is clean. */
  membackend_fail_next (e.mb, MB_OP_FLUSH, 1);
  assert_int_equal (flusher_batch (e.vol, e.mb, 2), -EIO);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 10);
  for (uint64_t l = 0; l < 10; l++)
    {
      assert_int_equal (block_state (e.vol, l), SLOT_DIRTY);
      assert_backend_has (&e, false, l, 1); /* written ... */
      assert_backend_has (&e, true, l, 0);  /* ... not durable */
    }
  /* One extent fails: its blocks stay dirty, the others clean. */
  membackend_fail_next (e.mb, MB_OP_WRITE, 1);
  assert_true (flusher_batch (e.vol, e.mb, 1) > 0); /* the others: progress */
  hhc_get_counts (e.vol, &c);
  assert_true (c.dirty > 0 && c.dirty < 10);
  for (uint64_t l = 0; l < 10; l++)
    if (block_state (e.vol, l) == SLOT_CLEAN)
      assert_backend_has (&e, true, l, 1);
  assert_int_equal (x.violations, 0);

  /* Now it works: clean, and the durable copy has every block. */
  membackend_set_hook (e.mb, MB_OP_FLUSH, NULL, NULL);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 0);
  for (uint64_t l = 0; l < 10; l++)
    {
      assert_int_equal (block_state (e.vol, l), SLOT_CLEAN);
      assert_backend_has (&e, true, l, 1);
    }
  assert_int_equal (x.violations, 0);

  /* Generation check: rewritten during its write-back, the block
   * stays dirty; the next round writes the new data.
   */
  for (uint64_t l = 0; l < 4; l++)
    write_v (&e, l, 3);
  x.rewrite_lba = 2;
  assert_true (flusher_batch (e.vol, e.mb, 1) >= 0);
  assert_true (x.rewritten);
  hhc_get_counts (e.vol, &c);
  assert_int_equal (c.dirty, 1);
  assert_int_equal (block_state (e.vol, 2), SLOT_DIRTY);
  assert_int_equal (block_state (e.vol, 1), SLOT_CLEAN);
  assert_backend_has (&e, true, 2, 3);
  assert_int_equal (read_v (&e, 2), 2);
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_backend_has (&e, true, 2, 2);
  assert_int_equal (read_v (&e, 2), 2);
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
}

/* ---- invariant 4: a FLUSH makes data and metadata durable ---- */

static void
check_flush_durable (enum hhc_mode mode, bool use_fua)
{
  struct env e;

  env_init (&e, 64, 1 << 20, true);
  e.conf.mode = mode;
  env_open_ok (&e);
  for (uint64_t l = 0; l < 30; l++)
    write_v (&e, l, 1);
  for (uint64_t l = 0; l < 5; l++)
    write_v (&e, l, 2); /* rewrites in place */
  if (use_fua)
    {
      unsigned char blk[BS];
      pattern_fill (blk, 40, 0, SECTORS, 2);
      assert_int_equal (hhc_write (e.vol, e.mb, blk, BS, 40 * BS, true), 0);
    }
  else
    assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  /* Not covered: may be lost. */
  for (uint64_t l = 30; l < 35; l++)
    write_v (&e, l, 3);
  write_v (&e, 6, 3);
  /* Power cut dropping everything not synced. */
  env_crash_restart (&e, keep_none);
  if (mode != HHC_MODE_WB)
    {
      /* The backend was flushed too (pt, wt). */
      unsigned char blk[BS];
      pattern_fill (blk, 3, 0, SECTORS, 2);
      assert_int_equal (membackend_cmp (e.mb, true, blk, BS, 3 * BS), 0);
    }
  env_open_ok (&e);
  for (uint64_t l = 0; l < 30; l++)
    {
      int64_t v = read_v (&e, l);
      assert_true (v >= 0); /* never garbage, never another block */
      if (use_fua && l != 40)
        continue; /* FUA covers only its own write */
      if (l == 6)
        assert_true (v == 1 || v == 3);
      else
        assert_int_equal (v, l < 5 ? 2 : 1);
    }
  if (use_fua)
    assert_int_equal (read_v (&e, 40), 2);
  for (uint64_t l = 30; l < 35; l++)
    {
      int64_t v = read_v (&e, l);
      assert_true (v == 0 || v == 3);
    }
  assert_int_equal (env_close (&e), 0);
  env_free (&e);
}

static void
test_inv4_flush_durable (void **state)
{
  check_flush_durable (HHC_MODE_WB, false);
  check_flush_durable (HHC_MODE_WT, false);
  check_flush_durable (HHC_MODE_PT, false);
}

static void
test_inv4_fua_durable (void **state)
{
  check_flush_durable (HHC_MODE_WB, true);
  check_flush_durable (HHC_MODE_WT, true);
}

/* ---- RAM per block on a large cache ---- */

static void
test_ram_per_block (void **state)
{
  char dir[] = "/tmp/hhc-test-XXXXXX";
  char path[64];
  struct membackend *mb = membackend_new (4096);
  struct hhc_backend_info info = membackend_info (mb, 0, "big");
  struct hhc_conf conf;
  struct hhc_volume *vol = NULL;
  double per;

  assert_non_null (mkdtemp (dir));
  snprintf (path, sizeof path, "%s/cache", dir);
  /* No I/O reaches the backend at open: a 1 TiB volume is fine. */
  info.size = UINT64_C (1) << 40;
  hhc_conf_init (&conf);
  conf.cache_path = path;
  conf.cache_size = UINT64_C (1) << 30; /* sparse file */
  conf.msgfn = test_msg;
  assert_int_equal (hhc_open (&conf, NULL, &membackend_ops, &info, &vol), 0);
  per = hhc_ram_per_block (vol);
  printf ("RAM per cached block: %.2f bytes (%u slots of %u bytes)\n", per,
          vol->cache.nslots, vol->bs);
  assert_true (vol->cache.nslots > 200000);
  assert_true (per <= 21.0);
  assert_int_equal (hhc_close (vol), 0);
  unlink (path);
  rmdir (dir);
  membackend_free (mb);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_inv2_no_dirty_eviction),
    cmocka_unit_test (test_inv2_not_during_writeback),
    cmocka_unit_test (test_inv3_clean_after_flush),
    cmocka_unit_test (test_inv4_flush_durable),
    cmocka_unit_test (test_inv4_fua_durable),
    cmocka_unit_test (test_ram_per_block),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
