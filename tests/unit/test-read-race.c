/* Reads that race writes, fills and evictions (the hit path that takes
 * no lock, gateway/read.c read_hit_unlocked): a small cache in front of
 * three times as many blocks, so that slots are evicted and refilled
 * with other blocks all the time, one thread rewriting whole blocks
 * with rising versions and two reading.  Every read must return one
 * whole version of the block it asked for (never a slot that went to
 * another block meanwhile, never half of a write), and no older
 * version than the last write that completed before the read began.
 * Bounded by counts and a deadline; no timing thresholds.
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
#include <time.h>

#include <cmocka.h>

#include "volenv.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)
#define NSLOTS 32u
#define NBLOCKS (3 * NSLOTS)
#define READERS 2
#define TIMEOUT_MS 60000

struct race {
  struct volenv e;
  uint64_t done[NBLOCKS]; /* newest version whose write returned (atomic) */
  uint64_t writes, reads; /* per thread */
  unsigned stop;          /* atomic */
};

struct reader {
  struct race *r;
  uint64_t seed;
  uint64_t bad, errors, reads;
  char what[200];
};

static uint64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *
writer_run (void *arg)
{
  struct race *r = arg;
  static uint64_t ver[NBLOCKS];
  unsigned char blk[BS];
  uint64_t seed = 7, end = now_ms () + TIMEOUT_MS / 2;

  for (uint64_t i = 0; i < r->writes && now_ms () < end; i++)
    {
      uint64_t lba = test_rand (&seed) % NBLOCKS;
      pattern_fill (blk, lba, 0, SECTORS, ++ver[lba]);
      if (hhc_write (r->e.vol, r->e.mb, blk, BS, lba * BS, false) != 0)
        break;
      __atomic_store_n (&r->done[lba], ver[lba], __ATOMIC_RELEASE);
    }
  __atomic_store_n (&r->stop, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* One read of a random block: every sector of the same block, one
 * version, not older than what had completed.
 */
static void
read_one (struct reader *rd)
{
  struct race *r = rd->r;
  unsigned char blk[BS];
  uint64_t lba = test_rand (&rd->seed) % NBLOCKS;
  uint64_t floor = __atomic_load_n (&r->done[lba], __ATOMIC_ACQUIRE);
  uint64_t first = 0;

  rd->reads++;
  if (hhc_read (r->e.vol, r->e.mb, blk, BS, lba * BS) != 0)
    {
      rd->errors++;
      return;
    }
  for (uint32_t i = 0; i < SECTORS; i++)
    {
      uint64_t l, v;
      uint32_t idx;
      if (pattern_decode (blk + i * PAT_SECTOR, &l, &idx, &v) != 1 || l != lba
          || idx != i || (i > 0 && v != first) || v < floor)
        {
          if (rd->bad++ == 0)
            snprintf (rd->what, sizeof rd->what,
                      "block %llu sector %u: block %llu sector %u version "
                      "%llu (first %llu, completed %llu)",
                      (unsigned long long)lba, i, (unsigned long long)l, idx,
                      (unsigned long long)v, (unsigned long long)first,
                      (unsigned long long)floor);
          return;
        }
      if (i == 0)
        first = v;
    }
}

static void *
reader_run (void *arg)
{
  struct reader *rd = arg;

  while (rd->reads < rd->r->reads
         && !__atomic_load_n (&rd->r->stop, __ATOMIC_ACQUIRE))
    read_one (rd);
  return NULL;
}

static void
test_reads_race_writes_and_evictions (void **state)
{
  struct race *r = calloc (1, sizeof *r);
  struct reader rd[READERS];
  pthread_t w, th[READERS];
  unsigned char blk[BS];
  struct hhc_counts c;

  assert_non_null (r);
  r->writes = test_env_u64 ("HHC_TEST_RACE_WRITES", 4000);
  r->reads = test_env_u64 ("HHC_TEST_RACE_READS", 40000);
  volenv_init (&r->e, HHC_MODE_WB, NSLOTS, (uint64_t)NBLOCKS * BS);
  for (uint64_t l = 0; l < NBLOCKS; l++)
    {
      pattern_fill (blk, l, 0, SECTORS, 0);
      membackend_poke (r->e.mb, blk, BS, l * BS);
    }
  assert_int_equal (volenv_try_open (&r->e), 0);
  assert_int_equal (hhc_start (r->e.vol, r->e.mb), 0); /* the flusher evicts */
  for (int i = 0; i < READERS; i++)
    {
      rd[i] = (struct reader){ .r = r, .seed = 11 + (uint64_t)i };
      assert_int_equal (pthread_create (&th[i], NULL, reader_run, &rd[i]), 0);
    }
  assert_int_equal (pthread_create (&w, NULL, writer_run, r), 0);
  assert_true (test_join (w, TIMEOUT_MS));
  for (int i = 0; i < READERS; i++)
    {
      assert_true (test_join (th[i], TIMEOUT_MS));
      if (rd[i].bad)
        fail_msg ("reader %d: %llu bad reads, first: %s", i,
                  (unsigned long long)rd[i].bad, rd[i].what);
      assert_int_equal (rd[i].errors, 0);
      assert_true (rd[i].reads > 0);
    }
  if (getenv ("HHC_TEST_VERBOSE"))
    fprintf (stderr, "reads %llu %llu\n", (unsigned long long)rd[0].reads,
             (unsigned long long)rd[1].reads);
  /* The cache turned over, and reads both hit and missed. */
  c = volenv_counts (&r->e);
  if (getenv ("HHC_TEST_VERBOSE"))
    fprintf (stderr, "hits %llu misses %llu writes %llu\n",
             (unsigned long long)c.read_hits, (unsigned long long)c.read_misses,
             (unsigned long long)(c.write_hits + c.write_misses));
  assert_true (c.read_hits > 0);
  assert_true (c.read_misses > NSLOTS);
  volenv_free (&r->e);
  free (r);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_reads_race_writes_and_evictions),
  };

  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
