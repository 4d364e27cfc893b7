/* Midpoint LRU against scans: a hot set survives a long scan that a
 * plain LRU loses it to, and a hot set read twice between scans of 2x
 * the cache survives every scan, as the gateway evicts (batches
 * through lru_walk_victim).  (The lists' rules: test-lru.c; the
 * fixture: lruenv.h.)
 *
 * Tests: scan_resistance, hot_set_survives_2x_scan.
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

#include "lruenv.h"
#include "membackend.h"

/* ---- scan resistance ---- */

#define CAP 64
#define HOTSET 16
#define SCAN 2000

/* A plain LRU of CAP blocks, for contrast (list[0] = most recent). */
static void
plain_access (uint64_t *list, int *n, uint64_t id)
{
  int i;

  for (i = 0; i < *n && list[i] != id; i++)
    ;
  if (i == *n) /* miss */
    {
      if (*n < CAP)
        (*n)++;
      i = *n - 1; /* evict the least recent (or use a new place) */
    }
  memmove (list + 1, list, i * sizeof *list);
  list[0] = id;
}

static void
test_scan_resistance (void **state)
{
  struct fixture *f = fixture_new (CAP, 2);
  uint64_t block_of[CAP]; /* which block each slot holds */
  uint64_t plain[CAP];
  int nplain = 0, plain_hot = 0, mid_hot = 0;

  /* Fill the cache with blocks 0..CAP-1; 0..HOTSET-1 are the hot set,
   * touched twice.
   */
  for (uint32_t s = 0; s < CAP; s++)
    {
      block_of[s] = s;
      lru_insert_clean (&f->lru, s);
      plain_access (plain, &nplain, s);
    }
  for (int round = 0; round < 2; round++)
    for (uint32_t s = 0; s < HOTSET; s++)
      {
        lru_touch (&f->lru, s);
        plain_access (plain, &nplain, s);
      }
  /* A long scan of blocks never seen again: each evicts the coldest
   * clean block (as vol_evict does) and takes its slot.
   */
  for (uint64_t b = 1000; b < 1000 + SCAN; b++)
    {
      uint32_t s;
      pthread_mutex_lock (&f->lru.lock);
      s = evict_one (f);
      assert_int_not_equal (s, HHC_NIL);
      /* Never from hot while cold has blocks. */
      assert_int_equal (f->idx.slots[s].prev >> 28, LRU_COLD);
      lru_unlink_locked (&f->lru, s);
      pthread_mutex_unlock (&f->lru.lock);
      block_of[s] = b;
      lru_insert_clean (&f->lru, s);
      plain_access (plain, &nplain, b);
    }
  for (uint32_t s = 0; s < CAP; s++)
    if (block_of[s] < HOTSET)
      {
        mid_hot++;
        assert_int_equal (lru_which (&f->lru, s), LRU_HOT);
      }
  for (int i = 0; i < nplain; i++)
    if (plain[i] < HOTSET)
      plain_hot++;
  /* Midpoint LRU keeps the whole hot set; plain LRU loses all of it. */
  assert_int_equal (mid_hot, HOTSET);
  assert_int_equal (plain_hot, 0);
  fixture_free (f);
}

/* ---- a hot set against scans of 2x the cache, as the gateway runs ---- */

#define WS_CAP 256
#define WS_HOT 160 /* fits hot's share (2/3 of WS_CAP) */
#define WS_BATCH 8

struct workload {
  struct fixture *f;
  uint64_t block_of[WS_CAP];
  uint32_t used, nfree, freel[WS_BATCH];
};

/* Out of free slots: one eviction walk of WS_BATCH, as vol_evict. */
static void
ws_evict (struct workload *w)
{
  struct lru_walk walk;
  uint32_t s;

  pthread_mutex_lock (&w->f->lru.lock);
  lru_walk_start (&w->f->lru, &walk);
  while (w->nfree < WS_BATCH
         && (s = lru_walk_victim (&w->f->lru, &walk)) != HHC_NIL)
    {
      lru_unlink_locked (&w->f->lru, s);
      w->block_of[s] = UINT64_MAX; /* evicted */
      w->freel[w->nfree++] = s;
    }
  pthread_mutex_unlock (&w->f->lru.lock);
  assert_int_equal (w->nfree, WS_BATCH);
}

/* Read block b: a hit only marks it (lru_touch); true on a hit. */
static bool
ws_access (struct workload *w, uint64_t b)
{
  uint32_t s;

  for (s = 0; s < w->used; s++)
    if (w->block_of[s] == b)
      {
        lru_touch (&w->f->lru, s);
        return true;
      }
  if (w->used < WS_CAP)
    s = w->used++;
  else
    {
      if (w->nfree == 0)
        ws_evict (w);
      s = w->freel[--w->nfree];
    }
  w->block_of[s] = b;
  lru_insert_clean (&w->f->lru, s);
  return false;
}

/* A hot set read twice between scans of 2x the cache (blocks never
 * read again), every eviction through lru_walk_victim: after the first
 * round the whole hot set survives every scan, and it is in hot.  An
 * eviction that does not promote the hit cold blocks loses all of it.
 */
static void
test_hot_set_survives_2x_scan (void **state)
{
  struct workload *w = calloc (1, sizeof *w);
  uint64_t next_scan = 1000000;

  assert_non_null (w);
  w->f = fixture_new (WS_CAP, 2);
  for (int round = 0; round < 6; round++)
    {
      uint32_t misses = 0, cached = 0;

      for (int twice = 0; twice < 2; twice++)
        for (uint64_t b = 0; b < WS_HOT; b++)
          misses += !ws_access (w, b);
      if (round > 0)
        assert_int_equal (misses, 0);
      for (uint32_t k = 0; k < 2 * WS_CAP; k++)
        ws_access (w, next_scan++);
      for (uint32_t s = 0; s < WS_CAP; s++)
        if (w->block_of[s] < WS_HOT)
          {
            cached++;
            assert_int_equal (lru_which (&w->f->lru, s), LRU_HOT);
          }
      assert_int_equal (cached, WS_HOT);
    }
  fixture_free (w->f);
  free (w);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_scan_resistance),
    cmocka_unit_test (test_hot_set_survives_2x_scan),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
