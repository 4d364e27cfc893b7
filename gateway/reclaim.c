/* Eviction and reclaim: see reclaim.h.
 *
 * vol_evict walks the clean blocks coldest first (the cold list from
 * its tail, then on into hot) under the LRU lock and frees every idle
 * one it can claim without waiting: at most n, looking at no more than
 * 4n.  A cold block hit since it entered is promoted to hot instead
 * (lru.h; at most 4n of them per walk).  Dirty blocks are on
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
  uint32_t done = 0, looked = 0, promoted = 0;
  uint32_t s = lru_colder_prev (&vol->lru, HHC_NIL);

  while (s != HHC_NIL && done < n && looked < 4 * n)
    {
      uint32_t next = lru_colder_prev (&vol->lru, s);
      if (promoted < 4 * n && lru_promote_locked (&vol->lru, s))
        promoted++; /* hit while cold: to hot, not evicted */
      else
        {
          looked++;
          if (try_evict (vol, s))
            done++;
        }
      s = next;
    }
  stat_add (&vol->stats.evictions, done);
  return done;
}

int
vol_reclaim (struct hhc_volume *vol)
{
  uint32_t n = vol_evict (vol, vol->evict_batch);
  int r = 0;

  if (n > 0 || cache_npending (&vol->cache) > 0)
    r = cache_commit (&vol->cache);
  vol_wake_waiters (vol);
  return r;
}
