/* Write-back (docs/design.md §6) racing client I/O: the generation
 * race (a block rewritten during its write-back stays dirty with the
 * new data), a trim elsewhere during a write-back, a client write's
 * claim (ACT_BUSY) kept past the end of a concurrent batch, and what a
 * batch counts as cleaned.  A gate in a backend or device hook holds
 * the write-back (or the client's write) at the chosen point while the
 * test acts; flusher_batch runs in a thread of the test's own.
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

static uint32_t
slot_of (struct hhc_volume *vol, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  uint32_t s;

  pthread_mutex_lock (&st->lock);
  s = index_lookup (&vol->idx, lba);
  pthread_mutex_unlock (&st->lock);
  return s;
}

static uint32_t
active_of (struct hhc_volume *vol, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  uint32_t f = 0, s;

  pthread_mutex_lock (&st->lock);
  s = index_lookup (&vol->idx, lba);
  if (s != HHC_NIL)
    f = active_get (st, s);
  pthread_mutex_unlock (&st->lock);
  return f;
}

/* ---- a gate: a hook blocks in it until the test opens it ---- */

struct gate {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool armed;   /* the next matching call blocks */
  bool entered; /* a call is blocked in the gate */
  bool open;
  uint64_t match_lo, match_hi; /* byte range a call must touch */
};

static void
gate_init (struct gate *g)
{
  memset (g, 0, sizeof *g);
  pthread_mutex_init (&g->lock, NULL);
  pthread_cond_init (&g->cond, NULL);
}

static void
gate_destroy (struct gate *g)
{
  pthread_mutex_destroy (&g->lock);
  pthread_cond_destroy (&g->cond);
}

static void
gate_arm (struct gate *g, uint64_t lo, uint64_t hi)
{
  pthread_mutex_lock (&g->lock);
  g->armed = true;
  g->entered = g->open = false;
  g->match_lo = lo;
  g->match_hi = hi;
  pthread_mutex_unlock (&g->lock);
}

/* In a hook: block if armed and [off, off+len) touches the range. */
static void
gate_pass (struct gate *g, uint64_t off, uint64_t len)
{
  pthread_mutex_lock (&g->lock);
  if (g->armed && off < g->match_hi && off + len > g->match_lo)
    {
      g->armed = false;
      g->entered = true;
      pthread_cond_broadcast (&g->cond);
      while (!g->open)
        pthread_cond_wait (&g->cond, &g->lock);
    }
  pthread_mutex_unlock (&g->lock);
}

/* Wait until a call is blocked in the gate; false on timeout. */
static bool
gate_wait_entered (struct gate *g)
{
  struct timespec ts;
  bool ok = true;

  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&g->lock);
  while (!g->entered && ok)
    ok = pthread_cond_timedwait (&g->cond, &g->lock, &ts) != ETIMEDOUT
         || g->entered;
  pthread_mutex_unlock (&g->lock);
  return ok;
}

static void
gate_open (struct gate *g)
{
  pthread_mutex_lock (&g->lock);
  g->open = true;
  g->armed = false;
  pthread_cond_broadcast (&g->cond);
  pthread_mutex_unlock (&g->lock);
}

static void
gate_backend_hook (void *opaque, uint64_t offset, uint32_t count)
{
  gate_pass (opaque, offset, count);
}

static int
gate_dev_hook (void *opaque, const void *buf, size_t len, uint64_t offset)
{
  gate_pass (opaque, offset, len);
  return 0;
}

/* ---- threads ---- */

struct batch_arg {
  struct hhc_volume *vol;
  struct membackend *mb;
  long result;
};

static void *
batch_thread (void *arg)
{
  struct batch_arg *a = arg;

  a->result = flusher_batch (a->vol, a->mb, 1);
  return NULL;
}

/* ---- the generation race ---- */

static void
test_generation_race (void **state)
{
  struct env e;
  struct gate g;
  struct batch_arg a;
  pthread_t th;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&g);
  write_v (&e, 7, 1);
  write_v (&e, 8, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  /* Write-back holds version 1 of block 7; the client rewrites it. */
  assert_true (active_of (e.vol, 7) & ACT_WB);
  write_v (&e, 7, 2);
  assert_true (active_of (e.vol, 7) & ACT_REDIRTY);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  /* Block 8 is clean, block 7 is still dirty with version 2. */
  assert_true (a.result >= 1);
  assert_int_equal (dirty (&e), 1);
  assert_int_equal (active_of (e.vol, 7), 0);
  assert_true (backend_has (&e, true, 7, 1));
  assert_true (backend_has (&e, true, 8, 1));
  assert_true (reads_v (&e, 7, 2));
  /* The next round writes the new data. */
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (dirty (&e), 0);
  assert_true (backend_has (&e, true, 7, 2));
  /* Evicted and read back from the backend: still version 2. */
  assert_true (vol_evict (e.vol, 100) >= 1);
  assert_int_equal (slot_of (e.vol, 7), HHC_NIL);
  assert_true (reads_v (&e, 7, 2));
  gate_destroy (&g);
  env_free (&e);
}

/* A trim elsewhere in the volume while a block is written back does
 * not stop that block from becoming clean (steady discards must not
 * stop write-back); the trim is tracked by block range.
 */
static void
test_trim_elsewhere_during_writeback (void **state)
{
  struct env e;
  struct gate g;
  struct batch_arg a;
  pthread_t th;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&g);
  write_v (&e, 7, 1);
  write_v (&e, 200, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  /* First without a trim: both blocks are cleaned. */
  assert_true (active_of (e.vol, 7) & ACT_WB);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (dirty (&e), 0);

  /* Again, with a trim of another block in the middle. */
  write_v (&e, 7, 2);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  assert_int_equal (hhc_trim (e.vol, e.mb, BS, 200 * BS, false), 0);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (a.result, 1);
  assert_int_equal (dirty (&e), 0);
  assert_true (backend_has (&e, true, 7, 2));
  gate_destroy (&g);
  env_free (&e);
}

/* A client write that claimed a block (ACT_BUSY) while the block was
 * being written back must keep its claim until it finishes: the end of
 * the write-back batch (flusher.c finish_block) may not clear it.
 * Otherwise a second write-back claims the block in the middle of the
 * client's write, writes the old data to the backend and marks the
 * block clean; the new data is then lost on eviction, even after a
 * FLUSH.
 */
static void
test_busy_survives_writeback (void **state)
{
  struct env e;
  struct gate gb, gd;
  struct batch_arg a;
  struct write_arg w;
  pthread_t tb, tw;
  uint32_t k, flags_mid;
  long second;
  bool lost;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&gb);
  gate_init (&gd);
  write_v (&e, 7, 1);
  k = slot_of (e.vol, 7);

  /* Write-back of block 7 stops in the backend write. */
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &gb);
  gate_arm (&gb, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&tb, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&gb));

  /* A client rewrites block 7 and stops in its SSD write. */
  hookdev_set_hooks (e.hdev, gate_dev_hook, NULL, NULL, &gd);
  gate_arm (&gd, cache_slot_offset (&e.vol->cache, k),
            cache_slot_offset (&e.vol->cache, k) + BS);
  write_arg_init (&w, &e, 7, 2);
  assert_int_equal (pthread_create (&tw, NULL, write_thread, &w), 0);
  assert_true (gate_wait_entered (&gd));
  assert_true (active_of (e.vol, 7) & ACT_BUSY);

  /* The write-back batch ends while the client is still writing. */
  gate_open (&gb);
  assert_true (test_join (tb, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  flags_mid = active_of (e.vol, 7);

  /* Another write-back round now, as the flusher thread would run. */
  second = flusher_batch (e.vol, e.mb, 1);

  /* Let the client finish, flush, and push block 7 out of the cache. */
  gate_open (&gd);
  assert_true (test_join (tw, TIMEOUT_MS));
  hookdev_set_hooks (e.hdev, NULL, NULL, NULL, NULL);
  assert_int_equal (w.result, 0);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  vol_evict (e.vol, 100);
  lost = !reads_v (&e, 7, 2);
  if (!(flags_mid & ACT_BUSY) || lost)
    {
      gate_destroy (&gb);
      gate_destroy (&gd);
      env_free (&e);
    }
  if (!(flags_mid & ACT_BUSY) || lost)
    fail_msg ("client write's ACT_BUSY was %s by the end of a concurrent "
              "write-back (flags 0x%x); a second write-back then "
              "cleaned %ld block(s) under the writer%s",
              flags_mid & ACT_BUSY ? "kept" : "cleared", flags_mid, second,
              lost ? "; the flushed write of version 2 was LOST (block "
                     "reads version 1 after eviction)"
                   : "");
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_true (backend_has (&e, true, 7, 2));
  gate_destroy (&gb);
  gate_destroy (&gd);
  env_free (&e);
}

/* flusher_batch returns the number of blocks it cleaned, and the
 * writeback_blocks counter counts cleaned blocks: a block rewritten
 * during its write-back is not cleaned and must not be counted.
 */
static void
test_batch_counts_only_cleaned (void **state)
{
  struct env e;
  struct gate g;
  struct batch_arg a;
  pthread_t th;
  struct hhc_counts c;

  env_init (&e, 64, 1 << 20, 0);
  env_open (&e);
  gate_init (&g);
  write_v (&e, 7, 1);
  write_v (&e, 8, 1);
  membackend_set_hook (e.mb, MB_OP_WRITE, gate_backend_hook, &g);
  gate_arm (&g, 7 * BS, 8 * BS);
  a = (struct batch_arg){ e.vol, e.mb, 0 };
  assert_int_equal (pthread_create (&th, NULL, batch_thread, &a), 0);
  assert_true (gate_wait_entered (&g));
  write_v (&e, 7, 2);
  gate_open (&g);
  assert_true (test_join (th, TIMEOUT_MS));
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  hhc_get_counts (e.vol, &c);
  gate_destroy (&g);
  env_free (&e);
  assert_int_equal (c.dirty, 1);
  if (a.result != 1 || c.writeback_blocks != 1)
    fail_msg ("one of two blocks was cleaned, but flusher_batch returned "
              "%ld and writeback_blocks is %llu",
              a.result, (unsigned long long)c.writeback_blocks);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_generation_race),
    cmocka_unit_test (test_busy_survives_writeback),
    cmocka_unit_test (test_trim_elsewhere_during_writeback),
    cmocka_unit_test (test_batch_counts_only_cleaned),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
