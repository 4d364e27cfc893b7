/* A failed backend flush is sticky (docs/design.md §6.3), on one
 * volume over the in-memory backend: every later FLUSH fails, in pt
 * and wt, after a pass-down, when the flusher's own flush failed, in
 * a race with a FLUSH; a close after it does not mark the cache closed.
 * (Split from test-volume.c.)
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
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

/* ---- a failed backend flush is sticky ----
 *
 * The backend drops what it had not flushed when a flush fails (as
 * Linux drops dirty pages whose write-back failed), so its next flush
 * succeeds although a pass-down (a pt or wt write, a trim, a zero) is
 * lost.  So a backend flush that fails while a pass-down may be
 * unflushed (in pt and wt: any) makes every later FLUSH fail with EIO
 * until the volume is reopened; the flusher's own backend flush counts
 * too; and a close after such a failure does not mark the cache closed
 * (a wt cache then drops its clean blocks at the next open).  x is
 * block 5, y block 9.
 */

#define X (5 * BS)
#define Y (9 * BS)

static uint64_t
flush_errors (struct hhc_volume *vol)
{
  struct hhc_counts c;

  hhc_get_counts (vol, &c);
  return c.flush_errors;
}

/* The stats document contains needle. */
static void
stats_has (struct hhc_volume *vol, const char *needle)
{
  char *j = hhc_stats_json (vol);

  assert_non_null (j);
  if (strstr (j, needle) == NULL)
    fail_msg ("the stats lack %s:\n%s", needle, j);
  free (j);
}

/* pt, wt: write x=A, FLUSH; write x=B while the backend's flushes
 * fail; FLUSH fails; the backend heals; FLUSH must still fail.  Close
 * and reopen: x reads A (the backend's), not B from the cache.
 */
static void
sticky_write (enum hhc_mode mode)
{
  struct volenv e;
  unsigned char a[BS], b[BS], got[BS];

  memset (a, 'A', BS);
  memset (b, 'B', BS);
  volenv_init (&e, mode, 64, 1 << 20);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_write (e.vol, e.mb, a, BS, X, false), 0);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (flush_errors (e.vol), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_write (e.vol, e.mb, b, BS, X, false), 0);
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
  assert_int_equal (flush_errors (e.vol), 1);
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  /* The test's premise: the backend forgot B. */
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (hhc_flush (e.vol, e.mb) != EIO)
    fail_msg ("mode %s: a FLUSH after a failed backend flush did not fail "
              "(the backend dropped the write of B)",
              hhc_mode_to_string (mode));
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
  /* The sticky failures count too, and the stats say why. */
  assert_int_equal (flush_errors (e.vol), 3);
  stats_has (e.vol, "\"flush_errors\": 3");
  stats_has (e.vol, "\"backend_flush_failed\": true");

  (void)hhc_close (e.vol); /* may report the failure */
  e.vol = NULL;
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  if (memcmp (got, a, BS) != 0)
    fail_msg ("mode %s: after a close that followed a failed backend "
              "flush, x is not the backend's A (%s)",
              hhc_mode_to_string (mode),
              memcmp (got, b, BS) == 0 ? "B from the cache: it was marked "
                                         "closed"
                                       : "neither A nor B");
  assert_int_equal (hhc_flush (e.vol, e.mb), 0); /* reopened */
  volenv_free (&e);
}

static void
test_sticky_flush_pt (void **state)
{
  sticky_write (HHC_MODE_PT);
}

static void
test_sticky_flush_wt (void **state)
{
  sticky_write (HHC_MODE_WT);
}

/* wb, wbflush: x=A read into the cache (clean), then zeroed or
 * trimmed (a pass-down); the backend's flushes fail: FLUSH fails; the
 * backend heals; FLUSH must still fail.
 */
static void
sticky_passdown (enum hhc_mode mode, bool trim)
{
  struct volenv e;
  unsigned char a[BS], got[BS];

  memset (a, 'A', BS);
  volenv_init (&e, mode, 64, 1 << 20);
  membackend_poke (e.mb, a, BS, X);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  assert_memory_equal (got, a, BS);
  if (trim)
    assert_int_equal (hhc_trim (e.vol, e.mb, BS, X, false), 0);
  else
    assert_int_equal (hhc_zero (e.vol, e.mb, BS, X, false), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (hhc_flush (e.vol, e.mb) != EIO)
    fail_msg ("mode %s: a FLUSH after a failed backend flush did not fail "
              "(the backend dropped the %s of x)",
              hhc_mode_to_string (mode), trim ? "trim" : "zero");
  volenv_free (&e);
}

static void
test_sticky_flush_passdown (void **state)
{
  sticky_passdown (HHC_MODE_WB, false);
  sticky_passdown (HHC_MODE_WB, true);
  sticky_passdown (HHC_MODE_WBFLUSH, false);
  sticky_passdown (HHC_MODE_WBFLUSH, true);
}

/* Wait until the volume counts a failed write-back (it has seen the
 * flusher's backend flush fail); false after TIMEOUT_MS.
 */
static bool
wait_writeback_error (struct volenv *e)
{
  struct timespec nap = { 0, 1000000 };

  for (unsigned ms = 0; ms < TIMEOUT_MS; ms++)
    {
      if (volenv_counts (e).writeback_errors > 0)
        return true;
      nanosleep (&nap, NULL);
    }
  return volenv_counts (e).writeback_errors > 0;
}

/* wb: x=A read (clean) and zeroed; the backend's flushes fail; y is
 * written and the flusher's write-back of y fails on its backend
 * flush; the backend heals: the client's FLUSH must fail, although it
 * never saw a failure itself.
 */
static void
test_sticky_flush_flusher (void **state)
{
  struct volenv e;
  unsigned char a[BS], c[BS], got[BS];

  memset (a, 'A', BS);
  memset (c, 'C', BS);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  e.conf.idle_ms = 10; /* write back as soon as the client is quiet */
  membackend_poke (e.mb, a, BS, X);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  assert_int_equal (hhc_zero (e.vol, e.mb, BS, X, false), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_write (e.vol, e.mb, c, BS, Y, false), 0);
  assert_true (wait_writeback_error (&e));
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (hhc_flush (e.vol, e.mb) != EIO)
    fail_msg ("wb: a FLUSH after the flusher's backend flush failed did not "
              "fail (the backend dropped the zero of x)");
  volenv_free (&e);
}

/* A failed backend flush that has returned from the backend (which
 * has dropped what it had not flushed) but not yet to the volume, and
 * meanwhile a client's FLUSH, whose own backend flush finds nothing
 * left to write: the FLUSH must not succeed.  The failed flush is held
 * after the backend until the FLUSH returns, or 300 ms pass (a volume
 * that orders its backend flushes makes the FLUSH wait for it).
 *   wb: x=A read and zeroed; the flusher's write-back of y fails.
 *   pt: x=B written; another client's FLUSH fails.
 */
struct flush_race {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool failed;     /* a failed flush is being held */
  bool flush_done; /* the client's FLUSH returned */
  struct volenv *e;
  int first_result; /* pt: the failing FLUSH's result */
};

static void
flush_race_hook (void *opaque, int result)
{
  struct flush_race *fr = opaque;
  struct timespec ts;

  if (result == 0)
    return;
  pthread_mutex_lock (&fr->lock);
  if (!fr->failed) /* hold the first failure only */
    {
      fr->failed = true;
      pthread_cond_broadcast (&fr->cond);
      test_deadline (&ts, 300);
      while (!fr->flush_done)
        if (pthread_cond_timedwait (&fr->cond, &fr->lock, &ts) == ETIMEDOUT)
          break;
    }
  pthread_mutex_unlock (&fr->lock);
}

static void *
failing_flush_run (void *arg)
{
  struct flush_race *fr = arg;

  fr->first_result = hhc_flush (fr->e->vol, fr->e->mb);
  return NULL;
}

static void
flush_race (enum hhc_mode mode)
{
  struct volenv e;
  struct flush_race fr = { .failed = false, .e = &e, .first_result = -1 };
  unsigned char a[BS], b[BS], c[BS], got[BS];
  pthread_t t;
  struct timespec ts;
  int r;

  memset (a, 'A', BS);
  memset (b, 'B', BS);
  memset (c, 'C', BS);
  pthread_mutex_init (&fr.lock, NULL);
  pthread_cond_init (&fr.cond, NULL);
  volenv_init (&e, mode, 64, 1 << 20);
  e.conf.idle_ms = 10;
  membackend_poke (e.mb, a, BS, X);
  membackend_set_drop_on_flush_error (e.mb, true);
  membackend_set_flush_done_hook (e.mb, flush_race_hook, &fr);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  if (mode == HHC_MODE_PT)
    {
      assert_int_equal (hhc_write (e.vol, e.mb, b, BS, X, false), 0);
      membackend_fail_all (e.mb, MB_OP_FLUSH, true);
      assert_int_equal (pthread_create (&t, NULL, failing_flush_run, &fr), 0);
    }
  else
    {
      assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
      assert_int_equal (hhc_zero (e.vol, e.mb, BS, X, false), 0);
      membackend_fail_all (e.mb, MB_OP_FLUSH, true);
      assert_int_equal (hhc_write (e.vol, e.mb, c, BS, Y, false), 0);
    }
  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&fr.lock);
  while (!fr.failed)
    assert_int_not_equal (pthread_cond_timedwait (&fr.cond, &fr.lock, &ts),
                          ETIMEDOUT);
  pthread_mutex_unlock (&fr.lock);
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  r = hhc_flush (e.vol, e.mb);
  pthread_mutex_lock (&fr.lock);
  fr.flush_done = true;
  pthread_cond_broadcast (&fr.cond);
  pthread_mutex_unlock (&fr.lock);
  if (mode == HHC_MODE_PT)
    {
      assert_true (test_join (t, TIMEOUT_MS));
      assert_int_equal (fr.first_result, EIO);
    }
  membackend_set_flush_done_hook (e.mb, NULL, NULL);
  assert_int_equal (membackend_cmp (e.mb, false, a, BS, X), 0);
  if (r != EIO)
    fail_msg ("mode %s: a FLUSH sent while %s backend flush was failing "
              "returned %d, not EIO (the backend had dropped the %s of x)",
              hhc_mode_to_string (mode),
              mode == HHC_MODE_PT ? "another FLUSH's" : "the flusher's", r,
              mode == HHC_MODE_PT ? "write" : "zero");
  volenv_free (&e);
  pthread_mutex_destroy (&fr.lock);
  pthread_cond_destroy (&fr.cond);
}

static void
test_sticky_flush_race (void **state)
{
  flush_race (HHC_MODE_WB);
  flush_race (HHC_MODE_PT);
}

/* The rule's other side, in wb: a failed write-back flush with no
 * pass-down behind it loses nothing (the blocks stay dirty and are
 * written again), so FLUSH still succeeds and the data reaches the
 * backend.
 */
static void
test_flusher_flush_error_no_passdown (void **state)
{
  struct volenv e;
  unsigned char c[BS];

  memset (c, 'C', BS);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  e.conf.idle_ms = 10;
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_start (e.vol, e.mb), 0);
  membackend_fail_all (e.mb, MB_OP_FLUSH, true);
  assert_int_equal (hhc_write (e.vol, e.mb, c, BS, Y, false), 0);
  assert_true (wait_writeback_error (&e));
  membackend_fail_all (e.mb, MB_OP_FLUSH, false);
  assert_int_equal (hhc_flush (e.vol, e.mb), 0);
  assert_int_equal (hhc_drain (e.vol, e.mb), 0);
  assert_int_equal (membackend_cmp (e.mb, true, c, BS, Y), 0);
  volenv_free (&e);
}

/* wb: another backend flush that fails while write-back's writes are
 * unflushed drops them too (the backend drops every unflushed write),
 * and write-back's own flush then succeeds with nothing left to write:
 * the blocks must stay dirty, never be clean while the backend lacks
 * them (the spin model's flaw 10).  y is zeroed (a pass-down, so that
 * a client's FLUSH flushes the backend) and x written (dirty); a
 * write-back batch runs in this thread; at the start of its backend
 * flush a hook makes another thread's FLUSH fail on the backend (which
 * drops the write-back of x) and waits for it; then the batch's flush
 * goes on and succeeds.
 */
struct other_flush {
  struct volenv *e;
  bool armed;  /* the next backend flush is the write-back's */
  bool ran;    /* the hook ran the other FLUSH */
  bool joined; /* and it returned */
  int result;  /* its result */
};

static void *
other_flush_run (void *arg)
{
  struct other_flush *o = arg;

  o->result = hhc_flush (o->e->vol, o->e->mb);
  return NULL;
}

static void
other_flush_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct other_flush *o = opaque;
  pthread_t t;

  /* Only the write-back's flush: the other FLUSH's passes through. */
  if (!o->armed)
    return;
  o->armed = false;
  membackend_fail_next (o->e->mb, MB_OP_FLUSH, 1);
  if (pthread_create (&t, NULL, other_flush_run, o) != 0)
    return;
  o->ran = true;
  o->joined = test_join (t, TIMEOUT_MS);
}

static void
test_writeback_other_flush_failed (void **state)
{
  struct volenv e;
  struct other_flush o = { .e = &e, .result = -1 };
  unsigned char x[BS], got[BS];
  long n;

  pattern_fill (x, X / BS, 0, SECTORS, 1);
  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  membackend_set_drop_on_flush_error (e.mb, true);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_zero (e.vol, e.mb, BS, Y, false), 0);
  assert_int_equal (membackend_count (e.mb, MB_ZEROS), 1);
  assert_int_equal (hhc_write (e.vol, e.mb, x, BS, X, false), 0);
  assert_int_equal (volenv_counts (&e).dirty, 1);

  o.armed = true;
  membackend_set_hook (e.mb, MB_OP_FLUSH, other_flush_hook, &o);
  n = flusher_batch (e.vol, e.mb, 1);
  membackend_set_hook (e.mb, MB_OP_FLUSH, NULL, NULL);
  membackend_fail_next (e.mb, MB_OP_FLUSH, 0);
  assert_true (o.ran);
  assert_true (o.joined);
  assert_int_equal (o.result, EIO);
  assert_int_equal (membackend_count (e.mb, MB_FLUSH_ERRORS), 1);
  /* The test's premise: the backend dropped the write-back of x. */
  assert_int_not_equal (membackend_cmp (e.mb, false, x, BS, X), 0);
  assert_int_not_equal (membackend_cmp (e.mb, true, x, BS, X), 0);
  if (n > 0 || volenv_counts (&e).dirty != 1)
    fail_msg ("wb: write-back cleaned x (batch returned %ld, %llu blocks "
              "dirty) although another backend flush failed meanwhile and "
              "dropped its write: the backend lacks x",
              n, (unsigned long long)volenv_counts (&e).dirty);
  assert_int_equal (n, -EIO);

  /* The fault gone, the next write-back makes x durable. */
  assert_int_equal (flusher_batch (e.vol, e.mb, 1), 1);
  assert_int_equal (volenv_counts (&e).dirty, 0);
  assert_int_equal (membackend_cmp (e.mb, true, x, BS, X), 0);
  assert_int_equal (hhc_read (e.vol, e.mb, got, BS, X), 0);
  assert_memory_equal (got, x, BS);
  /* The failed flush may have dropped the zero of y: sticky. */
  assert_int_equal (hhc_flush (e.vol, e.mb), EIO);
  volenv_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_sticky_flush_pt),
    cmocka_unit_test (test_sticky_flush_wt),
    cmocka_unit_test (test_sticky_flush_passdown),
    cmocka_unit_test (test_sticky_flush_flusher),
    cmocka_unit_test (test_sticky_flush_race),
    cmocka_unit_test (test_flusher_flush_error_no_passdown),
    cmocka_unit_test (test_writeback_other_flush_failed),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
