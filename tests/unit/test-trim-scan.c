/* A trim or zero over more blocks than the cache has slots scans the
 * slots (volume.c invalidate_range); a copy-on-write that decided to
 * publish just before the passdown began must not be missed.
 *
 * The copy-on-write of a partial write to a clean block is held after
 * it has freed the old slot and before it publishes the new one, by a
 * wrapper around cache_release_slot (-Wl,--wrap for this program only,
 * Makefile.am), while a zero over the block runs: once the write is let
 * go, the block must read as zeros, or as zeros with the write's bytes,
 * never with the old data around them.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vol.h"
#include "volenv.h"

#define BS 4096u
#define NSLOTS 128u  /* two lock stripes */
#define NBLOCKS 2048 /* the zero covers them all: more than NSLOTS */
#define X 10         /* the block written during the zero */
#define WLEN 512u    /* the write's bytes at the start of X */
#define TIMEOUT_MS 30000
#define TRIM_WAIT_MS 500 /* how long a fixed zero is let wait for the write */

/* The hold: the writing thread stops in its first cache_release_slot. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool held, go;
} hold = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false };
static __thread bool hold_me;

void __real_cache_release_slot (struct hhc_cache *c, uint32_t slot);
void __wrap_cache_release_slot (struct hhc_cache *c, uint32_t slot);

void
__wrap_cache_release_slot (struct hhc_cache *c, uint32_t slot)
{
  if (hold_me)
    {
      struct timespec ts;

      hold_me = false;
      test_deadline (&ts, TIMEOUT_MS);
      pthread_mutex_lock (&hold.lock);
      hold.held = true;
      pthread_cond_broadcast (&hold.cond);
      while (!hold.go)
        if (pthread_cond_timedwait (&hold.cond, &hold.lock, &ts) == ETIMEDOUT)
          break;
      pthread_mutex_unlock (&hold.lock);
    }
  __real_cache_release_slot (c, slot);
}

struct env {
  struct volenv v;
  int wr, zr;
};

static void *
write_run (void *arg)
{
  struct env *e = arg;
  unsigned char buf[WLEN];

  memset (buf, 0x11, sizeof buf);
  hold_me = true;
  e->wr = hhc_write (e->v.vol, e->v.mb, buf, WLEN, (uint64_t)X * BS, false);
  return NULL;
}

static void *
zero_run (void *arg)
{
  struct env *e = arg;

  e->zr = hhc_zero (e->v.vol, e->v.mb, NBLOCKS * BS, 0, false);
  return NULL;
}

/* A block of the zero's range in the other stripe than X's, or none. */
static uint64_t
other_stripe_block (struct env *e)
{
  for (uint64_t b = X + 1; b < NBLOCKS; b++)
    if (index_stripe (&e->v.vol->idx, b) != index_stripe (&e->v.vol->idx, X))
      return b;
  fail_msg ("every block is in X's stripe");
  return 0;
}

/* neighbour: another cached block in the range, so that the region
 * counts do not let the zero skip the scan.
 */
static void
cow_during_zero (enum hhc_mode mode, bool neighbour)
{
  struct env e;
  unsigned char blk[BS], zero[BS];
  pthread_t tw, tz;
  struct timespec ts;
  bool zero_joined;

  memset (&e, 0, sizeof e);
  memset (zero, 0, sizeof zero);
  hold.held = hold.go = false;
  volenv_init (&e.v, mode, NSLOTS, (uint64_t)NBLOCKS * BS);
  assert_int_equal (volenv_try_open (&e.v), 0);
  struct hhc_volume *vol = e.v.vol;
  struct membackend *mb = e.v.mb;
  assert_true (vol->idx.nslots < NBLOCKS);

  /* X (and the neighbour) cached clean with old data. */
  memset (blk, 0xaa, sizeof blk);
  membackend_poke (mb, blk, BS, (uint64_t)X * BS);
  assert_int_equal (hhc_read (vol, mb, blk, BS, (uint64_t)X * BS), 0);
  if (neighbour)
    {
      uint64_t y = other_stripe_block (&e);
      assert_int_equal (hhc_read (vol, mb, blk, BS, y * BS), 0);
    }

  /* The write stops between freeing X's old slot and publishing its
   * new one; the zero starts then.
   */
  assert_int_equal (pthread_create (&tw, NULL, write_run, &e), 0);
  test_deadline (&ts, TIMEOUT_MS);
  pthread_mutex_lock (&hold.lock);
  while (!hold.held)
    assert_int_not_equal (pthread_cond_timedwait (&hold.cond, &hold.lock, &ts),
                          ETIMEDOUT);
  pthread_mutex_unlock (&hold.lock);
  assert_int_equal (pthread_create (&tz, NULL, zero_run, &e), 0);
  /* A correct zero waits for the write (whose stripe lock is held);
   * let it finish if it does not.
   */
  zero_joined = test_join (tz, TRIM_WAIT_MS);
  pthread_mutex_lock (&hold.lock);
  hold.go = true;
  pthread_cond_broadcast (&hold.cond);
  pthread_mutex_unlock (&hold.lock);
  assert_true (test_join (tw, TIMEOUT_MS));
  assert_true (zero_joined || test_join (tz, TIMEOUT_MS));
  assert_int_equal (e.wr, 0);
  assert_int_equal (e.zr, 0);

  /* Zeros, the write's bytes or not at the start: no old byte. */
  assert_int_equal (hhc_read (vol, mb, blk, BS, (uint64_t)X * BS), 0);
  assert_memory_equal (blk + WLEN, zero, BS - WLEN);
  assert_int_equal (hhc_flush (vol, mb), 0);
  assert_int_equal (hhc_drain (vol, mb), 0);
  membackend_peek (mb, false, blk, BS, (uint64_t)X * BS);
  assert_memory_equal (blk + WLEN, zero, BS - WLEN);

  volenv_free (&e.v);
}

static void
test_cow_alone_in_region (void **state)
{
  cow_during_zero (HHC_MODE_WB, false);
}

static void
test_cow_with_neighbour (void **state)
{
  cow_during_zero (HHC_MODE_WB, true);
}

static void
test_cow_wbflush (void **state)
{
  cow_during_zero (HHC_MODE_WBFLUSH, true);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_cow_alone_in_region),
    cmocka_unit_test (test_cow_with_neighbour),
    cmocka_unit_test (test_cow_wbflush),
  };

  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
