/* The request paths' shared helpers: the claim protocol on a block
 * (volume.c: writes, trims, zeros, relog; read.c: reads, prefetch).
 *
 * For each block the stripe lock of its LBA is taken, the slot looked
 * up, and the slot claimed with ACT_BUSY before any I/O; the lock is
 * never held during I/O (volume.c).
 */
#ifndef HHC_REQUEST_H
#define HHC_REQUEST_H

#include <errno.h>
#include <stdint.h>

#include "common.h"
#include "vol.h"

/* The cache device failed (its errno): cached data is not trusted. */
static inline int
cache_failed (struct hhc_volume *vol)
{
  return cache_is_failed (&vol->cache);
}

/* A client request now, for the flusher's idle test (vol.h: io_seen;
 * no clock read on the request's path).
 */
static inline void
note_io (struct hhc_volume *vol)
{
  if (!__atomic_load_n (&vol->io_seen, __ATOMIC_RELAXED))
    __atomic_store_n (&vol->io_seen, true, __ATOMIC_RELAXED);
}

/* Check a request lies inside the volume. */
static inline int
check_range (struct hhc_volume *vol, uint32_t count, uint64_t offset)
{
  if (offset > vol->info.size || count > vol->info.size - offset)
    return EINVAL;
  return 0;
}

/* ---- stripe lock held below this line ---- */

/* The slot of lba once none of mask's flags are set on it, or NIL. */
static inline uint32_t
wait_idle (struct hhc_volume *vol, struct hhc_stripe *st, uint64_t lba,
           uint32_t mask)
{
  for (;;)
    {
      uint32_t s = index_lookup (&vol->idx, lba);
      if (s == HHC_NIL || (active_get (st, s) & mask) == 0)
        return s;
      stripe_wait (st);
    }
}

/* Clear flags of slot s in its stripe's table. */
static inline void
clear_flags (struct hhc_stripe *st, uint32_t s, uint32_t flags)
{
  active_change (st, s, 0, flags);
}

/* Set a filled slot's state and put it on its list. */
static inline void
publish_locked (struct hhc_volume *vol, uint32_t s, enum slot_state state)
{
  cache_set_state (&vol->cache, s, state);
  if (state == SLOT_DIRTY)
    {
      __atomic_fetch_add (&vol->ndirty, 1, __ATOMIC_ACQ_REL);
      lru_insert_dirty (&vol->lru, s);
    }
  else
    lru_insert_clean (&vol->lru, s);
}

/* Give back a slot that was claimed but never published. */
static inline void
unfill_locked (struct hhc_volume *vol, struct hhc_stripe *st, uint32_t s)
{
  index_remove (&vol->idx, s);
  active_set (st, s, 0);
  cache_unalloc_slot (&vol->cache, s);
}

#endif /* HHC_REQUEST_H */
