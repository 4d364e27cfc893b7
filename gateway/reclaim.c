/* Eviction and reclaim: see reclaim.h.
 *
 * vol_evict walks the clean blocks coldest first (the cold list from
 * its tail, then on into hot) under the LRU lock and frees every idle
 * one it can claim without waiting: at most n, looking at no more than
 * 4n.  The order and the promotions on the way are the LRU's
 * (lru_walk_victim: a cold block hit since it entered goes to hot
 * instead of being offered).  Dirty blocks are on
 * their own list (lru.h), so eviction never sees one.  A freed slot
 * waits on the pending list until vol_reclaim's commit makes "free"
 * durable.
 */
#include <config.h>

#include "common.h"
#include "reclaim.h"
#include "vol.h"

bool
vol_needs_reclaim (struct hhc_volume *vol)
{
  return cache_nfree (&vol->cache) < vol->free_low;
}

/* Try to evict slot s (LRU lock held; stripe taken with trylock since
 * the usual order is stripe -> LRU).
 */
static bool
try_evict (struct hhc_volume *vol, uint32_t s)
{
  uint64_t lba = slot_lba (&vol->idx.slots[s]);
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  bool done = false;

  if (pthread_mutex_trylock (&st->lock) != 0)
    return false;
  if (index_lookup (&vol->idx, lba) == s
      && slot_state (&vol->idx.slots[s]) == SLOT_CLEAN
      && active_get (st, s) == 0)
    {
      index_remove (&vol->idx, s);
      lru_unlink_locked (&vol->lru, s);
      cache_set_state (&vol->cache, s, SLOT_FREE);
      cache_release_slot (&vol->cache, s);
      done = true;
    }
  hhc_unlock (&st->lock);
  return done;
}

uint32_t
vol_evict (struct hhc_volume *vol, uint32_t n)
{
  HHC_SCOPED_LOCK (&vol->lru.lock);
  uint32_t done = 0, looked = 0, s;
  struct lru_walk w;

  lru_walk_start (&vol->lru, &w);
  while (done < n && looked < 4 * n
         && (s = lru_walk_victim (&vol->lru, &w)) != HHC_NIL)
    {
      looked++;
      if (try_evict (vol, s))
        done++;
    }
  stat_add (&vol->stats.evictions, done);
  return done;
}

/* Up to RECLAIM_CHUNKS evictions of evict_batch each, until the pool
 * and the pending list together hold twice free_low: one chunk per
 * flusher round held a write burst (every write a miss needing slots)
 * to evict_batch slots per write-back batch.
 */
#define RECLAIM_CHUNKS 8

int
vol_reclaim (struct hhc_volume *vol)
{
  uint32_t n = 0, k;
  int r = 0;

  for (unsigned i = 0; i < RECLAIM_CHUNKS; i++)
    {
      n += k = vol_evict (vol, vol->evict_batch);
      if (k == 0
          || cache_nfree (&vol->cache) + cache_npending (&vol->cache)
                 >= 2 * vol->free_low)
        break;
    }

  if (n > 0 || cache_npending (&vol->cache) > 0)
    r = cache_commit (&vol->cache);
  vol_wake_waiters (vol);
  return r;
}
