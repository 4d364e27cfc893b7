/* The sharded index: LBA -> slot, slot words, per-stripe active table. */
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

#include "index.h"
#include "membackend.h"

/* Insert/lookup/remove with the stripe lock held, as the core does. */
static void
locked_insert (struct hhc_index *idx, uint32_t slot, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (idx, lba);
  pthread_mutex_lock (&st->lock);
  index_insert (idx, slot, lba);
  pthread_mutex_unlock (&st->lock);
}

static uint32_t
locked_lookup (struct hhc_index *idx, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (idx, lba);
  uint32_t s;
  pthread_mutex_lock (&st->lock);
  s = index_lookup (idx, lba);
  pthread_mutex_unlock (&st->lock);
  return s;
}

static void
locked_remove (struct hhc_index *idx, uint32_t slot, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (idx, lba);
  pthread_mutex_lock (&st->lock);
  index_remove (idx, slot);
  pthread_mutex_unlock (&st->lock);
}

static void
test_init (void **state)
{
  struct hhc_index idx;

  assert_int_equal (index_init (&idx, 0), EINVAL);
  assert_int_equal (index_init (&idx, HHC_MAX_SLOTS + 1u), EINVAL);
  assert_int_equal (index_init (&idx, 100), 0);
  assert_int_equal (idx.nslots, 100);
  assert_true (idx.nstripes >= 1);
  assert_int_equal (idx.nstripes & (idx.nstripes - 1), 0);
  for (uint64_t l = 0; l < 1000; l++)
    assert_int_equal (locked_lookup (&idx, l), HHC_NIL);
  for (uint32_t s = 0; s < 100; s++)
    assert_int_equal (slot_state (&idx.slots[s]), SLOT_FREE);
  index_free (&idx);
}

static void
test_basic (void **state)
{
  struct hhc_index idx;

  assert_int_equal (index_init (&idx, 16), 0);
  locked_insert (&idx, 3, 1000);
  locked_insert (&idx, 7, 1001);
  assert_int_equal (locked_lookup (&idx, 1000), 3);
  assert_int_equal (locked_lookup (&idx, 1001), 7);
  assert_int_equal (locked_lookup (&idx, 1002), HHC_NIL);
  assert_int_equal (slot_lba (&idx.slots[3]), 1000);
  locked_remove (&idx, 3, 1000);
  assert_int_equal (locked_lookup (&idx, 1000), HHC_NIL);
  assert_int_equal (locked_lookup (&idx, 1001), 7);
  /* The slot can be reused for another LBA. */
  locked_insert (&idx, 3, 5);
  assert_int_equal (locked_lookup (&idx, 5), 3);
  assert_int_equal (locked_lookup (&idx, 1000), HHC_NIL);
  index_free (&idx);
}

/* Block numbers of 33 and 34 bits keep their high bits (no alias of
 * 2^32 + x with x), and the region counts follow inserts and removes.
 */
static void
test_high_lbas (void **state)
{
  const uint64_t top = HHC_MAX_BLOCKS - 1;
  const uint64_t lbas[] = { 0,
                            5,
                            (UINT64_C (1) << 32) - 1,
                            UINT64_C (1) << 32,
                            (UINT64_C (1) << 32) + 5,
                            UINT64_C (3) << 32,
                            top - 1,
                            top };
  const uint32_t n = sizeof lbas / sizeof lbas[0];
  struct hhc_index idx;

  assert_int_equal (index_init (&idx, 64), 0);
  assert_false (index_any_mapped (&idx, 0, HHC_MAX_BLOCKS));
  for (uint32_t i = 0; i < n; i++)
    locked_insert (&idx, i, lbas[i]);
  for (uint32_t i = 0; i < n; i++)
    {
      assert_int_equal (locked_lookup (&idx, lbas[i]), i);
      assert_true (slot_lba (&idx.slots[i]) == lbas[i]);
    }
  assert_int_equal (locked_lookup (&idx, (UINT64_C (1) << 33) + 5), HHC_NIL);
  /* Regions: [0, 2^20) holds 0 and 5; the last holds top - 1 and top. */
  assert_true (index_any_mapped (&idx, top, top + 1));
  assert_true (index_any_mapped (&idx, 6, HHC_MAX_BLOCKS));
  assert_false (index_any_mapped (&idx, UINT64_C (1) << 20,
                                  (UINT64_C (1) << 32) - (1 << 20)));
  assert_false (index_any_mapped (&idx, top, top));
  locked_remove (&idx, n - 1, top);
  assert_true (index_any_mapped (&idx, top, top + 1)); /* top - 1 */
  locked_remove (&idx, n - 2, top - 1);
  assert_false (index_any_mapped (&idx, top - (1 << 20) + 1, top + 1));
  assert_int_equal (locked_lookup (&idx, top), HHC_NIL);
  /* Removing 2^32 + 5 leaves 5 (same low 32 bits) in place. */
  locked_remove (&idx, 4, (UINT64_C (1) << 32) + 5);
  assert_int_equal (locked_lookup (&idx, 5), 1);
  assert_int_equal (locked_lookup (&idx, (UINT64_C (1) << 32) + 5), HHC_NIL);
  index_free (&idx);
}

/* Length of the longest hash chain. */
static uint32_t
longest_chain (struct hhc_index *idx)
{
  uint32_t best = 0;

  for (uint32_t b = 0; b < idx->nbuckets; b++)
    {
      uint32_t n = 0;
      for (uint32_t s = idx->buckets[b]; s != HHC_NIL;
           s = idx->slots[s].hword & HHC_LINK_MASK)
        {
          n++;
          assert_true (n <= idx->nslots); /* no cycle */
        }
      if (n > best)
        best = n;
    }
  return best;
}

static void
test_collisions (void **state)
{
  enum { N = 64 };
  struct hhc_index idx;
  uint64_t lbas[N];
  uint64_t s = 7;

  assert_int_equal (index_init (&idx, N), 0);
  for (int i = 0; i < N; i++)
    {
      switch (i % 4)
        {
        case 0: /* small */
          lbas[i] = i;
          break;
        case 1: /* just above 2^32 */
          lbas[i] = (UINT64_C (1) << 32) + i;
          break;
        case 2: /* top of the range */
          lbas[i] = HHC_MAX_BLOCKS - 1 - i;
          break;
        default: /* random below 2^34 */
          lbas[i] = test_rand (&s) & (HHC_MAX_BLOCKS - 1);
          break;
        }
      for (int j = 0; j < i; j++)
        if (lbas[j] == lbas[i])
          lbas[i] ^= 1u << 20;
      locked_insert (&idx, i, lbas[i]);
    }
  /* 64 keys in 56 buckets: some buckets hold chains. */
  assert_true (longest_chain (&idx) >= 2);
  for (int i = 0; i < N; i++)
    {
      assert_int_equal (locked_lookup (&idx, lbas[i]), i);
      assert_int_equal (slot_lba (&idx.slots[i]), lbas[i]);
      /* Same low 32 bits, other high bits: not found. */
      assert_int_equal (locked_lookup (&idx, lbas[i] ^ (UINT64_C (1) << 33)),
                        HHC_NIL);
    }
  /* Remove every other one (from the middle of chains too). */
  for (int i = 0; i < N; i += 2)
    locked_remove (&idx, i, lbas[i]);
  for (int i = 0; i < N; i++)
    assert_int_equal (locked_lookup (&idx, lbas[i]),
                      i % 2 ? (uint32_t)i : HHC_NIL);
  /* Reuse the freed slots for new LBAs. */
  for (int i = 0; i < N; i += 2)
    {
      lbas[i] = (UINT64_C (3) << 32) + 17 * i;
      locked_insert (&idx, i, lbas[i]);
    }
  for (int i = 0; i < N; i++)
    assert_int_equal (locked_lookup (&idx, lbas[i]), i);
  /* Remove in reverse, then everything is gone. */
  for (int i = N - 1; i >= 0; i--)
    locked_remove (&idx, i, lbas[i]);
  for (int i = 0; i < N; i++)
    assert_int_equal (locked_lookup (&idx, lbas[i]), HHC_NIL);
  assert_int_equal (idx.nbuckets, N - N / 8);
  for (uint32_t b = 0; b < idx.nbuckets; b++)
    assert_int_equal (idx.buckets[b], HHC_NIL);
  index_free (&idx);
}

/* A big index (its slot array mapped apart, on huge pages where the
 * kernel has them), 7 bucket heads per 8 slots: every slot mapped to a
 * block scattered over the whole range, found, half removed, found
 * again.
 */
static void
test_big (void **state)
{
  enum { N = 1 << 20 };
  struct hhc_index idx;

  assert_int_equal (index_init (&idx, N), 0);
  assert_int_equal (idx.nbuckets, N - N / 8);
  for (uint32_t i = 0; i < N; i++)
    locked_insert (&idx, i, (i * UINT64_C (0x9E3779B1)) & (HHC_MAX_BLOCKS - 1));
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal (locked_lookup (&idx, (i * UINT64_C (0x9E3779B1))
                                               & (HHC_MAX_BLOCKS - 1)),
                      i);
  for (uint32_t i = 1; i < N; i += 2)
    locked_remove (&idx, i, (i * UINT64_C (0x9E3779B1)) & (HHC_MAX_BLOCKS - 1));
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal (locked_lookup (&idx, (i * UINT64_C (0x9E3779B1))
                                               & (HHC_MAX_BLOCKS - 1)),
                      i % 2 ? HHC_NIL : i);
  index_free (&idx);
}

static void
test_state_keeps_lba (void **state)
{
  static const uint64_t lbas[] = {
    0,
    1,
    UINT32_MAX,
    UINT64_C (1) << 32,
    (UINT64_C (1) << 33) + 5,
    HHC_MAX_BLOCKS - 1,
  };
  struct hhc_index idx;

  assert_int_equal (index_init (&idx, 8), 0);
  for (size_t i = 0; i < sizeof lbas / sizeof lbas[0]; i++)
    locked_insert (&idx, i, lbas[i]);
  for (size_t i = 0; i < sizeof lbas / sizeof lbas[0]; i++)
    {
      struct hhc_stripe *st = index_stripe (&idx, lbas[i]);
      for (int k = SLOT_DIRTY_LOGGED; k >= SLOT_FREE; k--)
        {
          pthread_mutex_lock (&st->lock);
          slot_set_state (&idx.slots[i], k);
          pthread_mutex_unlock (&st->lock);
          assert_int_equal (slot_state (&idx.slots[i]), k);
          assert_int_equal (slot_lba (&idx.slots[i]), lbas[i]);
          for (size_t j = 0; j < sizeof lbas / sizeof lbas[0]; j++)
            assert_int_equal (locked_lookup (&idx, lbas[j]), j);
        }
      pthread_mutex_lock (&st->lock);
      slot_set_state (&idx.slots[i], SLOT_DIRTY);
      pthread_mutex_unlock (&st->lock);
    }
  /* Insert keeps the state; remove keeps state and LBA. */
  for (size_t i = 0; i < sizeof lbas / sizeof lbas[0]; i++)
    {
      locked_remove (&idx, i, lbas[i]);
      assert_int_equal (slot_state (&idx.slots[i]), SLOT_DIRTY);
      assert_int_equal (slot_lba (&idx.slots[i]), lbas[i]);
      locked_insert (&idx, i, lbas[i] ^ (UINT64_C (1) << 20));
      assert_int_equal (slot_state (&idx.slots[i]), SLOT_DIRTY);
      assert_int_equal (slot_lba (&idx.slots[i]),
                        lbas[i] ^ (UINT64_C (1) << 20));
    }
  assert_string_equal (slot_state_to_string (SLOT_FREE), "free");
  assert_string_equal (slot_state_to_string (SLOT_DIRTY_LOGGED),
                       "dirty-logged");
  index_free (&idx);
}

/* ---- concurrency ---- */

#define NTHREADS 4
#define PER_THREAD 512

struct worker {
  struct hhc_index *idx;
  unsigned t;
  int errors;
};

static uint64_t
worker_lba (unsigned t, uint32_t i)
{
  /* Interleaved ranges, some above 2^32, so stripes are shared. */
  return ((uint64_t)t << 32) + (uint64_t)i * NTHREADS + t;
}

static void *
worker_run (void *arg)
{
  struct worker *w = arg;
  uint32_t base = w->t * PER_THREAD;
  uint64_t s = w->t + 1;

  for (int round = 0; round < 20; round++)
    {
      for (uint32_t i = 0; i < PER_THREAD; i++)
        locked_insert (w->idx, base + i, worker_lba (w->t, i));
      for (uint32_t i = 0; i < PER_THREAD; i++)
        if (locked_lookup (w->idx, worker_lba (w->t, i)) != base + i)
          w->errors++;
      /* Remove a random subset, check, put them back, remove all but
       * the last round's survivors.
       */
      for (uint32_t i = 0; i < PER_THREAD; i++)
        if (test_rand (&s) & 1)
          {
            locked_remove (w->idx, base + i, worker_lba (w->t, i));
            if (locked_lookup (w->idx, worker_lba (w->t, i)) != HHC_NIL)
              w->errors++;
            locked_insert (w->idx, base + i, worker_lba (w->t, i));
          }
      for (uint32_t i = 0; i < PER_THREAD; i++)
        if (round < 19 || i % 3 == 0)
          locked_remove (w->idx, base + i, worker_lba (w->t, i));
    }
  return NULL;
}

static void
test_concurrent (void **state)
{
  struct hhc_index idx;
  pthread_t th[NTHREADS];
  struct worker w[NTHREADS];

  assert_int_equal (index_init (&idx, NTHREADS * PER_THREAD), 0);
  assert_true (idx.nstripes > 1);
  for (unsigned t = 0; t < NTHREADS; t++)
    {
      w[t] = (struct worker){ &idx, t, 0 };
      assert_int_equal (pthread_create (&th[t], NULL, worker_run, &w[t]), 0);
    }
  for (unsigned t = 0; t < NTHREADS; t++)
    {
      assert_true (test_join (th[t], 60000));
      assert_int_equal (w[t].errors, 0);
    }
  for (unsigned t = 0; t < NTHREADS; t++)
    for (uint32_t i = 0; i < PER_THREAD; i++)
      assert_int_equal (locked_lookup (&idx, worker_lba (t, i)),
                        i % 3 == 0 ? HHC_NIL : t * PER_THREAD + i);
  index_free (&idx);
}

/* ---- active table ---- */

static void
test_active (void **state)
{
  struct hhc_index idx;
  struct hhc_stripe *st;

  assert_int_equal (index_init (&idx, 64), 0);
  st = &idx.stripes[0];
  pthread_mutex_lock (&st->lock);
  assert_int_equal (active_get (st, 5), 0);
  active_set (st, 5, 0); /* removing an absent entry: no-op */
  assert_int_equal (st->nactive, 0);
  /* More entries than the initial capacity. */
  for (uint32_t s = 0; s < 40; s++)
    active_set (st, s, ACT_BUSY);
  assert_int_equal (st->nactive, 40);
  for (uint32_t s = 0; s < 40; s++)
    assert_int_equal (active_get (st, s), ACT_BUSY);
  /* Update. */
  active_set (st, 7, ACT_BUSY | ACT_WB);
  active_set (st, 9, ACT_WB | ACT_REDIRTY);
  assert_int_equal (active_get (st, 7), ACT_BUSY | ACT_WB);
  assert_int_equal (active_get (st, 9), ACT_WB | ACT_REDIRTY);
  assert_int_equal (st->nactive, 40);
  /* Remove some; the others keep their flags. */
  for (uint32_t s = 0; s < 40; s += 3)
    active_set (st, s, 0);
  for (uint32_t s = 0; s < 40; s++)
    {
      uint32_t want = s % 3 == 0 ? 0 : s == 7 ? ACT_BUSY | ACT_WB : ACT_BUSY;
      assert_int_equal (active_get (st, s), want);
    }
  for (uint32_t s = 0; s < 40; s++)
    active_set (st, s, 0);
  assert_int_equal (st->nactive, 0);
  pthread_mutex_unlock (&st->lock);
  index_free (&idx);
}

struct waiter {
  struct hhc_stripe *st;
  uint32_t slot;
  bool waiting, done;
};

static void *
waiter_run (void *arg)
{
  struct waiter *w = arg;

  pthread_mutex_lock (&w->st->lock);
  w->waiting = true;
  pthread_cond_broadcast (&w->st->cond);
  while (active_get (w->st, w->slot) & ACT_BUSY)
    stripe_wait (w->st);
  w->done = true;
  pthread_mutex_unlock (&w->st->lock);
  return NULL;
}

/* Clearing a flag wakes a thread waiting on the stripe. */
static void
test_active_wakes (void **state)
{
  struct hhc_index idx;
  struct waiter w;
  pthread_t th;
  struct timespec ts;

  assert_int_equal (index_init (&idx, 64), 0);
  w = (struct waiter){ &idx.stripes[0], 3, false, false };
  pthread_mutex_lock (&w.st->lock);
  active_set (w.st, 3, ACT_BUSY | ACT_WB);
  pthread_mutex_unlock (&w.st->lock);
  assert_int_equal (pthread_create (&th, NULL, waiter_run, &w), 0);

  test_deadline (&ts, 30000);
  pthread_mutex_lock (&w.st->lock);
  while (!w.waiting)
    assert_int_not_equal (
        pthread_cond_timedwait (&w.st->cond, &w.st->lock, &ts), ETIMEDOUT);
  /* The waiter is asleep on the condition (it released the lock). */
  assert_false (w.done);
  active_set (w.st, 3, ACT_WB); /* clears BUSY: broadcast */
  pthread_mutex_unlock (&w.st->lock);
  assert_true (test_join (th, 30000));
  assert_true (w.done);
  index_free (&idx);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_init),
    cmocka_unit_test (test_basic),
    cmocka_unit_test (test_high_lbas),
    cmocka_unit_test (test_collisions),
    cmocka_unit_test (test_big),
    cmocka_unit_test (test_state_keeps_lba),
    cmocka_unit_test (test_concurrent),
    cmocka_unit_test (test_active),
    cmocka_unit_test (test_active_wakes),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
