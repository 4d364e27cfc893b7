/* Promotion of read misses: the nhit miss counters (promote.h).
 *
 * A block's hash picks one entry of the table (top bits) and a 16-bit
 * tag (the next bits).  A miss of the block updates its entry with one
 * compare-and-swap:
 *
 *   entry's tag   entry's epoch vs now     new count
 *   same          now or now - 1           count + 1 (max 255)
 *   same          older                    1 (the window expired)
 *   other         any                      1 (the entry is taken over)
 *
 * The epoch is the number of misses counted so far divided by the
 * window, so two misses of a block count together when fewer than
 * window misses came between them, and never when 2 * window or more
 * did.  The epoch is kept mod 256: an entry left alone for a multiple
 * of 256 epochs looks fresh again.
 *
 * What a collision can do: two blocks with the same entry and tag
 * share a count (promoted earlier than N misses of their own); two
 * with the same entry and other tags take it from each other (promoted
 * later, or not while they alternate).  Either way only the choice
 * between filling the cache and reading around it changes, never the
 * data a read returns.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "promote.h"

#define E_TAG(e) ((e) >> 16)
#define E_EPOCH(e) (((e) >> 8) & 0xffu)
#define E_COUNT(e) ((e)&0xffu)
#define E_MAKE(tag, epoch, count)                                              \
  (((uint32_t)(tag) << 16) | (((uint32_t)(epoch)&0xffu) << 8)                  \
   | (uint32_t)(count))

const char *
hhc_promote_to_string (enum hhc_promote_policy p)
{
  static const char *const names[] = { "always", "nhit" };
  return p <= HHC_PROMOTE_NHIT ? names[p] : "?";
}

int
hhc_promote_from_string (const char *s, enum hhc_promote_policy *p)
{
  for (int i = HHC_PROMOTE_ALWAYS; i <= HHC_PROMOTE_NHIT; i++)
    if (strcmp (s, hhc_promote_to_string (i)) == 0)
      {
        *p = i;
        return 0;
      }
  return EINVAL;
}

/* The default table: 2 * window entries (a block's count lives up to
 * two epochs), rounded up to a power of two, within the bounds.
 */
static uint32_t
default_entries (uint64_t window)
{
  uint32_t n = PROMOTE_MIN_ENTRIES;

  while (n < PROMOTE_MAX_ENTRIES && n < 2 * window)
    n <<= 1;
  return n;
}

int
promote_init (struct hhc_promote *p, enum hhc_promote_policy policy,
              unsigned hits, uint64_t window, uint32_t entries)
{
  memset (p, 0, sizeof *p);
  if (policy == HHC_PROMOTE_ALWAYS)
    return 0;
  if (policy != HHC_PROMOTE_NHIT || hits < 1 || hits > HHC_PROMOTE_MAX_HITS
      || window < 1)
    return EINVAL;
  if (entries == 0)
    entries = default_entries (window);
  if (entries < PROMOTE_MIN_ENTRIES || entries > PROMOTE_MAX_ENTRIES
      || !HHC_IS_POW2 (entries))
    return EINVAL;
  p->tab = calloc (entries, sizeof *p->tab);
  if (p->tab == NULL)
    return ENOMEM;
  p->mask = entries - 1;
  while ((1u << p->bits) < entries)
    p->bits++;
  p->hits = hits;
  p->window = window;
  return 0;
}

void
promote_free (struct hhc_promote *p)
{
  free (p->tab);
  p->tab = NULL;
}

/* The count after one more miss of a block with this tag, now. */
static uint32_t
next_entry (uint32_t e, uint32_t tag, uint32_t now)
{
  uint32_t age = (now - E_EPOCH (e)) & 0xffu;

  if (E_TAG (e) != tag || E_COUNT (e) == 0 || (age > 1 && age != 0xffu))
    return E_MAKE (tag, now, 1);
  /* age 0xff: a thread that drew a later epoch got here first. */
  return E_MAKE (tag, age == 0xffu ? E_EPOCH (e) : now,
                 HHC_MIN (E_COUNT (e) + 1, 255u));
}

bool
promote_miss (struct hhc_promote *p, uint64_t lba)
{
  uint64_t h = (lba + 1) * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing */
  uint32_t *slot, e, n, tag, now;

  if (p->tab == NULL)
    return true;
  slot = &p->tab[h >> (64 - p->bits)];
  tag = (uint32_t)(h >> (48 - p->bits)) & 0xffffu;
  now = (uint32_t)(__atomic_fetch_add (&p->misses, 1, __ATOMIC_RELAXED)
                   / p->window);
  e = __atomic_load_n (slot, __ATOMIC_RELAXED);
  do
    n = next_entry (e, tag, now);
  while (!__atomic_compare_exchange_n (slot, &e, n, true, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED));
  if (E_COUNT (n) >= p->hits)
    return true;
  __atomic_fetch_add (&p->bypassed, 1, __ATOMIC_RELAXED);
  return false;
}
