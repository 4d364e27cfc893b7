/* Hit ratio of the core's midpoint LRU (gateway/lru.c) against a plain
 * LRU, on a hot set with periodic one-pass scans.
 *
 *   lru-sim [CACHE-BLOCKS [HOT-BLOCKS [ACCESSES [SEED]]]]
 *
 * Workload: each access reads a block of the hot set (uniform over
 * HOT-BLOCKS, default 3/4 of the cache); every SCAN-EVERY accesses a
 * scan reads SCAN-LEN blocks that are never read again (a backup, a
 * table scan).  Scan lengths 0, 1/2, 1, 2 and 4 cache sizes are
 * simulated in turn.  Only the hot-set accesses are counted: the
 * question is how much of the hot set survives the scans.
 *
 * Midpoint LRU: the core's index (gateway/index.c) maps block -> slot,
 * the core's LRU (gateway/lru.c, hot-ratio 2) orders the slots; a miss
 * takes a free slot; when there is none it evicts a batch (the
 * gateway's evict_batch) through the gateway's own eviction walk
 * (lru_walk_victim: promotions of referenced cold blocks, the second
 * chance on hot's tail, the victims).  Plain LRU: a
 * doubly linked list in this file, new and hit blocks to its head,
 * eviction from its tail.  Output: one JSON object on stdout.
 */
#include <config.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "index.h"
#include "lru.h"

#define NO_BLOCK UINT32_MAX

/* xorshift64*: a small deterministic generator. */
static uint64_t
rng_next (uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * UINT64_C (2685821657736338717);
}

/* ---- the core's midpoint LRU ---- */

struct mid_cache {
  struct hhc_index idx;
  struct hhc_lru lru;
  uint32_t used;  /* slots handed out so far */
  uint32_t batch; /* evicted per walk: the gateway's evict_batch */
  uint32_t nfree, *freel;
};

static int
mid_init (struct mid_cache *m, uint32_t nslots)
{
  m->used = m->nfree = 0;
  m->batch = nslots / 64 > 8 ? nslots / 64 : 8; /* gateway/open.c */
  m->freel = malloc (sizeof (uint32_t) * m->batch);
  if (!m->freel || index_init (&m->idx, nslots) != 0)
    return -1;
  lru_init (&m->lru, m->idx.slots, 2);
  return 0;
}

static void
mid_free (struct mid_cache *m)
{
  lru_destroy (&m->lru);
  index_free (&m->idx);
  free (m->freel);
}

/* Out of free slots: evict a batch as vol_evict does (the same walk,
 * lru_walk_victim, with its promotions; here every victim is idle).
 */
static void
mid_evict (struct mid_cache *m)
{
  struct lru_walk w;
  uint32_t s;

  pthread_mutex_lock (&m->lru.lock);
  lru_walk_start (&m->lru, &w);
  while (m->nfree < m->batch && (s = lru_walk_victim (&m->lru, &w)) != HHC_NIL)
    {
      lru_unlink_locked (&m->lru, s);
      m->freel[m->nfree++] = s;
    }
  pthread_mutex_unlock (&m->lru.lock);
  for (uint32_t i = 0; i < m->nfree; i++)
    {
      s = m->freel[i];
      struct hhc_stripe *st
          = index_stripe (&m->idx, slot_lba (&m->idx.slots[s]));
      pthread_mutex_lock (&st->lock);
      index_remove (&m->idx, s);
      pthread_mutex_unlock (&st->lock);
    }
}

/* The slot to fill on a miss: a free one, else evict a batch. */
static uint32_t
mid_victim (struct mid_cache *m)
{
  if (m->used < m->idx.nslots)
    return m->used++;
  if (m->nfree == 0)
    mid_evict (m);
  return m->freel[--m->nfree];
}

/* One access; true on a hit. */
static bool
mid_access (struct mid_cache *m, uint64_t lba)
{
  struct hhc_stripe *st = index_stripe (&m->idx, lba);
  uint32_t s;

  pthread_mutex_lock (&st->lock);
  s = index_lookup (&m->idx, lba);
  pthread_mutex_unlock (&st->lock);
  if (s != HHC_NIL)
    {
      lru_touch (&m->lru, s);
      return true;
    }
  s = mid_victim (m);
  st = index_stripe (&m->idx, lba);
  pthread_mutex_lock (&st->lock);
  index_insert (&m->idx, s, lba);
  slot_set_state (&m->idx.slots[s], SLOT_CLEAN);
  pthread_mutex_unlock (&st->lock);
  lru_insert_clean (&m->lru, s);
  return false;
}

/* ---- plain LRU ---- */

struct plain_cache {
  uint32_t *slot_of; /* block -> slot or NO_BLOCK */
  uint32_t *block, *prev, *next;
  uint32_t nslots, used, head, tail;
};

static int
plain_init (struct plain_cache *p, uint32_t nslots, uint32_t nblocks)
{
  p->slot_of = malloc (sizeof (uint32_t) * nblocks);
  p->block = malloc (sizeof (uint32_t) * nslots);
  p->prev = malloc (sizeof (uint32_t) * nslots);
  p->next = malloc (sizeof (uint32_t) * nslots);
  if (!p->slot_of || !p->block || !p->prev || !p->next)
    return -1;
  for (uint32_t b = 0; b < nblocks; b++)
    p->slot_of[b] = NO_BLOCK;
  p->nslots = nslots;
  p->used = 0;
  p->head = p->tail = NO_BLOCK;
  return 0;
}

static void
plain_free (struct plain_cache *p)
{
  free (p->slot_of);
  free (p->block);
  free (p->prev);
  free (p->next);
}

static void
plain_unlink (struct plain_cache *p, uint32_t s)
{
  if (p->prev[s] != NO_BLOCK)
    p->next[p->prev[s]] = p->next[s];
  else
    p->head = p->next[s];
  if (p->next[s] != NO_BLOCK)
    p->prev[p->next[s]] = p->prev[s];
  else
    p->tail = p->prev[s];
}

static void
plain_push_head (struct plain_cache *p, uint32_t s)
{
  p->prev[s] = NO_BLOCK;
  p->next[s] = p->head;
  if (p->head != NO_BLOCK)
    p->prev[p->head] = s;
  p->head = s;
  if (p->tail == NO_BLOCK)
    p->tail = s;
}

static bool
plain_access (struct plain_cache *p, uint32_t b)
{
  uint32_t s = p->slot_of[b];

  if (s != NO_BLOCK)
    {
      plain_unlink (p, s);
      plain_push_head (p, s);
      return true;
    }
  if (p->used < p->nslots)
    s = p->used++;
  else
    {
      s = p->tail;
      plain_unlink (p, s);
      p->slot_of[p->block[s]] = NO_BLOCK;
    }
  p->block[s] = b;
  p->slot_of[b] = s;
  plain_push_head (p, s);
  return false;
}

/* ---- the simulation ---- */

struct sim {
  uint32_t cache, hot, scan_len, scan_every;
  uint64_t accesses, seed;
};

struct result {
  uint64_t mid_hits, plain_hits, counted;
};

static int
simulate (const struct sim *c, struct result *r)
{
  uint32_t nblocks
      = c->hot + c->scan_len * (uint32_t)(c->accesses / c->scan_every + 1);
  struct mid_cache m;
  struct plain_cache p;
  uint64_t rng = c->seed, next_scan = nblocks > c->hot ? c->hot : 0;

  if (mid_init (&m, c->cache) != 0 || plain_init (&p, c->cache, nblocks) != 0)
    return -1;
  *r = (struct result){ 0, 0, 0 };
  for (uint64_t i = 1; i <= c->accesses; i++)
    {
      uint32_t b = (uint32_t)(rng_next (&rng) % c->hot);
      bool warm = i > c->accesses / 10; /* skip the cold start */

      r->mid_hits += mid_access (&m, b) && warm;
      r->plain_hits += plain_access (&p, b) && warm;
      r->counted += warm;
      if (c->scan_len > 0 && i % c->scan_every == 0)
        for (uint32_t k = 0; k < c->scan_len; k++, next_scan++)
          {
            mid_access (&m, next_scan);
            plain_access (&p, (uint32_t)next_scan);
          }
    }
  mid_free (&m);
  plain_free (&p);
  return 0;
}

static unsigned long
arg (int argc, char **argv, int i, unsigned long dflt)
{
  return argc > i ? strtoul (argv[i], NULL, 0) : dflt;
}

int
main (int argc, char **argv)
{
  static const double scans[] = { 0, 0.5, 1, 2, 4 };
  struct sim c;
  const char *sep = "";

  c.cache = (uint32_t)arg (argc, argv, 1, 4096);
  c.hot = (uint32_t)arg (argc, argv, 2, c.cache * 3 / 4);
  c.accesses = arg (argc, argv, 3, 400000);
  c.seed = arg (argc, argv, 4, 1);
  c.scan_every = c.hot * 2;
  if (c.cache < 16 || c.hot < 1 || c.accesses < 10 || c.seed == 0)
    {
      fprintf (
          stderr,
          "usage: lru-sim [CACHE-BLOCKS [HOT-BLOCKS [ACCESSES [SEED]]]]\n");
      return 2;
    }
  printf ("{\"cache_blocks\": %u, \"hot_blocks\": %u, \"accesses\": %llu, "
          "\"scan_every\": %u, \"hot_ratio\": 2, \"seed\": %llu, \"points\": [",
          c.cache, c.hot, (unsigned long long)c.accesses, c.scan_every,
          (unsigned long long)c.seed);
  for (size_t i = 0; i < sizeof scans / sizeof scans[0]; i++)
    {
      struct result r;

      c.scan_len = (uint32_t)(scans[i] * c.cache);
      if (simulate (&c, &r) != 0)
        {
          fprintf (stderr, "lru-sim: out of memory\n");
          return 1;
        }
      printf ("%s\n  {\"scan_over_cache\": %g, \"scan_blocks\": %u, "
              "\"midpoint_hit_ratio\": %.4f, \"plain_hit_ratio\": %.4f}",
              sep, scans[i], c.scan_len, (double)r.mid_hits / r.counted,
              (double)r.plain_hits / r.counted);
      sep = ",";
    }
  printf ("\n]}\n");
  return 0;
}
