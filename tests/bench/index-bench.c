/* Throughput of the core's sharded index (gateway/index.c) against the
 * same index behind one global lock.
 *
 *   index-bench sharded|global THREADS [SECONDS [SLOTS]]
 *
 * Each thread owns a disjoint share of the slots and of the block
 * numbers (block b belongs to thread b % THREADS), so inserts and
 * removes never race on a slot, while lookups go over every block.
 * The mix per operation: 80% lookup of a random block, 10% insert of
 * one of the thread's unmapped blocks, 10% remove of one of its mapped
 * blocks (the table stays about half full).  "sharded" takes the
 * stripe lock of the block, as the core does; "global" takes one
 * process-wide mutex instead (the nbdkit cache filter's design).
 * Output: one JSON object with the operations per second.
 */
#include <config.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index.h"

struct bench {
  struct hhc_index idx;
  pthread_mutex_t global; /* in "global" mode: protects the whole index */
  bool use_global;
  unsigned nthreads;
  uint32_t nslots;
  uint64_t nblocks;
  volatile bool stop;
};

struct worker {
  struct bench *b;
  unsigned id;
  pthread_t tid;
  uint64_t ops;
};

static uint64_t
rng_next (uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * UINT64_C (2685821657736338717);
}

static pthread_mutex_t *
lock_for (struct bench *b, uint64_t lba)
{
  return b->use_global ? &b->global : &index_stripe (&b->idx, lba)->lock;
}

/* A random block of this worker's share. */
static uint64_t
own_block (struct worker *w, uint64_t *rng)
{
  uint64_t per = w->b->nblocks / w->b->nthreads;

  return (rng_next (rng) % per) * w->b->nthreads + w->id;
}

static void
one_op (struct worker *w, uint64_t *rng, uint32_t *slot_of_own,
        uint32_t *free_slots, uint32_t *nfree)
{
  struct bench *b = w->b;
  unsigned dice = (unsigned)(rng_next (rng) % 10);
  uint64_t lba = dice < 8 ? rng_next (rng) % b->nblocks : own_block (w, rng);
  pthread_mutex_t *m = lock_for (b, lba);
  uint64_t own = lba / b->nthreads;

  pthread_mutex_lock (m);
  if (dice < 8)
    (void)index_lookup (&b->idx, lba);
  else if (slot_of_own[own] == HHC_NIL && *nfree > 0)
    {
      uint32_t s = free_slots[--*nfree];
      index_insert (&b->idx, s, lba);
      slot_of_own[own] = s;
    }
  else if (slot_of_own[own] != HHC_NIL)
    {
      index_remove (&b->idx, slot_of_own[own]);
      free_slots[(*nfree)++] = slot_of_own[own];
      slot_of_own[own] = HHC_NIL;
    }
  pthread_mutex_unlock (m);
}

static void *
worker_run (void *arg)
{
  struct worker *w = arg;
  struct bench *b = w->b;
  uint64_t rng = 0x9E3779B97F4A7C15ull * (w->id + 1);
  uint32_t per_slots = b->nslots / b->nthreads, nfree = per_slots;
  uint64_t per_blocks = b->nblocks / b->nthreads;
  uint32_t *slot_of_own = malloc (sizeof (uint32_t) * per_blocks);
  uint32_t *free_slots = malloc (sizeof (uint32_t) * per_slots);

  if (!slot_of_own || !free_slots)
    abort ();
  for (uint64_t i = 0; i < per_blocks; i++)
    slot_of_own[i] = HHC_NIL;
  for (uint32_t i = 0; i < per_slots; i++)
    free_slots[i] = w->id * per_slots + i;
  while (!__atomic_load_n (&b->stop, __ATOMIC_RELAXED))
    for (int k = 0; k < 256; k++, w->ops++)
      one_op (w, &rng, slot_of_own, free_slots, &nfree);
  free (slot_of_own);
  free (free_slots);
  return NULL;
}

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int
main (int argc, char **argv)
{
  struct bench b;
  struct worker w[64];
  double secs, t0, t1;
  uint64_t total = 0;

  if (argc < 3 || (strcmp (argv[1], "sharded") && strcmp (argv[1], "global")))
    {
      fprintf (stderr,
               "usage: index-bench sharded|global THREADS [SECONDS [SLOTS]]\n");
      return 2;
    }
  memset (&b, 0, sizeof b);
  b.use_global = strcmp (argv[1], "global") == 0;
  b.nthreads = (unsigned)strtoul (argv[2], NULL, 0);
  secs = argc > 3 ? strtod (argv[3], NULL) : 1.0;
  b.nslots = argc > 4 ? (uint32_t)strtoul (argv[4], NULL, 0) : 1u << 20;
  b.nblocks = (uint64_t)b.nslots * 2;
  if (b.nthreads < 1 || b.nthreads > 64 || secs <= 0 || b.nslots < 64)
    {
      fprintf (stderr, "index-bench: bad arguments\n");
      return 2;
    }
  if (index_init (&b.idx, b.nslots) != 0)
    return 1;
  pthread_mutex_init (&b.global, NULL);
  t0 = now ();
  for (unsigned i = 0; i < b.nthreads; i++)
    {
      w[i] = (struct worker){ .b = &b, .id = i };
      if (pthread_create (&w[i].tid, NULL, worker_run, &w[i]) != 0)
        return 1;
    }
  while (now () - t0 < secs)
    {
      struct timespec ts = { 0, 10 * 1000 * 1000 };
      nanosleep (&ts, NULL);
    }
  __atomic_store_n (&b.stop, true, __ATOMIC_RELAXED);
  for (unsigned i = 0; i < b.nthreads; i++)
    {
      pthread_join (w[i].tid, NULL);
      total += w[i].ops;
    }
  t1 = now ();
  printf ("{\"lock\": \"%s\", \"threads\": %u, \"slots\": %u, \"stripes\": %u, "
          "\"seconds\": %.3f, \"ops\": %llu, \"ops_per_sec\": %.0f}\n",
          argv[1], b.nthreads, b.nslots, b.idx.nstripes, t1 - t0,
          (unsigned long long)total, total / (t1 - t0));
  pthread_mutex_destroy (&b.global);
  index_free (&b.idx);
  return 0;
}
