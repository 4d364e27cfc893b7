/* The SSD cache's invariant 1 (docs/design.md §4.2), on a crash
 * device: a concurrent workload with a running flusher on a small
 * cache, metacheck checking every slot write, a power cut at a random
 * one, then every block of the volume read back.  Failures print the
 * seed: rerun one with HHC_TEST_SEED=n HHC_TEST_ROUNDS=1.  (Invariants
 * 2 to 4: test-cache.c; the fixture: cacheenv.h.)
 */
#include <config.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "cacheenv.h"
#include "common.h"
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

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_inv1_slot_reuse),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
