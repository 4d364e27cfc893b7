/* Midpoint LRU: insertion point, promotion, hot:cold balance, the
 * dirty list, and the RAM cost of a slot.  (Scan resistance:
 * test-lru-scan.c; hits racing eviction: test-lru-race.c; the
 * fixture: lruenv.h.)
 *
 * Tests: midpoint_insert, promotion, second_chance,
 * colder_prev_into_hot, balance_2_1, balance_3_1, dirty_fifo,
 * make_clean, ram_per_slot.
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

/* Clean slots from coldest to warmest, as eviction sees them. */
static uint32_t
coldest_order (struct fixture *f, uint32_t *out, uint32_t max)
{
  uint32_t n = 0;

  pthread_mutex_lock (&f->lru.lock);
  for (uint32_t s = lru_colder_prev (&f->lru, HHC_NIL); s != HHC_NIL && n < max;
       s = lru_colder_prev (&f->lru, s))
    out[n++] = s;
  pthread_mutex_unlock (&f->lru.lock);
  return n;
}

/* A hit that eviction then reaches while the block is cold: promoted
 * (lru_touch only marks it; the eviction walk, lru_walk_victim, promotes).
 */
static void
hit (struct fixture *f, uint32_t s)
{
  lru_touch (&f->lru, s);
  pthread_mutex_lock (&f->lru.lock);
  lru_promote_locked (&f->lru, s);
  pthread_mutex_unlock (&f->lru.lock);
}

static bool
referenced (struct fixture *f, uint32_t s)
{
  return __atomic_load_n (&f->idx.slots[s].next, __ATOMIC_RELAXED) & (1u << 28);
}

static void
test_midpoint_insert (void **state)
{
  struct fixture *f = fixture_new (16, 2);
  uint32_t order[16];

  lru_insert_clean (&f->lru, 1);
  lru_insert_clean (&f->lru, 2);
  lru_insert_clean (&f->lru, 3);
  assert_int_equal (lru_which (&f->lru, 1), LRU_COLD);
  assert_int_equal (lru_count (&f->lru, LRU_COLD), 3);
  assert_int_equal (lru_count (&f->lru, LRU_HOT), 0);
  /* Newest at the head of cold: eviction order is 1, 2, 3. */
  assert_int_equal (coldest_order (f, order, 16), 3);
  assert_int_equal (order[0], 1);
  assert_int_equal (order[1], 2);
  assert_int_equal (order[2], 3);

  /* With a hot list, a new block goes below all of hot. */
  hit (f, 2);
  lru_insert_clean (&f->lru, 4);
  assert_int_equal (lru_which (&f->lru, 4), LRU_COLD);
  assert_int_equal (coldest_order (f, order, 16), 4);
  assert_int_equal (order[0], 1);
  assert_int_equal (order[1], 3);
  assert_int_equal (order[2], 4);
  assert_int_equal (order[3], 2); /* hot comes last */
  assert_int_equal (lru_which (&f->lru, 0), LRU_NONE);
  assert_string_equal (lru_list_to_string (LRU_COLD), "cold");
  fixture_free (f);
}

static void
test_promotion (void **state)
{
  struct fixture *f = fixture_new (16, 2);
  uint32_t order[16];

  for (uint32_t s = 0; s < 6; s++)
    lru_insert_clean (&f->lru, s);
  /* Cold hit: only "referenced" (no lock, no move) ... */
  lru_touch (&f->lru, 0);
  assert_int_equal (lru_which (&f->lru, 0), LRU_COLD);
  assert_true (referenced (f, 0));
  /* ... an unreferenced cold block is not promoted ... */
  pthread_mutex_lock (&f->lru.lock);
  assert_false (lru_promote_locked (&f->lru, 1));
  /* ... and eviction reaching it promotes it to the head of hot. */
  assert_true (lru_promote_locked (&f->lru, 0));
  assert_false (lru_promote_locked (&f->lru, 0)); /* hot now */
  pthread_mutex_unlock (&f->lru.lock);
  assert_int_equal (lru_which (&f->lru, 0), LRU_HOT);
  assert_int_equal (f->lru.head[LRU_HOT], 0);
  assert_false (referenced (f, 0));
  hit (f, 1);
  assert_int_equal (f->lru.head[LRU_HOT], 1);
  /* Hot hit: only "referenced" too. */
  lru_touch (&f->lru, 0);
  assert_int_equal (f->lru.head[LRU_HOT], 1);
  assert_int_equal (f->lru.tail[LRU_HOT], 0);
  assert_true (referenced (f, 0));
  assert_int_equal (lru_count (&f->lru, LRU_HOT), 2);
  assert_int_equal (lru_count (&f->lru, LRU_COLD), 4);
  /* Eviction: cold (2,3,4,5 oldest first), then hot from its tail. */
  assert_int_equal (coldest_order (f, order, 16), 6);
  assert_int_equal (order[0], 2);
  assert_int_equal (order[3], 5);
  assert_int_equal (order[4], 0);
  assert_int_equal (order[5], 1);
  /* Off-list slots: touch does nothing. */
  lru_remove (&f->lru, 3);
  assert_int_equal (lru_which (&f->lru, 3), LRU_NONE);
  lru_touch (&f->lru, 3);
  assert_int_equal (lru_which (&f->lru, 3), LRU_NONE);
  assert_int_equal (lru_count (&f->lru, LRU_COLD), 3);
  fixture_free (f);
}

/* A referenced tail of hot gets a second chance when hot is demoted:
 * back to hot's head, unreferenced; the next unreferenced tail goes.
 */
static void
test_second_chance (void **state)
{
  struct fixture *f = fixture_new (8, 1);

  for (uint32_t s = 0; s < 4; s++)
    lru_insert_clean (&f->lru, s);
  hit (f, 0); /* hot: 0 */
  hit (f, 1); /* hot: 1 0 */
  assert_int_equal (lru_count (&f->lru, LRU_HOT), 2);
  lru_touch (&f->lru, 0); /* referenced, stays the tail */
  assert_int_equal (f->lru.tail[LRU_HOT], 0);
  /* Promoting 2 (hot 3 > 1 x (1 + 1)) demotes one: 0 is referenced
   * and goes back to the head, so 1 is demoted.
   */
  hit (f, 2);
  assert_int_equal (lru_which (&f->lru, 1), LRU_COLD);
  assert_int_equal (lru_which (&f->lru, 0), LRU_HOT);
  assert_int_equal (f->lru.head[LRU_HOT], 0);
  assert_false (referenced (f, 0));
  /* Promoting 3: now 2 is the unreferenced tail. */
  hit (f, 3);
  assert_int_equal (lru_which (&f->lru, 2), LRU_COLD);
  assert_int_equal (lru_which (&f->lru, 0), LRU_HOT);
  fixture_free (f);
}

/* With cold empty, eviction continues into hot. */
static void
test_colder_prev_into_hot (void **state)
{
  struct fixture *f = fixture_new (8, 2);
  uint32_t order[8];

  lru_insert_clean (&f->lru, 0);
  lru_insert_clean (&f->lru, 1);
  hit (f, 0);
  hit (f, 1);
  assert_int_equal (lru_count (&f->lru, LRU_HOT), 2);
  assert_int_equal (lru_count (&f->lru, LRU_COLD), 0);
  assert_int_equal (coldest_order (f, order, 8), 2);
  assert_int_equal (order[0], 0);
  assert_int_equal (order[1], 1);
  fixture_free (f);
}

static void
check_balance (unsigned ratio, uint32_t n)
{
  struct fixture *f = fixture_new (n, ratio);
  uint32_t want = ratio * (n + 1) / (ratio + 1);

  for (uint32_t s = 0; s < n; s++)
    lru_insert_clean (&f->lru, s);
  /* Touch everything twice: each touch respects the bound. */
  for (int round = 0; round < 2; round++)
    for (uint32_t s = 0; s < n; s++)
      {
        uint32_t h, c;
        hit (f, s);
        h = lru_count (&f->lru, LRU_HOT);
        c = lru_count (&f->lru, LRU_COLD);
        assert_int_equal (h + c, n);
        assert_true (h <= (uint64_t)ratio * (c + 1));
      }
  /* Hot is as large as the ratio allows: about ratio/(ratio+1). */
  assert_int_equal (lru_count (&f->lru, LRU_HOT), want);
  assert_int_equal (lru_count (&f->lru, LRU_COLD), n - want);
  fixture_free (f);
}

static void
test_balance_2_1 (void **state)
{
  check_balance (2, 30); /* 20 hot : 10 cold */
  check_balance (2, 300);
}

static void
test_balance_3_1 (void **state)
{
  check_balance (3, 40); /* 30 hot : 10 cold */
  check_balance (3, 400);
}

static void
test_dirty_fifo (void **state)
{
  struct fixture *f = fixture_new (16, 2);
  uint32_t out[16];

  lru_insert_dirty (&f->lru, 5);
  lru_insert_dirty (&f->lru, 6);
  lru_insert_dirty (&f->lru, 7);
  lru_insert_clean (&f->lru, 2);
  lru_make_dirty (&f->lru, 2);
  lru_make_dirty (&f->lru, 2); /* already dirty: stays in place */
  assert_int_equal (lru_count (&f->lru, LRU_DIRTY), 4);
  assert_int_equal (lru_count (&f->lru, LRU_COLD), 0);
  assert_int_equal (lru_oldest_dirty (&f->lru, out, 16), 4);
  assert_int_equal (out[0], 5);
  assert_int_equal (out[1], 6);
  assert_int_equal (out[2], 7);
  assert_int_equal (out[3], 2);
  assert_int_equal (lru_oldest_dirty (&f->lru, out, 2), 2);
  assert_int_equal (out[1], 6);
  /* Rewritten during write-back: to the tail. */
  lru_requeue_dirty (&f->lru, 6);
  assert_int_equal (lru_oldest_dirty (&f->lru, out, 16), 4);
  assert_int_equal (out[0], 5);
  assert_int_equal (out[1], 7);
  assert_int_equal (out[2], 2);
  assert_int_equal (out[3], 6);
  /* Dirty blocks are never eviction candidates. */
  assert_int_equal (coldest_order (f, out, 16), 0);
  fixture_free (f);
}

static void
test_make_clean (void **state)
{
  struct fixture *f = fixture_new (16, 2);

  /* Unreferenced dirty block: back to cold. */
  lru_insert_dirty (&f->lru, 1);
  lru_make_clean (&f->lru, 1);
  assert_int_equal (lru_which (&f->lru, 1), LRU_COLD);
  /* Read while dirty: referenced, back to hot. */
  lru_insert_dirty (&f->lru, 2);
  lru_touch (&f->lru, 2);
  assert_int_equal (lru_which (&f->lru, 2), LRU_DIRTY);
  lru_make_clean (&f->lru, 2);
  assert_int_equal (lru_which (&f->lru, 2), LRU_HOT);
  /* A clean block that was written (an access): hot when cleaned. */
  lru_insert_clean (&f->lru, 3);
  lru_make_dirty (&f->lru, 3);
  lru_make_clean (&f->lru, 3);
  assert_int_equal (lru_which (&f->lru, 3), LRU_HOT);
  /* The referenced bit survives a requeue. */
  lru_insert_dirty (&f->lru, 4);
  lru_touch (&f->lru, 4);
  lru_requeue_dirty (&f->lru, 4);
  lru_make_clean (&f->lru, 4);
  assert_int_equal (lru_which (&f->lru, 4), LRU_HOT);
  /* ... and is cleared by the cleaning. */
  lru_make_dirty (&f->lru, 1); /* from cold: referenced */
  lru_make_clean (&f->lru, 1);
  assert_int_equal (lru_which (&f->lru, 1), LRU_HOT);
  lru_remove (&f->lru, 5);
  lru_insert_dirty (&f->lru, 5);
  lru_make_clean (&f->lru, 5);
  assert_int_equal (lru_which (&f->lru, 5), LRU_COLD);
  assert_int_equal (lru_count (&f->lru, LRU_DIRTY), 0);
  fixture_free (f);
}

/* docs/design.md §4.3: <= 20 bytes of RAM per cached block (index + LRU). */
static void
test_ram_per_slot (void **state)
{
  size_t per = sizeof (struct hhc_slot) + sizeof (uint32_t);

  printf ("RAM per slot: struct hhc_slot %zu + bucket head %zu = %zu bytes\n",
          sizeof (struct hhc_slot), sizeof (uint32_t), per);
  assert_true (per <= 20);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_midpoint_insert),
    cmocka_unit_test (test_promotion),
    cmocka_unit_test (test_second_chance),
    cmocka_unit_test (test_colder_prev_into_hot),
    cmocka_unit_test (test_balance_2_1),
    cmocka_unit_test (test_balance_3_1),
    cmocka_unit_test (test_dirty_fifo),
    cmocka_unit_test (test_make_clean),
    cmocka_unit_test (test_ram_per_slot),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
