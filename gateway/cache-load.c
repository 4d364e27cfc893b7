/* The cache's load at open: read both copies of the metadata, pick
 * each page's newer valid copy, map its used entries into the index,
 * pool the free slots (cache.h, cache_load).
 */
#include <config.h>

#include <pthread.h>

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

/* The metadata is read by a reader thread, LOAD_CHUNK pages of each
 * copy per request (nearly sequential, in large requests, as the
 * start-up benchmark's limit reads it), into one of two buffers while
 * the caller maps the chunk in the other: the read and the mapping
 * overlap, and memory stays at two chunks.
 */
enum { BUF_FREE, BUF_READY };

struct loader {
  struct hhc_cache *c;
  unsigned char *bufs[2]; /* chunk k in bufs[k % 2]: copy A, then copy B */
  uint32_t chunk_pages;   /* pages of each copy per buffer */
  uint32_t nchunks;
  pthread_mutex_t lock; /* protects the three below */
  pthread_cond_t cond;
  int state[2], err[2]; /* per buffer: BUF_*, the read's error */
  bool stop;            /* the caller quits: read no more */
};

/* Read chunk k into its buffer. */
static int
read_chunk (struct loader *l, uint32_t k)
{
  uint32_t p0 = k * l->chunk_pages;
  uint32_t n = HHC_MIN (l->chunk_pages, l->c->npages - p0);
  unsigned char *a = l->bufs[k % 2];
  unsigned char *b = a + (size_t)l->chunk_pages * CACHE_PAGE;
  int r = dev_pread (l->c->dev, a, (size_t)n * CACHE_PAGE,
                     copy_offset (l->c, p0, 0));

  if (r == 0)
    r = dev_pread (l->c->dev, b, (size_t)n * CACHE_PAGE,
                   copy_offset (l->c, p0, 1));
  return r;
}

static void *
reader_thread (void *arg)
{
  struct loader *l = arg;

  for (uint32_t k = 0; k < l->nchunks; k++)
    {
      int i = k % 2, r;
      hhc_lock (&l->lock);
      while (l->state[i] != BUF_FREE && !l->stop)
        pthread_cond_wait (&l->cond, &l->lock);
      bool stop = l->stop;
      hhc_unlock (&l->lock);
      if (stop)
        break;
      r = read_chunk (l, k);
      hhc_lock (&l->lock);
      l->state[i] = BUF_READY;
      l->err[i] = r;
      pthread_cond_broadcast (&l->cond);
      hhc_unlock (&l->lock);
      if (r)
        break;
    }
  return NULL;
}

/* Wait for chunk k (read here if there is no reader thread). */
static int
take_chunk (struct loader *l, uint32_t k, bool threaded)
{
  int i = k % 2, r;

  if (!threaded)
    return read_chunk (l, k);
  hhc_lock (&l->lock);
  while (l->state[i] != BUF_READY)
    pthread_cond_wait (&l->cond, &l->lock);
  r = l->err[i];
  hhc_unlock (&l->lock);
  return r;
}

static void
give_back_chunk (struct loader *l, uint32_t k)
{
  hhc_lock (&l->lock);
  l->state[k % 2] = BUF_FREE;
  pthread_cond_broadcast (&l->cond);
  hhc_unlock (&l->lock);
}

/* Map the pages of chunk k (read into its buffer). */
static int
map_chunk (struct loader *l, uint32_t k, uint64_t *pseq, uint64_t nblocks)
{
  struct hhc_cache *c = l->c;
  uint32_t p0 = k * l->chunk_pages;
  uint32_t n = HHC_MIN (l->chunk_pages, c->npages - p0);
  const unsigned char *a = l->bufs[k % 2];
  const unsigned char *b = a + (size_t)l->chunk_pages * CACHE_PAGE;
  int r;

  for (uint32_t i = 0; i < n; i++)
    {
      uint32_t p = p0 + i;
      size_t o = (size_t)i * CACHE_PAGE;
      const unsigned char *pg = pick_page (c, p, a + o, b + o);
      if (pg == NULL)
        return EINVAL;
      pseq[p] = HHC_MAX (c->copy_seq[2 * p], c->copy_seq[2 * p + 1]);
      c->commit_seq = HHC_MAX (c->commit_seq, pseq[p]);
      if ((r = load_entries (c, p, pg, pseq, nblocks)) != 0)
        return r;
    }
  return 0;
}

/* Read and map every page: the reader thread reads chunk k + 1 while
 * this maps chunk k (without a thread, when none can be started, it
 * reads each chunk itself).  The thread is always joined.
 */
static int
map_pages (struct loader *l, uint64_t *pseq, uint64_t nblocks)
{
  pthread_t th;
  bool threaded
      = l->nchunks > 1 && pthread_create (&th, NULL, reader_thread, l) == 0;
  int r = 0;

  for (uint32_t k = 0; r == 0 && k < l->nchunks; k++)
    {
      r = take_chunk (l, k, threaded);
      if (r == 0)
        r = map_chunk (l, k, pseq, nblocks);
      if (threaded)
        give_back_chunk (l, k);
    }
  if (threaded)
    {
      hhc_lock (&l->lock);
      l->stop = true;
      pthread_cond_broadcast (&l->cond);
      hhc_unlock (&l->lock);
      pthread_join (th, NULL);
    }
  return r;
}

/* Report used slots, pool the free ones (highest number last, so
 * allocation starts at slot 0).
 */
static void
report_slots (struct hhc_cache *c,
              void (*found) (void *opaque, uint32_t slot, uint64_t lba,
                             enum slot_state st),
              void *opaque)
{
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
}

int
cache_load (struct hhc_cache *c,
            void (*found) (void *opaque, uint32_t slot, uint64_t lba,
                           enum slot_state st),
            void *opaque)
{
  struct loader l = { .c = c, .state = { BUF_FREE, BUF_FREE } };
  uint64_t nblocks = (c->volume_size + c->block_size - 1) / c->block_size;
  size_t buflen;
  HHC_CLEANUP_FREE uint64_t *pseq
      = calloc ((size_t)c->npages, sizeof (uint64_t));
  int r = ENOMEM;

  l.chunk_pages = HHC_MIN (c->npages, (uint32_t)LOAD_CHUNK);
  l.nchunks = (c->npages + l.chunk_pages - 1) / l.chunk_pages;
  buflen = (size_t)2 * l.chunk_pages * CACHE_PAGE;
  l.bufs[0] = hhc_alloc_aligned (buflen);
  l.bufs[1] = l.nchunks > 1 ? hhc_alloc_aligned (buflen) : NULL;
  if (pseq && l.bufs[0] && (l.nchunks == 1 || l.bufs[1]))
    {
      pthread_mutex_init (&l.lock, NULL);
      pthread_cond_init (&l.cond, NULL);
      r = map_pages (&l, pseq, nblocks);
      pthread_cond_destroy (&l.cond);
      pthread_mutex_destroy (&l.lock);
    }
  free (l.bufs[0]);
  free (l.bufs[1]);
  if (r == 0 && c->commit_seq >= CACHE_SEQ_LOAD_MAX)
    {
      hhc_msg (c->msgfn, HHC_MSG_ERROR,
               "%s: a metadata page's commit sequence %" PRIu64
               " is past 2^61 (corrupt): refusing the cache",
               c->dev->name, c->commit_seq);
      r = EINVAL;
    }
  if (r == 0)
    report_slots (c, found, opaque);
  return r;
}
