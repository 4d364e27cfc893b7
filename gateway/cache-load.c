/* The cache's load at open: read both copies of the metadata, pick
 * each page's newer valid copy, map its used entries into the index,
 * pool the free slots (cache.h, cache_load).
 */
#include <config.h>

#include "cache.h"
#include "cache_int.h"
#include "common.h"

#define LOAD_CHUNK 256 /* pages of each copy read at a time at load */

/* Pick the newest valid copy of page p from a (copy A) and b (copy B),
 * noting both copies' sequences; NULL (logged) if neither is valid.
 */
static const unsigned char *
pick_page (struct hhc_cache *c, uint32_t p, const unsigned char *a,
           const unsigned char *b)
{
  uint64_t sa = cache_page_check (a, p, c->uuid);
  uint64_t sb = cache_page_check (b, p, c->uuid);

  c->copy_seq[2 * p] = sa;
  c->copy_seq[2 * p + 1] = sb;
  if (sa == 0 && sb == 0)
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR,
               "%s: cache metadata page %u is corrupt in both copies",
               c->dev->name, p);
      return NULL;
    }
  return sb > sa ? b : a;
}

/* Map one used entry of page p: slot to lba (pseq: the commit
 * sequence of each page loaded so far).
 */
static void
load_entry (struct hhc_cache *c, uint32_t p, uint32_t slot, uint64_t lba,
            enum slot_state st, const uint64_t *pseq)
{
  /* An LBA in two slots: a crash in the middle of a commit.  The
   * entry from the newer commit wins (dirty over clean on a tie); the
   * loser becomes free.
   */
  uint32_t old = index_lookup (c->idx, lba);
  if (old != HHC_NIL)
    {
      uint64_t os = pseq[old / CACHE_EPP];
      enum slot_state ost = slot_state (&c->idx->slots[old]);
      bool mine = pseq[p] > os || (pseq[p] == os && st > ost);
      uint32_t loser = mine ? old : slot;
      if (mine)
        index_remove (c->idx, old);
      cache_set_state (c, loser, SLOT_FREE);
      if (!mine)
        return;
    }
  index_insert (c->idx, slot, lba);
  slot_set_state (&c->idx->slots[slot], st);
}

#define PF_DIST 8 /* entries ahead: bucket at 2*PF_DIST, chain at PF_DIST */

/* Map the used entries of page p (its newest valid copy in buf).  The
 * index's bucket heads and chain heads of the entries ahead are
 * prefetched: the entries hit the index at random, and overlapping
 * their cache misses is most of the speed of a big cache's start-up.
 * EINVAL (logged) on an entry beyond the volume of nblocks blocks.
 */
static int
load_entries (struct hhc_cache *c, uint32_t p, const unsigned char *buf,
              const uint64_t *pseq, uint64_t nblocks)
{
  uint64_t lba[CACHE_EPP];
  unsigned st[CACHE_EPP];
  uint32_t n = HHC_MIN ((uint32_t)CACHE_EPP, c->nslots - p * CACHE_EPP);

  for (uint32_t i = 0; i < n; i++)
    {
      cache_page_get (buf, i, &lba[i], &st[i]);
      if (st[i] != SLOT_FREE && lba[i] >= nblocks)
        {
          hhc_msg (c->msgfn, HHC_MSG_ERROR,
                   "%s: cache metadata page %u: block %" PRIu64
                   " is beyond the volume",
                   c->dev->name, p, lba[i]);
          return EINVAL;
        }
    }
  for (uint32_t i = 0; i < n; i++)
    {
      if (i + 2 * PF_DIST < n && st[i + 2 * PF_DIST] != SLOT_FREE)
        index_prefetch_bucket (c->idx, lba[i + 2 * PF_DIST]);
      if (i + PF_DIST < n && st[i + PF_DIST] != SLOT_FREE)
        index_prefetch_chain (c->idx, lba[i + PF_DIST]);
      if (st[i] != SLOT_FREE)
        load_entry (c, p, p * CACHE_EPP + i, lba[i], st[i], pseq);
    }
  return 0;
}

/* Load pages [p0, p0 + n): both copies read in one request each
 * (LOAD_CHUNK pages: the metadata is read nearly sequentially, in
 * large requests, as the start-up benchmark's limit reads it).
 */
static int
load_chunk (struct hhc_cache *c, uint32_t p0, uint32_t n, unsigned char *bufs,
            uint64_t *pseq, uint64_t nblocks)
{
  unsigned char *b = bufs + (size_t)LOAD_CHUNK * CACHE_PAGE;
  size_t len = (size_t)n * CACHE_PAGE;
  int r;

  if ((r = dev_pread (c->dev, bufs, len, copy_offset (c, p0, 0))) != 0
      || (r = dev_pread (c->dev, b, len, copy_offset (c, p0, 1))) != 0)
    return r;
  for (uint32_t i = 0; i < n; i++)
    {
      uint32_t p = p0 + i;
      size_t o = (size_t)i * CACHE_PAGE;
      const unsigned char *pg = pick_page (c, p, bufs + o, b + o);
      if (pg == NULL)
        return EINVAL;
      pseq[p] = HHC_MAX (c->copy_seq[2 * p], c->copy_seq[2 * p + 1]);
      c->commit_seq = HHC_MAX (c->commit_seq, pseq[p]);
      if ((r = load_entries (c, p, pg, pseq, nblocks)) != 0)
        return r;
    }
  return 0;
}

int
cache_load (struct hhc_cache *c,
            void (*found) (void *opaque, uint32_t slot, uint64_t lba,
                           enum slot_state st),
            void *opaque)
{
  HHC_CLEANUP_FREE unsigned char *bufs
      = hhc_alloc_aligned ((size_t)2 * LOAD_CHUNK * CACHE_PAGE);
  HHC_CLEANUP_FREE uint64_t *pseq
      = calloc ((size_t)c->npages, sizeof (uint64_t));
  uint64_t nblocks = (c->volume_size + c->block_size - 1) / c->block_size;
  int r;

  if (bufs == NULL || pseq == NULL)
    return ENOMEM;
  for (uint32_t p = 0; p < c->npages; p += LOAD_CHUNK)
    {
      uint32_t n = HHC_MIN ((uint32_t)LOAD_CHUNK, c->npages - p);
      if ((r = load_chunk (c, p, n, bufs, pseq, nblocks)) != 0)
        return r;
    }
  /* Report used slots, pool the free ones (highest number last, so
   * allocation starts at slot 0).
   */
  for (uint32_t s = c->nslots; s-- > 0;)
    {
      struct hhc_slot *sl = &c->idx->slots[s];
      enum slot_state st = slot_state (sl);
      if (st == SLOT_FREE)
        {
          push_free (c, &c->free_head, s);
          c->nfree++;
        }
      else
        found (opaque, s, slot_lba (sl), st);
    }
  return 0;
}
