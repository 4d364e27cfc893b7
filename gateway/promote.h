/* Promotion of read misses (promote=nhit, docs/design.md §4.8).
 *
 * With promote=nhit a read miss fills the cache only when its block
 * has missed promote-hits times within the window; other misses are
 * read from the backend and cache nothing.  The miss counts live in a
 * table of fixed size allocated at open (struct hhc_promote below):
 * no allocation per block, no growth.
 *
 * No lock: every field is set at init and then read only, except the
 * table entries and the counters, which are atomics.  Callers may hold
 * any lock (a stripe lock in read.c); nothing here takes one.
 */
#ifndef HHC_PROMOTE_H
#define HHC_PROMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hhccore.h"

/* Table sizes: a power of two from 1K to 1M entries (4 MiB). */
#define PROMOTE_MIN_ENTRIES (1u << 10)
#define PROMOTE_MAX_ENTRIES (1u << 20)

struct hhc_promote {
  /* Entries (atomic), one 32-bit word each:
   *
   *   bits 31..16  tag: hash bits of the block not used by the index
   *   bits 15..8   epoch of the last counted miss (mod 256)
   *   bits  7..0   misses counted (saturates at 255)
   *
   * NULL: promote=always, every miss is promoted.
   */
  uint32_t *tab;
  uint32_t mask;     /* entries - 1 */
  unsigned bits;     /* log2 (entries) */
  unsigned hits;     /* promote-hits */
  uint64_t window;   /* misses per epoch (promote-window) */
  uint64_t misses;   /* atomic: misses counted (the epoch clock) */
  uint64_t bypassed; /* atomic: misses not promoted */
};

/* Set up p.  policy always: no table.  nhit: hits (1..255) misses of a
 * block within window (>= 1) promote it; entries: table size (a power
 * of two in range), or 0 for the default (2 * window, in range).
 * Returns 0, EINVAL or ENOMEM.
 */
int promote_init (struct hhc_promote *p, enum hhc_promote_policy policy,
                  unsigned hits, uint64_t window, uint32_t entries);
void promote_free (struct hhc_promote *p);

/* Count a read miss of block lba (not cached); true if the block
 * should now enter the cache.  Always true with promote=always.
 */
bool promote_miss (struct hhc_promote *p, uint64_t lba);

/* Entries of the table (0 with promote=always). */
static inline uint32_t
promote_entries (const struct hhc_promote *p)
{
  return p->tab ? p->mask + 1 : 0;
}

#endif /* HHC_PROMOTE_H */
