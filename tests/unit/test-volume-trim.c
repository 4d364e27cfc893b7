/* Trim and zero on one volume: they invalidate cached blocks (a trim
 * only whole blocks, a zero its edges in the cache), FUA makes them
 * durable, and a trim of a block under write-back waits for it.  (The
 * request paths against a shadow: test-volume.c; the volume:
 * volenv.h.)
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
#include "preopen.h"
#include "volenv.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)
#define TIMEOUT_MS 30000

/* ---- trim and zero invalidate, FUA makes them durable ---- */

static void
test_trim_zero_fua (void **state)
{
  struct volenv e;
  unsigned char blk[BS], want[BS], zero[BS];
  uint64_t flushes;
  struct hhc_counts c;

  memset (zero, 0, sizeof zero);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  for (uint64_t l = 0; l < 10; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 1);
      assert_int_equal (hhc_write (e.vol, e.mb, blk, BS, l * BS, false), 0);
    }
  assert_int_equal (volenv_counts (&e).dirty, 10);

  /* Trim blocks 2 and 3 (whole) with FUA. */
  flushes = membackend_count (e.mb, MB_FLUSHES);
  assert_int_equal (hhc_trim (e.vol, e.mb, 2 * BS, 2 * BS, true), 0);
  c = volenv_counts (&e);
  assert_int_equal (c.dirty, 8);
  assert_int_equal (membackend_count (e.mb, MB_TRIMS), 1);
  assert_true (membackend_count (e.mb, MB_FLUSHES) > flushes);
  membackend_peek (e.mb, true, blk, BS, 2 * BS);
  assert_memory_equal (blk, zero, BS);
  assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, 3 * BS), 0);
  assert_memory_equal (blk, zero, BS);

  /* Zero from the middle of block 5 to the middle of block 7: the
   * edges are zeroed in the cache, block 6 goes down.
   */
  flushes = membackend_count (e.mb, MB_FLUSHES);
  assert_int_equal (hhc_zero (e.vol, e.mb, 2 * BS - 50, 5 * BS + 100, true), 0);
  assert_int_equal (membackend_count (e.mb, MB_ZEROS), 1);
  assert_true (membackend_count (e.mb, MB_FLUSHES) > flushes);
  membackend_peek (e.mb, true, blk, BS, 6 * BS);
  assert_memory_equal (blk, zero, BS);
  for (uint64_t l = 5; l <= 7; l++)
    {
      pattern_fill (want, l, 0, SECTORS, 1);
      if (l == 5)
        memset (want + 100, 0, BS - 100);
      else if (l == 6)
        memset (want, 0, BS);
      else
        memset (want, 0, 50);
      assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, l * BS), 0);
      assert_memory_equal (blk, want, BS);
    }
  /* A trim smaller than a block drops nothing. */
  assert_int_equal (hhc_trim (e.vol, e.mb, 100, 8 * BS + 10, false), 0);
  pattern_fill (want, 8, 0, SECTORS, 1);
  assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, 8 * BS), 0);
  assert_memory_equal (blk, want, BS);
  /* After write-back the backend matches. */
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  for (uint64_t l = 0; l < 10; l++)
    {
      assert_int_equal (hhc_read (e.vol, e.mb, want, BS, l * BS), 0);
      membackend_peek (e.mb, true, blk, BS, l * BS);
      assert_memory_equal (blk, want, BS);
    }
  volenv_free (&e);
}

/* A trim of a block under write-back waits for it: the backend must
 * end up trimmed, not holding the written-back data.
 */
struct wb_hold {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t target;
  bool entered, trim_done, trim_started;
  bool done_during_hold; /* the trim finished while we held the write */
};

static void
wb_hold_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct wb_hold *h = opaque;
  struct timespec ts;

  if (offset != h->target)
    return;
  pthread_mutex_lock (&h->lock);
  if (h->entered) /* hold only the first write-back */
    {
      pthread_mutex_unlock (&h->lock);
      return;
    }
  h->entered = true;
  pthread_cond_broadcast (&h->cond);
  /* Hold the write until the trim has started, then up to 300 ms
   * more (the trim should be waiting for us, not finishing).
   */
  test_deadline (&ts, TIMEOUT_MS);
  while (!h->trim_started)
    if (pthread_cond_timedwait (&h->cond, &h->lock, &ts) == ETIMEDOUT)
      break;
  test_deadline (&ts, 300);
  while (!h->trim_done)
    if (pthread_cond_timedwait (&h->cond, &h->lock, &ts) == ETIMEDOUT)
      break;
  h->done_during_hold = h->trim_done;
  pthread_mutex_unlock (&h->lock);
}

struct trim_arg {
  struct volenv *e;
  struct wb_hold *h;
  int result;
};

static void *
trim_run (void *arg)
{
  struct trim_arg *t = arg;

  pthread_mutex_lock (&t->h->lock);
  t->h->trim_started = true;
  pthread_cond_broadcast (&t->h->cond);
  pthread_mutex_unlock (&t->h->lock);
  t->result = hhc_trim (t->e->vol, t->e->mb, BS, t->h->target, false);
  pthread_mutex_lock (&t->h->lock);
  t->h->trim_done = true;
  pthread_cond_broadcast (&t->h->cond);
  pthread_mutex_unlock (&t->h->lock);
  return NULL;
}

static void *
drain_run (void *arg)
{
  struct volenv *e = arg;

  hhc_drain (e->vol, e->mb);
  return NULL;
}

static void
test_trim_during_writeback (void **state)
{
  struct volenv e;
  struct wb_hold h;
  struct trim_arg t;
  pthread_t td, tt;
  unsigned char blk[BS], zero[BS];
  struct timespec ts;
  bool trim_early;

  memset (zero, 0, sizeof zero);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  pattern_fill (blk, 8, 0, SECTORS, 1);
  assert_int_equal (hhc_write (e.vol, e.mb, blk, BS, 8 * BS, false), 0);
  memset (&h, 0, sizeof h);
  pthread_mutex_init (&h.lock, NULL);
  pthread_cond_init (&h.cond, NULL);
  h.target = 8 * BS;
  membackend_set_hook (e.mb, MB_OP_WRITE, wb_hold_hook, &h);
  assert_int_equal (pthread_create (&td, NULL, drain_run, &e), 0);
  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&h.lock);
  while (!h.entered)
    assert_int_not_equal (pthread_cond_timedwait (&h.cond, &h.lock, &ts),
                          ETIMEDOUT);
  pthread_mutex_unlock (&h.lock);
  t = (struct trim_arg){ &e, &h, -1 };
  assert_int_equal (pthread_create (&tt, NULL, trim_run, &t), 0);
  assert_true (test_join (td, TIMEOUT_MS));
  assert_true (test_join (tt, TIMEOUT_MS));
  trim_early = h.done_during_hold;
  membackend_set_hook (e.mb, MB_OP_WRITE, NULL, NULL);
  assert_int_equal (t.result, 0);
  assert_false (trim_early);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  membackend_peek (e.mb, false, blk, BS, 8 * BS);
  assert_memory_equal (blk, zero, BS);
  assert_int_equal (hhc_read (e.vol, e.mb, blk, BS, 8 * BS), 0);
  assert_memory_equal (blk, zero, BS);
  assert_int_equal (volenv_counts (&e).dirty, 0);
  pthread_mutex_destroy (&h.lock);
  pthread_cond_destroy (&h.cond);
  volenv_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_trim_zero_fua),
    cmocka_unit_test (test_trim_during_writeback),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
