/* The SSD cache's invariants (docs/design.md §4), on a crash device:
 * invariants 1 to 4, crashes after a copy-on-write, warm and cold
 * restarts, a failed cache device, RAM per block.  The format and
 * load tests are in test-cache-format.c.
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

/* ---- invariant 1: a slot is written with an LBA's data only if its
 * persisted entry says free or that LBA.  metacheck checks every slot
 * write of a concurrent workload with a running flusher and a small
 * cache (many evictions and slot reuses); a crash at a random write
 * then must leave no block reading another block's data.
 */

#define I1_BLOCKS 512 /* 2 MiB backend */
#define I1_SLOTS 48
#define I1_THREADS 4

struct i1_worker {
  struct env *e;
  uint64_t seed;
  uint64_t *version; /* shared, atomic */
  int unexpected;    /* errors before the crash */
};

static bool
i1_crashed (struct env *e)
{
  return metacheck_crashed (e->mc);
}

static void *
i1_run (void *arg)
{
  struct i1_worker *w = arg;
  struct env *e = w->e;
  unsigned char blk[BS];

  for (int i = 0; i < 400 && !i1_crashed (e); i++)
    {
      uint64_t op = test_rand_below (&w->seed, 100);
      /* Half the traffic on a hot range, so blocks get rewritten. */
      uint64_t lba = test_rand_below (&w->seed, 2)
                         ? test_rand_below (&w->seed, 40)
                         : test_rand_below (&w->seed, I1_BLOCKS);
      int r;
      if (op < 55)
        {
          uint64_t v = __atomic_add_fetch (w->version, 1, __ATOMIC_RELAXED);
          uint32_t s0 = test_rand_below (&w->seed, SECTORS);
          uint32_t n = 1 + test_rand_below (&w->seed, SECTORS - s0);
          if (test_rand_below (&w->seed, 2))
            s0 = 0, n = SECTORS;
          pattern_fill (blk, lba, s0, n, v);
          r = hhc_write (e->vol, e->mb, blk, n * PAT_SECTOR,
                         lba * BS + s0 * PAT_SECTOR, false);
        }
      else if (op < 90)
        r = hhc_read (e->vol, e->mb, blk, BS, lba * BS);
      else if (op < 97)
        r = hhc_flush (e->vol, e->mb);
      else
        r = hhc_prefetch (e->vol, e->mb, 4 * BS,
                          (lba < I1_BLOCKS - 4 ? lba : I1_BLOCKS - 4) * BS);
      if (r && !i1_crashed (e))
        w->unexpected++;
    }
  return NULL;
}

/* A power cut stops the whole gateway: nothing reaches the backend
 * after it.
 */
static void
freeze_backend (void *opaque)
{
  struct membackend *mb = opaque;

  membackend_fail_all (mb, MB_OP_WRITE, true);
  membackend_fail_all (mb, MB_OP_FLUSH, true);
}

static void
thaw_backend (struct membackend *mb)
{
  membackend_fail_all (mb, MB_OP_WRITE, false);
  membackend_fail_all (mb, MB_OP_FLUSH, false);
}

/* Where a wrong sector came from: the cache or the backend. */
static void
i1_diag (struct env *e, uint64_t l, uint32_t s)
{
  unsigned char bb[PAT_SECTOR];
  uint64_t bl = 0, bv = 0;
  uint32_t bs2 = 0, slot;
  struct hhc_stripe *st = index_stripe (&e->vol->idx, l);
  int bd;

  pthread_mutex_lock (&st->lock);
  slot = index_lookup (&e->vol->idx, l);
  pthread_mutex_unlock (&st->lock);
  membackend_peek (e->mb, false, bb, PAT_SECTOR, l * BS + s * PAT_SECTOR);
  bd = pattern_decode (bb, &bl, &bs2, &bv);
  fprintf (stderr,
           "diag: block %llu cached in slot %u (%s); the backend holds "
           "decode=%d block %llu version %llu\n",
           (unsigned long long)l, slot,
           slot == HHC_NIL
               ? "-"
               : slot_state_to_string (slot_state (&e->vol->idx.slots[slot])),
           bd, (unsigned long long)bl, (unsigned long long)bv);
}

static void
i1_round (uint64_t seed)
{
  struct env e;
  struct i1_worker w[I1_THREADS];
  pthread_t th[I1_THREADS];
  uint64_t version = 0, rng = seed;
  struct hhc_counts c;

  env_init (&e, I1_SLOTS, I1_BLOCKS * BS, true);
  e.mc = metacheck_new (e.hdev);
  assert_non_null (e.mc);
  env_open_ok (&e);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  metacheck_crash_at (e.mc, 200 + test_rand_below (&rng, 1500), (unsigned)seed,
                      freeze_backend, e.mb);
  for (int t = 0; t < I1_THREADS; t++)
    {
      w[t] = (struct i1_worker){ &e, seed * 31 + t + 1, &version, 0 };
      assert_int_equal (pthread_create (&th[t], NULL, i1_run, &w[t]), 0);
    }
  for (int t = 0; t < I1_THREADS; t++)
    {
      assert_true (test_join (th[t], 60000));
      if (w[t].unexpected)
        fail_msg ("seed %llu: %d I/O errors before the crash",
                  (unsigned long long)seed, w[t].unexpected);
    }
  hhc_get_counts (e.vol, &c);
  if (!metacheck_crashed (e.mc))
    {
      freeze_backend (e.mb);
      crashdev_crash (e.cdev, (unsigned)seed, NULL, NULL);
    }
  env_close (&e); /* fails: the device is dead */
  metacheck_crash_at (e.mc, 0, 0, NULL, NULL);
  crashdev_restart (e.cdev);
  metacheck_reload (e.mc);
  thaw_backend (e.mb);

  env_open_ok (&e);
  for (uint64_t l = 0; l < I1_BLOCKS; l++)
    {
      unsigned char blk[BS];
      assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, l * BS), 0);
      for (uint32_t s = 0; s < SECTORS; s++)
        {
          uint64_t ll, ver;
          uint32_t sec;
          int d = pattern_decode (blk + s * PAT_SECTOR, &ll, &sec, &ver);
          if (d != 1 || ll != l || sec != s)
            i1_diag (&e, l, s);
          if (d != 1 || ll != l || sec != s)
            fail_msg ("seed %llu: block %llu sector %u holds %s (block "
                      "%llu sector %u version %llu); %llu invariant-1 "
                      "violations seen",
                      (unsigned long long)seed, (unsigned long long)l, s,
                      d == 1 ? "another block's data" : "garbage",
                      (unsigned long long)ll, sec, (unsigned long long)ver,
                      (unsigned long long)metacheck_violations (e.mc));
        }
    }
  assert_int_equal (env_close (&e), 0);
  if (metacheck_violations (e.mc))
    fail_msg ("seed %llu: %llu invariant-1 violations",
              (unsigned long long)seed,
              (unsigned long long)metacheck_violations (e.mc));
  assert_true (metacheck_checked (e.mc) > 0);
  assert_true (c.evictions > 0 || c.read_misses > 0);
  env_free (&e);
}

static void
test_inv1_slot_reuse (void **state)
{
  uint64_t first = test_env_u64 ("HHC_TEST_SEED", 1);
  uint64_t n = test_env_u64 ("HHC_TEST_ROUNDS", 6);

  for (uint64_t seed = first; seed < first + n; seed++)
    i1_round (seed);
}

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

/* State of block lba's slot (persisted-state word in RAM). */
static enum slot_state
block_state (struct hhc_volume *vol, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  enum slot_state s = SLOT_FREE;
  uint32_t slot;

  pthread_mutex_lock (&st->lock);
  slot = index_lookup (&vol->idx, lba);
  if (slot != HHC_NIL)
    s = slot_state (&vol->idx.slots[slot]);
  pthread_mutex_unlock (&st->lock);
  return s;
}

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
    cmocka_unit_test (test_inv1_slot_reuse),
    cmocka_unit_test (test_inv2_no_dirty_eviction),
    cmocka_unit_test (test_inv2_not_during_writeback),
    cmocka_unit_test (test_inv3_clean_after_flush),
    cmocka_unit_test (test_inv4_flush_durable),
    cmocka_unit_test (test_inv4_fua_durable),
    cmocka_unit_test (test_clean_rewrite_then_crash),
    cmocka_unit_test (test_warm_after_crash_wb),
    cmocka_unit_test (test_cow_then_zero_crash),
    cmocka_unit_test (test_cold_after_crash_wt),
    cmocka_unit_test (test_failed_cache_no_stale_writeback),
    cmocka_unit_test (test_ram_per_block),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
