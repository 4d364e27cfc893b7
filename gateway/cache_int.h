/* What the pieces of the cache module share (private: cache.c, the
 * device and the free pool; cache-load.c, the load at open;
 * cache-commit.c, the commit).  cache.h is the interface.
 */
#ifndef HHC_CACHE_INT_H
#define HHC_CACHE_INT_H

#include "cache.h"

#define COMMIT_CHUNK 256 /* pages snapshotted and written at a time */

/* Byte offset of copy (0: A, 1: B) of metadata page p. */
static inline uint64_t
copy_offset (const struct hhc_cache *c, uint32_t p, int copy)
{
  return cache_page_offset (c->meta_off, c->npages, p, copy);
}

/* Chain a slot onto a free list (free lock held, or no concurrency). */
static inline void
push_free (struct hhc_cache *c, uint32_t *head, uint32_t slot)
{
  struct hhc_slot *s = &c->idx->slots[slot];
  uint32_t hw = __atomic_load_n (&s->hword, __ATOMIC_RELAXED);

  __atomic_store_n (&s->hword, (hw & ~HHC_LINK_MASK) | *head, __ATOMIC_RELEASE);
  *head = slot;
}

#endif /* HHC_CACHE_INT_H */
