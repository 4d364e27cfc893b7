/* Invalidation, and the waits of the request paths (docs/design.md
 * §4.4): what volume.c (writes, the sequential cutoff's direct writes)
 * and trim.c (trims, zeros) share.  A block is invalidated under its
 * stripe lock once no I/O or write-back holds it; the frees are
 * committed before a passdown changes the backend.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "flusher.h"
#include "invalidate.h"
#include "passdown.h"
#include "reclaim.h"
#include "request.h"
#include "vol.h"

/* Wait up to 50 ms for wait_cond (slots freed or cleaned, a passdown
 * ended); callers re-check their condition.
 */
void
wait_a_little (struct hhc_volume *vol)
{
  struct timespec ts;

  hhc_deadline (&ts, 50);
  hhc_lock (&vol->wait_lock);
  pthread_cond_timedwait (&vol->wait_cond, &vol->wait_lock, &ts);
  hhc_unlock (&vol->wait_lock);
}

/* Wait (bounded) for the flusher to free or clean slots. */
void
wait_for_flusher (struct hhc_volume *vol)
{
  flusher_kick (&vol->flusher);
  wait_a_little (vol);
}

/* Wait until no trim/zero/pt write covering lba is running. */
void
wait_passdowns (struct hhc_volume *vol, uint64_t lba)
{
  while (passdown_running (vol, lba))
    wait_a_little (vol);
}

/* Bytes of block lba that lie inside the volume. */
uint32_t
block_valid_len (struct hhc_volume *vol, uint64_t lba)
{
  uint64_t start = lba * vol->bs;
  return (uint32_t)HHC_MIN ((uint64_t)vol->bs, vol->info.size - start);
}

/* Drop a mapped, idle slot from the cache. */
void
invalidate_locked (struct hhc_volume *vol, uint32_t s)
{
  if (slot_state (&vol->idx.slots[s]) >= SLOT_DIRTY)
    {
      __atomic_fetch_sub (&vol->ndirty, 1, __ATOMIC_ACQ_REL);
      if (vol->log)
        log_revoke (vol->log, s, slot_lba (&vol->idx.slots[s]));
    }
  index_remove (&vol->idx, s);
  lru_remove (&vol->lru, s);
  cache_set_state (&vol->cache, s, SLOT_FREE);
  cache_release_slot (&vol->cache, s);
}

/* Invalidate block lba (waiting for I/O and write-back on it).  With
 * keep_dirty, a dirty block is left alone and true returned: its
 * caller zeroes it in the cache instead.  (Freeing it would let a
 * crash that loses the backend's zero bring back older data than the
 * dirty block's, which a FLUSH may have covered.)
 */
bool
invalidate_block (struct hhc_volume *vol, uint64_t lba, bool keep_dirty)
{
  struct hhc_stripe *st = index_stripe (&vol->idx, lba);
  HHC_SCOPED_LOCK (&st->lock);
  uint32_t s = wait_idle (vol, st, lba, ACT_BUSY | ACT_WB);

  if (s == HHC_NIL)
    return false;
  if (keep_dirty && slot_state (&vol->idx.slots[s]) >= SLOT_DIRTY)
    return true;
  invalidate_locked (vol, s);
  return false;
}

/* Before a passdown changes the backend: in wb, clean blocks are
 * trusted after a crash, so every free of a clean slot made so far (by
 * this passdown, an earlier copy-on-write, eviction or passdown) must be
 * durable before the backend can hold the new data.
 */
int
commit_invalidations (struct hhc_volume *vol)
{
  if (!hhc_mode_is_wb (vol->conf.mode))
    return 0;
  return cache_commit (&vol->cache);
}

/* Invalidate blocks [first, last) (see invalidate_block); the dirty
 * ones kept go to *kept.  A range of more blocks than the cache has
 * slots: scan the slots for mapped ones in the range, if any (a slot
 * that is still free may be being filled: the fill sees the running
 * passdown and does not publish: volume.c's header).  The
 * passdown is running: first wait out every copy-on-write that checked
 * before it began (the check and the move are under one stripe lock),
 * else the scan could miss its new slot and the counts its block.
 */
int
invalidate_range (struct hhc_volume *vol, uint64_t first, uint64_t last,
                  bool keep, struct u64_vec *kept)
{
  if (last - first <= vol->idx.nslots)
    {
      for (uint64_t b = first; b < last; b++)
        if (invalidate_block (vol, b, keep) && u64_vec_append (kept, b))
          return ENOMEM;
      return 0;
    }
  index_stripe_barrier (&vol->idx);
  if (!index_any_mapped (&vol->idx, first, last))
    return 0;
  for (uint32_t s = 0; s < vol->idx.nslots; s++)
    {
      const struct hhc_slot *slot = &vol->idx.slots[s];
      uint64_t lba;
      if (slot_state (slot) == SLOT_FREE)
        continue;
      lba = slot_lba (slot);
      if (lba >= first && lba < last && invalidate_block (vol, lba, keep)
          && u64_vec_append (kept, lba))
        return ENOMEM;
    }
  return 0;
}
