/* Reads of one volume that miss the cache: concurrent misses of one
 * block coalesced into one backend read, a large miss fetched in runs
 * around cached blocks, prefetch in one backend read.  (The request
 * paths against a shadow: test-volume.c; the volume: volenv.h.)
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

/* ---- read-miss coalescing ---- */

#define READERS 4

struct miss_probe {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t target; /* offset of the block */
  unsigned reads;  /* backend reads of it */
  bool entered;
};

/* Hold the first backend read of the block until a second read of it
 * arrives (coalescing broken) or 300 ms pass: long enough for the
 * other readers to reach the block, which only makes the test
 * stronger, never flaky.
 */
static void
miss_hook (void *opaque, uint64_t offset, uint32_t count)
{
  struct miss_probe *p = opaque;
  struct timespec ts;

  if (offset != p->target)
    return;
  pthread_mutex_lock (&p->lock);
  p->reads++;
  pthread_cond_broadcast (&p->cond);
  if (p->reads == 1)
    {
      p->entered = true;
      test_deadline (&ts, 300);
      while (p->reads == 1)
        if (pthread_cond_timedwait (&p->cond, &p->lock, &ts) == ETIMEDOUT)
          break;
    }
  pthread_mutex_unlock (&p->lock);
}

struct reader {
  struct volenv *e;
  uint64_t lba;
  int result;
  bool ok;
};

static void *
reader_run (void *arg)
{
  struct reader *r = arg;
  unsigned char buf[BS], want[BS];

  pattern_fill (want, r->lba, 0, SECTORS, 0);
  r->result = hhc_read (r->e->vol, r->e->mb, buf, BS, r->lba * BS);
  r->ok = memcmp (buf, want, BS) == 0;
  return NULL;
}

static void
test_read_miss_coalescing (void **state)
{
  struct volenv e;
  struct miss_probe p;
  struct reader rd[READERS];
  pthread_t th[READERS];
  unsigned char blk[BS];
  struct timespec ts;
  struct hhc_counts c;

  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  pattern_fill (blk, 9, 0, SECTORS, 0);
  membackend_poke (e.mb, blk, BS, 9 * BS);
  assert_int_equal (volenv_try_open (&e), 0);
  memset (&p, 0, sizeof p);
  pthread_mutex_init (&p.lock, NULL);
  pthread_cond_init (&p.cond, NULL);
  p.target = 9 * BS;
  membackend_set_hook (e.mb, MB_OP_READ, miss_hook, &p);
  for (int i = 0; i < READERS; i++)
    {
      rd[i] = (struct reader){ &e, 9, -1, false };
      assert_int_equal (pthread_create (&th[i], NULL, reader_run, &rd[i]), 0);
      if (i == 0)
        {
          /* The others start once the first holds the backend read. */
          test_deadline (&ts, TIMEOUT_MS);
          pthread_mutex_lock (&p.lock);
          while (!p.entered)
            assert_int_not_equal (
                pthread_cond_timedwait (&p.cond, &p.lock, &ts), ETIMEDOUT);
          pthread_mutex_unlock (&p.lock);
        }
    }
  for (int i = 0; i < READERS; i++)
    {
      assert_true (test_join (th[i], TIMEOUT_MS));
      assert_int_equal (rd[i].result, 0);
      assert_true (rd[i].ok);
    }
  membackend_set_hook (e.mb, MB_OP_READ, NULL, NULL);
  assert_int_equal (p.reads, 1);
  c = volenv_counts (&e);
  assert_int_equal (c.read_misses, 1);
  assert_int_equal (c.read_hits, READERS - 1);
  pthread_mutex_destroy (&p.lock);
  pthread_cond_destroy (&p.cond);
  volenv_free (&e);
}

/* ---- prefetch ---- */

static void
test_prefetch (void **state)
{
  struct volenv e;
  unsigned char buf[BS];
  struct hhc_counts c;
  uint64_t reads;

  volenv_init (&e, HHC_MODE_WT, 64, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  assert_int_equal (hhc_prefetch (e.vol, e.mb, 16 * BS - 100, 4 * BS + 50), 0);
  reads = membackend_count (e.mb, MB_READS);
  assert_int_equal (reads, 1); /* the 16 blocks in one backend read */
  for (uint64_t l = 4; l < 20; l++)
    assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, l * BS), 0);
  c = volenv_counts (&e);
  assert_int_equal (c.read_hits, 16);
  assert_int_equal (c.read_misses, 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), reads);
  /* Prefetching cached blocks reads nothing. */
  assert_int_equal (hhc_prefetch (e.vol, e.mb, 16 * BS, 4 * BS), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), reads);
  volenv_free (&e);
}

/* A large read miss fetches its blocks from the backend in runs (one
 * request per run of uncached blocks), and caches every block.
 */
static void
test_read_miss_runs (void **state)
{
  struct volenv e;
  static unsigned char buf[64 * BS], want[64 * BS];
  struct hhc_counts c;

  volenv_init (&e, HHC_MODE_WB, 128, 1 << 20);
  assert_int_equal (volenv_try_open (&e), 0);
  /* Block 10 cached first: the 64-block read is two runs around it. */
  assert_int_equal (hhc_read (e.vol, e.mb, buf, BS, 10 * BS), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), 1);
  assert_int_equal (hhc_read (e.vol, e.mb, buf, 64 * BS - 1000, 500), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), 3);
  membackend_peek (e.mb, false, want, 64 * BS - 1000, 500);
  assert_memory_equal (buf, want, 64 * BS - 1000);
  c = volenv_counts (&e);
  assert_int_equal (c.read_misses, 64);
  assert_int_equal (c.read_hits, 1);
  /* All cached now: no backend read. */
  assert_int_equal (hhc_read (e.vol, e.mb, buf, 64 * BS, 0), 0);
  assert_int_equal (membackend_count (e.mb, MB_READS), 3);
  volenv_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_read_miss_coalescing),
    cmocka_unit_test (test_prefetch),
    cmocka_unit_test (test_read_miss_runs),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
