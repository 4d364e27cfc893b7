/* Promotion of read misses (promote=nhit, gateway/promote.h).
 *
 * The counters alone: the N-th miss promotes, misses further apart
 * than the window do not count together, the table's size is fixed
 * and bounded, collisions only move promotion earlier or later, and
 * concurrent misses are each counted once.  Then a volume on the
 * in-memory backend: with N = 2 a block read once is not cached and
 * read twice is, a run of misses is read around the cache in one
 * backend request, writes and prefetch are cached as without nhit,
 * and random I/O in every caching mode returns what was written.
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
#include "membackend.h"
#include "preopen.h"
#include "promote.h"
#include "volenv.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)

/* ---- the counters ---- */

static void
test_nth_miss (void **state)
{
  struct hhc_promote p;

  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 3, 1000, 0), 0);
  assert_false (promote_miss (&p, 5));
  assert_false (promote_miss (&p, 6)); /* another block: its own count */
  assert_false (promote_miss (&p, 5));
  assert_true (promote_miss (&p, 5)); /* the third */
  assert_true (promote_miss (&p, 5)); /* and after */
  assert_false (promote_miss (&p, 6));
  assert_true (promote_miss (&p, 6));
  assert_int_equal (p.bypassed, 4);
  promote_free (&p);

  /* N = 1 and promote=always promote every miss. */
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 1, 10, 0), 0);
  assert_true (promote_miss (&p, 1));
  promote_free (&p);
  assert_int_equal (promote_init (&p, HHC_PROMOTE_ALWAYS, 0, 0, 0), 0);
  assert_int_equal (promote_entries (&p), 0);
  assert_true (promote_miss (&p, 1));
  promote_free (&p);
}

/* Misses of one other block (same entries, no collision with ours)
 * advance the epoch clock.
 */
static void
other_misses (struct hhc_promote *p, uint64_t n)
{
  for (uint64_t i = 0; i < n; i++)
    promote_miss (p, 1u << 20);
}

static void
test_window (void **state)
{
  struct hhc_promote p;

  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2, 100, 0), 0);
  /* Fewer than window misses between: they count together. */
  for (uint64_t lba = 0; lba < 50; lba++)
    {
      assert_false (promote_miss (&p, lba));
      other_misses (&p, 98);
      assert_true (promote_miss (&p, lba));
    }
  /* 2 * window or more between: the count starts again. */
  assert_false (promote_miss (&p, 7000));
  other_misses (&p, 200);
  assert_false (promote_miss (&p, 7000));
  assert_true (promote_miss (&p, 7000));
  /* An expired count after many epochs (past the epoch's wrap). */
  assert_false (promote_miss (&p, 7001));
  other_misses (&p, 256 * 100 + 250);
  assert_false (promote_miss (&p, 7001));
  promote_free (&p);
}

static void
test_fixed_memory (void **state)
{
  struct hhc_promote p;
  uint32_t *tab;

  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2, 1, 0), 0);
  assert_int_equal (promote_entries (&p), PROMOTE_MIN_ENTRIES);
  promote_free (&p);
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2, 3000, 0), 0);
  assert_int_equal (promote_entries (&p), 8192);
  promote_free (&p);
  assert_int_equal (
      promote_init (&p, HHC_PROMOTE_NHIT, 2, HHC_PROMOTE_MAX_WINDOW, 0), 0);
  assert_int_equal (promote_entries (&p), PROMOTE_MAX_ENTRIES);
  /* Many more distinct blocks than entries: nothing grows. */
  tab = p.tab;
  for (uint64_t lba = 0; lba < 4 * PROMOTE_MAX_ENTRIES; lba++)
    promote_miss (&p, lba * 7919);
  assert_ptr_equal (p.tab, tab);
  assert_int_equal (promote_entries (&p), PROMOTE_MAX_ENTRIES);
  promote_free (&p);
  /* Bad settings. */
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 0, 10, 0), EINVAL);
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 256, 10, 0), EINVAL);
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2, 0, 0), EINVAL);
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2, 10, 3000), EINVAL);
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2, 10, 1u << 21),
                    EINVAL);
}

/* The entry (top bits) and the entry + tag (26 bits) of a block in a
 * table of 1024 entries, as promote.c hashes.
 */
static uint64_t
hash_of (uint64_t lba, unsigned bits)
{
  return ((lba + 1) * 0x9E3779B97F4A7C15ull) >> (64 - bits);
}

static void
test_collisions (void **state)
{
  struct hhc_promote p;
  uint64_t a = 1, b = 2, c;

  /* b: a's entry, another tag; c: a's entry and tag. */
  while (hash_of (b, 10) != hash_of (a, 10)
         || hash_of (b, 26) == hash_of (a, 26))
    b++;
  for (c = 2; hash_of (c, 26) != hash_of (a, 26); c++)
    ;
  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2, 1000, 1024), 0);
  /* Other tags take the entry from each other: promoted later. */
  for (int i = 0; i < 4; i++)
    {
      assert_false (promote_miss (&p, a));
      assert_false (promote_miss (&p, b));
    }
  assert_true (promote_miss (&p, b));
  /* The same tag shares the count: promoted earlier. */
  assert_false (promote_miss (&p, a));
  assert_true (promote_miss (&p, c));
  promote_free (&p);
}

#define THREADS 4
#define TBLOCKS 100

struct counter_thread {
  struct hhc_promote *p;
  unsigned promoted;
};

static void *
counter_run (void *arg)
{
  struct counter_thread *t = arg;

  for (int round = 0; round < 2; round++)
    for (uint64_t lba = 0; lba < TBLOCKS; lba++)
      t->promoted += promote_miss (t->p, lba);
  return NULL;
}

/* 4 threads miss each block twice: with N = 8, exactly the eighth miss
 * of each block promotes it (no count is lost).
 */
static void
test_concurrent (void **state)
{
  struct hhc_promote p;
  struct counter_thread t[THREADS];
  pthread_t th[THREADS];
  unsigned total = 0;

  assert_int_equal (promote_init (&p, HHC_PROMOTE_NHIT, 2 * THREADS,
                                  HHC_PROMOTE_MAX_WINDOW, 1024),
                    0);
  for (int i = 0; i < THREADS; i++)
    {
      t[i] = (struct counter_thread){ &p, 0 };
      assert_int_equal (pthread_create (&th[i], NULL, counter_run, &t[i]), 0);
    }
  for (int i = 0; i < THREADS; i++)
    {
      assert_true (test_join (th[i], 30000));
      total += t[i].promoted;
    }
  assert_int_equal (total, TBLOCKS);
  assert_int_equal (p.bypassed, TBLOCKS * (2 * THREADS - 1));
  promote_free (&p);
}

/* ---- a volume with promote=nhit ---- */

/* A volume of 1 MiB on a cache of nslots slots, nhit with N = 2. */
static void
env_open (struct volenv *e, enum hhc_mode mode, uint32_t nslots)
{
  static unsigned char blk[BS];

  volenv_init (e, mode, nslots, 1 << 20);
  for (uint64_t l = 0; l < 256; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 0);
      membackend_poke (e->mb, blk, BS, l * BS);
    }
  e->conf.promote = HHC_PROMOTE_NHIT;
  assert_int_equal (volenv_try_open (e), 0);
  assert_int_equal (hhc_start (e->vol, e->mb), 0);
}

/* Read count bytes at offset and compare with want, or with the
 * backend's bytes if want is NULL.
 */
static void
read_want (struct volenv *e, uint32_t count, uint64_t offset,
           const unsigned char *want)
{
  static unsigned char buf[64 * BS], back[64 * BS];

  assert_int_equal (hhc_read (e->vol, e->mb, buf, count, offset), 0);
  if (want == NULL)
    {
      membackend_peek (e->mb, false, back, count, offset);
      want = back;
    }
  assert_memory_equal (buf, want, count);
}

static void
read_check (struct volenv *e, uint32_t count, uint64_t offset)
{
  read_want (e, count, offset, NULL);
}

static void
test_volume_read_twice (void **state)
{
  struct volenv e;
  struct hhc_counts c;

  env_open (&e, HHC_MODE_WB, 64);
  read_check (&e, BS, 3 * BS);
  c = volenv_counts (&e);
  assert_int_equal (c.read_fills, 0);
  assert_int_equal (c.clean, 0);
  assert_int_equal (c.promote_bypassed, 1);
  read_check (&e, BS, 3 * BS);
  c = volenv_counts (&e);
  assert_int_equal (c.read_fills, 1);
  assert_int_equal (c.clean, 1);
  read_check (&e, BS, 3 * BS);
  c = volenv_counts (&e);
  assert_int_equal (c.read_hits, 1);
  assert_int_equal (c.read_misses, 2);
  assert_int_equal (membackend_count (e.mb, MB_READS), 2);
  volenv_free (&e);
}

/* A 16-block read missed once: one backend read, nothing cached; the
 * second time its blocks are filled (one read); then a wider read
 * hits them and reads the new blocks around the cache in one request.
 */
static void
test_volume_runs (void **state)
{
  struct volenv e;
  struct hhc_counts c;

  env_open (&e, HHC_MODE_WB, 64);
  read_check (&e, 16 * BS - 700, 300);
  assert_int_equal (membackend_count (e.mb, MB_READS), 1);
  assert_int_equal (volenv_counts (&e).read_fills, 0);
  read_check (&e, 16 * BS - 700, 300);
  assert_int_equal (membackend_count (e.mb, MB_READS), 2);
  assert_int_equal (volenv_counts (&e).read_fills, 16);
  read_check (&e, 32 * BS, 0);
  c = volenv_counts (&e);
  assert_int_equal (membackend_count (e.mb, MB_READS), 3);
  assert_int_equal (c.read_hits, 16);
  assert_int_equal (c.read_fills, 16);
  assert_int_equal (c.promote_bypassed, 32);
  /* Blocks 16..31 were counted once each: now they fill, in one run. */
  read_check (&e, 16 * BS, 16 * BS);
  assert_int_equal (membackend_count (e.mb, MB_READS), 4);
  assert_int_equal (volenv_counts (&e).read_fills, 32);
  volenv_free (&e);
}

/* Writes are cached as the mode says; prefetch always fills. */
static void
test_volume_writes_prefetch (void **state)
{
  static const enum hhc_mode modes[] = { HHC_MODE_WT, HHC_MODE_WB };
  unsigned char blk[BS];

  for (size_t m = 0; m < 2; m++)
    {
      struct volenv e;
      env_open (&e, modes[m], 64);
      pattern_fill (blk, 40, 0, SECTORS, 1);
      assert_int_equal (hhc_write (e.vol, e.mb, blk, BS, 40 * BS, false), 0);
      assert_int_equal (hhc_prefetch (e.vol, e.mb, 4 * BS, 50 * BS), 0);
      assert_int_equal (volenv_counts (&e).read_fills, 4);
      read_want (&e, BS, 40 * BS, blk);
      read_check (&e, 4 * BS, 50 * BS);
      assert_int_equal (volenv_counts (&e).read_hits, 5);
      assert_int_equal (volenv_counts (&e).promote_bypassed, 0);
      volenv_free (&e);
    }
}

/* One random request of test_volume_random on e, shadow the volume's
 * expected contents.
 */
static void
random_op (struct volenv *e, unsigned char *shadow, uint64_t *seed)
{
  static unsigned char buf[8 * BS];
  uint64_t off = test_rand_below (seed, 64 * BS);
  uint32_t len = 1 + test_rand_below (seed, 8 * BS - 1);
  uint64_t op = test_rand_below (seed, 10);

  if (op == 0)
    {
      for (uint32_t j = 0; j < len; j++)
        buf[j] = test_rand (seed);
      assert_int_equal (hhc_write (e->vol, e->mb, buf, len, off, false), 0);
      memcpy (shadow + off, buf, len);
    }
  else if (op == 1)
    {
      assert_int_equal (hhc_zero (e->vol, e->mb, len, off, false), 0);
      memset (shadow + off, 0, len);
    }
  else if (op == 2)
    assert_int_equal (hhc_flush (e->vol, e->mb), 0);
  else
    {
      if (op > 5) /* a hot spot, read again and again */
        off = test_rand_below (seed, 4) * BS;
      read_want (e, len, off, shadow + off);
    }
}

/* Random reads, writes and zeros in every caching mode, on a cache
 * smaller than the volume: every read returns the latest data.
 */
static void
test_volume_random (void **state)
{
  static const enum hhc_mode modes[]
      = { HHC_MODE_PT, HHC_MODE_WT, HHC_MODE_WB, HHC_MODE_WBFLUSH };
  static unsigned char shadow[1 << 20];
  uint64_t seed = 34;

  for (size_t m = 0; m < 4; m++)
    {
      struct volenv e;
      env_open (&e, modes[m], 32);
      membackend_peek (e.mb, false, shadow, sizeof shadow, 0);
      for (int i = 0; i < 3000; i++)
        random_op (&e, shadow, &seed);
      if (modes[m] != HHC_MODE_PT)
        assert_true (volenv_counts (&e).read_fills > 0);
      assert_int_equal (hhc_drain (e.vol, e.mb), 0);
      read_want (&e, 64 * BS, 0, shadow);
      membackend_peek (e.mb, false, shadow + 64 * BS, 64 * BS, 0);
      assert_memory_equal (shadow, shadow + 64 * BS, 64 * BS);
      volenv_free (&e);
    }
}

/* Bad settings fail the open. */
static void
test_volume_bad_conf (void **state)
{
  struct volenv e;

  volenv_init (&e, HHC_MODE_WB, 64, 1 << 20);
  e.conf.promote = HHC_PROMOTE_NHIT;
  e.conf.promote_hits = 0;
  assert_int_equal (volenv_try_open (&e), EINVAL);
  e.vol = NULL;
  volenv_free (&e);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_nth_miss),
    cmocka_unit_test (test_window),
    cmocka_unit_test (test_fixed_memory),
    cmocka_unit_test (test_collisions),
    cmocka_unit_test (test_concurrent),
    cmocka_unit_test (test_volume_read_twice),
    cmocka_unit_test (test_volume_runs),
    cmocka_unit_test (test_volume_writes_prefetch),
    cmocka_unit_test (test_volume_random),
    cmocka_unit_test (test_volume_bad_conf),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
