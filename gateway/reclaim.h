/* Eviction: clean blocks from the cold end of the LRU go back to the
 * free-slot pool (through the pending list and a commit, cache.h
 * invariant 1).  Called by the flusher thread (the pool below its
 * low-water mark) and by tests; never with a lock held.
 */
#ifndef HHC_RECLAIM_H
#define HHC_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

struct hhc_volume;

/* Free-slot pool below its low-water mark? */
bool vol_needs_reclaim (struct hhc_volume *vol);

/* Evict up to n clean blocks from the cold tail into the pending
 * list; returns how many.  Then cache_commit makes them free.  Takes
 * the LRU lock, and each block's stripe lock with trylock under it
 * (the usual order is stripe -> LRU).
 */
uint32_t vol_evict (struct hhc_volume *vol, uint32_t n);

/* Evict a batch and commit, then wake the threads waiting for a slot
 * (flusher thread or a starving writer).
 */
int vol_reclaim (struct hhc_volume *vol);

#endif /* HHC_RECLAIM_H */
