/* The volume under random power cuts, on the crash device.  (The
 * device itself: test-crashdev-device.c.)
 *
 * The random test runs a seeded single-threaded workload (writes of
 * whole and partial blocks, reads, flushes, FUA, trims, zeros,
 * write-back and eviction rounds) on a small cache over a crash
 * device, cuts the power at a random device write with a random subset
 * of the unsynced writes surviving, restarts and reopens, and checks
 * every sector of the volume:
 *   - it holds data written to that very sector (never another
 *     block's, never garbage);
 *   - it is at least as new as what the last completed FLUSH (or the
 *     sector's last FUA write) covered (the oracle, oracle.h, shared
 *     with the log's campaign).
 * A power cut stops the whole gateway, so the backend refuses every
 * write and flush from the cut on.  metacheck also checks invariant 1
 * on every slot write.  Failures print the seed: rerun one with
 * HHC_TEST_SEED=n HHC_TEST_ROUNDS=1.
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

#include "devcrash.h"
#include "flusher.h"
#include "membackend.h"
#include "oracle.h"
#include "preopen.h"
#include "reclaim.h"
#include "vol.h"

/* ---- the volume under random power cuts ---- */

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)

struct run {
  uint64_t seed;
  uint64_t rng;
  uint64_t nblocks;
  uint32_t nslots;
  struct membackend *mb;
  struct hhc_dev *cdev, *hdev;
  struct metacheck *mc;
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
  struct model m;
  uint64_t op; /* version counter */
  unsigned char *buf;
  /* what happened, for the summary */
  uint64_t nwrites, nflushes, ncrash_mid;
};

static void
freeze (void *opaque)
{
  struct membackend *mb = opaque;
  membackend_fail_all (mb, MB_OP_WRITE, true);
  membackend_fail_all (mb, MB_OP_FLUSH, true);
}

static void
thaw (struct membackend *mb)
{
  membackend_fail_all (mb, MB_OP_WRITE, false);
  membackend_fail_all (mb, MB_OP_FLUSH, false);
}

static bool
crashed (struct run *r)
{
  return metacheck_crashed (r->mc);
}

/* Write-back and eviction until a write of 3 blocks cannot block. */
static void
make_room (struct run *r)
{
  for (int tries = 0; tries < 4 && !crashed (r); tries++)
    {
      uint64_t nd = __atomic_load_n (&r->vol->ndirty, __ATOMIC_ACQUIRE);
      if (nd + 3 < r->vol->dirty_max && cache_nfree (&r->vol->cache) >= 3)
        return;
      if (nd + 3 >= r->vol->dirty_max || tries > 0)
        flusher_batch (r->vol, r->mb, 2);
      vol_reclaim (r->vol);
    }
}

/* One write of sectors [s0, s0+n) of block lba .. (may span blocks). */
static int
do_write (struct run *r, uint64_t first_sec, uint64_t nsec, bool fua)
{
  uint64_t v = ++r->op;
  int e;

  for (uint64_t i = 0; i < nsec; i++)
    {
      uint64_t sec = first_sec + i;
      pattern_fill (r->buf + i * PAT_SECTOR, sec / SECTORS, sec % SECTORS, 1,
                    v);
      model_set (&r->m, sec, v);
    }
  e = hhc_write (r->vol, r->mb, r->buf, nsec * PAT_SECTOR,
                 first_sec * PAT_SECTOR, fua);
  if (e == 0 && fua)
    for (uint64_t i = 0; i < nsec; i++)
      r->m.flushed[first_sec + i] = v;
  r->nwrites++;
  return e;
}

/* Zero or trim [first_sec, +nsec): record what becomes zero. */
static int
do_passdown (struct run *r, uint64_t first_sec, uint64_t nsec, bool trim)
{
  uint64_t v = ++r->op | ZERO_FLAG;
  uint64_t lo = first_sec, hi = first_sec + nsec;

  if (trim)
    {
      /* Only whole blocks are dropped; edges stay as they are. */
      lo = (first_sec + SECTORS - 1) / SECTORS * SECTORS;
      hi = hi / SECTORS * SECTORS;
    }
  for (uint64_t s = lo; s < hi; s++)
    model_set (&r->m, s, v);
  return trim ? hhc_trim (r->vol, r->mb, nsec * PAT_SECTOR,
                          first_sec * PAT_SECTOR, false)
              : hhc_zero (r->vol, r->mb, nsec * PAT_SECTOR,
                          first_sec * PAT_SECTOR, false);
}

/* Before the crash reads return exactly the newest data. */
static void
check_read_exact (struct run *r, uint64_t lba)
{
  unsigned char blk[BS], want[PAT_SECTOR];

  if (hhc_read (r->vol, r->mb, blk, BS, lba * BS) != 0)
    {
      if (!crashed (r))
        fail_msg ("seed %llu: read of block %llu failed before the crash",
                  (unsigned long long)r->seed, (unsigned long long)lba);
      return;
    }
  for (uint32_t s = 0; s < SECTORS; s++)
    {
      uint64_t v = r->m.latest[lba * SECTORS + s];
      if (v & ZERO_FLAG)
        memset (want, 0, sizeof want);
      else
        pattern_fill (want, lba, s, 1, v);
      if (memcmp (blk + s * PAT_SECTOR, want, PAT_SECTOR) != 0)
        fail_msg ("seed %llu op %llu: before any crash, block %llu sector "
                  "%u does not read its newest data",
                  (unsigned long long)r->seed, (unsigned long long)r->op,
                  (unsigned long long)lba, s);
    }
}

static uint64_t
pick_lba (struct run *r)
{
  return test_rand_below (&r->rng, 2) ? test_rand_below (&r->rng, 24)
                                      : test_rand_below (&r->rng, r->nblocks);
}

static void
workload (struct run *r, int nops)
{
  for (int i = 0; i < nops && !crashed (r); i++)
    {
      uint64_t op = test_rand_below (&r->rng, 100);
      uint64_t lba = pick_lba (r);
      int e = 0;

      if (op < 45)
        {
          uint64_t s0 = 0, n = SECTORS;
          uint64_t kind = test_rand_below (&r->rng, 10);
          if (kind < 4) /* part of a block */
            {
              s0 = test_rand_below (&r->rng, SECTORS);
              n = 1 + test_rand_below (&r->rng, SECTORS - s0);
            }
          else if (kind == 9 && lba + 3 <= r->nblocks) /* 2-3 blocks,
                                                          unaligned */
            {
              s0 = test_rand_below (&r->rng, SECTORS);
              n = SECTORS + test_rand_below (&r->rng, 2 * SECTORS - s0);
            }
          make_room (r);
          if (crashed (r))
            break;
          e = do_write (r, lba * SECTORS + s0, n,
                        test_rand_below (&r->rng, 20) == 0);
        }
      else if (op < 65)
        check_read_exact (r, lba);
      else if (op < 75)
        {
          e = hhc_flush (r->vol, r->mb);
          if (e == 0)
            {
              model_flush_all (&r->m);
              r->nflushes++;
            }
        }
      else if (op < 85)
        flusher_batch (r->vol, r->mb, 1 + test_rand_below (&r->rng, 3));
      else if (op < 91)
        vol_reclaim (r->vol);
      else if (op < 97 && lba + 2 <= r->nblocks)
        {
          /* Zero or trim up to two blocks, sector aligned. */
          uint64_t s0 = test_rand_below (&r->rng, SECTORS);
          uint64_t n = 1 + test_rand_below (&r->rng, 2 * SECTORS - s0);
          make_room (r);
          if (crashed (r))
            break;
          e = do_passdown (r, lba * SECTORS + s0, n, op >= 94);
        }
      else
        {
          make_room (r);
          if (!crashed (r))
            e = hhc_prefetch (r->vol, r->mb, 2 * BS,
                              (lba + 2 <= r->nblocks ? lba : 0) * BS);
        }
      if (e && !crashed (r))
        fail_msg ("seed %llu op %llu: I/O error %d before the crash",
                  (unsigned long long)r->seed, (unsigned long long)r->op, e);
    }
}

static void
verify_after_restart (struct run *r)
{
  unsigned char blk[BS];
  char why[160];

  for (uint64_t l = 0; l < r->nblocks; l++)
    {
      assert_int_equal (hhc_read (r->vol, r->mb, blk, BS, l * BS), 0);
      for (uint32_t s = 0; s < SECTORS; s++)
        {
          if (!model_ok (&r->m, l * SECTORS + s, blk + s * PAT_SECTOR, why,
                         sizeof why))
            fail_msg ("seed %llu: after the power cut, block %llu sector "
                      "%u holds %s",
                      (unsigned long long)r->seed, (unsigned long long)l, s,
                      why);
        }
    }
}

static void
open_vol (struct run *r)
{
  int e = hhc_open (&r->conf, &r->pre, &membackend_ops, &r->info, &r->vol);
  if (e)
    fail_msg ("seed %llu: hhc_open after the power cut: %d",
              (unsigned long long)r->seed, e);
}

struct totals {
  uint64_t runs, crash_mid, writes, flushes, checked, tears;
};

static void
one_run (uint64_t seed, struct totals *t)
{
  struct run r;
  unsigned char blk[BS];
  uint64_t mib = 1 + seed % 4;

  memset (&r, 0, sizeof r);
  r.seed = seed;
  r.rng = seed * 0x9E3779B97F4A7C15ull + 1;
  r.nblocks = mib * 1024 * 1024 / BS;
  {
    /* One metadata page holds 508 entries: some caches need two. */
    static const uint32_t choice[] = { 64, 128, 256, 600, 1000 };
    r.nslots = choice[test_rand_below (&r.rng, 5)];
    if (r.nslots > r.nblocks)
      r.nslots = r.nblocks;
  }
  r.buf = malloc (3 * BS);
  assert_non_null (r.buf);
  r.mb = membackend_new (r.nblocks * BS);
  assert_non_null (r.mb);
  model_init (&r.m, r.nblocks * SECTORS, SECTORS);
  for (uint64_t l = 0; l < r.nblocks; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 0);
      membackend_poke (r.mb, blk, BS, l * BS);
      for (uint32_t s = 0; s < SECTORS; s++)
        model_set (&r.m, l * SECTORS + s, 0);
    }
  assert_int_equal (
      crashdev_create (test_cache_dev_size (r.nslots, BS), &r.cdev), 0);
  r.hdev = hookdev_new (r.cdev);
  r.mc = metacheck_new (r.hdev);
  assert_non_null (r.mc);
  r.info = membackend_info (r.mb, 16384, "membackend:crash");
  hhc_conf_init (&r.conf);
  r.pre.cache = r.hdev;
  r.conf.msgfn = test_msg;
  r.conf.mode = HHC_MODE_WB;
  r.conf.writeback_threads = 2;
  assert_int_equal (
      hhc_open (&r.conf, &r.pre, &membackend_ops, &r.info, &r.vol), 0);

  /* Some runs start from a cache that was closed and reopened. */
  if (seed % 3 == 0)
    {
      workload (&r, 100);
      assert_false (crashed (&r));
      assert_int_equal (hhc_close (r.vol), 0);
      model_flush_all (&r.m); /* close commits everything */
      assert_int_equal (
          hhc_open (&r.conf, &r.pre, &membackend_ops, &r.info, &r.vol), 0);
    }
  /* Half the runs cut the power at any device write or sync, half
   * just before a sync (in the middle of a commit).
   */
  if (test_rand_below (&r.rng, 2))
    metacheck_crash_at (r.mc, 1 + test_rand_below (&r.rng, 900), (unsigned)seed,
                        freeze, r.mb);
  else
    metacheck_crash_at_sync (r.mc, 1 + test_rand_below (&r.rng, 60),
                             (unsigned)seed, freeze, r.mb);
  workload (&r, 250 + test_rand_below (&r.rng, 250));
  if (crashed (&r))
    r.ncrash_mid++;
  else
    {
      freeze (r.mb);
      crashdev_crash (r.cdev, (unsigned)seed, NULL, NULL);
    }
  hhc_close (r.vol); /* fails: the device is dead */
  r.vol = NULL;
  metacheck_crash_at (r.mc, 0, 0, NULL, NULL);
  crashdev_restart (r.cdev);
  metacheck_reload (r.mc);
  thaw (r.mb);

  open_vol (&r);
  verify_after_restart (&r);
  /* The recovered cache works: write everything back, and the backend
   * then holds exactly what the volume reads.  (Its current bytes: a
   * trim or zero passed down before the cut and not flushed is still
   * only current there; the backend does not lose it in this model.)
   */
  assert_int_equal (hhc_drain (r.vol, r.mb), 0);
  for (uint64_t l = 0; l < r.nblocks; l++)
    {
      assert_int_equal (hhc_read (r.vol, r.mb, blk, BS, l * BS), 0);
      if (membackend_cmp (r.mb, false, blk, BS, l * BS) != 0)
        {
          unsigned char be[PAT_SECTOR];
          uint64_t a = 0, av = 0, b = 0, bv = 0;
          uint32_t as = 0, bs = 0, slot;
          int ad, bd;
          struct hhc_stripe *st = index_stripe (&r.vol->idx, l);
          pthread_mutex_lock (&st->lock);
          slot = index_lookup (&r.vol->idx, l);
          pthread_mutex_unlock (&st->lock);
          for (uint32_t s = 0; s < SECTORS; s++)
            {
              membackend_peek (r.mb, false, be, PAT_SECTOR,
                               l * BS + s * PAT_SECTOR);
              if (memcmp (be, blk + s * PAT_SECTOR, PAT_SECTOR) == 0)
                continue;
              ad = pattern_decode (blk + s * PAT_SECTOR, &a, &as, &av);
              bd = pattern_decode (be, &b, &bs, &bv);
              fail_msg ("seed %llu: after recovery and a full write-back, "
                        "block %llu (slot %u, %s) sector %u reads %d/v%llu "
                        "but the backend holds %d/v%llu: a block the cache "
                        "calls clean differs from the backend",
                        (unsigned long long)r.seed, (unsigned long long)l, slot,
                        slot == HHC_NIL ? "-"
                                        : slot_state_to_string (slot_state (
                                            &r.vol->idx.slots[slot])),
                        s, ad, (unsigned long long)av, bd,
                        (unsigned long long)bv);
            }
        }
    }
  assert_int_equal (hhc_close (r.vol), 0);
  if (metacheck_violations (r.mc))
    fail_msg ("seed %llu: %llu invariant-1 violations",
              (unsigned long long)seed,
              (unsigned long long)metacheck_violations (r.mc));
  t->runs++;
  t->crash_mid += r.ncrash_mid;
  t->writes += r.nwrites;
  t->flushes += r.nflushes;
  t->checked += metacheck_checked (r.mc);
  t->tears += metacheck_tears (r.mc);
  metacheck_free (r.mc);
  hookdev_destroy (r.hdev);
  crashdev_destroy (r.cdev);
  membackend_free (r.mb);
  model_free (&r.m);
  free (r.buf);
}

static void
test_random_crashes (void **state)
{
  uint64_t first = test_env_u64 ("HHC_TEST_SEED", 1);
  uint64_t n = test_env_u64 ("HHC_TEST_ROUNDS", 40);

  struct totals t = { 0 };

  for (uint64_t seed = first; seed < first + n; seed++)
    one_run (seed, &t);
  printf ("%llu runs (%llu cut mid-workload, %llu with a torn metadata "
          "page), %llu writes, %llu completed flushes, %llu slot writes "
          "checked for invariant 1\n",
          (unsigned long long)t.runs, (unsigned long long)t.crash_mid,
          (unsigned long long)t.tears, (unsigned long long)t.writes,
          (unsigned long long)t.flushes, (unsigned long long)t.checked);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_random_crashes),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
